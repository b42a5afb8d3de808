"""The diagram sampler: realisations, literal values, every axiom group on random Euclidean diagrams, agreement
with SMT on ground facts, refutation, errors and sharding."""

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxcore.geometry import (GROUPS, Literal, axioms, book_one, construct, entails, evaluate_literals, refute,
                              sample_diagrams)

# a diagram with every sort and construction kind: two triangles (one a congruent copy), lines through pairs,
# circles, their intersections and points placed by betweenness and sides
MODEL = [construct(t) for t in (
    "a := point()", "b := point()", "c := point()", "L := line(a, b)", "M := line(a, c)", "C := circle(a, b)",
    "D := circle(b, a)", "e, f := meet_cc(C, D)", "g := point_between(a, c)", "h := point_same_side(c, L)")]


def _three_valued(f, val):
    if isinstance(f, Literal):
        return val[f]
    op, *args = f
    xs = [_three_valued(g, val) for g in args]
    if op == "not":
        return xs[0][1], xs[0][0]
    if op == "and":
        return np.all([t for t, _ in xs], 0), np.any([f_ for _, f_ in xs], 0)
    if op == "or":
        return np.any([t for t, _ in xs], 0), np.all([f_ for _, f_ in xs], 0)
    if op == "implies":
        return _three_valued(("or", ("not", args[0]), args[1]), val)
    return _three_valued(("and", ("implies", args[0], args[1]), ("implies", args[1], args[0])), val)


N = 256  # one sample count across the family's tests: one compiled sampler program


@pytest.fixture(scope="module")
def axiom_values():
    """Random ground instances of every axiom over MODEL's objects and the three-valued truth of their atoms."""
    from jaxcore.geometry.axioms import formula_literals, rename_formula

    d = sample_diagrams(jax.random.key(1), MODEL, N)
    pools = {s: [n for n, s_, _ in d.names if s_ == s] for s in ("point", "line", "circle")}
    rng = np.random.default_rng(0)
    instances = {}
    for ax in axioms():
        combos = [[pools[s][rng.integers(len(pools[s]))] for s in ax.sorts()] for _ in range(40)]
        instances[ax.name] = (ax.group, [rename_formula(ax.formula, dict(zip(ax.vars, c))) for c in combos])
    atoms = sorted({lit if lit.positive else -lit for _, fs in instances.values() for f in fs
                    for lit in formula_literals(f)}, key=str)
    v = evaluate_literals(d, atoms)
    t, fl = np.asarray(v.true), np.asarray(v.false)
    val = {}
    for k, a in enumerate(atoms):
        val[a], val[-a] = (t[:, k], fl[:, k]), (fl[:, k], t[:, k])
    return instances, val, np.asarray(d.valid)


@pytest.mark.parametrize("group", GROUPS)
def test_axiom_group_holds_in_euclidean_diagrams(group, axiom_values):
    instances, val, valid = axiom_values
    assert valid.mean() > 0.5
    checked = 0
    for name, (g, fs) in instances.items():
        if g != group:
            continue
        for f in fs:
            true, false = _three_valued(f, val)
            assert not (false & valid).any(), (name, f)
            checked += int((true & valid).sum())
    assert checked > 0


def test_literal_values_closed_forms():
    prog = [construct(t) for t in ("a := point()", "b := point()", "c := point_between(a, b)", "L := line(a, b)",
                                   "C := circle(a, b)", "d := extend(a, b)")]
    d = sample_diagrams(jax.random.key(0), prog, N)
    lits = ["between(a, c, b)", "on(c, L)", "inside(c, C)", "on(b, C)", "!inside(d, C)", "between(a, b, d)",
            "seg(a, c) + seg(c, b) = seg(a, b)", "ang(a, c, b) = 2*right", "area(a, c, b) = 0", "ang(c, a, b) = 0",
            "seg(a, c) < seg(a, b)", "a = c"]
    v = evaluate_literals(d, lits)
    assert np.asarray(v.true)[:, :-1].all()
    assert np.asarray(v.false)[:, -1].all()
    p = np.asarray(d.points)
    idx = d.index()
    a, b, c = (p[:, idx[n][1]] for n in "abc")
    assert np.allclose(np.linalg.norm(a - c, axis=1) + np.linalg.norm(c - b, axis=1), np.linalg.norm(a - b, axis=1),
                       atol=1e-5)


def test_sampler_agrees_with_smt_on_ground_facts(key):
    # in Proposition I.1's diagram: facts the solver proves hold in every sample; one it cannot prove is refuted
    props = book_one()
    st = props["I.1"]
    ctx = list(st.hypotheses) + ["centre(a, C)", "on(b, C)", "centre(b, D)", "on(a, D)", "on(c, C)", "on(c, D)"]
    sorts = {"a": "point", "b": "point", "c": "point", "C": "circle", "D": "circle"}
    facts = ["seg(a, c) = seg(b, c)", "inside(a, C)", "!inside(c, D)", "seg(a, b) < seg(a, c) + seg(c, b)"]
    for fact in facts:
        assert entails(sorts, ctx, [fact], solvers=("z3",), time_limit_s=5.0).verdict == "proved"
    r = refute(key, st, st.hypotheses, facts + ["ang(a, c, b) = right"], N, library=props)
    assert r.supported[:4].all() and not r.refuted[:4].any()
    assert r.refuted[4] and r.num_counterexamples[4] > 0.9 * N and r.num_valid == N


def test_hypotheses_satisfiable_for_book_one(key):
    props = book_one()
    for name in ("I.1", "I.3", "I.12"):
        st = props[name]
        r = refute(key, st, [], list(st.hypotheses), N, library=props)
        hv = refute(key, st, list(st.hypotheses), list(st.conclusion), N, library=props)
        assert hv.num_valid > 0.9 * N and hv.supported.all() and not hv.refuted.any(), name
        assert r.num_valid == N


def test_sampler_errors(key):
    prog = [construct("a := point()")]
    with pytest.raises(TypeError, match="^key: expected a jax.random.key"):
        sample_diagrams(0, prog, 4)
    with pytest.raises(ValueError, match="^num_samples: expected an int >= 1"):
        sample_diagrams(key, prog, 0)
    with pytest.raises(ValueError, match="^program: expected input 'a' of L := line"):
        sample_diagrams(key, [construct("L := line(a, b)")], 4)
    d = sample_diagrams(key, prog, N)
    with pytest.raises(ValueError, match="^literals: expected objects of the diagrams"):
        evaluate_literals(d, ["a = b"])
    with pytest.raises(ValueError, match="^tol: expected"):
        evaluate_literals(d, ["a = a"], tol=-1.0)


def test_sharded_configurations(key):
    mesh = Mesh(np.array(jax.devices()), ("samples",))
    sharding = NamedSharding(mesh, PartitionSpec("samples"))
    n = N
    d = sample_diagrams(key, MODEL, n, sharding=sharding)
    ref = sample_diagrams(key, MODEL, n)
    np.testing.assert_allclose(np.asarray(d.points), np.asarray(ref.points), rtol=1e-6, atol=1e-6)
