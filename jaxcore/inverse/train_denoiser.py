"""Train the shipped noise-conditioned DnCNN on scikit-image's natural images.

Run ``python -m jaxcore.inverse.train_denoiser`` (about 10 minutes on 2 CPU
cores with the defaults) to rebuild ``jaxcore/inverse/weights/dncnn.eqx`` and
its ``dncnn.json`` (recipe, seed, held-out PSNR table). ``--gradient-step``
fine-tunes the gradient-step variant from the plain network's weights.

Recipe: random ``patch x patch`` crops of the training images with random
flips and 90-degree rotations (grayscale images replicated to RGB), noise
level ``sigma ~ U[0, sigma_max]`` per crop, loss ``mean ||D(x + sigma z, sigma) - x||^2``,
Adam with cosine-decayed learning rate. The images in :data:`TEST_IMAGES` are
never seen in training and give the PSNR table.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxcore.datasets.images import load_image
from jaxcore.inverse.denoisers import DnCNN, GradientStepDenoiser, TVDenoiser, load_pretrained
from jaxcore.inverse.metrics import psnr

#: Natural images the denoiser is trained on (the rest of skimage's bundle is
#: held out or synthetic: 'horse' is a binary silhouette, 'page' scanned text).
TRAIN_IMAGES = ("astronaut", "rocket", "motorcycle_left", "retina", "hubble_deep_field", "moon", "grass", "gravel",
                "brick", "coins")
#: Held-out images: never used for training; the PSNR table and the
#: restoration benchmark use them.
TEST_IMAGES = ("camera", "chelsea", "coffee")
#: Noise levels of the PSNR table, in /255 units.
TABLE_SIGMAS = (5, 10, 15, 25)
#: Seed of the PSNR table's noise (numpy ``default_rng``), fixed whatever the training seed.
TABLE_SEED = 0

WEIGHTS_DIR = pathlib.Path(__file__).parent / "weights"


def _rgb(img: np.ndarray) -> np.ndarray:
    return np.repeat(img, 3, axis=-1) if img.shape[-1] == 1 else img


def test_crops(size: int = 256) -> dict[str, np.ndarray]:
    """Central ``size x size`` crops of the held-out images (native channels)."""
    out = {}
    for name in TEST_IMAGES:
        img = load_image(name)
        h, w = img.shape[:2]
        t, l = (h - size) // 2, (w - size) // 2
        out[name] = img[t : t + size, l : l + size]
    return out


def psnr_table(denoiser, *, seed: int = 0, size: int = 256, tv: bool = True) -> dict:
    """Mean PSNR over the held-out crops: noisy input, TV and ``denoiser`` at :data:`TABLE_SIGMAS`.

    ``tv=False`` skips the TV column (left empty); the noise draws, hence the other columns, are unchanged.
    """
    tv_den = TVDenoiser() if tv else None
    crops = test_crops(size)
    table: dict = {"sigma_255": list(TABLE_SIGMAS), "images": list(crops), "noisy": [], "tv": [], "network": []}
    rng = np.random.default_rng(seed)
    den = eqx.filter_jit(lambda d, x, s: d(x, s))
    for s in TABLE_SIGMAS:
        sig = s / 255.0
        sig_arr = jnp.float32(sig)  # an array, not a Python float: filter_jit would compile once per sigma
        row = {"noisy": [], "tv": [], "network": []}
        for img in crops.values():
            noisy = (img + sig * rng.standard_normal(img.shape)).astype(np.float32)
            row["noisy"].append(float(psnr(noisy, img)))
            if tv_den is not None:
                row["tv"].append(float(psnr(den(tv_den, noisy, sig_arr), img)))
            row["network"].append(float(psnr(den(denoiser, noisy, sig_arr), img)))
        for k in row:
            if row[k]:
                table[k].append(float(np.mean(row[k])))
    return table


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=2500)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--patch", type=int, default=40)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--sigma-max", type=float, default=60.0, help="in /255 units")
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sampling", choices=("image", "area"), default="image",
                   help="draw each crop's image uniformly ('image') or in proportion to its area ('area'; the "
                        "large, mostly dark 'retina' and 'hubble_deep_field' then give ~58%% of the crops)")
    p.add_argument("--gradient-step", action="store_true", help="fine-tune D = Id - grad g from the plain weights")
    p.add_argument("--out", type=pathlib.Path, default=WEIGHTS_DIR)
    p.add_argument("--resume", action="store_true",
                   help="start from the shipped weights (a further training stage; the recipe keeps the earlier ones)")
    p.add_argument("--table-only", action="store_true",
                   help="recompute the PSNR table of the existing weights and rewrite it into the JSON")
    args = p.parse_args(argv)
    name = "gs_dncnn" if args.gradient_step else "dncnn"

    if args.table_only:
        info = json.loads((args.out / f"{name}.json").read_text())
        model = load_pretrained("gs-dncnn" if args.gradient_step else "dncnn")
        info["psnr_table"] = psnr_table(model, seed=TABLE_SEED)
        info["table_seed"] = TABLE_SEED
        info["psnr_table_protocol"] = ("mean PSNR (dB) over 256x256 central crops of the held-out images, "
                                       f"noise from numpy default_rng({TABLE_SEED})")
        (args.out / f"{name}.json").write_text(json.dumps(info, indent=1))
        print(json.dumps(info["psnr_table"], indent=1))
        return info

    rng = np.random.default_rng(args.seed)
    images = [_rgb(load_image(n)) for n in TRAIN_IMAGES]
    if args.sampling == "area":  # each pixel equally likely
        areas = np.array([im.shape[0] * im.shape[1] for im in images], np.float64)
        probs = areas / areas.sum()
    else:  # each image equally likely
        probs = np.full(len(images), 1.0 / len(images))

    def batch():
        idx = rng.choice(len(images), size=args.batch, p=probs)
        out = np.empty((args.batch, args.patch, args.patch, 3), np.float32)
        for j, i in enumerate(idx):
            im = images[i]
            t = rng.integers(0, im.shape[0] - args.patch + 1)
            l = rng.integers(0, im.shape[1] - args.patch + 1)
            crop = im[t : t + args.patch, l : l + args.patch]
            crop = np.rot90(crop, k=rng.integers(4))
            if rng.random() < 0.5:
                crop = crop[:, ::-1]
            out[j] = crop
        return out

    previous = None
    if args.resume:
        model = load_pretrained("gs-dncnn" if args.gradient_step else "dncnn")
        previous = json.loads((WEIGHTS_DIR / f"{name}.json").read_text())
    elif args.gradient_step:
        base = load_pretrained("dncnn")
        model = GradientStepDenoiser(base)
    else:
        model = DnCNN(jax.random.key(args.seed), channels=3, features=args.features, depth=args.depth)
    if args.resume:  # fresh Adam moments on trained weights: warm up to avoid a jump out of the basin
        sched = optax.warmup_cosine_decay_schedule(0.0, args.lr, min(100, args.steps // 10), args.steps,
                                                   end_value=0.01 * args.lr)
    else:
        sched = optax.cosine_decay_schedule(args.lr, args.steps, alpha=0.01)
    opt = optax.adam(sched)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    state = opt.init(params)

    @jax.jit
    def step(params, state, x, key):
        k1, k2 = jax.random.split(key)
        sig = jax.random.uniform(k1, (x.shape[0],), maxval=args.sigma_max / 255.0)
        noisy = x + sig[:, None, None, None] * jax.random.normal(k2, x.shape)

        def loss_fn(p):
            m = eqx.combine(p, static)
            return jnp.mean((m(noisy, sig) - x) ** 2)

        loss, g = jax.value_and_grad(loss_fn)(params)
        upd, state = opt.update(g, state, params)
        return optax.apply_updates(params, upd), state, loss

    key = jax.random.key(args.seed + 1)
    t0 = time.time()
    losses = []
    for it in range(args.steps):
        key, sub = jax.random.split(key)
        params, state, loss = step(params, state, jnp.asarray(batch()), sub)
        losses.append(float(loss))
        if it % 100 == 0 or it == args.steps - 1:
            print(f"step {it:5d}  loss {np.mean(losses[-100:]):.3e}  "
                  f"psnr~{-10 * np.log10(np.mean(losses[-100:])):.2f} dB  {time.time() - t0:.0f}s", flush=True)
    train_s = time.time() - t0
    model = eqx.combine(params, static)
    table = psnr_table(model, seed=TABLE_SEED)
    args.out.mkdir(parents=True, exist_ok=True)
    eqx.tree_serialise_leaves(args.out / f"{name}.eqx", model)
    info = {
        "architecture": {"kind": "DnCNN", "channels": 3, "features": args.features, "depth": args.depth,
                         "gradient_step": bool(args.gradient_step), "noise_map_input": True,
                         "noise_scaled": bool(getattr(model, "noise_scaled", getattr(getattr(model, "network", None),
                                                                                 "noise_scaled", False))),
                         "sigma_scale": float(getattr(model, "sigma_scale", getattr(getattr(model, "network", None),
                                                                                 "sigma_scale", 1.0))),
                         "layout": "NHWC"},
        "recipe": {"command": "python -m jaxcore.inverse.train_denoiser"
                   + (" --gradient-step" if args.gradient_step else "") + (" --resume" if args.resume else "")
                   + f" --steps {args.steps} --lr {args.lr} --seed {args.seed} --sampling {args.sampling}",
                   "train_images": list(TRAIN_IMAGES), "test_images": list(TEST_IMAGES),
                   "steps": args.steps, "batch": args.batch, "patch": args.patch, "sampling": args.sampling,
                   "optimizer": "adam",
                   "lr": args.lr, "lr_schedule": "linear warm-up over min(100, steps/10) steps, then cosine to 1%" if args.resume else "cosine to 1%", "sigma_max_255": args.sigma_max,
                   "loss": "MSE(D(x + sigma z, sigma), x), sigma ~ U[0, sigma_max]",
                   "augmentation": "random crop, rot90, horizontal flip; gray images replicated to RGB",
                   "init": ("the previous stage's weights (see previous_stages)" if args.resume
                            else "dncnn weights" if args.gradient_step else "He normal (last layer x0.1)")},
        "previous_stages": ([] if previous is None else previous.get("previous_stages", [])
                            + [{"recipe": previous["recipe"], "seed": previous["seed"],
                                "train_seconds": previous["train_seconds"],
                                "final_train_loss": previous["final_train_loss"]}]),
        "seed": args.seed,
        "train_seconds": round(train_s, 1),
        "final_train_loss": float(np.mean(losses[-100:])),
        "psnr_table": table,
        "table_seed": TABLE_SEED,
        "psnr_table_protocol": "mean PSNR (dB) over 256x256 central crops of the held-out images, "
                               f"noise from numpy default_rng({TABLE_SEED})",
        "versions": {"jax": jax.__version__, "equinox": eqx.__version__},
    }
    (args.out / f"{name}.json").write_text(json.dumps(info, indent=1))
    print(json.dumps(table, indent=1))
    return info


if __name__ == "__main__":
    main()
