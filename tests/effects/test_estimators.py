"""Estimators: closed forms, a linear design with a known effect, the LaLonde loader."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxcore.datasets import load_lalonde
from jaxcore.effects import (
    aipw,
    att_balancing,
    balancing_ate,
    balancing_dual,
    difference_in_means,
    effect_data,
    effective_sample_size,
    ipw,
    linear_design,
    propensity,
    weighted_ate,
)


def test_difference_in_means_closed_form(x64):
    rng = np.random.default_rng(0)
    y = rng.normal(size=40)
    t = np.r_[np.ones(12), np.zeros(28)]
    r = difference_in_means(effect_data(rng.normal(size=(40, 2)), t, y))
    np.testing.assert_allclose(float(r.estimate[0]), y[:12].mean() - y[12:].mean(), rtol=1e-12)
    se = np.sqrt(y[:12].var(ddof=1) / 12 + y[12:].var(ddof=1) / 28)
    np.testing.assert_allclose(float(r.std_error[0]), se, rtol=1e-12)


def test_ipw_without_confounders_is_difference_in_means(x64):
    rng = np.random.default_rng(1)
    y = rng.normal(size=40)
    t = np.r_[np.ones(15), np.zeros(25)]
    d = effect_data(np.zeros((40, 2)), t, y)
    np.testing.assert_allclose(np.asarray(propensity(d)), 15 / 40, rtol=1e-10)
    np.testing.assert_allclose(float(ipw(d).estimate[0]), float(difference_in_means(d).estimate[0]), rtol=1e-10)


def test_aipw_linear_outcome_is_regression_adjustment(x64):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(40, 2))
    t = (rng.random(40) < 0.5).astype(float)
    y = x @ np.array([1.0, -2.0]) + 1.5 * t  # noiseless: both outcome models exact
    r = aipw(effect_data(x, t, y), ridge=0.0)
    np.testing.assert_allclose(float(r.estimate[0]), 1.5, atol=1e-8)


def test_weighted_ate_closed_form(x64):
    y = np.r_[2.0, 4.0, np.arange(38.0)]
    d = effect_data(np.zeros((40, 2)), np.r_[1, 1, np.zeros(38)], y)
    w = np.r_[1.0, 3.0, np.ones(38)]
    r = weighted_ate(d, w[None])
    np.testing.assert_allclose(float(r.estimate[0]), 0.25 * 2 + 0.75 * 4 - np.arange(38.0).mean(), rtol=1e-12)


@pytest.mark.parametrize("fn", [weighted_ate, effective_sample_size])
def test_data_first_and_the_old_order_still_accepted_with_a_deprecation_warning(fn):
    """(data, weights) like every effects function; (weights, data), recognised by type, gives the same
    answer with a DeprecationWarning naming the new order; keywords work in either order."""
    d = effect_data(np.arange(6.0)[:, None], [1, 1, 0, 0, 0, 1], [1.0, 3.0, 2.0, 0.0, 5.0, 4.0])
    w = np.array([[1.0, 2.0, 1.0, 3.0, 1.0, 0.5]])
    new = fn(d, w)
    with pytest.warns(DeprecationWarning, match=fn.__name__ + r"\(weights, data\) is deprecated: pass "
                      + fn.__name__ + r"\(data, weights\)"):
        old = fn(w, d)
    assert jax.tree.leaves(old) and all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(old)))
    kw = fn(weights=w, data=d)
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(kw)))
    with pytest.raises(TypeError, match="data: expected"):  # neither argument a data set: no guessing
        fn(w, w)


def test_balancing_ate_default_tol_is_the_solvers(monkeypatch):
    """tol=None passes no tol: balancing_dual's default (1e-4) for the ATE, att_balancing's (1e-5) for the ATT;
    an explicit tol is passed on. (The solvers are replaced by recorders: no solve, no compilation.)"""
    import inspect
    import types

    import jaxcore.effects.estimators as est

    assert inspect.signature(balancing_dual).parameters["tol"].default == 1e-4
    assert inspect.signature(att_balancing).parameters["tol"].default == 1e-5
    calls = []

    def recorder(name):
        def solve(kernel, data, **kw):
            calls.append((name, kw))
            return types.SimpleNamespace(weights=np.ones(data.treatment.shape))
        return solve

    monkeypatch.setattr(est, "balancing_dual", recorder("dual"))
    monkeypatch.setattr(est, "att_balancing", recorder("att"))
    d = effect_data(np.arange(6.0)[:, None], [1, 1, 0, 0, 0, 1], np.arange(6.0))
    balancing_ate(d, kind="linear")
    balancing_ate(d, kind="linear", estimand="att")
    balancing_ate(d, kind="linear", tol=1e-3)
    assert calls == [("dual", {"lam": 1.0, "max_steps": 100_000}), ("att", {"lam": 0.1, "max_steps": 100_000}),
                     ("dual", {"lam": 1.0, "max_steps": 100_000, "tol": 1e-3})]


@pytest.mark.parametrize("estimator", ["aipw", "balancing", "ipw"])
def test_linear_design_known_effect_within_se(estimator):
    d = linear_design(jax.random.key(0), 400, 3, effect=2.0, confounding=1.5)
    fn = {"aipw": aipw, "ipw": ipw, "balancing": lambda z: balancing_ate(z, kind="linear", lam=0.1)}[estimator]
    r = fn(d)
    naive = difference_in_means(d)
    assert abs(float(naive.estimate[0]) - 2.0) > 4 * float(naive.std_error[0])  # confounded
    assert abs(float(r.estimate[0]) - 2.0) < 3 * float(r.std_error[0])


def test_lalonde_loader():
    d = load_lalonde("psid1")
    assert d["x"].shape == (2675, 8) and int(d["treatment"].sum()) == 185
    assert round(d["benchmark"], 2) == 1794.34
    e = load_lalonde("experimental", treated="lalonde")
    assert e["x"].shape == (722, 7) and round(e["benchmark"], 2) == 886.30
    y, t = e["outcome"], e["treatment"] == 1
    np.testing.assert_allclose(y[t].mean() - y[~t].mean(), e["benchmark"])
    with pytest.raises(ValueError, match="controls: expected one of"):
        load_lalonde("psid9")
    with pytest.raises(ValueError, match="treated: expected one of"):
        load_lalonde("psid1", treated="x")
