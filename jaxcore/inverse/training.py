"""Training the noise-conditioned DnCNN on scikit-image's natural images, and its held-out PSNR table.

:func:`train_denoiser` runs the recipe of the shipped weights (the command line that rebuilds
them is ``scripts/train_denoiser.py``; its flags and this function's arguments are the same
recipe): random ``patch_size x patch_size`` crops of the training images with random flips and
90-degree rotations (grayscale images replicated to RGB), noise level ``sigma ~ U[0, sigma_max]``
per crop, loss ``mean ||D(x + sigma z, sigma) - x||^2``, Adam with a cosine-decayed learning
rate. The images in :data:`TEST_IMAGES` are never seen in training and give the PSNR table
(:func:`psnr_table`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import (Progress, check_bool, check_choice, check_int, check_key, check_progress, check_range,
                           check_scalar, expected)

from ._checks import as_array
from .denoisers import AbstractDenoiser, TVDenoiser
from .metrics import psnr

__all__ = [
    "TABLE_SEED",
    "TABLE_SIGMAS",
    "TEST_IMAGES",
    "TRAIN_IMAGES",
    "DenoiserTrainResult",
    "heldout_crops",
    "psnr_table",
    "train_denoiser",
]

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


def _load_image(name: str) -> np.ndarray:
    # imported here: importing jaxcore.inverse does not load the datasets package
    from jaxcore.datasets import load_image

    return load_image(name)


def heldout_crops(size: int = 256) -> dict[str, np.ndarray]:
    """Central ``size x size`` crops of the held-out images :data:`TEST_IMAGES` (native channels).

    Args:
        size: crop side in pixels (at most the smallest image side, 300).

    Returns:
        ``{name: [size, size, C] float32 array in [0, 1]}``, C = 1 (camera) or 3.

    Raises:
        ValueError: ``size < 1`` or larger than an image.

    Examples:
        >>> from jaxcore.inverse import heldout_crops
        >>> {k: v.shape for k, v in heldout_crops(16).items()}
        {'camera': (16, 16, 1), 'chelsea': (16, 16, 3), 'coffee': (16, 16, 3)}
    """
    size = check_int(size, "size", minimum=1)
    out = {}
    for name in TEST_IMAGES:
        img = _load_image(name)
        h, w = img.shape[:2]
        if size > min(h, w):
            raise ValueError(expected("size", f"at most {min(h, w)} (the side of '{name}')", size))
        t, l = (h - size) // 2, (w - size) // 2
        out[name] = img[t : t + size, l : l + size]
    return out


#: One compiled denoiser call per denoiser structure and image shape (sigma is an array argument).
_denoise = eqx.filter_jit(lambda denoiser, x, sigma: denoiser(x, sigma))


def psnr_table(denoiser: AbstractDenoiser, *, seed: int = TABLE_SEED, size: int = 256, tv: bool = True) -> dict:
    """Mean PSNR (dB) over the held-out crops: noisy input, TV and ``denoiser`` at :data:`TABLE_SIGMAS`.

    The protocol of the shipped weights' stated tables: central ``size x size`` crops of
    :data:`TEST_IMAGES`, noise from ``numpy.random.default_rng(seed)`` (a table seed, not a PRNG
    key: the stated tables were drawn so), one draw per image and noise level in that order.

    Args:
        denoiser: ``D(x, sigma)`` on ``[H, W, C]`` images.
        seed: the numpy seed of the noise.
        size: crop side in pixels.
        tv: also compute the TV column (``False`` leaves it empty; the noise draws, hence the
            other columns, are unchanged).

    Returns:
        ``{"sigma_255": [...], "images": [...], "noisy": [...], "tv": [...], "network": [...]}``,
        one mean PSNR per noise level in each column.

    Raises:
        TypeError: ``denoiser`` not callable as ``D(x, sigma)``; ``seed`` not an int; ``tv`` not a bool.
        ValueError: as :func:`heldout_crops`; ``seed < 0``.

    References:
        Zhang et al., IEEE TIP 2017 (DnCNN, the PSNR-per-noise-level table format).

    Examples:
        >>> from jaxcore.inverse import load_pretrained, psnr_table
        >>> t = psnr_table(load_pretrained("dncnn"), size=16, tv=False)
        >>> len(t["network"]), all(n > z for n, z in zip(t["network"], t["noisy"]))
        (4, True)
    """
    if not (isinstance(denoiser, AbstractDenoiser) or callable(denoiser)):
        raise TypeError(expected("denoiser", "a denoiser callable as D(x, sigma)", type(denoiser).__name__, raw=True))
    seed = check_int(seed, "seed", minimum=0)
    tv = check_bool(tv, "tv")
    tv_den = TVDenoiser() if tv else None
    crops = heldout_crops(size)
    table: dict = {"sigma_255": list(TABLE_SIGMAS), "images": list(crops), "noisy": [], "tv": [], "network": []}
    rng = np.random.default_rng(seed)
    for s in TABLE_SIGMAS:
        sig = s / 255.0
        sig_arr = jnp.float32(sig)  # an array, not a Python float: filter_jit would compile once per sigma
        row = {"noisy": [], "tv": [], "network": []}
        for img in crops.values():
            noisy = (img + sig * rng.standard_normal(img.shape)).astype(np.float32)
            row["noisy"].append(float(psnr(noisy, img)))
            if tv_den is not None:
                row["tv"].append(float(psnr(_denoise(tv_den, noisy, sig_arr), img)))
            row["network"].append(float(psnr(_denoise(denoiser, noisy, sig_arr), img)))
        for k in row:
            if row[k]:
                table[k].append(float(np.mean(row[k])))
    return table


class DenoiserTrainResult(NamedTuple):
    """Output of :func:`train_denoiser`.

    Attributes:
        model: the trained denoiser (same structure as the one passed in).
        losses: ``[num_steps]`` training loss (mean squared error per pixel of [0, 1] images) at each step.
    """

    model: AbstractDenoiser
    losses: Float[Array, " num_steps"]


def _rgb(img: np.ndarray) -> np.ndarray:
    return np.repeat(img, 3, axis=-1) if img.shape[-1] == 1 else img


def _crop_sampler(images: list[np.ndarray], probs: np.ndarray, rng: np.random.Generator, batch_size: int,
                  patch_size: int):
    def batch() -> np.ndarray:
        idx = rng.choice(len(images), size=batch_size, p=probs)
        out = np.empty((batch_size, patch_size, patch_size, 3), np.float32)
        for j, i in enumerate(idx):
            im = images[i]
            t = rng.integers(0, im.shape[0] - patch_size + 1)
            l = rng.integers(0, im.shape[1] - patch_size + 1)
            crop = im[t : t + patch_size, l : l + patch_size]
            crop = np.rot90(crop, k=rng.integers(4))
            if rng.random() < 0.5:
                crop = crop[:, ::-1]
            out[j] = crop
        return out

    return batch


def _optimizer(learning_rate, num_steps: int, warmup_steps: int) -> optax.GradientTransformation:
    """Adam with the recipe's learning-rate schedule (``learning_rate`` may be traced: one compilation for all)."""
    if warmup_steps:
        schedule = optax.warmup_cosine_decay_schedule(0.0, learning_rate, warmup_steps, num_steps,
                                                      end_value=0.01 * learning_rate)
    else:
        schedule = optax.cosine_decay_schedule(learning_rate, num_steps, alpha=0.01)
    return optax.adam(schedule)


