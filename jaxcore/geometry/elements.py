"""Euclid's Elements, Book I, propositions 1-15, formalised afresh in this package's representation of E, with
proofs; and perturbed statements (a hypothesis dropped, a conclusion altered; and harmless rewrites) for the
equivalence benchmark.

Written here from the mathematics (Euclid is public domain), not from any other formalisation. Choices that
differ from Euclid's text: I.2 and I.3 assume the given point distinct from the segment's end (Euclid's
general position); I.5 is proved by Pappus' argument (the triangle is congruent to its mirror image by SAS);
I.4 and I.8 are E's superposition axioms (one step each); I.13 is E's straight-angle transfer axiom (one step);
I.7's proof is left to the solver (a contradiction it may not find in the time limit). Triangles are stated as
``0 < area(a, b, c)`` (non-degenerate).

References:
    Euclid, Elements, Book I (public domain). J. Avigad, E. Dean, J. Mumma. "A formal system for Euclid's
    Elements." 2009 (the formal system E). L. Murphy et al. "Autoformalizing Euclidean Geometry." ICML 2024.
"""

from __future__ import annotations

import dataclasses

from .language import Apply, Statement, Suppose, have, lits, statement


def _apply(name, **m):
    return Apply(name, tuple(m.items()))


def _props() -> dict[str, Statement]:
    P: dict[str, Statement] = {}

    def add(st):
        P[st.name] = st

    add(statement(
        "I.1", ["a := point()", "b := point()"], ["a != b"],
        ["seg(a, b) = seg(b, c)", "seg(b, c) = seg(c, a)", "c != a", "c != b"], exists={"c": "point"},
        proof=["C := circle(a, b)", "D := circle(b, a)", "c := meet_cc_one(C, D)",
               have("seg(a, c) = seg(a, b)"), have("seg(b, c) = seg(b, a)")],
        text="On a given finite straight line to construct an equilateral triangle."))
    add(statement(
        "I.2", ["a := point()", "b := point()", "c := point()"], ["a != b", "b != c"],
        ["seg(a, f) = seg(b, c)"], exists={"f": "point"},
        proof=[_apply("I.1", a="a", b="b", c="d"), "C := circle(b, c)", "M := line(d, b)",
               "g := meet_lc_beyond(M, C, b, d)", "E := circle(d, g)", "L := line(d, a)",
               have("seg(d, g) = seg(d, b) + seg(b, g)", "b != g"), have("seg(d, a) < seg(d, g)"),
               have("inside(a, E)"), "f := meet_lc_beyond(L, E, a, d)",
               have("seg(d, f) = seg(d, g)", "seg(d, f) = seg(d, a) + seg(a, f)", "seg(b, g) = seg(b, c)")],
        text="To place at a given point a straight line equal to a given straight line."))
    add(statement(
        "I.3", ["a := point()", "b := point()", "c := point()", "r0 := point_between(a, b)", "d := at_distance(c, a, r0)"],
        ["a != b", "c != d", "a != c", "seg(c, d) < seg(a, b)"],
        ["between(a, e, b)", "seg(a, e) = seg(c, d)"], exists={"e": "point"},
        proof=[_apply("I.2", a="a", b="c", c="d", f="f"), have("a != f"), "C := circle(a, f)", "L := line(a, b)",
               "g := extend(b, a)", "e := meet_lc_beyond(L, C, a, g)", have("seg(a, e) = seg(a, f)"),
               have("seg(a, e) < seg(a, b)"), have("e != b", "on(e, L)"), have("between(a, e, b)")],
        text="Given two unequal straight lines, to cut off from the greater a straight line equal to the less."))
    sas = ["seg(a, b) = seg(d, e)", "seg(a, c) = seg(d, f)", "ang(b, a, c) = ang(e, d, f)", "0 < area(a, b, c)"]
    add(statement(
        "I.4", ["a := point()", "b := point()", "c := point()", "d, e, f := congruent(a, b, c)"], sas,
        ["seg(b, c) = seg(e, f)", "ang(a, b, c) = ang(d, e, f)", "ang(a, c, b) = ang(d, f, e)"],
        proof=[have("a != b", "a != c", "d != e", "d != f")],
        text="Two triangles with two sides and the included angle equal are equal in all respects (SAS)."))
    add(statement(
        "I.5", ["a := point()", "b := point()", "c := rotate_about(a, b)"],
        ["seg(a, b) = seg(a, c)", "0 < area(a, b, c)"], ["ang(a, b, c) = ang(a, c, b)"],
        proof=[have("a != b", "a != c"), have("ang(b, a, c) = ang(c, a, b)")],
        text="In isosceles triangles the angles at the base are equal (Pappus' proof)."))

    def i6_case(x, y):
        # suppose seg(a, y) < seg(a, x): cut d off x-a with seg(x, d) = seg(a, y); triangle dxy equals triangle ayx
        return Suppose(lits(f"seg(a, {y}) < seg(a, {x})"), (
            _apply("I.3", a=x, b="a", c="a", d=y, e="d"),
            f"L{x} := line({x}, a)",
            f"M{x} := line({x}, {y})",
            have(f"on(d, L{x})", f"!on({y}, L{x})", f"{x} != d"),
            have(f"ang(d, {x}, {y}) = ang(a, {x}, {y})"),
            have(f"area({x}, d, {y}) = area({y}, a, {x})"),
            have(f"area({x}, d, {y}) + area({y}, d, a) = area({x}, {y}, a)"),
            have(f"area({y}, d, a) = 0"),
            have(f"on({y}, L{x})"),
        ))

    add(statement(
        "I.6", ["b := point()", "c := point()", "a := apex(b, c)"],
        ["ang(a, b, c) = ang(a, c, b)", "0 < area(a, b, c)"], ["seg(a, b) = seg(a, c)"],
        proof=[have("a != b", "a != c", "b != c"), i6_case("b", "c"), i6_case("c", "b")],
        text="A triangle with two equal angles has the sides opposite them equal."))
    add(statement(
        "I.7", ["a := point()", "b := point()", "c := point()", "L := line(a, b)", "c0 := reflect(c, a, b)",
                "d := reflect(c0, a, b)"],
        ["a != b", "on(a, L)", "on(b, L)", "same_side(c, d, L)", "seg(a, c) = seg(a, d)", "seg(b, c) = seg(b, d)"],
        ["c = d"], proof=[],
        text="On the same base and side there cannot be two triangles with equal sides from its ends (uniqueness)."))
    add(statement(
        "I.8", ["a := point()", "b := point()", "c := point()", "d, e, f := congruent(a, b, c)"],
        ["seg(a, b) = seg(d, e)", "seg(b, c) = seg(e, f)", "seg(c, a) = seg(f, d)", "0 < area(a, b, c)"],
        ["ang(b, a, c) = ang(e, d, f)", "ang(a, b, c) = ang(d, e, f)", "ang(b, c, a) = ang(e, f, d)"],
        proof=[have("a != b", "b != c", "a != c")],
        text="Two triangles with three sides equal have their angles equal (SSS)."))
    add(statement(
        "I.9", ["a := point()", "b := point()", "c := point()"], ["0 < area(b, a, c)"],
        ["ang(b, a, f) = ang(f, a, c)"], exists={"f": "point"},
        proof=["L := line(a, b)", "M := line(a, c)", have("a != b", "a != c", "!on(c, L)", "L != M"),
               "d := point_between(a, b)", "C := circle(a, d)", "g := extend(c, a)", "e := meet_lc_beyond(M, C, a, g)",
               have("seg(a, e) = seg(a, d)", "on(d, L)", "d != a"), have("!on(d, M)"), have("d != e"),
               "N := line(d, e)", "C1 := circle(d, e)", "C2 := circle(e, d)", have("intersects(C1, C2)"),
               have("!on(a, N)"), "f := meet_cc_opp(C1, C2, d, e, a, N)", have("f != a", "seg(d, f) = seg(e, f)"),
               "K := line(a, f)", have("ang(d, a, f) = ang(e, a, f)"), have("ang(b, a, f) = ang(d, a, f)"),
               have("!between(c, a, e)"), have("ang(f, a, c) = ang(f, a, e)")],
        text="To bisect a given rectilineal angle."))
    add(statement(
        "I.10", ["a := point()", "b := point()"], ["a != b"],
        ["between(a, d, b)", "seg(a, d) = seg(d, b)"], exists={"d": "point"},
        proof=["C := circle(a, b)", "D := circle(b, a)", have("intersects(C, D)"), "c, e := meet_cc(C, D)",
               "L := line(a, b)", have("seg(a, c) = seg(a, b)", "seg(b, c) = seg(a, b)", "seg(a, e) = seg(a, b)",
                                       "seg(b, e) = seg(a, b)"),
               have("!on(c, L)", "!on(e, L)"), have("!same_side(c, e, L)"), "M := line(c, e)",
               have("intersects(L, M)"), "d := meet_ll(L, M)", have("L != M", "d != c", "d != e"),
               have("between(c, d, e)"), have("ang(a, c, e) = ang(b, c, e)"), "K := line(c, a)",
               "J := line(c, b)", have("ang(a, c, d) = ang(a, c, e)"), have("ang(b, c, d) = ang(b, c, e)"),
               have("seg(a, d) = seg(b, d)"), have("d != a", "d != b", "on(d, L)")],
        text="To bisect a given finite straight line."))
    add(statement(
        "I.11", ["a := point()", "b := point()", "c := point_between(a, b)"], ["between(a, c, b)"],
        ["ang(a, c, f) = right", "ang(f, c, b) = right"], exists={"f": "point"},
        proof=["L := line(a, b)", have("on(c, L)"), "d := point_between(c, a)", "C := circle(c, d)",
               have("on(d, L)", "inside(c, C)"), "e := meet_lc_beyond(L, C, c, d)",
               "C1 := circle(d, e)", "C2 := circle(e, d)", have("intersects(C1, C2)"), "f, g := meet_cc(C1, C2)",
               have("seg(d, f) = seg(d, e)", "seg(e, f) = seg(e, d)", "seg(c, d) = seg(c, e)"),
               have("!on(f, L)"), have("ang(d, c, f) = ang(e, c, f)"), have("ang(d, c, f) = right"),
               "N := line(c, f)", have("ang(a, c, f) = ang(d, c, f)"), have("!between(e, c, b)"),
               have("ang(f, c, b) = ang(f, c, e)")],
        text="To draw a straight line at right angles to a given straight line from a given point on it."))
    add(statement(
        "I.12", ["a := point()", "b := point()", "L := line(a, b)", "c := point_off_line(L)"],
        ["a != b", "on(a, L)", "on(b, L)", "!on(c, L)"],
        ["on(h, L)", "between(g, h, e)", "ang(g, h, c) = right"], exists={"h": "point", "g": "point", "e": "point"},
        proof=["d := point_opposite_side(c, L)", "C := circle(c, d)", have("intersects(L, C)"), "g, e := meet_lc(L, C)",
               _apply("I.10", a="g", b="e", d="h"), have("on(h, L)", "seg(c, g) = seg(c, e)"),
               have("h != c", "g != c"), have("ang(g, h, c) = ang(e, h, c)"), have("ang(g, h, c) = ang(c, h, e)")],
        text="To a given infinite straight line, from a given point not on it, to draw a perpendicular."))
    add(statement(
        "I.13", ["a := point()", "b := point()", "c := point_between(a, b)", "d := point()"],
        ["between(a, c, b)", "0 < area(a, b, d)"], ["ang(a, c, d) + ang(d, c, b) = 2*right"],
        proof=["L := line(a, b)", have("!on(d, L)")],
        text="A straight line set up on a straight line makes angles equal to two right angles."))
    add(statement(
        "I.14", ["a := point()", "c := point()", "d := point()", "M := line(c, d)", "b := extend(a, c)"],
        ["c != d", "a != c", "b != c", "on(c, M)", "on(d, M)", "!on(a, M)", "!on(b, M)", "!same_side(a, b, M)",
         "ang(a, c, d) + ang(d, c, b) = 2*right"], ["between(a, c, b)"],
        proof=["e := extend(a, c)", "L := line(a, c)", have("on(e, L)", "!on(e, M)"),
               have("ang(a, c, d) + ang(d, c, e) = 2*right"), have("ang(d, c, e) = ang(d, c, b)"),
               have("!same_side(a, e, M)"), have("same_side(b, e, M)"),
               Suppose(lits("!on(b, L)"), ("N := line(c, b)", have("0 < ang(b, c, e)", "!on(d, L)", "L != M"),
                                           have("!same_side(d, b, L)"), have("!on(d, N)", "!on(e, N)", "M != N"),
                                           have("same_side(d, e, N)"),
                                           have("ang(d, c, b) = ang(d, c, e) + ang(e, c, b)"))),
               have("on(b, L)")],
        text="Two lines making with a line, at a point, adjacent angles equal to two right angles are in one line."))
    add(statement(
        "I.15", ["a := point()", "b := point()", "e := point_between(a, b)", "c := point()", "d := extend(c, e)"],
        ["between(a, e, b)", "between(c, e, d)", "0 < area(a, b, c)"], ["ang(a, e, c) = ang(d, e, b)"],
        proof=["L := line(a, b)", "M := line(c, d)", have("on(e, L)", "on(e, M)", "!on(c, L)"),
               have("L != M", "!on(b, M)"), have("ang(a, e, c) + ang(c, e, b) = 2*right"),
               have("ang(c, e, b) + ang(b, e, d) = 2*right")],
        text="If two straight lines cut one another, they make the vertical angles equal."))
    return P


