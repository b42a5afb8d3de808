"""Wasserstein-over-Wasserstein distance WoW_p between laws of random probability measures.

Given hierarchical samples P_1..P_{n1} ~ Q1 and R_1..R_{n2} ~ Q2 (each a
discrete measure), the empirical WoW_p is the p-Wasserstein distance between
(1/n1) sum_i delta_{P_i} and (1/n2) sum_j delta_{R_j} on the space of
measures, with ground cost the inner Wasserstein distance W_p:

    WoW_p^p = min_{pi in Pi(1/n1, 1/n2)} sum_ij pi_ij W_p^p(P_i, R_j).

Inner costs: exact 1-D W_p by sorting (quantile functions), or entropic
optimal transport (OTT-JAX Sinkhorn) for measures on R^d. Outer problem: an
exact assignment (equal n, uniform weights) or exact LP (unequal n) through a
host callback, or entropic OT (OTT-JAX Sinkhorn, jit-native).

References:
    M. Catalano, H. Lavenant. "Hierarchical Integral Probability Metrics: A
    distance on random probability measures with low sample complexity."
    ICML 2024, Section 2 (WoW, Eq. (2)).
    G. Peyre, M. Cuturi. "Computational Optimal Transport." Foundations and
    Trends in ML, 2019, Remark 2.30 (1-D OT by sorting).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxcore._util import check_choice, check_int, check_scalar, checked_finite, expected

from ._inputs import check_weights, pow2_scale, real_array, weight_tol
from ._sorting import argsort_last, sort_last
from .samples import HierarchicalSample, hierarchical_sample

__all__ = [
    "WoWResult",
    "wasserstein_1d",
    "inner_cost_matrix",
    "outer_ot_cost",
    "wow",
]


class WoWResult(NamedTuple):
    """Result of :func:`wow`.

    Attributes:
        value: scalar WoW_p, in the units of the atoms.
        inner_costs: ``[n1, n2]`` the inner costs W_p^p(P_i, R_j), in (units of the atoms)^p.

    Examples:
        >>> WoWResult._fields
        ('value', 'inner_costs')
    """

    value: Float[Array, ""]
    inner_costs: Float[Array, "n1 n2"]


# ----------------------------------------------------------------------------
# 1-D Wasserstein distances by sorting
# ----------------------------------------------------------------------------


def _sorted_with_cdf(x: Array, w: Array) -> tuple[Array, Array]:
    """Sort atoms and return (sorted atoms, cumulative weights normalised to end at 1)."""
    order = argsort_last(x)
    xs = x[order]
    cw = jnp.cumsum(w[order])
    return xs, cw / cw[-1]


def _wpp_sorted(xs: Array, cx: Array, ys: Array, cy: Array, p: float) -> Array:
    """W_p^p between two 1-D discrete measures given sorted atoms and cdf values.

    W_p^p = int_0^1 |F^{-1}(t) - G^{-1}(t)|^p dt, evaluated exactly on the merged
    breakpoints of the two piecewise-constant quantile functions.
    """
    t = sort_last(jnp.concatenate([cx, cy]))
    t_prev = jnp.concatenate([jnp.zeros((1,), t.dtype), t[:-1]])
    dt = t - t_prev
    mid = 0.5 * (t + t_prev)
    ix = jnp.clip(jnp.searchsorted(cx, mid, side="left"), 0, xs.shape[0] - 1)
    iy = jnp.clip(jnp.searchsorted(cy, mid, side="left"), 0, ys.shape[0] - 1)
    return jnp.sum(dt * _abs_pow(xs[ix] - ys[iy], p))


def _abs_pow(z: Array, p: float) -> Array:
    if p == 1:
        return jnp.abs(z)
    if p == 2:
        return z * z
    return jnp.abs(z) ** p


def wasserstein_1d(
    x: Float[Array, " m1"],
    y: Float[Array, " m2"],
    x_weights: Float[Array, " m1"] | None = None,
    y_weights: Float[Array, " m2"] | None = None,
    p: float = 1.0,
) -> Float[Array, ""]:
    """Exact p-Wasserstein distance between two discrete measures on the line.

    W_p(mu, nu) = (int_0^1 |F_mu^{-1}(t) - F_nu^{-1}(t)|^p dt)^{1/p}, computed by
    sorting (O((m1 + m2) log(m1 + m2))); with equal sizes and uniform weights
    it is (mean_k |x_(k) - y_(k)|^p)^{1/p}.

    Args:
        x: ``[m1]`` finite atoms of mu. Integer atoms are converted to the default float dtype
            exactly (a value that does not survive the cast is refused); float16/bfloat16 are
            computed in float32 and the result is cast back.
        y: ``[m2]`` atoms of nu, likewise.
        x_weights: ``[m1]`` finite non-negative weights summing to one within 1e-4 (a few
            epsilons for half precision), then normalised explicitly (default uniform).
        y_weights: ``[m2]`` likewise.
        p: order, ``p >= 1`` (static).

    Returns:
        Scalar W_p, in the units of the atoms. The atoms are scaled by a power of two before
        |x - y|^p is formed, so W_p is accurate in float32 from 1e-30 to 1e30.

    Raises:
        ValueError: ``p < 1`` (or not finite), arrays that are not non-empty 1-D, NaN/inf atoms,
            weights not shaped like their atoms, negative, non-finite or not summing to one
            (under ``jit``: a run-time error through ``error_if``).
        TypeError: ``None``, bool or non-numeric inputs.

    References:
        G. Peyre, M. Cuturi. "Computational Optimal Transport", 2019, Remark 2.30.

    Examples:
        >>> import jax.numpy as jnp
        >>> float(wasserstein_1d(jnp.array([0.0, 1.0]), jnp.array([0.5, 1.5])))
        0.5
        >>> float(wasserstein_1d(jnp.array([0.0, 1.0]), jnp.array([3.0]), jnp.array([0.5, 0.5]), p=2.0) ** 2)
        6.5
    """
    p = check_scalar(p, "p", low=1.0)
    x, x_out = real_array(x, "x", "atoms [m1]")
    y, y_out = real_array(y, "y", "atoms [m2]")
    if x.ndim != 1 or y.ndim != 1 or x.shape[0] < 1 or y.shape[0] < 1:
        raise ValueError(expected("x, y", "non-empty 1-D arrays of atoms",
                                  f"shapes {tuple(x.shape)} and {tuple(y.shape)}", raw=True))
    dtype = jnp.result_type(x.dtype, y.dtype)
    out_dtype = jnp.result_type(x_out, y_out)
    x = checked_finite(x.astype(dtype), "x", "finite atoms")
    y = checked_finite(y.astype(dtype), "y", "finite atoms")
    uniform = x_weights is None and y_weights is None and x.shape == y.shape
    weights = []
    for w, atoms, nm, orig in ((x_weights, x, "x_weights", x_out), (y_weights, y, "y_weights", y_out)):
        if w is None:
            weights.append(jnp.full(atoms.shape, 1.0 / atoms.shape[0], dtype))
            continue
        w, w_out = real_array(w, nm, "weights")
        if w.shape != atoms.shape:
            raise ValueError(expected(nm, f"weights shaped like their atoms {tuple(atoms.shape)}",
                                      f"shape {tuple(w.shape)}", raw=True))
        weights.append(check_weights(w.astype(dtype), nm, weight_tol(w_out)))
    return _w1d_jit(x, weights[0], y, weights[1], p, uniform).astype(out_dtype)


@partial(jax.jit, static_argnames=("p", "uniform"))
def _w1d_jit(x: Array, wx: Array, y: Array, wy: Array, p: float, uniform: bool) -> Array:
    c = pow2_scale(x, y)  # W_p(x, y) = c W_p(x / c, y / c), exact: no overflow at 1e30, no underflow at 1e-30
    return c * _w1d(x / c, wx, y / c, wy, p, uniform)


def _w1d(x: Array, wx: Array, y: Array, wy: Array, p: float, uniform: bool) -> Array:
    if uniform:  # equal sizes, uniform weights: the sorted formula
        return jnp.mean(_abs_pow(sort_last(x) - sort_last(y), p)) ** (1.0 / p)
    xs, cx = _sorted_with_cdf(x, wx)
    ys, cy = _sorted_with_cdf(y, wy)
    return _wpp_sorted(xs, cx, ys, cy, p) ** (1.0 / p)


# ----------------------------------------------------------------------------
# Inner cost matrices
# ----------------------------------------------------------------------------

def _cost_uniform_1d(x: Array, y: Array, p: float) -> Array:
    """[n1, n2] matrix of W_p^p for equal m and uniform weights (sorted atoms).

    Accumulates |x_i(k) - y_j(k)|^p over the quantile index k with a scan, so
    every step is an elementwise [n1, n2] update: 14 ms at n = 256, m = 1000
    on one CPU core, against 42 ms for a vmapped row-wise reduction over k.
    """
    xs = sort_last(x).T
    ys = sort_last(y).T

    def body(acc: Array, k: Array) -> tuple[Array, None]:
        return acc + _abs_pow(xs[k][:, None] - ys[k][None, :], p), None

    acc0 = jnp.zeros((x.shape[0], y.shape[0]), jnp.result_type(x.dtype, y.dtype))
    acc, _ = jax.lax.scan(body, acc0, jnp.arange(xs.shape[0]), unroll=4)
    return acc / xs.shape[0]


def _cost_general_1d(s1: HierarchicalSample, s2: HierarchicalSample, p: float) -> Array:
    """[n1, n2] matrix of W_p^p for weighted measures by merged quantile functions."""
    xs, cx = jax.vmap(_sorted_with_cdf)(s1.atoms, s1.weights)
    ys, cy = jax.vmap(_sorted_with_cdf)(s2.atoms, s2.weights)

    def row(args: tuple[Array, Array]) -> Array:
        xi, ci = args
        return jax.vmap(lambda yj, cj: _wpp_sorted(xi, ci, yj, cj, p))(ys, cy)

    return jax.lax.map(row, (xs, cx))


def _entropic_cost(cost: Array, a: Array, b: Array, epsilon: float, max_iterations: int) -> Array:
    """Transport cost <pi, C> of the entropic OT plan (OTT-JAX Sinkhorn, epsilon relative to mean cost)."""
    from ott.geometry import geometry
    from ott.problems.linear import linear_problem
    from ott.solvers.linear import sinkhorn

    geom = geometry.Geometry(cost_matrix=cost, epsilon=epsilon, relative_epsilon="mean")
    out = sinkhorn.Sinkhorn(max_iterations=max_iterations)(linear_problem.LinearProblem(geom, a=a, b=b))
    return jnp.sum(out.matrix * cost)


def _cost_sinkhorn(
    s1: HierarchicalSample, s2: HierarchicalSample, p: float, epsilon: float, max_iterations: int
) -> Array:
    """[n1, n2] matrix of entropic W_p^p (transport cost of the Sinkhorn plan)."""
    x = s1.atoms if s1.atoms.ndim == 3 else s1.atoms[..., None]
    y = s2.atoms if s2.atoms.ndim == 3 else s2.atoms[..., None]

    def pair(xi: Array, wi: Array, yj: Array, wj: Array) -> Array:
        diff = xi[:, None, :] - yj[None, :, :]
        dist2 = jnp.sum(diff * diff, axis=-1)
        if p == 2:
            c = dist2
        else:
            c = jnp.where(dist2 > 0, jnp.sqrt(jnp.where(dist2 > 0, dist2, 1.0)), 0.0) ** p
        return _entropic_cost(c, wi, wj, epsilon, max_iterations)

    row = lambda args: jax.vmap(lambda yj, wj: pair(args[0], args[1], yj, wj))(y, s2.weights)  # noqa: E731
    return jax.lax.map(row, (x, s1.weights))


def inner_cost_matrix(
    sample1: HierarchicalSample | Any,
    sample2: HierarchicalSample | Any,
    p: float = 1.0,
    *,
    inner: Literal["exact", "sinkhorn"] = "exact",
    epsilon: float = 1e-2,
    max_iterations: int = 2000,
) -> Float[Array, "n1 n2"]:
    """Matrix of inner costs W_p^p(P_i, R_j) between the measures of two hierarchical samples.

    C_ij = W_p^p(P_i, R_j). ``inner="exact"`` (measures on R): sorting, with a
    fast path when both samples have uniform weights and equal m (C_ij =
    mean_k |x_i(k) - y_j(k)|^p over sorted atoms); otherwise merged quantile
    functions. ``inner="sinkhorn"`` (any d): the transport cost <pi_eps, c>
    of the entropic plan, c = |x - y|^p, with epsilon relative to the mean
    cost (OTT-JAX); an upper bound of W_p^p converging to it as epsilon -> 0.

    Args:
        sample1: :class:`HierarchicalSample` or ``[n1, m1]`` / ``[n1, m1, d]`` atoms.
        sample2: likewise, ``[n2, m2(, d)]``, same d.
        p: order ``p >= 1`` (static).
        inner: "exact" (d = 1 only) or "sinkhorn".
        epsilon: entropic regularisation, relative to the mean cost (sinkhorn only).
        max_iterations: Sinkhorn iterations cap (sinkhorn only).

    Returns:
        ``[n1, n2]`` matrix of W_p^p, in (units of the atoms)^p, computed on atoms divided by a
        power of two (exact) and scaled back, so it is accurate wherever W_p^p is representable.

    Raises:
        ValueError: invalid samples (see :func:`hierarchical_sample`), mismatched
            d, unknown ``inner``, or ``inner="exact"`` with d > 1.

    References:
        Catalano & Lavenant, ICML 2024, Section 2; Cuturi, "Sinkhorn distances",
        NeurIPS 2013.

    Examples:
        >>> import jax.numpy as jnp
        >>> inner_cost_matrix(jnp.array([[0.0, 1.0], [2.0, 3.0]]), jnp.array([[0.0, 1.0]]))
        Array([[0.],
               [2.]], dtype=float32)
    """
    s1, s2, p, inner, epsilon, max_iterations = _check_inner(sample1, sample2, p, inner, epsilon, max_iterations)
    return _inner_cost_jit(s1, s2, p, inner, epsilon, max_iterations)


def _check_inner(sample1: Any, sample2: Any, p: Any, inner: Any, epsilon: Any, max_iterations: Any) -> tuple:
    """Host checks of :func:`inner_cost_matrix`'s arguments; 1-D samples come back as ``[n, m]`` atoms."""
    p = check_scalar(p, "p", low=1.0)
    s1 = hierarchical_sample(sample1, name="sample1")
    s2 = hierarchical_sample(sample2, name="sample2")
    _check_pair(s1, s2)
    inner = check_choice(inner, "inner", ("exact", "sinkhorn"))
    max_iterations = check_int(max_iterations, "max_iterations", minimum=1)
    if inner == "exact":
        if s1.atoms.ndim == 3 and s1.atoms.shape[2] > 1:
            raise ValueError(expected("sample1", "measures on R for inner='exact' (atoms [n, m] or [n, m, 1]; "
                                      "use inner='sinkhorn' for d > 1)", f"d = {s1.atoms.shape[2]}", raw=True))
        s1, s2 = _squeeze(s1), _squeeze(s2)
    epsilon = check_scalar(epsilon, "epsilon", positive=True)  # checked even where unused (inner="exact")
    return s1, s2, p, inner, epsilon, max_iterations


