"""Statement equivalence: a reordered statement is equivalent; dropped hypotheses and altered conclusions are not."""

import pytest

from jaxcore.geometry import book_one, check_equivalence, perturbations


def test_proposition_five_variants(key):
    props = book_one()
    got = {p.kind: check_equivalence(key, props["I.5"], p.statement, library=props, solvers=("z3",),
                                     num_samples=256, time_limit_s=5.0)
           for p in perturbations(props) if p.original == "I.5"}
    assert got["reordered"].verdict == "equivalent" and got["reordered"].decided_by == "smt"
    assert got["hypothesis dropped"].verdict == "not equivalent"
    assert got["conclusion altered"].verdict == "not equivalent" and got["conclusion altered"].decided_by == "sampler"


def test_dropped_hypothesis_needs_smt_when_no_diagram_shows_it(key):
    # I.1 without "a != b": every random diagram has a != b, so only the solver can tell (a model with a = b)
    props = book_one()
    p = [p for p in perturbations(props) if p.original == "I.1" and p.kind == "hypothesis dropped"][0]
    r = check_equivalence(key, props["I.1"], p.statement, library=props, solvers=("z3",), num_samples=256)
    assert r.verdict == "not equivalent" and r.decided_by == "smt"
    assert ("H2 |- H1", "not entailed") in [d[:2] for d in r.directions]
    r = check_equivalence(key, props["I.1"], p.statement, library=props, use_smt=False, num_samples=256)
    assert r.verdict == "unknown"


def test_equivalence_errors(key):
    props = book_one()
    with pytest.raises(ValueError, match="^statements: expected the same sort for 'L'"):
        check_equivalence(key, props["I.12"], props["I.14"].__class__(
            "x", props["I.10"].recipe, (), (), (("L", "circle"),)))


@pytest.mark.slow
def test_all_perturbations(key):
    props = book_one()
    right = 0
    # propositions I.1-I.6 (the reproduction runs all fifteen: 44 of 45 right, I.9's dropped hypothesis unknown)
    ps = [p for p in perturbations(props) if p.original in ("I.1", "I.2", "I.3", "I.4", "I.5", "I.6")]
    for p in ps:
        r = check_equivalence(key, props[p.original], p.statement, library=props, num_samples=256, time_limit_s=5.0)
        right += (r.verdict == "equivalent") == p.equivalent and r.verdict != "unknown"
    assert right == len(ps)