def book_one() -> dict[str, Statement]:
    """Euclid's Book I, propositions 1-15, in this package's representation of E, with proofs.

    Returns:
        A dict ``"I.1"`` ... ``"I.15"`` -> :class:`~jaxcore.geometry.Statement` (hypotheses, conclusion,
        existential objects, the sampler's recipe and the proof).

    References:
        Euclid, Elements, Book I. J. Avigad, E. Dean, J. Mumma, "A formal system for Euclid's Elements", 2009.

    Examples:
        >>> from jaxcore.geometry import book_one
        >>> props = book_one()
        >>> len(props), [str(c) for c in props["I.5"].conclusion]
        (15, ['ang(a, b, c) = ang(a, c, b)'])
    """
    return _props()


@dataclasses.dataclass(frozen=True)
class Perturbation:
    """A variant of a proposition's statement and whether it is equivalent to the original.

    Attributes:
        original: the proposition's name.
        kind: ``"reordered"`` (hypotheses permuted, magnitudes written the other way round: equivalent),
            ``"hypothesis dropped"`` or ``"conclusion altered"`` (not equivalent).
        statement: the variant (its recipe realises its own hypotheses; the proof is the original's, used only
            to realise existential objects).
        equivalent: the ground truth.
    """

    original: str
    kind: str
    statement: Statement
    equivalent: bool


