"""Interpolation baselines for RIRs at unseen pairs, and the per-pair errors of predicted RIRs.

Pairs are compared by the pair distance ``D((s, r), (s', r')) = sqrt(|s - s'|^2 + |r - r'|^2)``; with
``reciprocal=True`` the smaller of ``D((s, r), (s', r'))`` and ``D((s, r), (r', s'))`` (a recorded pair
also tells the swapped pair's RIR).

- :func:`nearest_neighbour_rir`: the RIR of the nearest training pair.
- :func:`inverse_distance_rir`: ``sum_k w_k h_k / sum_k w_k`` over the ``k`` nearest pairs with
  ``w_k = D_k^{-power}`` (Shepard's interpolation).
- :func:`rir_errors`: T60 relative error (%), |C50 error| (dB), |EDT error| (ms) and the log-magnitude
  STFT error of predictions against true RIRs.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxcore._util import as_float_array, check_finite, check_int, check_scalar, check_shape, expected

from .signals import _metrics, _stft_err

__all__ = ["RIRErrors", "inverse_distance_rir", "nearest_neighbour_rir", "rir_errors"]


def _pair_distance(ts, tr, qs, qr, reciprocal):
    d = jnp.sqrt(jnp.sum((qs[:, None] - ts[None]) ** 2, -1) + jnp.sum((qr[:, None] - tr[None]) ** 2, -1))
    if reciprocal:
        d2 = jnp.sqrt(jnp.sum((qs[:, None] - tr[None]) ** 2, -1) + jnp.sum((qr[:, None] - ts[None]) ** 2, -1))
        d = jnp.minimum(d, d2)
    return d


@functools.partial(jax.jit, static_argnames=("reciprocal",))
def _nn(ts, tr, th, qs, qr, reciprocal):
    d = _pair_distance(ts, tr, qs, qr, reciprocal)
    return th[jnp.argmin(d, -1)]


def _check(train_sources, train_receivers, train_rirs, sources, receivers):
    ts = as_float_array(train_sources, "train_sources")
    dt = ts.dtype
    tr = as_float_array(train_receivers, "train_receivers", dtype=dt)
    th = as_float_array(train_rirs, "train_rirs", dtype=dt)
    qs = as_float_array(sources, "sources", dtype=dt)
    qr = as_float_array(receivers, "receivers", dtype=dt)
    check_shape(ts, "train_sources", (None, 3), "a [M, 3] array")
    m = ts.shape[0]
    check_shape(tr, "train_receivers", (m, 3), f"a [{m}, 3] array")
    check_shape(th, "train_rirs", (m, None), f"a [{m}, N] array")
    check_shape(qs, "sources", (None, 3), "a [P, 3] array")
    check_shape(qr, "receivers", (qs.shape[0], 3), f"a [{qs.shape[0]}, 3] array")
    return ts, tr, th, qs, qr


def nearest_neighbour_rir(train_sources, train_receivers, train_rirs, sources, receivers, *,
                          reciprocal: bool = True) -> Float[Array, "P N"]:
    """The RIR of the nearest training pair (module docstring).

    Args:
        train_sources, train_receivers: ``[M, 3]``; train_rirs: ``[M, N]``.
        sources, receivers: ``[P, 3]`` query pairs.
        reciprocal: also match the swapped training pairs.

    Returns:
        ``[P, N]``.

    Raises:
        ValueError: inconsistent shapes.

    Examples:
        >>> import jax.numpy as jnp
        >>> ts = jnp.array([[1.0, 1, 1], [3.0, 3, 1]]); tr = jnp.array([[2.0, 2, 1], [4.0, 1, 1]])
        >>> nearest_neighbour_rir(ts, tr, jnp.array([[1.0], [2.0]]), tr[:1] + 0.1, ts[:1]).tolist()
        [[1.0]]
    """
    ts, tr, th, qs, qr = _check(train_sources, train_receivers, train_rirs, sources, receivers)
    return _nn(ts, tr, th, qs, qr, bool(reciprocal))


@functools.partial(jax.jit, static_argnames=("k", "reciprocal"))
def _idw(ts, tr, th, qs, qr, k, power, reciprocal):
    d = _pair_distance(ts, tr, qs, qr, reciprocal)
    neg, idx = jax.lax.top_k(-d, k)
    w = jnp.maximum(-neg, 1e-9) ** (-power)
    w = w / jnp.sum(w, -1, keepdims=True)
    return jnp.einsum("pk,pkn->pn", w, th[idx])


def inverse_distance_rir(train_sources, train_receivers, train_rirs, sources, receivers, *,
                         num_neighbours: int = 4, power: float = 2.0, reciprocal: bool = True
                         ) -> Float[Array, "P N"]:
    """Inverse-distance-weighted average of the ``k`` nearest training RIRs (module docstring).

    Args:
        train_sources, train_receivers: ``[M, 3]``; train_rirs: ``[M, N]``.
        sources, receivers: ``[P, 3]`` query pairs.
        num_neighbours: ``k`` (1 <= k <= M).
        power: the weight exponent (> 0).
        reciprocal: also match the swapped training pairs.

    Returns:
        ``[P, N]``.

    Raises:
        ValueError: inconsistent shapes, ``k`` out of range.

    Examples:
        >>> import jax.numpy as jnp
        >>> ts = jnp.array([[1.0, 1, 1], [3.0, 1, 1]]); tr = jnp.array([[1.0, 2, 1], [3.0, 2, 1]])
        >>> q = jnp.array([[2.0, 1, 1]]), jnp.array([[2.0, 2, 1]])
        >>> inverse_distance_rir(ts, tr, jnp.array([[1.0], [3.0]]), *q, num_neighbours=2).tolist()
        [[2.0]]
    """
    ts, tr, th, qs, qr = _check(train_sources, train_receivers, train_rirs, sources, receivers)
    k = check_int(num_neighbours, "num_neighbours", minimum=1, maximum=ts.shape[0])
    power = check_scalar(power, "power", positive=True)
    return _idw(ts, tr, th, qs, qr, k, power, bool(reciprocal))


class RIRErrors(NamedTuple):
    """Per-pair errors of predicted RIRs against true ones (each ``[P]``).

    Attributes:
        t60_pct: ``100 |T60(pred) - T60(true)| / T60(true)``.
        c50_db: ``|C50(pred) - C50(true)|`` (dB).
        edt_ms: ``|EDT(pred) - EDT(true)|`` (ms).
        stft: :func:`~jaxcore.acoustics.stft_error` (mean |log10 magnitude| difference).
    """

    t60_pct: Float[Array, " P"]
    c50_db: Float[Array, " P"]
    edt_ms: Float[Array, " P"]
    stft: Float[Array, " P"]


@jax.jit
def _errors(pred, true, fs, decay_db):
    mp = _metrics(pred, fs, decay_db)
    mt = _metrics(true, fs, decay_db)
    return RIRErrors(100 * jnp.abs(mp.t60 - mt.t60) / mt.t60, jnp.abs(mp.c50 - mt.c50),
                     1000 * jnp.abs(mp.edt - mt.edt), _stft_err(pred, true, 128, 32))


def rir_errors(pred: Float[Array, "P N"], true: Float[Array, "P N"], fs: float, *, decay_db: float = 20.0
               ) -> RIRErrors:
    """T60 %, C50 dB, EDT ms and STFT errors of predicted RIRs (see :class:`RIRErrors`).

    Args:
        pred, true: ``[P, N]`` RIRs.
        fs: sampling rate (Hz).
        decay_db: the T60 fit's decay range (20: T20).

    Returns:
        :class:`RIRErrors`.

    Raises:
        ValueError: shapes differ, ``fs`` not positive.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> t = jnp.arange(4000) / 8000.0
        >>> h = jnp.exp(-6.9 * t / 0.3) * jax.random.normal(jax.random.key(0), (4000,))
        >>> e = rir_errors(h[None], h[None], 8000.0)
        >>> [round(float(v[0]), 6) for v in e]
        [0.0, 0.0, 0.0, 0.0]
    """
    pred = as_float_array(pred, "pred")
    true = as_float_array(true, "true", dtype=pred.dtype)
    if pred.shape != true.shape or pred.ndim != 2:
        raise ValueError(expected("pred", f"a [P, N] array shaped as true {true.shape}", f"shape {pred.shape}",
                                  raw=True))
    check_finite(pred, "pred")
    check_finite(true, "true")
    fs = check_scalar(fs, "fs", positive=True)
    decay_db = check_scalar(decay_db, "decay_db", positive=True)
    return _errors(pred, true, fs, decay_db)
