"""jaxcore.geometry: Euclid's Elements in the formal system E, checked by SMT solvers and a JAX diagram sampler.

The language of E (:mod:`~jaxcore.geometry.language`: sorts, literals, construction rules, statements, proofs),
its axioms in groups (:func:`axioms`), SMT queries "context and not claim" on z3 and cvc5 (:func:`entails`), the
proof checker (:func:`check_proof`), the numeric diagram sampler (:func:`sample_diagrams`,
:func:`evaluate_literals`, :func:`refute`: thousands of random Euclidean diagrams under ``jit`` + ``vmap``), the
statement-equivalence check (:func:`check_equivalence`) and Book I, propositions 1-15 with proofs
(:func:`book_one`) and perturbed statements (:func:`perturbations`).

The main workflow: check Proposition I.1's proof, and refute a false step with the sampler.

>>> import jax
>>> from jaxcore.geometry import book_one, check_proof, refute
>>> props = book_one()
>>> r = check_proof(props["I.1"], props, solvers=("z3",), time_limit_s=10.0)
>>> r.complete, [s.verdict for s in r.steps][-1]
(True, 'proved')
>>> bad = refute(jax.random.key(0), props["I.1"], props["I.1"].hypotheses, ["seg(a, c) = seg(a, b) + seg(b, c)"],
...              num_samples=1000)
>>> bool(bad.refuted[0])
True

References:
    L. Murphy, K. Yang, J. Sun, Z. Li, A. Anandkumar, X. Si. "Autoformalizing Euclidean Geometry." ICML 2024.
    J. Avigad, E. Dean, J. Mumma. "A formal system for Euclid's Elements." Review of Symbolic Logic, 2009.
"""

from .axioms import AXIOMS, GROUPS, Axiom, axioms
from .checker import ProofResult, StepResult, check_proof
from .elements import Perturbation, book_one, perturbations
from .equivalence import EquivalenceResult, check_equivalence
from .language import (RULES, Apply, Assert, Atom, Construct, Literal, Magnitude, Metric, Rule, Statement, Suppose,
                       construct, have, lits, parse_literal, statement)
from .sampler import (Diagrams, LiteralCode, LiteralValues, Program, RefuteResult, compile_program, encode_literals,
                      evaluate_literals, program_of, refute, sample_diagrams)
from .smt import SOLVERS, QueryResult, entails, ground_instances

__all__ = ["AXIOMS", "GROUPS", "Axiom", "axioms", "ground_instances", "ProofResult", "StepResult", "check_proof",
           "Perturbation", "book_one", "perturbations", "EquivalenceResult", "check_equivalence", "RULES", "Apply",
           "Assert", "Atom", "Construct", "Literal", "Magnitude", "Metric", "Rule", "Statement", "Suppose",
           "construct", "have", "lits", "parse_literal", "statement", "Diagrams", "LiteralCode", "LiteralValues", "Program",
           "RefuteResult", "compile_program", "encode_literals", "evaluate_literals", "program_of", "refute", "sample_diagrams", "SOLVERS", "QueryResult", "entails"]
