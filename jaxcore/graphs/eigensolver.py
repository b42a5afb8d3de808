"""The k smallest eigenpairs of a graph's normalised Laplacian by thick-restart block Lanczos.

``L = I - D^{-1/2} A D^{-1/2}`` has its spectrum in [0, 2]; its k smallest eigenpairs are the k
largest of ``M = D^{-1/2} A D^{-1/2}`` (spectrum in [-1, 1]). :func:`smallest_eigenpairs` builds a
block Krylov basis of M from a random block: each step applies M to the newest block (one block
mat-vec), orthogonalises the product against the whole basis (two passes) and takes Ritz pairs of
``H = Q^T M Q`` (Rayleigh-Ritz over the whole basis: the best polynomial of its degree, where a
Chebyshev filter must guess the unwanted interval). A full basis restarts from its best Ritz vectors
and the next block (thick restart). The loop stops when every wanted residual ``||M x - theta x||_2``
(unit ``x``), first from the Lanczos relation and then recomputed from the stored products, is at
most ``tol``, so a returned ``converged`` is a checked statement, not an assumption.

The mat-vec works in degree-sorted vertex order on the adjacency table cut into row blocks, each
stored transposed (slot column j of a block is one contiguous row) and looping only up to its own
largest degree, 8 slot columns a step: about ``nnz`` gathered rows of the block, one gather per
slot and no scatter. The sort, relabelling and transposes are paid once per solve.

The Chebyshev-filtered subspace iteration (``_subspace_iteration``) stays for the contracted graph's
dense query (:mod:`jaxcore.graphs.contracted`).

References:
    G. Golub, R. Underwood. "The block Lanczos method for computing eigenvalues." Mathematical
    Software III, 1977 (block Lanczos).
    K. Wu, H. Simon. "Thick-restart Lanczos method for large symmetric eigenvalue problems."
    SIAM J. Matrix Anal. Appl. 22(2), 2000 (thick restart).
    Y. Zhou, Y. Saad. "A Chebyshev-Davidson algorithm for large symmetric eigenproblems."
    SIAM J. Matrix Anal. Appl. 29(3), 2007 (Chebyshev-filtered subspace iteration).
    U. von Luxburg. "A tutorial on spectral clustering." Statistics and Computing 17, 2007
    (the normalised Laplacian L_sym).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxcore._util import as_float_array, check_finite, check_int, check_key, check_scalar, expected, is_concrete

from .graph import DynamicGraph
from .clustering import cluster_bucket

__all__ = ["EigenResult", "laplacian_matvec", "smallest_eigenpairs"]


class EigenResult(NamedTuple):
    """Result of :func:`smallest_eigenpairs`.

    Attributes:
        eigenvalues: ``[k]`` ascending eigenvalues of L_sym (in [0, 2]).
        eigenvectors: ``[vertex_capacity, k]`` orthonormal eigenvectors (0 on padding and isolated vertices).
        residual_norms: ``[k]`` ``||L x - lambda x||_2`` of each unit eigenvector.
        num_iterations: int32 scalar, block Lanczos steps done (one block mat-vec each).
        converged: bool scalar, every residual norm ``<= tol``.

    Examples:
        >>> EigenResult._fields
        ('eigenvalues', 'eigenvectors', 'residual_norms', 'num_iterations', 'converged')
    """

    eigenvalues: Float[Array, " k"]
    eigenvectors: Float[Array, "V k"]
    residual_norms: Float[Array, " k"]
    num_iterations: Int[Array, ""]
    converged: Bool[Array, ""]


_UNROLL = 8        # adjacency slot columns per loop step of the mat-vec (the table width is a multiple of it)
_ROW_BLOCKS = 8    # row blocks of the degree-sorted table, each looping only to its own largest degree


class _Operator(NamedTuple):
    """``A`` of the graph in degree-sorted row order, as a blocked, transposed adjacency table, and ``D^{-1/2}``.

    Row ``i`` of the table is vertex ``order[i]`` (descending incident-edge count; ``inverse`` maps
    back). Row block ``r`` (``V / R`` consecutive sorted rows) holds its table transposed,
    ``[W, V / R]``: slot column ``j`` of the block is one contiguous row, and the block's loop stops at
    its first row's count, so the work is about ``nnz`` gathered rows of ``x`` rather than ``V * W``.
    The neighbour ids stay the graph's own (``x`` is gathered in the graph's order) and the weights
    are the raw ``w_uv``: ``D^{-1/2}`` scales the vectors, ``M x = D^{-1/2} A (D^{-1/2} x)``, so the
    table costs three row gathers and two transposes to build.
    """

    nbr: Array      # [R, W, V/R] int32 neighbour (graph ids) of each slot
    weight: Array   # [R, W, V/R] slot weight w_uv (0 on empty slots)
    top: Array      # [R] int32 slot columns each block needs (its largest count)
    inverse: Array  # [V] vertex -> sorted row
    dinv: Array     # [V] D^{-1/2} (0 on padding and isolated vertices)
    active: Array   # [V] bool: the vertex has an edge of positive weight


def _degree_order(count: Array, width: int) -> Array:
    """Vertices by descending ``count`` (``<= width``; ties by id), ``[V]`` int32."""
    v = count.shape[0]
    if (width + 1) * v < 2**31:
        # a one-operand sort of packed (count, id) keys: a quarter of argsort's time on CPU (0.4 vs 1.5 ms, V = 8192)
        keys = (width - count).astype(jnp.int32) * v + jnp.arange(v, dtype=jnp.int32)
        return (jnp.sort(keys) % v).astype(jnp.int32)
    return jnp.argsort(-count, stable=True).astype(jnp.int32)


def _operator(graph: DynamicGraph, edge_weight: Array) -> _Operator:
    v, w = graph.neighbors.shape
    r = _ROW_BLOCKS if v >= 64 * _ROW_BLOCKS else 1
    order = _degree_order(graph.count, w)
    inverse = jnp.zeros(v, jnp.int32).at[order].set(jnp.arange(v, dtype=jnp.int32))
    count = graph.count[order]
    valid = jnp.arange(w)[None, :] < count[:, None]
    weight = jnp.where(valid, edge_weight[graph.edge_ids[order]], 0).astype(edge_weight.dtype)
    deg = jnp.sum(weight, axis=1)[inverse]
    active = (deg > 0) & (jnp.arange(v) < graph.num_vertices)
    dinv = jnp.where(active, jax.lax.rsqrt(jnp.where(active, deg, 1)), 0)
    blocks = lambda a: a.reshape(r, v // r, w).transpose(0, 2, 1)   # per-block transposes: cheaper on CPU
    return _Operator(blocks(graph.neighbors[order]), blocks(weight), count[:: v // r], inverse, dinv, active)


def _apply(op: _Operator, x: Array) -> Array:
    """``M x = D^{-1/2} A D^{-1/2} x`` for ``x`` ``[V, b]``: per row block, ``sum_j w[:, j] * y[nbr[:, j]]``.

    A loop over the row blocks around a loop over each block's slot columns (one copy of the gather
    body in the program: compile time stays that of a single block); the sorted rows go back to the
    graph's order with one ``[V, b]`` gather.
    """
    r, w, vb = op.nbr.shape
    y = x * op.dinv[:, None]

    def block(blk: Array, out: Array) -> Array:
        def body(j: Array, acc: Array) -> Array:
            # only the step's slot rows of the block are sliced (slicing the whole block copied it per mat-vec)
            start = (jnp.asarray(blk, jnp.int32), jnp.asarray(j * _UNROLL, jnp.int32), jnp.zeros((), jnp.int32))
            cols = jax.lax.dynamic_slice(op.nbr, start, (1, _UNROLL, vb))[0]
            ws = jax.lax.dynamic_slice(op.weight, start, (1, _UNROLL, vb))[0]
            for i in range(_UNROLL):
                acc = acc + ws[i][:, None] * y[cols[i]]
            return acc

        trips = (op.top[blk] + _UNROLL - 1) // _UNROLL
        acc = jax.lax.fori_loop(0, trips, body, jnp.zeros((vb, x.shape[1]), x.dtype))
        return jax.lax.dynamic_update_slice_in_dim(out, acc, blk * vb, axis=0)

    return jax.lax.fori_loop(0, r, block, jnp.zeros_like(x))[op.inverse] * op.dinv[:, None]


def _weights_or_graph(graph: DynamicGraph, edge_weight: Any) -> Array:
    if not isinstance(graph, DynamicGraph):
        raise TypeError(expected("graph", "a DynamicGraph", type(graph).__name__, raw=True))
    if edge_weight is None:
        return graph.weight
    try:
        w = jnp.asarray(edge_weight)
    except TypeError as exc:
        raise TypeError(expected("edge_weight", "a float array", type(edge_weight).__name__, raw=True)) from exc
    if w.shape != graph.weight.shape:
        raise ValueError(expected("edge_weight", f"one weight per edge slot, shape {graph.weight.shape}",
                                  f"shape {w.shape}", raw=True))
    if not jnp.issubdtype(w.dtype, jnp.floating):
        raise TypeError(expected("edge_weight", "a float array", f"dtype {w.dtype}", raw=True))
    a = np.asarray(w) if is_concrete(w) else np.zeros(1)
    if not np.all(np.isfinite(a) & (a >= 0)):
        raise ValueError(expected("edge_weight", "finite weights >= 0", a[~(np.isfinite(a) & (a >= 0))][0]))
    return w.astype(graph.weight.dtype)


@jax.jit
def _laplacian_matvec(graph: DynamicGraph, edge_weight: Array, x: Array) -> Array:
    op = _operator(graph, edge_weight)
    return x - jnp.where(op.active[:, None], _apply(op, x), 0)


def laplacian_matvec(graph: DynamicGraph, x: Float[Array, "V b"], edge_weight: Any = None) -> Float[Array, "V b"]:
    """The normalised Laplacian times a block of vectors, ``L_sym x = x - D^{-1/2} A D^{-1/2} x``.

    Isolated and padding vertices have ``(L x)_v = x_v`` (their row of ``D^{-1/2}`` is 0).

    Args:
        graph: the graph; its adjacency table gives the sparsity.
        x: ``[vertex_capacity, b]`` (or ``[vertex_capacity]``) float vectors.
        edge_weight: ``[edge_capacity]`` weights to use instead of ``graph.weight`` (a sparsifier's).

    Returns:
        ``L_sym x``, shaped like ``x``.

    Raises:
        TypeError, ValueError: a non-graph, ``x`` not real or not shaped ``[vertex_capacity, ...]``,
            NaN/inf in ``x``, bad weights.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.graphs import from_edges
        >>> g = from_edges([0], [1])
        >>> laplacian_matvec(g, jnp.zeros(64).at[0].set(1.0))[:2].tolist()
        [1.0, -1.0]
    """
    w = _weights_or_graph(graph, edge_weight)
    x = as_float_array(x, "x")
    check_finite(x, "x")
    if x.ndim not in (1, 2) or x.shape[0] != graph.vertex_capacity:
        raise ValueError(expected("x", f"an array [{graph.vertex_capacity}, b]", f"shape {x.shape}", raw=True))
    vec = x.ndim == 1
    out = _laplacian_matvec(graph, w, (x[:, None] if vec else x).astype(w.dtype))
    return out[:, 0] if vec else out


def _orthonormalise(y: Array, fill: Array) -> Array:
    """Orthonormal columns spanning ``y`` ``[V, b]``: classical Gram-Schmidt, each column projected twice (CGS2).

    Matmuls only (``O(V b^2)``), where a LAPACK Householder QR on CPU ran 0.3 ms to over 100 ms on a busy
    machine. A column that is (numerically) in the span of the earlier ones, as a strong filter makes
    the block's columns, is replaced by the same column of ``fill`` (the random start block), so the
    block keeps its dimension; one left without a direction comes out 0 (its Ritz pair is never accepted).
    The fill column is projected only where it is needed (a ``cond``). A block conditioned well enough takes
    Cholesky QR twice instead (matmuls: a quarter of the time of the 2 b sequential projections).
    """

    def project(q: Array, v: Array) -> tuple[Array, Array]:
        u = v - q @ (q.T @ v)
        u = u - q @ (q.T @ u)
        n = jnp.linalg.norm(u)
        return u, n > 100 * jnp.finfo(y.dtype).eps * jnp.linalg.norm(v)

    y = y / jnp.maximum(jnp.max(jnp.abs(y), axis=0), jnp.finfo(y.dtype).tiny)

    def body(j: Array, q: Array) -> Array:
        u, ok = project(q, jax.lax.dynamic_index_in_dim(y, j, axis=1, keepdims=False))
        u, ok = jax.lax.cond(ok, lambda _: (u, ok),
                             lambda _: project(q, jax.lax.dynamic_index_in_dim(fill, j, axis=1, keepdims=False)),
                             None)
        n = jnp.linalg.norm(u)
        return jax.lax.dynamic_update_index_in_dim(q, jnp.where(ok, u / jnp.where(ok, n, 1.0), 0.0), j, axis=1)

    def cgs2(_: Any) -> Array:
        return jax.lax.fori_loop(0, y.shape[1], body, jnp.zeros_like(y))

    # Cholesky QR twice (two thin matmuls and a b x b factorisation each) where the block is conditioned well
    # enough for it (its Gram matrix factors, the result is finite and orthonormal to 1e-3), else CGS2
    eye = jnp.eye(y.shape[1], dtype=y.dtype)

    def chol_pass(q: Array) -> Array:
        g = q.T @ q
        lower = jnp.linalg.cholesky(0.5 * (g + g.T))
        return q @ jax.scipy.linalg.solve_triangular(lower, eye, lower=True).T

    q = chol_pass(chol_pass(y))
    good = jnp.all(jnp.isfinite(q)) & (jnp.max(jnp.abs(q.T @ q - eye)) < 1e-3)
    return jax.lax.cond(good, lambda _: q, cgs2, None)


_FIRST_CUT = 0.0      # the first filter's cut (no Ritz values yet): the middle of M's spectrum [-1, 1]
_DEGREE_MARGIN = 3.0   # an adaptive degree aims at tol / 3, so that one more iteration is rarely needed
_LANCZOS_STEPS = 48    # steps of the bottom-estimating Lanczos column that are kept (then its estimate stays)


def _lowest_ritz_bound(alpha: Array, beta: Array, num: Array) -> Array:
    """``theta_min - |beta_last s_last|`` of the Lanczos tridiagonal ``(alpha, beta)`` after ``num`` steps: the
    smallest Ritz value less its residual (Zhou & Saad's bound estimator, at the lower end); -1 with < 2 steps."""
    n = alpha.shape[0]
    idx = jnp.arange(n)
    on = idx < num
    off = jnp.where(idx[:-1] < num - 1, beta[:-1], 0.0)
    t = jnp.diag(jnp.where(on, alpha, 4.0)) + jnp.diag(off, 1) + jnp.diag(off, -1)
    vals, vecs = jnp.linalg.eigh(t)
    last = vecs[jnp.maximum(num - 1, 0), 0]
    bound = vals[0] - jnp.abs(beta[jnp.maximum(num - 1, 0)] * last)
    return jnp.where(num >= 2, jnp.clip(bound, -1.0, 1.0), -1.0)


def _subspace_iteration(key: Array, mop: Any, active: Array, tol: Array, k: Array, block_size: int,
                        degree: int, max_degree: int, adaptive: bool, max_iterations: int,
                        bottom: bool = False) -> tuple:
    """Chebyshev-filtered subspace iteration for the k largest eigenpairs of a symmetric ``mop`` (spectrum in
    [-1, 1]; ``active`` ``[V]`` bool: the rows the random start block spans).

    Returns ``(x [V, b], theta [b] descending, residuals [b], iterations, mat-vecs, worst wanted residual)``.

    The first filter has degree ``degree`` and the interval ``[-1, _FIRST_CUT]`` (a random block has no
    Ritz values worth a Rayleigh-Ritz step); later ones damp ``[low, cut]``, ``cut`` the block's smallest
    Ritz value and, when ``adaptive``, take the degree ``m`` at which the Chebyshev growth at the k-th
    Ritz value reaches the residual reduction still needed: ``T_m(t_k) >= margin * res / tol``,
    ``m = acosh(margin * res / tol) / acosh(t_k)``, clipped to ``[2, max_degree]``. ``low`` is -1, or
    with ``bottom`` the lower end of the spectrum as a Lanczos column riding along in every mat-vec
    bounds it (:func:`_lowest_ritz_bound`): where the spectrum's bottom is far above -1 (a graph far
    from bipartite: about ``-2 / sqrt(degree)`` for a random one) the filter then grows faster.
    """
    dtype, v = tol.dtype, active.shape[0]
    x0 = jnp.where(active[:, None], jax.random.normal(key, (v, block_size), dtype), 0)
    nl = _LANCZOS_STEPS
    l0 = jnp.where(active, jax.random.normal(jax.random.fold_in(key, 1), (v,), dtype), 0)
    # Lanczos state: (previous, current unit vector, steps, alphas, betas)
    lz0 = (jnp.zeros_like(l0), l0 / jnp.linalg.norm(l0), jnp.zeros((), jnp.int32), jnp.zeros(nl, dtype),
           jnp.zeros(nl, dtype))

    def lanczos(lz: tuple, ml: Array) -> tuple:
        prev, cur, n, alpha, beta = lz
        a = cur @ ml
        w = ml - a * cur - beta[jnp.maximum(n - 1, 0)] * jnp.where(n > 0, prev, 0.0)
        bnorm = jnp.linalg.norm(w)
        go = (n < nl) & (bnorm > 100 * jnp.finfo(dtype).eps)   # a tiny beta: an invariant subspace, estimate final
        alpha = jnp.where(go, alpha.at[jnp.minimum(n, nl - 1)].set(a), alpha)
        beta = jnp.where(go, beta.at[jnp.minimum(n, nl - 1)].set(bnorm), beta)
        nxt = w / jnp.where(go, bnorm, 1.0)
        return jnp.where(go, cur, prev), jnp.where(go, nxt, cur), jnp.where(go, n + 1, n), alpha, beta

    def apply(y: Array, lz: tuple) -> tuple[Array, tuple]:
        if not bottom:
            return mop(y), lz
        z = mop(jnp.concatenate([y, lz[1][:, None]], axis=1))
        return z[:, :-1], lanczos(lz, z[:, -1])

    def rayleigh_ritz(y: Array, lz: tuple) -> tuple[Array, Array, Array, tuple]:
        q = _orthonormalise(y, x0)
        mq, lz = apply(q, lz)
        h = q.T @ mq
        theta, vecs = jnp.linalg.eigh(0.5 * (h + h.T))
        theta, vecs = theta[::-1], vecs[:, ::-1]  # descending: the wanted ones first
        x = q @ vecs
        res = jnp.linalg.norm(mq @ vecs - x * theta, axis=0)
        # a column the block had lost (zero after orthogonalisation) is no eigenvector, whatever its residual
        return x, theta, jnp.where(jnp.linalg.norm(x, axis=0) > 0.5, res, jnp.inf), lz

    def chebyshev(x: Array, low: Array, cut: Array, m: Array, lz: tuple) -> tuple[Array, tuple]:
        # T_{j+1} = 2 t T_j - T_{j-1} with T_1 = t T_0 as its j = 0 case (factor 1, no T_{-1}): one mat-vec site
        c = 0.5 * (cut + low)
        e = 0.5 * (cut - low)

        def body(j: Array, carry: tuple) -> tuple:
            y0, y1, lz = carry
            first = j == 0
            my1, lz = apply(y1, lz)
            y2 = jnp.where(first, 1.0, 2.0) * (my1 - c * y1) / e - jnp.where(first, 0.0, 1.0) * y0
            s = jnp.maximum(jnp.max(jnp.abs(y2), axis=0), jnp.finfo(dtype).tiny)
            return y1 / s, y2 / s, lz

        _, y, lz = jax.lax.fori_loop(0, m, body, (jnp.zeros_like(x), x, lz))
        return y, lz

    wanted = jnp.arange(block_size) < k

    def worst(res: Array) -> Array:
        return jnp.max(jnp.where(wanted, res, 0.0))

    def next_degree(theta: Array, res: Array, low: Array, cut: Array) -> Array:
        if not adaptive:
            return jnp.asarray(degree, jnp.int32)
        c, e = 0.5 * (cut + low), 0.5 * (cut - low)
        g_k = jnp.arccosh(jnp.maximum((theta[jnp.maximum(k - 1, 0)] - c) / e, 1.0 + 1e-6))
        g_1 = jnp.arccosh(jnp.maximum((theta[0] - c) / e, 1.0 + 1e-6))
        need = jnp.maximum(_DEGREE_MARGIN * worst(res) / tol, 1.0)
        m = jnp.ceil(jnp.arccosh(need) / g_k)
        # T_m(t_1) / T_m(t_k) ~ exp(m (g_1 - g_k)) at most eps^(-1/3): a stronger filter would leave the k-th
        # direction below the columns' rounding (the block loses it: the classic over-filtering failure)
        m = jnp.minimum(m, jnp.floor(-jnp.log(jnp.finfo(dtype).eps) / 3.0 / jnp.maximum(g_1 - g_k, 1e-6)))
        return jnp.clip(jnp.nan_to_num(m, nan=max_degree), 2, max_degree).astype(jnp.int32)

    def cond(state: tuple) -> Array:
        _, _, res, it, _, _ = state
        return (it < max_iterations) & ~(worst(res) <= tol)

    def body(state: tuple) -> tuple:
        x, theta, res, it, nmv, lz = state
        first = it == 0
        low = _lowest_ritz_bound(lz[3], lz[4], lz[2]) if bottom else jnp.asarray(-1.0, dtype)
        low = jnp.where(first, -1.0, low)
        cut = jnp.where(first, _FIRST_CUT, jnp.clip(theta[-1], low + 1e-3, 1.0 - 1e-3))
        m = jnp.where(first, degree, next_degree(theta, res, low, cut))
        y, lz = chebyshev(x, low, cut, m, lz)
        x, theta, res, lz = rayleigh_ritz(y, lz)
        return x, theta, res, it + 1, nmv + m + 1, lz

    init = (x0, jnp.zeros(block_size, dtype), jnp.full(block_size, jnp.inf, dtype), jnp.zeros((), jnp.int32),
            jnp.zeros((), jnp.int32), lz0)
    x, theta, res, it, nmv, _ = jax.lax.while_loop(cond, body, init)
    return x, theta, res, it, nmv, worst(res)


@partial(jax.jit, static_argnames=("kmax", "block_size", "degree", "max_iterations"))
def _chfsi(key: Array, graph: DynamicGraph, edge_weight: Array, tol: Array, k: Array, kmax: int, block_size: int,
           degree: int | None, max_iterations: int) -> EigenResult:
    """``k`` (traced) eigenpairs in ``kmax`` (static) slots, zero past k: one compilation per k bucket."""
    op = _operator(graph, edge_weight)
    first = _FIRST_DEGREE if degree is None else degree
    x, theta, res, it, _, bad = _subspace_iteration(
        key, lambda y: _apply(op, y), op.active, tol, k, block_size, first,
        _MAX_DEGREE, degree is None, max_iterations, bottom=True)
    on = jnp.arange(kmax) < k
    return EigenResult(jnp.where(on, 1.0 - theta[:kmax], 0.0), jnp.where(on[None, :], x[:, :kmax], 0.0),
                       jnp.where(on, res[:kmax], 0.0), it, bad <= tol)


_FIRST_DEGREE = 5
_MAX_DEGREE = 32


def smallest_eigenpairs(key: Any, graph: DynamicGraph, k: int, *, edge_weight: Any = None,
                        block_size: int | None = None, degree: int | None = None, tol: float | None = None,
                        max_iterations: int = 200) -> EigenResult:
    """The k smallest eigenpairs of the normalised Laplacian L_sym, with a residual convergence test.

    Chebyshev-filtered subspace iteration on ``M = I - L_sym`` (module docstring); the block of
    ``block_size`` vectors starts random (``key``), and one more column, a Lanczos vector, rides along
    to bound the bottom of M's spectrum. An iteration of degree ``m`` costs ``m + 1`` block mat-vecs,
    ``O((m + 1) * nnz * (block_size + 1))``; by default the first has degree 5 and each later one the
    degree its Ritz values and residuals call for (at most 32).

    Args:
        key: a ``jax.random.key`` for the random start block.
        graph: the graph (padding and isolated vertices are excluded: eigenvector entries 0).
        k: number of eigenpairs (int, ``1 <= k < block_size``, at most the number of vertices with an
            edge of positive weight).
        edge_weight: ``[edge_capacity]`` weights instead of ``graph.weight`` (a sparsifier's).
        block_size: subspace size (default ``K + max(8, K // 2) - 1``, K = k rounded up to a power of two
            >= 8, so that every k of one bucket shares one compiled program and the mat-vec, with the
            Lanczos column, is ``K + max(8, K // 2)`` wide).
        degree: a fixed Chebyshev polynomial degree per iteration (int >= 1); ``None`` (default): adaptive,
            ``m = acosh(3 res / tol) / acosh(t_k)`` (``t_k``: the k-th Ritz value mapped to the filter's
            interval, where ``T_m`` grows as ``cosh(m acosh t_k)``).
        tol: residual tolerance on ``||L x - lambda x||_2`` (default 1e-4 in float32, 1e-8 in float64).
        max_iterations: iteration cap (int >= 1); ``converged`` says whether ``tol`` was met.

    Returns:
        :class:`EigenResult`.

    Raises:
        TypeError: a key that is not a PRNG key, a non-graph, non-int sizes.
        ValueError: ``k`` out of range, ``tol`` not positive, bad weights, a graph without edges.

    References:
        Y. Zhou, Y. Saad, SIAM J. Matrix Anal. Appl. 2007 (Chebyshev-filtered subspace iteration);
        Y. Zhou, Y. Saad, M. Tiago, J. Chelikowsky, J. Comput. Phys. 219(1), 2006 (the spectrum's bound
        from a few Lanczos steps).

    Examples:
        >>> import jax
        >>> from jaxcore.graphs import from_edges
        >>> g = from_edges([0, 1, 2, 3, 4, 5, 2], [1, 2, 0, 4, 5, 3, 3])   # two triangles and a bridge
        >>> r = smallest_eigenpairs(jax.random.key(0), g, 2, block_size=4)
        >>> bool(r.converged), abs(float(r.eigenvalues[0])) < 1e-4
        (True, True)
    """
    key = check_key(key)
    w, k, kmax, b, degree, tol, max_iterations = _solver_args(graph, k, "k", edge_weight, block_size, degree, tol,
                                                              max_iterations)
    r = _chfsi(key, graph, w, tol, jnp.asarray(k, jnp.int32), kmax, b, degree, max_iterations)
    return EigenResult(r.eigenvalues[:k], r.eigenvectors[:, :k], r.residual_norms[:k], r.num_iterations, r.converged)


def _active_count(graph: DynamicGraph, w: Array, own_weights: bool) -> int:
    """Vertices with an edge of positive weight (host): the incident-edge counts for the graph's own weights
    (all > 0), one pass over the edges for other weights."""
    if own_weights:
        return int(np.count_nonzero(np.asarray(graph.count)[: int(graph.num_vertices)]))
    m = int(graph.num_edges)
    on = np.asarray(w)[:m] > 0
    seen = np.zeros(graph.vertex_capacity, bool)
    seen[np.asarray(graph.src)[:m][on]] = True
    seen[np.asarray(graph.dst)[:m][on]] = True
    return int(np.count_nonzero(seen))


def _solver_args(graph: Any, k: Any, k_name: str, edge_weight: Any, block_size: Any, degree: Any, tol: Any,
                 max_iterations: Any) -> tuple:
    """Checked eigensolver arguments: (weights, k, k bucket, block size, degree, tol array, max_iterations)."""
    w = _weights_or_graph(graph, edge_weight)
    top, active = graph.vertex_capacity - 1, graph.vertex_capacity
    if is_concrete(graph, w):  # k eigenpairs need k vertices of positive degree (the rest is padding)
        active = _active_count(graph, w, edge_weight is None)
        if active == 0:
            raise ValueError(expected("graph", "at least one edge of positive weight", "none", raw=True))
        top = min(top, active)
    k = check_int(k, k_name, minimum=1, maximum=top)
    kmax = cluster_bucket(k)
    # one column under a multiple of 8: the Lanczos column makes the mat-vec's block K + max(8, K / 2) wide
    b = kmax + max(8, kmax // 2) - 1 if block_size is None else check_int(block_size, "block_size", minimum=k + 1)
    # a block wider than the active vertices spans padding, whose Ritz value 0 (L_sym eigenvalue 1) would
    # pass for an eigenpair of the graph whenever one of the k smallest eigenvalues exceeds 1
    b = min(b, graph.vertex_capacity, max(active, k))
    kmax = min(kmax, b)
    degree = None if degree is None else check_int(degree, "degree", minimum=1)
    max_iterations = check_int(max_iterations, "max_iterations", minimum=1)
    if tol is None:
        tol = 1e-8 if w.dtype == jnp.float64 else 1e-4
    tol = check_scalar(tol, "tol", positive=True)
    return w, k, kmax, b, degree, jnp.asarray(tol, w.dtype), max_iterations
