"""The language of the formal system E as data: sorts, literals, formulas, construction rules, statements, proofs.

System E (Avigad, Dean, Mumma 2009) has three sorts (points, lines, circles), the diagrammatic predicates
``on``, ``same_side``, ``between``, ``centre``, ``inside``, ``intersects`` and object equality, and three
magnitudes (segments ``seg(a, b)``, angles ``ang(a, b, c)`` with vertex ``b``, areas ``area(a, b, c)``) with
the constant ``right`` (a right angle). A literal is an atom or its negation, or a linear (in)equality between
sums of magnitudes. Literals are written as short strings and parsed once::

    on(a, L)   !same_side(a, b, L)   between(a, b, c)   a != b
    seg(a, b) = seg(a, c)   ang(a, b, c) + ang(c, b, d) = 2*right   0 < area(a, b, c)

Formulas (for the axioms) are nested tuples over literals: ``("and", f, ...)``, ``("or", f, ...)``,
``("not", f)``, ``("implies", f, g)``, ``("iff", f, g)``; a :class:`Literal` is a formula.

A statement (:class:`Statement`) names its objects through a *recipe* (constructions that realise a generic
instance numerically, used only by the sampler), its hypotheses and its conclusion (a conjunction of literals,
some of whose objects may be existential: they are witnessed by the proof's constructions of the same name).
A proof is a tuple of steps: :class:`Construct` (a construction rule: preconditions checked, postconditions
added), :class:`Apply` (an earlier proposition: its hypotheses checked, its conclusion added), :class:`Assert`
(literals checked and added) and :class:`Suppose` (a proof by contradiction: the block must reach ``False``,
then the negation of its supposition is added).

References:
    J. Avigad, E. Dean, J. Mumma. "A formal system for Euclid's Elements." Review of Symbolic Logic, 2009.
    L. Murphy, K. Yang, J. Sun, Z. Li, A. Anandkumar, X. Si. "Autoformalizing Euclidean Geometry." ICML 2024.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Literal as TypingLiteral

from jaxcore._util.checks import expected

Sort = TypingLiteral["point", "line", "circle"]
SORTS: tuple[str, ...] = ("point", "line", "circle")

#: diagrammatic predicates: name -> the sorts of their arguments (``on`` and ``intersects`` are overloaded by sort)
PREDICATES: dict[str, tuple[tuple[str, ...], ...]] = {
    "on": (("point", "line"), ("point", "circle")),
    "same_side": (("point", "point", "line"),),
    "between": (("point", "point", "point"),),
    "centre": (("point", "circle"),),
    "inside": (("point", "circle"),),
    "intersects": (("line", "line"), ("line", "circle"), ("circle", "circle")),
    "eq": (("point", "point"), ("line", "line"), ("circle", "circle")),
}
#: magnitudes: name -> arity (all arguments are points); ``right`` is the constant right angle
MAGNITUDES: dict[str, int] = {"seg": 2, "ang": 3, "area": 3, "right": 0}


@dataclasses.dataclass(frozen=True)
class Atom:
    """A diagrammatic atom ``pred(args)``; ``eq`` is object equality (written ``a = b``)."""

    pred: str
    args: tuple[str, ...]

    def __str__(self) -> str:
        if self.pred == "eq":
            return f"{self.args[0]} = {self.args[1]}"
        return f"{self.pred}({', '.join(self.args)})"


@dataclasses.dataclass(frozen=True)
class Magnitude:
    """One magnitude term: ``seg(a, b)``, ``ang(a, b, c)``, ``area(a, b, c)`` or ``right`` (args ``()``)."""

    kind: str
    args: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.kind if self.kind == "right" else f"{self.kind}({', '.join(self.args)})"


@dataclasses.dataclass(frozen=True)
class Metric:
    """``sum(lhs) op sum(rhs)`` with ``op`` one of ``"="``, ``"<"``, ``"<="``; a term may repeat (``2*right``)."""

    op: str
    lhs: tuple[Magnitude, ...]
    rhs: tuple[Magnitude, ...]

    def __str__(self) -> str:
        def side(ts):
            return " + ".join(str(t) for t in ts) if ts else "0"
        return f"{side(self.lhs)} {self.op} {side(self.rhs)}"


@dataclasses.dataclass(frozen=True)
class Literal:
    """An atom or metric relation, or its negation (``positive=False``)."""

    body: Atom | Metric
    positive: bool = True

    def __neg__(self) -> "Literal":
        return Literal(self.body, not self.positive)

    def objects(self) -> tuple[str, ...]:
        if isinstance(self.body, Atom):
            return self.body.args
        return tuple(a for t in self.body.lhs + self.body.rhs for a in t.args)

    def rename(self, mapping: dict[str, str]) -> "Literal":
        """The literal with objects renamed by ``mapping`` (names not in it are kept)."""
        r = lambda xs: tuple(mapping.get(x, x) for x in xs)  # noqa: E731
        if isinstance(self.body, Atom):
            return Literal(Atom(self.body.pred, r(self.body.args)), self.positive)
        m = self.body
        return Literal(Metric(m.op, tuple(Magnitude(t.kind, r(t.args)) for t in m.lhs),
                              tuple(Magnitude(t.kind, r(t.args)) for t in m.rhs)), self.positive)

    def __str__(self) -> str:
        if self.positive:
            return str(self.body)
        if isinstance(self.body, Atom) and self.body.pred == "eq":
            return f"{self.body.args[0]} != {self.body.args[1]}"
        if isinstance(self.body, Metric):
            neg = {"=": "!=", "<": ">=", "<=": ">"}[self.body.op]
            return str(self.body).replace(f" {self.body.op} ", f" {neg} ", 1)
        return f"!{self.body}"


_NAME = r"[A-Za-z_][A-Za-z0-9_']*"
_ATOM_RE = re.compile(rf"^(!?)\s*({_NAME})\s*\((.*)\)$")
_MAG_RE = re.compile(rf"^(?:(\d+)\s*\*\s*)?(seg|ang|area)\s*\((.*)\)$|^(?:(\d+)\s*\*\s*)?(right)$|^(0)$")


def _terms(text: str, where: str) -> tuple[Magnitude, ...]:
    out: list[Magnitude] = []
    for part in text.split("+"):
        part = part.strip()
        m = _MAG_RE.match(part)
        if not m:
            raise ValueError(expected(where, "a sum of seg(a, b), ang(a, b, c), area(a, b, c), k*right or 0", part))
        if m.group(6):
            continue
        count = int(m.group(1) or m.group(4) or 1)
        kind = m.group(2) or m.group(5)
        args = tuple(a.strip() for a in m.group(3).split(",")) if m.group(3) is not None else ()
        if len(args) != MAGNITUDES[kind]:
            raise ValueError(expected(where, f"{MAGNITUDES[kind]} points in {kind}(...)", part))
        out.extend([Magnitude(kind, args)] * count)
    return tuple(out)


def parse_literal(text: str | Literal) -> Literal:
    """Parse one literal of E from its text form (see the module docstring).

    Args:
        text: e.g. ``"on(a, L)"``, ``"!between(a, b, c)"``, ``"a != b"``, ``"seg(a, b) < seg(c, d)"``,
            ``"ang(a, b, c) + ang(c, b, d) = 2*right"``, ``"0 < area(a, b, c)"``; a :class:`Literal` is returned.

    Returns:
        The :class:`Literal`. ``x > y`` and ``x >= y`` are stored as ``y < x`` and ``y <= x``; ``!=`` as the
        negation of ``=``.

    Raises:
        TypeError: ``text`` is not a string.
        ValueError: unknown predicate, wrong number of arguments, or unparseable text.

    Examples:
        >>> from jaxcore.geometry import parse_literal
        >>> str(parse_literal("seg(a, b) >= seg(c, d)"))
        'seg(c, d) <= seg(a, b)'
        >>> str(parse_literal("!on(c, L)"))
        '!on(c, L)'
    """
    if isinstance(text, Literal):
        return text
    if not isinstance(text, str):
        raise TypeError(expected("text", "a literal as a string", type(text).__name__, raw=True))
    s = text.strip()
    for op, neg, flip in (("!=", True, False), (">=", False, True), ("<=", False, False), (">", False, True),
                          ("<", False, False), ("=", False, False)):
        if op in s and not s.startswith("!"):
            left, right = (p.strip() for p in s.split(op, 1))
            if re.fullmatch(_NAME, left) and re.fullmatch(_NAME, right) and op in ("=", "!=") \
                    and left not in ("right",) and right not in ("right",):
                return Literal(Atom("eq", (left, right)), not neg)
            lhs, rhs = _terms(left, "text"), _terms(right, "text")
            if flip:
                lhs, rhs = rhs, lhs
            base = {"!=": "=", ">=": "<=", ">": "<"}.get(op, op)
            return Literal(Metric(base, lhs, rhs), not neg)
    m = _ATOM_RE.match(s)
    if not m or m.group(2) not in PREDICATES or m.group(2) == "eq":
        raise ValueError(expected("text", "a literal of E (on, same_side, between, centre, inside, intersects, "
                                  "=, or a magnitude relation)", text))
    args = tuple(a.strip() for a in m.group(3).split(","))
    if len(args) not in {len(s_) for s_ in PREDICATES[m.group(2)]} or not all(re.fullmatch(_NAME, a) for a in args):
        raise ValueError(expected("text", f"{m.group(2)} with object names as arguments", text))
    return Literal(Atom(m.group(2), args), m.group(1) != "!")


def lits(*texts: str | Literal) -> tuple[Literal, ...]:
    """Parse several literals (a convenience for writing data)."""
    return tuple(parse_literal(t) for t in texts)


# ----------------------------------------------------------------------------- construction rules


@dataclasses.dataclass(frozen=True)
class Rule:
    """A construction rule of E: input and output sorts, preconditions and postconditions as literal templates
    over the placeholder names ``in0, in1, ...`` and ``out0, out1, ...``.

    ``recipe_only`` rules (random configurations with a stated metric property, e.g. a congruent copy of a
    triangle) exist only for the sampler's recipes; a proof may not use them.
    """

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    pre: tuple[str, ...] = ()
    post: tuple[str, ...] = ()
    recipe_only: bool = False
    doc: str = ""

    def instantiate(self, ins: tuple[str, ...], outs: tuple[str, ...]) -> tuple[tuple[Literal, ...],
                                                                                 tuple[Literal, ...]]:
        """The rule's (preconditions, postconditions) on the named objects."""
        mapping = {f"in{i}": n for i, n in enumerate(ins)} | {f"out{i}": n for i, n in enumerate(outs)}
        return (tuple(parse_literal(t).rename(mapping) for t in self.pre),
                tuple(parse_literal(t).rename(mapping) for t in self.post))


