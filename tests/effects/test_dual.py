"""Oracles for the balancing problem and its SVM dual: KKT, scikit-learn SVC, padding, MMD."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.svm import SVC

from jaxcore.effects import balancing_dual, balancing_objective, effect_data, kernel_matrix, weighted_mmd


def _data(seed=0, b=3, n=60, d=3, mask=None):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(b, n, d))
    t = (rng.random((b, n)) < 1 / (1 + np.exp(-1.5 * x[..., 0]))).astype(int)
    t[:, 0], t[:, 1] = 1, 0
    return effect_data(x, t, mask=mask)


def _svc(k, t, lam):
    y = 2 * np.asarray(t) - 1
    s = SVC(C=1.0 / lam, kernel="precomputed", tol=1e-10).fit(np.asarray(k, np.float64), y)
    coef = np.zeros(len(y))
    coef[s.support_] = s.dual_coef_[0]
    a = np.abs(coef)
    q = np.asarray(k, np.float64) * np.outer(y, y)
    return coef, float(s.intercept_[0]), 0.5 * a @ q @ a - a.sum()


MASK = np.ones((3, 60), bool)
MASK[1, 45:] = False  # padded data sets: the solution must ignore the padding
MASK[2, 30:] = False


@pytest.mark.parametrize("method", ["smo", "fista"])
@pytest.mark.parametrize("lam", [0.3, 3.0])
def test_matches_sklearn_svc_dual_with_padding(x64, method, lam):
    data = _data(mask=MASK)
    k = kernel_matrix(data)
    res = balancing_dual(k, data, lam=lam, tol=1e-9, method=method, max_steps=200_000)
    assert np.all(np.asarray(res.kkt_residual) < 1e-7)
    for b in range(data.num_datasets):
        m = MASK[b]
        coef, bias, obj = _svc(np.asarray(k[b])[np.ix_(m, m)], np.asarray(data.treatment[b])[m], lam)
        # the RBF kernel matrix is positive definite: the dual solution is unique
        np.testing.assert_allclose(float(res.objective[b]), obj, rtol=1e-9)
        np.testing.assert_allclose(np.asarray(res.dual_coef[b])[m], coef, atol=1e-4)
        np.testing.assert_allclose(float(res.bias[b]), bias, atol=1e-4)
        assert float(np.abs(np.asarray(res.alpha[b])[~m]).sum()) == 0.0


def test_feasible_kkt_and_balance_float32():
    data = _data(1)
    k = kernel_matrix(data)
    res = balancing_dual(k, data, lam=1.0, tol=1e-4)
    a = np.asarray(res.alpha)
    w = 2 * np.asarray(data.treatment) - 1
    assert np.all((a >= 0) & (a <= 1))
    np.testing.assert_allclose((a * w).sum(-1), 0.0, atol=1e-4)
    assert np.all(np.asarray(res.kkt_residual) < 1e-3)
    s = np.asarray(res.weights)
    np.testing.assert_allclose(np.where(w > 0, s, 0).sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(np.where(w < 0, s, 0).sum(-1), 1.0, rtol=1e-5)
    # the weights balance the kernel mean embeddings: weighted MMD below the unweighted one
    assert np.all(np.asarray(weighted_mmd(k, data, res.weights)) < np.asarray(weighted_mmd(k, data)))


def test_chunks_equal_one_data_set_at_a_time(x64):
    data = _data(mask=MASK)
    k = kernel_matrix(data)
    full = balancing_dual(k, data, tol=1e-9)
    one = balancing_dual(k, data, tol=1e-9, chunk_size=1)
    np.testing.assert_allclose(np.asarray(full.alpha), np.asarray(one.alpha), atol=1e-8)


def test_objective_is_scaled_svc_dual(x64):
    data = _data(mask=MASK)
    k = kernel_matrix(data)
    res = balancing_dual(k, data, lam=0.5, tol=1e-9)
    f = balancing_objective(res.alpha, k, data, lam=0.5)
    np.testing.assert_allclose(np.asarray(f), 2 * 0.5**2 * np.asarray(res.objective), rtol=1e-9)
    # the optimum is below any other feasible point, e.g. uniform weights scaled into the box
    w = (2 * np.asarray(data.treatment) - 1) * MASK
    n1, n0 = (w > 0).sum(-1, keepdims=True), (w < 0).sum(-1, keepdims=True)
    uni = np.where(w > 0, 1 / n1, 1 / n0) * np.minimum(n1, n0) * MASK
    assert np.all(np.asarray(balancing_objective(uni, k, data, lam=0.5)) > np.asarray(f))


def test_weighted_mmd_closed_form(x64):
    data = effect_data([[0.0], [1.0], [3.0]], [1, 0, 0])
    k = kernel_matrix(data, kind="linear", bandwidth=1.0)
    z = np.array([0.0, 1.0, 3.0])
    z = (z - z.mean()) / z.std()
    # treated mean embedding z_0, control mean (z_1 + z_2) / 2
    np.testing.assert_allclose(float(weighted_mmd(k, data)[0]), (z[0] - (z[1] + z[2]) / 2) ** 2, rtol=1e-12)
