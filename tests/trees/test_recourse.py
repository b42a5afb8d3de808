"""Recourse costs by hand, cheapest actions vs brute force, RACT split gains vs a NumPy loop, tree growth."""

import itertools

import jax
import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from jaxcore.trees import (Forest, action_constraints, action_cost, cheapest_actions, crossing_mask,
                           candidate_thresholds, fit_recourse_forest, fit_recourse_tree, predict_proba, recourse_cost,
                           split_gains, target_boxes)


def test_costs_by_hand():
    xt = np.array([[0.0, 10.0], [1.0, 20.0], [2.0, 20.0], [3.0, 40.0]])
    x = np.array([[0.0, 20.0]])
    a = np.array([[2.0, -10.0]])
    q = lambda cnt: (cnt + 0.5) / 5  # noqa: E731  (#{train <= v} + 1/2) / (n + 1)
    mps = max(abs(q(3) - q(1)), abs(q(1) - q(3)))
    tlps = abs(np.log((1 - q(3)) / (1 - q(1)))) + abs(np.log((1 - q(1)) / (1 - q(3))))
    # MADs: feature 0 median 1.5, |dev| = 1.5, .5, .5, 1.5 -> 1.0; feature 1 median 20, |dev| 10, 0, 0, 20 -> 5
    l1 = 2.0 / 1.0 + 10.0 / 5.0
    for kind, want in (("mps", mps), ("tlps", tlps), ("l1_mad", l1)):
        got = float(action_cost(recourse_cost(xt, kind), x, a)[0])
        assert got == pytest.approx(want, rel=1e-5), kind
    # a zero-MAD feature falls back to 1.4826 * std
    c = recourse_cost(np.array([[0.0], [0.0], [0.0], [1.0]]), "l1_mad")
    assert float(c.scale[0]) == pytest.approx(1.4826 * np.std([0, 0, 0, 1.0]), rel=1e-6)


def _small_forest():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, size=(200, 4)).astype(np.float32)
    y = ((x[:, 0] + x[:, 1] - x[:, 2] + rng.normal(size=200)) > 4).astype(int)
    m = RandomForestClassifier(3, max_depth=2, random_state=0).fit(x, y)
    return x, y, m, Forest.from_sklearn(m)


def _brute_force(xi, m, f, cost, fixed, inc):
    """Every combination of per-feature candidate values (x_d, the integers either side of each threshold)."""
    thr, feat = np.asarray(f.threshold), np.asarray(f.feature)
    opts = []
    for d in range(4):
        t = thr[np.isfinite(thr) & (feat == d)].astype(np.float32)
        opts.append(np.unique(np.concatenate([[xi[d]], np.floor(t), np.floor(t) + 1])))  # integer data
    pts = np.array(list(itertools.product(*opts)), np.float32)
    a = pts - xi
    ok = np.ones(len(pts), bool)
    for d in fixed:
        ok &= a[:, d] == 0
    for d in inc:
        ok &= a[:, d] >= 0
    ok &= np.argmax(m.predict_proba(pts), 1) == 1
    c = np.asarray(action_cost(cost, np.repeat(xi[None], len(pts), 0), a))
    return c[ok].min() if ok.any() else np.inf


@pytest.mark.parametrize("kind", ["mps", "l1_mad"])
def test_cheapest_action_equals_brute_force(kind):
    x, y, m, f = _small_forest()
    cost = recourse_cost(x, kind)
    cons = action_constraints(4, fixed=[3], increase_only=[0])
    xq = x[:16]
    r = cheapest_actions(xq, f, cons, cost, boxes=target_boxes(f, 1, mode="cells"))
    want = np.array([_brute_force(xi, m, f, cost, [3], [0]) for xi in xq])
    np.testing.assert_allclose(np.asarray(r.cost), want, rtol=1e-5)
    # the actions it returns are valid for scikit-learn's forest and respect the constraints
    act = np.asarray(r.action)
    v = np.asarray(r.valid)
    assert (m.predict(xq[v] + act[v]) == 1).all()
    assert (act[:, 3] == 0).all() and (act[:, 0] >= 0).all()
    # the leaf-box search (RACT's) is never cheaper than the exact one
    lv = cheapest_actions(xq, f, cons, cost)
    assert (np.asarray(lv.cost) >= np.asarray(r.cost) - 1e-6).all()


def test_budget_and_max_changes():
    x, y, m, f = _small_forest()
    cost = recourse_cost(x, "mps")
    b = target_boxes(f, 1, mode="cells")
    free = cheapest_actions(x[:16], f, action_constraints(4), cost, boxes=b)
    tight = cheapest_actions(x[:16], f, action_constraints(4), cost, boxes=b, budget=0.2)
    assert (np.asarray(tight.valid) == (np.asarray(free.cost) <= 0.2)).all()
    one = cheapest_actions(x[:16], f, action_constraints(4, max_changes=1), cost, boxes=b)
    assert ((np.asarray(one.action) != 0).sum(1) <= 1).all()
    assert (np.asarray(one.cost) >= np.asarray(free.cost) - 1e-6).all()


