import numpy as np
import pytest

from jaxcore.causal import (
    DAGSamples,
    dag_distribution,
    edge_marginals_from_samples,
    enumerate_dags,
    make_samples,
    mec_distribution,
    pad_samples,
    parents_to_adjacency,
)


def test_dag_distribution_counts():
    dags = enumerate_dags(3)
    adj = np.asarray(parents_to_adjacency(dags.parents[[3, 3, 7, 24]]))
    q = np.asarray(dag_distribution(make_samples(adj), dags))
    np.testing.assert_allclose(q[[3, 7, 24]], [0.5, 0.25, 0.25])
    np.testing.assert_allclose(q.sum(), 1.0)


def test_mec_distribution_and_make_samples():
    dags = enumerate_dags(3)
    q = np.zeros(25)
    q[[0, 5]] = 0.5
    m = np.asarray(mec_distribution(q, dags))
    np.testing.assert_allclose(m.sum(), 1.0)
    np.testing.assert_allclose(m[dags.mec[0]], 0.5 if dags.mec[0] != dags.mec[5] else 1.0)
    s = make_samples(np.zeros((2, 3, 3)), np.array([1.0, 3.0]))
    np.testing.assert_allclose(np.asarray(s.weights), [0.25, 0.75])
    with pytest.raises(ValueError, match="non-negative"):
        make_samples(np.zeros((2, 3, 3)), np.array([1.0, -1.0]))


def test_cyclic_and_degenerate_samples_rejected():
    cyc = np.zeros((2, 3, 3), np.int32)
    cyc[1, 0, 1] = cyc[1, 1, 0] = 1
    with pytest.raises(ValueError, match="sample 1 has a directed cycle"):
        make_samples(cyc)
    with pytest.raises(ValueError, match="sum to > 0"):
        make_samples(np.zeros((2, 3, 3)), np.zeros(2))
    dags = enumerate_dags(3)
    with pytest.raises(ValueError, match=r"adjacency\[1\]: expected a DAG"):
        bad = DAGSamples(cyc, np.full(2, 0.5))  # the constructor checks concrete fields now
        dag_distribution(bad, dags)
    q = np.asarray(dag_distribution(DAGSamples(cyc, np.array([1.0, 0.0])), dags))  # zero-weight cyclic draw ignored
    np.testing.assert_allclose(q.sum(), 1.0)
    with pytest.raises(ValueError, match="d=4"):
        dag_distribution(make_samples(np.zeros((1, 3, 3))), enumerate_dags(4))


def test_pad_samples_keeps_every_weighted_sum():
    dags = enumerate_dags(3)
    rng = np.random.default_rng(0)
    adj = np.asarray(parents_to_adjacency(dags.parents[rng.integers(0, 25, 5)]))
    s = make_samples(adj, rng.random(5) + 0.1)
    p = pad_samples(s, 12)
    assert p.adjacency.shape == (12, 3, 3) and p.weights.shape == (12,)
    np.testing.assert_array_equal(np.asarray(p.adjacency[:5]), np.asarray(s.adjacency))
    np.testing.assert_array_equal(np.asarray(p.adjacency[5:]), 0)
    np.testing.assert_array_equal(np.asarray(p.weights[5:]), 0)
    assert p.weights.dtype == s.weights.dtype
    np.testing.assert_allclose(np.asarray(dag_distribution(p, dags)), np.asarray(dag_distribution(s, dags)))
    np.testing.assert_allclose(np.asarray(edge_marginals_from_samples(p)), np.asarray(edge_marginals_from_samples(s)))
    assert pad_samples(s, 5).adjacency.shape == (5, 3, 3)
    with pytest.raises(ValueError, match="num_samples"):
        pad_samples(s, 4)
    with pytest.raises(TypeError, match="DAGSamples"):
        pad_samples(adj, 8)


def test_edge_marginals_from_samples_bruteforce():
    rng = np.random.default_rng(1)
    dags = enumerate_dags(4)
    idx = rng.integers(0, dags.parents.shape[0], 30)
    w = rng.random(30)
    s = make_samples(np.asarray(parents_to_adjacency(dags.parents[idx])), w)
    want = np.zeros((4, 4))
    for k in range(30):
        for j in range(4):
            for i in range(4):
                if (int(dags.parents[idx[k], j]) >> i) & 1:
                    want[i, j] += w[k] / w.sum()
    np.testing.assert_allclose(np.asarray(edge_marginals_from_samples(s)), want, rtol=1e-5, atol=1e-7)
