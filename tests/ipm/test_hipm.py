"""Tests of jaxcore.ipm.hipm: features, d_lip oracles, ordering, brute force, validation."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxcore.ipm import (
    dirichlet_process_stick_breaking,
    dlip,
    hierarchical_sample,
    hipm_features,
    hipm_objective,
    lower_bound,
    uniform_base,
    w1_empirical,
    wow,
)


def _integrals(f_grid, grid, atoms, weights):
    """int f dP_i by direct interpolation of the piecewise-linear f (independent of the features)."""
    return np.array([np.sum(w * np.interp(x, grid, f_grid)) for x, w in zip(atoms, weights)])


def _objective_direct(f_grid, grid, x, wx, y, wy):
    return scipy.stats.wasserstein_distance(_integrals(f_grid, grid, x, wx), _integrals(f_grid, grid, y, wy))


def test_features_match_direct_sum(x64):
    rng = np.random.default_rng(0)
    atoms = rng.uniform(-1, 2, (4, 9))
    w = rng.random((4, 9))
    w /= w.sum(1, keepdims=True)
    a, b, M = -1.0, 2.0, 7
    A = np.asarray(hipm_features(hierarchical_sample(atoms, w), interval=(a, b), num_grid=M))
    t = np.linspace(a, b, M + 1)
    h = (b - a) / M
    direct = np.array([[np.sum(w[i] * np.clip(atoms[i] - t[k], 0, h)) for k in range(M)] for i in range(4)])
    np.testing.assert_allclose(A, direct, atol=1e-12)
    np.testing.assert_allclose(A.sum(1), (w * atoms).sum(1) - a, atol=1e-12)


@pytest.mark.parametrize("n1, n2", [(7, 7), (5, 8)])
def test_w1_empirical_matches_scipy(x64, n1, n2):
    rng = np.random.default_rng(1)
    u, v = rng.normal(size=n1), rng.normal(size=n2)
    np.testing.assert_allclose(w1_empirical(jnp.asarray(u), jnp.asarray(v)),
                               scipy.stats.wasserstein_distance(u, v), rtol=1e-10)


def test_deterministic_measures_give_w1(x64):
    """Every P_i = P1, every R_j = P2 (atoms on the grid): d_lip = W1(P1, P2)."""
    rng = np.random.default_rng(2)
    M = 20
    p1 = rng.integers(0, M + 1, 6) / M
    p2 = rng.integers(0, M + 1, 9) / M
    w2 = rng.random(9)
    w2 /= w2.sum()
    s1 = hierarchical_sample(np.tile(p1, (5, 1)))
    s2 = hierarchical_sample(np.tile(p2, (3, 1)), np.tile(w2, (3, 1)))
    res = dlip(s1, s2, interval=(0.0, 1.0), num_grid=M)
    want = scipy.stats.wasserstein_distance(p1, p2, None, w2)
    np.testing.assert_allclose(res.value, want, rtol=1e-9, atol=1e-12)
    assert float(wow(s1, s2, 1.0).value) == pytest.approx(want, rel=1e-9)


def test_dirac_valued_measures_give_w1_of_atom_laws(x64):
    rng = np.random.default_rng(3)
    a, b = rng.random(10), rng.random(12) ** 2
    res = dlip(a[:, None], b[:, None], interval=(0.0, 1.0), num_grid=30)
    want = scipy.stats.wasserstein_distance(a, b)
    np.testing.assert_allclose(res.value, want, rtol=1e-9)
    np.testing.assert_allclose(lower_bound(a[:, None], b[:, None]), want, rtol=1e-9)


@pytest.mark.parametrize("c", [0.3, -0.15])
def test_translation_gives_abs_c(x64, c):
    x = np.random.default_rng(4).uniform(0.2, 0.5, (8, 6))
    res = dlip(x, x + c, interval=(-0.5, 1.0), num_grid=40)
    np.testing.assert_allclose(res.value, abs(c), rtol=1e-9)


def test_ordering_on_random_inputs(x64):
    """W1(laws of means) <= d_lip <= WoW_1 <= WoW_2 on random hierarchical samples."""
    rng = np.random.default_rng(5)
    for trial in range(4):
        n = 12
        x = rng.beta(2, 5, (n, 10))
        y = rng.beta(2 + trial, 2, (n, 10))
        lb = float(lower_bound(x, y))
        d = float(dlip(x, y, interval=(0.0, 1.0), num_grid=50, num_starts=4, key=jax.random.key(trial)).value)
        w1, w2 = float(wow(x, y, 1.0).value), float(wow(x, y, 2.0).value)
        assert lb <= d + 1e-12
        assert d <= w1 + 1e-12
        assert w1 <= w2 + 1e-12


def test_value_is_attained_by_returned_f_and_f_is_admissible(x64):
    rng = np.random.default_rng(6)
    x, y = rng.random((9, 7)), rng.random((6, 5)) ** 3
    wx = rng.random((9, 7))
    wx /= wx.sum(1, keepdims=True)
    res = dlip(hierarchical_sample(x, wx), y, interval=(0.0, 1.0), num_grid=16, num_starts=3, key=jax.random.key(1))
    f, grid = np.asarray(res.f), np.asarray(res.grid)
    assert f[0] == 0.0 and np.all(np.abs(np.diff(f)) <= (grid[1] - grid[0]) * (1 + 1e-12))
    direct = _objective_direct(f, grid, x, wx, y, np.full((6, 5), 0.2))
    np.testing.assert_allclose(res.value, direct, rtol=1e-9)
    assert res.start_values.shape == (3,) and res.num_steps.shape == (3,)
    assert float(res.value) == pytest.approx(float(jnp.max(res.start_values)))


def test_agrees_with_brute_force_grid_search(x64):
    """M = 3 slopes: exhaustive search over a 0.05 grid of [-1, 1]^3 (vertices included)."""
    rng = np.random.default_rng(7)
    M = 3
    grid = np.linspace(0.0, 1.0, M + 1)
    vals = np.linspace(-1, 1, 41)
    slopes = np.array(list(itertools.product(vals, repeat=M)))  # [41^3, M]
    # basis functions phi_k (slope 1 on cell k, 0 elsewhere) integrated by np.interp
    basis = [np.concatenate([[0.0], np.cumsum(np.eye(M)[k]) / M]) for k in range(M)]
    for trial in range(2):
        x, y = rng.random((5, 4)), rng.random((5, 4)) ** (2 + trial)
        w = np.full((5, 4), 0.25)
        i1 = np.stack([_integrals(bk, grid, x, w) for bk in basis], 1)  # [5, M]
        i2 = np.stack([_integrals(bk, grid, y, w) for bk in basis], 1)
        u, v = np.sort(i1 @ slopes.T, axis=0), np.sort(i2 @ slopes.T, axis=0)
        best = float(np.max(np.mean(np.abs(u - v), axis=0)))
        res = dlip(x, y, interval=(0.0, 1.0), num_grid=M, num_starts=12, key=jax.random.key(trial))
        # the ascent must reach the best grid point (up to 1e-9) and cannot beat it by more
        # than the objective's variation over one grid cell: |J(s) - J(s')| <= 2 (b - a) |s - s'|_inf
        assert float(res.value) >= best - 1e-9
        assert float(res.value) <= best + 2 * 0.025 + 1e-12


@pytest.mark.slow
def test_equal_laws_rate_is_root_n():
    """Same law on both sides: E d_lip and the lower bound decay like n^{-1/2} (ratio 4 from n=16 to 256)."""
    base = uniform_base()
    means = {}
    for n in (16, 256):
        d_vals, lb_vals = [], []
        for r in range(6):
            k1, k2 = jax.random.split(jax.random.key(100 * n + r))
            s1 = dirichlet_process_stick_breaking(k1, base, 1.0, n, 50)
            s2 = dirichlet_process_stick_breaking(k2, base, 1.0, n, 50)
            d_vals.append(float(dlip(s1, s2, interval=(0.0, 1.0), num_grid=25, num_starts=2, max_steps=50).value))
            lb_vals.append(float(lower_bound(s1, s2)))
        means[n] = (np.mean(d_vals), np.mean(lb_vals))
    ratio_d = means[16][0] / means[256][0]
    ratio_lb = means[16][1] / means[256][1]
    assert 2.0 < ratio_d < 8.0, means
    assert 2.0 < ratio_lb < 8.0, means


def test_jit_and_vmap_over_pairs():
    rng = np.random.default_rng(8)
    xs = jnp.asarray(rng.random((3, 6, 5)), jnp.float32)
    ys = jnp.asarray(rng.random((3, 6, 5)) ** 2, jnp.float32)
    f = jax.jit(jax.vmap(lambda x, y: dlip(x, y, interval=(0.0, 1.0), num_grid=10, num_starts=2).value))
    batched = f(xs, ys)
    for k in range(3):
        np.testing.assert_allclose(batched[k], dlip(xs[k], ys[k], interval=(0.0, 1.0), num_grid=10, num_starts=2).value,
                                   rtol=1e-5)


def test_validation_errors():
    x = np.full((3, 4), 0.5)
    with pytest.raises(ValueError, match="lie in the interval"):
        dlip(x + 1.0, x, interval=(0.0, 1.0))
    with pytest.raises(ValueError, match="a < b"):
        dlip(x, x, interval=(1.0, 0.0))
    with pytest.raises(ValueError, match="d <= 1"):
        dlip(np.zeros((3, 4, 2)), np.zeros((3, 4, 2)), interval=(-1.0, 1.0))
    with pytest.raises(ValueError, match="num_grid: expected an int >= 1, got 0"):
        dlip(x, x, interval=(0.0, 1.0), num_grid=0)
    with pytest.raises(TypeError, match="num_starts: expected an int"):
        dlip(x, x, interval=(0.0, 1.0), num_starts=2.5)
    with pytest.raises(ValueError, match=r"starts: expected shape \[K, num_grid\]"):
        dlip(x, x, interval=(0.0, 1.0), num_grid=5, starts=np.ones((2, 4)))
    with pytest.raises(ValueError, match="weights of shape"):
        hierarchical_sample(x, np.ones((3, 5)))
    with pytest.raises(ValueError, match="max_steps: expected an int >= 0"):
        dlip(x, x, interval=(0.0, 1.0), max_steps=-1)
    with pytest.raises(TypeError, match="interval: expected a pair"):
        dlip(x, x, interval=("zero", 1.0))


def test_second_call_with_same_shapes_does_not_recompile():
    from jaxcore.ipm import hipm as hipm_module

    # the shapes of the doctests, so that the compilations are shared with them
    x = jnp.array([[0.1, 0.2], [0.3, 0.4]])
    f1, f2 = jnp.array([[0.5, 0.0]]), jnp.array([[0.25, 0.25]])
    programs = {
        "dlip": (hipm_module._dlip_jit, lambda: dlip(x, x + 0.25, interval=(0.0, 1.0), num_grid=20)),
        "lower_bound": (hipm_module._lower_bound_jit, lambda: lower_bound(f1, f2)),
        "hipm_features": (hipm_module._features_jit, lambda: hipm_features(f1, interval=(0.0, 1.0), num_grid=2)),
        "w1_empirical": (hipm_module._w1_jit, lambda: w1_empirical(x[0], jnp.array([0.5, 1.5, 2.5]))),
        "hipm_objective": (hipm_module._objective_jit, lambda: hipm_objective(jnp.array([1.0, -1.0]), f1, f2)),
    }
    for name, (program, call) in programs.items():
        jax.block_until_ready(call())
        size = program._cache_size()
        jax.block_until_ready(call())
        assert program._cache_size() == size, name
    # another interval and other data of the same shapes reuse the compiled d_lip
    size = hipm_module._dlip_jit._cache_size()
    dlip(x * 0.5, x, interval=(-1.0, 2.0), num_grid=20)
    assert hipm_module._dlip_jit._cache_size() == size


def test_public_helpers_match_oracles(x64):
    rng = np.random.default_rng(10)
    u, v = rng.normal(size=(3, 7)), rng.normal(size=(3, 7))
    np.testing.assert_allclose(w1_empirical(u, v), [scipy.stats.wasserstein_distance(a, b) for a, b in zip(u, v)],
                               rtol=1e-10)
    x, y = rng.random((5, 4)), rng.random((6, 4))
    f1 = hipm_features(x, interval=(0.0, 1.0), num_grid=6)
    f2 = hipm_features(y, interval=(0.0, 1.0), num_grid=6)
    s = np.linspace(-1, 1, 6)
    grid = np.linspace(0.0, 1.0, 7)
    f_grid = np.concatenate([[0.0], np.cumsum(s) / 6])
    want = _objective_direct(f_grid, grid, x, np.full((5, 4), 0.25), y, np.full((6, 4), 0.25))
    np.testing.assert_allclose(hipm_objective(s, f1, f2), want, rtol=1e-10)
    with pytest.raises(ValueError, match="slopes, features1, features2: expected shapes"):
        hipm_objective(s[:5], f1, f2)
    with pytest.raises(ValueError, match="u, v: expected the same leading"):
        w1_empirical(u, v[:2])
    with pytest.raises(TypeError, match=r"key: expected a jax.random.key\(...\) array, got int"):
        dlip(x, y, interval=(0.0, 1.0), key=3)
    with pytest.raises(ValueError, match="tol: expected a finite number >= 0"):
        dlip(x, y, interval=(0.0, 1.0), tol=-1.0)


_unit = st.floats(0.0, 1.0, allow_nan=False, width=64)
_sample = st.lists(st.lists(_unit, min_size=3, max_size=3), min_size=4, max_size=4)


@settings(max_examples=12)
@given(_sample, _sample)
def test_property_symmetry_zero_and_ordering(x, y):
    """d_lip and WoW_1 are symmetric and vanish on identical samples; lower bound <= d_lip <= WoW_1."""
    with jax.enable_x64(True):
        x, y = np.asarray(x), np.asarray(y)
        kw = dict(interval=(0.0, 1.0), num_grid=10, num_starts=2, max_steps=100)
        d_xy, d_yx = float(dlip(x, y, **kw).value), float(dlip(y, x, **kw).value)
        w_xy, w_yx = float(wow(x, y).value), float(wow(y, x).value)
        assert d_xy == pytest.approx(d_yx, rel=1e-9, abs=1e-12)
        assert w_xy == pytest.approx(w_yx, rel=1e-9, abs=1e-12)
        assert float(dlip(x, x, **kw).value) == 0.0 and float(wow(x, x).value) == 0.0
        assert float(lower_bound(x, y)) <= d_xy + 1e-12 <= w_xy + 2e-12
