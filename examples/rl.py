"""FOOBAR on a combination lock: hybrid RL from observation-only offline data (Song, Bagnell & Singh, ICML 2024).

A rich-observation lock (H levels, 10 actions, noisy one-hot states rotated by a Hadamard matrix) is
solved from the *observations* of an expert's episodes plus online episodes, over 3 seeds in parallel,
beside online-only PSDP with the same budget. Run: ``python examples/rl.py [--horizon 10]``.
"""

import argparse

import jax
import numpy as np

from jaxcore.rl import collect_offline, foobar, make_lock, online_psdp, optimal_values


def main(horizon: int = 10, samples: int = 256, seeds: int = 3) -> None:
    lock = make_lock(jax.random.key(0), horizon=horizon, num_actions=10)
    print(f"lock: H = {horizon}, A = 10, d = {lock.obs_dim}; optimal value {float(optimal_values(lock).value)}")
    data = collect_offline(jax.random.key(1), lock, 4 * samples)  # observations only are used by FOOBAR
    keys = jax.random.split(jax.random.key(2), seeds)
    fb = foobar(keys, lock, data, num_samples=samples, num_eval_episodes=500)
    on = online_psdp(keys, lock, num_samples=samples, num_eval_episodes=500)
    print(f"online episodes: {int(fb.num_online_episodes[0])} (both methods)")
    print(f"FOOBAR       success {np.asarray(fb.success_rate).round(3)}  return {np.asarray(fb.mean_return).round(3)}")
    print(f"online PSDP  success {np.asarray(on.success_rate).round(3)}  return {np.asarray(on.mean_return).round(3)}")
    print(f"forward moment gap per level (seed 0): {np.asarray(fb.moment_gap[0, :, 1]).round(3)}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--horizon", type=int, default=10)
    ap.add_argument("--samples", type=int, default=256)
    args = ap.parse_args()
    main(args.horizon, args.samples)
