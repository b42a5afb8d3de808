"""The assignment solver: min-cost flow == brute force == HiGHS MILP; constraints; errors."""

import builtins
import itertools

import numpy as np
import pytest

from jaxcore import finegrained as fg


def _brute(cost, beta):
    f, c = cost.shape
    best = np.inf
    for rows in itertools.product(range(c), repeat=f):
        if len(set(rows)) < c:
            continue
        m = np.zeros((f, c))
        m[np.arange(f), rows] = 1
        best = min(best, fg.assignment_objective(cost, m, beta))
    return best


def _feasible(m):
    m = np.asarray(m)
    return set(np.unique(m)) <= {0.0, 1.0} and np.all(m.sum(1) == 1) and np.all(m.sum(0) >= 1)


@pytest.mark.parametrize("f,c,beta,seed", [(3, 1, 0.1, 0), (4, 2, 0.0, 1), (5, 2, 0.05, 2), (5, 3, 0.2, 3),
                                           (6, 3, 0.01, 4), (6, 2, 1.0, 5), (7, 3, 0.05, 6)])
def test_flow_equals_brute_force(f, c, beta, seed):
    cost = np.random.default_rng(seed).dirichlet(np.ones(f * c)).reshape(f, c)
    r = fg.solve_assignment(cost, beta)
    assert _feasible(r.assignment)
    assert np.array_equal(np.asarray(r.fine_to_coarse), np.asarray(r.assignment).argmax(1))
    np.testing.assert_allclose(r.objective, _brute(cost, beta), atol=1e-8)


def test_nonempty_forced_and_beta_balances():
    cost = np.zeros((6, 3))
    cost[:, 0] = 1.0  # every fine class prefers coarse 0
    m = np.asarray(fg.solve_assignment(cost, 0.0).assignment)
    assert m.sum(0).tolist() == [4, 1, 1]
    m = np.asarray(fg.solve_assignment(cost * 0.01, 10.0).assignment)  # beta dominates: balanced
    assert m.sum(0).tolist() == [2, 2, 2]


def test_flow_equals_milp_20x5():
    rng = np.random.default_rng(7)
    cost = rng.dirichlet(np.ones(100)).reshape(20, 5)
    for beta in (0.0, 0.005, 0.05):
        a = fg.solve_assignment(cost, beta)
        b = fg.solve_assignment(cost, beta, method="milp")
        assert _feasible(a.assignment) and _feasible(b.assignment)
        np.testing.assert_allclose(a.objective, b.objective, atol=1e-7)


@pytest.mark.slow
def test_flow_equals_milp_100x20():
    rng = np.random.default_rng(8)
    cost = rng.dirichlet(np.ones(2000)).reshape(100, 20)
    for beta in (0.0, 0.005):
        a = fg.solve_assignment(cost, beta)
        b = fg.solve_assignment(cost, beta, method="milp")
        assert _feasible(a.assignment)
        np.testing.assert_allclose(a.objective, b.objective, atol=1e-7)


def test_cost_accumulation():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(4), size=10)
    y = rng.integers(0, 3, size=10)
    want = np.zeros((4, 3))
    for n in range(10):
        want[:, y[n]] += p[n] / 10
    np.testing.assert_allclose(np.asarray(fg.assignment_cost(p, y, 3)), want, rtol=1e-6)


def test_missing_ortools_names_the_extra(monkeypatch):
    real = builtins.__import__

    def fake(name, *a, **k):
        if name.startswith("ortools"):
            raise ImportError("no ortools")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(ImportError, match=r'pip install "jaxcore\[trees\]"'):
        fg.solve_assignment(np.ones((3, 2)), 0.0)


def test_bad_input():
    with pytest.raises(ValueError, match="cost: expected"):
        fg.solve_assignment(np.ones((2, 3)))  # F < C
    with pytest.raises(ValueError, match="cost: expected finite"):
        fg.solve_assignment(np.array([[np.nan, 1.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="beta: expected"):
        fg.solve_assignment(np.ones((3, 2)), -1.0)
    with pytest.raises(ValueError, match="method: expected"):
        fg.solve_assignment(np.ones((3, 2)), method="gurobi")
    with pytest.raises(ValueError, match="cost: expected"):
        fg.solve_assignment(np.ones(3))
    with pytest.raises(ValueError, match="coarse_labels: expected"):
        fg.assignment_cost(np.ones((3, 2)) / 2, np.zeros(4, int), 2)
