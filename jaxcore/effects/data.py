"""Observational data sets for treatment-effect estimation, batched and padded: :class:`EffectData`.

A batch holds ``B`` data sets of up to ``N`` units with ``D`` covariates; shorter data sets are
padded and ``mask`` marks the real units. ``treatment`` is 0/1; the kernels use its sign form
``W = 2 T - 1`` in {-1, +1} (Zhang et al. 2024, Section 3). ``ate`` is the true average
treatment effect where a generator knows it (NaN otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, PRNGKeyArray

import jax

from jaxcore._util import as_float_array, check_finite, check_int, check_key, check_ndim, expected

__all__ = ["EffectData", "effect_data", "resample_datasets", "stack_datasets"]


class EffectData(eqx.Module):
    """``B`` padded data sets: covariates, 0/1 treatment, outcome, unit mask, true ATE (NaN if unknown).

    Attributes:
        x: ``[B, N, D]`` covariates.
        treatment: ``[B, N]`` float in {0, 1}.
        outcome: ``[B, N]`` outcomes (any unit).
        mask: ``[B, N]`` bool, True for real units (padding is False and ignored everywhere).
        ate: ``[B]`` the true average treatment effect, NaN where unknown.

    Examples:
        >>> d = effect_data([[0.0], [1.0]], [0, 1], [1.0, 3.0])
        >>> d.x.shape, d.mask.tolist()
        ((1, 2, 1), [[True, True]])
    """

    x: Float[Array, "B N D"]
    treatment: Float[Array, "B N"]
    outcome: Float[Array, "B N"]
    mask: Bool[Array, "B N"]
    ate: Float[Array, " B"]

    def __check_init__(self):
        """Built directly (not through :func:`effect_data`), concrete fields are checked too: matching shapes,
        treatment in {0, 1} and finite covariates and outcomes on the real units (traced fields are not)."""
        fields = (self.x, self.treatment, self.outcome, self.mask, self.ate)
        if any(isinstance(f, jax.core.Tracer) for f in fields) or not all(hasattr(f, "shape") for f in fields):
            return
        if len(self.x.shape) != 3:
            raise ValueError(expected("x", "covariates [B, N, D]", f"shape {tuple(self.x.shape)}", raw=True))
        b, n = self.x.shape[:2]
        for name, f, shape in (("treatment", self.treatment, (b, n)), ("outcome", self.outcome, (b, n)),
                               ("mask", self.mask, (b, n)), ("ate", self.ate, (b,))):
            if tuple(f.shape) != shape:
                raise ValueError(expected(name, f"shape {shape} (like x)", f"shape {tuple(f.shape)}", raw=True))
        m = np.asarray(self.mask, bool)
        t = np.asarray(self.treatment, np.float64)[m]
        if not np.all((t == 0) | (t == 1)):
            raise ValueError(expected("treatment", "values in {0, 1} on the real units", t[(t != 0) & (t != 1)][:4]))
        for name, f in (("x", self.x), ("outcome", self.outcome)):
            a = np.asarray(f, np.float64)[m]
            if not np.all(np.isfinite(a)):
                raise ValueError(expected(name, "finite values on the real units", "a NaN or inf entry", raw=True))

    @property
    def num_datasets(self) -> int:
        return self.x.shape[0]

    @property
    def num_units(self) -> int:
        return self.x.shape[1]

    @property
    def num_features(self) -> int:
        return self.x.shape[2]


def _check_arms(t: np.ndarray, m: np.ndarray, name: str) -> None:
    for b in range(t.shape[0]):
        tb = t[b][m[b]]
        if not np.all((tb == 0) | (tb == 1)):
            raise ValueError(expected(name, "values in {0, 1}", tb[(tb != 0) & (tb != 1)][:4]))
        if tb.sum() < 1 or (1 - tb).sum() < 1:
            raise ValueError(expected(name, "at least one treated and one control unit in every data set",
                                      f"{int(tb.sum())} treated of {tb.size} in data set {b}", raw=True))


def check_data(data: Any, name: str = "data") -> EffectData:
    """TypeError unless ``data`` is an :class:`EffectData` (what :func:`effect_data` builds)."""
    if not isinstance(data, EffectData):
        raise TypeError(expected(name, "a jaxcore.effects.EffectData (see effect_data)", type(data).__name__, raw=True))
    return data


def effect_data(x: Any, treatment: Any, outcome: Any = None, mask: Any = None, ate: Any = None) -> EffectData:
    """Validate and batch covariates, treatment and outcome into :class:`EffectData`.

    Args:
        x: ``[N, D]`` (one data set) or ``[B, N, D]`` covariates, finite.
        treatment: ``[N]`` / ``[B, N]`` in {0, 1} (bool or number), both arms present in each data set.
        outcome: ``[N]`` / ``[B, N]`` finite outcomes, or None (zeros: balancing needs no outcomes).
        mask: ``[N]`` / ``[B, N]`` bool, or None (all units real).
        ate: ``[B]`` true effects or None (NaN).

    Returns:
        :class:`EffectData` in the covariates' floating dtype (float32 unless x64 is on).

    Raises:
        ValueError: shapes disagree, non-finite values, a treatment not in {0, 1}, an empty arm.
        TypeError: non-numeric input.

    Examples:
        >>> effect_data([[[0.0], [1.0], [2.0]]], [[1, 0, 1]]).treatment.tolist()
        [[1.0, 0.0, 1.0]]
    """
    xa = as_float_array(x, "x")
    check_ndim(xa, "x", (2, 3), "covariates [N, D] or [B, N, D]")
    single = xa.ndim == 2
    if single:
        xa = xa[None]
    b, n, _ = xa.shape
    if n < 2:
        raise ValueError(expected("x", "at least 2 units", f"shape {tuple(xa.shape)}", raw=True))

    def batch(v: Any, name: str, dtype: Any) -> jnp.ndarray:
        a = np.asarray(v)
        if a.dtype.kind not in "biuf":
            raise TypeError(expected(name, "a real or bool array", f"dtype {a.dtype}", raw=True))
        a = a[None] if single and a.ndim == 1 else a
        if a.shape != (b, n):
            raise ValueError(expected(name, f"shape {(n,) if single else (b, n)} (like x)", f"shape {np.shape(v)}",
                                      raw=True))
        return jnp.asarray(a, dtype)

    m = jnp.ones((b, n), bool) if mask is None else batch(mask, "mask", bool)
    check_finite(xa, "x")
    t = batch(treatment, "treatment", xa.dtype)
    check_finite(t, "treatment")
    _check_arms(np.asarray(t), np.asarray(m), "treatment")
    y = jnp.zeros((b, n), xa.dtype) if outcome is None else batch(outcome, "outcome", xa.dtype)
    check_finite(y, "outcome")
    if ate is None:
        e = jnp.full((b,), jnp.nan, xa.dtype)
    else:
        e = jnp.asarray(np.broadcast_to(np.asarray(ate, np.float64), (b,)), xa.dtype)
    zero = ~m
    return EffectData(jnp.where(zero[..., None], 0.0, xa), jnp.where(zero, 0.0, t), jnp.where(zero, 0.0, y), m, e)


def stack_datasets(datasets: Sequence[EffectData], num_units: int | None = None) -> EffectData:
    """Concatenate :class:`EffectData` batches along B, padding units to ``num_units`` (default: the longest).

    Args:
        datasets: batches with the same number of covariates D.
        num_units: padded length N (>= every batch's N), or None.

    Returns:
        :class:`EffectData` with ``sum(B_i)`` data sets.

    Raises:
        TypeError: not a sequence of :class:`EffectData`; a non-int ``num_units``.
        ValueError: empty list, different D, ``num_units`` too small.

    Examples:
        >>> a = effect_data([[0.0], [1.0]], [0, 1])
        >>> b = effect_data([[0.0], [1.0], [2.0]], [0, 1, 1])
        >>> stack_datasets([a, b]).mask.tolist()
        [[True, True, False], [True, True, True]]
    """
    if not isinstance(datasets, Sequence) or isinstance(datasets, str):
        raise TypeError(expected("datasets", "a sequence of EffectData", type(datasets).__name__, raw=True))
    if len(datasets) == 0:
        raise ValueError(expected("datasets", "at least one EffectData", "an empty sequence", raw=True))
    for i, d in enumerate(datasets):
        check_data(d, f"datasets[{i}]")
    if num_units is not None:
        num_units = check_int(num_units, "num_units", minimum=1)
    dims = {d.num_features for d in datasets}
    if len(dims) != 1:
        raise ValueError(expected("datasets", "the same number of covariates D", sorted(dims), raw=True))
    longest = max(d.num_units for d in datasets)
    n = longest if num_units is None else num_units
    if n < longest:
        raise ValueError(expected("num_units", f"an int >= {longest} (the longest data set)", n))

    def pad(a: jnp.ndarray, fill: Any = 0.0) -> jnp.ndarray:
        widths = [(0, 0), (0, n - a.shape[1])] + [(0, 0)] * (a.ndim - 2)
        return jnp.pad(a, widths, constant_values=fill)

    return EffectData(
        jnp.concatenate([pad(d.x) for d in datasets]),
        jnp.concatenate([pad(d.treatment) for d in datasets]),
        jnp.concatenate([pad(d.outcome) for d in datasets]),
        jnp.concatenate([pad(d.mask, False) for d in datasets]),
        jnp.concatenate([d.ate for d in datasets]),
    )


@jax.jit(static_argnames=("num_datasets", "num_units"))
def _resample(key, data, num_datasets, num_units, min_units, shift):
    def one(k):
        kb, ku, kn, kd = jax.random.split(k, 4)
        src = jax.random.randint(kb, (), 0, data.num_datasets)
        m, t = data.mask[src], data.treatment[src]
        # covariate shift: units drawn with probability proportional to exp(shift * s . z), s a random unit
        # direction and z the source's standardised covariates (exponential tilting; Gumbel top-k draws
        # without replacement in proportion to these weights)
        xs = data.x[src]
        mf = m.astype(xs.dtype)[:, None]
        mean = (xs * mf).sum(0) / jnp.maximum(mf.sum(), 1.0)
        sd = jnp.sqrt(((xs - mean) ** 2 * mf).sum(0) / jnp.maximum(mf.sum(), 1.0))
        z = (xs - mean) / jnp.where(sd > 0, sd, 1.0)
        s = jax.random.normal(kd, (xs.shape[-1],), xs.dtype)
        s = s / jnp.maximum(jnp.linalg.norm(s), 1e-12)
        tilt = jnp.clip(shift * (z @ s), -30.0, 30.0)
        # both arms first (one treated, one control unit), then draws without replacement
        g = jax.random.gumbel(ku, m.shape) + tilt + jnp.where(m, 0.0, -jnp.inf)
        g = g + jnp.where(m & (t > 0.5) & (g == jnp.max(jnp.where(t > 0.5, g, -jnp.inf))), 1e6, 0.0)
        g = g + jnp.where(m & (t < 0.5) & (g == jnp.max(jnp.where(t < 0.5, g, -jnp.inf))), 1e6, 0.0)
        idx = jnp.argsort(-g)[:num_units]
        size = jax.random.randint(kn, (), min_units, num_units + 1)
        keep = jnp.isfinite(g[idx]) & (jnp.arange(num_units) < size)
        z = lambda a: jnp.where(keep.reshape((-1,) + (1,) * (a.ndim - 2)), a[src][idx], 0)  # noqa: E731
        return EffectData(z(data.x), z(data.treatment), z(data.outcome), keep, data.ate[src])

    return jax.vmap(one)(jax.random.split(key, num_datasets))


def resample_datasets(key: PRNGKeyArray, data: EffectData, num_datasets: int, num_units: int, *,
                      min_units: int | None = None, shift: float = 0.0) -> EffectData:
    """Unit subsamples of a batch's data sets: training sets for self-supervised CInA from real covariates.

    Each new data set picks one source data set uniformly and ``num_units`` of its real units
    without replacement (one treated and one control unit always included); a source with fewer
    units is taken whole and padded. Varied sizes: with ``min_units``, each data set keeps the first
    ``n ~ U{min_units, ..., num_units}`` of its draws (the rest is padding). Covariate shift: with
    ``shift > 0`` units are drawn with probability proportional to ``exp(shift s . z_i)`` for a random
    unit direction ``s`` per data set (``z`` the source's standardised covariates): each data set sees
    its own tilted covariate distribution.

    Args:
        key: PRNG key.
        data: :class:`EffectData` sources ``[B, N, D]``.
        num_datasets: data sets to draw (>= 1).
        num_units: units per data set (>= 2): the padded size and the largest data set.
        min_units: the smallest data set (``2 <= min_units <= num_units``), or None (every set ``num_units``).
        shift: ``>= 0`` strength of the covariate tilt (0: uniform draws).

    Returns:
        :class:`EffectData` ``[num_datasets, num_units, D]`` (outcomes kept, unused by training).

    Raises:
        TypeError: ``data`` is not an :class:`EffectData`.
        TypeError: ``key`` not a PRNG key. ValueError: invalid counts.

    Examples:
        >>> d = effect_data([[0.0], [1.0], [2.0], [3.0]], [1, 0, 1, 0])
        >>> r = resample_datasets(jax.random.key(0), d, 3, 2)
        >>> r.x.shape, r.treatment.sum(-1).tolist()
        ((3, 2, 1), [1.0, 1.0, 1.0])
    """
    check_data(data)
    check_key(key)
    b = check_int(num_datasets, "num_datasets", 1)
    n = check_int(num_units, "num_units", 2)
    lo = n if min_units is None else check_int(min_units, "min_units", 2)
    if lo > n:
        raise ValueError(expected("min_units", f"an int <= num_units={n}", lo))
    check_finite(shift, "shift")
    if float(shift) < 0:
        raise ValueError(expected("shift", "a number >= 0", shift))
    if n > data.num_units:
        data = stack_datasets([data], n)
    return _resample(key, data, b, n, jnp.asarray(lo, jnp.int32), jnp.asarray(shift, data.x.dtype))
