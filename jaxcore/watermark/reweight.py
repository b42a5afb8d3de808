"""The distribution-preserving alpha-reweight of DiPmark and the soft red-list bias of KGW.

DiPmark: order the vocabulary by a permutation pi (token t at position pi(t)), let
F(t) = sum of P over the tokens at positions <= pi(t) and F^-(t) = F(t) - P(t). With

    g_alpha(x) = max(x - alpha, 0) + max(x - (1 - alpha), 0),     alpha in [0, 1/2],

the reweighted distribution is P_W(t) = g_alpha(F(t)) - g_alpha(F^-(t)): the first alpha of the
permuted cumulative mass is removed and the last alpha doubled. Averaged over uniformly random
permutations P_W equals P exactly (Wu et al., Theorem 4.2); alpha = 0 is the identity; alpha = 1/2
is Hu et al.'s gamma-reweight. Where F^- and F lie on the same linear piece of g_alpha (every token
but at most two), P_W(t) = c(t) P(t) with the slope c in {0, 1, 2}, which is how it is computed here
(so tiny probabilities keep their relative precision in float32; the log of c P is log c + log P).

KGW (Kirchenbauer et al. 2023): logits + delta on the green list (the first gamma V positions).

References:
    Y. Wu, Z. Hu, J. Guo, H. Zhang, H. Huang. "A Resilient and Accessible Distribution-Preserving
    Watermark for Large Language Models." ICML 2024, Section 4, Eq. (2) (alpha-reweight), Theorem 4.2.
    Z. Hu et al. "Unbiased Watermark for Large Language Models." ICLR 2024 (gamma-reweight).
    J. Kirchenbauer et al. "A Watermark for Large Language Models." ICML 2023, Algorithm 2.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxcore._util import as_float_array, check_scalar, check_shape, expected, is_concrete

__all__ = ["dip_reweight", "kgw_reweight"]


def _g(x, alpha):
    return jnp.maximum(x - alpha, 0) + jnp.maximum(x - (1 - alpha), 0)


def _slope(x, alpha, strict):
    if strict:
        return (x > alpha).astype(x.dtype) + (x > 1 - alpha).astype(x.dtype)
    return (x >= alpha).astype(x.dtype) + (x >= 1 - alpha).astype(x.dtype)


def _scatter_rows(values, positions):
    """``out[..., positions[..., t]] = values[..., t]`` (a permutation along the last axis)."""
    flat_v = values.reshape(-1, values.shape[-1])
    flat_p = positions.reshape(-1, positions.shape[-1])
    out = jax.vmap(lambda v, p: jnp.zeros_like(v).at[p].set(v, unique_indices=True))(flat_v, flat_p)
    return out.reshape(values.shape)


_BLOCK = 64


def _cumsum(x):
    """Inclusive cumulative sum along the last axis as blocked triangular matmuls (float32-exact matmuls).

    XLA's CPU cumsum (a reduce-window) is several times slower than this for V = 49,152.
    """
    v = x.shape[-1]
    nb = -(-v // _BLOCK)
    xp = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, nb * _BLOCK - v)]).reshape(x.shape[:-1] + (nb, _BLOCK))
    tri = jnp.triu(jnp.ones((_BLOCK, _BLOCK), x.dtype))
    within = jnp.matmul(xp, tri, precision=jax.lax.Precision.HIGHEST)
    totals = within[..., -1]
    offsets = jnp.cumsum(totals, axis=-1) - totals
    return (within + offsets[..., None]).reshape(x.shape[:-1] + (nb * _BLOCK,))[..., :v]


def _reweight_log(logp, positions, alpha):
    """log P_W from log P (both [..., V]); the permutation as positions. -inf for zero mass."""
    p = jnp.exp(logp)
    cum = _cumsum(_scatter_rows(p, positions))
    hi = jnp.take_along_axis(cum, positions, axis=-1)  # F(t)
    lo = hi - p  # F^-(t) <= F(t)
    s_lo, s_hi = _slope(lo, alpha, False), _slope(hi, alpha, True)
    same = s_lo == s_hi
    straddle = jnp.log(jnp.maximum(_g(hi, alpha) - _g(lo, alpha), 0))
    linear = jnp.where(s_lo > 0, logp + jnp.log(jnp.maximum(s_lo, 1)), -jnp.inf)
    return jnp.where(same, linear, straddle)


def dip_reweight(
    probs: Float[Array, "... V"], positions: Int[Array, "... V"], alpha: float | Float[Array, ""]
) -> Float[Array, "... V"]:
    """DiPmark's alpha-reweight of a distribution under a permutation given as token positions.

    P_W(t) = g(F(t)) - g(F(t) - P(t)), g(x) = max(x - alpha, 0) + max(x - (1 - alpha), 0), F the
    cumulative distribution in the permuted order.

    Args:
        probs: ``[..., V]`` probabilities (non-negative, each row summing to one).
        positions: ``int[..., V]``, a permutation of ``0..V-1`` per row: ``positions[t]`` is token
            t's place in the permuted order (:func:`jaxcore.watermark.vocab_positions`).
        alpha: in [0, 1/2] (0: identity; 1/2: Hu et al.'s gamma-reweight).

    Returns:
        ``[..., V]`` reweighted probabilities, in the dtype of ``probs``.

    Raises:
        ValueError: alpha outside [0, 1/2], shapes that differ; concrete probabilities that are negative, NaN,
            infinite or whose rows do not sum to 1 (within 1e-3), concrete positions that are not a
            permutation per row.

    References:
        Wu et al., ICML 2024, Eq. (2) and Theorem 4.2.

    Examples:
        >>> import jax.numpy as jnp
        >>> p = jnp.array([0.1, 0.2, 0.3, 0.4])
        >>> dip_reweight(p, jnp.array([0, 1, 2, 3]), 0.5).round(6).tolist()  # mass below 1/2 goes
        [0.0, 0.0, 0.2, 0.8]
    """
    probs = as_float_array(probs, "probs")
    positions = jnp.asarray(positions)
    if not jnp.issubdtype(positions.dtype, jnp.integer):
        raise TypeError(expected("positions", "an integer array", f"dtype {positions.dtype}", raw=True))
    check_shape(positions, "positions", probs.shape, layout=f"shape {tuple(probs.shape)} (like probs)")
    if is_concrete(probs):
        pr = np.asarray(probs, np.float64)
        if not (np.all(pr >= 0) and np.all(np.isfinite(pr))):
            raise ValueError(expected("probs", "finite non-negative probabilities", "a negative, NaN or inf entry",
                                      raw=True))
        sums = pr.sum(-1)
        if pr.size and np.max(np.abs(sums - 1.0)) > 1e-3:
            row = np.unravel_index(int(np.argmax(np.abs(sums - 1.0))), sums.shape)
            raise ValueError(expected("probs", "rows summing to 1 (within 1e-3)",
                                      f"a row summing to {float(sums[row]):.6g} at {tuple(int(i) for i in row)}",
                                      raw=True))
    if is_concrete(positions):
        pos = np.sort(np.asarray(positions), axis=-1)
        if pos.size and not np.array_equal(pos, np.broadcast_to(np.arange(pos.shape[-1]), pos.shape)):
            raise ValueError(expected("positions", f"a permutation of 0..{pos.shape[-1] - 1} in every row",
                                      "a row with a repeated or out-of-range position", raw=True))
    alpha = _alpha(alpha)
    return _dip_reweight_jit(probs, positions.astype(jnp.int32), alpha)


@jax.jit
def _dip_reweight_jit(probs, positions, alpha):
    with jax.numpy_dtype_promotion("standard"):
        logp = jnp.log(probs)
        return jnp.exp(_reweight_log(logp, positions, jnp.asarray(alpha, probs.dtype)))


def _alpha(alpha: Any) -> Any:
    if is_concrete(alpha):
        return check_scalar(alpha, "alpha", low=0.0, high=0.5)
    return alpha


def kgw_reweight(logits: Float[Array, "... V"], green: Any, delta: float | Float[Array, ""]) -> Float[Array, "... V"]:
    """Kirchenbauer et al.'s soft red-list watermark: ``logits + delta * green``.

    Args:
        logits: ``[..., V]``.
        green: ``bool[..., V]`` green-list membership.
        delta: the bias, a finite number >= 0.

    Returns:
        ``[..., V]`` biased logits (the softmax is P(t) e^(delta [t green]) / normaliser), in the
        logits' dtype, except float16 logits: biased and returned in float32 (float16 overflows to
        inf above 65504, so 65000 + 1000 would otherwise be inf).

    Raises:
        ValueError: shapes that differ, a negative or non-finite delta.

    References:
        Kirchenbauer et al., "A Watermark for Large Language Models", ICML 2023, Algorithm 2.

    Examples:
        >>> import jax.numpy as jnp
        >>> kgw_reweight(jnp.zeros(3), jnp.array([True, False, True]), 2.0).tolist()
        [2.0, 0.0, 2.0]
    """
    logits = as_float_array(logits, "logits")
    if logits.dtype == jnp.float16:  # explicit conversion: float16 would overflow to inf
        logits = logits.astype(jnp.float32)
    green = jnp.asarray(green)
    if green.dtype != jnp.bool_:
        raise TypeError(expected("green", "a bool array", f"dtype {green.dtype}", raw=True))
    check_shape(green, "green", logits.shape, layout=f"shape {tuple(logits.shape)} (like logits)")
    if is_concrete(delta):
        delta = check_scalar(delta, "delta", nonnegative=True)
    return logits + jnp.asarray(delta, logits.dtype) * green.astype(logits.dtype)
