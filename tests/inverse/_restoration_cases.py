"""The frozen restoration cases of tests/inverse/test_solvers.py (shared with the script that wrote their outputs).

Every public restoration function, and :func:`jaxcore.inverse.restore_batch`, on two 12x12 problems (a blurred
and an inpainted crop of skimage's "camera") with a small random DnCNN, its outputs tracked. The reference
outputs in ``data/restoration_reference.npz`` were written by the string-dispatched implementation that the
solver classes replaced (commit 3ef7524, ``python tests/inverse/_restoration_cases.py``); the redesign must give
the same numbers (tests/inverse/test_solvers.py).
"""

from __future__ import annotations

import pathlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np

REFERENCE = pathlib.Path(__file__).with_name("data") / "restoration_reference.npz"
N = 12


def problems():
    """``{name: (x, operator, y, sigma_y)}`` and the denoiser, all built from fixed seeds."""
    from jaxcore.datasets import load_image
    from jaxcore.inverse import Blur, DnCNN, Inpainting, degrade, gaussian_kernel, random_mask

    x = jnp.asarray(load_image("camera")[200:200 + N, 200:200 + N])
    sigma_y = 10 / 255
    ops = {"blur": Blur(gaussian_kernel(5, 1.2), (N, N)),
           "inpaint": Inpainting(random_mask(jax.random.key(3), (N, N), 0.5))}
    out = {name: (x, op, degrade(jax.random.key(i), x, op, sigma_y), sigma_y) for i, (name, op) in enumerate(ops.items())}
    net = DnCNN(key=jax.random.key(7), channels=1, features=8, depth=3)
    return out, net


def cases():
    """``{case name: thunk returning a RestorationResult}``."""
    from jaxcore.inverse import (annealed_schedule, annealed_snore, constant_schedule, pnp_hqs, pnp_pgd, red,
                                 red_prox, restore_batch, snore, snore_prox)

    probs, net = problems()
    sched = constant_schedule(6, sigma=20 / 255, alpha=0.7, step_size=0.5 * (10 / 255) ** 2)
    pnp = constant_schedule(4, sigma=20 / 255, alpha=1.0, step_size=(10 / 255) ** 2)
    ann = annealed_schedule(sigma_start=40 / 255, sigma_end=20 / 255, alpha_start=0.7, alpha_end=0.7,
                            step_size=0.5 * (10 / 255) ** 2, num_stages=3, steps_per_stage=2, final_steps=2)
    k = jax.random.key(11)
    out = {}
    for name, (x, op, y, sy) in probs.items():
        kw = dict(x_true=x, track=True)
        out[f"snore/{name}"] = lambda op=op, y=y, sy=sy, kw=kw: snore(k, y, op, net, sched, sy, num_samples=2, **kw)
        out[f"snore_prox/{name}"] = lambda op=op, y=y, sy=sy, kw=kw: snore_prox(k, y, op, net, sched, sy, **kw)
        out[f"snore_antithetic/{name}"] = lambda op=op, y=y, sy=sy: snore(k, y, op, net, sched, sy, num_samples=3,
                                                                          antithetic=True, clip=False)
        out[f"annealed_snore/{name}"] = lambda op=op, y=y, sy=sy, kw=kw: annealed_snore(k, y, op, net, ann, sy, **kw)
        out[f"red/{name}"] = lambda op=op, y=y, sy=sy, kw=kw: red(None, y, op, net, sched, sy, **kw)
        out[f"red_prox/{name}"] = lambda op=op, y=y, sy=sy, kw=kw: red_prox(None, y, op, net, sched, sy, **kw)
        out[f"pnp_pgd/{name}"] = lambda op=op, y=y, sy=sy, kw=kw: pnp_pgd(None, y, op, net, pnp, sy, **kw)
        out[f"pnp_hqs/{name}"] = lambda op=op, y=y, sy=sy, kw=kw: pnp_hqs(None, y, op, net, pnp, sy, **kw)
    x, op, y, sy = probs["blur"]
    out["snore/blur/x0"] = lambda: snore(k, y, op, net, sched, sy, x0=jnp.clip(y, 0, 1) * 0.9)
    out["red/blur/float16"] = lambda: red(None, y.astype(jnp.float16), op, net, sched, sy)
    keys = jax.random.split(jax.random.key(12), 2)
    ys = jnp.stack([y, y[::-1]])
    xs = jnp.stack([x, x[::-1]])
    out["batch/snore"] = lambda: restore_batch(keys, ys, op, net, sched, sy, method="snore", num_samples=2,
                                               x_true=xs, track=True)
    out["batch/snore/chunked"] = lambda: restore_batch(keys, ys, op, net, sched, sy, method="snore", num_samples=2,
                                                       x_true=xs, track=True, chunk_size=3)
    out["batch/red_prox"] = lambda: restore_batch(keys, ys, op, net, sched, sy, method="red_prox")
    out["batch/pnp_hqs"] = lambda: restore_batch(keys, ys, op, net, pnp, sy, method="pnp_hqs")
    return out


#: The cases of the default test run (SNORE, RED-Prox and PnP-HQS on one operator each, and the chunked batch
#: path; four compilations, inside the family's test budget); the slow test runs all 22.
QUICK = ("snore/blur", "red_prox/inpaint", "pnp_hqs/inpaint", "batch/snore/chunked")


def run_all(only=None) -> dict[str, np.ndarray]:
    """Every case's (or the cases in ``only``) result fields, flattened as ``{"<case>/<field>": array}``."""
    arrays = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for name, thunk in cases().items():
            if only is not None and name not in only:
                continue
            res = thunk()
            for field, value in res._asdict().items():
                if value is not None:
                    arrays[f"{name}/{field}"] = np.asarray(value)
    return arrays


if __name__ == "__main__":
    arrays = run_all()
    REFERENCE.parent.mkdir(exist_ok=True)
    np.savez_compressed(REFERENCE, **arrays)
    print(f"{len(arrays)} arrays -> {REFERENCE}")