_SWAP = {"seg": lambda a: a[::-1], "ang": lambda a: a[::-1], "area": lambda a: (a[1], a[2], a[0])}

# per proposition: (index of the hypothesis to drop, the recipe without it or None to keep the original's),
# and (index of the conclusion literal to replace, the altered literal)
_DROPS: dict[str, tuple[int, list[str] | None]] = {
    "I.1": (0, ["a := point()", "b := point()"]),
    "I.2": (1, None),
    "I.3": (3, ["a := point()", "b := point()", "c := point()", "r0 := point_between(a, b)", "d := extend(a, b)"]),
    "I.4": (2, ["a := point()", "b := point()", "c := point()", "d := point()", "e := at_distance(d, a, b)",
                "f := at_distance(d, a, c)"]),
    "I.5": (0, ["a := point()", "b := point()", "c := point()"]),
    "I.6": (0, ["b := point()", "c := point()", "a := point()"]),
    "I.7": (3, ["a := point()", "b := point()", "c := point()", "L := line(a, b)", "d := reflect(c, a, b)"]),
    "I.8": (2, ["a := point()", "b := point()", "c := point()", "d := point()", "e := at_distance(d, a, b)",
                "f := at_distance(e, b, c)"]),
    "I.9": (0, ["a := point()", "b := point()", "c := point()"]),
    "I.10": (0, ["a := point()", "b := point()"]),
    "I.11": (0, ["a := point()", "b := point()", "c := point()"]),
    "I.12": (3, ["a := point()", "b := point()", "L := line(a, b)", "c := point()"]),
    "I.13": (0, ["a := point()", "b := point()", "c := point()", "d := point()"]),
    "I.14": (7, ["a := point()", "c := point()", "d := point()", "M := line(c, d)", "b0 := extend(a, c)",
                 "b := reflect(b0, c, d)"]),
    "I.15": (1, ["a := point()", "b := point()", "e := point_between(a, b)", "c := point()", "d := point()"]),
}
_ALTERS: dict[str, tuple[int, str]] = {
    "I.1": (0, "seg(a, b) = seg(a, c) + seg(b, c)"), "I.2": (0, "seg(a, f) < seg(b, c)"),
    "I.3": (1, "seg(a, e) = seg(a, b)"), "I.4": (1, "ang(a, b, c) = ang(d, f, e)"),
    "I.5": (0, "ang(a, b, c) = ang(b, a, c)"), "I.6": (0, "seg(a, b) = seg(b, c)"), "I.7": (0, "c != d"),
    "I.8": (0, "ang(b, a, c) = ang(d, e, f)"), "I.9": (0, "ang(b, a, f) = right"),
    "I.10": (1, "seg(a, d) = seg(a, b)"), "I.11": (0, "ang(a, c, f) = ang(f, c, b) + ang(f, c, b)"),
    "I.12": (2, "ang(g, h, c) = ang(g, c, h)"), "I.13": (0, "ang(a, c, d) + ang(d, c, b) = right"),
    "I.14": (0, "between(c, a, b)"), "I.15": (0, "ang(a, e, c) = ang(c, e, b)"),
}


