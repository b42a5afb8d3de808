"""ipm's batch axes on 4 faked devices: WoW's inner costs (measures), relabellings of the permutation test.

What shards: the rows of ``inner_cost_matrix`` (the first sample's measures; the second sample is
replicated, each device computing its rows of W_p^p), and the relabellings of ``permutation_test``
(they have no batch input: they are drawn from one key inside the program, so they shard when the
caller asks for a sharded ``null_statistics`` through ``jax.jit(..., out_shardings=...)``; each device
then draws and scores only its relabellings; the observed statistic and the p-value are replicated,
the p-value's count a scalar all-reduce).

The host callback: with ``statistic="wow", outer="exact"``, the exact outer assignment (SciPy / POT)
is a ``jax.pure_callback``, which runs on the host for one device: every relabelling's solve runs
there, one after the other, whatever the sharding (measured: 17 calls from one thread for 16
relabellings + the observed split, per-device memory unchanged). The null statistics still come back
split over the devices and equal to one device's; for a statistic that shards, use ``outer="sinkhorn"``.
"""

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

from jaxcore import ipm

from . import _sharding as S

N1, N2, M = 24, 20, 10  # the sharded axis is N1 = 24 (no other dimension is a multiple of it)


def _samples():
    rng = np.random.default_rng(0)
    return rng.uniform(size=(N1, M)).astype(np.float32), rng.uniform(size=(N2, M)).astype(np.float32)


@S.xfail_while_checks_gather
def test_wow_inner_costs_shard_over_measures():
    x, y = _samples()
    run = S.check_sharded(lambda a, b: ipm.inner_cost_matrix(a, b), (x, y), N1, (True, False), max_memory_ratio=0.7)
    brute = np.abs(np.sort(x, 1)[:, None, :] - np.sort(y, 1)[None, :, :]).mean(-1)  # equal m, uniform weights
    np.testing.assert_allclose(np.asarray(run.many), brute, rtol=1e-5, atol=1e-6)


def _permutation_programs(statistic, outer, num_permutations=16):
    x, y = _samples()
    mesh, key = S.mesh(4), jax.random.key(0)

    def fn(k, a, b):
        return ipm.permutation_test(k, a, b, statistic=statistic, num_permutations=num_permutations, outer=outer)

    whole = NamedSharding(mesh, PartitionSpec())
    out = ipm.TwoSampleResult(whole, whole, NamedSharding(mesh, PartitionSpec(S.AXIS)))
    c4 = jax.jit(fn, out_shardings=out).lower(key, x, y).compile()
    c1 = jax.jit(fn).lower(key, x, y).compile()
    return c1(key, x, y), c4(key, x, y), c1, c4


@pytest.mark.slow
@pytest.mark.parametrize("statistic, outer", [
    pytest.param("lower_bound", "exact", marks=S.xfail_while_checks_gather()),  # the replicated samples'
    ("wow", "sinkhorn"),  # checks route them through one device, and the memory saved falls to 0.64
])
def test_permutation_test_shards_relabellings(statistic, outer):
    one, many, c1, c4 = _permutation_programs(statistic, outer)
    S.assert_batch_sharded(many.null_statistics, 16, 4)
    S.assert_no_batch_gather(c4.as_text(), 16)
    S.assert_memory_shrinks(c1, c4, max_ratio=0.6)
    np.testing.assert_allclose(np.asarray(many.null_statistics), np.asarray(one.null_statistics), rtol=1e-4)
    assert float(many.p_value) == float(one.p_value)


@pytest.mark.slow
def test_permutation_test_exact_outer_callback_under_sharding():
    """The exact outer solve is a host callback: the sharded program gives one device's statistics,
    its null statistics split over the devices (the solves themselves run on one device's host thread)."""
    one, many, _, c4 = _permutation_programs("wow", "exact")
    assert "callback" in c4.as_text()
    S.assert_batch_sharded(many.null_statistics, 16, 4)
    np.testing.assert_allclose(np.asarray(many.null_statistics), np.asarray(one.null_statistics), rtol=1e-5)
    assert float(many.p_value) == float(one.p_value)
