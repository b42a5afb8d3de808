"""kmeans: equal to scikit-learn's Lloyd from a fixed start; vmapped restarts as good as scikit-learn's."""

import jax
import numpy as np
import pytest
from sklearn.cluster import KMeans

from jaxcore.graphs import kmeans

RNG = np.random.default_rng(0)
X = np.concatenate([RNG.normal(c, 0.7, (40, 3)) for c in ([0, 0, 0], [3, 0, 0], [0, 3, 1], [2, 2, 3])])


def test_equals_sklearn_from_fixed_start():
    init = X[[0, 1, 2, 3]]  # a poor start inside one blob: Lloyd must move a long way, as sklearn does
    ref = KMeans(4, init=init, n_init=1, algorithm="lloyd", tol=1e-4).fit(X)
    r = kmeans(None, X.astype(np.float32), 4, init=init.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(r.labels), ref.labels_)
    np.testing.assert_allclose(np.asarray(r.centers), ref.cluster_centers_, rtol=1e-4, atol=1e-4)
    assert float(r.inertia) == pytest.approx(ref.inertia_, rel=1e-4)


def test_restarts_match_sklearn_inertia():
    ref = KMeans(4, n_init=10, random_state=0).fit(X)
    r = kmeans(jax.random.key(0), X.astype(np.float32), 4, num_init=10)
    assert float(r.inertia) <= ref.inertia_ * (1 + 1e-4)


def test_weights_exclude_points():
    w = np.ones(len(X))
    w[:40] = 0.0                                     # drop the first blob
    r = kmeans(jax.random.key(1), X.astype(np.float32), 3, weights=w, num_init=4)
    keep = np.asarray(r.labels)[40:]
    assert len(set(keep[:40])) == 1 and len(set(keep.tolist())) == 3


def test_refusals():
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        kmeans(0, X, 2)
    with pytest.raises(ValueError, match="num_clusters: expected an int in"):
        kmeans(jax.random.key(0), X[:3], 4)
    with pytest.raises(ValueError, match="x: expected finite values"):
        kmeans(jax.random.key(0), np.array([[np.nan, 0.0], [1.0, 1.0]]), 1)
    with pytest.raises(ValueError, match="weights: expected finite values >= 0"):
        kmeans(jax.random.key(0), X, 2, weights=-np.ones(len(X)))
    with pytest.raises(ValueError, match="init: expected centres of shape"):
        kmeans(None, X, 2, init=X[:3])