def _swap_literal(lit):
    from .language import Literal, Magnitude, Metric
    b = lit.body
    if isinstance(b, Metric):
        flip = lambda ts: tuple(Magnitude(t.kind, _SWAP.get(t.kind, lambda a: a)(t.args)) for t in ts)  # noqa: E731
        if b.op == "=":
            return Literal(Metric("=", flip(b.rhs), flip(b.lhs)), lit.positive)
        return Literal(Metric(b.op, flip(b.lhs), flip(b.rhs)), lit.positive)
    return lit


def perturbations(props: dict[str, Statement] | None = None) -> list[Perturbation]:
    """Three variants of each proposition: reordered (equivalent), a hypothesis dropped, a conclusion altered.

    Args:
        props: the propositions (default :func:`book_one`).

    Returns:
        A list of :class:`Perturbation`, three per proposition, in order.

    Examples:
        >>> from jaxcore.geometry import perturbations
        >>> ps = perturbations()
        >>> len(ps), sum(p.equivalent for p in ps)
        (45, 15)
    """
    from .language import construct, parse_literal
    props = book_one() if props is None else props
    out = []
    for name, st in props.items():
        reordered = dataclasses.replace(st, hypotheses=tuple(_swap_literal(h) for h in st.hypotheses[::-1]),
                                        conclusion=tuple(_swap_literal(c) for c in st.conclusion[::-1]))
        out.append(Perturbation(name, "reordered", reordered, True))
        i, recipe = _DROPS[name]
        hyps = st.hypotheses[:i] + st.hypotheses[i + 1:]
        dropped = dataclasses.replace(st, hypotheses=hyps, recipe=st.recipe if recipe is None else
                                      tuple(construct(r) for r in recipe))
        out.append(Perturbation(name, "hypothesis dropped", dropped, False))
        j, alt = _ALTERS[name]
        concl = st.conclusion[:j] + (parse_literal(alt),) + st.conclusion[j + 1:]
        out.append(Perturbation(name, "conclusion altered", dataclasses.replace(st, conclusion=concl), False))
    return out
