"""Hierarchical IPM d_lip between laws of random probability measures on an interval.

For laws Q1, Q2 of random probability measures on [a, b],

    d_lip(Q1, Q2) = sup_{f 1-Lipschitz} W1( law of int f dP under P ~ Q1,
                                            law of int f dP under P ~ Q2 ).

The interval is passed as ``interval=(a, b)`` (as everywhere in :mod:`jaxcore.ipm`), and
the grid has ``num_grid`` cells, 250 by default (the paper's grid; the same default in
:func:`jaxcore.ipm.permutation_test`).

It is estimated from hierarchical samples by restricting f to the continuous
piecewise-linear functions on a grid a = t_0 < ... < t_M = b with f(a) = 0
and slopes s_k in [-1, 1]. Then int f dP_i = sum_k s_k A_ik is linear in s,
with A_ik = int_{t_k}^{t_{k+1}} P_i(X > u) du (exact for atoms anywhere in
[a, b]), and the objective J(s) = W1(empirical law of (A1 s)_i, empirical law
of (A2 s)_j) is a one-dimensional W1 (a sort). J is maximised by projected
(super)gradient ascent with a line search, from several starts run in
parallel (``vmap``); the start s = 1 (f(x) = x - a) gives the lower bound
W1(laws of the means). The result is a lower bound of the supremum over the
grid functions; more starts and steps trade time for accuracy.

References:
    M. Catalano, H. Lavenant. "Hierarchical Integral Probability Metrics: A
    distance on random probability measures with low sample complexity."
    ICML 2024, Section 3 (Eq. (1): lower bound; Section 5: the estimator).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxcore._util import check_int, check_key, check_scalar, checked_finite, expected

from ._inputs import real_array
from ._sorting import sort_last
from .samples import HierarchicalSample, check_interval, hierarchical_sample

__all__ = ["DLipResult", "dlip", "lower_bound", "hipm_features", "hipm_objective", "w1_empirical"]

# One default per setting, shared by :func:`dlip`, :func:`hipm_features` and
# :func:`jaxcore.ipm.permutation_test`: M = 250 grid cells (the paper's grid), 5 ascent starts,
# at most 1000 ascent steps per start.
NUM_GRID = 250
NUM_STARTS = 5
MAX_STEPS = 1000


class DLipResult(NamedTuple):
    """Result of :func:`dlip`.

    Attributes:
        value: scalar, the estimate of d_lip (best over starts).
        f: ``[M + 1]`` the maximising function on the grid, f(a) = 0.
        grid: ``[M + 1]`` the grid nodes t_0 = a, ..., t_M = b.
        slopes: ``[M]`` the slopes of f on the grid cells, in [-1, 1].
        start_values: ``[num_starts]`` the value reached from each start
            (index 0 is the start f(x) = x - a).
        num_steps: ``[num_starts]`` int32, ascent steps taken from each start.

    Examples:
        >>> DLipResult._fields
        ('value', 'f', 'grid', 'slopes', 'start_values', 'num_steps')
    """

    value: Float[Array, ""]
    f: Float[Array, " M1"]
    grid: Float[Array, " M1"]
    slopes: Float[Array, " M"]
    start_values: Float[Array, " K"]
    num_steps: Int[Array, " K"]


def w1_empirical(u: Float[Array, "*batch n1"], v: Float[Array, "*batch n2"]) -> Float[Array, "*batch"]:
    """W1 between the uniform empirical measures of two sets of reals, by sorting.

    W1 = int_0^1 |F_u^{-1}(t) - F_v^{-1}(t)| dt; for n1 = n2 it is
    mean_k |u_(k) - v_(k)|. Differentiable almost everywhere.

    Args:
        u: ``[n1]`` values (leading batch axes allowed, ``[..., n1]``), float.
        v: ``[n2]`` values (the same leading axes as ``u``).

    Returns:
        W1 in the units of the values: a scalar, or ``[...]`` for batched inputs.

    Integer values are converted to the default float dtype exactly; float16/bfloat16 are computed
    in float32 and the result is cast back.

    Raises:
        TypeError: ``None``, bool or non-numeric input.
        ValueError: empty inputs, mismatched leading axes, NaN/inf values (under ``jit``: a
            run-time error through ``error_if``).

    References:
        G. Peyre, M. Cuturi. "Computational Optimal Transport", 2019, Remark 2.30.

    Examples:
        >>> import jax.numpy as jnp
        >>> float(w1_empirical(jnp.array([0.0, 1.0]), jnp.array([0.5, 1.5, 2.5])))
        1.0
    """
    (u, u_out), (v, v_out) = real_array(u, "u", "values"), real_array(v, "v", "values")
    if u.ndim < 1 or v.ndim < 1 or u.shape[-1] < 1 or v.shape[-1] < 1:
        raise ValueError(expected("u, v", "non-empty arrays [..., n1] and [..., n2]",
                                  f"shapes {tuple(u.shape)} and {tuple(v.shape)}", raw=True))
    if u.shape[:-1] != v.shape[:-1]:
        raise ValueError(expected("u, v", "the same leading (batch) axes",
                                  f"shapes {tuple(u.shape)} and {tuple(v.shape)}", raw=True))
    dtype = jnp.result_type(u.dtype, v.dtype)
    u = checked_finite(u.astype(dtype), "u", "finite values")
    v = checked_finite(v.astype(dtype), "v", "finite values")
    return _w1_jit(u, v).astype(jnp.result_type(u_out, v_out))


@jax.jit
def _w1_jit(u: Array, v: Array) -> Array:
    return _w1_empirical(u, v)


def _w1_empirical(u: Array, v: Array) -> Array:
    us, vs = sort_last(u), sort_last(v)
    n1, n2 = u.shape[-1], v.shape[-1]
    if n1 == n2:
        return jnp.mean(jnp.abs(us - vs), axis=-1)
    # the merged breakpoints of the two quantile functions are static: i / n1 and j / n2
    cu = np.arange(1, n1 + 1) / n1
    cv = np.arange(1, n2 + 1) / n2
    t = np.unique(np.concatenate([cu, cv]))
    t_prev = np.concatenate([[0.0], t[:-1]])
    mid = 0.5 * (t + t_prev)
    iu = np.minimum(np.searchsorted(cu, mid, side="left"), n1 - 1)
    iv = np.minimum(np.searchsorted(cv, mid, side="left"), n2 - 1)
    dt = jnp.asarray(t - t_prev, us.dtype)
    return jnp.sum(dt * jnp.abs(us[..., iu] - vs[..., iv]), axis=-1)


def hipm_features(
    sample: HierarchicalSample | Any, *, interval: tuple[float, float], num_grid: int = NUM_GRID
) -> Float[Array, "n M"]:
    """Features A with int f dP_i = sum_k s_k A_ik for piecewise-linear f with slopes s.

    A_ik = int_{t_k}^{t_{k+1}} P_i(X > u) du = h - (Phi_i(t_{k+1}) - Phi_i(t_k)),
    Phi_i(t) = sum_j w_ij (t - x_ij)_+, on the uniform grid t_k = a + k h,
    h = (b - a) / M. Computed in O(m + M) per measure by binning (no sort).

    Args:
        sample: :class:`HierarchicalSample` or atoms ``[n, m]`` in [a, b].
        interval: ``(a, b)``, a < b, containing every atom (static floats, atoms' units).
        num_grid: M, the number of grid cells (static; default 250).

    Returns:
        ``[n, M]`` features (units of the atoms), dtype of the atoms. Row sums are the means minus a.

    Raises:
        ValueError / TypeError: invalid sample or interval, atoms outside it, d > 1, num_grid < 1.

    References:
        Catalano & Lavenant, ICML 2024, Section 5 (the estimator).

    Examples:
        >>> import jax.numpy as jnp
        >>> hipm_features(jnp.array([[0.25, 0.75]]), interval=(0.0, 1.0), num_grid=2)
        Array([[0.375, 0.125]], dtype=float32)
    """
    a, b = check_interval(interval)
    s = _validate(sample, a, b, "sample")
    num_grid = check_int(num_grid, "num_grid", minimum=1)
    dtype = s.atoms.dtype
    return _features_jit(s.atoms, s.weights, jnp.asarray(a, dtype), jnp.asarray(b, dtype), num_grid)


@partial(jax.jit, static_argnums=(4,))
def _features_jit(atoms: Array, weights: Array, a: Array, b: Array, num_grid: int) -> Array:
    return _features(atoms, weights, a, b, num_grid)


def _features(atoms: Array, weights: Array, a: float | Array, b: float | Array, num_grid: int) -> Array:
    n, m = atoms.shape
    h = (b - a) / num_grid
    u = atoms - a  # in [0, b - a]
    cell = jnp.clip(jnp.floor(u / h).astype(jnp.int32), 0, num_grid - 1)
    flat = (jnp.arange(n, dtype=jnp.int32)[:, None] * num_grid + cell).ravel()
    w_bin = jnp.zeros(n * num_grid, atoms.dtype).at[flat].add(weights.ravel()).reshape(n, num_grid)
    xw_bin = jnp.zeros(n * num_grid, atoms.dtype).at[flat].add((weights * u).ravel()).reshape(n, num_grid)
    # Wc[k] = sum of weights of atoms with u < t_k (cells < k); t_k = k h; k = 0..M
    zeros = jnp.zeros((n, 1), atoms.dtype)
    wc = jnp.concatenate([zeros, jnp.cumsum(w_bin, axis=1)], axis=1)
    xwc = jnp.concatenate([zeros, jnp.cumsum(xw_bin, axis=1)], axis=1)
    tk = jnp.arange(num_grid + 1, dtype=atoms.dtype) * h
    phi = tk * wc - xwc
    return h - jnp.diff(phi, axis=1)


def hipm_objective(
    slopes: Float[Array, " M"], features1: Float[Array, "n1 M"], features2: Float[Array, "n2 M"]
) -> Float[Array, ""]:
    """J(s) = W1(empirical law of features1 @ s, empirical law of features2 @ s).

    Args:
        slopes: ``[M]`` slopes in [-1, 1] (the function f on the grid, f(a) = 0).
        features1: ``[n1, M]`` from :func:`hipm_features`.
        features2: ``[n2, M]``, same M.

    Returns:
        Scalar J(s) (units of the atoms), a lower bound of d_lip for every admissible s.

    Integer inputs are converted to the default float dtype exactly; float16/bfloat16 are computed
    in float32 and the result is cast back.

    Raises:
        ValueError: shapes that do not match ``[M]``, ``[n1, M]``, ``[n2, M]``; NaN/inf entries
            (under ``jit``: a run-time error through ``error_if``).
        TypeError: ``None``, bool or non-numeric inputs.

    References:
        Catalano & Lavenant, ICML 2024, Section 5.

    Examples:
        >>> import jax.numpy as jnp
        >>> f1, f2 = jnp.array([[0.5, 0.0]]), jnp.array([[0.25, 0.25]])
        >>> float(hipm_objective(jnp.array([1.0, -1.0]), f1, f2))
        0.5
    """
    slopes, s_out = real_array(slopes, "slopes", "slopes [M]")
    features1, f1_out = real_array(features1, "features1", "features [n1, M]")
    features2, f2_out = real_array(features2, "features2", "features [n2, M]")
    if slopes.ndim != 1 or features1.ndim != 2 or features2.ndim != 2 \
            or not features1.shape[1] == features2.shape[1] == slopes.shape[0]:
        raise ValueError(expected("slopes, features1, features2", "shapes [M], [n1, M], [n2, M]",
                                  f"{tuple(slopes.shape)}, {tuple(features1.shape)}, {tuple(features2.shape)}",
                                  raw=True))
    dtype = jnp.result_type(slopes.dtype, features1.dtype, features2.dtype)
    slopes = checked_finite(slopes.astype(dtype), "slopes")
    features1 = checked_finite(features1.astype(dtype), "features1")
    features2 = checked_finite(features2.astype(dtype), "features2")
    return _objective_jit(slopes, features1, features2).astype(jnp.result_type(s_out, f1_out, f2_out))


@jax.jit
def _objective_jit(slopes: Array, features1: Array, features2: Array) -> Array:
    return _objective(slopes, features1, features2)


def _objective(slopes: Array, features1: Array, features2: Array) -> Array:
    return _w1_empirical(features1 @ slopes, features2 @ slopes)


def _default_starts(num_starts: int, num_grid: int, key: PRNGKeyArray | None, dtype: Any) -> Array:
    """Start 0 is s = 1 (f(x) = x - a); the others are smooth slope profiles in [-1, 1]."""
    tau = (jnp.arange(num_grid, dtype=dtype) + 0.5) / num_grid
    if num_starts == 1:
        return jnp.ones((1, num_grid), dtype)
    k = num_starts - 1
    if key is None:
        # deterministic: cos(q pi tau), q = 1..K-1 (one sign change per q)
        q = jnp.arange(1, k + 1, dtype=dtype)[:, None]
        others = jnp.cos(q * jnp.pi * tau[None, :])
    else:
        # random low-frequency profiles: sum_q c_q cos(q pi tau) / q, q = 1..4, c ~ U[-1, 1]
        c = jax.random.uniform(key, (k, 4), dtype, -1.0, 1.0)
        q = jnp.arange(1, 5, dtype=dtype)
        basis = jnp.cos(q[:, None] * jnp.pi * tau[None, :]) / q[:, None]
        prof = c @ basis
        others = prof / jnp.maximum(jnp.max(jnp.abs(prof), axis=1, keepdims=True), 1e-6)
    return jnp.concatenate([jnp.ones((1, num_grid), dtype), jnp.clip(others, -1.0, 1.0)], axis=0)


_NUM_LINE_SEARCH = 8


def _ascent(
    start: Array, f1: Array, f2: Array, max_steps: int, tol: Array
) -> tuple[Array, Array, Array]:
    """Projected (super)gradient ascent of J over [-1, 1]^M from one start.

    Each step: g = grad J(s); the projected direction d zeroes the components
    pushing against an active bound; the candidates clip(s + t_j d) for the
    step sizes t_j = 2^{-j} * 2 / max|d|, j = 0..7 (the largest crosses the whole
    box) are evaluated in one batched product, and the best is taken if it
    improves J by more than ``tol``; otherwise the ascent stops.
    """
    val_grad = jax.value_and_grad(_objective)
    scales = 2.0 * 0.5 ** jnp.arange(_NUM_LINE_SEARCH, dtype=start.dtype)

    def candidates_value(cands: Array) -> Array:  # [L, M] -> [L]
        return _w1_empirical((f1 @ cands.T).T, (f2 @ cands.T).T)

    def cond(state: tuple) -> Array:
        _, _, step, done = state
        return (step < max_steps) & ~done

    def body(state: tuple) -> tuple:
        s, val, step, _ = state
        val, g = val_grad(s, f1, f2)
        d = jnp.where(((s >= 1.0) & (g > 0)) | ((s <= -1.0) & (g < 0)), 0.0, g)
        dmax = jnp.max(jnp.abs(d))
        t = scales / jnp.maximum(dmax, jnp.finfo(s.dtype).tiny)
        cands = jnp.clip(s[None, :] + t[:, None] * d[None, :], -1.0, 1.0)
        cvals = candidates_value(cands)
        j = jnp.argmax(cvals)
        better = (cvals[j] > val + tol) & (dmax > 0)
        s_new = jnp.where(better, cands[j], s)
        v_new = jnp.where(better, cvals[j], val)
        return s_new, v_new, step + 1, ~better

    s0 = jnp.clip(start, -1.0, 1.0)
    v0 = _objective(s0, f1, f2)
    s, v, steps, _ = jax.lax.while_loop(cond, body, (s0, v0, jnp.int32(0), jnp.bool_(False)))
    return s, v, steps


def _dlip_from_features(
    f1: Array, f2: Array, starts: Array, max_steps: int, tol: Array
) -> tuple[Array, Array, Array, Array]:
    """Run the vmapped multi-start ascent; return (value, best slopes, values per start, steps)."""
    s, v, steps = jax.vmap(lambda st: _ascent(st, f1, f2, max_steps, tol))(starts)
    best = jnp.argmax(v)
    return v[best], s[best], v, steps


def _validate(sample: Any, a: float, b: float, name: str) -> HierarchicalSample:
    s = hierarchical_sample(sample, interval=(a, b), max_dim=1, name=name)
    if s.atoms.ndim == 3:
        s = HierarchicalSample(s.atoms[..., 0], s.weights, s.uniform)
    return s


def dlip(
    sample1: HierarchicalSample | Any,
    sample2: HierarchicalSample | Any,
    *,
    interval: tuple[float, float],
    num_grid: int = NUM_GRID,
    num_starts: int = NUM_STARTS,
    max_steps: int = MAX_STEPS,
    tol: float = 1e-7,
    key: PRNGKeyArray | None = None,
    starts: Float[Array, "K M"] | None = None,
) -> DLipResult:
    """Hierarchical IPM d_lip between two hierarchical samples on [a, b], with its maximiser f.

    d_lip = sup_{f 1-Lip} W1(law of int f dP_i, law of int f dR_j), with f
    piecewise linear on M cells, f(a) = 0, slopes in [-1, 1]; maximised by
    projected supergradient ascent with a batched line search from
    ``num_starts`` starts in parallel (start 0: f(x) = x - a, which alone gives
    :func:`lower_bound`). The estimate is a lower bound of the supremum over
    grid functions, and >= :func:`lower_bound`, <= WoW_1 (same samples).

    Args:
        sample1: :class:`HierarchicalSample` or atoms ``[n1, m1]`` in [a, b]
            (``[n1, m1, 1]`` accepted), optional weights inside the sample.
        sample2: likewise ``[n2, m2]``; n1 != n2 and m1 != m2 allowed.
        interval: ``(a, b)``, the interval containing every atom (static floats, atoms' units).
        num_grid: M, number of grid cells (static; default 250, the paper's grid).
        num_starts: number of ascent starts K >= 1, run in parallel (static).
        max_steps: cap on ascent steps per start (static).
        tol: minimal improvement of J per accepted step, relative to (b - a).
        key: optional PRNG key for random smooth starts; ``None`` (the documented
            deterministic path) uses the profiles cos(q pi tau), q = 1..K-1.
        starts: explicit ``[K, M]`` starting slopes (overrides key/num_starts).

    Returns:
        :class:`DLipResult` (value, f on the grid, grid, slopes, value and
        steps per start), in the atoms' dtype and units.

    Raises:
        ValueError / TypeError: invalid samples (shapes, weights, atoms outside
            [a, b], d > 1), an invalid interval, num_grid < 1, num_starts < 1,
            max_steps < 0, tol < 0 (or NaN/inf), a key that is not a PRNG key, or ``starts``
            of the wrong shape or with NaN/inf entries (under ``jit``: a run-time error).

    References:
        Catalano & Lavenant, "Hierarchical Integral Probability Metrics",
        ICML 2024, Definition of d_lip (Section 3) and its estimator (Section 5).

    Examples:
        >>> import jax.numpy as jnp
        >>> x = jnp.array([[0.1, 0.2], [0.3, 0.4]])
        >>> round(float(dlip(x, x + 0.25, interval=(0.0, 1.0), num_grid=20).value), 4)
        0.25
    """
    a, b = check_interval(interval)
    s1 = _validate(sample1, a, b, "sample1")
    s2 = _validate(sample2, a, b, "sample2")
    num_grid = check_int(num_grid, "num_grid", minimum=1)
    max_steps = check_int(max_steps, "max_steps", minimum=0)
    tol = check_scalar(tol, "tol", nonnegative=True)
    dtype = jnp.result_type(s1.atoms.dtype, s2.atoms.dtype)
    if starts is None:
        num_starts = check_int(num_starts, "num_starts", minimum=1)
        if key is not None:
            key = check_key(key)
    else:
        starts, _ = real_array(starts, "starts", "starting slopes [K, M]")
        starts = checked_finite(starts.astype(dtype), "starts", "finite starting slopes")
        if starts.ndim != 2 or starts.shape[1] != num_grid or starts.shape[0] < 1:
            raise ValueError(expected("starts", f"shape [K, num_grid] = [K, {num_grid}] with K >= 1",
                                      f"shape {tuple(starts.shape)}", raw=True))
        key, num_starts = None, int(starts.shape[0])
    tol_abs = jnp.asarray(tol * (b - a), dtype)
    # the uniform flag plays no role here: drop it so both kinds share one compilation
    s1 = HierarchicalSample(s1.atoms.astype(dtype), s1.weights.astype(dtype), False)
    s2 = HierarchicalSample(s2.atoms.astype(dtype), s2.weights.astype(dtype), False)
    return _dlip_jit(s1, s2, starts, key, tol_abs, jnp.asarray(a, dtype), jnp.asarray(b, dtype),
                     num_grid, num_starts, max_steps)


@partial(jax.jit, static_argnames=("num_grid", "num_starts", "max_steps"))
def _dlip_jit(
    s1: HierarchicalSample, s2: HierarchicalSample, starts: Array | None, key: PRNGKeyArray | None,
    tol_abs: Array, a: Array, b: Array, num_grid: int, num_starts: int, max_steps: int,
) -> DLipResult:
    dtype = tol_abs.dtype
    if starts is None:
        starts = _default_starts(num_starts, num_grid, key, dtype)
    f1 = _features(s1.atoms, s1.weights, a, b, num_grid)
    f2 = _features(s2.atoms, s2.weights, a, b, num_grid)
    value, slopes, values, steps = _dlip_from_features(f1, f2, starts, max_steps, tol_abs)
    h = (b - a) / num_grid
    grid = a + h * jnp.arange(num_grid + 1, dtype=dtype)
    f = jnp.concatenate([jnp.zeros((1,), dtype), jnp.cumsum(slopes) * h])
    return DLipResult(value=value, f=f, grid=grid, slopes=slopes, start_values=values, num_steps=steps)


def lower_bound(sample1: HierarchicalSample | Any, sample2: HierarchicalSample | Any) -> Float[Array, ""]:
    """W1 between the empirical laws of the means of the measures, a lower bound of d_lip.

    LB = W1((1/n1) sum_i delta_{m(P_i)}, (1/n2) sum_j delta_{m(R_j)}),
    m(P) = int x dP; it is the d_lip objective at f(x) = x.

    Args:
        sample1: :class:`HierarchicalSample` or atoms ``[n1, m1]``.
        sample2: likewise ``[n2, m2]``.

    Returns:
        Scalar lower bound (units of the atoms).

    Raises:
        ValueError / TypeError: invalid samples or d > 1.

    References:
        Catalano & Lavenant, ICML 2024, Eq. (1).

    Examples:
        >>> import jax.numpy as jnp
        >>> float(lower_bound(jnp.array([[0.0, 1.0]]), jnp.array([[1.0, 2.0]])))
        1.0
    """
    s1 = hierarchical_sample(sample1, max_dim=1, name="sample1")
    s2 = hierarchical_sample(sample2, max_dim=1, name="sample2")
    return _lower_bound_jit(s1, s2)


@jax.jit
def _lower_bound_jit(s1: HierarchicalSample, s2: HierarchicalSample) -> Array:
    return _w1_empirical(s1.means().reshape(s1.n), s2.means().reshape(s2.n))
