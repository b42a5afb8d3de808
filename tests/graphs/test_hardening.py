"""Bad input to jaxcore.graphs' public functions: a clear error in the one dialect naming the argument.

``"<argument>: expected <what>, got <value>"``; TypeError for types, ValueError for values. Never a
silent inf weight (a float64 weight beyond the graph's float32), a NaN distance (points whose
squares overflow), or eigenpairs of padding returned as if they were the graph's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import graphs as G

KEY = jax.random.key(0)
SRC, DST = [0, 1, 2, 3, 4, 5, 2], [1, 2, 0, 4, 5, 3, 3]  # two triangles and a bridge
GRAPH = G.from_edges(SRC, DST)
X = np.random.default_rng(0).normal(size=(10, 2))


@pytest.mark.parametrize("call, exc, match", [
    (lambda: G.capacity_bucket(3.0), TypeError, "^n: expected an int"),
    (lambda: G.capacity_bucket(-1), ValueError, "^n: expected an int >= 0"),
    (lambda: G.capacity_bucket(4, minimum=0), ValueError, "^minimum: expected an int >= 1"),
    (lambda: G.empty_graph(0), ValueError, "^vertex_capacity: expected an int >= 1"),
    (lambda: G.empty_graph(8, 0), ValueError, "^edge_capacity: expected an int >= 1"),
    (lambda: G.empty_graph(width=2.0), TypeError, "^width: expected an int"),
    (lambda: G.empty_graph(dtype=jnp.int32), TypeError, "^dtype: expected a floating dtype"),
    (lambda: G.empty_graph(dtype="foo"), TypeError, "^dtype: expected a floating dtype, got 'foo'"),
    (lambda: G.from_edges([0.0], [1.0]), TypeError, "^src: expected integer vertex ids"),
    (lambda: G.from_edges([True], [False]), TypeError, "^src: expected integer vertex ids"),
    (lambda: G.from_edges("ab", "cd"), TypeError, "^src: expected integer vertex ids"),
    (lambda: G.from_edges(None, [1]), TypeError, "^src: expected a 1-D array"),
    (lambda: G.from_edges([0], [0.5]), TypeError, "^dst: expected integer vertex ids"),
    (lambda: G.from_edges([[0]], [[1]]), ValueError, "^src: expected a 1-D array"),
    (lambda: G.from_edges([0, 1], [1]), ValueError, "^src, dst: expected arrays of equal length"),
    (lambda: G.from_edges([-1], [0]), ValueError, r"^src: expected vertex ids in \[0, 2\*\*31 - 2\], got -1"),
    (lambda: G.from_edges([0], [2**31]), ValueError, r"^dst: expected vertex ids in \[0, 2\*\*31 - 2\]"),
    (lambda: G.from_edges([0, 3], [1, 3]), ValueError, r"^src, dst: expected edges between distinct vertices"),
    (lambda: G.from_edges([0], [1], [0.0]), ValueError, "^weight: expected finite weights > 0"),
    (lambda: G.from_edges([0], [1], [-1.0]), ValueError, "^weight: expected finite weights > 0"),
    (lambda: G.from_edges([0], [1], [np.nan]), ValueError, "^weight: expected finite weights > 0"),
    (lambda: G.from_edges([0], [1], [np.inf]), ValueError, "^weight: expected finite weights > 0"),
    (lambda: G.from_edges([0], [1], ["a"]), TypeError, "^weight: expected real edge weights"),
    (lambda: G.from_edges([0], [1], [1.0, 2.0]), ValueError, "^weight: expected one weight per edge"),
    (lambda: G.from_edges([0], [1], [1e39]), ValueError, "^weight: expected weights > 0 that are finite in the "
                                                          "graph's float32, got 1e"),
    (lambda: G.from_edges([0], [1], [1e-50]), ValueError, "^weight: expected weights > 0 that are finite"),
    (lambda: G.add_edges(G.empty_graph(dtype=jnp.float16), [0], [1], [1e5]), ValueError,
     "^weight: expected weights > 0 that are finite in the graph's float16"),
    (lambda: G.from_edges([0], [3], num_vertices=2), ValueError, "^num_vertices: expected an int >= 4"),
    (lambda: G.from_edges([0], [3], num_vertices=5.0), TypeError, "^num_vertices: expected an int"),
    (lambda: G.add_edges("g", [0], [1]), TypeError, "^graph: expected a DynamicGraph, got str"),
])
def test_graph_construction_refuses(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("call, exc, match", [
    (lambda: G.laplacian_matvec(None, jnp.ones(64)), TypeError, "^graph: expected a DynamicGraph"),
    (lambda: G.laplacian_matvec(GRAPH, jnp.zeros(5)), ValueError, r"^x: expected an array \[64, b\]"),
    (lambda: G.laplacian_matvec(GRAPH, jnp.ones((64, 1, 1))), ValueError, r"^x: expected an array \[64, b\]"),
    (lambda: G.laplacian_matvec(GRAPH, jnp.full(64, jnp.nan)), ValueError, "^x: expected finite values, got nan"),
    (lambda: G.laplacian_matvec(GRAPH, np.full(64, "a")), TypeError, "^x: expected a real number or array"),
    (lambda: G.laplacian_matvec(GRAPH, jnp.ones(64), edge_weight=-jnp.ones(64)), ValueError,
     "^edge_weight: expected finite weights >= 0"),
    (lambda: G.laplacian_matvec(GRAPH, jnp.ones(64), edge_weight=jnp.full(64, jnp.nan)), ValueError,
     "^edge_weight: expected finite weights >= 0"),
    (lambda: G.laplacian_matvec(GRAPH, jnp.ones(64), edge_weight=jnp.ones(64, jnp.int32)), TypeError,
     "^edge_weight: expected a float array"),
    (lambda: G.laplacian_matvec(GRAPH, jnp.ones(64), edge_weight=np.full(64, "a")), TypeError,
     "^edge_weight: expected a float array"),
    (lambda: G.laplacian_matvec(GRAPH, jnp.ones(64), edge_weight=jnp.ones(3)), ValueError,
     r"^edge_weight: expected one weight per edge slot, shape \(64,\)"),
])
def test_matvec_refuses(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("kw, exc, match", [
    ({"k": 0}, ValueError, r"^k: expected an int in \[1, 6\], got 0"),
    ({"k": 7}, ValueError, r"^k: expected an int in \[1, 6\], got 7"),       # six vertices: six eigenpairs
    ({"k": 2.0}, TypeError, "^k: expected an int"),
    ({"tol": 0.0}, ValueError, "^tol: expected a finite number > 0"),
    ({"tol": np.nan}, ValueError, "^tol: expected a finite number > 0"),
    ({"degree": 0}, ValueError, "^degree: expected an int >= 1"),
    ({"block_size": 2}, ValueError, "^block_size: expected an int >= 3"),
    ({"max_iterations": 0}, ValueError, "^max_iterations: expected an int >= 1"),
])
def test_eigensolver_refuses(kw, exc, match):
    kw = {"k": 2, **kw}
    k = kw.pop("k")
    with pytest.raises(exc, match=match):
        G.smallest_eigenpairs(KEY, GRAPH, k, **kw)


def test_eigenpairs_need_vertices_with_edges():
    with pytest.raises(TypeError, match="^key: expected a jax.random.key"):
        G.smallest_eigenpairs(0, GRAPH, 2)
    with pytest.raises(TypeError, match="^graph: expected a DynamicGraph, got NoneType"):
        G.smallest_eigenpairs(KEY, None, 2)
    with pytest.raises(ValueError, match="^graph: expected at least one edge of positive weight"):
        G.smallest_eigenpairs(KEY, G.empty_graph(), 1)
    with pytest.raises(ValueError, match="^graph: expected at least one edge of positive weight"):
        G.smallest_eigenpairs(KEY, GRAPH, 1, edge_weight=jnp.zeros(64))
    # isolated vertices do not count: a graph of one edge on 10 vertices has 2 eigenpairs to give
    g = G.from_edges([0], [1], num_vertices=10)
    with pytest.raises(ValueError, match=r"^num_clusters: expected an int in \[1, 2\], got 3"):
        G.spectral_clustering(KEY, g, 3)
    with pytest.raises(ValueError, match=r"^num_clusters: expected an int in \[1, 6\], got 7"):
        G.init_clustering(KEY, GRAPH, 7)


def test_eigenpairs_above_one_are_the_graphs_not_the_paddings():
    # one edge: L_sym has eigenvalues 0 and 2; padding vectors (L x = x) must not pass for the second one
    r = G.smallest_eigenpairs(KEY, G.from_edges([0], [1], num_vertices=3), 2)
    np.testing.assert_allclose(np.asarray(r.eigenvalues), [0.0, 2.0], atol=1e-5)
    vec = np.asarray(r.eigenvectors)
    assert bool(r.converged) and (vec[2:] == 0).all()
    np.testing.assert_allclose(np.abs(vec[:2]), np.sqrt(0.5), atol=1e-5)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: G.kmeans(0, X, 2), TypeError, "^key: expected a jax.random.key"),
    (lambda: G.kmeans(KEY, X[:, 0], 2), ValueError, r"^x: expected a non-empty 2-D array \[N, d\]"),
    (lambda: G.kmeans(KEY, np.zeros((0, 2)), 1), ValueError, r"^x: expected a non-empty 2-D array"),
    (lambda: G.kmeans(KEY, np.where(X > 1, np.nan, X), 2), ValueError, "^x: expected finite values, got nan"),
    (lambda: G.kmeans(KEY, X.astype(str), 2), TypeError, "^x: expected a real number or array"),
    (lambda: G.kmeans(KEY, X * 1e20, 2), ValueError, "^x: expected points whose squared norms fit in float32"),
    (lambda: G.kmeans(KEY, X, 11), ValueError, r"^num_clusters: expected an int in \[1, 10\], got 11"),
    (lambda: G.kmeans(KEY, X, 0), ValueError, r"^num_clusters: expected an int in \[1, 10\]"),
    (lambda: G.kmeans(KEY, X, 2.0), TypeError, "^num_clusters: expected an int"),
    (lambda: G.kmeans(KEY, X, 2, weights=-np.ones(10)), ValueError, "^weights: expected finite values >= 0"),
    (lambda: G.kmeans(KEY, X, 2, weights=np.full(10, np.nan)), ValueError, "^weights: expected finite values >= 0"),
    (lambda: G.kmeans(KEY, X, 1, weights=np.zeros(10)), ValueError, "^weights: expected at least one weight > 0"),
    (lambda: G.kmeans(KEY, X, 3, weights=np.r_[1.0, 1.0, np.zeros(8)]), ValueError,
     r"^num_clusters: expected an int in \[1, 2\]"),                      # two points of positive weight
    (lambda: G.kmeans(KEY, X, 2, weights=np.ones(9)), ValueError, r"^weights: expected shape \(10,\)"),
    (lambda: G.kmeans(KEY, X, 2, tol=-1.0), ValueError, "^tol: expected a finite number >= 0"),
    (lambda: G.kmeans(KEY, X, 2, num_init=0), ValueError, "^num_init: expected an int >= 1"),
    (lambda: G.kmeans(KEY, X, 2, max_iterations=0), ValueError, "^max_iterations: expected an int >= 1"),
    (lambda: G.kmeans(None, X, 2, init=np.zeros((3, 2))), ValueError, r"^init: expected centres of shape \(2, 2\)"),
    (lambda: G.kmeans(None, X, 2, init=np.full((2, 2), np.nan)), ValueError, "^init: expected finite values"),
    (lambda: G.kmeans(3, X, 2, init=np.zeros((2, 2))), TypeError, "^key: expected a jax.random.key"),
])
def test_kmeans_refuses(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_sparsifier_and_contracted_graph_refuse():
    h = G.sparsify(KEY, GRAPH)
    cg = G.contract(GRAPH, np.array([0, 0, 0, 1, 1, 1]), 2)
    cases = [
        (lambda: G.sparsify(0, GRAPH), TypeError, "^key: expected a jax.random.key"),
        (lambda: G.sparsify(KEY, "g"), TypeError, "^graph: expected a DynamicGraph"),
        (lambda: G.sparsify(KEY, GRAPH, sampling_constant=0.0), ValueError, "^sampling_constant: expected"),
        (lambda: G.sparsify(KEY, GRAPH, sampling_constant=np.inf), ValueError, "^sampling_constant: expected"),
        (lambda: G.sparsify(KEY, GRAPH, resample_factor=1.0), ValueError,
         r"^resample_factor: expected a number in \(1"),
        (lambda: G.sparsify(KEY, GRAPH, rebuild_fraction=0.0), ValueError, r"^rebuild_fraction: expected a number in"),
        (lambda: G.update_sparsifier(KEY, h, GRAPH, -1), ValueError, r"^num_new: expected an int in \[0, 7\]"),
        (lambda: G.update_sparsifier(KEY, h, GRAPH, 8), ValueError, r"^num_new: expected an int in \[0, 7\]"),
        (lambda: G.update_sparsifier(KEY, h, GRAPH, 1.0), TypeError, "^num_new: expected an int"),
        (lambda: G.update_sparsifier(KEY, "h", GRAPH, 1), TypeError, "^sparsifier: expected a Sparsifier"),
        (lambda: G.update_sparsifier(KEY, G.sparsify(KEY, G.empty_graph(128)), GRAPH, 1), ValueError,
         "^graph: expected capacities at least the sparsifier's"),
        (lambda: G.contract(GRAPH, np.zeros(6), 2), TypeError, "^labels: expected integer cluster labels"),
        (lambda: G.contract(GRAPH, "abc", 1), TypeError, "^labels: expected integer cluster labels"),
        (lambda: G.contract(GRAPH, np.array([0, 0, 0, 1, 1, 2]), 2), ValueError, r"^labels: expected cluster labels "
                                                                                r"in \[0, 1\], got 2"),
        (lambda: G.contract(GRAPH, np.array([0, 0, 0, 1, 1, -1]), 2), ValueError, "^labels: expected cluster labels"),
        (lambda: G.contract(GRAPH, np.zeros(5, int), 2), ValueError, r"^labels: expected shape \(6,\) or \(64,\)"),
        (lambda: G.contract(GRAPH, np.zeros(6, int), 0), ValueError, "^num_clusters: expected an int >= 1"),
        (lambda: G.contract(GRAPH, np.zeros(6, int), 1, degree_trigger=0.0), ValueError, "^degree_trigger: expected"),
        (lambda: G.contract(GRAPH, np.zeros(6, int), 1, edge_weight=-jnp.ones(64)), ValueError,
         "^edge_weight: expected"),
        (lambda: G.update_contracted(cg, GRAPH, -1), ValueError, r"^num_new: expected an int in \[0, 7\]"),
        (lambda: G.update_contracted("cg", GRAPH, 1), TypeError, "^contracted: expected a ContractedGraph"),
        (lambda: G.update_contracted(cg, "g", 1), TypeError, "^graph: expected a DynamicGraph"),
        (lambda: G.query_contracted(KEY, cg, GRAPH, 3), ValueError, r"^num_clusters: expected an int in \[1, 2\]"),
        (lambda: G.query_contracted(KEY, cg, GRAPH, 2, recontract="y"), TypeError, "^recontract: expected a bool"),
        (lambda: G.query_contracted(KEY, cg, GRAPH, 2, num_init=0), ValueError, "^num_init: expected an int >= 1"),
        (lambda: G.query_contracted(1, cg, GRAPH, 2), TypeError, "^key: expected a jax.random.key"),
        (lambda: G.query_contracted(KEY, h, GRAPH, 2), TypeError, "^contracted: expected a ContractedGraph"),
    ]
    for call, exc, match in cases:
        with pytest.raises(exc, match=match):
            call()


def test_dynamic_clustering_refuses():
    state = G.ClusteringState(GRAPH, G.sparsify(KEY, GRAPH), G.contract(GRAPH, np.array([0, 0, 0, 1, 1, 1]), 2))
    cases = [
        (lambda: G.init_clustering(0, GRAPH, 2), TypeError, "^key: expected a jax.random.key"),
        (lambda: G.init_clustering(KEY, GRAPH, 0), ValueError, r"^num_clusters: expected an int in \[1, 6\]"),
        (lambda: G.init_clustering(KEY, GRAPH, 2, degree_trigger=2.0), ValueError, "^degree_trigger: expected"),
        (lambda: G.init_clustering(KEY, GRAPH, 2, num_init=0), ValueError, "^num_init: expected an int >= 1"),
        (lambda: G.init_clustering(KEY, GRAPH, 2, sampling_constant=-1.0), ValueError, "^sampling_constant: expected"),
        (lambda: G.update_clustering(0, state, [0], [1]), TypeError, "^key: expected a jax.random.key"),
        (lambda: G.update_clustering(KEY, "s", [0], [1]), TypeError, "^state: expected a ClusteringState"),
        (lambda: G.update_clustering(KEY, state, [0], [0]), ValueError, "^src, dst: expected edges between distinct"),
        (lambda: G.update_clustering(KEY, state, [0], [1], [1e39]), ValueError, "^weight: expected weights > 0 that"),
        (lambda: G.update_clustering(KEY, state, [0.0], [1.0]), TypeError, "^src: expected integer vertex ids"),
        (lambda: G.query_clustering(KEY, state, 3), ValueError, r"^num_clusters: expected an int in \[1, 2\]"),
        (lambda: G.query_clustering(KEY, state, 0), ValueError, r"^num_clusters: expected an int in \[1, 2\]"),
        (lambda: G.query_clustering(KEY, (1, 2, 3), 2), TypeError, "^state: expected a ClusteringState"),
    ]
    for call, exc, match in cases:
        with pytest.raises(exc, match=match):
            call()


@pytest.mark.parametrize("call, exc, match", [
    (lambda: G.sbm_edges(0, [4, 4], 0.5, 0.1), TypeError, "^key: expected a jax.random.key"),
    (lambda: G.sbm_edges(KEY, [], 0.5, 0.1), ValueError, "^sizes: expected at least one cluster"),
    (lambda: G.sbm_edges(KEY, [0, 4], 0.5, 0.1), ValueError, "^sizes: expected an int >= 1"),
    (lambda: G.sbm_edges(KEY, 4, 0.5, 0.1), TypeError, "^sizes: expected a sequence of cluster sizes"),
    (lambda: G.sbm_edges(KEY, [4.0, 4], 0.5, 0.1), TypeError, "^sizes: expected an int"),
    (lambda: G.sbm_edges(KEY, [4, 4], 1.5, 0.1), ValueError, r"^p: expected a number in \[0, 1\]"),
    (lambda: G.sbm_edges(KEY, [4, 4], np.nan, 0.1), ValueError, r"^p: expected a number in \[0, 1\]"),
    (lambda: G.sbm_edges(KEY, [4, 4], 0.5, -0.1), ValueError, r"^q: expected a number in \[0, 1\]"),
    (lambda: G.sbm_graph(KEY, [4, 4], 0.5, "q"), TypeError, "^q: expected a real number"),
    (lambda: G.sbm_stream(KEY, [4, 4], 0.5, 0.1, []), ValueError, "^new_sizes: expected at least one cluster"),
    (lambda: G.knn_edges(np.ones(5), 2), ValueError, r"^x: expected a 2-D array \[n, d\] with n >= 2"),
    (lambda: G.knn_edges(np.ones((1, 2)), 1), ValueError, r"^x: expected a 2-D array \[n, d\] with n >= 2"),
    (lambda: G.knn_edges(X, 10), ValueError, r"^num_neighbors: expected an int in \[1, 9\]"),
    (lambda: G.knn_edges(np.where(X > 1, np.nan, X), 2), ValueError, "^x: expected finite values"),
    (lambda: G.knn_edges(X * 1e20, 2), ValueError, "^x: expected points whose squared norms fit in float32"),
    (lambda: G.knn_edges(X, 2, chunk_size=0), ValueError, "^chunk_size: expected an int >= 1"),
    (lambda: G.knn_stream(KEY, X, np.zeros(10), 2, 1), ValueError, "^labels: expected a 1-D integer array"),
    (lambda: G.knn_stream(KEY, X, np.zeros(9, int), 2, 1), ValueError, r"^x: expected points \[n, d\] with n = 9"),
    (lambda: G.knn_stream(KEY, X, np.arange(10) % 2, 2, 0), ValueError, r"^initial_classes: expected an int in "),
    (lambda: G.knn_stream(KEY, X, np.arange(10) % 2, 2, 3), ValueError, r"^initial_classes: expected an int in "),
    (lambda: G.knn_stream(0, X, np.arange(10) % 2, 2, 1), TypeError, "^key: expected a jax.random.key"),
])
def test_streams_refuse(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_query_needs_as_many_supernodes_with_edges_as_clusters():
    # vertex 3 is isolated: its super-node has degree 0 and cannot be a cluster of its own (the query
    # reported the padding eigenvalue 3 as the third eigenvalue before)
    g = G.from_edges([0, 1], [1, 2], num_vertices=4)
    cg = G.contract(g, np.array([0, 0, 1, 2]), 3)
    with pytest.raises(ValueError, match=r"^num_clusters: expected an int in \[1, 2\], got 3"):
        G.query_contracted(KEY, cg, g, 3)
    g2 = G.from_edges([0], [1], num_vertices=3)
    cg2 = G.contract(g2, np.array([0, 0, 1]), 2, edge_weight=np.zeros(64, np.float32))
    with pytest.raises(ValueError, match="^contracted: expected a super-node with an edge"):
        G.query_contracted(KEY, cg2, g2, 1)
