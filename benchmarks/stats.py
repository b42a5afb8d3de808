"""Statistics of timings: medians, spreads, paired ratios, log-log fits, regressions.

Pure NumPy, no JAX, so the logic is tested on planted timings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def median_iqr(samples: Sequence[float]) -> tuple[float, float]:
    """Median and interquartile range (75th - 25th percentile, linear interpolation).

    Raises:
        ValueError: if ``samples`` is empty.
    """
    x = np.asarray(samples, dtype=np.float64)
    if x.size == 0:
        raise ValueError("samples must be non-empty")
    q25, q50, q75 = np.percentile(x, [25, 50, 75])
    return float(q50), float(q75 - q25)


def paired_speedup(kernel_s: Sequence[float], baseline_s: Sequence[float]) -> tuple[float, float]:
    """Median and IQR of the paired ratios ``baseline_s[i] / kernel_s[i]``.

    Timings are taken interleaved (kernel, baseline, kernel, baseline, ...), so
    the i-th pair saw the same machine load; the median of per-pair ratios is
    robust to load that drifts during the run. A value above 1 means the
    kernel is faster.

    Raises:
        ValueError: if the sequences differ in length, are empty, or hold a
            non-positive time.
    """
    k = np.asarray(kernel_s, dtype=np.float64)
    b = np.asarray(baseline_s, dtype=np.float64)
    if k.shape != b.shape or k.size == 0:
        raise ValueError(f"kernel_s and baseline_s must be non-empty and equally long, got {k.size} and {b.size}")
    if np.any(k <= 0) or np.any(b <= 0):
        raise ValueError("timings must be positive")
    return median_iqr(b / k)


def loglog_fit(work: Sequence[float], seconds: Sequence[float]) -> tuple[float, float]:
    """Least-squares fit of ``log(seconds) = slope * log(work) + intercept``.

    Returns:
        ``(slope, intercept)``; the slope is the growth exponent (1 = linear).

    Raises:
        ValueError: fewer than two distinct positive work values.
    """
    w = np.asarray(work, dtype=np.float64)
    t = np.asarray(seconds, dtype=np.float64)
    if w.shape != t.shape:
        raise ValueError(f"work and seconds must have equal length, got {w.size} and {t.size}")
    ok = (w > 0) & (t > 0)
    if np.unique(w[ok]).size < 2:
        raise ValueError("need at least two distinct positive work values to fit a slope")
    slope, intercept = np.polyfit(np.log(w[ok]), np.log(t[ok]), 1)
    return float(slope), float(intercept)


def regression_verdict(
    old_median: float,
    old_iqr: float,
    new_median: float,
    new_iqr: float,
    *,
    n_old: int = 1,
    n_new: int = 1,
    rel_floor: float = 0.10,
) -> tuple[str, float, float]:
    """Classify a change in median time as "slower", "faster" or "same".

    The relative standard error of a sample median is about
    ``1.2533 * sigma / (median * sqrt(n))`` with ``sigma ~ IQR / 1.349`` for
    near-normal timings, i.e. ``u = 0.93 * IQR / (median * sqrt(n))``. The noise
    band is two combined standard errors, ``2 * sqrt(u_old^2 + u_new^2)``, and
    never below ``rel_floor`` (shared machines drift by several percent between
    runs). A run is "slower" when ``new / old > 1 + band`` and "faster" when
    ``old / new > 1 + band``.

    Returns:
        ``(verdict, ratio new/old, band)``.

    Raises:
        ValueError: a non-positive median or sample count.
    """
    if old_median <= 0 or new_median <= 0:
        raise ValueError(f"medians must be positive, got {old_median} and {new_median}")
    if n_old < 1 or n_new < 1:
        raise ValueError(f"sample counts must be >= 1, got {n_old} and {n_new}")
    u_old = 0.93 * old_iqr / (old_median * math.sqrt(n_old))
    u_new = 0.93 * new_iqr / (new_median * math.sqrt(n_new))
    band = max(rel_floor, 2.0 * math.hypot(u_old, u_new))
    ratio = new_median / old_median
    if ratio > 1.0 + band:
        verdict = "slower"
    elif 1.0 / ratio > 1.0 + band:
        verdict = "faster"
    else:
        verdict = "same"
    return verdict, float(ratio), float(band)


def fmt_seconds(s: float | None) -> str:
    """Human time: 1.23 s, 45.6 ms, 7.89 us."""
    if s is None or not math.isfinite(s):
        return "-"
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} us"


def fmt_si(x: float | None, unit: str = "") -> str:
    """Number with an SI prefix: 1.2 G, 34 M, 5.6 k."""
    if x is None or not math.isfinite(x):
        return "-"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= factor:
            return f"{x / factor:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}".rstrip()