@partial(jax.jit, static_argnames=("p", "inner", "epsilon", "max_iterations"))
def _inner_cost_jit(
    s1: HierarchicalSample, s2: HierarchicalSample, p: float, inner: str, epsilon: float, max_iterations: int
) -> Array:
    s1, s2, c = _scaled(s1, s2)
    return _inner_costs(s1, s2, p, inner, epsilon, max_iterations) * c**p


def _inner_costs(
    s1: HierarchicalSample, s2: HierarchicalSample, p: float, inner: str, epsilon: float, max_iterations: int
) -> Array:
    if inner == "exact":
        return _inner_exact(s1, s2, p)
    return _cost_sinkhorn(s1, s2, p, epsilon, max_iterations)


def _scaled(s1: HierarchicalSample, s2: HierarchicalSample) -> tuple[HierarchicalSample, HierarchicalSample, Array]:
    """Both samples' atoms divided by one power of two c >= max |atom| (exact): W_p scales by c."""
    c = pow2_scale(s1.atoms, s2.atoms)
    return (HierarchicalSample(s1.atoms / c, s1.weights, s1.uniform),
            HierarchicalSample(s2.atoms / c, s2.weights, s2.uniform), c)


def _inner_exact(s1: HierarchicalSample, s2: HierarchicalSample, p: float) -> Array:
    if s1.uniform and s2.uniform and s1.m == s2.m:
        return _cost_uniform_1d(s1.atoms, s2.atoms, p)
    return _cost_general_1d(s1, s2, p)


