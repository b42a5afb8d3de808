"""Meshes of Explicit axes (``jax.make_mesh``'s default since jax 0.7) are refused with a clear error.

jaxcore's kernels are written for Auto axes; under Explicit axes (sharding in types) JAX failed deep
inside (issue 48 item 21: ``TypeError: Argument 'scan' ... not a valid JAX type``, ``ShardingTypeError``).
The entry points refuse arrays on such a mesh, naming the argument and how to build an Auto mesh; the
same call on an Auto mesh gives the unsharded answer.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

from jaxcore import causal, lm, rl, watermark
from jaxcore._util import check_auto_mesh
from jaxcore._util.minibatch import batch_mesh

MATCH = r"expected (arrays on )?a mesh of Auto axes: jax.make_mesh\(shape, names, axis_types="


def _meshes():
    if len(jax.devices()) < 4:
        pytest.skip("4 (fake) devices needed")
    explicit = jax.make_mesh((4,), ("batch",), devices=jax.devices()[:4])
    auto = jax.make_mesh((4,), ("batch",), axis_types=(AxisType.Auto,), devices=jax.devices()[:4])
    assert explicit.axis_types == (AxisType.Explicit,)
    return explicit, auto


def _on(mesh, x):
    return jax.device_put(x, NamedSharding(mesh, P("batch")))


def test_explicit_meshes_are_refused_and_auto_meshes_give_the_unsharded_answer():
    explicit, auto = _meshes()
    model = lm.random_llama(jax.random.key(0))
    tokens = jax.random.randint(jax.random.key(1), (4, 6), 1, model.config.vocab_size)
    want = lm.perplexity(model, tokens)
    np.testing.assert_allclose(lm.perplexity(model, _on(auto, tokens)), want, rtol=1e-5)
    with pytest.raises(TypeError, match="^tokens: " + MATCH):
        lm.perplexity(model, _on(explicit, tokens))
    with pytest.raises(TypeError, match="^tokens: " + MATCH):  # under jit too (checked while tracing)
        jax.jit(lambda t: lm.perplexity(model, t))(_on(explicit, tokens))

    wm = watermark.DiPmark(64, key=jax.random.key(0), context_size=1)
    np.testing.assert_allclose(watermark.detect(wm, _on(auto, tokens)).z_score, watermark.detect(wm, tokens).z_score,
                               rtol=1e-5)
    with pytest.raises(TypeError, match="^tokens: " + MATCH):
        watermark.detect(wm, _on(explicit, tokens))

    parents = jnp.asarray(causal.enumerate_dags(3).parents[:4], jnp.int32)
    x = np.random.default_rng(0).normal(size=(20, 3)).astype(np.float32)
    table = causal.bge_local_scores(x) + causal.erdos_renyi_prior_table(3, 0.5)
    np.testing.assert_allclose(causal.dag_log_scores(table, _on(auto, parents)), causal.dag_log_scores(table, parents),
                               rtol=1e-5)
    with pytest.raises(TypeError, match="^parents: " + MATCH):
        causal.dag_log_scores(table, _on(explicit, parents))

    lock = rl.make_lock(jax.random.key(0), horizon=3, num_actions=4)
    keys = jax.random.split(jax.random.key(1), 4)
    reset = jax.vmap(rl.reset, in_axes=(0, None))
    np.testing.assert_allclose(reset(_on(auto, keys), lock)[0], reset(keys, lock)[0], rtol=1e-6)
    with pytest.raises(TypeError, match="^key: " + MATCH):
        reset(_on(explicit, keys), lock)

    with pytest.raises(TypeError, match="^mesh: " + MATCH):
        batch_mesh(explicit, None, 8, 4, data_name="pairs")
    with pytest.raises(TypeError, match="^pairs: " + MATCH):
        batch_mesh(None, _on(explicit, jnp.ones((8, 2))), 8, 4, data_name="pairs")
    assert batch_mesh(auto, None, 8, 4, data_name="pairs").num_shards == 4


def test_check_auto_mesh_names_the_explicit_axes():
    explicit, auto = _meshes()
    check_auto_mesh(auto, "mesh")
    check_auto_mesh({"a": _on(auto, jnp.ones(4)), "b": 3}, "tree")
    with pytest.raises(TypeError, match=r"got a mesh with Explicit axes \('batch',\)$"):
        check_auto_mesh(explicit, "mesh")
    with pytest.raises(TypeError, match=r"^tree: .*got an array sharded over Explicit axes \('batch',\)$"):
        check_auto_mesh({"a": jnp.ones(2), "b": _on(explicit, jnp.ones(4))}, "tree")


def test_inverse_restore_batch_runs_on_explicit_and_auto_meshes_with_the_unsharded_answer():
    # restore_batch is one of the kernels that do work under Explicit axes (its programs state their shardings):
    # a mesh of either kind, or images placed on one, give the one-device answer; no refusal.
    from jaxcore import inverse

    explicit, auto = _meshes()
    ys = jax.random.uniform(jax.random.key(0), (4, 8, 8, 1))
    keys = jax.random.split(jax.random.key(1), 2)
    run = lambda ys, **kw: inverse.restore_batch(  # noqa: E731
        keys, ys, inverse.Identity(), inverse.GaussianMMSEDenoiser(0.5, 0.01),
        inverse.constant_schedule(3, sigma=0.05, step_size=1e-3), 0.05, method="snore", **kw).x
    want = run(ys)
    devices = jax.devices()[:4]
    for mesh in (jax.make_mesh((4,), ("images",), devices=devices),
                 jax.make_mesh((4,), ("images",), axis_types=(AxisType.Auto,), devices=devices)):
        np.testing.assert_allclose(run(ys, mesh=mesh), want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(run(_on(explicit, ys)), want, rtol=1e-6, atol=1e-7)
