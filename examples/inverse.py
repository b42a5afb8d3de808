"""Deblurring a photograph with a learned denoiser as the prior: SNORE vs RED vs PnP-PGD.

A crop of scikit-image's ``chelsea`` (a cat; one of the images the shipped DnCNN never saw in
training) is blurred by a 9x9 Gaussian kernel (std 1.6 px) and corrupted by noise of std
10/255. It is restored by SNORE (Renaud et al., ICML 2024: stochastic gradient descent on the
data term plus a regulariser whose gradient is the denoiser's residual at a *noised* iterate),
RED (the same residual at the iterate itself) and plug-and-play proximal gradient, all with the
shipped DnCNN and the settings of the ``inverse.restoration`` benchmark (denoiser noise
2 sigma_y, weight alpha 0.7, step 0.5 sigma_y^2, i.e. half the 1/L step of the data term; tuned
on crops of the training image ``astronaut``). The script prints PSNR/SSIM of each method and
plots the images and the PSNR along the iterations.

Run::

    python examples/inverse.py          # 64x64 crop, 150 iterations; about 15 s on 2 CPU cores
    python examples/inverse.py --small  # 32x32 crop, 20 iterations (CI)
"""

import argparse
import os

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import jaxcore  # noqa: E402
from jaxcore import inverse  # noqa: E402
from jaxcore.datasets import load_image  # noqa: E402


def main(small: bool, out: str, seed: int) -> None:
    size, num_steps = (32, 20) if small else (64, 150)
    image = load_image("chelsea")                                     # [300, 451, 3] in [0, 1]
    top, left = (image.shape[0] - size) // 2, (image.shape[1] - size) // 2
    x = image[top:top + size, left:left + size]

    key_task, key_noise, key_snore = jax.random.split(jax.random.key(seed), 3)
    sigma_y = 10 / 255
    task = inverse.make_task(key_task, "gaussian_blur", (size, size), sigma_y)
    y = inverse.degrade(key_noise, x, task.operator, sigma_y)
    denoiser = inverse.load_pretrained("dncnn", boundary="symmetric")  # symmetric borders suit small crops

    regularised = inverse.constant_schedule(num_steps, sigma=2 * sigma_y, alpha=0.7, step_size=0.5 * sigma_y**2)
    pnp = inverse.constant_schedule(num_steps, sigma=2 * sigma_y, step_size=sigma_y**2)
    runs = {
        "SNORE": inverse.snore(key_snore, y, task.operator, denoiser, regularised, sigma_y, x_true=x, track=True),
        "RED": inverse.red(None, y, task.operator, denoiser, regularised, sigma_y, x_true=x, track=True),
        "PnP-PGD": inverse.pnp_pgd(None, y, task.operator, denoiser, pnp, sigma_y, x_true=x, track=True),
    }
    print(f"chelsea {size}x{size}, {inverse.TASKS['gaussian_blur']}, sigma_y = 10/255, {num_steps} iterations")
    print(f"  {'observed':8s} PSNR {float(inverse.psnr(y, x)):6.2f} dB  SSIM {float(inverse.ssim(y, x)):.3f}")
    for name, res in runs.items():
        print(f"  {name:8s} PSNR {float(inverse.psnr(res.x, x)):6.2f} dB  SSIM {float(inverse.ssim(res.x, x)):.3f}")

    fig = plt.figure(figsize=(12, 3.2))
    panels = [("clean", x), ("observed", y)] + [(name, res.x) for name, res in runs.items()]
    for i, (title, img) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels) + 2, i + 1)
        ax.imshow(np.clip(np.asarray(img), 0, 1))
        label = title if title == "clean" else f"{title}\n{float(inverse.psnr(img, x)):.2f} dB"
        ax.set_title(label, fontsize=9)
        ax.axis("off")
    ax = fig.add_subplot(1, len(panels) + 2, (len(panels) + 1, len(panels) + 2))
    for name, res in runs.items():
        ax.plot(np.arange(1, num_steps + 1), np.asarray(res.psnr), label=name)
    ax.axhline(float(inverse.psnr(y, x)), color="gray", ls=":", label="observed")
    ax.set(xlabel="iteration", ylabel="PSNR (dB)", title="PSNR along the iterations")
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "inverse_deblur.png")
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="32x32 crop, 20 iterations (CI)")
    parser.add_argument("--out", default="results/examples/inverse", help="folder for the figure")
    parser.add_argument("--seed", type=int, default=0, help="PRNG seed (blur noise and SNORE's draws)")
    args = parser.parse_args()
    jaxcore.enable_compilation_cache()   # keep compiled programs on disk (see examples/README.md)
    main(args.small, args.out, args.seed)
