"""bnp's seeds and Monte Carlo samples on 4 faked devices.

What shards: seeds (one ELBO, one training run per key: ``[seeds]`` keys split over the devices, the
results carry the same split, e.g. ``run_continual``'s ``[seeds, ...]`` accuracies and masks) and the
``S`` Monte Carlo samples of an ELBO when their draws are given (``elbo_from_noise``: each device
computes its samples' likelihoods; their mean is a scalar all-reduce). Replicated: the network's
variational parameters, the prior, the data. ``elbo(key, ...)`` draws its samples from one key inside
the program: there the samples do not shard (the result is a scalar); shard seeds, or pass the draws.
"""

from types import SimpleNamespace

import jax
import numpy as np
import pytest

from jaxcore import bnp

from . import _sharding as S


def _problem(n=32, d=6):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, d)).astype(np.float32)
    return bnp.AdaptiveMLP(d, 12, 1, 1, 2, key=jax.random.key(0)), x, (x[:, 0] > 0).astype(np.int32)


@pytest.mark.slow  # 30 s (bnp) / 23 s (graphs) under load: beyond the default run's share
def test_elbo_shards_seeds():
    model, x, y = _problem()
    keys = jax.random.split(jax.random.key(1), 8)
    f = lambda ks, m, p, x, y: jax.vmap(lambda k: m.elbo(k, p, x, y, 0, 32, num_samples=2))(ks)  # noqa: E731
    run = S.check_sharded(f, (keys, model, model.init_prior(), x, y), 8, (True, False, False, False, False),
                          select=lambda out: out[0], max_memory_ratio=0.5, collectives_allowed=False, rtol=1e-5)
    assert len(np.unique(np.asarray(run.many[0]))) == 8  # eight different draws


@pytest.mark.slow
def test_elbo_from_noise_shards_monte_carlo_samples():
    model, x, y = _problem()
    noise = model.sample_noise(jax.random.key(2), 8)  # S = 8 draws, each leaf [8, ...]
    f = lambda n, m, p, x, y: m.elbo_from_noise(p, n, x, y, 0, 32)  # noqa: E731
    args, batched = (noise, model, model.init_prior(), x, y), (True, False, False, False, False)
    c1, a1 = S.compile_on(f, args, S.mesh(1), 8, batched)
    c4, a4 = S.compile_on(f, args, S.mesh(4), 8, batched)
    S.assert_no_batch_gather(c4.as_text(), 8)
    S.assert_no_collectives(c4.as_text(), allow_scalar_reductions=True)  # only the means over samples
    S.assert_memory_shrinks(c1, c4, max_ratio=0.6)
    for a, b in zip(jax.tree.leaves(c4(*a4)), jax.tree.leaves(c1(*a1)), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5)


@pytest.mark.slow
def test_run_continual_keeps_the_seed_split():
    """Its tasks are a Python loop of compiled calls: sharded keys give sharded [seeds, ...] results."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 64, 6)).astype(np.float32)  # one task: one compiled training call
    y = (x[:, :, 0] > 0).astype(np.int32)
    tasks = SimpleNamespace(x_train=x[:, :32], y_train=y[:, :32], n_train=np.array([32], np.int32),
                            x_test=x[:, 32:], y_test=y[:, 32:], n_test=np.array([32], np.int32))
    model = bnp.AdaptiveMLP(6, 8, 1, 1, 2, key=jax.random.key(3))
    cfg = bnp.ContinualConfig(num_steps=5, batch_size=16, num_samples=1)
    keys = jax.random.split(jax.random.key(0), 4)
    one = bnp.run_continual(keys, "adaptive", model, tasks, cfg)
    many = bnp.run_continual(S.place(keys, S.mesh(4), 4), "adaptive", model, tasks, cfg)
    S.assert_batch_sharded((many.accuracy, many.masks), 4, 4)
    for a, b in zip(jax.tree.leaves(many), jax.tree.leaves(one), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
