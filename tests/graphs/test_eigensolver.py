"""smallest_eigenpairs: eigenpairs equal numpy eigh (small) and scipy eigsh (medium), residuals checked."""

import jax
import numpy as np
import pytest

from jaxcore.graphs import from_edges, laplacian_matvec, sbm_graph, smallest_eigenpairs, spectral_clustering
from sklearn.metrics import adjusted_rand_score

G, TRUTH = sbm_graph(jax.random.key(0), [20, 20, 20], 0.5, 0.02)


def _lsym(g):
    a = g.adjacency()
    d = a.sum(1)
    dm = 1.0 / np.sqrt(d)
    return np.eye(len(d)) - dm[:, None] * a * dm[None, :]


def test_matches_numpy_eigh_with_residuals():
    lap = _lsym(G)
    vals = np.linalg.eigh(lap)[0]
    r = smallest_eigenpairs(jax.random.key(0), G, 3)
    assert bool(r.converged)
    np.testing.assert_allclose(np.asarray(r.eigenvalues), vals[:3], atol=2e-5)
    x = np.asarray(r.eigenvectors, np.float64)[:60]
    res = np.linalg.norm(lap @ x - x * np.asarray(r.eigenvalues), axis=0)
    assert np.all(res < 5e-4) and np.all(np.asarray(r.residual_norms) <= 1e-4)
    np.testing.assert_allclose(x.T @ x, np.eye(3), atol=1e-4)


def test_laplacian_matvec_matches_dense():
    x = np.random.default_rng(0).normal(size=(G.vertex_capacity, 2)).astype(np.float32)
    y = np.asarray(laplacian_matvec(G, x))
    np.testing.assert_allclose(y[:60], _lsym(G) @ x[:60], atol=1e-5)
    np.testing.assert_allclose(y[60:], x[60:])


def test_sbm_ari_one():
    r = spectral_clustering(jax.random.key(0), G, 3)
    assert bool(r.converged) and adjusted_rand_score(TRUTH, np.asarray(r.labels)[:60]) == 1.0
    assert np.all(np.asarray(r.labels)[60:] == -1)


@pytest.mark.slow
def test_matches_scipy_eigsh_medium():
    import scipy.sparse as sp
    import scipy.sparse.linalg as sla

    g, truth = sbm_graph(jax.random.key(1), [700] * 5, 0.05, 0.002)
    n, m = int(g.num_vertices), int(g.num_edges)
    s, d = np.asarray(g.src)[:m], np.asarray(g.dst)[:m]
    a = sp.coo_matrix((np.ones(2 * m), (np.r_[s, d], np.r_[d, s])), shape=(n, n)).tocsr()
    dm = sp.diags(1.0 / np.sqrt(np.asarray(a.sum(1)).ravel()))
    lap = sp.eye(n) - dm @ a @ dm
    ref = np.sort(sla.eigsh(lap, 6, which="SM")[0])
    r = smallest_eigenpairs(jax.random.key(0), g, 6)
    assert bool(r.converged)
    np.testing.assert_allclose(np.asarray(r.eigenvalues), ref, atol=1e-4)
    x = np.asarray(r.eigenvectors, np.float64)[:n]
    res = np.linalg.norm(lap @ x - x * np.asarray(r.eigenvalues, np.float64), axis=0)
    assert np.all(res < 1e-3)
    sc = spectral_clustering(jax.random.key(0), g, 5)
    assert adjusted_rand_score(truth, np.asarray(sc.labels)[:n]) == 1.0


@pytest.mark.slow
def test_float64(x64):
    g, _ = sbm_graph(jax.random.key(0), [20, 20, 20], 0.5, 0.02)
    r = smallest_eigenpairs(jax.random.key(0), g, 3)
    vals = np.linalg.eigh(_lsym(g))[0]
    assert r.eigenvalues.dtype == np.float64 and bool(r.converged)
    np.testing.assert_allclose(np.asarray(r.eigenvalues), vals[:3], atol=1e-8)


def test_refusals():
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        smallest_eigenpairs(0, G, 2)
    with pytest.raises(ValueError, match="k: expected an int in"):
        smallest_eigenpairs(jax.random.key(0), G, 0)
    with pytest.raises(ValueError, match="tol: expected a finite number > 0"):
        smallest_eigenpairs(jax.random.key(0), G, 2, tol=0.0)
    with pytest.raises(ValueError, match="edge_weight: expected one weight per edge slot"):
        smallest_eigenpairs(jax.random.key(0), G, 2, edge_weight=np.ones(3, np.float32))
    with pytest.raises(ValueError, match="x: expected an array"):
        laplacian_matvec(G, np.ones((3, 1)))


@pytest.mark.slow
def test_eigenpair_inside_the_bulk():
    # k = clusters + 1: the k-th eigenvalue sits in the bulk, far below the cluster ones in M = I - L; a
    # filter strong enough for the bulk's small gaps must not wash the k-th direction out of the block
    g, _ = sbm_graph(jax.random.key(1), [200] * 5, 0.1, 0.003)   # an uncapped degree lost the 6th pair here
    r = smallest_eigenpairs(jax.random.key(0), g, 6)
    assert bool(r.converged)
    np.testing.assert_allclose(np.asarray(r.eigenvalues), np.linalg.eigh(_lsym(g))[0][:6], atol=1e-4)


def test_ring_closed_form():
    # the n-cycle: L_sym eigenvalues 1 - cos(2 pi j / n), each j > 0 twice, with tiny gaps at the bottom; n even:
    # bipartite, so M's spectrum reaches -1 and the bottom-bounding Lanczos column must report it
    n = 120
    g = from_edges(np.arange(n), (np.arange(n) + 1) % n)
    r = smallest_eigenpairs(jax.random.key(0), g, 5, max_iterations=400)
    ref = np.sort(1 - np.cos(2 * np.pi * np.r_[0, 1, 1, 2, 2] / n))
    assert bool(r.converged)
    np.testing.assert_allclose(np.asarray(r.eigenvalues), ref, atol=1e-5)
    x = np.asarray(r.eigenvectors, np.float64)[:n]
    lx = x - 0.5 * (np.roll(x, 1, axis=0) + np.roll(x, -1, axis=0))
    np.testing.assert_allclose(np.linalg.norm(lx - x * np.asarray(r.eigenvalues), axis=0), r.residual_norms,
                               atol=2e-5)
    np.testing.assert_allclose(x.T @ x, np.eye(5), atol=1e-4)
