"""Tests of jaxcore.ipm.wasserstein: exact 1-D W_p, inner cost matrices, WoW_p against POT/SciPy oracles."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from jaxcore.ipm import hierarchical_sample, inner_cost_matrix, outer_ot_cost, wasserstein_1d, wow

ot = pytest.importorskip("ot")


def _pot_cost(x, y, wx=None, wy=None, p=1.0):
    return np.array(
        [
            [ot.wasserstein_1d(x[i], y[j], None if wx is None else wx[i], None if wy is None else wy[j], p=p)
             for j in range(len(y))]
            for i in range(len(x))
        ]
    )


def _pot_wow(x, y, wx=None, wy=None, p=1.0):
    c = _pot_cost(x, y, wx, wy, p)
    return ot.emd2(np.full(len(x), 1 / len(x)), np.full(len(y), 1 / len(y)), c) ** (1 / p)


@pytest.mark.parametrize("p", [1.0, 2.0, 3.5])
def test_wasserstein_1d_weighted_matches_pot(x64, p):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=7), rng.normal(size=11) + 0.3
    wx, wy = rng.random(7), rng.random(11)
    wx, wy = wx / wx.sum(), wy / wy.sum()
    got = wasserstein_1d(x, y, wx, wy, p=p)
    want = ot.wasserstein_1d(x, y, wx, wy, p=p) ** (1 / p)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    if p == 1.0:
        np.testing.assert_allclose(got, scipy.stats.wasserstein_distance(x, y, wx, wy), rtol=1e-10)
    # uniform, equal sizes: the sorted formula
    np.testing.assert_allclose(
        wasserstein_1d(x, y[:7], p=p), np.mean(np.abs(np.sort(x) - np.sort(y[:7])) ** p) ** (1 / p), rtol=1e-10
    )


def test_wasserstein_1d_zero_weight_atoms_are_ignored(x64):
    x = np.array([0.0, 1.0, 100.0])
    wx = np.array([0.5, 0.5, 0.0])
    np.testing.assert_allclose(wasserstein_1d(x, np.array([0.0, 1.0]), wx), 0.0, atol=1e-12)


@pytest.mark.parametrize("p", [1.0, 2.0])
def test_inner_costs_and_wow_match_pot(x64, p):
    rng = np.random.default_rng(1)
    x, y = rng.random((6, 9)), rng.random((6, 9)) ** 2
    np.testing.assert_allclose(inner_cost_matrix(x, y, p), _pot_cost(x, y, p=p), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(wow(x, y, p).value, _pot_wow(x, y, p=p), rtol=1e-9)
    # weighted, different n and m per side: merged quantiles + exact LP
    wx = rng.random((6, 9))
    wx /= wx.sum(1, keepdims=True)
    z = rng.random((4, 5))
    s1 = hierarchical_sample(x, wx)
    np.testing.assert_allclose(inner_cost_matrix(s1, z, p), _pot_cost(x, z, wx, None, p), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(wow(s1, z, p).value, _pot_wow(x, z, wx, None, p), rtol=1e-9)


def test_deterministic_measures_give_inner_distance(x64):
    """Every P_i = P1 and every R_j = P2: WoW_p = W_p(P1, P2)."""
    rng = np.random.default_rng(2)
    p1, p2 = rng.normal(size=8), rng.normal(size=8) * 2
    x, y = np.tile(p1, (5, 1)), np.tile(p2, (7, 1))
    for p in (1.0, 2.0, 3.0):
        np.testing.assert_allclose(wow(x, y, p).value, wasserstein_1d(p1, p2, p=p), rtol=1e-10)


def test_dirac_valued_measures_give_w1_of_atoms(x64):
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=9), rng.normal(size=9) + 1
    np.testing.assert_allclose(wow(a[:, None], b[:, None], 1.0).value, scipy.stats.wasserstein_distance(a, b),
                               rtol=1e-10)
    np.testing.assert_allclose(wow(a[:, None], b[:5, None], 1.0).value, scipy.stats.wasserstein_distance(a, b[:5]),
                               rtol=1e-9)


@pytest.mark.parametrize("c", [-0.7, 0.25])
def test_translation_gives_abs_c(x64, c):
    x = np.random.default_rng(4).random((10, 6))
    for p in (1.0, 2.0):
        np.testing.assert_allclose(wow(x, x + c, p).value, abs(c), rtol=1e-10)


def test_ordering_wow1_le_wowp(x64):
    rng = np.random.default_rng(5)
    for _ in range(5):
        x, y = rng.normal(size=(8, 6)), rng.normal(size=(8, 6)) * 1.5
        w1, w2, w3 = (float(wow(x, y, p).value) for p in (1.0, 2.0, 3.0))
        assert w1 <= w2 + 1e-12 <= w3 + 2e-12


def test_sinkhorn_options_approach_exact(x64):
    rng = np.random.default_rng(6)
    x, y = rng.random((6, 8)), rng.random((6, 8)) * 0.5
    exact = float(wow(x, y, 2.0).value)
    ent = float(wow(x, y, 2.0, outer="sinkhorn", outer_epsilon=1e-3).value)
    assert abs(ent - exact) <= 0.02 * exact
    # 2-D measures: entropic inner cost vs the exact assignment (equal m, uniform weights)
    from scipy.optimize import linear_sum_assignment

    u, v = rng.random((3, 6, 2)), rng.random((4, 6, 2))
    c = inner_cost_matrix(u, v, 2.0, inner="sinkhorn", epsilon=1e-3)
    for i in range(3):
        for j in range(4):
            d = ((u[i][:, None] - v[j][None]) ** 2).sum(-1)
            r, k = linear_sum_assignment(d)
            exact_ij = d[r, k].mean()
            assert abs(float(c[i, j]) - exact_ij) <= 0.05 * exact_ij + 1e-4


def test_outer_exact_unequal_and_float32():
    rng = np.random.default_rng(7)
    c = rng.random((5, 3)).astype(np.float32)
    want = ot.emd2(np.full(5, 0.2), np.full(3, 1 / 3), c.astype(np.float64))
    np.testing.assert_allclose(outer_ot_cost(jnp.asarray(c)), want, rtol=1e-5)


def test_jit_and_vmap_over_pairs():
    rng = np.random.default_rng(8)
    xs = jnp.asarray(rng.random((3, 5, 7)), jnp.float32)
    ys = jnp.asarray(rng.random((3, 5, 7)), jnp.float32)
    batched = jax.jit(jax.vmap(lambda x, y: wow(x, y, 1.0).value))(xs, ys)
    for k in range(3):
        np.testing.assert_allclose(batched[k], _pot_wow(np.asarray(xs[k], np.float64), np.asarray(ys[k], np.float64)),
                                   rtol=1e-5)


def test_validation_errors():
    x = np.zeros((3, 4))
    with pytest.raises(ValueError, match=r"p: expected a number in \[1, inf\), got 0.5"):
        wow(x, x, 0.5)
    with pytest.raises(ValueError, match="inner: expected one of 'exact', 'sinkhorn', got 'bogus'"):
        wow(x, x, inner="bogus")
    with pytest.raises(ValueError, match="outer: expected one of 'exact', 'sinkhorn', got 'bogus'"):
        wow(x, x, outer="bogus")
    with pytest.raises(ValueError, match="sample1, sample2: expected measures in the same dimension"):
        wow(np.zeros((3, 4, 2)), np.zeros((3, 4, 3)), inner="sinkhorn")
    with pytest.raises(ValueError, match="sample1: expected measures on R for inner='exact'"):
        wow(np.zeros((3, 4, 2)), np.zeros((3, 4, 2)))
    with pytest.raises(ValueError, match="sample2: expected the weights of each measure to sum to one"):
        wow(x, _bad_weights())
    with pytest.raises(ValueError, match="outer_epsilon: expected a finite number > 0, got 0.0"):
        wow(x, x, outer="sinkhorn", outer_epsilon=0.0)
    with pytest.raises(ValueError, match="x, y: expected non-empty 1-D arrays"):
        wasserstein_1d(np.zeros((2, 2)), np.zeros(2))


def _bad_weights():
    from jaxcore.ipm import HierarchicalSample

    return HierarchicalSample(jnp.zeros((3, 4)), jnp.full((3, 4), 0.3))


def test_float32_host_sort_path_and_its_gradient():
    """Arrays of >= 4096 elements are sorted on the host on CPU: values, vmap and gradients still exact."""
    rng = np.random.default_rng(9)
    x = jnp.asarray(rng.random((2, 20, 300)), jnp.float32)
    y = jnp.asarray(rng.random((2, 20, 300)) ** 2, jnp.float32)
    costs = jax.jit(jax.vmap(lambda a, b: inner_cost_matrix(a, b, 1.0)))(x, y)
    xs, ys = np.sort(np.asarray(x, np.float64), -1), np.sort(np.asarray(y, np.float64), -1)
    want = np.abs(xs[:, :, None, :] - ys[:, None, :, :]).mean(-1)
    np.testing.assert_allclose(costs, want, rtol=1e-4, atol=1e-6)
    from jaxcore.ipm._sorting import sort_last

    g = jax.grad(lambda v: jnp.sum(sort_last(v)[:, :5] * jnp.arange(5.0)))(x[0])
    g_ref = jax.grad(lambda v: jnp.sum(jnp.sort(v, axis=-1)[:, :5] * jnp.arange(5.0)))(x[0])
    np.testing.assert_allclose(g, g_ref)


def test_host_sort_only_lowered_for_cpu():
    """The NumPy callback appears in the CPU lowering only; CUDA/TPU lowerings use XLA's sort (values and grads)."""
    from jaxcore.ipm._sorting import sort_last

    x = jnp.zeros((20, 300), jnp.float32)  # >= 4096 elements: the host path on CPU
    fwd = jax.jit(sort_last)
    grad = jax.jit(jax.grad(lambda v: jnp.sum(sort_last(v)[:, :5] * jnp.arange(5.0))))
    for fn in (fwd, grad):
        cpu = fn.trace(x).lower(lowering_platforms=("cpu",)).as_text().lower()
        assert "callback" in cpu
        for plat in ("cuda", "tpu"):
            txt = fn.trace(x).lower(lowering_platforms=(plat,)).as_text().lower()
            assert "callback" not in txt and "sort" in txt, plat
    # small arrays stay on XLA's sort everywhere
    assert "callback" not in jax.jit(sort_last).trace(x[:2, :10]).lower(lowering_platforms=("cpu",)).as_text().lower()


