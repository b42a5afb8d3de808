"""Train the shipped noise-conditioned DnCNN on scikit-image's natural images (command line).

Run ``python scripts/train_denoiser.py`` from the repository root (about 10 minutes on 2 CPU
cores with the defaults) to rebuild ``jaxcore/inverse/weights/dncnn.eqx`` and its
``dncnn.json`` (recipe, seed, held-out PSNR table). ``--gradient-step`` fine-tunes the
gradient-step variant from the plain network's weights; ``--resume`` runs a further stage from
the shipped weights; ``--table-only`` recomputes the PSNR table of the existing weights.

The recipe itself is :func:`jaxcore.inverse.train_denoiser` (library code, silent, returning
the losses); this script parses the flags, prints progress and writes the files. The weights
shipped before this script existed were made by ``python -m jaxcore.inverse.train_denoiser``
with the same flags (the recipe ``command`` in their JSON).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import equinox as eqx
import jax
import numpy as np

from jaxcore.datasets import load_image
from jaxcore.inverse import (
    TABLE_SEED,
    TEST_IMAGES,
    TRAIN_IMAGES,
    DnCNN,
    GradientStepDenoiser,
    load_pretrained,
    psnr_table,
    train_denoiser,
)

WEIGHTS_DIR = pathlib.Path(__file__).resolve().parents[1] / "jaxcore" / "inverse" / "weights"
PROTOCOL = ("mean PSNR (dB) over 256x256 central crops of the held-out images, "
            f"noise from numpy default_rng({TABLE_SEED})")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=2500, help="optimisation steps (num_steps)")
    p.add_argument("--batch", type=int, default=16, help="crops per minibatch (batch_size)")
    p.add_argument("--patch", type=int, default=40, help="crop side in pixels (patch_size)")
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
    return p


def _printer(t0: float, num_steps: int):
    recent: list[float] = []

    def report(step: int, metrics: dict) -> None:
        recent.append(metrics["loss"])
        if step % 100 == 1 or step == num_steps or len(recent) == 1:
            loss = float(np.mean(recent[-5:]))
            print(f"step {step - 1:5d}  loss {loss:.3e}  psnr~{-10 * np.log10(loss):.2f} dB  "
                  f"{time.time() - t0:.0f}s", flush=True)

    return report


def main(argv=None) -> dict:
    args = _parser().parse_args(argv)
    name = "gs_dncnn" if args.gradient_step else "dncnn"
    pretrained = "gs-dncnn" if args.gradient_step else "dncnn"

    if args.table_only:
        info = json.loads((args.out / f"{name}.json").read_text())
        info["psnr_table"] = psnr_table(load_pretrained(pretrained), seed=TABLE_SEED)
        info["table_seed"] = TABLE_SEED
        info["psnr_table_protocol"] = PROTOCOL
        (args.out / f"{name}.json").write_text(json.dumps(info, indent=1))
        print(json.dumps(info["psnr_table"], indent=1))
        return info

    previous = None
    if args.resume:
        model = load_pretrained(pretrained)
        previous = json.loads((WEIGHTS_DIR / f"{name}.json").read_text())
    elif args.gradient_step:
        model = GradientStepDenoiser(load_pretrained("dncnn"))
    else:
        model = DnCNN(key=jax.random.key(args.seed), channels=3, features=args.features, depth=args.depth)
    images = [load_image(n) for n in TRAIN_IMAGES]
    # a further stage from trained weights warms up (fresh Adam moments would jump out of the basin)
    warmup = min(100, args.steps // 10) if args.resume else 0
    t0 = time.time()
    result = train_denoiser(
        jax.random.key(args.seed + 1), model, images, num_steps=args.steps, batch_size=args.batch,
        patch_size=args.patch, learning_rate=args.lr, warmup_steps=warmup, sigma_max=args.sigma_max / 255.0,
        sampling=args.sampling, crop_seed=args.seed, progress=_printer(t0, args.steps))
    train_s = time.time() - t0
    model = result.model
    losses = np.asarray(result.losses)
    table = psnr_table(model, seed=TABLE_SEED)
    args.out.mkdir(parents=True, exist_ok=True)
    eqx.tree_serialise_leaves(args.out / f"{name}.eqx", model)
    net = getattr(model, "network", model)
    info = {
        "architecture": {"kind": "DnCNN", "channels": 3, "features": net.features, "depth": net.depth,
                         "gradient_step": bool(args.gradient_step), "noise_map_input": True,
                         "noise_scaled": bool(net.noise_scaled), "sigma_scale": float(net.sigma_scale),
                         "layout": "NHWC"},
        "recipe": {"command": "python scripts/train_denoiser.py"
                   + (" --gradient-step" if args.gradient_step else "") + (" --resume" if args.resume else "")
                   + f" --steps {args.steps} --lr {args.lr} --seed {args.seed} --sampling {args.sampling}",
                   "train_images": list(TRAIN_IMAGES), "test_images": list(TEST_IMAGES),
                   "steps": args.steps, "batch": args.batch, "patch": args.patch, "sampling": args.sampling,
                   "optimizer": "adam", "lr": args.lr,
                   "lr_schedule": ("linear warm-up over min(100, steps/10) steps, then cosine to 1%" if args.resume
                                   else "cosine to 1%"),
                   "sigma_max_255": args.sigma_max,
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
        "psnr_table_protocol": PROTOCOL,
        "versions": {"jax": jax.__version__, "equinox": eqx.__version__},
    }
    (args.out / f"{name}.json").write_text(json.dumps(info, indent=1))
    print(json.dumps(table, indent=1))
    return info


if __name__ == "__main__":
    main()
