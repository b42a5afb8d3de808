"""CInA: the attention layer is the kernel expansion; at the dual optimum its loss is the SVM primal optimum."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.effects import (CInA, attention_kernel_output, balancing_dual, cina_objective, cina_weights,
                             effect_data, fit_cina, fit_cina_multi, kernel_matrix, synthetic_family, weighted_ate)


def _data(seed=0, b=2, n=40, d=3):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(b, n, d))
    t = (rng.random((b, n)) < 1 / (1 + np.exp(-x[..., 0]))).astype(int)
    t[:, 0], t[:, 1] = 1, 0
    return effect_data(x, t, rng.normal(size=(b, n)))


@pytest.mark.parametrize("kind", ["rbf", "attention"])
def test_attention_output_is_kernel_expansion(x64, kind):
    data = _data()
    v = jax.random.normal(jax.random.key(0), data.treatment.shape, jnp.float64)
    f = attention_kernel_output(data, v, kind=kind)
    np.testing.assert_allclose(np.asarray(f), np.einsum("bij,bj->bi", kernel_matrix(data, kind=kind), v), rtol=1e-10)


@pytest.mark.parametrize("kind", ["rbf", "attention"])
def test_attention_at_dual_optimum_is_strong_duality(x64, kind):
    data = _data(1)
    lam = 0.7
    res = balancing_dual(kernel_matrix(data, kind=kind), data, lam=lam, tol=1e-10, max_steps=200_000)
    loss = cina_objective(data, res.dual_coef, res.bias, lam=lam, kind=kind)
    np.testing.assert_allclose(np.asarray(loss), -lam * np.asarray(res.objective), rtol=1e-7)
    # and perturbing the optimum's values or intercept only increases the loss
    for eps in (1e-3, -1e-3):
        worse = cina_objective(data, res.dual_coef * (1 + eps), res.bias, lam=lam, kind=kind)
        assert np.all(np.asarray(worse) >= np.asarray(loss) - 1e-9)
        worse = cina_objective(data, res.dual_coef, res.bias + eps, lam=lam, kind=kind)
        assert np.all(np.asarray(worse) >= np.asarray(loss) - 1e-9)


@pytest.mark.parametrize("n, num_steps, max_dist", [(24, 400, 0.4),
                                                   pytest.param(80, 4000, 0.2, marks=pytest.mark.slow)])
def test_fit_cina_reaches_the_dual_solution(n, num_steps, max_dist):
    data = _data(2, b=2, n=n)
    res = balancing_dual(kernel_matrix(data), data, lam=1.0, tol=1e-6)
    fit = fit_cina(data, lam=1.0, num_steps=num_steps)
    opt = -np.asarray(res.objective)
    assert np.all(np.asarray(fit.loss) >= opt * (1 - 1e-4))  # a primal value is above the optimum
    np.testing.assert_allclose(np.asarray(fit.loss), opt, rtol=0.02)
    dist = np.abs(np.asarray(fit.weights) - np.asarray(res.weights)).sum(-1)
    assert np.all(dist < max_dist), dist
    ate_fit = weighted_ate(data, fit.weights).estimate
    ate_dual = weighted_ate(data, res.weights).estimate
    np.testing.assert_allclose(np.asarray(ate_fit), np.asarray(ate_dual), atol=max_dist)


@pytest.fixture(scope="module")
def small_model():
    data = synthetic_family(jax.random.key(3), 2, 30, 3)
    return CInA(3, hidden=8, num_heads=2, key=jax.random.key(1)), data


def test_zero_shot_weights_are_valid_and_permutation_equivariant(small_model):
    model, data = small_model
    res = cina_weights(model, data)
    w = np.asarray(res.weights)
    sign = 2 * np.asarray(data.treatment) - 1
    assert np.all(w >= 0)
    np.testing.assert_allclose(np.where(sign > 0, w, 0).sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(np.where(sign < 0, w, 0).sum(-1), 1.0, rtol=1e-5)
    perm = np.random.default_rng(0).permutation(30)
    shuffled = jax.tree.map(lambda z: z[:, perm] if z.ndim > 1 else z, data)
    np.testing.assert_allclose(np.asarray(cina_weights(model, shuffled).weights), w[:, perm], rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_multi_dataset_training_lowers_loss():
    train = synthetic_family(jax.random.key(0), 16, 30, 3)
    model = CInA(3, hidden=8, num_heads=2, key=jax.random.key(1))
    before = cina_weights(model, train)
    fit = fit_cina_multi(jax.random.key(2), model, train, num_steps=60, batch_size=8, learning_rate=1e-2)
    after = cina_weights(fit.model, train)
    assert float(jnp.mean(after.loss)) < float(jnp.mean(before.loss))
    assert np.all(np.isfinite(np.asarray(weighted_ate(train, after.weights).estimate)))


@pytest.mark.slow
def test_zero_shot_in_distribution_close_to_per_dataset_balancing():
    train = synthetic_family(jax.random.key(0), 256, 60, 4)
    test = synthetic_family(jax.random.key(1), 32, 60, 4)
    fit = fit_cina_multi(jax.random.key(2), CInA(4, hidden=16, num_heads=2, key=jax.random.key(1)), train,
                         num_steps=400, batch_size=16, learning_rate=3e-3)
    zs = cina_weights(fit.model, test)
    res = balancing_dual(kernel_matrix(test), test, lam=1.0)
    # zero-shot loss within 15% of the per-data-set optimum, on data sets it never saw
    assert float(jnp.mean(zs.loss)) < 1.15 * float(jnp.mean(-res.objective))