def _r(name, inputs, outputs, pre=(), post=(), recipe_only=False, doc=""):
    return Rule(name, tuple(inputs.split()), tuple(outputs.split()), tuple(pre), tuple(post), recipe_only, doc)


#: E's construction rules used here (ADM 2009, section 3.3), by name
RULES: dict[str, Rule] = {r.name: r for r in [
    _r("point", "", "point", doc="let a be a point"),
    _r("point_on_line", "line", "point", post=["on(out0, in0)"], doc="let a be a point on L"),
    _r("point_off_line", "line", "point", post=["!on(out0, in0)"], doc="let a be a point not on L"),
    _r("point_between", "point point", "point", pre=["in0 != in1"], post=["between(in0, out0, in1)"],
       doc="let a be a point between b and c"),
    _r("extend", "point point", "point", pre=["in0 != in1"], post=["between(in0, in1, out0)"],
       doc="let a be a point extending the segment from b through c (c between b and a)"),
    _r("point_same_side", "point line", "point", pre=["!on(in0, in1)"], post=["same_side(out0, in0, in1)"],
       doc="let a be a point on the same side of L as b"),
    _r("point_opposite_side", "point line", "point", pre=["!on(in0, in1)"],
       post=["!on(out0, in1)", "!same_side(out0, in0, in1)"], doc="let a be a point on the other side of L from b"),
    _r("line", "point point", "line", pre=["in0 != in1"], post=["on(in0, out0)", "on(in1, out0)"],
       doc="let L be the line through a and b"),
    _r("circle", "point point", "circle", pre=["in0 != in1"], post=["centre(in0, out0)", "on(in1, out0)"],
       doc="let C be the circle with centre a passing through b"),
    _r("meet_ll", "line line", "point", pre=["intersects(in0, in1)"], post=["on(out0, in0)", "on(out0, in1)"],
       doc="let a be the intersection of L and M"),
    _r("meet_cc", "circle circle", "point point", pre=["intersects(in0, in1)"],
       post=["on(out0, in0)", "on(out0, in1)", "on(out1, in0)", "on(out1, in1)", "out0 != out1"],
       doc="let a, b be the two intersections of C and D (a on the left of the centre line from C's centre)"),
    _r("meet_cc_one", "circle circle", "point", pre=["intersects(in0, in1)"],
       post=["on(out0, in0)", "on(out0, in1)"], doc="let a be an intersection of C and D"),
    _r("meet_lc", "line circle", "point point", pre=["intersects(in0, in1)"],
       post=["on(out0, in0)", "on(out0, in1)", "on(out1, in0)", "on(out1, in1)", "out0 != out1"],
       doc="let a, b be the two intersections of L and C"),
    _r("meet_lc_beyond", "line circle point point", "point",
       pre=["inside(in2, in1)", "on(in2, in0)", "on(in3, in0)", "in2 != in3"],
       post=["on(out0, in0)", "on(out0, in1)", "between(in3, in2, out0)"],
       doc="let a be the intersection of L and C such that b (inside C, on L) is between c (on L) and a"),
    _r("meet_cc_opp", "circle circle point point point line", "point",
       pre=["intersects(in0, in1)", "centre(in2, in0)", "centre(in3, in1)", "on(in2, in5)", "on(in3, in5)",
            "!on(in4, in5)"],
       post=["on(out0, in0)", "on(out0, in1)", "!on(out0, in5)", "!same_side(out0, in4, in5)"],
       doc="let a be the intersection of C and D (centres p, q on L) on the other side of L from b"),
    # recipe-only: random configurations with a stated property, for the sampler
    _r("congruent", "point point point", "point point point", recipe_only=True,
       doc="a random rigid motion (rotation, translation, reflection with probability 1/2) of a triangle"),
    _r("at_distance", "point point point", "point", recipe_only=True,
       doc="a point at distance seg(in1, in2) from in0 in a random direction"),
    _r("rotate_about", "point point", "point", recipe_only=True,
       doc="in1 rotated about in0 by a random angle"),
    _r("reflect", "point point point", "point", recipe_only=True,
       doc="in0 reflected in the line through in1 and in2"),
    _r("apex", "point point", "point", recipe_only=True,
       doc="a random point off the segment's line on the perpendicular bisector of in0 in1"),
    _r("mirror_angle", "point point point point", "point", recipe_only=True,
       doc="a point out0 with ang(in3, in0, out0) = ang(in1, in0, in2) on a random side"),
]}


