"""The proof checker: each step's preconditions and the final goal as SMT queries "context and not claim".

A proof is a sequence of constructions, citations of earlier propositions, assertions and proofs by
contradiction (:mod:`jaxcore.geometry.language`). The checker walks it with a context (objects with sorts and
literals, starting from the statement's hypotheses): a construction's preconditions, a cited proposition's
hypotheses, an assertion's claims and finally the statement's conclusion are each one query; postconditions,
conclusions and checked claims join the context. With ``screen_samples`` the numeric sampler looks first for a
diagram refuting the query (a refuted query is reported as ``"refuted"`` without calling a solver).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from jaxcore._util.checks import check_int, expected

from .language import RULES, Apply, Assert, Construct, Literal, Statement, Suppose
from .sampler import program_of, refute
from .smt import SOLVERS, entails


class StepResult(NamedTuple):
    """One query of a proof check.

    Attributes:
        index: the step's position (``len(proof)`` for the final goal; ``"i.j"`` inside a contradiction block).
        step: the step as text.
        claims: the literals queried, as text.
        verdict: ``"proved"``, ``"not entailed"``, ``"unknown"``, ``"refuted"`` (the sampler found a
            counterexample) or ``"trivial"`` (no claim to check).
        solver: the solver that decided (``"sampler"`` for a refutation).
        seconds: wall seconds of the query (solvers run until the verdict, plus the sampler's screen).
        answers: solver -> answer; times: solver -> seconds.
    """

    index: str
    step: str
    claims: tuple
    verdict: str
    solver: str
    seconds: float
    answers: dict
    times: dict


class ProofResult(NamedTuple):
    """A whole proof check.

    Attributes:
        name: the statement's name.
        steps: the :class:`StepResult` of every query, the goal last.
        num_checked: queries proved (or trivial).
        num_queries: queries.
        complete: every query proved and the goal among them.
        seconds: wall seconds in all.
    """

    name: str
    steps: tuple
    num_checked: int
    num_queries: int
    complete: bool
    seconds: float


def _query(ctx_sorts, ctx, claims, index, text, opts, screen):
    if not claims:
        return StepResult(index, text, (), "trivial", "", 0.0, {}, {})
    t0 = time.perf_counter()
    if screen is not None:
        key, program, library, n = screen
        known = {name for c in program for name in c.outputs}
        if all(o in known for lit in list(ctx) + list(claims) for o in lit.objects()):
            r = refute(key, program, ctx, claims, n, library=library)
            if r.refuted.any():
                return StepResult(index, text, tuple(str(c) for c in claims), "refuted", "sampler",
                                  time.perf_counter() - t0, {}, {})
    r = entails(ctx_sorts, ctx, claims, **opts)
    return StepResult(index, text, tuple(str(c) for c in claims), r.verdict, r.solver,
                      time.perf_counter() - t0 - sum(r.times.values()) + r.seconds, r.answers, r.times)


def _walk(steps, sorts, ctx, library, opts, screen, prefix, out):
    for i, st in enumerate(steps):
        idx = f"{prefix}{i}"
        if isinstance(st, Construct):
            rule = RULES[st.rule]
            if rule.recipe_only:
                raise ValueError(expected("proof", "constructions of E (not recipe-only rules)", st.rule))
            for n, s in zip(st.inputs, rule.inputs):
                if sorts.get(n) != s:
                    raise ValueError(expected("proof", f"{n!r} to be a {s} before {st}", sorts.get(n)))
            pre, post = rule.instantiate(st.inputs, st.outputs)
            out.append(_query(dict(sorts), list(ctx), pre, idx, str(st), opts, screen))
            sorts.update(zip(st.outputs, rule.outputs))
            ctx.extend(post)
        elif isinstance(st, Apply):
            if st.name not in library:
                raise ValueError(expected("library", f"the proposition {st.name!r}", sorted(library)))
            lemma: Statement = library[st.name]
            m = dict(st.mapping)
            used = {o for lit in lemma.hypotheses + lemma.conclusion for o in lit.objects()} | dict(lemma.exists).keys()
            missing = sorted(o for o in used if o not in m)
            if missing:
                raise ValueError(expected(f"{st}: mapping", f"a name for every object of {lemma.name}", missing))
            hyp = [h.rename(m) for h in lemma.hypotheses]
            out.append(_query(dict(sorts), list(ctx), hyp, idx, str(st), opts, screen))
            for o, s in lemma.exists:
                sorts[m[o]] = s
            ctx.extend(c.rename(m) for c in lemma.conclusion)
        elif isinstance(st, Assert):
            out.append(_query(dict(sorts), list(ctx), list(st.claims), idx, str(st), opts, screen))
            ctx.extend(st.claims)
        elif isinstance(st, Suppose):
            if len(st.assumption) != 1:
                raise ValueError(expected("Suppose.assumption", "one literal", len(st.assumption)))
            inner_sorts, inner_ctx = dict(sorts), list(ctx) + list(st.assumption)
            _walk(st.steps, inner_sorts, inner_ctx, library, opts, None, f"{idx}.", out)
            r = entails(inner_sorts, inner_ctx, [], **opts)
            out.append(StepResult(f"{idx}.end", str(st), ("False",), r.verdict, r.solver, r.seconds, r.answers,
                                  r.times))
            ctx.append(-st.assumption[0])
        else:
            raise TypeError(expected("proof", "Construct, Apply, Assert or Suppose steps", type(st).__name__,
                                     raw=True))


def check_proof(statement: Statement, library: Mapping[str, Statement] | None = None, *,
                solvers: Sequence[str] = SOLVERS, time_limit_s: float = 10.0, mode: str = "quantified",
                all_solvers: bool = False, screen_samples: int = 0, key=None) -> ProofResult:
    """Check a statement's proof step by step with SMT (and optionally the sampler as a pre-screen).

    Every construction's preconditions, every cited proposition's hypotheses, every assertion and the conclusion
    are checked as ``E and context and not claim`` unsatisfiable (:func:`~jaxcore.geometry.entails`); the
    conclusion's existential objects must be built by the proof under their own names.

    Args:
        statement: the proposition with its proof.
        library: earlier propositions the proof cites, by name.
        solvers, time_limit_s, mode, all_solvers: as :func:`~jaxcore.geometry.entails` (per query).
        screen_samples: if > 0, first sample this many diagrams (recipe and proof constructions) and report a
            query refuted by one of them without calling a solver.
        key: a ``jax.random.key`` for the screen (required when ``screen_samples > 0``; None otherwise).

    Returns:
        :class:`ProofResult`.

    Raises:
        ValueError: a step names an object of the wrong sort or not yet built, a recipe-only rule in a proof, a
            missing citation, or a key missing while ``screen_samples > 0``.

    References:
        J. Avigad, E. Dean, J. Mumma. "A formal system for Euclid's Elements." 2009; L. Murphy et al.
        "Autoformalizing Euclidean Geometry." ICML 2024 (section 3: checking E proofs with SMT).

    Examples:
        >>> from jaxcore.geometry import book_one, check_proof
        >>> props = book_one()
        >>> r = check_proof(props["I.1"], props, solvers=("z3",), time_limit_s=10.0)
        >>> r.complete, r.num_checked == r.num_queries
        (True, True)
    """
    library = dict(library or {})
    screen_samples = check_int(screen_samples, "screen_samples", minimum=0)
    screen = None
    if screen_samples:
        if key is None:
            raise ValueError(expected("key", "a jax.random.key when screen_samples > 0", None))
        screen = (key, program_of(statement, library), library, screen_samples)
    opts = {"solvers": tuple(solvers), "time_limit_s": time_limit_s, "mode": mode, "all_solvers": all_solvers}
    t0 = time.perf_counter()
    sorts = {n: s for n, s in statement.sorts().items() if n not in dict(statement.exists)}
    ctx: list[Literal] = list(statement.hypotheses)
    out: list[StepResult] = []
    _walk(statement.proof, sorts, ctx, library, opts, screen, "", out)
    for o, s in statement.exists:
        if sorts.get(o) != s:
            raise ValueError(expected(f"{statement.name}: proof", f"to construct the {s} {o!r}", sorts.get(o)))
    out.append(_query(dict(sorts), ctx, list(statement.conclusion), str(len(statement.proof)), "goal", opts,
                      screen))
    good = sum(r.verdict in ("proved", "trivial") for r in out)
    return ProofResult(statement.name, tuple(out), good, len(out), good == len(out), time.perf_counter() - t0)
