"""Kernels on standardised covariates and the kernel mean discrepancy between treatment arms.

Covariates are standardised per data set over its real units (masked mean and standard
deviation; a constant column is left centred). Kernels:

- ``"rbf"``: ``k(x, x') = exp(-|x - x'|^2 / (2 h^2))``, default bandwidth ``h = sqrt(D)``;
- ``"attention"``: ``k(x, x') = exp(x . x' / h^2)``, default ``h^2 = sqrt(D)``: the unnormalised
  softmax score ``exp(q . k / sqrt(D))`` of self-attention with queries = keys = x (Zhang et al.
  2024, Section 3.2);
- ``"linear"``: ``k(x, x') = x . x' / h^2``.

The weighted squared MMD of unit weights ``w`` (summing to 1 in each arm) is
``MMD^2 = (W w)^T K (W w) = || sum_{T=1} w_i phi(x_i) - sum_{T=0} w_i phi(x_i) ||^2`` with
``W = 2 T - 1``.
"""

from __future__ import annotations

from typing import Any, Literal

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxcore._util import check_choice, check_nonnegative, check_positive, check_shape, expected

from .data import EffectData, check_data

__all__ = ["KERNELS", "kernel_matrix", "standardize", "weighted_mmd"]

KERNELS = ("rbf", "attention", "linear")


def _standardize(x: jnp.ndarray, mask: jnp.ndarray) -> jnp.ndarray:
    m = mask.astype(x.dtype)[:, None]
    n = jnp.maximum(m.sum(), 1.0)
    mean = (x * m).sum(0) / n
    var = (((x - mean) * m) ** 2).sum(0) / n
    sd = jnp.where(var > 0, jnp.sqrt(jnp.where(var > 0, var, 1.0)), 1.0)
    return (x - mean) / sd * m


def standardize(data: EffectData) -> Float[Array, "B N D"]:
    """Covariates standardised per data set over real units (padding stays 0).

    ``z = (x - mean) / sd`` with masked moments; a constant covariate gets ``sd = 1``.

    Args:
        data: :class:`EffectData` ``[B, N, D]``.

    Returns:
        ``[B, N, D]`` standardised covariates.

    Raises:
        TypeError: ``data`` is not an :class:`EffectData`.

    Examples:
        >>> from jaxcore.effects import effect_data
        >>> standardize(effect_data([[0.0], [2.0]], [0, 1]))[0, :, 0].tolist()
        [-1.0, 1.0]
    """
    check_data(data)
    return jax.vmap(_standardize)(data.x, data.mask)


def _kernel(z: jnp.ndarray, mask: jnp.ndarray, kind: str, h2: jnp.ndarray) -> jnp.ndarray:
    g = z @ z.T
    if kind == "rbf":
        sq = jnp.diagonal(g)
        k = jnp.exp(-jnp.maximum(sq[:, None] + sq[None, :] - 2 * g, 0.0) / (2 * h2))
    elif kind == "attention":
        k = jnp.exp(g / h2)
    else:
        k = g / h2
    m = mask[:, None] & mask[None, :]
    return jnp.where(m, k, 0.0)


def _default_h2(kind: str, d: int, bandwidth: float | None) -> float:
    if bandwidth is not None:
        return float(bandwidth) ** 2
    return float(d) if kind == "rbf" else float(d) ** 0.5


@jax.jit(static_argnames=("kind",))
def _kernel_jit(data: EffectData, kind: str, h2: Any) -> jnp.ndarray:
    z = jax.vmap(_standardize)(data.x, data.mask)
    return jax.vmap(lambda zz, mm: _kernel(zz, mm, kind, h2))(z, data.mask)


