"""The k smallest eigenpairs of a graph's normalised Laplacian by Chebyshev-filtered subspace iteration.

``L = I - D^{-1/2} A D^{-1/2}`` has its spectrum in [0, 2]; its k smallest eigenpairs are the k
largest of ``M = D^{-1/2} A D^{-1/2}`` (spectrum in [-1, 1]). Each iteration applies a degree-m
Chebyshev polynomial of M that is bounded by 1 on the unwanted interval ``[-1, cut]`` (``cut``: the
smallest Ritz value of the block, below the wanted eigenvalues by Cauchy interlacing) and grows
fast above it, orthonormalises the block (QR) and takes Ritz pairs from ``Q^T M Q`` (Rayleigh-Ritz).
The loop stops when every wanted residual ``||M x - theta x||_2`` (unit ``x``) is at most ``tol``,
so a returned ``converged`` is a checked statement, not an assumption. The mat-vec walks the
graph's padded adjacency table (one gather per slot column, no scatter).

References:
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
from .kmeans import cluster_bucket

__all__ = ["EigenResult", "laplacian_matvec", "smallest_eigenpairs"]


class EigenResult(NamedTuple):
    """Result of :func:`smallest_eigenpairs`.

    Attributes:
        eigenvalues: ``[k]`` ascending eigenvalues of L_sym (in [0, 2]).
        eigenvectors: ``[vertex_capacity, k]`` orthonormal eigenvectors (0 on padding and isolated vertices).
        residual_norms: ``[k]`` ``||L x - lambda x||_2`` of each unit eigenvector.
        num_iterations: int32 scalar, filter-and-Rayleigh-Ritz iterations done.
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


def _slot_weights(graph: DynamicGraph, edge_weight: Array) -> tuple[Array, Array, Array]:
    """Per-slot weights ``[V, W]``, ``D^{-1/2}`` ``[V]`` and the active-vertex mask ``[V]``."""
    v, w = graph.neighbors.shape
    valid = jnp.arange(w)[None, :] < graph.count[:, None]
    wslot = jnp.where(valid, edge_weight[graph.edge_ids], 0).astype(edge_weight.dtype)
    deg = wslot.sum(axis=1)
    active = (deg > 0) & (jnp.arange(v) < graph.num_vertices)
    dinv = jnp.where(active, jax.lax.rsqrt(jnp.where(active, deg, 1)), 0)
    return wslot, dinv, active


