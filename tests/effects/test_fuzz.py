"""Hypothesis properties of the balancing solver and the estimators on one fixed shape (one compilation).

Light profile (default): few examples; ``test_fuzz_deep`` (slow) runs the same properties on more.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from jaxcore.effects import balancing_dual, difference_in_means, effect_data, kernel_matrix, weighted_ate, weighted_mmd

B, N, D = 2, 12, 2
covariates = arrays(np.float64, (B, N, D), elements=st.floats(-1e3, 1e3, allow_nan=False, width=32))
arms = arrays(np.int8, (B, N), elements=st.integers(0, 1))
outcomes = arrays(np.float64, (B, N), elements=st.floats(-1e4, 1e4, allow_nan=False, width=32))
lams = st.sampled_from([0.1, 1.0, 10.0])


def _check(x, t, y, lam):
    t = t.copy()
    t[:, 0], t[:, 1] = 1, 0
    d = effect_data(x.astype(np.float32), t, y.astype(np.float32))
    k = kernel_matrix(d)
    res = balancing_dual(k, d, lam=lam, tol=1e-3)
    a, w = np.asarray(res.alpha), np.asarray(res.weights)
    sign = 2 * t - 1
    assert np.all((a >= 0) & (a <= 1))
    assert np.all(np.asarray(res.kkt_residual) <= 1e-3 * 1.01)
    np.testing.assert_allclose((a * sign).sum(-1), 0.0, atol=1e-4)
    np.testing.assert_allclose(np.where(sign > 0, w, 0).sum(-1), 1.0, rtol=1e-4)
    assert np.all(np.asarray(weighted_mmd(k, d, res.weights)) <= np.asarray(weighted_mmd(k, d)) * (1 + 1e-4) + 1e-6)
    for r in (difference_in_means(d), weighted_ate(d, res.weights)):
        assert np.all(np.isfinite(np.asarray(r.estimate))) and np.all(np.asarray(r.std_error) >= 0)


@given(covariates, arms, outcomes, lams)
def test_fuzz_balancing_and_estimators(x, t, y, lam):
    _check(x, t, y, lam)


@pytest.mark.slow
@settings(max_examples=40)
@given(covariates, arms, outcomes, lams)
def test_fuzz_deep(x, t, y, lam):
    _check(x, t, y, lam)
