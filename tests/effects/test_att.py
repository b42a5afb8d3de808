"""The effect on the treated: ATT balancing against brute force, ATT estimators against closed forms where ATE != ATT,
effective sample sizes, and zero-shot CInA weights on data sets of another size and covariate shift."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.effects import (CInA, aipw, att_balancing, balancing_ate, cina_weights, effect_data,
                             effective_sample_size, fit_cina, fit_cina_multi, heterogeneous_design, ipw, kernel_matrix,
                             resample_datasets, synthetic_family, weighted_ate, weighted_mmd)


def _brute_force_att(k, t, lam):
    """min_w (t/n1 - w)^T K (t/n1 - w) + lam |w|^2 on the controls' simplex, by enumerating supports."""
    treated, controls = np.flatnonzero(t == 1), np.flatnonzero(t == 0)
    target = k[np.ix_(controls, treated)].mean(1)  # K_0j . (1 / n1)
    best, best_w = np.inf, None
    for r in range(1, len(controls) + 1):
        for s in itertools.combinations(range(len(controls)), r):
            s = list(s)
            a = k[np.ix_(controls[s], controls[s])] + lam * np.eye(r)
            # KKT of the equality-constrained QP on the support: 2 A w - 2 target - mu 1 = 0, 1^T w = 1
            m = np.block([[2 * a, -np.ones((r, 1))], [np.ones((1, r)), np.zeros((1, 1))]])
            sol = np.linalg.solve(m, np.r_[2 * target[s], 1.0])
            w = np.zeros(len(controls))
            w[s] = sol[:r]
            if np.any(w < -1e-12):
                continue
            v = np.zeros(len(t))
            v[treated] = 1 / len(treated)
            v[controls] = -w
            obj = v @ k @ v + lam * w @ w
            if obj < best:
                best, best_w = obj, w
    return best, best_w


@pytest.mark.parametrize("lam", [0.05, 1.0])
def test_att_balancing_matches_brute_force(x64, lam):
    """Both data sets against enumeration of the supports in float64; the second is padded (its last two units
    masked), so its weights must be the 7-unit problem's and 0 on the padding."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 9, 2))
    t = np.zeros((2, 9), int)
    t[:, :3] = 1
    x[:, :3] += 1.0  # the treated shifted: balancing is not uniform
    mask = np.ones((2, 9), bool)
    mask[1, 7:] = False
    data = effect_data(x, t, mask=mask)
    k = np.asarray(kernel_matrix(data))
    res = att_balancing(kernel_matrix(data), data, lam=lam, tol=1e-12, max_steps=100_000)
    for b, n in ((0, 9), (1, 7)):
        alone = np.asarray(kernel_matrix(effect_data(x[b, :n], t[b, :n])))[0] if n < 9 else k[b]
        obj, w = _brute_force_att(alone, t[b, :n], lam)
        np.testing.assert_allclose(float(res.objective[b]), obj, rtol=1e-9)
        np.testing.assert_allclose(np.asarray(res.weights[b, 3:n]), w, atol=1e-7)
        np.testing.assert_allclose(np.asarray(res.weights[b, :3]), 1 / 3, rtol=1e-12)
        assert np.all(np.asarray(res.weights[b, n:]) == 0)
    assert np.all(np.asarray(res.kkt_residual) < 1e-10)


def test_noiseless_att_is_exact(x64):
    """Noise 0: both outcome models are linear and exact, so AIPW's ATT is the sample ATT to rounding; exact linear
    balancing (lam -> 0) makes the weighted control mean of x the treated mean, so the balancing ATT is too."""
    r = heterogeneous_design(jax.random.key(0), 120, 2, treated_fraction=0.3, shift=1.0, effect=1.0, slope=2.0,
                             noise=0.0)
    sample_att, sample_ate = float(r.sample_att[0]), float(r.sample_ate[0])
    assert abs(sample_att - sample_ate) > 0.8  # the design's point: ATE != ATT
    np.testing.assert_allclose(float(aipw(r.data, ridge=0.0, estimand="att").estimate[0]), sample_att, atol=1e-9)
    bal = balancing_ate(r.data, kind="linear", lam=1e-6, tol=1e-10, max_steps=20_000, estimand="att")
    np.testing.assert_allclose(float(bal.estimate[0]), sample_att, atol=1e-6)  # measured 9e-9


def test_att_estimators_recover_the_closed_form_att():
    """Noisy design (ATE 1.6, ATT 3.0 in closed form): every ATT estimator within 3 SE of the sample ATT and of the
    closed form (the sampling error of the sample ATT is small beside the SE), and none within 3 SE of the ATE
    (the ATE estimators' own oracle tests are in test_estimators.py)."""
    r = heterogeneous_design(jax.random.key(1), 1000, 3, treated_fraction=0.3, shift=1.0, effect=1.0, slope=2.0)
    att, ate = float(r.att[0]), float(r.ate[0])
    assert (att, round(ate, 6)) == (3.0, 1.6)
    for name, res in (("ipw", ipw(r.data, estimand="att")), ("aipw", aipw(r.data, estimand="att")),
                      ("balancing", balancing_ate(r.data, estimand="att"))):
        est, se = float(res.estimate[0]), float(res.std_error[0])
        assert abs(est - float(r.sample_att[0])) < 3 * se, (name, est, se)
        assert abs(est - att) < 3 * se + 0.1, (name, est, se)
        assert abs(est - ate) > 3 * se, (name, est, se)
        w = np.asarray(res.weights[0])
        treated = np.asarray(r.data.treatment[0]) > 0.5
        np.testing.assert_allclose(w[treated], 1 / treated.sum(), rtol=1e-5)  # treated weights 1 / n1


def test_fit_cina_att_reaches_att_balancing():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 40, 3))
    t = (rng.random((2, 40)) < 1 / (1 + np.exp(-x[..., 0]))).astype(int)
    t[:, 0], t[:, 1] = 1, 0
    data = effect_data(x, t, rng.normal(size=(2, 40)))
    opt = att_balancing(kernel_matrix(data), data, lam=0.1)
    fit = fit_cina(data, num_steps=400, estimand="att")
    assert np.all(np.asarray(fit.loss) >= np.asarray(opt.objective) * (1 - 1e-3))  # the optimum is a lower bound
    np.testing.assert_allclose(np.asarray(fit.loss), np.asarray(opt.objective), rtol=0.02)
    assert np.abs(np.asarray(fit.weights) - np.asarray(opt.weights)).sum(-1).max() < 0.1


