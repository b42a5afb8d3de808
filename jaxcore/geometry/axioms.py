"""The axioms of E in groups, as universally quantified formulas (data; translated to z3 / cvc5 terms by
:mod:`jaxcore.geometry.smt`, evaluated on sampled diagrams by :mod:`jaxcore.geometry.sampler`).

Variables: ``a``-``h`` are points, ``L``, ``M``, ``N`` lines, ``C``, ``D`` circles. The groups (ADM 2009, section 3.4,
stated afresh here; numbering ours):

- ``generality``: two points determine a line; a circle has one centre; the centre is inside; inside is not on.
- ``betweenness``: symmetry and strictness, collinearity of between, the order axioms on a line.
- ``same_side``: reflexivity off the line, symmetry, transitivity, and the two-sides (plane separation) axiom.
- ``pasch``: the Pasch axioms relating betweenness and sides.
- ``circles``: a chord through an inside point, convexity of a disc, leaving a disc, the radical axis.
- ``intersection``: when lines and circles meet (the preconditions of the construction rules).
- ``metric``: segments, angles and areas are symmetric, non-negative; a zero segment is a point.
- ``transfer``: diagram facts <-> magnitudes (between adds segments, circles are loci of equal radii, angle 0 on
  a ray, angle addition across a line, right angles, area 0 on a line and area addition).
- ``superposition``: SAS and SSS (E's rules of superposition, stated as axioms on triangles).

Left out, as nothing in Book I.1-15 needs them: the parallel postulate, triple incidence, the intersection-side
rules of circles with lines beyond the radical axis. Each axiom holds in the Euclidean plane (the sampler's tests
evaluate every ground instance on random diagrams).

References:
    J. Avigad, E. Dean, J. Mumma. "A formal system for Euclid's Elements." Review of Symbolic Logic, 2009, section 3.4.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxcore._util.checks import expected

from .language import Literal, parse_literal

Formula = Any  # Literal | tuple("and"|"or"|"not"|"implies"|"iff", ...)


def var_sort(name: str) -> str:
    """The sort of an axiom variable by its name (``a``-``h`` points, ``L M N`` lines, ``C D`` circles)."""
    if name[0] in "LMN":
        return "line"
    if name[0] in "CD":
        return "circle"
    return "point"


@dataclasses.dataclass(frozen=True)
class Axiom:
    """One axiom: ``forall vars. formula``."""

    group: str
    name: str
    vars: tuple[str, ...]
    formula: Formula

    def sorts(self) -> tuple[str, ...]:
        return tuple(var_sort(v) for v in self.vars)


def _f(x):
    if isinstance(x, str):
        return parse_literal(x)
    if isinstance(x, tuple):
        return (x[0],) + tuple(_f(y) for y in x[1:])
    return x


def _ax(group, name, vars_, formula):
    return Axiom(group, name, tuple(vars_.split()), _f(formula))


def _imp(*args):
    *hyp, concl = args
    return ("implies", ("and", *hyp), concl)


AXIOMS: tuple[Axiom, ...] = (
    # generality
    _ax("generality", "G1", "a b L M", _imp("a != b", "on(a, L)", "on(b, L)", "on(a, M)", "on(b, M)", "L = M")),
    _ax("generality", "G2", "a b C", _imp("centre(a, C)", "centre(b, C)", "a = b")),
    _ax("generality", "G3", "a C", _imp("centre(a, C)", "inside(a, C)")),
    _ax("generality", "G4", "a C", _imp("inside(a, C)", "!on(a, C)")),
    # betweenness
    _ax("betweenness", "B1", "a b c", _imp("between(a, b, c)",
                                           ("and", "between(c, b, a)", "a != b", "a != c", "b != c",
                                            "!between(b, a, c)"))),
    _ax("betweenness", "B2", "a b c L", _imp("between(a, b, c)", "on(a, L)", "on(b, L)", "on(c, L)")),
    _ax("betweenness", "B3", "a b c L", _imp("between(a, b, c)", "on(a, L)", "on(c, L)", "on(b, L)")),
    _ax("betweenness", "B4", "a b c d", _imp("between(a, b, c)", "between(a, d, b)", "between(a, d, c)")),
    _ax("betweenness", "B5", "a b c d", _imp("between(a, b, c)", "between(b, c, d)", "between(a, b, d)")),
    _ax("betweenness", "B6", "a b c L", _imp("on(a, L)", "on(b, L)", "on(c, L)", "a != b", "a != c", "b != c",
                                             ("or", "between(a, b, c)", "between(b, a, c)", "between(a, c, b)"))),
    _ax("betweenness", "B7", "a b c d", _imp("between(a, b, c)", "between(a, b, d)", "!between(c, b, d)")),
    # same side
    _ax("same_side", "S1", "a L", _imp("!on(a, L)", "same_side(a, a, L)")),
    _ax("same_side", "S2", "a b L", _imp("same_side(a, b, L)", "same_side(b, a, L)")),
    _ax("same_side", "S3", "a b L", _imp("same_side(a, b, L)", "!on(a, L)")),
    _ax("same_side", "S4", "a b c L", _imp("same_side(a, b, L)", "same_side(a, c, L)", "same_side(b, c, L)")),
    _ax("same_side", "S5", "a b c L", _imp("!on(a, L)", "!on(b, L)", "!on(c, L)", "!same_side(a, b, L)",
                                           ("or", "same_side(a, c, L)", "same_side(b, c, L)"))),
    # Pasch
    _ax("pasch", "P1", "a b c L", _imp("between(a, b, c)", "same_side(a, c, L)", "same_side(a, b, L)")),
    _ax("pasch", "P2", "a b c L", _imp("between(a, b, c)", "on(a, L)", "!on(b, L)", "same_side(b, c, L)")),
    _ax("pasch", "P3", "a b c L", _imp("between(a, b, c)", "on(b, L)", "!same_side(a, c, L)")),
    _ax("pasch", "P4", "a b c L M", _imp("on(b, L)", "on(b, M)", "L != M", "on(a, M)", "on(c, M)", "a != b",
                                         "c != b", "!same_side(a, c, L)", "between(a, b, c)")),
    # circles
    _ax("circles", "C1", "a b c L C", _imp("on(a, L)", "on(b, L)", "on(c, L)", "inside(a, C)", "on(b, C)",
                                           "on(c, C)", "b != c", "between(b, a, c)")),
    _ax("circles", "C2", "a b c C", _imp(("or", "inside(a, C)", "on(a, C)"), ("or", "inside(b, C)", "on(b, C)"),
                                         "between(a, c, b)", "inside(c, C)")),
    _ax("circles", "C3", "a b c C", _imp(("or", "inside(a, C)", "on(a, C)"), "!inside(c, C)", "between(a, c, b)",
                                         ("and", "!inside(b, C)", "!on(b, C)"))),
    _ax("circles", "C4", "a b c d L C D", _imp("C != D", "on(c, C)", "on(c, D)", "on(d, C)", "on(d, D)", "c != d",
                                               "centre(a, C)", "centre(b, D)", "on(a, L)", "on(b, L)",
                                               "!same_side(c, d, L)")),
    # intersection
    _ax("intersection", "I1", "a b L M", _imp("on(a, M)", "on(b, M)", "!on(a, L)", "!on(b, L)",
                                              "!same_side(a, b, L)", "intersects(L, M)")),
    _ax("intersection", "I2", "a b L C", _imp(("or", "inside(a, C)", "on(a, C)"), ("or", "inside(b, C)", "on(b, C)"),
                                              "!on(a, L)", "!on(b, L)", "!same_side(a, b, L)", "intersects(L, C)")),
    _ax("intersection", "I3", "a L C", _imp("inside(a, C)", "on(a, L)", "intersects(L, C)")),
    _ax("intersection", "I4", "a b C D", _imp(("or", "inside(a, C)", "on(a, C)"), ("or", "inside(b, C)", "on(b, C)"),
                                              "inside(a, D)", "!inside(b, D)", "!on(b, D)", "intersects(C, D)")),
    _ax("intersection", "I5", "a b C D", _imp("on(a, C)", "inside(b, C)", "inside(a, D)", "on(b, D)",
                                              "intersects(C, D)")),
    # metric
    _ax("metric", "M1", "a b", ("and", "seg(a, b) = seg(b, a)", "0 <= seg(a, b)")),
    _ax("metric", "M2", "a b", ("iff", "seg(a, b) = 0", "a = b")),
    _ax("metric", "M3", "a b c", ("and", "ang(a, b, c) = ang(c, b, a)", "0 <= ang(a, b, c)",
                                  "ang(a, b, c) <= 2*right")),
    _ax("metric", "M4", "a b c", ("and", "area(a, b, c) = area(c, a, b)", "area(a, b, c) = area(a, c, b)",
                                  "0 <= area(a, b, c)", "area(a, a, b) = 0")),
    _ax("metric", "M5", "", parse_literal("0 < right")),
    # transfer
    _ax("transfer", "T1", "a b c", _imp("between(a, b, c)", "seg(a, b) + seg(b, c) = seg(a, c)")),
    _ax("transfer", "T2", "a b c C D", _imp("centre(a, C)", "centre(a, D)", "on(b, C)", "on(c, D)",
                                            "seg(a, b) = seg(a, c)", "C = D")),
    _ax("transfer", "T3", "a b c C", _imp("centre(a, C)", "on(b, C)", ("iff", "seg(a, c) = seg(a, b)", "on(c, C)"))),
    _ax("transfer", "T4", "a b c C", _imp("centre(a, C)", "on(b, C)", ("iff", "seg(a, c) < seg(a, b)",
                                                                        "inside(c, C)"))),
    _ax("transfer", "A1", "a b c L", _imp("a != b", "a != c", "on(a, L)", "on(b, L)",
                                          ("iff", ("and", "on(c, L)", "!between(b, a, c)"), "ang(b, a, c) = 0"))),
    _ax("transfer", "A2", "a b c d L M", _imp("on(a, L)", "on(a, M)", "on(b, L)", "on(c, M)", "a != b", "a != c",
                                              "!on(d, L)", "!on(d, M)", "L != M",
                                              ("iff", "ang(b, a, c) = ang(b, a, d) + ang(d, a, c)",
                                               ("and", "same_side(b, d, M)", "same_side(c, d, L)")))),
    _ax("transfer", "A3", "a b c d L", _imp("on(a, L)", "on(b, L)", "between(a, c, b)", "!on(d, L)",
                                            ("iff", "ang(a, c, d) = ang(d, c, b)", "ang(a, c, d) = right"))),
    _ax("transfer", "A4", "a b c d e L M", _imp("on(a, L)", "on(b, L)", "on(d, L)", "on(a, M)", "on(c, M)",
                                                "on(e, M)", "b != a", "d != a", "c != a", "e != a",
                                                "!between(b, a, d)", "!between(c, a, e)",
                                                "ang(b, a, c) = ang(d, a, e)")),
    _ax("transfer", "A5", "a b c d L", _imp("on(a, L)", "on(b, L)", "between(a, c, b)", "!on(d, L)",
                                            "ang(a, c, d) + ang(d, c, b) = 2*right")),
    _ax("transfer", "R1", "a b c L", _imp("on(a, L)", "on(b, L)", "a != b", ("iff", "area(a, b, c) = 0", "on(c, L)"))),
    _ax("transfer", "R2", "a b c d L", _imp("on(a, L)", "on(b, L)", "on(c, L)", "between(a, c, b)", "!on(d, L)",
                                            "area(a, c, d) + area(d, c, b) = area(a, d, b)")),
    # superposition
    _ax("superposition", "SAS", "a b c d e f", _imp("a != b", "a != c", "d != e", "d != f",
                                                    "seg(a, b) = seg(d, e)", "seg(a, c) = seg(d, f)",
                                                    "ang(b, a, c) = ang(e, d, f)",
                                                    ("and", "seg(b, c) = seg(e, f)", "ang(a, b, c) = ang(d, e, f)",
                                                     "ang(a, c, b) = ang(d, f, e)", "area(a, b, c) = area(d, e, f)"))),
    _ax("superposition", "SSS", "a b c d e f", _imp("a != b", "a != c", "b != c",
                                                    "seg(a, b) = seg(d, e)", "seg(b, c) = seg(e, f)",
                                                    "seg(c, a) = seg(f, d)",
                                                    ("and", "ang(a, b, c) = ang(d, e, f)", "ang(b, c, a) = ang(e, f, d)",
                                                     "ang(c, a, b) = ang(f, d, e)", "area(a, b, c) = area(d, e, f)"))),
)

GROUPS: tuple[str, ...] = ("generality", "betweenness", "same_side", "pasch", "circles", "intersection", "metric",
                           "transfer", "superposition")


def axioms(groups: str | tuple[str, ...] | list[str] | None = None) -> tuple[Axiom, ...]:
    """The axioms of E used here, optionally only some groups.

    Args:
        groups: a group name or several (see :data:`GROUPS`); None: all.

    Returns:
        A tuple of :class:`Axiom` (each ``forall vars. formula``).

    Raises:
        ValueError: an unknown group name.

    References:
        J. Avigad, E. Dean, J. Mumma. "A formal system for Euclid's Elements." Review of Symbolic Logic, 2009.

    Examples:
        >>> from jaxcore.geometry import axioms
        >>> len(axioms("pasch")), axioms("pasch")[0].vars
        (4, ('a', 'b', 'c', 'L'))
    """
    if groups is None:
        return AXIOMS
    gs = (groups,) if isinstance(groups, str) else tuple(groups)
    for g in gs:
        if g not in GROUPS:
            raise ValueError(expected("groups", "names from " + ", ".join(GROUPS), g))
    return tuple(a for a in AXIOMS if a.group in gs)


def formula_literals(f: Formula) -> list[Literal]:
    """Every literal occurring in a formula (in order)."""
    if isinstance(f, Literal):
        return [f]
    return [lit for g in f[1:] for lit in formula_literals(g)]


def rename_formula(f: Formula, mapping: dict[str, str]) -> Formula:
    """The formula with variables renamed (a ground instance when every variable maps to an object)."""
    if isinstance(f, Literal):
        return f.rename(mapping)
    return (f[0],) + tuple(rename_formula(g, mapping) for g in f[1:])
