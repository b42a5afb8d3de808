"""Regression tests of issue 15 ("Hardening") for jaxcore.ipm: each reproducer and its class."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.ipm import (
    dirichlet_process_approximation_bounds,
    dirichlet_process_finite,
    dirichlet_process_stick_breaking,
    dirichlet_process_urn,
    dlip,
    from_groups,
    hierarchical_gaussian,
    hierarchical_sample,
    hipm_objective,
    inner_cost_matrix,
    lower_bound,
    outer_ot_cost,
    permutation_test,
    uniform_base,
    uniform_mixture_base,
    w1_empirical,
    wasserstein_1d,
    wow,
)

KEY = jax.random.key(0)
BASE = uniform_base()
GENS = [dirichlet_process_urn, dirichlet_process_finite, dirichlet_process_stick_breaking]
X2 = jnp.array([0.0, 1.0])


# --- weights: non-negative, finite, summing to one (then normalised explicitly) --------------------------------


def test_wasserstein_1d_negative_weights_refused():
    """Reproducer: wasserstein_1d with negative weights ran (0.75)."""
    with pytest.raises(ValueError, match="x_weights: expected finite non-negative weights, got -0.5"):
        wasserstein_1d(X2, jnp.array([0.5]), jnp.array([1.5, -0.5]))
    with pytest.raises(ValueError, match="y_weights: expected finite non-negative weights, got nan"):
        wasserstein_1d(X2, X2, None, jnp.array([jnp.nan, 1.0]))


def test_wasserstein_1d_weights_sum_and_shape():
    with pytest.raises(ValueError, match="x_weights: expected weights summing to one"):
        wasserstein_1d(X2, X2, jnp.array([0.2, 0.2]))
    with pytest.raises(ValueError, match="y_weights: expected weights shaped like their atoms"):
        wasserstein_1d(X2, X2, None, jnp.array([1.0]))
    with pytest.raises(TypeError, match="x_weights: expected weights"):
        wasserstein_1d(X2, X2, "ab")


def test_wasserstein_1d_weights_under_jit_raise_at_run_time():
    f = jax.jit(lambda w: wasserstein_1d(X2, jnp.array([0.5]), w))
    assert float(f(jnp.array([0.5, 0.5]))) == pytest.approx(0.5)
    with pytest.raises(Exception, match="x_weights: expected finite non-negative weights"):
        jax.block_until_ready(f(jnp.array([1.5, -0.5])))
    with pytest.raises(Exception, match="x_weights: expected weights summing to one"):
        jax.block_until_ready(f(jnp.array([0.7, 0.7])))


def test_hierarchical_sample_traced_nan_weights_raise():
    f = jax.jit(lambda w: hierarchical_sample(jnp.zeros((1, 2)), w).weights)
    with pytest.raises(Exception, match="finite non-negative weights"):
        jax.block_until_ready(f(jnp.array([[jnp.nan, 1.0]])))


# --- NaN / inf fail every positivity check -------------------------------------------------------------------


@pytest.mark.parametrize("arg", ["mean", "mean_scale", "scale", "log_scale_sd"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_hierarchical_gaussian_nan_scales_refused(arg, bad):
    """Reproducer: hierarchical_gaussian(mean_scale=nan) ran."""
    with pytest.raises(ValueError, match=f"{arg}: expected a finite number"):
        hierarchical_gaussian(KEY, 2, 3, **{arg: bad})


@pytest.mark.parametrize("gen", GENS)
@pytest.mark.parametrize("alpha", [float("nan"), float("inf"), 0.0, -1.0])
def test_generators_alpha_refused(gen, alpha):
    with pytest.raises(ValueError, match="alpha: expected a finite number > 0"):
        gen(KEY, BASE, alpha, 2, 3)


@pytest.mark.parametrize("gen", GENS)
def test_generators_traced_alpha_raises_at_run_time(gen):
    f = jax.jit(lambda a: gen(KEY, BASE, a, 2, 3))  # the whole sample (the urn's weights do not use alpha)
    assert np.all(np.isfinite(f(1.0).atoms))
    for bad in (-1.0, float("nan")):
        with pytest.raises(Exception, match="alpha: expected a finite number > 0"):
            jax.block_until_ready(f(bad))


def test_nan_in_other_positivity_checks():
    with pytest.raises(ValueError, match="high: expected"):
        uniform_base(0.0, float("nan"))
    with pytest.raises(ValueError, match="probs: expected"):
        uniform_mixture_base([(0, 1), (2, 3)], [float("nan"), 0.5])
    with pytest.raises(ValueError, match="intervals: expected"):
        uniform_mixture_base([(0, float("inf"))], [1.0])
    with pytest.raises(ValueError, match="alpha: expected"):
        dirichlet_process_approximation_bounds(float("nan"), 4)
    with pytest.raises(ValueError, match="num_atoms: expected values N >= 1 that are integers"):
        dirichlet_process_approximation_bounds(1.0, [2.5])
    with pytest.raises(ValueError, match="interval: expected a finite interval"):
        dlip(jnp.zeros((2, 2)), jnp.zeros((2, 2)), interval=(0.0, float("nan")))
    with pytest.raises(ValueError, match="tol: expected"):
        dlip(jnp.zeros((2, 2)), jnp.zeros((2, 2)), interval=(0.0, 1.0), tol=float("nan"))
    with pytest.raises(ValueError, match="p: expected"):
        wow(jnp.zeros((2, 2)), jnp.zeros((2, 2)), p=float("nan"))
    with pytest.raises(ValueError, match="epsilon: expected a finite number > 0"):
        wow(jnp.zeros((2, 2)), jnp.zeros((2, 2)), epsilon=float("inf"))
    with pytest.raises(ValueError, match="outer_epsilon: expected a finite number > 0"):
        wow(jnp.zeros((2, 2)), jnp.zeros((2, 2)), outer="sinkhorn", outer_epsilon=float("nan"))
    with pytest.raises(ValueError, match="p: expected"):
        permutation_test(KEY, jnp.zeros((2, 2)), jnp.zeros((2, 2)), statistic="wow", p=float("inf"))


def test_non_finite_array_inputs_refused():
    with pytest.raises(ValueError, match="x: expected finite atoms, got nan"):
        wasserstein_1d(jnp.array([0.0, jnp.nan]), X2)
    with pytest.raises(ValueError, match="v: expected finite values, got inf"):
        w1_empirical(X2, jnp.array([jnp.inf]))
    with pytest.raises(ValueError, match="cost: expected finite costs, got nan"):
        outer_ot_cost(jnp.array([[0.0, jnp.nan], [1.0, 1.0]]))
    with pytest.raises(ValueError, match="features2: expected finite values"):
        hipm_objective(jnp.ones(2), jnp.ones((1, 2)), jnp.array([[1.0, jnp.inf]]))
    with pytest.raises(ValueError, match="starts: expected finite starting slopes"):
        dlip(jnp.zeros((1, 2)), jnp.zeros((1, 2)), interval=(0.0, 1.0), num_grid=4, starts=jnp.full((1, 4), jnp.nan))
    with pytest.raises(ValueError, match="values: expected finite atoms"):
        from_groups([1.0, np.nan], [0, 1])


def test_traced_non_finite_array_inputs_raise_at_run_time():
    f = jax.jit(lambda c: outer_ot_cost(c, outer="sinkhorn"))
    with pytest.raises(Exception, match="cost: expected finite costs"):
        jax.block_until_ready(f(jnp.array([[0.0, jnp.nan], [1.0, 1.0]])))
    g = jax.jit(w1_empirical)
    with pytest.raises(Exception, match="u: expected finite values"):
        jax.block_until_ready(g(jnp.array([jnp.nan]), X2))


# --- dtypes: integers exactly to float, half precision computed in float32 ------------------------------------


def test_integer_atoms_converted_exactly_or_refused():
    assert float(wasserstein_1d(np.array([0, 2]), np.array([1, 3]))) == 1.0
    assert float(w1_empirical(np.array([0, 2], np.int32), np.array([1], np.int32))) == 1.0
    assert float(outer_ot_cost(np.array([[1, 0], [0, 1]]))) == 0.0
    with pytest.raises(ValueError, match="x: expected integers exactly representable in float32, got 16777217"):
        wasserstein_1d(np.array([2**24 + 1, 0], np.int32), np.array([0, 0], np.int32))
    with pytest.raises(ValueError, match="sample1: expected integers exactly representable"):
        wow(np.array([[2**24 + 1, 0]]), np.array([[0, 0]]))


@pytest.mark.parametrize("half", [jnp.float16, jnp.bfloat16])
def test_half_precision_computed_in_float32(half):
    x, y = jnp.array([0.0, 1.0], half), jnp.array([0.5], half)
    r = wasserstein_1d(x, y, jnp.array([0.5, 0.5], half))
    assert r.dtype == half and float(r) == 0.5
    assert w1_empirical(x, y).dtype == half
    assert outer_ot_cost(jnp.eye(2, dtype=half)).dtype == half
    s = hierarchical_sample(jnp.ones((2, 3), half), jnp.full((2, 3), 1 / 3, half))
    assert s.atoms.dtype == jnp.float32
    np.testing.assert_allclose(s.weights.sum(1), 1.0, rtol=1e-6)
    for gen in GENS:
        d = gen(KEY, BASE, 1.0, 3, 4, dtype=half)
        assert d.atoms.dtype == half and d.weights.dtype == half
        assert float(wow(d, d).value) == 0.0  # accepted back (tolerance of a few epsilons)
    g = hierarchical_gaussian(KEY, 3, 4, dtype=half)
    assert g.atoms.dtype == half
    assert np.isfinite(float(lower_bound(g, g)))


@pytest.mark.parametrize("gen", GENS)
def test_generators_integer_dtype_refused(gen):
    with pytest.raises(TypeError, match="dtype: expected a floating dtype"):
        gen(KEY, BASE, 1.0, 2, 3, dtype=jnp.int32)
    with pytest.raises(TypeError, match="dtype: expected a floating dtype"):
        hierarchical_gaussian(KEY, 2, 3, dtype="int8")


def test_generator_base_checked():
    with pytest.raises(ValueError, match="base: expected a sampler returning float atoms of the requested shape"):
        dirichlet_process_urn(KEY, lambda k, s, d: jnp.zeros(3), 1.0, 2, 4)
    with pytest.raises(TypeError, match="base: expected a sampler"):
        dirichlet_process_finite(KEY, lambda k: k, 1.0, 2, 4)


# --- float32 stability at 1e-30 and 1e30 ---------------------------------------------------------------------


@pytest.mark.parametrize("scale", [1e-30, 1e30])
@pytest.mark.parametrize("p", [1.0, 2.0, 3.0])
def test_wasserstein_stable_in_float32(scale, p):
    x = jnp.array([0.0, 1.0], jnp.float32) * scale
    y = jnp.array([1.0, 2.0], jnp.float32) * scale
    np.testing.assert_allclose(float(wasserstein_1d(x, y, p=p)), scale, rtol=1e-5)
    np.testing.assert_allclose(float(wasserstein_1d(x, y[:1], p=p)), scale * 0.5 ** (1 / p), rtol=1e-5)
    a, b = x.reshape(1, 2), y.reshape(1, 2)
    np.testing.assert_allclose(float(wow(a, b, p=p).value), scale, rtol=1e-5)
    res = permutation_test(KEY, jnp.tile(a, (2, 1)), jnp.tile(b, (2, 1)), statistic="wow", p=p, num_permutations=5)
    np.testing.assert_allclose(float(res.statistic), scale, rtol=1e-5)
    assert np.all(np.isfinite(res.null_statistics))


def test_inner_costs_scaled_back():
    a, b = jnp.array([[0.0, 1.0]]) * 1e-10, jnp.array([[1.0, 2.0]]) * 1e-10
    np.testing.assert_allclose(float(inner_cost_matrix(a, b, p=2.0)[0, 0]), 1e-20, rtol=1e-5)


# --- None, wrong types, mismatched shapes, int seeds as keys ---------------------------------------------------


@pytest.mark.parametrize(
    "call, exc, name",
    [
        (lambda: wasserstein_1d(None, X2), TypeError, "x"),
        (lambda: wasserstein_1d(X2, jnp.zeros((2, 2))), ValueError, "x, y"),
        (lambda: wasserstein_1d(X2, np.array([True, False])), TypeError, "y"),
        (lambda: w1_empirical(None, X2), TypeError, "u"),
        (lambda: w1_empirical(jnp.zeros((2, 2)), jnp.zeros((3, 2))), ValueError, "u, v"),
        (lambda: outer_ot_cost(None), TypeError, "cost"),
        (lambda: outer_ot_cost(jnp.zeros(3)), ValueError, "cost"),
        (lambda: hipm_objective(None, jnp.ones((1, 2)), jnp.ones((1, 2))), TypeError, "slopes"),
        (lambda: hipm_objective(jnp.ones(3), jnp.ones((1, 2)), jnp.ones((1, 2))), ValueError, "slopes, features1, features2"),
        (lambda: wow(None, jnp.zeros((2, 2))), TypeError, "sample1"),
        (lambda: wow(jnp.zeros((2, 2)), jnp.zeros((2, 2, 2))), ValueError, "sample1, sample2"),
        (lambda: lower_bound(jnp.zeros((2, 2)), None), TypeError, "sample2"),
        (lambda: dlip(jnp.zeros((2, 2)), jnp.zeros((2, 2)), interval=None), TypeError, "interval"),
        (lambda: permutation_test(0, jnp.zeros((2, 2)), jnp.zeros((2, 2))), TypeError, "key"),
        (lambda: dirichlet_process_urn(0, BASE, 1.0, 2, 3), TypeError, "key"),
        (lambda: hierarchical_gaussian(1, 2, 3), TypeError, "key"),
        (lambda: dlip(jnp.zeros((2, 2)), jnp.zeros((2, 2)), interval=(0.0, 1.0), key=3), TypeError, "key"),
        (lambda: dirichlet_process_urn(KEY, None, 1.0, 2, 3), TypeError, "base"),
        (lambda: uniform_mixture_base(None, [1.0]), TypeError, "intervals"),
        (lambda: uniform_mixture_base([(0, 1)], "a"), TypeError, "probs"),
        (lambda: dirichlet_process_approximation_bounds(1.0, "x"), TypeError, "num_atoms"),
        (lambda: from_groups(None, [0]), TypeError, "values"),
        (lambda: from_groups(["a"], [0]), TypeError, "values"),
        (lambda: from_groups([1.0], [0], dtype=np.int32), TypeError, "dtype"),
        (lambda: wow(jnp.zeros((2, 2)), jnp.zeros((2, 2)), epsilon="a"), TypeError, "epsilon"),
    ],
)
def test_bad_arguments_named(call, exc, name):
    with pytest.raises(exc, match=f"^{name}: expected"):
        call()
