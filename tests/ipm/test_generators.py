"""Tests of jaxcore.ipm.generators: Dirichlet-process approximations, their error bounds, Gaussian models."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.ipm import (
    dirichlet_process_finite,
    dirichlet_process_stick_breaking,
    dirichlet_process_urn,
    dirichlet_process_approximation_bounds,
    hierarchical_gaussian,
    uniform_base,
    uniform_mixture_base,
    wasserstein_1d,
)

BASE = uniform_base()
GENS = [dirichlet_process_urn, dirichlet_process_finite, dirichlet_process_stick_breaking]


@pytest.mark.parametrize("gen", GENS)
def test_shapes_weights_and_variance_of_the_mean(gen):
    """Var(int x dP) = Var_P0(X) * E sum_k w_k^2 = (1/12) / (alpha + 1) for a DP (N large)."""
    alpha = 2.0
    s = gen(jax.random.key(0), BASE, alpha, 4000, 200)
    assert s.atoms.shape == (4000, 200) and s.weights.shape == (4000, 200)
    np.testing.assert_allclose(s.weights.sum(1), 1.0, rtol=1e-5)
    assert float(s.atoms.min()) >= 0.0 and float(s.atoms.max()) <= 1.0
    means = np.asarray(s.means())
    assert abs(means.mean() - 0.5) < 0.01
    want = (1 / 12) / (alpha + 1)
    if gen is dirichlet_process_finite:
        want = (1 / 12) * (alpha / 200 + 1) / (alpha + 1)  # E sum w^2 for Dirichlet(alpha/N)
    assert abs(means.var() / want - 1) < 0.1


def test_urn_number_of_distinct_atoms():
    """E K_N = sum_{k<N} alpha / (alpha + k) for the Blackwell-MacQueen urn."""
    alpha, N = 3.0, 100
    s = dirichlet_process_urn(jax.random.key(1), BASE, alpha, 2000, N)
    x = np.sort(np.asarray(s.atoms), axis=1)
    k = 1 + np.sum(np.diff(x, axis=1) > 0, axis=1)
    want = np.sum(alpha / (alpha + np.arange(N)))
    assert abs(k.mean() / want - 1) < 0.03


def test_stick_breaking_expected_weights():
    """E w_k = (1/(1+alpha)) (alpha/(1+alpha))^(k-1); E w_N = (alpha/(1+alpha))^(N-1)."""
    alpha, N = 1.5, 6
    s = dirichlet_process_stick_breaking(jax.random.key(2), BASE, alpha, 40000, N)
    r = alpha / (1 + alpha)
    want = np.array([(1 - r) * r**k for k in range(N - 1)] + [r ** (N - 1)])
    np.testing.assert_allclose(np.asarray(s.weights).mean(0), want, atol=0.006)


def test_dp_bounds_hold_for_coupled_approximations():
    """Coupled errors E W1(P, P_N) stay below the analytic bounds (urn, stick-breaking, finite Dirichlet).

    The mean over n draws is compared with the bound plus three standard errors.
    """
    alpha, N, N_ref, n = 1.0, 20, 400, 1000
    key_sb, key_draw = jax.random.split(jax.random.key(3))
    ref = dirichlet_process_stick_breaking(key_sb, BASE, alpha, n, N_ref)
    w, x = ref.weights, ref.atoms
    w1 = jax.jit(jax.vmap(lambda a, b, wa, wb: wasserstein_1d(a, b, wa, wb)))
    # stick-breaking truncated at N_sb with the same sticks and atoms: the tail mass moves onto atom N_sb
    # (N_sb = 8 keeps the tail mass (1/2)^8 far above float32 rounding)
    N_sb = 8
    wt = jnp.concatenate([w[:, : N_sb - 1], w[:, N_sb - 1 :].sum(1, keepdims=True)], axis=1)
    err_sb = np.asarray(w1(x[:, :N_sb], x, wt, w))
    bound_sb = dirichlet_process_approximation_bounds(alpha, N_sb)["stick_breaking"]
    assert err_sb.mean() <= bound_sb + 3 * err_sb.std() / np.sqrt(n)
    assert err_sb.mean() > 0.2 * bound_sb
    # urn = N iid draws from P: sample atoms of P by their weights
    idx = jax.vmap(lambda k, lw: jax.random.categorical(k, lw, shape=(N,)))(
        jax.random.split(key_draw, n), jnp.log(jnp.maximum(w, 1e-30))
    )
    draws = jnp.take_along_axis(x, idx, axis=1)
    err_urn = np.asarray(w1(draws, x, jnp.full((n, N), 1.0 / N), w))
    bound_urn = dirichlet_process_approximation_bounds(alpha, N)["urn"]
    assert err_urn.mean() <= bound_urn + 3 * err_urn.std() / np.sqrt(n)
    assert err_urn.mean() > 0.3 * bound_urn  # the bound is of the right order
    # finite Dirichlet = DP(alpha, H_N), H_N the empirical measure of N iid U[0, 1] atoms: same sticks, atoms
    # moved by the monotone (optimal) coupling of U[0, 1] and H_N, theta' = H_N^{-1}(theta)
    hx = jnp.sort(jax.random.uniform(jax.random.fold_in(key_draw, 1), (n, N)), axis=1)
    k = jnp.clip(jnp.ceil(x * N).astype(jnp.int32) - 1, 0, N - 1)
    err_fd = np.asarray(w1(x, jnp.take_along_axis(hx, k, axis=1), w, w))
    bound_fd = dirichlet_process_approximation_bounds(alpha, N)["finite"]
    assert err_fd.mean() <= bound_fd + 3 * err_fd.std() / np.sqrt(n)
    assert err_fd.mean() > 0.3 * bound_fd


def test_bounds_formulae():
    b = dirichlet_process_approximation_bounds(1.0, np.array([1, 4, 100]))
    np.testing.assert_allclose(b["finite"], np.pi / 8 / np.sqrt([1, 4, 100]))
    np.testing.assert_allclose(b["urn"], np.sqrt(0.5) * np.pi / 8 / np.sqrt([1, 4, 100]))
    np.testing.assert_allclose(b["stick_breaking"], 0.5 ** np.array([1, 4, 100]) / 3)
    with pytest.raises(ValueError, match="alpha: expected a finite number > 0, got 0.0"):
        dirichlet_process_approximation_bounds(0.0, 3)
    with pytest.raises(ValueError, match="num_atoms: expected values N >= 1"):
        dirichlet_process_approximation_bounds(1.0, [3, 0])


def test_uniform_mixture_base_support_and_weights():
    base = uniform_mixture_base([(-1, -0.75), (0.75, 1)], [0.25, 0.75])
    x = np.asarray(base(jax.random.key(4), (20000,), jnp.float32))
    assert np.all(((x >= -1) & (x <= -0.75)) | ((x >= 0.75) & (x <= 1)))
    assert abs((x > 0).mean() - 0.75) < 0.02


def test_hierarchical_gaussian_moments():
    s = hierarchical_gaussian(jax.random.key(5), 3000, 50, mean=1.0, mean_scale=0.5, scale=2.0)
    means = np.asarray(s.means())
    assert abs(means.mean() - 1.0) < 0.05
    # Var of the empirical mean = mean_scale^2 + scale^2 / m
    assert abs(means.var() / (0.25 + 4.0 / 50) - 1) < 0.1
    s2 = hierarchical_gaussian(jax.random.key(5), 2, 3, dim=4)
    assert s2.atoms.shape == (2, 3, 4)


def test_generator_validation():
    with pytest.raises(ValueError, match="alpha: expected a finite number > 0, got 0.0"):
        dirichlet_process_urn(jax.random.key(0), BASE, 0.0, 2, 3)
    with pytest.raises(ValueError, match="num_atoms: expected an int >= 1, got 0"):
        dirichlet_process_stick_breaking(jax.random.key(0), BASE, 1.0, 2, 0)
    with pytest.raises(ValueError, match=r"high: expected a number in \(1, inf\), got 0.0"):
        uniform_base(1.0, 0.0)
    with pytest.raises(ValueError, match="probs: expected non-negative probabilities that sum to one"):
        uniform_mixture_base([(0, 1), (2, 3)], [0.5, 0.6])
    with pytest.raises(ValueError, match="num_atoms: expected an int >= 1, got 0"):
        hierarchical_gaussian(jax.random.key(0), 2, 0)
    for gen in GENS:  # keys first and required: an int is not a key
        with pytest.raises(TypeError, match=r"key: expected a jax.random.key\(...\) array, got int"):
            gen(0, BASE, 1.0, 2, 3)
    with pytest.raises(TypeError, match="key: expected"):
        hierarchical_gaussian(0, 2, 3)
    with pytest.raises(TypeError, match="num_measures: expected an int"):
        dirichlet_process_finite(jax.random.key(0), BASE, 1.0, 2.0, 3)


def test_second_call_with_same_shapes_does_not_recompile():
    from jaxcore.ipm import generators as generators_module

    programs = [
        (generators_module._urn_jit, dirichlet_process_urn),
        (generators_module._finite_jit, dirichlet_process_finite),
        (generators_module._stick_jit, dirichlet_process_stick_breaking),
    ]
    for program, gen in programs:
        gen(jax.random.key(0), uniform_base(), 1.0, 3, 5)  # the doctests' shapes: compilations shared
        size = program._cache_size()
        gen(jax.random.key(1), uniform_base(), 2.5, 3, 5)  # another key and concentration: same program
        assert program._cache_size() == size, gen.__name__
    hierarchical_gaussian(jax.random.key(0), 4, 3, dim=2)
    size = generators_module._gaussian_jit._cache_size()
    hierarchical_gaussian(jax.random.key(1), 4, 3, mean=1.0, scale=0.5, dim=2)
    assert generators_module._gaussian_jit._cache_size() == size


@pytest.mark.parametrize("gen", GENS)
def test_one_program_serves_every_number_of_measures_up_to_the_bucket(gen):
    from jaxcore.ipm import generators as generators_module

    program = {dirichlet_process_urn: generators_module._urn_jit, dirichlet_process_finite: generators_module._finite_jit,
               dirichlet_process_stick_breaking: generators_module._stick_jit}[gen]
    key, base = jax.random.key(3), uniform_mixture_base([(-1.0, -0.75), (0.75, 1.0)], [0.5, 0.5])
    big = gen(key, base, 1.5, 300, 7)             # above the bucket: drawn at its own n
    size = program._cache_size()
    samples = {n: gen(key, base, 1.5, n, 7) for n in (1, 5, 64, 256)}
    assert program._cache_size() <= size + 1, gen.__name__  # the bucket's one program, not one per n
    for n, s in samples.items():
        assert s.atoms.shape == s.weights.shape == (n, 7) and s.uniform == (gen is dirichlet_process_urn)
        # a measure's draws do not depend on how many are drawn: the first n of 300 are the sample of n
        np.testing.assert_array_equal(np.asarray(s.atoms), np.asarray(big.atoms)[:n])
        np.testing.assert_allclose(np.asarray(s.weights), np.asarray(big.weights)[:n], rtol=4e-7, atol=0)


def test_a_user_base_drawn_for_all_measures_at_once_is_not_bucketed():
    # a sampler whose draws depend on the whole shape (here: centred over all atoms) keeps its exact-n program
    def centred(key, shape, dtype=jnp.float32):
        u = jax.random.uniform(key, shape, dtype)
        return u - jnp.mean(u) + 0.5

    s = dirichlet_process_finite(jax.random.key(0), centred, 1.0, 3, 4)
    np.testing.assert_allclose(float(jnp.mean(s.atoms)), 0.5, atol=1e-6)