def _adjacency_apply(graph: DynamicGraph, wslot: Array, x: Array) -> Array:
    """``A x`` for ``x`` ``[V, b]`` through the adjacency table, gathering a chunk of slot columns at a time.

    The chunk (a power of two) keeps each gathered block near 2**24 entries: one gather for small graphs
    (few loop steps, little overhead), a short loop for large ones (bounded memory).
    """
    nbr = graph.neighbors
    v, w = nbr.shape
    b = x.shape[1]
    chunk = 1 << max(0, min(int(np.log2(w)), int(np.floor(np.log2(max(1, (1 << 24) // (v * b)))))))
    if chunk >= w:
        return jnp.einsum("vw,vwb->vb", wslot, x[nbr])

    def body(j: Array, acc: Array) -> Array:
        cols = jax.lax.dynamic_slice_in_dim(nbr, j * chunk, chunk, axis=1)
        ws = jax.lax.dynamic_slice_in_dim(wslot, j * chunk, chunk, axis=1)
        return acc + jnp.einsum("vw,vwb->vb", ws, x[cols])

    return jax.lax.fori_loop(0, w // chunk, body, jnp.zeros_like(x))


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
    wslot, dinv, active = _slot_weights(graph, edge_weight)
    y = dinv[:, None] * _adjacency_apply(graph, wslot, dinv[:, None] * x)
    return jnp.where(active[:, None], x - y, x)


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


@partial(jax.jit, static_argnames=("kmax", "block_size", "degree", "max_iterations"))
def _chfsi(key: Array, graph: DynamicGraph, edge_weight: Array, tol: Array, k: Array, kmax: int, block_size: int,
           degree: int, max_iterations: int) -> EigenResult:
    """``k`` (traced) eigenpairs in ``kmax`` (static) slots, zero past k: one compilation per k bucket."""
    wslot, dinv, active = _slot_weights(graph, edge_weight)
    dtype = edge_weight.dtype

    def mop(x: Array) -> Array:
        return dinv[:, None] * _adjacency_apply(graph, wslot, dinv[:, None] * x)

    def rayleigh_ritz(y: Array) -> tuple[Array, Array, Array]:
        q, _ = jnp.linalg.qr(y)
        mq = mop(q)
        h = q.T @ mq
        theta, vecs = jnp.linalg.eigh(0.5 * (h + h.T))
        theta, vecs = theta[::-1], vecs[:, ::-1]  # descending: the wanted ones first
        x = q @ vecs
        res = jnp.linalg.norm(mq @ vecs - x * theta, axis=0)
        return x, theta, res

    def chebyshev(x: Array, cut: Array) -> Array:
        c = 0.5 * (cut - 1.0)
        e = 0.5 * (cut + 1.0)
        y1 = (mop(x) - c * x) / e

        def body(_: Array, carry: tuple[Array, Array]) -> tuple[Array, Array]:
            y0, y1 = carry
            y2 = 2.0 * (mop(y1) - c * y1) / e - y0
            s = jnp.maximum(jnp.max(jnp.abs(y2), axis=0), jnp.finfo(dtype).tiny)
            return y1 / s, y2 / s

        return jax.lax.fori_loop(1, degree, body, (x, y1))[1]

    x0 = jnp.where(active[:, None], jax.random.normal(key, (graph.vertex_capacity, block_size), dtype), 0)
    x, theta, res = rayleigh_ritz(x0)

    wanted = jnp.arange(block_size) < k

    def worst(res: Array) -> Array:
        return jnp.max(jnp.where(wanted, res, 0.0))

    def cond(state: tuple) -> Array:
        _, _, res, it = state
        return (it < max_iterations) & ~(worst(res) <= tol)

    def body(state: tuple) -> tuple:
        x, theta, _, it = state
        cut = jnp.clip(theta[-1], -1.0 + 1e-3, 1.0 - 1e-3)
        x, theta, res = rayleigh_ritz(chebyshev(x, cut))
        return x, theta, res, it + 1

    x, theta, res, it = jax.lax.while_loop(cond, body, (x, theta, res, jnp.zeros((), jnp.int32)))
    on = wanted[:kmax]
    return EigenResult(jnp.where(on, 1.0 - theta[:kmax], 0.0), jnp.where(on[None, :], x[:, :kmax], 0.0),
                       jnp.where(on, res[:kmax], 0.0), it, worst(res) <= tol)


def smallest_eigenpairs(key: Any, graph: DynamicGraph, k: int, *, edge_weight: Any = None,
                        block_size: int | None = None, degree: int = 8, tol: float | None = None,
                        max_iterations: int = 200) -> EigenResult:
    """The k smallest eigenpairs of the normalised Laplacian L_sym, with a residual convergence test.

    Chebyshev-filtered subspace iteration on ``M = I - L_sym`` (module docstring); the block of
    ``block_size`` vectors starts random (``key``). Each iteration costs ``degree + 1`` block
    mat-vecs, ``O((degree + 1) * nnz * block_size)``.

    Args:
        key: a ``jax.random.key`` for the random start block.
        graph: the graph (padding and isolated vertices are excluded: eigenvector entries 0).
        k: number of eigenpairs (int, ``1 <= k < block_size``, at most the number of vertices with an
            edge of positive weight).
        edge_weight: ``[edge_capacity]`` weights instead of ``graph.weight`` (a sparsifier's).
        block_size: subspace size (default ``K + max(4, K // 2)``, K = k rounded up to a power of two >= 8,
            so that every k of one bucket shares one compiled program).
        degree: Chebyshev polynomial degree per iteration (int >= 1).
        tol: residual tolerance on ``||L x - lambda x||_2`` (default 1e-4 in float32, 1e-8 in float64).
        max_iterations: iteration cap (int >= 1); ``converged`` says whether ``tol`` was met.

    Returns:
        :class:`EigenResult`.

    Raises:
        TypeError: a key that is not a PRNG key, a non-graph, non-int sizes.
        ValueError: ``k`` out of range, ``tol`` not positive, bad weights, a graph without edges.

    References:
        Y. Zhou, Y. Saad, SIAM J. Matrix Anal. Appl. 2007 (Chebyshev-filtered subspace iteration).

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


def _solver_args(graph: Any, k: Any, k_name: str, edge_weight: Any, block_size: Any, degree: Any, tol: Any,
                 max_iterations: Any) -> tuple:
    """Checked eigensolver arguments: (weights, k, k bucket, block size, degree, tol array, max_iterations)."""
    w = _weights_or_graph(graph, edge_weight)
    top, active = graph.vertex_capacity - 1, graph.vertex_capacity
    if is_concrete(graph, w):  # k eigenpairs need k vertices of positive degree (the rest is padding)
        m = int(graph.num_edges)
        on = np.asarray(w)[:m] > 0
        active = np.unique(np.concatenate([np.asarray(graph.src)[:m][on], np.asarray(graph.dst)[:m][on]])).size
        if active == 0:
            raise ValueError(expected("graph", "at least one edge of positive weight", "none", raw=True))
        top = min(top, active)
    k = check_int(k, k_name, minimum=1, maximum=top)
    kmax = cluster_bucket(k)
    b = kmax + max(4, kmax // 2) if block_size is None else check_int(block_size, "block_size", minimum=k + 1)
    # a block wider than the active vertices spans padding, whose Ritz value 0 (L_sym eigenvalue 1) would
    # pass for an eigenpair of the graph whenever one of the k smallest eigenvalues exceeds 1
    b = min(b, graph.vertex_capacity, max(active, k))
    kmax = min(kmax, b)
    degree = check_int(degree, "degree", minimum=1)
    max_iterations = check_int(max_iterations, "max_iterations", minimum=1)
    if tol is None:
        tol = 1e-8 if w.dtype == jnp.float64 else 1e-4
    tol = check_scalar(tol, "tol", positive=True)
    return w, k, kmax, b, degree, jnp.asarray(tol, w.dtype), max_iterations
