"""A dynamic undirected graph with static capacity: padded edge, vertex and adjacency buffers.

Edges are stored once each, ``(src[e], dst[e], weight[e])`` for ``e < num_edges``, and in a padded
adjacency table: row ``v`` holds the ``count[v]`` neighbours of ``v`` and the ids of the edges that
join them (an edge ``(u, v)`` sits in rows ``u`` and ``v``). Capacities are powers of two
(:func:`capacity_bucket`): a growing stream doubles a buffer when it fills, so a stream of any
length compiles a handful of shapes, and every insertion of a batch of ``B`` edges costs
``O(B log B)`` work whatever the graph's size. Parallel edges are kept (their weights add in
the adjacency matrix); self-loops are refused.

References:
    S. Laenen, H. Sun. "Dynamic Spectral Clustering with Provable Approximation Guarantee."
    ICML 2024, Section 2 (the dynamic graph model: edge and vertex insertions).
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxcore._util import check_bool, check_int, default_float, expected

__all__ = ["DynamicGraph", "add_edges", "capacity_bucket", "empty_graph", "from_edges"]

_MIN_CAPACITY = 64
_MIN_WIDTH = 8


def capacity_bucket(n: int, minimum: int = _MIN_CAPACITY) -> int:
    """The smallest power of two ``>= max(n, minimum)``: the static buffer sizes of a growing graph.

    Args:
        n: the number of slots needed (int >= 0).
        minimum: the smallest capacity (int >= 1).

    Returns:
        A power of two (int).

    Raises:
        TypeError, ValueError: ``n`` or ``minimum`` is not a non-negative int.

    Examples:
        >>> capacity_bucket(100), capacity_bucket(0), capacity_bucket(1000, minimum=8)
        (128, 64, 1024)
    """
    n = check_int(n, "n", minimum=0)
    minimum = check_int(minimum, "minimum", minimum=1)
    return 1 << max(0, int(np.ceil(np.log2(max(n, minimum)))))


class DynamicGraph(eqx.Module):
    """An undirected weighted graph in padded buffers of static capacity (see the module docstring).

    Attributes:
        src, dst: ``[edge_capacity]`` int32 endpoints of edge ``e`` (0 past ``num_edges``).
        weight: ``[edge_capacity]`` float edge weights (> 0; 0 past ``num_edges``).
        degree: ``[vertex_capacity]`` float weighted degrees ``d_v = sum_{e ∋ v} w_e``.
        count: ``[vertex_capacity]`` int32 number of incident edges of each vertex.
        neighbors: ``[vertex_capacity, width]`` int32 adjacency table (slots ``< count[v]`` valid).
        edge_ids: ``[vertex_capacity, width]`` int32 edge id of each adjacency slot.
        num_edges, num_vertices: int32 scalars; vertices are ``0 .. num_vertices - 1``.
        max_count: int32 scalar ``max_v count[v]`` (the table's needed width).

    Examples:
        >>> g = from_edges([0, 1, 2], [1, 2, 0])
        >>> int(g.num_edges), int(g.num_vertices), g.degree[:3].tolist()
        (3, 3, [2.0, 2.0, 2.0])
        >>> g.vertex_capacity, g.edge_capacity, g.width
        (64, 64, 8)
    """

    src: Int[Array, " E"]
    dst: Int[Array, " E"]
    weight: Float[Array, " E"]
    degree: Float[Array, " V"]
    count: Int[Array, " V"]
    neighbors: Int[Array, "V W"]
    edge_ids: Int[Array, "V W"]
    num_edges: Int[Array, ""]
    num_vertices: Int[Array, ""]
    max_count: Int[Array, ""]

    @property
    def vertex_capacity(self) -> int:
        return int(self.degree.shape[0])

    @property
    def edge_capacity(self) -> int:
        return int(self.src.shape[0])

    @property
    def width(self) -> int:
        return int(self.neighbors.shape[1])

    def adjacency(self) -> np.ndarray:
        """The dense ``[num_vertices, num_vertices]`` float64 adjacency matrix A (for tests and small graphs)."""
        n, m = int(self.num_vertices), int(self.num_edges)
        a = np.zeros((n, n))
        s, d, w = (np.asarray(x)[:m] for x in (self.src, self.dst, self.weight))
        np.add.at(a, (s, d), w)
        np.add.at(a, (d, s), w)
        return a


def empty_graph(vertex_capacity: int = _MIN_CAPACITY, edge_capacity: int = _MIN_CAPACITY,
                width: int = _MIN_WIDTH, dtype: Any = None) -> DynamicGraph:
    """An empty :class:`DynamicGraph`; each capacity is rounded up to a power of two.

    Args:
        vertex_capacity, edge_capacity, width: slots to reserve (ints >= 1; buffers grow on demand).
        dtype: float dtype of weights and degrees (default float32, float64 under ``jax_enable_x64``).

    Returns:
        The empty graph.

    Raises:
        TypeError, ValueError: a capacity that is not a positive int.

    Examples:
        >>> g = empty_graph(100, 1000)
        >>> g.vertex_capacity, g.edge_capacity, int(g.num_edges)
        (128, 1024, 0)
    """
    v = capacity_bucket(check_int(vertex_capacity, "vertex_capacity", minimum=1))
    e = capacity_bucket(check_int(edge_capacity, "edge_capacity", minimum=1))
    w = capacity_bucket(check_int(width, "width", minimum=1), minimum=_MIN_WIDTH)
    try:
        dtype = default_float() if dtype is None else jnp.dtype(dtype)
    except TypeError as exc:
        raise TypeError(expected("dtype", "a floating dtype", repr(dtype), raw=True)) from exc
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(expected("dtype", "a floating dtype", str(dtype), raw=True))
    zi = jnp.zeros((), jnp.int32)
    return DynamicGraph(
        src=jnp.zeros(e, jnp.int32), dst=jnp.zeros(e, jnp.int32), weight=jnp.zeros(e, dtype),
        degree=jnp.zeros(v, dtype), count=jnp.zeros(v, jnp.int32),
        neighbors=jnp.zeros((v, w), jnp.int32), edge_ids=jnp.zeros((v, w), jnp.int32),
        num_edges=zi, num_vertices=zi, max_count=zi,
    )


def _resize(g: DynamicGraph, vertex_capacity: int, edge_capacity: int, width: int) -> DynamicGraph:
    """Pad every buffer to the given (larger or equal) capacities."""
    dv, de, dw = vertex_capacity - g.vertex_capacity, edge_capacity - g.edge_capacity, width - g.width
    if dv == de == dw == 0:
        return g
    return DynamicGraph(
        src=jnp.pad(g.src, (0, de)), dst=jnp.pad(g.dst, (0, de)), weight=jnp.pad(g.weight, (0, de)),
        degree=jnp.pad(g.degree, (0, dv)), count=jnp.pad(g.count, (0, dv)),
        neighbors=jnp.pad(g.neighbors, ((0, dv), (0, dw))), edge_ids=jnp.pad(g.edge_ids, ((0, dv), (0, dw))),
        num_edges=g.num_edges, num_vertices=g.num_vertices, max_count=g.max_count,
    )


def _row_ranks(rows: Array) -> Array:
    """Rank of each entry among the earlier entries with the same row value (stable), O(B log B)."""
    order = jnp.argsort(rows, stable=True)
    sr = rows[order]
    idx = jnp.arange(rows.shape[0])
    start = jnp.concatenate([jnp.ones((1,), bool), sr[1:] != sr[:-1]])
    first = jax.lax.cummax(jnp.where(start, idx, 0))
    return jnp.zeros_like(rows).at[order].set((idx - first).astype(rows.dtype))


@jax.jit
def _needed_width(count: Array, bsrc: Array, bdst: Array, num_valid: Array) -> Array:
    """The adjacency table's width the batch needs (``max`` over its rows of ``count + rank + 1``), O(B log B)."""
    b, cap_v = bsrc.shape[0], count.shape[0]
    valid2 = jnp.concatenate([jnp.arange(b) < num_valid] * 2)
    rows_v = jnp.where(valid2, jnp.concatenate([bsrc, bdst]), cap_v)
    slot = count[jnp.minimum(rows_v, cap_v - 1)] + _row_ranks(rows_v)
    return jnp.max(jnp.where(valid2, slot + 1, 0))


def _insert_impl(g: DynamicGraph, bsrc: Array, bdst: Array, bw: Array, num_valid: Array) -> DynamicGraph:
    b = bsrc.shape[0]
    cap_e, cap_v = g.edge_capacity, g.vertex_capacity
    valid = jnp.arange(b) < num_valid
    eid = g.num_edges + jnp.arange(b, dtype=jnp.int32)
    pos = jnp.where(valid, eid, cap_e)
    bw = jnp.where(valid, bw, 0).astype(g.weight.dtype)
    src = g.src.at[pos].set(bsrc, mode="drop")
    dst = g.dst.at[pos].set(bdst, mode="drop")
    weight = g.weight.at[pos].set(bw, mode="drop")
    rows = jnp.concatenate([bsrc, bdst])
    other = jnp.concatenate([bdst, bsrc])
    ids = jnp.concatenate([eid, eid])
    valid2 = jnp.concatenate([valid, valid])
    rows_v = jnp.where(valid2, rows, cap_v)
    degree = g.degree.at[rows_v].add(jnp.concatenate([bw, bw]), mode="drop")
    rank = _row_ranks(rows_v)
    slot = g.count[jnp.minimum(rows_v, cap_v - 1)] + rank
    count = g.count.at[rows_v].add(1, mode="drop")
    # an overflowing slot is dropped here; the caller sees max_count > width and retries wider
    srow = jnp.where(slot < g.width, rows_v, cap_v)
    neighbors = g.neighbors.at[srow, slot].set(other, mode="drop")
    edge_ids = g.edge_ids.at[srow, slot].set(ids, mode="drop")
    new_max = jnp.max(jnp.where(valid2, slot + 1, 0))
    top = jnp.max(jnp.where(valid2, rows + 1, 0))
    return DynamicGraph(
        src=src, dst=dst, weight=weight, degree=degree, count=count, neighbors=neighbors, edge_ids=edge_ids,
        num_edges=g.num_edges + num_valid.astype(jnp.int32),
        num_vertices=jnp.maximum(g.num_vertices, top).astype(jnp.int32),
        max_count=jnp.maximum(g.max_count, new_max).astype(jnp.int32),
    )


_insert = jax.jit(_insert_impl)
# the same program writing into the input's buffers (donated): O(B) per batch instead of a copy of every buffer
_insert_donated = jax.jit(_insert_impl, donate_argnums=0)


def _edge_arrays(src: Any, dst: Any, weight: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    out = []
    for x, name in ((src, "src"), (dst, "dst")):
        if x is None:
            raise TypeError(expected(name, "a 1-D array of vertex ids", "None", raw=True))
        a = np.asarray(x)
        if a.size == 0 and a.dtype.kind in "biuf":
            a = a.astype(np.int64)
        if a.dtype.kind not in "iu":
            raise TypeError(expected(name, "integer vertex ids", f"dtype {a.dtype}", raw=True))
        if a.ndim != 1:
            raise ValueError(expected(name, "a 1-D array of vertex ids", f"shape {a.shape}", raw=True))
        out.append(a.astype(np.int64))
    s, d = out
    if s.shape != d.shape:
        raise ValueError(expected("src, dst", "arrays of equal length", f"lengths {s.size} and {d.size}", raw=True))
    if s.size and (min(s.min(), d.min()) < 0 or max(s.max(), d.max()) >= 2**31 - 1):
        bad = s if s.min() < 0 or s.max() >= 2**31 - 1 else d
        raise ValueError(expected("src" if bad is s else "dst", "vertex ids in [0, 2**31 - 2]",
                                  int(bad.min() if bad.min() < 0 else bad.max())))
    loops = np.flatnonzero(s == d)
    if loops.size:
        raise ValueError(expected("src, dst", "edges between distinct vertices (no self-loops)",
                                  f"the loop ({int(s[loops[0]])}, {int(s[loops[0]])}) at index {int(loops[0])}",
                                  raw=True))
    w = None
    if weight is not None:
        w = np.asarray(weight)
        if w.dtype.kind not in "biuf":
            raise TypeError(expected("weight", "real edge weights", f"dtype {w.dtype}", raw=True))
        w = w.astype(np.float64)
        if w.shape != s.shape:
            raise ValueError(expected("weight", f"one weight per edge, shape {s.shape}", f"shape {w.shape}", raw=True))
        bad = ~(np.isfinite(w) & (w > 0))
        if bad.any():
            raise ValueError(expected("weight", "finite weights > 0", f"{w[bad][0]!r} at index {int(np.argmax(bad))}",
                                      raw=True))
    return s, d, w


def add_edges(graph: DynamicGraph, src: Any, dst: Any, weight: Any = None, *, donate: bool = False) -> DynamicGraph:
    """Insert a batch of undirected edges ``(src[i], dst[i])``, growing buffers by doubling if needed.

    New vertex ids (``>= num_vertices``) are vertex insertions: ``num_vertices`` becomes
    ``max(num_vertices, max id + 1)``. The batch is padded to a power of two, so batches of similar
    size share one compiled program; the work is ``O(B log B)`` for a batch of ``B`` edges,
    independent of the graph's size (a buffer that doubles is copied once, amortised O(1) per edge)
    when ``donate=True``; without it the new graph is written into fresh buffers, a copy of every
    buffer (``O(capacity)``) per call.

    Args:
        graph: the graph.
        src, dst: ``[B]`` integer vertex ids (>= 0, no self-loops ``src[i] == dst[i]``).
        weight: ``[B]`` finite weights > 0 (default 1).
        donate: hand ``graph``'s buffers to the update, which writes the batch into them in place
            (XLA buffer donation): ``graph`` must not be used afterwards (its arrays are deleted; reading
            one raises). For a stream that keeps only the newest graph.

    Returns:
        The new graph (the input is unchanged unless ``donate``).

    Raises:
        TypeError: non-integer ids, non-real weights, a graph that is not a :class:`DynamicGraph`.
        ValueError: shapes that differ, negative ids, self-loops, weights <= 0 or not finite (in the
            graph's dtype).

    References:
        S. Laenen, H. Sun. ICML 2024, Section 2 (edge and vertex insertions).

    Examples:
        >>> g = add_edges(empty_graph(), [0, 1], [1, 2])
        >>> g = add_edges(g, [2], [5], weight=[0.5])      # vertex insertion (3, 4, 5)
        >>> int(g.num_vertices), g.degree[:6].tolist()
        (6, [1.0, 2.0, 1.5, 0.0, 0.0, 0.5])
    """
    if not isinstance(graph, DynamicGraph):
        raise TypeError(expected("graph", "a DynamicGraph", type(graph).__name__, raw=True))
    donate = check_bool(donate, "donate")
    s, d, w = _edge_arrays(src, dst, weight)
    b = s.size
    if b == 0:
        return graph
    m, n = int(graph.num_edges), int(graph.num_vertices)
    top = int(max(s.max(), d.max())) + 1
    vcap = max(graph.vertex_capacity, capacity_bucket(max(n, top)))
    ecap = max(graph.edge_capacity, capacity_bucket(m + b))
    graph = _resize(graph, vcap, ecap, graph.width)
    bb = capacity_bucket(b)
    pad = bb - b
    bs = jnp.asarray(np.pad(s, (0, pad)).astype(np.int32))
    bd = jnp.asarray(np.pad(d, (0, pad)).astype(np.int32))
    if w is not None:  # finite and > 0 in float64 is not enough: 1e39 is inf in float32, 1e-50 is 0
        with np.errstate(over="ignore", under="ignore"):
            wc = w.astype(graph.weight.dtype)
        bad = ~(np.isfinite(wc) & (wc > 0))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(expected("weight", f"weights > 0 that are finite in the graph's {graph.weight.dtype}",
                                      f"{float(w[i])!r} at index {i}", raw=True))
    bw = jnp.asarray(np.pad(np.ones(b) if w is None else w, (0, pad)), graph.weight.dtype)
    nv = jnp.asarray(b, jnp.int32)
    if donate:  # the width is settled before the insert: a donated graph cannot be inserted into twice
        need = int(_needed_width(graph.count, bs, bd, nv))
        if need > graph.width:
            graph = _resize(graph, vcap, ecap, capacity_bucket(need, minimum=_MIN_WIDTH))
        return _insert_donated(graph, bs, bd, bw, nv)
    out = _insert(graph, bs, bd, bw, nv)
    need = int(out.max_count)
    if need > graph.width:  # a row overflowed: widen the table (doubling) and insert again
        graph = _resize(graph, vcap, ecap, capacity_bucket(need, minimum=_MIN_WIDTH))
        out = _insert(graph, bs, bd, bw, nv)
    return out


def from_edges(src: Any, dst: Any, weight: Any = None, num_vertices: int | None = None,
               dtype: Any = None, *, vertex_capacity: int = 1, edge_capacity: int = 1,
               width: int = 1) -> DynamicGraph:
    """A :class:`DynamicGraph` holding the given undirected edges (capacities: powers of two).

    Args:
        src, dst: ``[m]`` integer vertex ids (no self-loops).
        weight: ``[m]`` finite weights > 0 (default 1).
        num_vertices: the number of vertices (default ``max id + 1``; larger values add isolated vertices).
        dtype: float dtype of weights and degrees (default float32, float64 under ``jax_enable_x64``).
        vertex_capacity, edge_capacity, width: slots to reserve at least (ints >= 1, rounded up to powers of
            two as in :func:`empty_graph`; default: what the edges need). A stream that reserves its final
            sizes keeps one set of buffer shapes, so its updates and queries compile once.

    Returns:
        The graph.

    Raises:
        TypeError, ValueError: as :func:`add_edges`; ``num_vertices`` below ``max id + 1``.

    Examples:
        >>> g = from_edges([0, 0], [1, 2], num_vertices=4)
        >>> int(g.num_vertices), int(g.count[0])
        (4, 2)
        >>> g = from_edges([0, 0], [1, 2], vertex_capacity=1000, edge_capacity=5000)
        >>> int(g.num_vertices), g.vertex_capacity, g.edge_capacity, g.width
        (3, 1024, 8192, 8)
    """
    s, d, w = _edge_arrays(src, dst, weight)
    top = int(max(s.max(), d.max())) + 1 if s.size else 0
    n = top if num_vertices is None else check_int(num_vertices, "num_vertices", minimum=top)
    need = int(np.bincount(np.concatenate([s, d]), minlength=1).max()) if s.size else 1
    vertex_capacity = check_int(vertex_capacity, "vertex_capacity", minimum=1)
    edge_capacity = check_int(edge_capacity, "edge_capacity", minimum=1)
    width = check_int(width, "width", minimum=1)
    g = empty_graph(max(n, vertex_capacity), max(s.size, edge_capacity), max(need, width), dtype)
    g = add_edges(g, s, d, w)
    if n > int(g.num_vertices):
        g = eqx.tree_at(lambda t: t.num_vertices, g, jnp.asarray(n, jnp.int32))
    return g
