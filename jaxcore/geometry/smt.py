"""SMT queries of E: "context and not claim" handed to z3 and cvc5 (a portfolio with a time limit).

Both solvers are driven through the same z3-style Python API (z3's own, and cvc5's ``cvc5.pythonic``): the three
sorts become uninterpreted sorts, each predicate an uninterpreted Boolean function, each magnitude an
uninterpreted real function, and each axiom a ``ForAll`` (``mode="quantified"``) or every instance over the query's
objects (``mode="ground"``: quantifier-free, complete for the diagrammatic consequences about the named objects).

A query's verdict is ``"proved"`` (unsat: the claim follows), ``"not entailed"`` (sat: a model of the axioms and the
context where the claim fails; only conclusive in ground mode, where the axioms are the finite instances) or
``"unknown"`` (time limit or incompleteness of quantifier reasoning).
"""

from __future__ import annotations

import importlib
import itertools
import time
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from jaxcore._util.checks import check_choice, check_scalar, expected

from .axioms import AXIOMS, Axiom, rename_formula
from .language import Atom, Literal, Metric, parse_literal

SOLVERS: tuple[str, ...] = ("z3", "cvc5")


class QueryResult(NamedTuple):
    """The verdict of one query and each solver's answer and time.

    Attributes:
        verdict: ``"proved"``, ``"not entailed"`` or ``"unknown"`` (the portfolio's: the first definite answer).
        solver: the solver that gave the verdict (``""`` if none did).
        seconds: wall seconds to the verdict (the sum of the solvers' times run until then).
        answers: solver -> ``"unsat"``, ``"sat"``, ``"unknown"`` or ``"not run"``.
        times: solver -> wall seconds (0.0 if not run).
    """

    verdict: str
    solver: str
    seconds: float
    answers: dict
    times: dict


def _backend(name: str):
    if name == "z3":
        try:
            return importlib.import_module("z3")
        except ImportError as e:  # pragma: no cover - optional dependency
            raise ImportError("z3 is needed for jaxcore.geometry's SMT queries: pip install 'jaxcore[geometry]'") from e
    try:
        return importlib.import_module("cvc5.pythonic")
    except ImportError as e:  # pragma: no cover
        raise ImportError("cvc5 is needed for jaxcore.geometry's SMT queries: pip install 'jaxcore[geometry]'") from e


class _Theory:
    """E's signature in one backend."""

    def __init__(self, S):
        self.S = S
        self.sort = {s: S.DeclareSort(s.capitalize()) for s in ("point", "line", "circle")}
        B, R = S.BoolSort(), S.RealSort()
        P, L, C = self.sort["point"], self.sort["line"], self.sort["circle"]
        self.fn = {
            ("on", "line"): S.Function("OnL", P, L, B), ("on", "circle"): S.Function("OnC", P, C, B),
            ("same_side", "line"): S.Function("SameSide", P, P, L, B),
            ("between", "point"): S.Function("Between", P, P, P, B),
            ("centre", "circle"): S.Function("Centre", P, C, B),
            ("inside", "circle"): S.Function("Inside", P, C, B),
            ("intersects", "line", "line"): S.Function("InterLL", L, L, B),
            ("intersects", "line", "circle"): S.Function("InterLC", L, C, B),
            ("intersects", "circle", "line"): None,
            ("intersects", "circle", "circle"): S.Function("InterCC", C, C, B),
            "seg": S.Function("Seg", P, P, R), "ang": S.Function("Ang", P, P, P, R),
            "area": S.Function("Area", P, P, P, R),
        }
        self.right = S.Const("RightAngle", R)
        self.consts: dict[tuple[str, str], object] = {}

    def obj(self, name, sort, bound):
        if name in bound:
            return bound[name]
        key = (name, sort)
        if key not in self.consts:
            self.consts[key] = self.S.Const(name, self.sort[sort])
        return self.consts[key]

    def literal(self, lit: Literal, sorts: Mapping[str, str], bound):
        S = self.S
        b = lit.body
        if isinstance(b, Atom):
            srt = [sorts[a] for a in b.args]
            args = [self.obj(a, s, bound) for a, s in zip(b.args, srt)]
            if b.pred == "eq":
                t = args[0] == args[1]
            elif b.pred == "on":
                t = self.fn[("on", srt[1])](*args)
            elif b.pred == "intersects":
                if srt == ["circle", "line"]:
                    t = self.fn[("intersects", "line", "circle")](args[1], args[0])
                else:
                    t = self.fn[("intersects", *srt)](*args)
            elif b.pred == "same_side":
                t = self.fn[("same_side", "line")](*args)
            elif b.pred == "between":
                t = self.fn[("between", "point")](*args)
            else:
                t = self.fn[(b.pred, "circle")](*args)
        else:
            def side(terms):
                out = [self.right if m.kind == "right" else
                       self.fn[m.kind](*[self.obj(a, "point", bound) for a in m.args]) for m in terms]
                if not out:
                    return S.RealVal(0)
                return out[0] if len(out) == 1 else S.Sum(*out)
            lhs, rhs = side(b.lhs), side(b.rhs)
            t = lhs == rhs if b.op == "=" else (lhs < rhs if b.op == "<" else lhs <= rhs)
        return t if lit.positive else S.Not(t)

    def formula(self, f, sorts, bound):
        S = self.S
        if isinstance(f, Literal):
            return self.literal(f, sorts, bound)
        op, *args = f
        xs = [self.formula(g, sorts, bound) for g in args]
        if op == "and":
            return S.And(*xs)
        if op == "or":
            return S.Or(*xs)
        if op == "not":
            return S.Not(xs[0])
        if op == "implies":
            return S.Implies(xs[0], xs[1])
        if op == "iff":
            return xs[0] == xs[1]
        raise ValueError(expected("formula", "and / or / not / implies / iff", op))

    def axiom(self, ax: Axiom):
        sorts = dict(zip(ax.vars, ax.sorts()))
        bound = {v: self.S.Const(f"_{v}", self.sort[s]) for v, s in sorts.items()}
        body = self.formula(ax.formula, sorts, bound)
        return self.S.ForAll(list(bound.values()), body) if bound else body