def _train_chunk(params, static, opt_state, key, batches, steps, learning_rate, sigma_max, prog, *,
                 num_steps: int, warmup_steps: int):
    """``len(steps)`` Adam steps as one ``lax.scan`` over pre-drawn batches ``[L, B, P, P, 3]``."""
    optimizer = _optimizer(learning_rate, num_steps, warmup_steps)

    def body(carry, inp):
        params, opt_state, key = carry
        x, i = inp
        key, sub = jax.random.split(key)
        k1, k2 = jax.random.split(sub)
        sig = jax.random.uniform(k1, (x.shape[0],), maxval=sigma_max)
        noisy = x + sig[:, None, None, None] * jax.random.normal(k2, x.shape)

        def loss_fn(p):
            m = eqx.combine(p, static)
            return jnp.mean((m(noisy, sig) - x) ** 2)

        loss, g = jax.value_and_grad(loss_fn)(params)
        upd, opt_state = optimizer.update(g, opt_state, params)
        if prog is not None:
            prog.update(i, {"loss": loss})
        return (optax.apply_updates(params, upd), opt_state, key), loss

    (params, opt_state, key), losses = jax.lax.scan(body, (params, opt_state, key), (batches, steps))
    return params, opt_state, key, losses


_train_chunk_program = eqx.filter_jit(_train_chunk)
_init_program = eqx.filter_jit(lambda params, learning_rate, *, num_steps, warmup_steps:
                               _optimizer(learning_rate, num_steps, warmup_steps).init(params))


