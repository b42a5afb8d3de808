"""Hypothesis properties of jaxcore.graphs on small random graphs of one fixed capacity (one compilation each).

Every graph has at most 16 vertices and 45 distinct weighted edges, stored in buffers of 64 vertices,
64 edges and width 16, so all examples share one compiled insertion, mat-vec, eigensolver, sparsifier
and contraction; k-means runs on ``[20, 2]`` points (one k bucket). Oracles: the dense adjacency and
normalised Laplacian in NumPy (float64), ``numpy.linalg.eigh``, the sparsifier's closed-form
probabilities, ``Y^T A Y``. The ``*_deep`` tests (slow) run the same properties on 40 examples and
add the contracted-graph query.
"""

from __future__ import annotations

import itertools

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from jaxcore import graphs as G

NV, ME = 16, 45
PAIRS = list(itertools.combinations(range(NV), 2))
PATH = [(i, i + 1) for i in range(NV - 1)]
edges = st.lists(st.sampled_from(PAIRS), min_size=1, max_size=30, unique=True)           # isolated vertices too
# a path through all 16 vertices plus random chords: every vertex active, so the eigensolver's block
# (12 vectors for k = 2) never exceeds the active vertices and one program serves every example
connected = st.lists(st.sampled_from([p for p in PAIRS if p not in PATH]), max_size=30, unique=True).map(
    lambda extra: PATH + extra)
weights = arrays(np.float64, (ME,), elements=st.floats(0.1, 10.0))
seeds = st.integers(0, 2**31 - 1)


def _build(pairs, w, split=None):
    s = np.array([p[0] for p in pairs])
    d = np.array([p[1] for p in pairs])
    w = w[: len(pairs)]
    g = G.empty_graph(64, 64, 16)
    if split is None or not 0 < split < len(pairs):
        g = G.add_edges(g, s, d, w)
    else:
        g = G.add_edges(G.add_edges(g, s[:split], d[:split], w[:split]), s[split:], d[split:], w[split:])
    assert (g.vertex_capacity, g.edge_capacity, g.width) == (64, 64, 16)  # one shape for every example
    return g, s, d, w


def _dense(s, d, w, n):
    a = np.zeros((n, n))
    np.add.at(a, (s, d), w)
    np.add.at(a, (d, s), w)
    return a


def _lsym(a):
    deg = a.sum(1)
    on = deg > 0
    dinv = np.where(on, 1.0 / np.sqrt(np.where(on, deg, 1.0)), 0.0)
    return np.eye(a.shape[0]) - dinv[:, None] * a * dinv[None, :], on


# --- construction, mat-vec, sparsifier, contraction ----------------------------------------------------------


def _check_structure(pairs, w, split, seed, labels):
    g, s, d, w = _build(pairs, w, split)
    n = int(max(s.max(), d.max())) + 1
    a = _dense(s, d, w, n)
    assert int(g.num_edges) == len(pairs) and int(g.num_vertices) == n
    np.testing.assert_allclose(g.adjacency(), a, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g.degree)[:n], a.sum(1), rtol=1e-5)
    assert (np.asarray(g.degree)[n:] == 0).all()
    np.testing.assert_array_equal(np.asarray(g.count)[:n], (a > 0).sum(1))
    for v in range(n):  # the adjacency table lists exactly each vertex's neighbours and edge ids
        c = int(g.count[v])
        nbr, eid = np.asarray(g.neighbors)[v, :c], np.asarray(g.edge_ids)[v, :c]
        assert sorted(nbr.tolist()) == sorted(np.flatnonzero(a[v]).tolist())
        np.testing.assert_array_equal(np.where(s[eid] == v, d[eid], s[eid]), nbr)
    # L_sym x against the dense Laplacian (isolated and padding vertices: L x = x)
    x = jax.random.normal(jax.random.key(seed), (64, 2))
    lap, on = _lsym(a)
    ref = np.asarray(x, np.float64).copy()
    ref[:n][on] = (lap @ np.asarray(x, np.float64)[:n])[on]
    np.testing.assert_allclose(np.asarray(G.laplacian_matvec(g, x)), ref, rtol=1e-4, atol=1e-5)
    # sparsifier: each kept weight is w / p_e with p_u = min(1, C log n / d_u), p_e = p_u + p_v - p_u p_v
    c = 0.5
    h = G.sparsify(jax.random.key(seed), g, sampling_constant=c)
    pu = np.minimum(1.0, c * np.log(max(n, 2)) / np.where(a.sum(1) > 0, a.sum(1), np.inf))
    np.testing.assert_allclose(np.asarray(h.prob)[:n], np.where(a.sum(1) > 0, pu, 1.0), rtol=1e-5)
    pe = pu[s] + pu[d] - pu[s] * pu[d]
    kept = np.asarray(h.weight)[: len(pairs)]
    assert ((kept == 0) | np.isclose(kept, w / pe, rtol=1e-5)).all()
    assert (kept[pe >= 1] > 0).all() and (np.asarray(h.weight)[len(pairs):] == 0).all()
    # contraction: Y^T A Y of random labels in [0, 3)
    lab = np.asarray(labels[:n])
    cg = G.contract(g, lab, 3)
    y = np.eye(3)[lab]
    np.testing.assert_allclose(np.asarray(cg.matrix)[:3, :3], y.T @ a @ y, rtol=1e-5)
    assert int(cg.num_supernodes) == 3 and (np.asarray(cg.assign)[:n] == lab).all()


