"""Equivalence of two formal statements (in the spirit of LeanEuclid's E3 check): both directions by SMT, the
diagram sampler first as a fast refuter.

Two statements over the same object names are equivalent here when their hypotheses entail each other and,
under the hypotheses, their conclusions entail each other (existential objects shared by name):
``H1 |- H2``, ``H2 |- H1``, ``H1, C1 |- C2``, ``H2, C2 |- C1`` in E. (All true theorems are equivalent as
sentences, so the comparison is of the parts, as in the paper.) The sampler realises each statement's recipe
(and the proof's constructions for existential objects) and looks for a diagram where one side's literals hold
and a literal of the other fails: such a diagram decides "not equivalent" without a solver call.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import jax

from jaxcore._util.checks import check_int, expected
from jaxcore._util.keys import check_key

from .language import Statement
from .sampler import program_of, refute
from .smt import SOLVERS, entails


class EquivalenceResult(NamedTuple):
    """The verdict of an equivalence check.

    Attributes:
        verdict: ``"equivalent"``, ``"not equivalent"`` or ``"unknown"``.
        decided_by: ``"sampler"`` (a counterexample diagram), ``"smt"`` or ``""``.
        directions: ``((name, verdict, seconds), ...)`` for the four directions checked (``"refuted"`` by the
            sampler, else the SMT verdict; ``"skipped"`` after a decision).
        sampler_seconds: wall seconds in the sampler.
        smt_seconds: wall seconds in the solvers.
    """

    verdict: str
    decided_by: str
    directions: tuple
    sampler_seconds: float
    smt_seconds: float


def _sorts(s1: Statement, s2: Statement):
    a, b = s1.sorts(), s2.sorts()
    for k in a.keys() & b.keys():
        if a[k] != b[k]:
            raise ValueError(expected("statements", f"the same sort for {k!r} in both", (a[k], b[k])))
    return {**a, **b}


def check_equivalence(key, s1: Statement, s2: Statement, *, library: Mapping[str, Statement] | None = None,
                      num_samples: int = 2048, solvers: Sequence[str] = SOLVERS, time_limit_s: float = 5.0,
                      use_sampler: bool = True, use_smt: bool = True) -> EquivalenceResult:
    """Whether two statements are equivalent (hypotheses and conclusions mutually entailed in E).

    Args:
        key: a ``jax.random.key`` for the sampler.
        s1, s2: the statements (objects matched by name; each with a recipe, and a proof whose constructions
            realise its existential objects).
        library: propositions cited by the proofs (for the sampler's realisation).
        num_samples: diagrams per statement.
        solvers, time_limit_s: the SMT portfolio per direction.
        use_sampler: look for a counterexample diagram first.
        use_smt: then decide by SMT (else the verdict is "unknown" unless the sampler refutes).

    Returns:
        :class:`EquivalenceResult`.

    Raises:
        TypeError: ``key`` is not a PRNG key.
        ValueError: an object with different sorts in the two statements; ``num_samples`` < 1.

    References:
        L. Murphy et al. "Autoformalizing Euclidean Geometry." ICML 2024, section 4 (E3, the equivalence
        checker of formalised statements).

    Examples:
        >>> import jax
        >>> from jaxcore.geometry import book_one, check_equivalence, perturbations
        >>> ps = [p for p in perturbations() if p.original == "I.5"]
        >>> props = book_one()
        >>> [check_equivalence(jax.random.key(0), props["I.5"], p.statement, library=props, solvers=("z3",)).verdict
        ...  for p in ps]
        ['equivalent', 'not equivalent', 'not equivalent']
    """
    check_key(key)
    num_samples = check_int(num_samples, "num_samples", minimum=1)
    sorts = _sorts(s1, s2)
    h1, c1, h2, c2 = list(s1.hypotheses), list(s1.conclusion), list(s2.hypotheses), list(s2.conclusion)
    directions = [("H1 |- H2", s1, h1, h2), ("H2 |- H1", s2, h2, h1), ("H1, C1 |- C2", s1, h1 + c1, c2),
                  ("H2, C2 |- C1", s2, h2 + c2, c1)]
    out, t_samp, t_smt = [], 0.0, 0.0
    k1, k2 = jax.random.split(key)
    if use_sampler:
        t0 = time.perf_counter()
        for i, (name, st, ctx, claims) in enumerate(directions):
            try:
                prog = program_of(st, dict(library or {}))
                r = refute(k1 if st is s1 else k2, prog, ctx, claims, num_samples, library=library)
            except ValueError:  # an object the program cannot realise (a statement without a proof)
                continue
            if r.refuted.any():
                t_samp = time.perf_counter() - t0
                rest = tuple((n, "skipped", 0.0) for n, *_ in directions if n != name)
                return EquivalenceResult("not equivalent", "sampler", ((name, "refuted", t_samp),) + rest, t_samp, 0.0)
        t_samp = time.perf_counter() - t0
    if not use_smt:
        return EquivalenceResult("unknown", "", tuple((n, "skipped", 0.0) for n, *_ in directions), t_samp, 0.0)
    verdict = "equivalent"
    for name, _, ctx, claims in directions:
        if verdict == "not equivalent":
            out.append((name, "skipped", 0.0))
            continue
        if not claims:
            out.append((name, "trivial", 0.0))
            continue
        r = entails(sorts, ctx, claims, solvers=solvers, time_limit_s=time_limit_s)
        t_smt += r.seconds
        out.append((name, r.verdict, r.seconds))
        if r.verdict == "not entailed":
            verdict = "not equivalent"
        elif r.verdict == "unknown" and verdict == "equivalent":
            verdict = "unknown"
    return EquivalenceResult(verdict, "smt" if verdict != "unknown" else "", tuple(out), t_samp, t_smt)