def train_denoiser(
    key: PRNGKeyArray,
    model: AbstractDenoiser,
    images: Sequence[np.ndarray],
    *,
    num_steps: int = 2500,
    batch_size: int = 16,
    patch_size: int = 40,
    learning_rate: float = 2e-3,
    warmup_steps: int = 0,
    sigma_max: float = 60 / 255,
    sampling: str = "image",
    crop_seed: int | None = None,
    chunk_size: int = 100,
    progress=False,
) -> DenoiserTrainResult:
    """Train a denoiser by Adam on ``E ||D(x + sigma z, sigma) - x||^2``, ``sigma ~ U[0, sigma_max]``.

    Each step draws ``batch_size`` random ``patch_size`` crops (random rot90 and horizontal flip;
    gray images replicated to RGB) on the host with ``numpy.random.default_rng(crop_seed)``, a
    noise level per crop and the noise from ``key``. The learning rate decays by a cosine from
    ``learning_rate`` to 1% of it over ``num_steps`` (after a linear warm-up from 0 over
    ``warmup_steps``, for a further stage from trained weights). The steps run as ``lax.scan``
    loops of ``chunk_size`` steps (the crops of one chunk are drawn before it), so the loss is
    never read on the host step by step.

    Args:
        key: PRNG key of the noise levels and noise.
        model: the initial denoiser (e.g. ``DnCNN(key=...)`` or a :class:`GradientStepDenoiser`);
            its inexact arrays are trained, the rest kept.
        images: training images ``[H, W, 1 or 3]`` float in [0, 1], each at least ``patch_size`` on a side.
        num_steps: optimisation steps, >= 1.
        batch_size: crops per minibatch, >= 1.
        patch_size: crop side in pixels, >= 1.
        learning_rate: peak Adam learning rate, > 0.
        warmup_steps: linear warm-up steps, in [0, num_steps).
        sigma_max: largest training noise level (pixel units of a [0, 1] image), > 0.
        sampling: "image" (each crop's image uniformly) or "area" (in proportion to its area).
        crop_seed: seed of the host crop sampler (None: drawn from ``key``).
        chunk_size: steps per compiled scan (memory: ``chunk_size`` minibatches at once).
        progress: False, True (a progress bar) or ``fn(step, {"loss": ...})`` (a progress sink is
            part of the compiled program: with one, each call compiles anew).

    Returns:
        :class:`DenoiserTrainResult` with the trained model and the ``[num_steps]`` losses.

    Raises:
        TypeError: ``key`` not a PRNG key; a count not an int; ``progress`` neither bool nor callable.
        ValueError: counts or rates out of range; unknown ``sampling``; no images or an image
            smaller than ``patch_size``, not ``[H, W, 1 or 3]`` or with pixels outside [0, 1]
            (NaN included). TypeError also for ``images`` None or an image not a float array.

    References:
        Zhang, Zuo, Chen, Meng & Zhang, "Beyond a Gaussian denoiser", IEEE TIP 2017 (the residual
        denoiser and its training loss); Kingma & Ba, "Adam", ICLR 2015.

    Examples:
        Fitting the two parameters of a Gaussian-prior denoiser (a DnCNN trains the same way):

        >>> import jax, jax.numpy as jnp, numpy as np
        >>> from jaxcore.inverse import GaussianMMSEDenoiser, train_denoiser
        >>> img = np.random.default_rng(0).random((16, 16, 3)).astype(np.float32)
        >>> den = GaussianMMSEDenoiser(jnp.float32(0.3), jnp.float32(0.05))
        >>> out = train_denoiser(jax.random.key(1), den, [img], num_steps=50, batch_size=2, patch_size=8,
        ...                      learning_rate=1e-2, crop_seed=0)
        >>> out.losses.shape, bool(out.model.mean > 0.3)  # the mean moves towards the pixels' mean 0.5
        ((50,), True)
    """
    key = check_key(key)
    if not isinstance(model, AbstractDenoiser):
        raise TypeError(expected("model", "an AbstractDenoiser", type(model).__name__, raw=True))
    num_steps = check_int(num_steps, "num_steps", minimum=1)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    patch_size = check_int(patch_size, "patch_size", minimum=1)
    warmup_steps = check_int(warmup_steps, "warmup_steps", minimum=0, maximum=num_steps - 1)
    chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
    learning_rate = check_scalar(learning_rate, "learning_rate", positive=True)
    sigma_max = check_scalar(sigma_max, "sigma_max", positive=True)
    sampling = check_choice(sampling, "sampling", ("image", "area"))
    progress = check_progress(progress)
    if images is None or isinstance(images, (str, bytes)) or not hasattr(images, "__iter__"):
        raise TypeError(expected("images", "a sequence of images [H, W, 1 or 3]", type(images).__name__, raw=True))
    images = list(images)
    if not images:
        raise ValueError(expected("images", "at least one image", "an empty sequence", raw=True))
    arrays = []
    for i, im in enumerate(images):
        a = np.asarray(as_array(im, f"images[{i}]"))
        if a.ndim != 3 or a.shape[-1] not in (1, 3):
            raise ValueError(expected(f"images[{i}]", "an image [H, W, 1 or 3]", f"shape {a.shape}", raw=True))
        check_range(a, f"images[{i}]", 0.0, 1.0)
        arrays.append(_rgb(a.astype(np.float32)))
    images = arrays
    for i, im in enumerate(images):
        if im.ndim != 3 or im.shape[-1] != 3 or min(im.shape[:2]) < patch_size:
            raise ValueError(expected(f"images[{i}]", f"an image [H, W, 1 or 3] with sides >= patch_size {patch_size}",
                                      f"shape {im.shape}", raw=True))
    if crop_seed is None:
        crop_seed = int(jax.random.randint(jax.random.fold_in(key, 1), (), 0, 2**31 - 1))
    rng = np.random.default_rng(check_int(crop_seed, "crop_seed", minimum=0))
    if sampling == "area":  # each pixel equally likely
        areas = np.array([im.shape[0] * im.shape[1] for im in images], np.float64)
        probs = areas / areas.sum()
    else:  # each image equally likely
        probs = np.full(len(images), 1.0 / len(images))
    batch = _crop_sampler(images, probs, rng, batch_size, patch_size)

    params, static = eqx.partition(model, eqx.is_inexact_array)
    sigma_max_arr, lr_arr = np.float32(sigma_max), np.float32(learning_rate)
    opt_state = _init_program(params, lr_arr, num_steps=num_steps, warmup_steps=warmup_steps)
    # no progress: nothing host-side in the program, so a second call with the same shapes does not recompile
    prog = Progress(progress, num_steps, "train denoiser") if progress is not False else None
    losses = []
    for start in range(0, num_steps, chunk_size):
        length = min(chunk_size, num_steps - start)
        batches = jnp.asarray(np.stack([batch() for _ in range(length)]))
        steps = np.arange(start, start + length, dtype=np.int32)
        params, opt_state, key, chunk_losses = _train_chunk_program(
            params, static, opt_state, key, batches, steps, lr_arr, sigma_max_arr, prog,
            num_steps=num_steps, warmup_steps=warmup_steps)
        losses.append(chunk_losses)
    return DenoiserTrainResult(eqx.combine(params, static), losses[0] if len(losses) == 1 else jnp.concatenate(losses))