def _squeeze(s: HierarchicalSample) -> HierarchicalSample:
    if s.atoms.ndim == 3:
        return HierarchicalSample(s.atoms[..., 0], s.weights, s.uniform)
    return s


def _check_pair(s1: HierarchicalSample, s2: HierarchicalSample) -> None:
    if s1.dim != s2.dim:
        raise ValueError(expected("sample1, sample2", "measures in the same dimension d",
                                  f"atoms {tuple(s1.atoms.shape)} and {tuple(s2.atoms.shape)}", raw=True))


# ----------------------------------------------------------------------------
# Outer optimal transport
# ----------------------------------------------------------------------------


def _host_assignment(cost: np.ndarray) -> np.ndarray:
    from scipy.optimize import linear_sum_assignment

    cost = np.asarray(cost, dtype=np.float64)
    r, c = linear_sum_assignment(cost)
    return np.asarray(cost[r, c].mean())


def _host_emd(cost: np.ndarray) -> np.ndarray:
    cost = np.asarray(cost, dtype=np.float64)
    n1, n2 = cost.shape
    a = np.full(n1, 1.0 / n1)
    b = np.full(n2, 1.0 / n2)
    try:
        import ot

        return np.asarray(ot.emd2(a, b, cost))
    except ImportError:  # exact LP with SciPy's HiGHS when POT is absent
        from scipy.optimize import linprog

        rows = np.kron(np.eye(n1), np.ones((1, n2)))
        cols = np.kron(np.ones((1, n1)), np.eye(n2))
        res = linprog(cost.ravel(), A_eq=np.vstack([rows, cols]), b_eq=np.concatenate([a, b]), bounds=(0, None))
        return np.asarray(res.fun)


