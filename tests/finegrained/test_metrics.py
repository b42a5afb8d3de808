"""Metrics against scikit-learn and brute force."""

import itertools

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from jaxcore import finegrained as fg


@pytest.mark.parametrize("seed", range(4))
def test_against_sklearn_and_brute_force(seed):
    rng = np.random.default_rng(seed)
    t = rng.integers(0, 4, 40)
    p = np.where(rng.random(40) < 0.6, (t + 1) % 4, rng.integers(0, 4, 40))
    np.testing.assert_allclose(fg.normalized_mutual_info(t, p), normalized_mutual_info_score(t, p), atol=1e-12)
    np.testing.assert_allclose(fg.adjusted_rand_index(t, p), adjusted_rand_score(t, p), atol=1e-12)
    best = max(np.mean(np.array(perm)[p] == t) for perm in itertools.permutations(range(4)))
    np.testing.assert_allclose(fg.cluster_accuracy(t, p), best)


def test_map_accuracy_and_matching():
    t = np.array([0, 0, 1, 1, 2, 2])
    p = np.array([2, 2, 0, 0, 1, 1])
    assert fg.cluster_matching(t, p) == {0: 2, 1: 0, 2: 1}
    # true classes 0, 1, 2 (coarse 0, 0, 1) are matched to clusters 2, 0, 1
    assert fg.map_accuracy(t, p, [0, 0, 1], [0, 1, 0]) == 1.0
    assert fg.map_accuracy(t, p, [0, 0, 1], [0, 0, 0]) == pytest.approx(2 / 3)


def test_bad_labels():
    with pytest.raises(ValueError, match="y_true: expected"):
        fg.cluster_accuracy(np.array([0.5, 1.0]), np.array([0, 1]))
    with pytest.raises(ValueError, match="y_pred: expected"):
        fg.cluster_accuracy(np.array([0, 1]), np.array([0, 1, 1]))
    with pytest.raises(ValueError, match="fine_to_coarse: expected"):
        fg.map_accuracy([0, 1], [0, 3], [0, 1], [0, 1])
