"""SNORE and plug-and-play baselines as jit-compiled ``lax.scan`` loops.

Problem: ``min_x F(x, y) + alpha R_sigma(x)`` with ``F(x, y) = ||A x - y||^2 / (2 sigma_y^2)``
(:mod:`jaxcore.inverse.operators`) and the SNORE regulariser
``R_sigma(x) = -E_z[log p_sigma(x + sigma z)]``, ``z ~ N(0, I)``, whose gradient is
``(1/sigma^2) E_z[x - D_sigma(x + sigma z)]`` (Tweedie), ``D_sigma`` an MMSE denoiser.

Algorithms (one image ``[H, W, C]``; batch with :func:`restore_batch`, which vmaps
over images and over random seeds):

- :func:`snore`: ``x <- x - delta grad F(x) - delta alpha/sigma^2 (x - mean_j D_sigma(x + sigma z_j))``
  (``n_samples`` noise draws per step, vmapped), with per-iteration schedules of
  ``sigma``, ``alpha`` and ``delta`` (:func:`constant_schedule`, :func:`annealed_schedule`);
  ``prox=True`` gives SNORE-Prox: ``x <- prox_{delta F}(x - delta alpha/sigma^2 (x - D(x + sigma z)))``.
- :func:`annealed_snore`: SNORE along :func:`annealed_schedule`.
- :func:`red`: RED gradient descent ``x <- x - delta (grad F(x) + alpha/sigma^2 (x - D_sigma(x)))``
  (``prox=True``: RED-Prox).
- :func:`pnp_pgd`: ``x <- D_sigma(x - tau grad F(x))``; :func:`pnp_hqs`: ``x <- D_sigma(prox_{tau F}(x))``.

References:
    Renaud, Prost, Leclaire & Papadakis, "Plug-and-play image restoration with
    stochastic denoising regularization", ICML 2024, Algorithms 1-2 (SNORE, Annealed SNORE).
    Romano, Elad & Milanfar, "The little engine that could: regularization by denoising (RED)",
    SIAM J. Imaging Sci. 2017. Venkatakrishnan, Bouman & Wohlberg, "Plug-and-play priors for
    model based reconstruction", GlobalSIP 2013. Zhang et al., "Plug-and-play image restoration
    with deep denoiser prior", IEEE TPAMI 2021 (HQS).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .denoisers import AbstractDenoiser
from .operators import AbstractOperator, standard_normal, trusted_values
from .metrics import psnr as _psnr

__all__ = [
    "Schedule",
    "RestorationResult",
    "constant_schedule",
    "annealed_schedule",
    "snore",
    "snore_prox",
    "annealed_snore",
    "red",
    "pnp_pgd",
    "pnp_hqs",
    "restore_batch",
    "METHODS",
]


class Schedule(NamedTuple):
    """Per-iteration parameters of an iterative method (all ``[n_iter]`` arrays).

    Attributes:
        sigma: denoiser noise level (pixel units of a [0, 1] image).
        alpha: regularisation weight.
        step_size: ``delta`` (gradient step) or ``tau`` (PnP step).
    """

    sigma: Array
    alpha: Array
    step_size: Array

    @property
    def n_iter(self) -> int:
        return int(self.sigma.shape[0])


class RestorationResult(NamedTuple):
    """Output of a restoration loop.

    Attributes:
        x: the final iterate ``[..., H, W, C]``.
        psnr: ``[..., n_iter]`` PSNR (dB) of each iterate against ``x_true``, or None.
        fidelity: ``[..., n_iter]`` data term ``F(x_k, y)`` of each iterate, or None.
    """

    x: Array
    psnr: Array | None = None
    fidelity: Array | None = None


def _check_nonneg(name: str, value) -> np.ndarray:
    v = np.asarray(value, np.float64)
    if np.any(v < 0) or not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be finite and >= 0, got {value}")
    return v


def constant_schedule(n_iter: int, *, sigma: float, alpha: float = 1.0, step_size: float = 1.0, dtype=None) -> Schedule:
    """The same ``(sigma, alpha, step_size)`` at each of ``n_iter`` iterations.

    Raises:
        ValueError: ``n_iter < 1`` or a negative parameter.
    """
    if not (isinstance(n_iter, (int, np.integer)) and n_iter >= 1):
        raise ValueError(f"n_iter must be a positive integer, got {n_iter!r}")
    for name, v in (("sigma", sigma), ("alpha", alpha), ("step_size", step_size)):
        _check_nonneg(name, v)
    dtype = dtype or jnp.result_type(float)
    full = lambda v: jnp.full((n_iter,), v, dtype)  # noqa: E731
    return Schedule(full(sigma), full(alpha), full(step_size))


def annealed_schedule(
    *,
    sigma_start: float,
    sigma_end: float,
    alpha_start: float,
    alpha_end: float,
    step_size: float,
    n_stages: int = 16,
    iters_per_stage: int = 100,
    final_iters: int = 300,
    spacing: str = "geometric",
    dtype=None,
) -> Schedule:
    """Annealed-SNORE schedule: ``n_stages`` stages from large to small ``sigma``, then a final phase.

    Stage ``i`` (``i = 0..n_stages-1``) runs ``iters_per_stage`` iterations at
    ``sigma_i`` and ``alpha_i`` interpolated from the start to the end values
    (geometrically or linearly), then ``final_iters`` iterations at the end
    values; the step size is constant.

    Returns:
        A :class:`Schedule` of ``n_stages * iters_per_stage + final_iters`` iterations.

    Raises:
        ValueError: non-positive counts, negative values, or unknown ``spacing``.

    References:
        Renaud et al., ICML 2024, Algorithm 2 (Annealed SNORE).
    """
    if n_stages < 1 or iters_per_stage < 0 or final_iters < 0 or n_stages * iters_per_stage + final_iters < 1:
        raise ValueError(
            f"need n_stages >= 1 and a positive total iteration count, got {n_stages}, {iters_per_stage}, {final_iters}"
        )
    for name, v in (("sigma_start", sigma_start), ("sigma_end", sigma_end), ("alpha_start", alpha_start),
                    ("alpha_end", alpha_end), ("step_size", step_size)):
        _check_nonneg(name, v)
    t = np.linspace(0.0, 1.0, n_stages) if n_stages > 1 else np.ones(1)
    if spacing == "geometric":
        if min(sigma_start, sigma_end, alpha_start, alpha_end) <= 0:
            raise ValueError("geometric spacing needs sigma_* > 0 and alpha_* > 0")
        sig = sigma_start * (sigma_end / sigma_start) ** t
        alp = alpha_start * (alpha_end / alpha_start) ** t
    elif spacing == "linear":
        sig = sigma_start + (sigma_end - sigma_start) * t
        alp = alpha_start + (alpha_end - alpha_start) * t
    else:
        raise ValueError(f"spacing must be 'geometric' or 'linear', got {spacing!r}")
    sig = np.concatenate([np.repeat(sig, iters_per_stage), np.full(final_iters, sigma_end)])
    alp = np.concatenate([np.repeat(alp, iters_per_stage), np.full(final_iters, alpha_end)])
    dtype = dtype or jnp.result_type(float)
    return Schedule(jnp.asarray(sig, dtype), jnp.asarray(alp, dtype), jnp.full(sig.shape, step_size, dtype))


def _validate(y, operator, denoiser, schedule, sigma_y, x0, *, sigma_positive: bool = False):
    """Check the arguments of an algorithm; return ``(sigma_y, schedule)`` as the loop must use them.

    The schedule is cast to the dtype the loop runs in first (a float16 image turns a large
    float32 value into inf). Concrete values are checked here in Python; traced ones by one
    run-time check, before the loop, which then trusts them (see :func:`_loop`).
    ``sigma_positive``: the method divides by ``sigma^2`` (SNORE, RED), so ``sigma > 0``.
    """
    if not isinstance(operator, AbstractOperator):
        raise TypeError(f"operator must be an AbstractOperator, got {type(operator).__name__}")
    if not (isinstance(denoiser, AbstractDenoiser) or callable(denoiser)):
        raise TypeError(f"denoiser must be callable as D(x, sigma), got {type(denoiser).__name__}")
    if not isinstance(schedule, Schedule):
        raise TypeError(f"schedule must be a Schedule, got {type(schedule).__name__}")
    if y.ndim != 3:
        raise ValueError(f"y must be one image [H, W, C] (use restore_batch for batches), got shape {tuple(y.shape)}")
    if x0 is not None and x0.shape != y.shape:
        raise ValueError(f"x0 must have y's shape {tuple(y.shape)}, got {tuple(x0.shape)}")
    dtype = (y if x0 is None else x0).dtype
    schedule = Schedule(*(jnp.asarray(a).astype(dtype) for a in schedule))
    sy = jnp.asarray(sigma_y)
    if not isinstance(sy, jax.core.Tracer) and not (np.isfinite(float(sy)) and float(sy) > 0):
        raise ValueError(f"sigma_y must be finite and > 0, got {float(sy)}")
    for name, a in zip(Schedule._fields, schedule):
        strict = sigma_positive and name == "sigma"
        if not isinstance(a, jax.core.Tracer):
            v = np.asarray(a)
            if np.any(v <= 0 if strict else v < 0) or not np.all(np.isfinite(v)):
                need = "> 0 (this method divides by sigma^2)" if strict else ">= 0"
                raise ValueError(f"schedule.{name} must be finite and {need} in {dtype}, "
                                 f"got values in [{v.min()}, {v.max()}]")
    if not any(isinstance(a, jax.core.Tracer) for a in (sy, *schedule)):
        return sigma_y, schedule
    # Traced values: one run-time check for all of them, before the loop (see _loop).
    sig_ok = (schedule.sigma > 0) if sigma_positive else (schedule.sigma >= 0)
    bad = (~(jnp.isfinite(sy) & (sy > 0))
           | jnp.any(~(jnp.isfinite(schedule.sigma) & sig_ok))
           | jnp.any(jnp.stack([jnp.any(~(jnp.isfinite(a) & (a >= 0))) for a in schedule[1:]])))
    return eqx.error_if((sy, schedule), bad,
                        f"sigma_y must be finite and > 0, schedule.sigma finite and {'>' if sigma_positive else '>='} 0, "
                        f"schedule.alpha and .step_size finite and >= 0")


def _loop(step: Callable, x0, y, operator, schedule: Schedule, key, x_true, clip: bool, track: bool, sigma_y):
    """Scan ``x <- step(x, sigma, alpha, delta, key_k)`` along the schedule.

    ``schedule`` and ``sigma_y`` are the values :func:`_validate` returned (the schedule already in
    ``x0``'s dtype): the loop body trusts them (:func:`~jaxcore.inverse.operators.trusted_values`),
    so it holds no run-time checks; on a GPU a check in the body is a conditional whose predicate
    the host reads at every iteration.
    """
    if key is None:
        key = jax.random.key(0)
    n = schedule.n_iter
    keys = jax.random.split(key, n)

    def body(x, inp):
        sig, alp, dlt, k = inp
        with trusted_values(sig, dlt, sigma_y):
            x = step(x, sig, alp, dlt, k)
        if clip:
            x = jnp.clip(x, 0.0, 1.0)
        out = ()
        if track:
            fid = operator.data_fidelity(x, y, 1.0)
            out = (_psnr(x, x_true) if x_true is not None else jnp.zeros((), x.dtype), fid)
        return x, out

    x, out = jax.lax.scan(body, x0, (schedule.sigma, schedule.alpha, schedule.step_size, keys))
    if track:
        return RestorationResult(x, out[0] if x_true is not None else None, out[1])
    return RestorationResult(x)


def _snore_step(operator, denoiser, y, sigma_y, n_samples, prox, antithetic):
    def regularizer_grad(x, sig, key):
        if antithetic:
            half = standard_normal(key, ((n_samples + 1) // 2,) + x.shape, x.dtype)
            z = jnp.concatenate([half, -half])[:n_samples]
        else:
            z = standard_normal(key, (n_samples,) + x.shape, x.dtype)
        den = denoiser(x[None] + sig * z, sig)
        return (x - jnp.mean(den, axis=0)) / sig**2

    def step(x, sig, alp, dlt, key):
        g = alp * regularizer_grad(x, sig, key)
        if prox:
            return operator.data_prox(x - dlt * g, y, sigma_y, dlt)
        return x - dlt * (operator.data_grad(x, y, sigma_y) + g)

    return step


def snore(
    key,
    y: Float[Array, "H W C"],
    operator: AbstractOperator,
    denoiser: AbstractDenoiser,
    schedule: Schedule,
    sigma_y,
    *,
    x0: Float[Array, "H W C"] | None = None,
    n_samples: int = 1,
    prox: bool = False,
    antithetic: bool = False,
    clip: bool = True,
    x_true: Float[Array, "H W C"] | None = None,
    track: bool = False,
) -> RestorationResult:
    """SNORE: stochastic gradient descent on ``F(x, y) + alpha R_sigma(x)``.

    ``x_{k+1} = x_k - delta_k grad F(x_k) - delta_k alpha_k / sigma_k^2 (x_k - mean_j D_{sigma_k}(x_k + sigma_k z_{k,j}))``,
    ``z_{k,j} ~ N(0, I)``, ``j = 1..n_samples`` (the samples are batched through the
    denoiser). With ``prox=True`` (SNORE-Prox) the data term is handled by its
    proximal operator instead: ``x_{k+1} = prox_{delta_k F}(x_k - delta_k alpha_k grad R)``.

    Args:
        key: PRNG key (the same key gives the same result).
        y: observation ``[H, W, C]``.
        operator: forward model ``A`` (:mod:`jaxcore.inverse.operators`).
        denoiser: ``D(x, sigma)``.
        schedule: per-iteration ``sigma``, ``alpha``, ``delta`` (:func:`constant_schedule`,
            :func:`annealed_schedule`).
        sigma_y: observation noise std (> 0).
        x0: initial iterate (default ``y``).
        n_samples: noise draws averaged per step (static).
        prox: SNORE-Prox (static).
        antithetic: draw ``z`` in pairs ``(z, -z)`` (variance reduction; static).
        clip: project each iterate on [0, 1] (static).
        x_true: clean image for PSNR tracking.
        track: also return per-iteration PSNR and ``F(x_k, y) sigma_y^2`` (static).

    Returns:
        :class:`RestorationResult`.

    Raises:
        TypeError: wrong operator/denoiser/schedule type.
        ValueError: ``y`` not ``[H, W, C]``, ``x0`` shape mismatch, ``sigma_y`` not finite and
            ``> 0``, a schedule entry not finite, ``schedule.sigma <= 0`` or ``schedule.alpha``,
            ``.step_size < 0`` (in the image's dtype); operator shape/channel mismatches (from the
            operator). Under ``jit`` the value checks run once before the loop and raise
            ``equinox``'s runtime error.

    References:
        Renaud, Prost, Leclaire & Papadakis, ICML 2024, Algorithm 1 and eq. (6).
    """
    sigma_y, schedule = _validate(y, operator, denoiser, schedule, sigma_y, x0, sigma_positive=True)
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    step = _snore_step(operator, denoiser, y, sigma_y, n_samples, prox, antithetic)
    return _loop(step, y if x0 is None else x0, y, operator, schedule, key, x_true, clip, track, sigma_y)


def snore_prox(key, y, operator, denoiser, schedule, sigma_y, **kwargs) -> RestorationResult:
    """SNORE-Prox: :func:`snore` with ``prox=True`` (see there)."""
    return snore(key, y, operator, denoiser, schedule, sigma_y, prox=True, **kwargs)


def annealed_snore(key, y, operator, denoiser, sigma_y, *, schedule: Schedule | None = None, **kwargs):
    """Annealed SNORE: :func:`snore` along an :func:`annealed_schedule`.

    ``schedule`` defaults to 16 geometric stages of sigma from ``min(max(3 sigma_y, 30/255), 50/255)``
    down to ``max(1.5 sigma_y, 5/255)`` (10 iterations each, then 140 at the end value),
    ``alpha = 0.4`` and step size ``0.5 sigma_y^2`` (the step on ``F = ||Ax - y||^2 / (2 sigma_y^2)``
    is then half the ``1/L`` step). These defaults were tuned on this package's DnCNN and
    crops of a training image; they are not the paper's values. ``kwargs`` go to :func:`snore`.
    """
    if schedule is None:
        sy = float(sigma_y)
        schedule = annealed_schedule(
            sigma_start=min(max(3 * sy, 30 / 255), 50 / 255), sigma_end=max(1.5 * sy, 5 / 255),
            alpha_start=0.4, alpha_end=0.4, step_size=0.5 * sy**2, iters_per_stage=10, final_iters=140,
        )
    return snore(key, y, operator, denoiser, schedule, sigma_y, **kwargs)


def red(
    y, operator, denoiser, schedule: Schedule, sigma_y, *, x0=None, prox: bool = False, clip: bool = True,
    x_true=None, track: bool = False, key=None,
) -> RestorationResult:
    """RED: gradient descent ``x <- x - delta (grad F(x) + alpha/sigma^2 (x - D_sigma(x)))``.

    ``prox=True`` gives RED-Prox ``x <- prox_{delta F}(x - delta alpha/sigma^2 (x - D_sigma(x)))``.
    Arguments as in :func:`snore` (``key`` is unused: RED is deterministic).

    References:
        Romano, Elad & Milanfar, SIAM J. Imaging Sci. 2017, eq. (38).
    """
    sigma_y, schedule = _validate(y, operator, denoiser, schedule, sigma_y, x0, sigma_positive=True)

    def step(x, sig, alp, dlt, _):
        g = alp * (x - denoiser(x, sig)) / sig**2
        if prox:
            return operator.data_prox(x - dlt * g, y, sigma_y, dlt)
        return x - dlt * (operator.data_grad(x, y, sigma_y) + g)

    return _loop(step, y if x0 is None else x0, y, operator, schedule, key, x_true, clip, track, sigma_y)


def pnp_pgd(
    y, operator, denoiser, schedule: Schedule, sigma_y, *, x0=None, clip: bool = True, x_true=None,
    track: bool = False, key=None,
) -> RestorationResult:
    """Plug-and-play proximal gradient descent ``x <- D_sigma(x - tau grad F(x))``.

    ``tau`` is ``schedule.step_size`` (``alpha`` is unused). Arguments as in :func:`snore`.

    References:
        Venkatakrishnan, Bouman & Wohlberg, GlobalSIP 2013; Hurault et al., ICLR 2022, eq. (5).
    """
    sigma_y, schedule = _validate(y, operator, denoiser, schedule, sigma_y, x0)

    def step(x, sig, alp, dlt, _):
        return denoiser(x - dlt * operator.data_grad(x, y, sigma_y), sig)

    return _loop(step, y if x0 is None else x0, y, operator, schedule, key, x_true, clip, track, sigma_y)


def pnp_hqs(
    y, operator, denoiser, schedule: Schedule, sigma_y, *, x0=None, clip: bool = True, x_true=None,
    track: bool = False, key=None,
) -> RestorationResult:
    """Plug-and-play half-quadratic splitting ``x <- D_sigma(prox_{tau F}(x))``.

    ``tau`` is ``schedule.step_size``. Arguments as in :func:`snore`.

    References:
        Zhang, Li, Zuo, Zhang, Van Gool & Timofte, "Plug-and-play image restoration with
        deep denoiser prior", IEEE TPAMI 2021, eqs. (6)-(7).
    """
    sigma_y, schedule = _validate(y, operator, denoiser, schedule, sigma_y, x0)

    def step(x, sig, alp, dlt, _):
        return denoiser(operator.data_prox(x, y, sigma_y, dlt), sig)

    return _loop(step, y if x0 is None else x0, y, operator, schedule, key, x_true, clip, track, sigma_y)


#: Methods :func:`restore_batch` accepts, by name.
METHODS: dict[str, Callable] = {
    "snore": snore,
    "snore_prox": snore_prox,
    "red": lambda key, *a, **k: red(*a, key=key, **k),
    "red_prox": lambda key, *a, **k: red(*a, key=key, prox=True, **k),
    "pnp_pgd": lambda key, *a, **k: pnp_pgd(*a, key=key, **k),
    "pnp_hqs": lambda key, *a, **k: pnp_hqs(*a, key=key, **k),
}


def restore_batch(
    method: str,
    keys,
    ys: Float[Array, "n_images H W C"],
    operator: AbstractOperator,
    denoiser: AbstractDenoiser,
    schedule: Schedule,
    sigma_y,
    *,
    operator_batched: bool = False,
    x0s=None,
    x_true=None,
    batch_size: int | None = None,
    **kwargs,
) -> RestorationResult:
    """Run ``method`` on a batch of images and seeds, vmapped over both (jit it for speed).

    Args:
        method: a key of :data:`METHODS` ("snore", "snore_prox", "red", "red_prox", "pnp_pgd", "pnp_hqs").
        keys: ``[n_seeds]`` PRNG keys (one run per image and key).
        ys: observations ``[n_images, H, W, C]``.
        operator: forward model, shared by all images, or (``operator_batched=True``)
            an operator whose array leaves carry a leading ``n_images`` axis
            (e.g. from ``jax.vmap(Inpainting)(masks)``).
        denoiser, schedule, sigma_y, kwargs: as in :func:`snore`.
        x0s: initial iterates ``[n_images, H, W, C]`` (default ``ys``).
        x_true: clean images ``[n_images, H, W, C]`` for PSNR tracking.
        batch_size: run the ``n_images x n_seeds`` restorations in vmapped chunks of this many,
            one chunk after the other (``jax.lax.map``), instead of all at once; ``None``
            (default) vmaps all. On CPU, restorations with the DnCNN run faster one at a
            time (``batch_size=1``): one image's activations stay in cache (SNORE, 2 cores,
            paired median speed-up over vmapping all: 1.07x for 2 images x 4 seeds of
            64 x 64, 1.11x for 1 x 2 of 256 x 256, 1.44x for 2 x 2 of 256 x 256); on
            accelerators keep the default. Results are the same either way.

    Returns:
        :class:`RestorationResult` with ``x`` of shape ``[n_images, n_seeds, H, W, C]``
        (traces ``[n_images, n_seeds, n_iter]``).

    Raises:
        ValueError: unknown ``method``; ``ys`` not 4-D; mismatched batch sizes.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {sorted(METHODS)}, got {method!r}")
    if ys.ndim != 4:
        raise ValueError(f"ys must have shape [n_images, H, W, C], got shape {tuple(ys.shape)}")
    for name, arr in (("x0s", x0s), ("x_true", x_true)):
        if arr is not None and arr.shape != ys.shape:
            raise ValueError(f"{name} must have ys's shape {tuple(ys.shape)}, got {tuple(arr.shape)}")
    fn = METHODS[method]
    x0s = ys if x0s is None else x0s
    op_axes = jax.tree.map(lambda _: 0, operator) if operator_batched else None

    def one(key, y, op, x0, xt):
        return fn(key, y, op, denoiser, schedule, sigma_y, x0=x0, x_true=xt, **kwargs)

    if batch_size is None:
        over_seeds = jax.vmap(one, in_axes=(0, None, None, None, None))
        over_images = jax.vmap(over_seeds, in_axes=(None, 0, op_axes, 0, 0 if x_true is not None else None))
        return over_images(keys, ys, operator, x0s, x_true)
    if not (isinstance(batch_size, (int, np.integer)) and batch_size >= 1):
        raise ValueError(f"batch_size must be a positive integer or None, got {batch_size!r}")
    n_img, n_seeds = ys.shape[0], keys.shape[0]
    img = jnp.repeat(jnp.arange(n_img), n_seeds)  # run r: image r // n_seeds, seed r % n_seeds
    seed = jnp.tile(jnp.arange(n_seeds), n_img)

    def run(idx):
        i, j = idx
        op = jax.tree.map(lambda a: a[i], operator) if operator_batched else operator
        return one(keys[j], ys[i], op, x0s[i], None if x_true is None else x_true[i])

    out = jax.lax.map(run, (img, seed), batch_size=int(batch_size))
    return jax.tree.map(lambda a: a.reshape((n_img, n_seeds) + a.shape[1:]), out)