def _split_loop(x, y, in_node, w, move, th, alpha):
    """RACT's node objective by a plain loop over features, thresholds and label pairs."""
    d_n, k_n = th.shape
    out = np.full((d_n, k_n), np.inf)
    for d in range(d_n):
        for k in range(k_n):
            t = th[d, k]
            if not np.isfinite(t):
                continue
            left = x[:, d] <= t
            if not (in_node & left).any() or not (in_node & ~left).any():
                continue
            m_b = w.sum()
            m_l = sum(w[i] for i in range(len(x)) if left[i] or move[i, d, k])
            m_r = sum(w[i] for i in range(len(x)) if (not left[i]) or move[i, d, k])
            best = np.inf
            for yl in (0, 1):
                for yr in (0, 1):
                    mis = sum(1 for i in range(len(x)) if in_node[i] and y[i] != (yl if left[i] else yr))
                    rec = 0.0 if yl == yr == 1 else (m_b - m_l if yl == 1 else (m_b - m_r if yr == 1 else m_b))
                    best = min(best, mis + alpha * rec)
            out[d, k] = best
    return out


def test_split_gains_equal_numpy_loop():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 6, size=(40, 3)).astype(np.float32)
    y = (x[:, 0] + rng.normal(size=40) > 2.5).astype(int)
    in_node = rng.random(40) < 0.7
    w = (rng.random(40) < 0.4).astype(np.float32)
    th = np.asarray(candidate_thresholds(x, 4))
    cost = recourse_cost(x, "mps")
    move = np.asarray(crossing_mask(x, th, x, action_constraints(3, fixed=[2]), cost, 0.25))
    assert not move[:, 2].any() and move.any()
    for alpha in (0.0, 0.7):
        r = split_gains(x, y, in_node, w, move, th, alpha=alpha)
        want = _split_loop(x, y, in_node, w, move, th, alpha)
        np.testing.assert_allclose(np.asarray(r.objective), want, rtol=1e-6)
        parent = min((y[in_node] == 0).sum(), (y[in_node] == 1).sum() + alpha * w.sum())
        assert float(r.parent_objective) == pytest.approx(parent)
        fin = np.isfinite(want)
        np.testing.assert_allclose(np.asarray(r.gain)[fin], parent - want[fin], rtol=1e-6)


def test_crossing_mask_by_hand():
    xt = np.array([[0.0], [1.0], [2.0], [3.0]], np.float32)
    th = np.array([[0.5, 2.5]], np.float32)
    # MPS with Q = (cnt + 1/2)/5: from 0 to 1 costs 0.2, from 0 to 3 costs 0.6, from 3 down to 2.5 costs 0.2
    mv = np.asarray(crossing_mask(xt, th, xt, action_constraints(1), recourse_cost(xt, "mps"), 0.25))
    np.testing.assert_array_equal(mv[:, 0, 0], [True, True, False, False])  # crossing 0.5: 0->1 ok, 1->0.5 ok
    np.testing.assert_array_equal(mv[:, 0, 1], [False, False, True, True])
    inc = np.asarray(crossing_mask(xt, th, xt, action_constraints(1, increase_only=[0]),
                                   recourse_cost(xt, "mps"), 0.25))
    np.testing.assert_array_equal(inc[:, 0, 0], [True, False, False, False])


def _recourse_data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 10, size=(300, 3)).astype(np.float32)
    # feature 0 is fixed and predictive; feature 1 actionable and weakly predictive
    y = ((x[:, 0] >= 5) | ((x[:, 1] >= 8) & (rng.random(300) < 0.6))).astype(int)
    return x, y


def test_recourse_tree_alpha_raises_recourse():
    x, y = _recourse_data()
    cost = recourse_cost(x, "mps")
    cons = action_constraints(3, fixed=[0])
    ratios = []
    for alpha in (0.0, 1.0):
        fit = fit_recourse_tree(x, y, cost, alpha=alpha, budget=0.3, constraints=cons, max_depth=2)
        f = fit.forest
        p = np.asarray(predict_proba(f, x))[:, 1]
        neg = x[p < 0.5]
        r = cheapest_actions(neg, f, cons, cost, budget=0.3)
        ratios.append(float(np.asarray(r.valid).mean()) if len(neg) else 1.0)
    assert ratios[1] > ratios[0] + 0.2  # measured 0.38 -> 0.82
    # with alpha = 0 the tree is a greedy 0-1-loss tree: the root split is on the predictive fixed feature
    f0 = fit_recourse_tree(x, y, cost, alpha=0.0, budget=0.3, constraints=cons, max_depth=2).forest
    assert int(f0.feature[0, 0]) == 0


def test_recourse_forest_and_errors():
    x, y = _recourse_data()
    cost = recourse_cost(x, "mps")
    fit = fit_recourse_forest(jax.random.key(0), x, y, cost, num_trees=4, max_depth=2,
                              constraints=action_constraints(3, fixed=[0]))
    assert fit.forest.num_trees == 4 and fit.num_splits.shape == (4,)
    acc = (np.argmax(np.asarray(predict_proba(fit.forest, x)), 1) == y).mean()
    assert acc > 0.7
    with pytest.raises(TypeError, match="key: expected"):
        fit_recourse_forest(0, x, y, cost)
    with pytest.raises(ValueError, match="y: expected"):
        fit_recourse_tree(x, y + 1, cost)
    with pytest.raises(ValueError, match="alpha: expected"):
        fit_recourse_tree(x, y, cost, alpha=-1.0)
    with pytest.raises(ValueError, match="kind: expected"):
        recourse_cost(x, "l2")