def kernel_matrix(
    data: EffectData, *, kind: Literal["rbf", "attention", "linear"] = "rbf", bandwidth: float | None = None
) -> Float[Array, "B N N"]:
    """Kernel matrices of the standardised covariates of each data set (padding rows/columns 0).

    Args:
        data: :class:`EffectData` ``[B, N, D]``.
        kind: ``"rbf"``, ``"attention"`` or ``"linear"`` (module docstring).
        bandwidth: ``h > 0`` or None (``sqrt(D)`` for rbf; ``D^(1/4)`` for attention and linear).

    Returns:
        ``[B, N, N]`` symmetric positive semi-definite kernel matrices.

    Raises:
        TypeError: ``data`` is not an :class:`EffectData`.
        ValueError: unknown ``kind``, non-positive ``bandwidth``.

    References:
        J. Zhang et al., "Towards Causal Foundation Model: on Duality between Causal Inference
        and Attention", ICML 2024, Section 3 (the kernel of the balancing problem).

    Examples:
        >>> from jaxcore.effects import effect_data
        >>> k = kernel_matrix(effect_data([[0.0], [1.0]], [0, 1]))
        >>> k.shape, float(k[0, 0, 0])
        ((1, 2, 2), 1.0)
    """
    check_data(data)
    check_choice(kind, "kind", KERNELS)
    if bandwidth is not None:
        check_positive(bandwidth, "bandwidth")
    return _kernel_jit(data, kind, jnp.asarray(_default_h2(kind, data.num_features, bandwidth), data.x.dtype))


def _mmd(k: jnp.ndarray, w: jnp.ndarray, sign: jnp.ndarray) -> jnp.ndarray:
    v = w * sign
    return jnp.maximum(v @ (k @ v), 0.0)


@jax.jit
def _mmd_jit(kernel: jnp.ndarray, weights: jnp.ndarray, treatment: jnp.ndarray, mask: jnp.ndarray) -> jnp.ndarray:
    w = jnp.where(mask, weights, 0.0)
    t = treatment * mask
    c = (1.0 - treatment) * mask
    w = jnp.where(treatment > 0.5, w / jnp.sum(w * t, -1, keepdims=True), w / jnp.sum(w * c, -1, keepdims=True))
    w = jnp.where(mask, w, 0.0)
    return jax.vmap(_mmd)(kernel, w, 2.0 * treatment - 1.0)


def weighted_mmd(
    kernel: Float[Array, "B N N"], data: EffectData, weights: Float[Array, "B N"] | None = None
) -> Float[Array, " B"]:
    """Squared kernel MMD between the weighted treated and control arms of each data set.

    ``MMD^2 = (W w)^T K (W w)``, ``W = 2 T - 1``, ``w`` normalised to sum 1 within each arm;
    ``weights=None`` gives the unweighted discrepancy (``w = 1 / n_arm``).

    Args:
        kernel: ``[B, N, N]`` from :func:`kernel_matrix`.
        data: the :class:`EffectData` the kernel was built from.
        weights: ``[B, N]`` non-negative unit weights, or None.

    Returns:
        ``[B]`` squared MMD (>= 0).

    Raises:
        TypeError: ``data`` is not an :class:`EffectData`.
        ValueError: shapes disagree with ``data``; negative weights.

    References:
        A. Gretton et al., "A kernel two-sample test", JMLR 13, 2012; Zhang et al., ICML 2024, Eq. (2).

    Examples:
        >>> from jaxcore.effects import effect_data
        >>> d = effect_data([[0.0], [1.0]], [0, 1])
        >>> round(float(weighted_mmd(kernel_matrix(d, kind="linear"), d)[0]), 3)
        4.0
    """
    check_data(data)
    b, n = data.treatment.shape
    if tuple(kernel.shape) != (b, n, n):
        raise ValueError(expected("kernel", f"shape {(b, n, n)} (from data)", f"shape {tuple(kernel.shape)}", raw=True))
    w = jnp.ones((b, n), kernel.dtype) if weights is None else jnp.asarray(weights, kernel.dtype)
    if weights is not None:
        check_shape(w, "weights", (b, n))
        check_nonnegative(jnp.where(data.mask, w, 0.0), "weights")
    return _mmd_jit(kernel, w, data.treatment.astype(kernel.dtype), data.mask)