def _exact_outer(cost: Array) -> Array:
    fn = _host_assignment if cost.shape[0] == cost.shape[1] else _host_emd
    if np.dtype(cost.dtype).itemsize <= 4:
        out = jax.ShapeDtypeStruct((), cost.dtype)
        dt = np.dtype(cost.dtype)
        return jax.pure_callback(lambda c: fn(c).astype(dt), out, cost, vmap_method="sequential")
    # 64-bit values travel as uint32 pairs: pure_callback re-canonicalises operands and
    # results with the runtime thread's dtype settings, which drops float64 to float32
    # when x64 was enabled by the thread-local ``jax.enable_x64`` context.
    packed = jax.lax.bitcast_convert_type(cost.astype(jnp.float64), jnp.uint32)

    def host(u: np.ndarray) -> np.ndarray:
        c = np.ascontiguousarray(np.asarray(u, np.uint32)).view(np.float64)[..., 0]
        return np.asarray([fn(c)], np.float64).view(np.uint32)

    res = jax.pure_callback(host, jax.ShapeDtypeStruct((2,), jnp.uint32), packed, vmap_method="sequential")
    return jax.lax.bitcast_convert_type(res, jnp.float64).astype(cost.dtype)


def outer_ot_cost(
    cost: Float[Array, "n1 n2"],
    *,
    outer: Literal["exact", "sinkhorn"] = "exact",
    epsilon: float = 1e-2,
    max_iterations: int = 2000,
) -> Float[Array, ""]:
    """Optimal transport cost between uniform measures on the rows and columns of a cost matrix.

    min_{pi in Pi(1/n1, 1/n2)} sum_ij pi_ij C_ij. ``outer="exact"``: for
    n1 = n2 an optimal assignment (SciPy ``linear_sum_assignment``), else the
    exact LP (POT ``ot.emd2``, or SciPy HiGHS without POT), both through
    ``jax.pure_callback`` (jit- and vmap-compatible; vmapped calls run one by
    one on the host). ``outer="sinkhorn"``: <pi_eps, C> of the entropic plan
    (OTT-JAX, epsilon relative to the mean cost), jit-native.

    Args:
        cost: ``[n1, n2]`` cost matrix.
        outer: "exact" or "sinkhorn".
        epsilon: relative entropic regularisation (sinkhorn only).
        max_iterations: Sinkhorn iteration cap.

    Returns:
        Scalar transport cost (units of ``cost``).

    Integer costs are converted to the default float dtype exactly; float16/bfloat16 costs are
    computed in float32 and the result is cast back.

    Raises:
        ValueError: ``cost`` not a non-empty 2-D matrix or with NaN/inf entries (under ``jit``: a
            run-time error through ``error_if``), unknown ``outer``, ``epsilon <= 0`` or
            ``max_iterations < 1``.
        TypeError: ``None``, bool or non-numeric ``cost``.

    References:
        G. Peyre, M. Cuturi. "Computational Optimal Transport", 2019, Chapters 3 and 4.

    Examples:
        >>> import jax.numpy as jnp
        >>> float(outer_ot_cost(jnp.array([[1.0, 0.0], [0.0, 1.0]])))
        0.0
    """
    cost, out_dtype = real_array(cost, "cost", "a cost matrix")
    if cost.ndim != 2 or cost.shape[0] < 1 or cost.shape[1] < 1:
        raise ValueError(expected("cost", "a non-empty [n1, n2] matrix", f"shape {tuple(cost.shape)}", raw=True))
    cost = checked_finite(cost, "cost", "finite costs")
    outer, epsilon, max_iterations = _check_outer(outer, epsilon, max_iterations)
    return _outer_jit(cost, outer, epsilon, max_iterations).astype(out_dtype)