def test_host_sort_gradient_under_vmap_matches_finite_differences():
    from jaxcore.ipm._sorting import sort_last

    rng = np.random.default_rng(10)
    x = jnp.asarray(rng.random((2, 16, 300)), jnp.float32)
    wts = jnp.asarray(rng.random(300), jnp.float32)
    loss = lambda v: jnp.sum(sort_last(v) * wts)  # noqa: E731
    g = jax.jit(jax.vmap(jax.grad(loss)))(x)
    # d/dx_ij of sum_k wts_k x_(k) = wts[rank of x_ij in its row]
    ranks = np.argsort(np.argsort(np.asarray(x), -1), -1)
    np.testing.assert_allclose(g, np.asarray(wts)[ranks], rtol=0, atol=0)
    # a central difference in one coordinate, with a step below the gap to its neighbours (the sort is
    # then locally linear); the sorted outputs are differenced in float64 to avoid float32 cancellation
    row = np.asarray(x[0, 3], np.float64)
    h = np.min(np.abs(np.delete(row, 7) - row[7])) / 4
    e = jnp.zeros_like(x[0]).at[3, 7].set(h)
    up, down = (np.asarray(jax.jit(sort_last)(x[0] + s * e), np.float64) for s in (1.0, -1.0))
    step = float(e[3, 7])  # the step as stored in float32
    fd = np.sum((up - down) * np.asarray(wts, np.float64)) / (2 * step)
    np.testing.assert_allclose(fd, g[0, 3, 7], rtol=1e-3)


