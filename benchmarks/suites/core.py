"""Harness self-check: the machine's ceilings as benchmarks, and a simple reduction kernel.

These exercise every path of the harness (agreement check, compile time, cost
model, interleaved timing, scaling fit, plots) before any family is involved.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.registry import Baseline, Case, Scaling, SpeedBenchmark, register


def _matmul_setup(size, key):
    n = int(size["n"])
    a = jax.random.normal(key, (n, n), jnp.float32)
    b = jax.random.normal(jax.random.fold_in(key, 1), (n, n), jnp.float32)
    return Case(args=(a, b), work=2.0 * n**3, work_unit="FLOP", flops=2.0 * n**3)


register(SpeedBenchmark(
    name="core.matmul", family="core",
    kernel=jnp.matmul, setup=_matmul_setup,
    sizes=[{"n": 512}, {"n": 1024}], quick_sizes=[{"n": 256}],
    baselines=[Baseline("numpy", np.matmul, note="OpenBLAS through NumPy")],
    rtol=1e-3, atol=1e-2,
    scaling=Scaling("n", [128, 256, 512, 1024]),
    description="float32 matrix product (the FLOP/s ceiling), against NumPy",
))


def _copy_setup(size, key):
    n = int(size["mib"]) * 2**20 // 4
    x = jax.random.uniform(key, (n,), jnp.float32)
    return Case(args=(x,), work=8.0 * n, work_unit="B", bytes=8.0 * n)


register(SpeedBenchmark(
    name="core.copy", family="core",
    kernel=lambda x: x + 1.0, setup=_copy_setup,
    sizes=[{"mib": 64}], quick_sizes=[{"mib": 16}],
    baselines=[Baseline("numpy", lambda x: x + 1.0)],
    description="streaming x + 1 over float32 (the bytes/s ceiling), against NumPy",
))


def _lse_setup(size, key):
    n, d = int(size["n"]), int(size["d"])
    x = 3.0 * jax.random.normal(key, (n, d), jnp.float32)
    return Case(args=(x,), work=float(n * d), work_unit="elements")


def _scipy_lse(x):
    from scipy.special import logsumexp

    return logsumexp(x, axis=-1)


register(SpeedBenchmark(
    name="core.logsumexp", family="core",
    kernel=lambda x: jax.nn.logsumexp(x, axis=-1), setup=_lse_setup,
    sizes=[{"n": 4096, "d": 256}], quick_sizes=[{"n": 1024, "d": 128}],
    baselines=[Baseline("scipy", _scipy_lse, requires=("scipy",))],
    rtol=1e-5, atol=1e-5,
    scaling=Scaling("n", [1024, 4096, 16384, 65536]),
    description="row-wise log-sum-exp, against scipy.special.logsumexp",
))