def _check_outer(outer: Any, epsilon: Any, max_iterations: Any, eps_name: str = "epsilon") -> tuple:
    outer = check_choice(outer, "outer", ("exact", "sinkhorn"))
    max_iterations = check_int(max_iterations, "max_iterations", minimum=1)
    epsilon = check_scalar(epsilon, eps_name, positive=True)  # checked even where unused (outer="exact")
    return outer, epsilon, max_iterations


@partial(jax.jit, static_argnames=("outer", "epsilon", "max_iterations"))
def _outer_jit(cost: Array, outer: str, epsilon: float, max_iterations: int) -> Array:
    return _outer(cost, outer, epsilon, max_iterations)


def _outer(cost: Array, outer: str, epsilon: float, max_iterations: int) -> Array:
    if outer == "exact":
        return _exact_outer(cost)
    n1, n2 = cost.shape
    a = jnp.full((n1,), 1.0 / n1, cost.dtype)
    b = jnp.full((n2,), 1.0 / n2, cost.dtype)
    return _entropic_cost(cost, a, b, epsilon, max_iterations)


# ----------------------------------------------------------------------------
# WoW_p
# ----------------------------------------------------------------------------


def wow(
    sample1: HierarchicalSample | Any,
    sample2: HierarchicalSample | Any,
    p: float = 1.0,
    *,
    inner: Literal["exact", "sinkhorn"] = "exact",
    outer: Literal["exact", "sinkhorn"] = "exact",
    epsilon: float = 1e-2,
    outer_epsilon: float = 1e-2,
    max_iterations: int = 2000,
) -> WoWResult:
    """Empirical Wasserstein-over-Wasserstein distance WoW_p between two hierarchical samples.

    WoW_p^p = min_{pi in Pi(1/n1, 1/n2)} sum_ij pi_ij W_p^p(P_i, R_j), the
    p-Wasserstein distance between the empirical laws of the measures, with
    the inner W_p as ground metric. Exact by default (1-D inner W_p by sorting,
    exact outer OT); entropic options for d > 1 (``inner="sinkhorn"``) and for
    a jit-native outer step (``outer="sinkhorn"``).

    Args:
        sample1: :class:`HierarchicalSample` or atoms ``[n1, m1]`` / ``[n1, m1, d]``.
        sample2: likewise ``[n2, m2(, d)]``; n1 != n2 and m1 != m2 allowed.
        p: order ``p >= 1`` (static).
        inner: "exact" (d = 1) or "sinkhorn" (any d).
        outer: "exact" (host assignment / LP) or "sinkhorn".
        epsilon: inner entropic regularisation relative to the mean cost.
        outer_epsilon: outer entropic regularisation relative to the mean cost.
        max_iterations: Sinkhorn iteration cap.

    Returns:
        :class:`WoWResult`: ``value`` (scalar WoW_p in the units of the atoms) and
        ``inner_costs`` (the ``[n1, n2]`` matrix of W_p^p). The atoms are divided by one power
        of two c >= max |atom| before |x - y|^p is formed (exact), so ``value`` is accurate in
        float32 from 1e-30 to 1e30; ``inner_costs`` is scaled back by c^p and under/overflows
        only where W_p^p itself is not representable.

    Raises:
        ValueError / TypeError: invalid samples, ``p < 1``, unknown options,
            non-positive epsilons, ``max_iterations < 1``.

    References:
        Catalano & Lavenant, "Hierarchical Integral Probability Metrics: A
        distance on random probability measures with low sample complexity",
        ICML 2024, Eq. (2).

    Examples:
        >>> import jax.numpy as jnp
        >>> x = jnp.array([[0.0, 1.0], [2.0, 3.0]])
        >>> float(wow(x, x + 0.5).value)
        0.5
    """
    s1, s2, p, inner, epsilon, max_iterations = _check_inner(sample1, sample2, p, inner, epsilon, max_iterations)
    outer, outer_epsilon, _ = _check_outer(outer, outer_epsilon, max_iterations, "outer_epsilon")
    return _wow_jit(s1, s2, p, inner, epsilon, outer, outer_epsilon, max_iterations)


@partial(jax.jit, static_argnames=("p", "inner", "epsilon", "outer", "outer_epsilon", "max_iterations"))
def _wow_jit(
    s1: HierarchicalSample, s2: HierarchicalSample, p: float, inner: str, epsilon: float, outer: str,
    outer_epsilon: float, max_iterations: int,
) -> WoWResult:
    s1, s2, c = _scaled(s1, s2)  # WoW_p scales with the atoms: computed on atoms in [-1, 1]
    cost = _inner_costs(s1, s2, p, inner, epsilon, max_iterations)
    total = _outer(cost, outer, outer_epsilon, max_iterations)
    return WoWResult(value=c * jnp.maximum(total, 0.0) ** (1.0 / p), inner_costs=cost * c**p)
