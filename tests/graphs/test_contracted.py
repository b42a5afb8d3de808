"""Contracted graph: the matrix equals Y^T A_c Y through updates, pull-outs, new vertices and re-contraction."""

import jax
import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from jaxcore.graphs import add_edges, contract, from_edges, query_contracted, sbm_graph, sparsify, update_contracted

G, TRUTH = sbm_graph(jax.random.key(0), [20, 20, 20], 0.5, 0.02)


def _oracle(cg, g):
    """Y^T A_c Y in float64 from the assignment and the stored weights."""
    m = int(g.num_edges)
    s, d = np.asarray(g.src)[:m], np.asarray(g.dst)[:m]
    w = np.asarray(cg.edge_weight, np.float64)[:m]
    a = np.asarray(cg.assign)
    size = cg.supernode_capacity
    out = np.zeros((size, size))
    np.add.at(out, (a[s], a[d]), w)
    np.add.at(out, (a[d], a[s]), w)
    return out


def test_matrix_is_ytay_through_updates():
    h = sparsify(jax.random.key(0), G, sampling_constant=1.0)
    cg = contract(G, TRUTH, 3, edge_weight=h.weight)
    np.testing.assert_allclose(np.asarray(cg.matrix), _oracle(cg, G), atol=1e-4)
    g = G
    rng = np.random.default_rng(0)
    for step in range(3):
        # vertex `step` gains many edges (pulled out), new vertices join, random edges land anywhere
        hub = np.full(30, step)
        others = rng.choice(np.setdiff1d(np.arange(60), [step]), 30, replace=False)
        new = 60 + 5 * step + np.arange(5)
        s = np.concatenate([hub, new, rng.integers(0, 30, 10)])
        d = np.concatenate([others, rng.integers(0, 60, 5), rng.integers(30, 60, 10)])
        g = add_edges(g, s, d)
        cg = update_contracted(cg, g, s.size)
        assert bool(cg.singleton[cg.assign[step]])
        assert all(bool(cg.singleton[cg.assign[v]]) for v in new)
        np.testing.assert_allclose(np.asarray(cg.matrix), _oracle(cg, g), atol=1e-4)
    assert int(cg.num_supernodes) == 3 + 3 + 15
    r = query_contracted(jax.random.key(1), cg, g, 3)
    np.testing.assert_allclose(np.asarray(r.contracted.matrix), _oracle(r.contracted, g), atol=1e-3)
    assert int(r.contracted.num_supernodes) == 3


def test_query_recovers_clusters():
    cg = contract(G, TRUTH, 3)
    r = query_contracted(jax.random.key(0), cg, G, 3)
    assert adjusted_rand_score(TRUTH, np.asarray(r.labels)[:60]) == 1.0
    assert float(r.eigenvalues[0]) == pytest.approx(0.0, abs=1e-5)


def test_refusals():
    with pytest.raises(ValueError, match="labels: expected cluster labels in"):
        contract(G, TRUTH + 1, 3)
    with pytest.raises(ValueError, match="degree_trigger: expected a number in"):
        contract(G, TRUTH, 3, degree_trigger=0.0)
    cg = contract(G, TRUTH, 3)
    with pytest.raises(ValueError, match="num_clusters: expected an int in"):
        query_contracted(jax.random.key(0), cg, G, 4)


def _lsym_eigenvalues(g):
    a = g.adjacency()
    dm = 1.0 / np.sqrt(a.sum(1))
    return np.linalg.eigvalsh(np.eye(len(a)) - dm[:, None] * a * dm[None, :])


@pytest.mark.parametrize("kind, k", [("sbm", 4), ("sbm", 8), ("band", 8)])
def test_large_query_matches_dense_eigh(kind, k):
    # 200 singleton super-nodes (capacity 512), so the query takes the filtered subspace iteration: it
    # converges on the SBM at k = 4 (a wide eigengap) and on a band graph (close eigenvalues, 3 iterations);
    # at k = 8 on the 4-cluster SBM the 5th-8th eigenvalues sit in the bulk, the iteration hits its cap and
    # the query falls back to dense eigh. The contracted Laplacian of singletons is the graph's own, so
    # numpy's eigenvalues are the oracle on every path.
    if kind == "sbm":
        g, truth = sbm_graph(jax.random.key(3), [50] * 4, 0.3, 0.01)
    else:
        src = np.concatenate([np.arange(200 - j) for j in range(1, 7)])   # a band: vertex i joined to i+1..i+6
        g, truth = from_edges(src, src + np.repeat(np.arange(1, 7), 200 - np.arange(1, 7))), None
    cg = contract(g, np.arange(200), 200)
    assert cg.supernode_capacity > 128
    r = query_contracted(jax.random.key(0), cg, g, k)
    np.testing.assert_allclose(np.asarray(r.eigenvalues, np.float64), _lsym_eigenvalues(g)[:k], atol=1e-4)
    if kind == "sbm" and k == 4:
        assert adjusted_rand_score(truth, np.asarray(r.labels)[:200]) == 1.0
