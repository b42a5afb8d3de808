"""jaxcore.graphs: dynamic spectral clustering of evolving graphs (Laenen & Sun, ICML 2024).

A :class:`DynamicGraph` holds an undirected graph in padded buffers whose capacities double as it
grows (:func:`add_edges` inserts a batch of edges and new vertices). The dynamic algorithm keeps a
cluster-preserving sparsifier (:func:`sparsify`, :func:`update_sparsifier`) and a contracted graph
of the last clustering (:func:`contract`, :func:`update_contracted`); a query is an eigensolve on the
small contracted graph plus k-means restarts (:func:`query_contracted`). :func:`init_clustering`,
:func:`update_clustering` and :func:`query_clustering` run the three together. The full-graph path
is :func:`spectral_clustering` (the residual-checked eigensolver :func:`smallest_eigenpairs`, then
:func:`kmeans`). Random functions take ``key`` first.

The main workflow, on a growing kNN graph of real MNIST digits (classes arriving one at a time):

>>> import jax, numpy as np
>>> from sklearn.metrics import adjusted_rand_score as ari
>>> from jaxcore.datasets import load_mnist
>>> from jaxcore.graphs import from_edges, init_clustering, knn_stream, query_clustering
>>> from jaxcore.graphs import spectral_clustering, update_clustering
>>> x, y = load_mnist()["test"]
>>> keep = np.isin(y, [0, 1, 6]) & (np.arange(y.size) < 2000)
>>> st = knn_stream(jax.random.key(0), x[keep].reshape(-1, 784), y[keep], 10, initial_classes=2)
>>> state, _ = init_clustering(jax.random.key(1), from_edges(st.src, st.dst), 2, sampling_constant=1.0)
>>> state = update_clustering(jax.random.key(2), state, *st.batches[0])          # the third digit arrives
>>> dynamic = query_clustering(jax.random.key(3), state, 3).labels                # contracted-graph query
>>> full = spectral_clustering(jax.random.key(4), state.graph, 3).labels           # the whole graph again
>>> n = st.labels[1].size
>>> abs(ari(st.labels[1], np.asarray(dynamic[:n])) - ari(st.labels[1], np.asarray(full[:n]))) < 0.1
True

References:
    S. Laenen, H. Sun. "Dynamic Spectral Clustering with Provable Approximation Guarantee."
    ICML 2024.
"""

from .contracted import ContractedGraph, ContractedQueryResult, contract, query_contracted, update_contracted
from .dynamic import ClusteringState, QueryResult, init_clustering, query_clustering, update_clustering
from .eigensolver import EigenResult, laplacian_matvec, smallest_eigenpairs
from .graph import DynamicGraph, add_edges, capacity_bucket, empty_graph, from_edges
from .clustering import KMeansResult, kmeans
from .sparsifier import Sparsifier, sparsify, update_sparsifier
from .spectral import SpectralResult, spectral_clustering
from .streams import GraphStream, knn_edges, knn_stream, sbm_edges, sbm_graph, sbm_merge_stream, sbm_stream

__all__ = [
    "ClusteringState",
    "ContractedGraph",
    "ContractedQueryResult",
    "DynamicGraph",
    "EigenResult",
    "GraphStream",
    "KMeansResult",
    "QueryResult",
    "SpectralResult",
    "Sparsifier",
    "add_edges",
    "capacity_bucket",
    "contract",
    "empty_graph",
    "from_edges",
    "init_clustering",
    "kmeans",
    "knn_edges",
    "knn_stream",
    "laplacian_matvec",
    "query_clustering",
    "query_contracted",
    "sbm_edges",
    "sbm_graph",
    "sbm_merge_stream",
    "sbm_stream",
    "smallest_eigenpairs",
    "sparsify",
    "spectral_clustering",
    "update_clustering",
    "update_contracted",
    "update_sparsifier",
]