@dataclasses.dataclass(frozen=True)
class Construct:
    """A proof or recipe step: apply the construction rule ``rule`` to ``inputs``, naming its ``outputs``."""

    rule: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def __str__(self) -> str:
        return f"{', '.join(self.outputs)} := {self.rule}({', '.join(self.inputs)})"


@dataclasses.dataclass(frozen=True)
class Apply:
    """A proof step citing an earlier proposition ``name``: ``mapping`` renames its objects (hypothesis objects
    to this proof's objects, existential objects to the new names)."""

    name: str
    mapping: tuple[tuple[str, str], ...]

    def __str__(self) -> str:
        return f"by {self.name} [{', '.join(f'{k}->{v}' for k, v in self.mapping)}]"


@dataclasses.dataclass(frozen=True)
class Assert:
    """A proof step: the literals follow from the context (checked), then join it."""

    claims: tuple[Literal, ...]

    def __str__(self) -> str:
        return "have " + ", ".join(str(c) for c in self.claims)


@dataclasses.dataclass(frozen=True)
class Suppose:
    """Proof by contradiction: under ``assumption`` the ``steps`` reach a contradiction (the block ends with an
    :class:`Assert` whose claims contradict the context); then the negation of the assumption's conjunction
    joins the context."""

    assumption: tuple[Literal, ...]
    steps: tuple[Any, ...]

    def __str__(self) -> str:
        return "suppose " + ", ".join(str(c) for c in self.assumption) + f" ({len(self.steps)} steps) ... absurd"


