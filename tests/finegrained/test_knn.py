"""The blocked cosine kNN graph against scikit-learn's NearestNeighbors."""

import numpy as np
import pytest
from sklearn.neighbors import NearestNeighbors

from jaxcore import finegrained as fg


def test_matches_sklearn_cosine():
    x = np.random.default_rng(0).normal(size=(50, 6)).astype(np.float32)
    g = fg.knn_graph(x, 4, block_size=16)  # 4 blocks, the last padded
    dist, idx = NearestNeighbors(n_neighbors=5, metric="cosine", algorithm="brute").fit(x).kneighbors(x)
    assert np.array_equal(np.asarray(g.indices), idx[:, 1:])
    np.testing.assert_allclose(np.asarray(g.similarities), 1 - dist[:, 1:], atol=1e-5)


def test_groups_restrict_neighbours():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(50, 6)).astype(np.float32)
    groups = rng.integers(0, 3, 50)
    g = fg.knn_graph(x, 4, groups=groups, block_size=16)
    idx = np.asarray(g.indices)
    assert np.all(groups[idx] == groups[:, None]) and np.all(idx != np.arange(50)[:, None])
    for i in (0, 17, 49):  # the same as a search inside the group
        members = np.flatnonzero(groups == groups[i])
        xn = x / np.linalg.norm(x, axis=1, keepdims=True)
        s = xn[members] @ xn[i]
        s[members == i] = -np.inf
        assert set(members[np.argsort(-s)[:4]]) == set(idx[i])


def test_bad_input():
    x = np.ones((5, 2))
    with pytest.raises(ValueError, match="num_neighbors: expected"):
        fg.knn_graph(x, 5)
    with pytest.raises(ValueError, match="features: expected finite"):
        fg.knn_graph(np.full((5, 2), np.nan), 2)
    with pytest.raises(ValueError, match="groups: expected"):
        fg.knn_graph(x, 1, groups=np.zeros(4, int))
    with pytest.raises(TypeError, match="num_neighbors: expected an int"):
        fg.knn_graph(x, 1.5)
