"""Continual learning on Split-Digits: a network that grows its own depth vs VCL, EWC and fine-tuning.

scikit-learn's 1797 handwritten 8x8 digits become five two-class tasks (0/1, 2/3, ..., 8/9) learned
one after another. The Bayesian residual MLP of Thapa & Li (ICML 2024) puts a beta-process prior on
its depth and Bernoulli-process masks on its weights, and carries each task's posterior over as the
next task's prior; it is compared with VCL (same network, all weights on), EWC and plain fine-tuning,
each trained for several seeds at once (``vmap``). The script prints each method's final average
accuracy and backward transfer (forgetting), the depth and share of weights the adaptive network
uses, and plots the average accuracy after each task with the active depth.

Run::

    python examples/bnp.py              # 3 seeds, the benchmark's budget; about a minute on 2 CPU cores
    python examples/bnp.py --small      # 1 seed, 20 steps per task (CI)
"""

import argparse
import os

import equinox as eqx
import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import jaxcore  # noqa: E402
from jaxcore import bnp  # noqa: E402
from jaxcore.datasets import split_digits  # noqa: E402


def main(small: bool, out: str, seed: int) -> None:
    num_seeds, width, truncation = (1, 16, 2) if small else (3, 32, 4)
    # The settings of the bnp.continual benchmark (the ContinualConfig defaults are 400 steps, lr 1e-3, S = 4).
    config = bnp.ContinualConfig(num_steps=20 if small else 150, batch_size=64, num_samples=1 if small else 2,
                                 learning_rate=5e-3, ewc_lambda=1000.0)
    tasks = split_digits()
    # run_continual initialises every seed's network from its key: it needs only the architecture.
    model = eqx.filter_eval_shape(
        lambda k: bnp.AdaptiveMLP(tasks.x_train.shape[-1], width, truncation, tasks.num_tasks, tasks.num_classes,
                                  key=k), jax.random.key(0))
    keys = jax.random.split(jax.random.key(seed), num_seeds)
    print(f"Split-Digits: {tasks.num_tasks} tasks, {int(tasks.n_train.sum())} training images, "
          f"{num_seeds} seed(s), {config.num_steps} steps per task")

    results = {}
    for method in ("adaptive", "vcl", "ewc", "finetune"):
        res = bnp.run_continual(keys, method, model, tasks, config)
        results[method] = res
        avg = np.asarray(bnp.average_accuracy(res.accuracy))              # [seeds, T]
        bwt = np.asarray(bnp.backward_transfer(res.accuracy))             # [seeds]
        line = (f"  {method:9s} average accuracy {avg[:, -1].mean():.3f} +- {avg[:, -1].std():.3f}   "
                f"BWT {bwt.mean():+.3f}")
        if method == "adaptive":
            line += (f"   active depth {np.asarray(res.active_depth)[:, -1].mean():.1f} of {truncation}, "
                     f"weights used {np.asarray(res.union_fraction)[:, -1].mean():.0%}")
        print(line)

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    steps = np.arange(1, tasks.num_tasks + 1)
    for method, res in results.items():
        avg = np.asarray(bnp.average_accuracy(res.accuracy))
        ax1.errorbar(steps, avg.mean(0), yerr=avg.std(0), marker="o", capsize=3, label=method)
    ax1.set(xlabel="tasks learned", ylabel="average test accuracy", title="Split-Digits", xticks=steps)
    ax1.legend()
    adaptive = results["adaptive"]
    ax2.plot(steps, np.asarray(adaptive.active_depth).mean(0), "o-", label="active depth")
    ax2.set(xlabel="tasks learned", ylabel=f"active depth (of {truncation} layers)", ylim=(0, truncation + 0.5),
            xticks=steps, title="What the adaptive network uses")
    share = ax2.twinx()
    share.plot(steps, 100 * np.asarray(adaptive.active_fraction).mean(0), "s--", color="C1", label="this task")
    share.plot(steps, 100 * np.asarray(adaptive.union_fraction).mean(0), "^:", color="C2", label="all tasks so far")
    share.set(ylabel="hidden weights used (%)", ylim=(0, 105))
    ax2.legend(loc="lower left")
    share.legend(loc="lower right")
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "bnp_split_digits.png")
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="1 seed, 20 steps per task (CI)")
    parser.add_argument("--out", default="results/examples/bnp", help="folder for the figure")
    parser.add_argument("--seed", type=int, default=0, help="PRNG seed (each run seed is split from it)")
    args = parser.parse_args()
    jaxcore.enable_compilation_cache()   # keep compiled programs on disk (see examples/README.md)
    main(args.small, args.out, args.seed)
