"""Euclid's Book I in System E: check the proofs with z3 / cvc5, refute wrong steps with random diagrams.

Part 1: the proofs of propositions I.1-I.5 (formalised in jaxcore.geometry) are replayed step by step; each
construction's preconditions, each citation, assertion and goal is an SMT query. Printed: steps checked and the
solver time per proposition.
Part 2: each proposition's altered conclusion (a false claim) is refuted by the JAX diagram sampler, timed
beside z3's answer.
Part 3: equivalence of I.5 with its three perturbations.

Run::

    python examples/geometry.py            # I.1-I.5, 4096 diagrams
    python examples/geometry.py --small    # I.1 and I.5, 256 diagrams (CI)
"""

import argparse
import os
import time

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from jaxcore.geometry import (book_one, check_equivalence, check_proof, compile_program, entails,  # noqa: E402
                              perturbations, refute, sample_diagrams)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--out", default=".", help="folder for geometry_i1.png")
    args = ap.parse_args()
    names = ["I.1", "I.5"] if args.small else ["I.1", "I.2", "I.3", "I.4", "I.5"]
    n = 256 if args.small else 4096
    props = book_one()
    print("Part 1: proofs")
    for name in names:
        r = check_proof(props[name], props, solvers=("z3", "cvc5"), time_limit_s=10.0)
        print(f"  {name}: {r.num_checked}/{r.num_queries} steps checked in {r.seconds:.1f} s")
    print("Part 2: false claims, sampler vs z3")
    key = jax.random.key(0)
    for p in perturbations(props):
        if p.kind != "conclusion altered" or p.original not in names:
            continue
        st = props[p.original]
        claims = [c for c in p.statement.conclusion if c not in st.conclusion]
        ctx = list(st.hypotheses) + list(st.conclusion)
        program = compile_program(st, props)
        key2 = jax.random.fold_in(key, 1)
        refute(key, program, ctx, claims, n)  # compile once
        t0 = time.perf_counter()
        r = refute(key2, program, ctx, claims, n)
        ts = time.perf_counter() - t0
        q = entails(st.sorts(), ctx, claims, solvers=("z3",), time_limit_s=5.0)
        print(f"  {p.original}: {claims[0]}: sampler refutes: {bool(r.refuted.any())} "
              f"({int(r.num_counterexamples.max())}/{n} diagrams, {ts * 1e3:.0f} ms); z3: {q.answers['z3']} "
              f"in {q.times['z3']:.2f} s")
    print("Part 3: equivalence of I.5 with its perturbations")
    for p in perturbations(props):
        if p.original == "I.5":
            r = check_equivalence(key, props["I.5"], p.statement, library=props, num_samples=n)
            print(f"  {p.kind}: {r.verdict} (by {r.decided_by}; truth: "
                  f"{'equivalent' if p.equivalent else 'not equivalent'})")
    # four sampled diagrams of Proposition I.1 (the equilateral triangle on ab from two circles)
    d = sample_diagrams(key, props["I.1"], 4)
    idx = d.index()
    fig, axes = plt.subplots(1, 4, figsize=(10, 2.8))
    for k, ax in enumerate(axes):
        pts = {n: np.asarray(d.points[k, idx[n][1]]) for n in "abc"}
        for cname in "CD":
            c = np.asarray(d.circles[k, idx[cname][1]])
            ax.add_patch(plt.Circle(c[:2], c[2], fill=False, lw=0.8, color="gray"))
        tri = np.array([pts["a"], pts["b"], pts["c"], pts["a"]])
        ax.plot(tri[:, 0], tri[:, 1], "-o", color="C0")
        for n, v in pts.items():
            ax.annotate(n, v, textcoords="offset points", xytext=(3, 3))
        ax.set_aspect("equal")
        ax.axis("off")
    fig.suptitle("Proposition I.1 in four sampled diagrams")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "geometry_i1.png")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
