"""Timing statistics on planted timings."""

import numpy as np
import pytest

from benchmarks import stats


def test_median_iqr_planted():
    med, iqr = stats.median_iqr([1.0, 2.0, 3.0, 4.0, 100.0])
    assert med == 3.0
    # numpy linear percentiles: q25 = 2, q75 = 4
    assert iqr == pytest.approx(2.0)


def test_median_iqr_empty_raises():
    with pytest.raises(ValueError, match="non-empty"):
        stats.median_iqr([])


def test_paired_speedup_is_median_of_pair_ratios():
    # load drifts: both slow down together in pair 3; paired ratios stay 2, 2, 2, 3, 1
    kernel = [1.0, 1.0, 5.0, 1.0, 1.0]
    baseline = [2.0, 2.0, 10.0, 3.0, 1.0]
    med, iqr = stats.paired_speedup(kernel, baseline)
    assert med == pytest.approx(2.0)
    assert iqr == pytest.approx(0.0)
    # the ratio of medians would be 2 / 1 = 2 here too, but not under a drift that hits one side:
    med2, _ = stats.paired_speedup([1, 1, 1], [3, 3, 30])
    assert med2 == pytest.approx(3.0)


def test_paired_speedup_rejects_bad_input():
    with pytest.raises(ValueError, match="equally long"):
        stats.paired_speedup([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="positive"):
        stats.paired_speedup([0.0], [1.0])


@pytest.mark.parametrize("exponent", [0.5, 1.0, 2.0, 3.0])
def test_loglog_fit_recovers_planted_exponent(exponent):
    work = np.array([10.0, 100.0, 1000.0, 10000.0])
    rng = np.random.default_rng(0)
    secs = 3e-6 * work**exponent * np.exp(rng.normal(0, 0.01, size=4))
    slope, intercept = stats.loglog_fit(work, secs)
    assert slope == pytest.approx(exponent, abs=0.02)
    assert np.exp(intercept) == pytest.approx(3e-6, rel=0.1)


def test_loglog_fit_needs_two_points():
    with pytest.raises(ValueError, match="two distinct"):
        stats.loglog_fit([5.0, 5.0], [1.0, 2.0])


def test_regression_verdict_flags_2x_and_ignores_noise():
    verdict, ratio, band = stats.regression_verdict(1.0, 0.05, 2.0, 0.1, n_old=7, n_new=7)
    assert verdict == "slower" and ratio == pytest.approx(2.0)
    # a 6% change with 5% spreads on both sides is noise: the floor of 10% applies
    verdict, ratio, band = stats.regression_verdict(1.0, 0.05, 1.06, 0.05, n_old=7, n_new=7)
    assert verdict == "same" and band == pytest.approx(0.10)
    # the band is two combined standard errors of the medians: 0.93 * IQR / (median sqrt(n))
    verdict, ratio, band = stats.regression_verdict(1.0, 0.6, 1.3, 0.78, n_old=4, n_new=4)
    u = 0.93 * 0.6 / 2
    assert band == pytest.approx(2 * np.hypot(u, u)) and verdict == "same"
    # more samples shrink the band: the same 30% slowdown is flagged with 100 samples
    assert stats.regression_verdict(1.0, 0.6, 1.3, 0.78, n_old=100, n_new=100)[0] == "slower"
    assert stats.regression_verdict(1.0, 0.01, 0.5, 0.01)[0] == "faster"
    with pytest.raises(ValueError, match="positive"):
        stats.regression_verdict(0.0, 0.1, 1.0, 0.1)


def test_formatting():
    assert stats.fmt_seconds(1.5) == "1.5 s"
    assert stats.fmt_seconds(0.0123) == "12.3 ms"
    assert stats.fmt_seconds(4.5e-6) == "4.5 us"
    assert stats.fmt_seconds(None) == "-"
    assert stats.fmt_si(2.5e9, "FLOP/s") == "2.5 GFLOP/s"
