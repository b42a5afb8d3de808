"""DynamicGraph: batched insertion against a NumPy adjacency, capacity doubling, refusals."""

import jax
import numpy as np
import pytest

from jaxcore.graphs import add_edges, capacity_bucket, empty_graph, from_edges


def _check_table(g):
    """The adjacency table lists exactly the stored edges, in both rows."""
    n, m = int(g.num_vertices), int(g.num_edges)
    s, d, w = (np.asarray(a)[:m] for a in (g.src, g.dst, g.weight))
    nbr, eid, cnt = np.asarray(g.neighbors), np.asarray(g.edge_ids), np.asarray(g.count)
    got, want = [], []
    for v in range(n):
        for j in range(cnt[v]):
            got.append((v, int(nbr[v, j]), int(eid[v, j])))
    for e in range(m):
        want += [(int(s[e]), int(d[e]), e), (int(d[e]), int(s[e]), e)]
    assert sorted(got) == sorted(want)
    deg = np.zeros(n)
    np.add.at(deg, s, w)
    np.add.at(deg, d, w)
    np.testing.assert_allclose(np.asarray(g.degree)[:n], deg, rtol=1e-6)
    assert int(g.max_count) == cnt.max()


def test_insert_matches_numpy_and_grows_by_doubling():
    rng = np.random.default_rng(0)
    g = empty_graph()
    shapes = set()
    total = 0
    for _ in range(12):
        b = int(rng.integers(1, 40))
        s = rng.integers(0, total // 3 + 10, b)
        d = (s + 1 + rng.integers(0, 20, b))
        g = add_edges(g, s, d, weight=rng.uniform(0.5, 2.0, b))
        total += b
        shapes.add((g.vertex_capacity, g.edge_capacity, g.width))
    assert int(g.num_edges) == total
    _check_table(g)
    assert all(c & (c - 1) == 0 for shp in shapes for c in shp)   # powers of two
    assert len(shapes) <= 6                                        # a handful of compiled shapes


def test_adjacency_dense_and_vertex_insertion():
    g = from_edges([0, 1, 1], [1, 2, 2])                # a parallel edge: weights add
    a = g.adjacency()
    assert a[1, 2] == 2.0 and a[2, 1] == 2.0 and a[0, 1] == 1.0
    g = add_edges(g, [2], [70])                          # vertex insertion past the capacity
    assert int(g.num_vertices) == 71 and g.vertex_capacity == 128
    _check_table(g)



def test_reserved_capacities_hold_the_same_graph_and_keep_their_shapes():
    src, dst = [0, 1, 1, 3], [1, 2, 3, 4]
    plain = from_edges(src, dst, num_vertices=6)
    g = from_edges(src, dst, num_vertices=6, vertex_capacity=200, edge_capacity=300, width=20)
    assert (g.vertex_capacity, g.edge_capacity, g.width) == (256, 512, 32)
    assert (plain.vertex_capacity, plain.edge_capacity, plain.width) == (64, 64, 8)
    assert int(g.num_vertices) == 6 and int(g.num_edges) == 4
    np.testing.assert_array_equal(g.adjacency(), plain.adjacency())
    _check_table(g)
    grown = add_edges(g, np.arange(100, 150), np.arange(101, 151))   # inside the reservation: no resize
    assert (grown.vertex_capacity, grown.edge_capacity, grown.width) == (256, 512, 32)
    assert int(grown.num_vertices) == 151 and int(grown.num_edges) == 54
    _check_table(grown)
    with pytest.raises(ValueError, match="edge_capacity: expected"):
        from_edges(src, dst, edge_capacity=0)

def test_capacity_bucket():
    assert [capacity_bucket(n) for n in (0, 64, 65, 1000)] == [64, 64, 128, 1024]


def test_refusals():
    g = empty_graph()
    with pytest.raises(ValueError, match="src, dst: expected edges between distinct vertices"):
        add_edges(g, [1], [1])
    with pytest.raises(ValueError, match="src: expected vertex ids in"):
        add_edges(g, [-1], [1])
    with pytest.raises(TypeError, match="src: expected integer vertex ids"):
        add_edges(g, [0.5], [1])
    with pytest.raises(ValueError, match="src, dst: expected arrays of equal length"):
        add_edges(g, [0, 1], [1])
    with pytest.raises(ValueError, match="weight: expected finite weights > 0"):
        add_edges(g, [0], [1], weight=[np.nan])
    with pytest.raises(TypeError, match="graph: expected a DynamicGraph"):
        add_edges("g", [0], [1])
    with pytest.raises(ValueError, match="num_vertices: expected an int >= 3"):
        from_edges([0], [2], num_vertices=2)
    with pytest.raises(TypeError, match="dtype: expected a floating dtype"):
        empty_graph(dtype=np.int32)
    assert add_edges(g, [], []) is g


def test_float64(x64):
    g = from_edges([0], [1], weight=[1e-300])
    assert g.weight.dtype == np.float64 and float(g.degree[0]) == 1e-300
