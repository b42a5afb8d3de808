"""Dynamic spectral clustering: the graph, its sparsifier and its contracted graph, kept together.

``init_clustering`` samples the sparsifier H of G, clusters H by full spectral clustering and
contracts the clusters; ``update_clustering`` inserts a batch of edges into G, H and the contracted
graph (amortised O(1) per edge); ``query_clustering`` clusters through the contracted graph
(an eigensolve on about k + new-vertex super-nodes, o(n)).

References:
    S. Laenen, H. Sun. "Dynamic Spectral Clustering with Provable Approximation Guarantee."
    ICML 2024, Algorithms 1-3.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
from jaxtyping import Array, Float, Int

from jaxcore._util import check_bool, check_int, check_key, check_scalar, expected

from .contracted import ContractedGraph, contract, query_contracted, update_contracted
from .graph import DynamicGraph, add_edges
from .sparsifier import Sparsifier, sparsify, update_sparsifier
from .spectral import SpectralResult, spectral_clustering

__all__ = ["ClusteringState", "QueryResult", "init_clustering", "query_clustering", "update_clustering"]


class ClusteringState(NamedTuple):
    """The dynamic algorithm's state.

    Attributes:
        graph: the graph G.
        sparsifier: its cluster-preserving sparsifier H.
        contracted: the contracted graph of the last clustering.

    Examples:
        >>> ClusteringState._fields
        ('graph', 'sparsifier', 'contracted')
    """

    graph: DynamicGraph
    sparsifier: Sparsifier
    contracted: ContractedGraph


class QueryResult(NamedTuple):
    """Result of :func:`query_clustering`.

    Attributes:
        labels: ``[vertex_capacity]`` int32 cluster of each vertex (-1: padding or never seen).
        eigenvalues: ``[k]`` smallest eigenvalues of the contracted normalised Laplacian.
        state: the state after the query (re-contracted by ``labels`` unless ``recontract=False``).

    Examples:
        >>> QueryResult._fields
        ('labels', 'eigenvalues', 'state')
    """

    labels: Int[Array, " V"]
    eigenvalues: Float[Array, " k"]
    state: ClusteringState


def init_clustering(key: Any, graph: DynamicGraph, num_clusters: int, *, sampling_constant: float = 100.0,
                    resample_factor: float = 10.0, rebuild_fraction: float = 0.01, degree_trigger: float = 0.5,
                    num_init: int = 10) -> tuple[ClusteringState, SpectralResult]:
    """Start the dynamic algorithm: sparsify G, spectral-cluster the sparsifier, contract the clusters.

    Args:
        key: a ``jax.random.key``.
        graph: the initial graph G_0.
        num_clusters: k of the initial clustering.
        sampling_constant, resample_factor, rebuild_fraction: the sparsifier's (:func:`sparsify`).
        degree_trigger: the contracted graph's pull-out threshold (:func:`contract`).
        num_init: k-means restarts.

    Returns:
        ``(state, clustering)``: the :class:`ClusteringState` and the initial :class:`SpectralResult`
        (check its ``converged``).

    Raises:
        TypeError, ValueError: as the functions named above.

    References:
        S. Laenen, H. Sun, ICML 2024, Algorithms 1-2 (initialisation).

    Examples:
        >>> import jax
        >>> from jaxcore.graphs import sbm_graph
        >>> g, truth = sbm_graph(jax.random.key(0), [40, 40], 0.5, 0.01)
        >>> state, first = init_clustering(jax.random.key(1), g, 2, sampling_constant=5.0)
        >>> bool(first.converged), int(state.contracted.num_supernodes)
        (True, 2)
    """
    key = check_key(key)
    # the contraction's and k-means' arguments checked before the sparsifier and eigensolver run
    check_scalar(degree_trigger, "degree_trigger", low=0.0, high=1.0, low_open=True)
    check_int(num_init, "num_init", minimum=1)
    k1, k2 = jax.random.split(key)
    h = sparsify(k1, graph, sampling_constant=sampling_constant, resample_factor=resample_factor,
                 rebuild_fraction=rebuild_fraction)
    first = spectral_clustering(k2, graph, num_clusters, edge_weight=h.weight, num_init=num_init)
    cg = contract(graph, first.labels.clip(0), num_clusters, edge_weight=h.weight, degree_trigger=degree_trigger)
    return ClusteringState(graph, h, cg), first


def update_clustering(key: Any, state: ClusteringState, src: Any, dst: Any, weight: Any = None, *,
                      donate: bool = False) -> ClusteringState:
    """Insert a batch of edges (and the new vertices they name) into G, H and the contracted graph.

    Without ``donate`` every call writes a new state, copying each buffer of G, H and the contracted
    graph (``O(capacity)``); with ``donate=True`` the batch is written into ``state``'s buffers (XLA
    buffer donation), ``O(B log B)`` a batch as the algorithm states, and ``state`` is consumed.

    Args:
        key: a ``jax.random.key`` (the sparsifier's draws).
        state: the current state.
        src, dst: ``[B]`` integer vertex ids (no self-loops); ids ``>= num_vertices`` insert vertices.
        weight: ``[B]`` weights > 0 (default 1).
        donate: hand ``state``'s buffers to the update (``state = update_clustering(..., donate=True)``
            in a stream loop): ``state`` and its graph, sparsifier and contracted graph must not be used
            afterwards (their arrays are deleted; reading one raises). Keep a copy
            (``jax.tree.map(jnp.copy, state)``) to hold on to an old state.

    Returns:
        The new :class:`ClusteringState`.

    Raises:
        TypeError, ValueError: as :func:`add_edges`.

    References:
        S. Laenen, H. Sun, ICML 2024, Algorithms 1-2 (updates).

    Examples:
        >>> import jax
        >>> from jaxcore.graphs import sbm_graph
        >>> g, _ = sbm_graph(jax.random.key(0), [40, 40], 0.5, 0.01)
        >>> state, _ = init_clustering(jax.random.key(1), g, 2, sampling_constant=5.0)
        >>> state = update_clustering(jax.random.key(2), state, [80, 80, 81], [81, 82, 82])  # a new triangle
        >>> int(state.graph.num_vertices), int(state.contracted.num_supernodes)
        (83, 5)
    """
    key = check_key(key)
    if not isinstance(state, ClusteringState):
        raise TypeError(expected("state", "a ClusteringState", type(state).__name__, raw=True))
    donate = check_bool(donate, "donate")
    if donate:
        state = _unshared(state)
    m0 = int(state.graph.num_edges)
    g = add_edges(state.graph, src, dst, weight, donate=donate)
    num_new = int(g.num_edges) - m0
    h = update_sparsifier(key, state.sparsifier, g, num_new, donate=donate)
    cg = update_contracted(state.contracted, g, num_new, donate=donate)
    return ClusteringState(g, h, cg)


def _unshared(state: ClusteringState) -> ClusteringState:
    """``state`` with every buffer that two of its parts share copied (JAX may hand an input of a program back
    as its output), so that donating the graph, the sparsifier and the contracted graph in turn never hands
    the same buffer over twice."""
    seen: set[int] = set()

    def own(x: Any) -> Any:
        if not isinstance(x, jax.Array):
            return x
        try:
            ptr = x.unsafe_buffer_pointer()
        except Exception:  # noqa: BLE001 - an array over several devices: its identity stands in
            ptr = id(x)
        if ptr in seen:
            return x.copy()
        seen.add(ptr)
        return x

    return ClusteringState(*(jax.tree.map(own, part) for part in state))


def query_clustering(key: Any, state: ClusteringState, num_clusters: int, *, num_init: int = 10,
                     recontract: bool = True) -> QueryResult:
    """Cluster all vertices through the contracted graph (its eigenvectors, k-means restarts, label map).

    Args:
        key: a ``jax.random.key`` (k-means++ restarts).
        state: the current state.
        num_clusters: k at this query.
        num_init: k-means restarts.
        recontract: contract the result for the next updates (keeps later queries small).

    Returns:
        :class:`QueryResult`.

    Raises:
        TypeError, ValueError: as :func:`query_contracted`.

    References:
        S. Laenen, H. Sun, ICML 2024, Algorithm 3 (query).

    Examples:
        >>> import jax
        >>> from jaxcore.graphs import sbm_graph
        >>> g, truth = sbm_graph(jax.random.key(0), [40, 40], 0.5, 0.01)
        >>> state, _ = init_clustering(jax.random.key(1), g, 2, sampling_constant=5.0)
        >>> r = query_clustering(jax.random.key(2), state, 2)
        >>> bool((r.labels[:80] == r.labels[0]).sum() == 40)
        True
    """
    key = check_key(key)
    if not isinstance(state, ClusteringState):
        raise TypeError(expected("state", "a ClusteringState", type(state).__name__, raw=True))
    r = query_contracted(key, state.contracted, state.graph, num_clusters, num_init=num_init, recontract=recontract)
    return QueryResult(r.labels, r.eigenvalues, state._replace(contracted=r.contracted))
