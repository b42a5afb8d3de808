import numpy as np
import pytest

from jaxcore.causal import dag_keys, enumerate_dags, is_dag, parents_to_adjacency


@pytest.mark.parametrize("d,count,classes", [(1, 1, 1), (2, 3, 2), (3, 25, 11), (4, 543, 185), (5, 29281, 8782)])
def test_counts_unique_acyclic(d, count, classes):
    t = enumerate_dags(d)
    assert t.parents.shape == (count, d) and t.parents.dtype == np.uint8
    assert t.num_mecs == classes
    assert np.all(np.diff(t.keys) > 0)  # sorted and unique
    assert bool(np.all(np.asarray(is_dag(parents_to_adjacency(t.parents)))))
    np.testing.assert_array_equal(np.asarray(dag_keys(t.parents)), t.keys)


@pytest.mark.slow
def test_d6_counts():
    t = enumerate_dags(6)
    assert t.parents.shape[0] == 3781503 and t.num_mecs == 1067825


def test_cache_roundtrip(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXCORE_CACHE", str(tmp_path))
    a = enumerate_dags(3)
    assert (tmp_path / "causal").exists()
    b = enumerate_dags(3)
    np.testing.assert_array_equal(a.parents, b.parents)
    np.testing.assert_array_equal(a.mec, b.mec)


def test_too_large_names_alternatives():
    with pytest.raises(ValueError, match="exact_edge_marginals"):
        enumerate_dags(7)
    with pytest.raises(ValueError):
        enumerate_dags(0)