@given(edges, weights, st.integers(0, ME), seeds, arrays(np.int32, (NV,), elements=st.integers(0, 2)))
def test_fuzz_structure(pairs, w, split, seed, labels):
    _check_structure(pairs, w, split, seed, labels)


@pytest.mark.slow
@settings(max_examples=40)
@given(edges, weights, st.integers(0, ME), seeds, arrays(np.int32, (NV,), elements=st.integers(0, 2)))
def test_fuzz_structure_deep(pairs, w, split, seed, labels):
    _check_structure(pairs, w, split, seed, labels)


# --- eigensolver ----------------------------------------------------------------------------------------------


def _check_eigenpairs(pairs, w, seed):
    g, s, d, w = _build(pairs, w)
    n = int(g.num_vertices)
    lap, on = _lsym(_dense(s, d, w, n))
    ref = np.linalg.eigvalsh(lap[np.ix_(on, on)])[:2]
    r = G.smallest_eigenpairs(jax.random.key(seed), g, 2)
    lam, vec, res = np.asarray(r.eigenvalues, np.float64), np.asarray(r.eigenvectors, np.float64), \
        np.asarray(r.residual_norms)
    assert lam.shape == (2,) and vec.shape == (64, 2) and np.isfinite(lam).all() and np.isfinite(vec).all()
    assert (vec[n:] == 0).all() and (vec[:n][~on] == 0).all()        # padding and isolated vertices excluded
    np.testing.assert_allclose(vec.T @ vec, np.eye(2), atol=1e-4)
    # the reported residuals are the residuals of what is returned
    lx = lap @ vec[:n]
    np.testing.assert_allclose(np.linalg.norm(lx - vec[:n] * lam, axis=0), res, atol=2e-5)
    assert bool(r.converged) == bool(res.max() <= 1e-4)
    if bool(r.converged):
        np.testing.assert_allclose(lam, ref, atol=1e-3)
        assert (np.diff(lam) >= -1e-5).all()


@given(connected, weights, seeds)
def test_fuzz_eigenpairs(pairs, w, seed):
    _check_eigenpairs(pairs, w, seed)


@pytest.mark.slow
@settings(max_examples=40)
@given(connected, weights, seeds)
def test_fuzz_eigenpairs_deep(pairs, w, seed):
    _check_eigenpairs(pairs, w, seed)


# --- k-means --------------------------------------------------------------------------------------------------

points = arrays(np.float32, (20, 2), elements=st.floats(-1e3, 1e3, width=32))


