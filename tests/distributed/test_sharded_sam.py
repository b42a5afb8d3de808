"""sam's batch and micro-batches on 4 faked devices.

What shards: the batch ``[B, ...]`` of a step. Two ways: ``sam.step`` under ``jax.jit`` with a
``NamedSharding`` batch (XLA partitions the vmapped micro-batches: each device computes its
examples' gradients, summed by an all-reduce of parameter size, never a gather of the batch), and the
explicit ``shard_map`` form (``axis_name=``), where each device perturbs on its own shard
(``sync_perturbation=False``: m-sharpness with one micro-batch per device, the same step as
``num_micro_batches=4`` on one device) or on the synchronised gradient. Replicated: parameters and
optimiser state.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import PartitionSpec as P

from jaxcore import sam

from . import _sharding as S

B = 32


def _loss(params, state, batch):
    pred = jnp.tanh(batch["x"] @ params["w"]) @ params["v"]
    return jnp.mean((pred - batch["y"]) ** 2), state


def _problem():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(B, 6)).astype(np.float32)
    params = {"w": jnp.asarray(rng.normal(size=(6, 5)), jnp.float32), "v": jnp.asarray(rng.normal(size=(5, 1)),
                                                                                        jnp.float32)}
    return params, {"x": x, "y": (x[:, :1] ** 2).astype(np.float32)}


def test_step_shards_the_batch_under_jit():
    params, batch = _problem()
    opt = optax.sgd(0.1)
    st = sam.init(params, opt)

    def one_step(p, s, b):
        return sam.step(_loss, p, s, b, optimizer=opt, perturbation=sam.SAM(0.05), num_micro_batches=4).params

    args, batched = (params, st, batch), (False, False, True)
    c1, a1 = S.compile_on(one_step, args, S.mesh(1), B, batched)
    c4, a4 = S.compile_on(one_step, args, S.mesh(4), B, batched)
    S.assert_no_batch_gather(c4.as_text(), B)
    S.assert_memory_shrinks(c1, c4, max_ratio=0.7)
    for a, b in zip(jax.tree.leaves(c4(*a4)), jax.tree.leaves(c1(*a1)), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_shard_map_step_with_per_device_perturbations_is_m_sharpness():
    params, batch = _problem()
    opt, mesh = optax.sgd(0.1), S.mesh(4)
    tr = sam.sharpness_aware(_loss, opt, sam.SAM(0.05), axis_name=S.AXIS, sync_perturbation=False)
    st = tr.init(params)
    sharded = jax.jit(jax.shard_map(lambda p, s, b: tr.step(p, s, b).params, mesh=mesh,
                                    in_specs=(P(), P(), P(S.AXIS)), out_specs=P()))
    got = sharded(params, st, S.place(batch, mesh, B))
    micro = sam.step(_loss, params, st, batch, optimizer=opt, perturbation=sam.SAM(0.05), num_micro_batches=4)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(micro.params), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    hlo = sharded.lower(params, st, S.place(batch, mesh, B)).compile().as_text()
    S.assert_no_batch_gather(hlo, B)