def test_effective_sample_size_closed_forms():
    d = effect_data(np.zeros((6, 1)), [1, 1, 0, 0, 0, 0])
    ess = effective_sample_size(d, jnp.array([[2.0, 2.0, 1.0, 1.0, 1.0, 1.0]]))
    np.testing.assert_allclose(np.asarray(ess), [[4.0, 2.0]], rtol=1e-6)  # equal weights: the arm sizes
    ess = effective_sample_size(d, jnp.array([[1.0, 0.0, 0.0, 0.0, 0.0, 3.0]]))
    np.testing.assert_allclose(np.asarray(ess), [[1.0, 1.0]], rtol=1e-6)  # one unit carries each arm
    with pytest.raises(ValueError, match="weights: expected"):
        effective_sample_size(d, -jnp.ones((1, 6)))


def test_estimand_is_checked():
    d = effect_data(np.random.default_rng(0).normal(size=(8, 2)), [1, 0] * 4)
    for fn in (ipw, aipw, balancing_ate, fit_cina):
        with pytest.raises(ValueError, match="estimand: expected"):
            fn(d, estimand="atc")
    with pytest.raises(ValueError, match="estimand: expected"):
        CInA(2, hidden=4, num_heads=2, estimand="ATT", key=jax.random.key(0))


@pytest.mark.slow  # keeps the default tests within effects' 50 CPU-s (its compile is ~4 s)
def test_resample_datasets_sizes_and_shift():
    src = synthetic_family(jax.random.key(0), 2, 200, 3)
    r = resample_datasets(jax.random.key(1), src, 32, 80, min_units=20, shift=2.0)
    n = np.asarray(r.mask.sum(-1))
    assert n.min() >= 20 and n.max() <= 80 and n.min() < 40 and n.max() > 60  # varied sizes
    t = np.asarray(r.treatment)
    assert np.all((t * r.mask).sum(-1) >= 1) and np.all(((1 - t) * r.mask).sum(-1) >= 1)  # both arms
    # the tilt moves each set's covariate mean (an untilted subsample's mean stays near the source's 0)
    m = np.asarray(r.mask)[..., None]
    means = (np.asarray(r.x) * m).sum(1) / m.sum(1)
    flat = resample_datasets(jax.random.key(1), src, 32, 80)
    fm = np.asarray(flat.x).mean(1)
    assert np.linalg.norm(means, axis=-1).mean() > 3 * np.linalg.norm(fm, axis=-1).mean()
    with pytest.raises(ValueError, match="min_units: expected"):
        resample_datasets(jax.random.key(1), src, 4, 10, min_units=11)
    with pytest.raises(ValueError, match="shift: expected"):
        resample_datasets(jax.random.key(1), src, 4, 10, shift=-1.0)


@pytest.mark.slow
def test_zero_shot_att_weights_keep_their_effective_sample_size_on_another_size_and_shift():
    """Trained on resampled sets of 24-64 units (tilted), applied to data sets of 160 units drawn out of
    distribution (shifted covariates, stronger confounding): the controls' ESS stays above 30% of the controls
    (and above the optimal ATT weights' ESS), and the ATT loss is below 0.3x the unweighted one (measured: ESS
    20.5-62.9 of 53-112 controls, the optimum's 10.8-52.8; loss 0.026 vs unweighted 0.144 and per-set optimum
    0.011)."""
    src = synthetic_family(jax.random.key(0), 16, 200, 3)
    train = resample_datasets(jax.random.key(1), src, 256, 64, min_units=24, shift=1.0)
    model = CInA(3, hidden=16, num_heads=2, estimand="att", key=jax.random.key(2))
    fit = fit_cina_multi(jax.random.key(3), model, train, num_steps=150, batch_size=16, learning_rate=1e-2)
    test = synthetic_family(jax.random.key(4), 8, 160, 3, distribution="out")
    zs = cina_weights(fit.model, test)
    opt = att_balancing(kernel_matrix(test), test)
    ess = np.asarray(effective_sample_size(test, zs.weights))[:, 0]
    ess_opt = np.asarray(effective_sample_size(test, opt.weights))[:, 0]
    n0 = np.asarray(((1 - test.treatment) * test.mask).sum(-1))
    assert np.all(ess >= ess_opt), (ess, ess_opt)
    assert np.all(ess >= 0.3 * n0), (ess, n0)
    unweighted = np.asarray(weighted_mmd(kernel_matrix(test), test)) + 0.1 / n0
    assert float(jnp.mean(zs.loss)) < 0.3 * unweighted.mean()
    assert np.all(np.asarray(zs.loss) >= np.asarray(opt.objective) * (1 - 1e-3))  # the optimum bounds it
    assert np.all(np.isfinite(np.asarray(weighted_ate(test, zs.weights).estimate)))
