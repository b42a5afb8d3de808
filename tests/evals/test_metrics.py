"""TrustLLM metrics: hand-worked values, brute-force bootstrap, SciPy's chi-square and Pearson."""

import jax
import numpy as np
import pytest
import scipy.stats

from jaxcore import evals


def test_hand_worked_table():
    # 2 models x 2 runs x 5 prompts; the last prompt of model 1 is padding
    refused = np.array([[[1, 1, 0, 0, 1], [0, 0, 0, 0, 1]], [[1, 1, 1, 1, 0], [0, 1, 0, 1, 0]]], bool)
    mask = np.ones_like(refused)
    mask[1, :, 4] = False
    r = evals.refuse_to_answer_rate(None, refused, mask)
    np.testing.assert_allclose(r.value, [[0.6, 0.2], [1.0, 0.5]], atol=1e-6)
    assert r.num_items.tolist() == [[5, 5], [4, 4]]
    assert np.isnan(np.asarray(r.low)).all()
    tox = np.array([[0.1, 0.9, 0.2], [0.0, 0.0, 0.3]])
    t = evals.toxicity(None, tox)
    np.testing.assert_allclose(t.average.value, [0.4, 0.1], atol=1e-6)
    np.testing.assert_allclose(t.maximum.value, [0.9, 0.3], atol=1e-6)
    # ASR: clean-correct items 0, 1, 2; item 1 and 2 flip -> 2/3; RS = acc_adv (2/4) - 2/3
    c, a = np.array([1, 1, 1, 0], bool), np.array([1, 0, 0, 1], bool)
    rob = evals.robustness(None, c, a)
    assert rob.clean_accuracy.value.item() == pytest.approx(0.75)
    assert rob.attacked_accuracy.value.item() == pytest.approx(0.5)
    assert rob.attack_success_rate.value.item() == pytest.approx(2 / 3, abs=1e-6)
    assert rob.robustness_score.value.item() == pytest.approx(0.5 - 2 / 3, abs=1e-6)
    assert np.isnan(evals.robustness(None, ~c & False, a).attack_success_rate.value.item())  # no clean-correct
    assert evals.agreement(None, np.array([3, 1, 2]), np.array([3, 2, 2])).value.item() == pytest.approx(2 / 3)


def test_pearson_against_scipy_and_undefined():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(3, 20)), rng.normal(size=(3, 20))
    y[1] = 2 * x[1] + 0.1 * y[1]
    got = evals.pearson_correlation(None, x, y).value
    want = [scipy.stats.pearsonr(x[i], y[i])[0] for i in range(3)]
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert np.isnan(evals.pearson_correlation(None, np.ones(4), np.arange(4.0)).value.item())


def test_bootstrap_matches_brute_force_percentiles():
    # the interval is the percentile interval of the statistic over resamples drawn from uniform u:
    # recompute it with NumPy from the same draws
    key = jax.random.key(3)
    x = (np.random.default_rng(1).random((2, 12)) < 0.4)
    r = evals.refuse_to_answer_rate(key, x, num_resamples=400, level=0.9)
    u = np.asarray(jax.random.uniform(key, (400, 12)))
    idx = np.floor(u * 12).astype(int)
    for row in range(2):
        boot = x[row][idx].mean(1)
        lo, hi = np.quantile(boot, [0.05, 0.95])
        assert r.low[row] == pytest.approx(lo, abs=1e-6) and r.high[row] == pytest.approx(hi, abs=1e-6)
    assert (r.low <= r.value).all() and (r.value <= r.high).all()


def test_bootstrap_coverage_closed_form():
    # a rate of 0.5 on 400 items: the 95% interval's half-width is about 1.96 * sqrt(0.25 / 400) = 0.049
    x = np.tile([True, False], 200)
    r = evals.refuse_to_answer_rate(jax.random.key(0), x, num_resamples=2000)
    assert (r.high - r.low).item() / 2 == pytest.approx(0.049, abs=0.006)


def test_chi_square_against_scipy():
    t = np.array([[[12, 5, 7], [3, 9, 10]], [[5, 5, 5], [5, 5, 5]]])
    r = evals.chi_square_test(t)
    for i in range(2):
        s, p, dof, _ = scipy.stats.chi2_contingency(t[i], correction=False)
        assert r.statistic[i] == pytest.approx(s, rel=1e-4) and r.p_value[i] == pytest.approx(p, rel=1e-4, abs=1e-7)
        assert r.dof == dof


def test_one_program_per_metric_for_a_whole_table():
    x = np.random.default_rng(0).random((4, 3, 10))
    evals.toxicity(jax.random.key(0), x, num_resamples=50)
    n0 = evals.metrics._table_jit._cache_size()
    evals.toxicity(jax.random.key(1), x + 0.0, num_resamples=50)
    assert evals.metrics._table_jit._cache_size() == n0


def test_bad_inputs():
    with pytest.raises(ValueError, match="statistic: expected"):
        evals.table_metric(None, "median", np.ones(3))
    with pytest.raises(ValueError, match="arrays: expected 2"):
        evals.table_metric(None, "agreement", np.ones(3))
    with pytest.raises(ValueError, match=r"arrays\[0\]: expected finite"):
        evals.toxicity(None, np.array([0.1, np.nan]))
    with pytest.raises(ValueError, match=r"arrays\[1\]: expected the shape"):
        evals.agreement(None, np.ones(3), np.ones(4))
    with pytest.raises(TypeError, match="key: expected"):
        evals.refuse_to_answer_rate(0, np.ones(3, bool))
    with pytest.raises(TypeError, match="mask: expected a bool"):
        evals.refuse_to_answer_rate(None, np.ones(3, bool), np.ones(3))
    with pytest.raises(ValueError, match="num_resamples: expected"):
        evals.refuse_to_answer_rate(jax.random.key(0), np.ones(3, bool), num_resamples=2)
    with pytest.raises(ValueError, match="level: expected"):
        evals.refuse_to_answer_rate(jax.random.key(0), np.ones(3, bool), level=1.0)
    with pytest.raises(ValueError, match="table: expected every row"):
        evals.chi_square_test([[0, 0], [1, 2]])


def test_inside_the_callers_jit():
    x = np.random.default_rng(2).random((3, 30)) < 0.5
    eager = evals.refuse_to_answer_rate(jax.random.key(4), x, num_resamples=20)
    traced = jax.jit(lambda k, a: evals.refuse_to_answer_rate(k, a, num_resamples=20))(jax.random.key(4), x)
    for a, b in zip(eager, traced):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)


def test_masked_rows_resample_their_own_items():
    # a row with padding resamples its valid items only (the gather path); a full row uses shared counts:
    # both match NumPy on the same uniform draws
    key = jax.random.key(5)
    x = np.random.default_rng(3).random((2, 10))
    mask = np.ones((2, 10), bool)
    mask[1, 6:] = False
    r = evals.table_metric(key, "mean", x, mask=mask, num_resamples=300)
    u = np.asarray(jax.random.uniform(key, (300, 10)))
    for row, n in ((0, 10), (1, 6)):
        idx = np.minimum(np.floor(u * n).astype(int), n - 1)[:, :n]
        lo, hi = np.quantile(x[row][idx].mean(1), [0.025, 0.975])
        assert r.low[row] == pytest.approx(lo, abs=1e-5) and r.high[row] == pytest.approx(hi, abs=1e-5)