def ground_instances(ax: Axiom, objects: Mapping[str, str]):
    """Every instance of an axiom over the named objects (by sort): a generator of ground formulas."""
    pools = [[o for o, s in objects.items() if s == srt] for srt in ax.sorts()]
    for combo in itertools.product(*pools):
        yield rename_formula(ax.formula, dict(zip(ax.vars, combo)))


def _solve(name, sorts, context, claims, axioms, time_limit_s, mode):
    S = _backend(name)
    th = _Theory(S)
    s = S.Solver()
    if name == "z3":
        s.set("timeout", max(1, int(time_limit_s * 1000)))
    else:
        s.set("tlimit-per", max(1, int(time_limit_s * 1000)))
    for ax in axioms:
        if mode == "ground":
            for g in ground_instances(ax, sorts):
                s.add(th.formula(g, sorts, {}))
        else:
            s.add(th.axiom(ax))
    for lit in context:
        s.add(th.literal(lit, sorts, {}))
    s.add(S.Not(S.And(*[th.literal(c, sorts, {}) for c in claims])) if claims else S.BoolVal(True))
    t0 = time.perf_counter()
    ans = str(s.check())
    return ans, time.perf_counter() - t0


def entails(sorts: Mapping[str, str], context: Sequence[Literal | str], claims: Sequence[Literal | str], *,
            solvers: Sequence[str] = SOLVERS, time_limit_s: float = 10.0, mode: str = "quantified",
            all_solvers: bool = False, axiom_set: Sequence[Axiom] | None = None) -> QueryResult:
    """Whether E, the context literals and the objects' sorts entail the conjunction of ``claims``.

    Checks that ``axioms and context and not (claim_1 and ... and claim_k)`` is unsatisfiable with each solver in
    ``solvers`` in turn (a sequential portfolio: the first definite answer decides, unless ``all_solvers``).

    Args:
        sorts: object name -> ``"point"`` / ``"line"`` / ``"circle"`` for every object the literals name.
        context: the literals assumed.
        claims: the literals to prove (empty: the context alone is checked for inconsistency).
        solvers: ``"z3"`` and / or ``"cvc5"``, in the order tried.
        time_limit_s: per solver, seconds (> 0).
        mode: ``"quantified"`` (axioms as ``ForAll``) or ``"ground"`` (every instance over the objects).
        all_solvers: run every solver even after a definite answer (to time each).
        axiom_set: the axioms (default: all of :data:`jaxcore.geometry.axioms.AXIOMS`).

    Returns:
        :class:`QueryResult`.

    Raises:
        ValueError: unknown solver or mode, a non-positive time limit, an object without a sort.
        ImportError: a solver is not installed (``pip install 'jaxcore[geometry]'``).

    References:
        J. Avigad, E. Dean, J. Mumma. "A formal system for Euclid's Elements." 2009 (the diagrammatic
        consequences as a decidable fragment); L. Murphy et al. "Autoformalizing Euclidean Geometry." ICML 2024
        (SMT solvers discharge E's diagrammatic steps).

    Examples:
        >>> from jaxcore.geometry import entails
        >>> r = entails({"a": "point", "b": "point", "c": "point"}, ["between(a, b, c)"], ["between(c, b, a)"],
        ...             solvers=("z3",), time_limit_s=5.0)
        >>> r.verdict
        'proved'
    """
    check_scalar(time_limit_s, "time_limit_s", positive=True)
    check_choice(mode, "mode", ("quantified", "ground"))
    if isinstance(solvers, str) or not solvers:
        raise ValueError(expected("solvers", "a non-empty sequence of 'z3' / 'cvc5'", solvers))
    for s in solvers:
        check_choice(s, "solvers", SOLVERS)
    context = [parse_literal(c) for c in context]
    claims = [parse_literal(c) for c in claims]
    for lit in context + claims:
        for o in lit.objects():
            if o not in sorts:
                raise ValueError(expected("sorts", f"a sort for every object (missing {o!r})", dict(sorts)))
    ax = AXIOMS if axiom_set is None else tuple(axiom_set)
    answers = {s: "not run" for s in SOLVERS}
    times = {s: 0.0 for s in SOLVERS}
    verdict, by, spent = "unknown", "", 0.0
    for name in solvers:
        ans, sec = _solve(name, dict(sorts), context, claims, ax, time_limit_s, mode)
        answers[name], times[name] = ans, sec
        if verdict == "unknown":
            spent += sec
            if ans == "unsat":
                verdict, by = "proved", name
            elif ans == "sat":
                verdict, by = "not entailed", name
        if verdict != "unknown" and not all_solvers:
            break
    return QueryResult(verdict, by, spent, answers, times)
