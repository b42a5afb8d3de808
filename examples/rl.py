"""FOOBAR on a combination lock: hybrid RL from observation-only offline data (Song, Bagnell & Singh, ICML 2024).

A rich-observation lock (H levels, 10 actions, noisy one-hot states rotated by a Hadamard matrix) is
solved from the *observations* of an expert's episodes plus online episodes, over 3 seeds in parallel,
beside online-only PSDP with the same budget. It prints both success rates and writes a figure of the
success per seed and FOOBAR's forward moment gap per level.

Run: ``python examples/rl.py [--horizon 10] [--samples 256] [--seed 0] [--small] [--out DIR]``.
The lock, the offline data and the seeds' training draw from keys ``seed``, ``seed + 1`` and ``seed + 2``.
"""

import argparse
import pathlib

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import jaxcore  # noqa: E402
from jaxcore.rl import collect_offline, foobar, make_lock, online_psdp, optimal_values  # noqa: E402


def main(horizon: int = 10, samples: int = 256, seeds: int = 3, out: str = "results/examples/rl",
         seed: int = 0) -> None:
    lock = make_lock(jax.random.key(seed), horizon=horizon, num_actions=10)
    print(f"lock: H = {horizon}, A = 10, d = {lock.obs_dim}; optimal value {float(optimal_values(lock).value)}")
    data = collect_offline(jax.random.key(seed + 1), lock, 4 * samples)  # observations only are used by FOOBAR
    keys = jax.random.split(jax.random.key(seed + 2), seeds)
    fb = foobar(keys, lock, data, num_samples=samples, num_eval_episodes=500)
    on = online_psdp(keys, lock, num_samples=samples, num_eval_episodes=500)
    print(f"online episodes: {int(fb.num_online_episodes[0])} (both methods)")
    print(f"FOOBAR       success {np.asarray(fb.success_rate).round(3)}  return {np.asarray(fb.mean_return).round(3)}")
    print(f"online PSDP  success {np.asarray(on.success_rate).round(3)}  return {np.asarray(on.mean_return).round(3)}")
    gap = np.asarray(fb.moment_gap[0, :, 1])
    print(f"forward moment gap per level (seed 0): {gap.round(3)}")

    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 3.2))
    x = np.arange(seeds)
    a.bar(x - 0.2, np.asarray(fb.success_rate), 0.4, label="FOOBAR")
    a.bar(x + 0.2, np.asarray(on.success_rate), 0.4, label="online PSDP")
    a.set_xticks(x, [f"seed {i}" for i in x])
    a.set_ylabel("success rate")
    a.set_ylim(0, 1.05)
    a.legend(fontsize=8)
    a.set_title(f"lock H = {horizon}, {samples} episodes per level", fontsize=9)
    b.plot(np.arange(1, len(gap) + 1), gap, "o-")
    b.set_xlabel("level h")
    b.set_ylabel("moment gap after matching")
    b.set_title("FOOBAR forward phase (seed 0)", fontsize=9)
    fig.tight_layout()
    fig.savefig(folder / "rl_foobar.png", dpi=110)
    print(f"figure: {folder / 'rl_foobar.png'}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--horizon", type=int, default=10)
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--small", action="store_true", help="a tiny run for CI (H = 4, 64 episodes, 2 seeds)")
    ap.add_argument("--out", default="results/examples/rl", help="folder for the figure")
    ap.add_argument("--seed", type=int, default=0, help="PRNG seed: keys seed, seed + 1, seed + 2")
    args = ap.parse_args()
    jaxcore.enable_compilation_cache()   # keep compiled programs on disk (see examples/README.md)
    if args.small:
        main(4, 64, 2, args.out, args.seed)
    else:
        main(args.horizon, args.samples, 3, args.out, args.seed)
