"""What does a trained forest give away, and can a tree leave everyone a way out? COMPAS, both ways.

Part 1, DRAFT (Ferry et al., ICML 2024): a random forest is trained without bagging on a random
sample of COMPAS defendants (14 binary features); from the forest alone (its splits and per-leaf
class counts) CP-SAT rebuilds the training rows. Printed: the reconstruction error per number of
trees beside random and majority-row guesses.

Part 2, RACT (Kanamori et al., ICML 2024): a depth-3 tree on COMPAS's numeric features, grown with
alpha x (defendants left without an affordable action into a "no recidivism" leaf) added to its
split objective; printed and plotted: accuracy and recourse ratio (MPS cost, budget 0.1) vs alpha,
beside scikit-learn's CART; the cheapest action of one defendant.

Run::

    python examples/trees.py            # 100 rows, forests of 1 / 5 / 10 trees; about a minute
    python examples/trees.py --small    # 30 rows, 1 / 3 trees, RACT at two alphas (CI)
"""

import argparse
import os

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from sklearn.ensemble import RandomForestClassifier  # noqa: E402
from sklearn.tree import DecisionTreeClassifier  # noqa: E402

import jaxcore  # noqa: E402
from jaxcore import trees  # noqa: E402
from jaxcore.datasets import load_compas  # noqa: E402


def draft_part(small: bool, seed: int):
    d = load_compas("binary")
    n, counts, limit = (30, [1, 3], 10.0) if small else (100, [1, 5, 10], 60.0)
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(d["y"]), n, replace=False)
    x, y = d["x"][idx].astype(np.int8), d["y"][idx]
    rows = []
    for t in counts:
        m = RandomForestClassifier(t, bootstrap=False, random_state=seed).fit(x, y)
        forest = trees.Forest.from_sklearn(m)
        r = trees.reconstruct(forest, time_limit_s=limit, one_hot_groups=d["one_hot_groups"])
        err = trees.reconstruction_error(x, r.x) if r.found else float("nan")
        ok = trees.is_consistent(forest, r.x, r.y) if r.found else False
        rows.append((t, err, r.wall_s))
        print(f"DRAFT  {t:2d} trees: {r.status:8s} error {err:.4f}  consistent {ok}  {r.wall_s:.2f} s")
    rest = np.setdiff1d(np.arange(len(d["y"])), idx)
    guess = {"random rows": trees.reconstruction_error(x, rng.integers(0, 2, x.shape)),
             "majority rows": trees.reconstruction_error(x, np.tile(d["x"][rest].mean(0) >= 0.5, (n, 1)))}
    for k, v in guess.items():
        print(f"DRAFT  baseline {k}: error {v:.4f}")
    return rows, guess


def ract_part(small: bool, seed: int):
    d = load_compas("numeric")
    x, y = d["x"], 1 - d["y"]  # desired class 1: no recidivism within two years
    perm = np.random.default_rng(seed).permutation(len(y))
    tr, te = perm[: int(0.75 * len(y))], perm[int(0.75 * len(y)):]
    cost = trees.recourse_cost(x[tr], "mps")
    cons = trees.action_constraints(x.shape[1], fixed=d["fixed"], increase_only=d["increase_only"])
    alphas = [0.0, 0.1] if small else [0.0, 0.01, 0.03, 0.1]

    def score(forest):
        p = np.asarray(trees.predict_proba(forest, x[te])).argmax(1)
        neg = x[te][p == 0]
        r = trees.cheapest_actions(neg, forest, cons, cost, budget=0.1)
        return float((p == y[te]).mean()), float(np.asarray(r.valid).mean()), neg, r

    cart = trees.Forest.from_sklearn(DecisionTreeClassifier(max_depth=3, random_state=seed).fit(x[tr], y[tr]))
    acc, rec, _, _ = score(cart)
    print(f"RACT   CART (scikit-learn): accuracy {acc:.3f}  recourse {rec:.3f}")
    rows = []
    for a in alphas:
        fit = trees.fit_recourse_tree(x[tr], y[tr], cost, alpha=a, budget=0.1, constraints=cons, max_depth=3)
        acc, rec, neg, r = score(fit.forest)
        rows.append((a, acc, rec))
        print(f"RACT   alpha {a:<5g}: accuracy {acc:.3f}  recourse {rec:.3f}")
    v = np.flatnonzero(np.asarray(r.valid))
    if v.size:
        i = v[0]
        moves = {d["feature_names"][j]: float(np.asarray(r.action)[i, j]) for j in np.flatnonzero(np.asarray(r.action)[i])}
        print(f"RACT   one defendant's cheapest action (MPS {float(r.cost[i]):.3f}): {moves}")
    return rows, (acc, rec)


def main(small: bool = False, out: str = "results/examples/trees", seed: int = 0) -> None:
    draft_rows, guess = draft_part(small, seed)
    ract_rows, _ = ract_part(small, seed)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.4))
    a1.plot([t for t, _, _ in draft_rows], [e for _, e, _ in draft_rows], "o-", label="DRAFT (no bagging)")
    for k, v in guess.items():
        a1.axhline(v, ls="--", lw=1, color="gray")
        a1.text(draft_rows[0][0], v, k, fontsize=7, va="bottom")
    a1.set(xlabel="trees", ylabel="reconstruction error", title="DRAFT on COMPAS")
    a1.legend(fontsize=7)
    a2.plot([a for a, _, _ in ract_rows], [acc for _, acc, _ in ract_rows], "o-", label="accuracy")
    a2.plot([a for a, _, _ in ract_rows], [rec for _, _, rec in ract_rows], "s-", label="recourse ratio")
    a2.set(xlabel="alpha", title="RACT tree on COMPAS (depth 3)")
    a2.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "trees_compas.png")
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="30 rows, 1 / 3 trees, two alphas (CI)")
    parser.add_argument("--out", default="results/examples/trees", help="folder for the figure")
    parser.add_argument("--seed", type=int, default=0, help="seed of the row sample, the forests and the split")
    args = parser.parse_args()
    jaxcore.enable_compilation_cache()   # later runs reload the compiled programs from disk
    main(args.small, args.out, args.seed)