def _check_kmeans(x, k, scale, seed):
    x = (x.astype(np.float64) * scale).astype(np.float32)
    if 4 * (x.astype(np.float64) ** 2).sum(1).max() > np.finfo(np.float32).max:  # squared distances overflow
        with pytest.raises(ValueError, match="^x: expected points whose squared norms fit in float32"):
            G.kmeans(jax.random.key(seed), x, k, num_init=2)
        return
    r = G.kmeans(jax.random.key(seed), x, k, num_init=2)
    lab, c, inertia = np.asarray(r.labels), np.asarray(r.centers, np.float64), float(r.inertia)
    assert lab.shape == (20,) and lab.dtype == np.int32 and c.shape == (k, 2)
    assert ((lab >= 0) & (lab < k)).all() and np.isfinite(c).all() and np.isfinite(inertia)
    xd = x.astype(np.float64)
    dist = ((xd[:, None, :] - c[None]) ** 2).sum(-1)
    top = max(float((xd ** 2).sum(1).max()), 1e-30)
    # every point sits with its nearest centre, and the inertia is the sum of those squared distances
    assert (dist[np.arange(20), lab] <= dist.min(1) + 1e-5 * top).all()
    np.testing.assert_allclose(inertia, dist[np.arange(20), lab].sum(), rtol=1e-3, atol=1e-5 * top)
    if k == 1:  # one cluster: the mean and the total sum of squares
        np.testing.assert_allclose(c[0], xd.mean(0), rtol=1e-4, atol=1e-5 * np.sqrt(top))
        np.testing.assert_allclose(inertia, ((xd - xd.mean(0)) ** 2).sum(), rtol=1e-3, atol=1e-5 * top)


@given(points, st.integers(1, 4), st.sampled_from([1.0, 1e-3, 1e15]), seeds)
def test_fuzz_kmeans(x, k, scale, seed):
    _check_kmeans(x, k, scale, seed)


@pytest.mark.slow
@settings(max_examples=40)
@given(points, st.integers(1, 8), st.sampled_from([1.0, 1e-3, 1e15, 1e18]), seeds)
def test_fuzz_kmeans_deep(x, k, scale, seed):
    _check_kmeans(x, k, scale, seed)


# --- the dynamic algorithm (deep only: the query compiles a dense eigh and k-means) --------------------------


NEW = list(itertools.combinations(range(NV + 8), 2))   # updates may insert vertices 16 .. 23


@pytest.mark.slow
@settings(max_examples=40)
@given(st.lists(st.sampled_from([p for p in PAIRS if p not in PATH]), max_size=10, unique=True), weights, seeds,
       st.lists(st.sampled_from(NEW), min_size=1, max_size=10, unique=True))
def test_fuzz_dynamic_deep(chords, w, seed, update):
    g0, s, d, w = _build(PATH + chords, w)        # 16 active vertices: one eigensolver program
    state, first = G.init_clustering(jax.random.key(seed), g0, 2, sampling_constant=1e6)
    assert ((np.asarray(first.labels)[:NV] >= 0) & (np.asarray(first.labels)[:NV] < 2)).all()
    state = G.update_clustering(jax.random.key(seed + 1), state, [p[0] for p in update], [p[1] for p in update])
    g = state.graph
    n = int(g.num_vertices)
    assert n == max(NV, max(max(p) for p in update) + 1) and int(g.num_edges) == len(PATH + chords) + len(update)
    # the contracted matrix is Y^T A_c Y for the sparsifier's weights (all kept at this constant)
    a = g.adjacency()
    assign = np.asarray(state.contracted.assign)[:n]
    seen = np.zeros(n, bool)
    seen[:NV] = True
    seen[[v for p in update for v in p]] = True
    np.testing.assert_array_equal(assign >= 0, seen)                # never-seen vertices have no super-node
    y = np.eye(state.contracted.supernode_capacity)[np.where(seen, assign, 0)] * seen[:, None]
    np.testing.assert_allclose(np.asarray(state.contracted.matrix), y.T @ a @ y, rtol=1e-5, atol=1e-5)
    q = G.query_clustering(jax.random.key(seed + 2), state, 2)
    lab = np.asarray(q.labels)
    assert ((lab[:n][seen] >= 0) & (lab[:n][seen] < 2)).all() and (lab[:n][~seen] == -1).all()
    assert (lab[n:] == -1).all() and np.isfinite(np.asarray(q.eigenvalues)).all()
    assert int(q.state.contracted.num_supernodes) == 2             # re-contracted by the new clustering
