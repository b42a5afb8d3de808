"""The dynamic contracted graph: each cluster of the last query one super-node, queried by an eigensolve.

Given a clustering with indicator ``Y`` (``[n, S]``, ``Y[v, a] = 1`` iff v is in super-node a),
the contracted graph has the ``S x S`` adjacency ``Y^T A_c Y`` (``A_c``: the sparsifier's weights
at contraction time, the graph's own weights for edges inserted later). Under insertions a new
vertex becomes a singleton super-node, and so does an old vertex whose degree grew past the
trigger (``d_then / d_now < degree_trigger``; 0.5 in the reference code): its incident edges move
to its own row. Both need only the batch and the moved vertices' adjacency rows, never a pass over
all edges. A query takes the k smallest eigenvectors of the contracted normalised Laplacian (``S``
is about k plus the vertices inserted since the last query: dense ``eigh`` up to 128 super-node
slots, above that Chebyshev-filtered subspace iteration on the dense matrix, residual-checked, with
dense ``eigh`` where it does not converge), runs k-means restarts on the super-nodes and maps labels
back to vertices; it then re-contracts by the new clustering,
``Z^T (Y^T A_c Y) Z = (Y Z)^T A_c (Y Z)`` (``Z``: super-nodes to clusters, two ``[S, S] x [S, k]``
matmuls), so the next query is small again.

References:
    S. Laenen, H. Sun. "Dynamic Spectral Clustering with Provable Approximation Guarantee."
    ICML 2024, Section 4 (the contracted graph, Algorithm 2, and the query).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxcore._util import check_bool, check_int, check_key, check_scalar, expected, is_concrete

from .eigensolver import _subspace_iteration
from .graph import DynamicGraph, capacity_bucket
from .clustering import _kmeans, cluster_bucket

__all__ = ["ContractedGraph", "ContractedQueryResult", "contract", "query_contracted", "update_contracted"]

_PAD_EIGENVALUE = 3.0  # above L_sym's spectrum [0, 2]: padding and isolated super-nodes sort last


class ContractedGraph(eqx.Module):
    """The contracted graph of a clustered :class:`DynamicGraph` (module docstring).

    Attributes:
        matrix: ``[S, S]`` symmetric super-node adjacency ``Y^T A_c Y`` (S: a power-of-two capacity).
        assign: ``[vertex_capacity]`` int32 super-node of each vertex (-1: not seen yet).
        edge_weight: ``[edge_capacity]`` the weights ``A_c`` the matrix is made of.
        degree_then: ``[vertex_capacity]`` degree of each vertex in G when it was last contracted.
        singleton: ``[S]`` bool, the super-node is one vertex pulled out or inserted since contraction.
        num_supernodes: int32 scalar, super-nodes in use.
        degree_trigger: pull a vertex out when ``d_then / d_now < degree_trigger`` (static).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.graphs import from_edges
        >>> g = from_edges([0, 1, 2, 0], [1, 2, 3, 3])
        >>> cg = contract(g, np.array([0, 0, 1, 1]), 2)
        >>> np.asarray(cg.matrix[:2, :2]).tolist()       # Y^T A Y: 2 x internal, cross weights
        [[2.0, 2.0], [2.0, 2.0]]
    """

    matrix: Float[Array, "S S"]
    assign: Int[Array, " V"]
    edge_weight: Float[Array, " E"]
    degree_then: Float[Array, " V"]
    singleton: Bool[Array, " S"]
    num_supernodes: Int[Array, ""]
    degree_trigger: float = eqx.field(static=True)

    @property
    def supernode_capacity(self) -> int:
        return int(self.matrix.shape[0])


class ContractedQueryResult(NamedTuple):
    """Result of :func:`query_contracted`.

    Attributes:
        labels: ``[vertex_capacity]`` int32 cluster of each vertex (-1: padding / never seen).
        supernode_labels: ``[S]`` int32 cluster of each super-node.
        eigenvalues: ``[k]`` the k smallest eigenvalues of the contracted normalised Laplacian.
        contracted: the contracted graph re-contracted by ``labels`` (k super-nodes).

    Examples:
        >>> ContractedQueryResult._fields
        ('labels', 'supernode_labels', 'eigenvalues', 'contracted')
    """

    labels: Int[Array, " V"]
    supernode_labels: Int[Array, " S"]
    eigenvalues: Float[Array, " k"]
    contracted: ContractedGraph


def _pair_add(matrix: Array, a: Array, b: Array, w: Array) -> Array:
    """``matrix[a, b] += w`` and ``matrix[b, a] += w`` (a == b adds 2w: Y^T A Y of a symmetric A)."""
    s = matrix.shape[0]
    flat = matrix.reshape(-1)
    flat = flat.at[a * s + b].add(w, mode="drop").at[b * s + a].add(w, mode="drop")
    return flat.reshape(s, s)


@partial(jax.jit, static_argnames=("capacity", "degree_trigger"))
def _contract(graph: DynamicGraph, labels: Array, edge_weight: Array, num_clusters: Array, capacity: int,
              degree_trigger: float) -> ContractedGraph:
    live_e = jnp.arange(graph.edge_capacity) < graph.num_edges
    w = jnp.where(live_e, edge_weight, 0.0)
    a, b = labels[graph.src], labels[graph.dst]
    matrix = _pair_add(jnp.zeros((capacity, capacity), w.dtype), a, b, w)
    live_v = jnp.arange(graph.vertex_capacity) < graph.num_vertices
    return ContractedGraph(matrix, jnp.where(live_v, labels, -1), w, graph.degree,
                           jnp.zeros(capacity, bool), num_clusters.astype(jnp.int32), degree_trigger)


def contract(graph: DynamicGraph, labels: Any, num_clusters: int, *, edge_weight: Any = None,
             degree_trigger: float = 0.5) -> ContractedGraph:
    """Contract each cluster of ``labels`` into one super-node: the ``k x k`` matrix ``Y^T A Y``.

    Args:
        graph: the graph G.
        labels: ``[vertex_capacity]`` (or ``[num_vertices]``) int cluster of each vertex, in ``0 .. k-1``.
        num_clusters: k (int >= 1).
        edge_weight: ``[edge_capacity]`` weights of A (default ``graph.weight``; the algorithm passes
            the sparsifier's ``Sparsifier.weight``).
        degree_trigger: pull-out threshold on ``d_then / d_now`` (in (0, 1]).

    Returns:
        The :class:`ContractedGraph` (super-node capacity a power of two >= 2k).

    Raises:
        TypeError, ValueError: a non-graph, labels of the wrong shape or out of ``0 .. k-1``, bad weights.

    References:
        S. Laenen, H. Sun, ICML 2024, Section 4 (contracted graph).

    Examples:
        >>> from jaxcore.graphs import from_edges
        >>> cg = contract(from_edges([0, 2], [1, 3]), [0, 0, 1, 1], 2)
        >>> int(cg.num_supernodes), cg.supernode_capacity
        (2, 64)
    """
    from .eigensolver import _weights_or_graph

    w = _weights_or_graph(graph, edge_weight)
    k = check_int(num_clusters, "num_clusters", minimum=1)
    trig = check_scalar(degree_trigger, "degree_trigger", low=0.0, high=1.0, low_open=True)
    lab = np.asarray(labels)
    if lab.dtype.kind not in "iu":
        raise TypeError(expected("labels", "integer cluster labels", f"dtype {lab.dtype}", raw=True))
    n = int(graph.num_vertices)
    if lab.ndim != 1 or lab.shape[0] not in (n, graph.vertex_capacity):
        raise ValueError(expected("labels", f"shape ({n},) or ({graph.vertex_capacity},)", f"shape {lab.shape}",
                                  raw=True))
    live = lab[:n]
    if live.size and (live.min() < 0 or live.max() >= k):
        raise ValueError(expected("labels", f"cluster labels in [0, {k - 1}]",
                                  int(live.min() if live.min() < 0 else live.max())))
    full = np.zeros(graph.vertex_capacity, np.int32)
    full[:n] = live
    return _contract(graph, jnp.asarray(full), w, jnp.asarray(k), capacity_bucket(2 * k), trig)


def _update_impl(cg: ContractedGraph, graph: DynamicGraph, num_new: Array, batch: int) -> ContractedGraph:
    cap_v, cap_e, cap_s = graph.vertex_capacity, graph.edge_capacity, cg.supernode_capacity
    first = graph.num_edges - num_new
    valid = jnp.arange(batch) < num_new
    ids = jnp.minimum(first + jnp.arange(batch, dtype=jnp.int32), cap_e - 1)
    ids_d = jnp.where(valid, ids, cap_e)
    edge_weight = cg.edge_weight.at[ids_d].set(graph.weight[ids], mode="drop")

    ends = jnp.concatenate([graph.src[ids], graph.dst[ids]])
    ends = jnp.sort(jnp.where(jnp.concatenate([valid, valid]), ends, cap_v))
    first_occ = jnp.concatenate([jnp.ones((1,), bool), ends[1:] != ends[:-1]]) & (ends < cap_v)
    ends_c = jnp.minimum(ends, cap_v - 1)
    a_old = cg.assign[ends_c]
    is_new = first_occ & (a_old < 0)
    d_then, d_now = cg.degree_then[ends_c], graph.degree[ends_c]
    pull = first_occ & (a_old >= 0) & ~cg.singleton[jnp.maximum(a_old, 0)] & (d_then < cg.degree_trigger * d_now)
    make = is_new | pull
    sid = cg.num_supernodes + jnp.cumsum(make) - 1
    rows = jnp.where(make, ends, cap_v)
    assign = cg.assign.at[rows].set(sid.astype(jnp.int32), mode="drop")
    singleton = cg.singleton.at[jnp.where(make, sid, cap_s)].set(True, mode="drop")
    degree_then = cg.degree_then.at[rows].set(d_now, mode="drop")
    matrix = cg.matrix

    def move(matrix: Array) -> Array:
        # the pulled-out vertices' edges that predate the batch leave their old super-node pair
        prow = jnp.where(pull, ends_c, 0)
        nbr, eid = graph.neighbors[prow], graph.edge_ids[prow]                        # [2B, W]
        ok = (jnp.arange(graph.width)[None, :] < graph.count[prow][:, None]) & pull[:, None] & (eid < first)
        y_pulled = (assign[nbr] != cg.assign[nbr])
        ok &= ~y_pulled | (prow[:, None] < nbr)                                       # each edge once
        w = jnp.where(ok, edge_weight[eid], 0.0)
        ax_old, ax_new = a_old[:, None], assign[prow][:, None]
        ay_old, ay_new = cg.assign[nbr], assign[nbr]
        shape = nbr.shape
        matrix = _pair_add(matrix, jnp.broadcast_to(ax_old, shape).reshape(-1), ay_old.reshape(-1),
                           -w.reshape(-1))
        return _pair_add(matrix, jnp.broadcast_to(ax_new, shape).reshape(-1), ay_new.reshape(-1), w.reshape(-1))

    matrix = jax.lax.cond(jnp.any(pull), move, lambda m: m, matrix)
    w_new = jnp.where(valid, graph.weight[ids], 0.0)
    matrix = _pair_add(matrix, assign[graph.src[ids]], assign[graph.dst[ids]], w_new)
    return ContractedGraph(matrix, assign, edge_weight, degree_then, singleton,
                           (cg.num_supernodes + jnp.sum(make)).astype(jnp.int32), cg.degree_trigger)


_update = jax.jit(_update_impl, static_argnames=("batch",))
_update_donated = jax.jit(_update_impl, static_argnames=("batch",), donate_argnums=0)  # writes into cg's buffers


def _grow(cg: ContractedGraph, graph: DynamicGraph, supernodes: int) -> ContractedGraph:
    dv = graph.vertex_capacity - cg.assign.shape[0]
    de = graph.edge_capacity - cg.edge_weight.shape[0]
    ds = max(cg.supernode_capacity, capacity_bucket(supernodes)) - cg.supernode_capacity
    if dv < 0 or de < 0:
        raise ValueError(expected("graph", "capacities at least the contracted graph's", "smaller buffers", raw=True))
    if dv or de or ds:
        cg = eqx.tree_at(
            lambda t: (t.matrix, t.assign, t.edge_weight, t.degree_then, t.singleton), cg,
            (jnp.pad(cg.matrix, ((0, ds), (0, ds))), jnp.pad(cg.assign, (0, dv), constant_values=-1),
             jnp.pad(cg.edge_weight, (0, de)), jnp.pad(cg.degree_then, (0, dv)), jnp.pad(cg.singleton, (0, ds))))
    return cg


def update_contracted(contracted: ContractedGraph, graph: DynamicGraph, num_new: int, *,
                      donate: bool = False) -> ContractedGraph:
    """Bring the contracted graph up to date after the last ``num_new`` edges of ``graph`` were inserted.

    New vertices and vertices past the degree trigger become singleton super-nodes (their old
    edges move with them); new edges add their weight between the super-nodes of their endpoints.
    Work: ``O(B log B + P * width)`` for a batch of ``B`` edges and ``P`` pulled-out vertices.

    Args:
        contracted: the contracted graph before the insertion.
        graph: the graph after :func:`add_edges` of the batch.
        num_new: how many edges the batch added.
        donate: write the update into ``contracted``'s buffers (XLA buffer donation: no copy of the
            ``[S, S]`` matrix and the per-vertex arrays per call); ``contracted`` must not be used
            afterwards. The super-node capacity is then settled before the update from the bound
            ``num_supernodes + 2 num_new`` (a donated input cannot be updated twice), so it may double
            one batch earlier than without donation (the same values, more padding).

    Returns:
        The updated :class:`ContractedGraph`.

    Raises:
        TypeError, ValueError: wrong types, ``num_new`` out of range.

    References:
        S. Laenen, H. Sun, ICML 2024, Algorithm 2 (update of the contracted graph).

    Examples:
        >>> from jaxcore.graphs import add_edges, from_edges
        >>> g = from_edges([0, 2], [1, 3])
        >>> cg = contract(g, [0, 0, 1, 1], 2)
        >>> cg = update_contracted(cg, add_edges(g, [3], [4]), 1)     # vertex 4 is new: a singleton
        >>> int(cg.num_supernodes), int(cg.assign[4]), float(cg.matrix[1, 2])
        (3, 2, 1.0)
    """
    if not isinstance(contracted, ContractedGraph):
        raise TypeError(expected("contracted", "a ContractedGraph", type(contracted).__name__, raw=True))
    if not isinstance(graph, DynamicGraph):
        raise TypeError(expected("graph", "a DynamicGraph", type(graph).__name__, raw=True))
    num_new = check_int(num_new, "num_new", minimum=0, maximum=int(graph.num_edges))
    donate = check_bool(donate, "donate")
    if num_new == 0:
        return _grow(contracted, graph, int(contracted.num_supernodes))
    nn, batch = jnp.asarray(num_new, jnp.int32), capacity_bucket(num_new)
    if donate:  # each edge makes at most its two endpoints singletons
        bound = int(contracted.num_supernodes) + 2 * num_new
        need = bound if bound > contracted.supernode_capacity else int(contracted.num_supernodes)
        return _update_donated(_grow(contracted, graph, need), graph, nn, batch)
    cg = _grow(contracted, graph, int(contracted.num_supernodes))
    out = _update(cg, graph, nn, batch)
    need = int(out.num_supernodes)
    if need > cg.supernode_capacity:  # the new singletons overflowed: double the capacity and redo
        out = _update(_grow(cg, graph, need), graph, nn, batch)
    return out


_DENSE_EIGH_MAX = 128   # super-node capacities up to this use dense eigh; larger ones the filtered iteration
_QUERY_ITERATIONS = 6   # filtered-iteration cap before the query falls back to dense eigh


def _embedding(key: Array, w: Array, live: Array, k: Array, kmax: int) -> tuple[Array, Array]:
    """The k smallest eigenpairs of ``L = I - D^{-1/2} W D^{-1/2}`` on the live super-nodes: ``(vals [kmax],
    vecs [S, kmax])``, zero past k.

    Small capacities: dense ``eigh`` (dead super-nodes get eigenvalue ``_PAD_EIGENVALUE``). Larger ones:
    Chebyshev-filtered subspace iteration on the dense ``M = D^{-1/2} W D^{-1/2}`` (each mat-vec one
    ``[S, S] x [S, b]`` matmul), residual-checked; dense ``eigh`` only where it does not converge within
    ``_QUERY_ITERATIONS`` iterations or fewer super-nodes are live than the block is wide.
    """
    s = w.shape[0]
    deg = jnp.sum(w, axis=1)
    dinv = jnp.where(live, jax.lax.rsqrt(jnp.where(live, deg, 1.0)), 0.0)
    m = jnp.where(live[:, None] & live[None, :], dinv[:, None] * w * dinv[None, :], 0.0)
    on = jnp.arange(kmax) < k

    def dense(_: Any = None) -> tuple[Array, Array]:
        lap = jnp.diag(jnp.where(live, 1.0, _PAD_EIGENVALUE).astype(w.dtype)) - m
        vals, vecs = jnp.linalg.eigh(lap)
        return vals[:kmax], vecs[:, :kmax]

    if s <= _DENSE_EIGH_MAX:
        vals, vecs = dense()
    else:
        b = kmax + max(4, kmax // 2)
        tol = jnp.asarray(1e-8 if w.dtype == jnp.float64 else 1e-4, w.dtype)
        x, theta, _, _, _, bad = _subspace_iteration(key, lambda y: m @ y, live, tol, k, b, 6, 32, True,
                                                     _QUERY_ITERATIONS)
        ok = (bad <= tol) & (jnp.sum(live) >= b)
        vals, vecs = jax.lax.cond(ok, lambda _: (1.0 - theta[:kmax], x[:, :kmax]), dense, None)
    return jnp.where(on, vals, 0.0), jnp.where(on[None, :], vecs, 0.0)


@partial(jax.jit, static_argnames=("kmax", "num_init", "recontract"))
def _query(key: Array, cg: ContractedGraph, degree: Array, k: Array, kmax: int, num_init: int,
           recontract: bool) -> tuple:
    s = cg.supernode_capacity
    w = cg.matrix
    # a super-node all of whose vertices were pulled out is dead, whatever rounding its emptied row kept (the
    # removals leave residues of +-1e-7 there, whose D^{-1/2} would blow up: a merge of two clusters did)
    members = jax.ops.segment_sum((cg.assign >= 0).astype(jnp.int32), jnp.maximum(cg.assign, 0), num_segments=s)
    live = (jnp.arange(s) < cg.num_supernodes) & (members > 0) & (jnp.sum(w, axis=1) > 0)
    k_eig, k_km = jax.random.split(key)
    vals, emb = _embedding(k_eig, w, live, k, kmax)
    res = _kmeans(k_km, emb, live.astype(w.dtype), None, jnp.asarray(1e-4, w.dtype), k, kmax, num_init, 300)
    z = jnp.where(jnp.arange(s) < cg.num_supernodes, res.labels, 0).astype(jnp.int32)
    labels = jnp.where(cg.assign >= 0, z[jnp.maximum(cg.assign, 0)], -1)
    if recontract:
        # Z^T W Z with Z the [S, kmax] super-node -> cluster indicator: two thin matmuls
        zh = (z[:, None] == jnp.arange(kmax)[None, :]) & live[:, None]
        zh = zh.astype(w.dtype)
        small = zh.T @ (w @ zh)
        matrix = jnp.zeros_like(w).at[:kmax, :kmax].set(small)
        was_single = (cg.assign >= 0) & cg.singleton[jnp.maximum(cg.assign, 0)]
        cg = ContractedGraph(matrix, labels, cg.edge_weight, jnp.where(was_single, degree, cg.degree_then),
                             jnp.zeros(s, bool), k.astype(jnp.int32), cg.degree_trigger)
    return labels, z, vals, cg


def query_contracted(key: Any, contracted: ContractedGraph, graph: DynamicGraph, num_clusters: int, *,
                     num_init: int = 10, recontract: bool = True) -> ContractedQueryResult:
    """Cluster the vertices through the contracted graph: its eigenvectors, k-means restarts, label map.

    The embedding is the k eigenvectors of ``L = I - D^{-1/2} W D^{-1/2}`` (W the super-node matrix)
    with the smallest eigenvalues; super-nodes of degree 0 and padding are excluded. Up to 128
    super-node slots they come from dense ``eigh``; above, from Chebyshev-filtered subspace iteration
    on the dense matrix (mat-vecs are ``[S, S] x [S, b]`` matmuls; residuals ``<= 1e-4`` in float32,
    else dense ``eigh``).

    Args:
        key: a ``jax.random.key`` for the subspace start block and the k-means++ restarts.
        contracted: the contracted graph.
        graph: the graph (its degrees reset the pull-out reference of re-contracted singletons).
        num_clusters: k (int, at most the number of super-nodes of positive degree).
        num_init: k-means restarts (vmapped).
        recontract: re-contract by the new clustering (k super-nodes) for the next update and query.

    Returns:
        :class:`ContractedQueryResult`.

    Raises:
        TypeError, ValueError: wrong types, ``num_clusters`` out of range (more than the super-nodes of
            positive degree), a contracted graph without edges.

    References:
        S. Laenen, H. Sun, ICML 2024, Section 4 (query: spectral clustering of the contracted graph).

    Examples:
        >>> import jax
        >>> from jaxcore.graphs import from_edges
        >>> g = from_edges([0, 1, 2, 3, 4, 5, 2], [1, 2, 0, 4, 5, 3, 3])
        >>> cg = contract(g, [0, 0, 0, 1, 1, 1], 2)
        >>> r = query_contracted(jax.random.key(0), cg, g, 2)
        >>> len(set(r.labels[:3].tolist())), r.labels[0] != r.labels[3]
        (1, Array(True, dtype=bool))
    """
    key = check_key(key)
    if not isinstance(contracted, ContractedGraph):
        raise TypeError(expected("contracted", "a ContractedGraph", type(contracted).__name__, raw=True))
    if not isinstance(graph, DynamicGraph):
        raise TypeError(expected("graph", "a DynamicGraph", type(graph).__name__, raw=True))
    traced = not is_concrete(contracted, graph)   # under a caller's jit: shapes must already fit
    ns = contracted.supernode_capacity if traced else int(contracted.num_supernodes)
    top = ns
    if not traced:  # super-nodes of degree 0 are excluded: k more clusters than the rest would report padding
        top = int(np.sum(np.asarray(contracted.matrix).sum(axis=1)[:ns] > 0))
        if top == 0:
            raise ValueError(expected("contracted", "a super-node with an edge", "none", raw=True))
    k = check_int(num_clusters, "num_clusters", minimum=1, maximum=max(top, 1))
    num_init = check_int(num_init, "num_init", minimum=1)
    if not isinstance(recontract, (bool, np.bool_)):
        raise TypeError(expected("recontract", "a bool", type(recontract).__name__, raw=True))
    cg = contracted if traced else _grow(contracted, graph, max(ns, cluster_bucket(k)))
    labels, z, vals, cg2 = _query(key, cg, graph.degree, jnp.asarray(k, jnp.int32), cluster_bucket(k), num_init,
                                  bool(recontract))
    return ContractedQueryResult(labels, z, vals[:k], cg2)