def test_wow_result_carries_the_inner_costs(x64):
    rng = np.random.default_rng(11)
    x, y = rng.random((6, 9)), rng.random((6, 9)) ** 2  # the shapes of test_inner_costs_and_wow_match_pot
    res = wow(x, y, 2.0)
    np.testing.assert_allclose(res.inner_costs, inner_cost_matrix(x, y, 2.0), rtol=1e-12)
    np.testing.assert_allclose(res.value, _pot_wow(x, y, p=2.0), rtol=1e-9)
    np.testing.assert_allclose(res.value ** 2, outer_ot_cost(res.inner_costs), rtol=1e-12)


def test_second_call_with_same_shapes_does_not_recompile():
    from jaxcore.ipm import wasserstein as wasserstein_module

    # the doctests' shapes, so that the compilations are shared with them
    x = jnp.array([[0.0, 1.0], [2.0, 3.0]])
    programs = {
        "wow": (wasserstein_module._wow_jit, lambda: wow(x, x + 0.5).value),
        "inner_cost_matrix": (wasserstein_module._inner_cost_jit, lambda: inner_cost_matrix(x, x[:1])),
        "outer_ot_cost": (wasserstein_module._outer_jit, lambda: outer_ot_cost(x)),
        "wasserstein_1d": (wasserstein_module._w1d_jit, lambda: wasserstein_1d(x[0], x[1] - 1.5)),
    }
    for name, (program, call) in programs.items():
        jax.block_until_ready(call())
        size = program._cache_size()
        jax.block_until_ready(call())
        assert program._cache_size() == size, name
