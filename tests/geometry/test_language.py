"""The language of E: literals, constructions, statements, Book I data and its perturbations."""

import pytest

from jaxcore.geometry import (RULES, Atom, Metric, book_one, construct, parse_literal, perturbations, statement)


@pytest.mark.parametrize("text", ["on(a, L)", "!same_side(a, b, L)", "between(a, b, c)", "a != b", "L = M",
                                  "seg(a, b) = seg(a, c)", "ang(a, b, c) + ang(c, b, d) = 2*right",
                                  "0 < area(a, b, c)", "seg(a, b) >= seg(c, d)", "!intersects(C, D)"])
def test_parse_round_trip(text):
    lit = parse_literal(text)
    assert parse_literal(str(lit)) == lit


def test_parse_structure_and_negation():
    lit = parse_literal("seg(a, b) > seg(c, d)")
    assert isinstance(lit.body, Metric) and lit.body.op == "<" and lit.positive
    assert [str(t) for t in lit.body.lhs] == ["seg(c, d)"]
    assert parse_literal("a != b") == -parse_literal("a = b")
    assert parse_literal("!on(a, L)").body == Atom("on", ("a", "L"))
    assert len(parse_literal("ang(a, b, c) = 2*right").body.rhs) == 2


@pytest.mark.parametrize("bad", ["foo(a, b)", "on(a)", "seg(a) = seg(b, c)", "between(a, b, c", "3 < x*right"])
def test_parse_errors(bad):
    with pytest.raises(ValueError, match="^text: expected"):
        parse_literal(bad)


def test_parse_type_error():
    with pytest.raises(TypeError, match="^text: expected a literal as a string, got int"):
        parse_literal(3)


def test_construct_and_rules():
    c = construct("c, d := meet_cc(C, D)")
    assert c.rule == "meet_cc" and c.outputs == ("c", "d") and c.inputs == ("C", "D")
    pre, post = RULES["line"].instantiate(("a", "b"), ("L",))
    assert [str(p) for p in pre] == ["a != b"] and [str(p) for p in post] == ["on(a, L)", "on(b, L)"]
    with pytest.raises(ValueError, match="^text: expected 2 outputs"):
        construct("c := meet_cc(C, D)")
    with pytest.raises(ValueError, match="^text: expected 'outs := rule"):
        construct("c := nothing(C)")


def test_statement_checks_objects():
    with pytest.raises(ValueError, match="objects: expected names declared"):
        statement("x", ["a := point()"], ["a != b"], [])


def test_book_one_and_perturbations():
    props = book_one()
    assert list(props) == [f"I.{i}" for i in range(1, 16)]
    assert props["I.1"].sorts() == {"a": "point", "b": "point", "c": "point"}
    ps = perturbations(props)
    assert len(ps) == 45 and {p.kind for p in ps} == {"reordered", "hypothesis dropped", "conclusion altered"}
    for p in ps:
        orig = props[p.original]
        if p.kind == "hypothesis dropped":
            assert len(p.statement.hypotheses) == len(orig.hypotheses) - 1
        if p.kind == "reordered":
            assert len(p.statement.hypotheses) == len(orig.hypotheses) and p.equivalent