Step = Construct | Apply | Assert | Suppose


def construct(text: str) -> Construct:
    """Parse ``"c, d := meet_cc(C, D)"`` into a :class:`Construct`.

    Raises:
        ValueError: unknown rule, wrong number of inputs or outputs, or unparseable text.
    """
    m = re.fullmatch(r"\s*(.*?)\s*:=\s*(\w+)\s*\((.*)\)\s*", text)
    if not m or m.group(2) not in RULES:
        raise ValueError(expected("text", "'outs := rule(ins)' with a rule of RULES", text))
    rule = RULES[m.group(2)]
    outs = tuple(x.strip() for x in m.group(1).split(",") if x.strip())
    ins = tuple(x.strip() for x in m.group(3).split(",") if x.strip())
    if len(outs) != len(rule.outputs) or len(ins) != len(rule.inputs):
        raise ValueError(expected("text", f"{len(rule.outputs)} outputs and {len(rule.inputs)} inputs for "
                                  f"{rule.name}", text))
    return Construct(rule.name, ins, outs)


def have(*texts: str | Literal) -> Assert:
    """An :class:`Assert` step from literal texts."""
    return Assert(lits(*texts))


@dataclasses.dataclass(frozen=True)
class Statement:
    """A proposition of E.

    Attributes:
        name: e.g. ``"I.1"``.
        recipe: constructions realising a generic instance of the hypotheses (the sampler's recipe); they
            declare every universally quantified object and its sort.
        hypotheses: literals over the recipe's objects.
        conclusion: literals; objects not in the recipe are existential (listed in ``exists`` with sorts).
        exists: ``((name, sort), ...)`` of the existential objects.
        proof: the proof steps (empty: no proof given).
        text: the proposition in words.
    """

    name: str
    recipe: tuple[Construct, ...]
    hypotheses: tuple[Literal, ...]
    conclusion: tuple[Literal, ...]
    exists: tuple[tuple[str, str], ...] = ()
    proof: tuple[Any, ...] = ()
    text: str = ""

    def sorts(self) -> dict[str, str]:
        """Object name -> sort for the recipe's objects and the existential ones."""
        out: dict[str, str] = {}
        for c in self.recipe:
            for n, s in zip(c.outputs, RULES[c.rule].outputs):
                out[n] = s
        out.update(dict(self.exists))
        return out


def statement(name: str, recipe: list[str], hypotheses: list[str], conclusion: list[str],
              exists: dict[str, str] | None = None, proof: list[Any] | None = None, text: str = "") -> Statement:
    """Build a :class:`Statement` from texts (constructions as ``"outs := rule(ins)"``, literals as text).

    Proof steps are :class:`Construct` texts, ``have(...)`` / :class:`Apply` / :class:`Suppose` objects.

    Raises:
        ValueError: a literal names an object the recipe and ``exists`` do not declare.
    """
    def conv(step):
        if isinstance(step, str):
            return construct(step)
        if isinstance(step, Suppose):
            return Suppose(step.assumption, tuple(conv(x) for x in step.steps))
        return step

    proof_steps = tuple(conv(s) for s in (proof or []))
    st = Statement(name, tuple(construct(r) for r in recipe), lits(*hypotheses), lits(*conclusion),
                   tuple((exists or {}).items()), proof_steps, text)
    known = set(st.sorts())
    for lit in st.hypotheses + st.conclusion:
        missing = [o for o in lit.objects() if o not in known]
        if missing:
            raise ValueError(expected(f"{name}: objects", "names declared by the recipe or exists", missing))
    return st
