import numpy as np
import pytest

from jaxcore.causal.enumerate import enumerate_dags
from jaxcore.causal.graphs import parents_to_adjacency
from jaxcore.causal.samples import dag_distribution, make_samples, mec_distribution


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
    from jaxcore.causal.samples import DAGSamples

    dags = enumerate_dags(3)
    bad = DAGSamples(cyc, np.full(2, 0.5))  # bypasses make_samples
    with pytest.raises(ValueError, match=r"adjacency\[1\] is not a DAG"):
        dag_distribution(bad, dags)
    q = np.asarray(dag_distribution(DAGSamples(cyc, np.array([1.0, 0.0])), dags))  # zero-weight cyclic draw ignored
    np.testing.assert_allclose(q.sum(), 1.0)
    with pytest.raises(ValueError, match="d=4"):
        dag_distribution(make_samples(np.zeros((1, 3, 3))), enumerate_dags(4))
