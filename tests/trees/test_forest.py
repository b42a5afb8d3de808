"""Forest kernels against scikit-learn: leaves (after mapping node ids to slots), probabilities, boxes."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

from jaxcore.trees import Forest, apply, forest_from_arrays, leaf_boxes, predict_proba, sklearn_leaf_slots


def _data(n=200, d=4, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    # values on a coarse grid make many rows sit exactly at midpoints' neighbours
    x[:, 1] = np.round(x[:, 1], 1)
    y = (x[:, 0] + x[:, 1] ** 2 + 0.5 * rng.normal(size=n) > 0.5).astype(int) + (x[:, 2] > 1)
    return x, y


@pytest.mark.parametrize("kind", ["tree", "forest"])
def test_apply_and_proba_equal_sklearn(kind):
    x, y = _data()
    if kind == "tree":
        m = DecisionTreeClassifier(max_depth=5, random_state=0).fit(x, y)
        ests = [m]
    else:
        m = RandomForestClassifier(6, max_depth=4, random_state=1).fit(x, y)
        ests = m.estimators_
    f = Forest.from_sklearn(m)
    assert f.num_trees == len(ests) and f.num_classes == 3 and f.num_features == 4
    xt, _ = _data(300, seed=5)
    slots = sklearn_leaf_slots(m)
    ref = np.stack([slots[t][e.apply(xt)] for t, e in enumerate(ests)], 1)
    got = np.asarray(apply(f, xt))
    assert (ref >= 0).all()
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_allclose(np.asarray(predict_proba(f, xt)), m.predict_proba(xt), atol=2e-6)


def test_float32_thresholds_decide_like_sklearn():
    # rows just below/above a float64 midpoint that float32 cannot represent
    x = np.array([[0.1], [0.2], [0.3]], np.float32)
    y = np.array([0, 1, 1])
    m = DecisionTreeClassifier(random_state=0).fit(x, y)
    f = Forest.from_sklearn(m)
    t = m.tree_.threshold[0]
    probe = np.array([[np.float32(t)], [np.nextafter(np.float32(t), np.float32(-1))],
                      [np.nextafter(np.float32(t), np.float32(1))]], np.float32)
    ref = sklearn_leaf_slots(m)[0][m.apply(probe)]
    np.testing.assert_array_equal(np.asarray(apply(f, probe))[:, 0], ref)


def test_leaf_counts_without_bagging_are_class_counts():
    x, y = _data()
    m = RandomForestClassifier(3, max_depth=3, bootstrap=False, random_state=0).fit(x, y)
    f = Forest.from_sklearn(m)
    counts = np.asarray(f.leaf_count)
    np.testing.assert_allclose(counts.sum(1), np.tile(np.bincount(y), (3, 1)))
    leaves = np.asarray(apply(f, x))
    for t in range(3):
        for leaf in np.unique(leaves[:, t]):
            np.testing.assert_allclose(counts[t, leaf], np.bincount(y[leaves[:, t] == leaf], minlength=3))


def test_boxes_contain_their_rows_and_only_them():
    x, y = _data()
    m = RandomForestClassifier(4, max_depth=4, random_state=0).fit(x, y)
    f = Forest.from_sklearn(m)
    b = np.asarray(leaf_boxes(f))  # [T, L, D, 2]
    assert b.shape == (4, f.num_leaves, 4, 2)
    inside = ((x[:, None, None, :] > b[None, ..., 0]) & (x[:, None, None, :] <= b[None, ..., 1])).all(-1)  # [N,T,L]
    leaves = np.asarray(apply(f, x))
    np.testing.assert_array_equal(inside, np.eye(f.num_leaves, dtype=bool)[leaves])
    # unreachable slots have empty boxes
    mask = np.asarray(f.leaf_mask)
    assert ((b[..., 0] >= b[..., 1]).any(-1) == ~mask).all()


def test_errors():
    x, y = _data()
    f = Forest.from_sklearn(DecisionTreeClassifier(max_depth=2, random_state=0).fit(x, y))
    with pytest.raises(ValueError, match="x: expected an array"):
        apply(f, x[:, :3])
    with pytest.raises(TypeError, match="forest: expected"):
        predict_proba("f", x)
    bad = x.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="x: expected no NaN"):
        predict_proba(f, bad)
    with pytest.raises(TypeError, match="model: expected"):
        Forest.from_sklearn(DecisionTreeClassifier())
    with pytest.raises(ValueError, match="feature: expected"):
        forest_from_arrays([[3]], [[0.5]], [[[1.0], [1.0]]], [[True, True]], num_features=2)


@pytest.mark.parametrize("depth", [3, 6])
def test_blocked_rows_equal_sklearn(depth):
    # deep trees: more rows than one block of 2,048 (the padded blocked path); shallow: the one-block path
    x, y = _data(400)
    m = RandomForestClassifier(4, max_depth=depth, random_state=2).fit(x, y)
    f = Forest.from_sklearn(m)
    xt, _ = _data(4100, seed=7)
    slots = sklearn_leaf_slots(m)
    ref = np.stack([slots[t][e.apply(xt)] for t, e in enumerate(m.estimators_)], 1)
    np.testing.assert_array_equal(np.asarray(apply(f, xt)), ref)
    np.testing.assert_allclose(np.asarray(predict_proba(f, xt)), m.predict_proba(xt), atol=2e-6)
