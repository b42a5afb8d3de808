"""SNORE and plug-and-play baselines as compiled ``lax.scan`` loops.

Problem: ``min_x F(x, y) + alpha R_sigma(x)`` with ``F(x, y) = ||A x - y||^2 / (2 sigma_y^2)``
(:mod:`jaxcore.inverse.operators`) and the SNORE regulariser
``R_sigma(x) = -E_z[log p_sigma(x + sigma z)]``, ``z ~ N(0, I)``, whose gradient is
``(1/sigma^2) E_z[x - D_sigma(x + sigma z)]`` (Tweedie), ``D_sigma`` an MMSE denoiser.

Algorithms (one image ``[H, W, C]``; batch with :func:`restore_batch`, which vmaps
over images and over random seeds):

- :func:`snore`: ``x <- x - delta grad F(x) - delta alpha/sigma^2 (x - mean_j D_sigma(x + sigma z_j))``
  (``num_samples`` noise draws per step, vmapped), with per-iteration schedules of
  ``sigma``, ``alpha`` and ``delta`` (:func:`constant_schedule`, :func:`annealed_schedule`);
  ``prox=True`` gives SNORE-Prox: ``x <- prox_{delta F}(x - delta alpha/sigma^2 (x - D(x + sigma z)))``.
- :func:`annealed_snore`: SNORE along :func:`annealed_schedule`.
- :func:`red`: RED gradient descent ``x <- x - delta (grad F(x) + alpha/sigma^2 (x - D_sigma(x)))``
  (``prox=True``: RED-Prox).
- :func:`pnp_pgd`: ``x <- D_sigma(x - tau grad F(x))``; :func:`pnp_hqs`: ``x <- D_sigma(prox_{tau F}(x))``.

Every method has the one signature ``method(key, y, operator, denoiser, schedule, sigma_y, **options)``
(the deterministic ones, RED and PnP, accept ``key=None`` and ignore a key), so :data:`METHODS` holds
the functions themselves. Each validates its arguments on the host, then runs one module-level
compiled program (``equinox.filter_jit``): no user ``jit`` is needed, and a second call with the
same shapes and options does not recompile.

Dtypes: images are float arrays (integer images are refused: convert explicitly, e.g. ``y / 255``);
a method runs in the dtype of ``x0`` (default ``y``), except half precision (float16, bfloat16),
which runs in float32 internally (the schedule must still be finite in the half dtype) and returns
``x`` cast back to the half dtype (the histories stay float32). Every check runs before the loop:
the loop bodies hold no run-time checks.

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
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import (
    Progress,
    ProgressArg,
    check_bool,
    check_choice,
    check_int,
    check_key,
    check_ndim,
    check_progress,
    check_scalar,
    error_if,
    expected,
    is_concrete,
    trusted_values,
)

from ._checks import as_array, compute_dtype
from .denoisers import AbstractDenoiser
from .metrics import _psnr
from .operators import AbstractOperator, _normal

__all__ = [
    "Schedule",
    "RestorationResult",
    "constant_schedule",
    "annealed_schedule",
    "recommended_schedule",
    "RECOMMENDED",
    "snore",
    "snore_prox",
    "annealed_snore",
    "red",
    "red_prox",
    "pnp_pgd",
    "pnp_hqs",
    "restore_batch",
    "METHODS",
]


class Schedule(NamedTuple):
    """Per-step parameters of an iterative method (all ``[num_steps]`` arrays).

    Attributes:
        sigma: denoiser noise level (pixel units of a [0, 1] image).
        alpha: regularisation weight.
        step_size: ``delta`` (gradient step) or ``tau`` (PnP step), in the units of ``x`` per unit
            gradient of ``F`` (so ``sigma_y^2`` is the ``1/L`` step of a normalised operator).

    Examples:
        >>> from jaxcore.inverse import constant_schedule
        >>> constant_schedule(3, sigma=0.1).num_steps
        3
    """

    sigma: Array
    alpha: Array
    step_size: Array

    @property
    def num_steps(self) -> int:
        """The number of steps ``K`` (the arrays' length)."""
        return int(self.sigma.shape[0])


class RestorationResult(NamedTuple):
    """Output of a restoration loop.

    Attributes:
        x: the final iterate ``[..., H, W, C]``.
        psnr: ``[..., num_steps]`` PSNR (dB) of each iterate against ``x_true`` (``track=True``
            with ``x_true``), else None.
        fidelity: ``[..., num_steps]`` data term ``F(x_k, y) sigma_y^2 = ||A x_k - y||^2 / 2`` of
            each iterate (``track=True``), else None.
    """

    x: Array
    psnr: Array | None = None
    fidelity: Array | None = None


def constant_schedule(num_steps: int, *, sigma: float, alpha: float = 1.0, step_size: float = 1.0,
                      dtype=None) -> Schedule:
    """The same ``(sigma, alpha, step_size)`` at each of ``num_steps`` steps.

    Args:
        num_steps: number of steps ``K >= 1``.
        sigma: denoiser noise level (pixel units of a [0, 1] image), >= 0.
        alpha: regularisation weight, >= 0.
        step_size: step size, >= 0.
        dtype: float dtype of the arrays (default: the default float).

    Returns:
        A :class:`Schedule` of ``[num_steps]`` arrays.

    Raises:
        TypeError: ``num_steps`` not an int; ``dtype`` not a float dtype.
        ValueError: ``num_steps < 1`` or a parameter not finite and >= 0 (or not finite in ``dtype``).

    Examples:
        >>> from jaxcore.inverse import constant_schedule
        >>> s = constant_schedule(4, sigma=0.05, alpha=0.5, step_size=1e-3)
        >>> s.sigma.shape, float(s.alpha[0])
        ((4,), 0.5)
    """
    num_steps = check_int(num_steps, "num_steps", minimum=1)
    for name, v in (("sigma", sigma), ("alpha", alpha), ("step_size", step_size)):
        check_scalar(v, name, nonnegative=True)
    dtype = _check_dtype(dtype)
    for name, v in (("sigma", sigma), ("alpha", alpha), ("step_size", step_size)):
        _check_survives_cast(v, name, dtype)
    full = lambda v: jnp.full((num_steps,), v, dtype)  # noqa: E731
    return Schedule(full(sigma), full(alpha), full(step_size))


def _check_dtype(dtype) -> jnp.dtype:
    """``dtype`` (None: the default float) checked to be a float dtype."""
    if dtype is None:
        return jnp.dtype(jnp.result_type(float))
    try:
        d = jnp.dtype(dtype)
    except TypeError:
        raise TypeError(expected("dtype", "a float dtype", dtype)) from None
    if not jnp.issubdtype(d, jnp.floating):
        raise TypeError(expected("dtype", "a float dtype", str(d)))
    return d


def _check_survives_cast(v, name: str, dtype) -> None:
    """ValueError if a finite value becomes inf in ``dtype`` (1e5 in float16)."""
    if abs(float(v)) > float(jnp.finfo(dtype).max):
        raise ValueError(expected(name, f"a value finite in {jnp.dtype(dtype).name}", v))


def annealed_schedule(
    *,
    sigma_start: float,
    sigma_end: float,
    alpha_start: float,
    alpha_end: float,
    step_size: float,
    num_stages: int = 16,
    steps_per_stage: int = 100,
    final_steps: int = 300,
    spacing: str = "geometric",
    dtype=None,
) -> Schedule:
    """Annealed-SNORE schedule: ``num_stages`` stages from large to small ``sigma``, then a final phase.

    Stage ``i`` (``i = 0..num_stages-1``) runs ``steps_per_stage`` steps at
    ``sigma_i`` and ``alpha_i`` interpolated from the start to the end values
    (geometrically or linearly), then ``final_steps`` steps at the end
    values; the step size is constant.

    Args:
        sigma_start, sigma_end: first and last stage's noise level (pixel units), >= 0 (> 0 when geometric).
        alpha_start, alpha_end: first and last stage's regularisation weight, >= 0 (> 0 when geometric).
        step_size: the constant step size, >= 0.
        num_stages: number of stages, >= 1.
        steps_per_stage: steps per stage, >= 0.
        final_steps: steps at the end values, >= 0.
        spacing: "geometric" or "linear" interpolation between the stages.
        dtype: float dtype of the arrays.

    Returns:
        A :class:`Schedule` of ``num_stages * steps_per_stage + final_steps`` steps.

    Raises:
        TypeError: a count not an int; ``dtype`` not a float dtype.
        ValueError: counts out of range or a total of 0 steps, a value not finite and >= 0 (> 0
            for geometric spacing, or not finite in ``dtype``), or an unknown ``spacing``.

    References:
        Renaud et al., ICML 2024, Algorithm 2 (Annealed SNORE).

    Examples:
        >>> from jaxcore.inverse import annealed_schedule
        >>> s = annealed_schedule(sigma_start=0.2, sigma_end=0.05, alpha_start=1.0, alpha_end=1.0,
        ...                       step_size=0.1, num_stages=3, steps_per_stage=2, final_steps=1)
        >>> [round(float(v), 3) for v in s.sigma]
        [0.2, 0.2, 0.1, 0.1, 0.05, 0.05, 0.05]
    """
    num_stages = check_int(num_stages, "num_stages", minimum=1)
    steps_per_stage = check_int(steps_per_stage, "steps_per_stage", minimum=0)
    final_steps = check_int(final_steps, "final_steps", minimum=0)
    if num_stages * steps_per_stage + final_steps < 1:
        raise ValueError(expected("num_stages * steps_per_stage + final_steps", "a total of at least 1 step",
                                  f"{num_stages} * {steps_per_stage} + {final_steps}", raw=True))
    spacing = check_choice(spacing, "spacing", ("geometric", "linear"))
    geometric = spacing == "geometric"
    for name, v in (("sigma_start", sigma_start), ("sigma_end", sigma_end), ("alpha_start", alpha_start),
                    ("alpha_end", alpha_end)):
        check_scalar(v, name, positive=geometric, nonnegative=not geometric)
    check_scalar(step_size, "step_size", nonnegative=True)
    t = np.linspace(0.0, 1.0, num_stages) if num_stages > 1 else np.ones(1)
    if geometric:
        sig = sigma_start * (sigma_end / sigma_start) ** t
        alp = alpha_start * (alpha_end / alpha_start) ** t
    else:
        sig = sigma_start + (sigma_end - sigma_start) * t
        alp = alpha_start + (alpha_end - alpha_start) * t
    sig = np.concatenate([np.repeat(sig, steps_per_stage), np.full(final_steps, sigma_end)])
    alp = np.concatenate([np.repeat(alp, steps_per_stage), np.full(final_steps, alpha_end)])
    dtype = _check_dtype(dtype)
    for name, v in (("sigma_start", sigma_start), ("sigma_end", sigma_end), ("alpha_start", alpha_start),
                    ("alpha_end", alpha_end), ("step_size", step_size)):
        _check_survives_cast(v, name, dtype)
    return Schedule(jnp.asarray(sig, dtype), jnp.asarray(alp, dtype), jnp.full(sig.shape, step_size, dtype))


#: The schedules of the ``inverse.restoration`` benchmark, per method, tuned by hand for the shipped DnCNN
#: on two 64x64 crops of the training image "astronaut" (Gaussian blur, sigma_y = 10/255). ``sigma`` is the
#: denoiser noise level in multiples of sigma_y; ``step`` the step size in multiples of sigma_y^2 (the data
#: term is ||Ax - y||^2 / (2 sigma_y^2), so step 1 is the 1/L step of an operator with ||A|| <= 1).
RECOMMENDED = {
    "snore": dict(sigma=2.0, alpha=0.7, step=0.5, num_steps=300),
    "snore_prox": dict(sigma=2.0, alpha=0.7, step=0.5, num_steps=300),
    "annealed_snore": dict(sigma_start=4.0, sigma_end=2.0, alpha=0.7, step=0.5, num_stages=16, steps_per_stage=10,
                           final_steps=140),
    "red": dict(sigma=2.0, alpha=0.7, step=0.5, num_steps=300),
    "red_prox": dict(sigma=2.0, alpha=0.7, step=0.5, num_steps=300),
    "pnp_pgd": dict(sigma=2.0, alpha=1.0, step=1.0, num_steps=50),
    "pnp_hqs": dict(sigma=2.0, alpha=1.0, step=8.0, num_steps=50),
}


def recommended_schedule(method: str, sigma_y: float, *, iteration_scale: float = 1.0, dtype=None) -> Schedule:
    """The benchmarked schedule of ``method`` for an observation noise ``sigma_y``, with the shipped denoisers.

    The settings of jaxcore's restoration benchmark (:data:`RECOMMENDED`): denoiser level
    ``sigma = 2 sigma_y`` (annealed SNORE: ``4 sigma_y`` down to ``2 sigma_y``, capped at 50/255),
    ``alpha = 0.7`` for SNORE and RED, and step sizes of ``0.5 sigma_y^2`` (SNORE, RED), ``sigma_y^2``
    (PnP-PGD) and ``8 sigma_y^2`` (PnP-HQS); 300 iterations (SNORE, RED), 16 x 10 + 140 (annealed SNORE),
    50 (PnP). They were tuned by hand for the shipped DnCNN on two crops of one training image (Gaussian blur,
    ``sigma_y = 10/255``), not on the evaluation images: a starting point, not an optimum.

    Args:
        method: a key of :data:`RECOMMENDED` ("snore", "snore_prox", "annealed_snore", "red", "red_prox",
            "pnp_pgd", "pnp_hqs").
        sigma_y: observation noise std (pixel units of a [0, 1] image), > 0.
        iteration_scale: multiplies every iteration count (rounded, at least 1), > 0.
        dtype: float dtype of the arrays (default: the default float).

    Returns:
        A :class:`Schedule` for ``method``.

    Raises:
        ValueError: unknown ``method``; ``sigma_y`` or ``iteration_scale`` not finite and > 0.

    Examples:
        >>> from jaxcore.inverse import recommended_schedule
        >>> s = recommended_schedule("snore", 10 / 255)
        >>> s.num_steps, round(float(s.sigma[0]) * 255, 3), float(s.alpha[0])
        (300, 20.0, 0.7)
    """
    method = check_choice(method, "method", sorted(RECOMMENDED))
    sigma_y = float(check_scalar(sigma_y, "sigma_y", positive=True))
    scale = float(check_scalar(iteration_scale, "iteration_scale", positive=True))
    mp = RECOMMENDED[method]
    steps = lambda n: max(1, int(round(n * scale)))  # noqa: E731
    if method == "annealed_snore":
        return annealed_schedule(
            sigma_start=min(mp["sigma_start"] * sigma_y, 50 / 255), sigma_end=mp["sigma_end"] * sigma_y,
            alpha_start=mp["alpha"], alpha_end=mp["alpha"], step_size=mp["step"] * sigma_y**2,
            num_stages=mp["num_stages"], steps_per_stage=steps(mp["steps_per_stage"]),
            final_steps=steps(mp["final_steps"]), dtype=dtype)
    return constant_schedule(steps(mp["num_steps"]), sigma=mp["sigma"] * sigma_y, alpha=mp["alpha"],
                             step_size=mp["step"] * sigma_y**2, dtype=dtype)


def _check_types(operator, denoiser, schedule) -> None:
    if not isinstance(operator, AbstractOperator):
        raise TypeError(expected("operator", "an AbstractOperator", type(operator).__name__, raw=True))
    if not (isinstance(denoiser, AbstractDenoiser) or callable(denoiser)):
        raise TypeError(expected("denoiser", "a denoiser callable as D(x, sigma)", type(denoiser).__name__, raw=True))
    if not isinstance(schedule, Schedule):
        raise TypeError(expected("schedule", "a Schedule", type(schedule).__name__, raw=True))
    lengths = set()
    for name, a in zip(Schedule._fields, schedule):
        a = as_array(a, f"schedule.{name}", integers=True, finite=False)
        if a.ndim != 1 or a.shape[0] < 1:
            raise ValueError(expected(f"schedule.{name}", "a 1-d array [num_steps], num_steps >= 1",
                                      f"shape {tuple(a.shape)}", raw=True))
        lengths.add(a.shape[0])
    if len(lengths) != 1:
        raise ValueError(expected("schedule", "sigma, alpha and step_size of one length num_steps",
                                  f"lengths {[int(np.shape(a)[0]) for a in schedule]}", raw=True))


def _validate_values(schedule: Schedule, sigma_y, dtype, *, sigma_positive: bool):
    """Check ``sigma_y`` and the schedule; return them as the loop uses them.

    The schedule is cast to the dtype the loop runs in first (a float16 image turns a large
    float32 value into inf). Concrete values are checked here in Python; traced ones by one
    run-time check, before the loop, which then trusts them (see :func:`_loop`); values a caller
    already checked and trusts (:func:`restore_batch`) are returned as they are.
    ``sigma_positive``: the method divides by ``sigma^2`` (SNORE, RED), so ``sigma > 0``.
    """
    schedule = Schedule(*(a if isinstance(a, jax.Array) and a.dtype == dtype else jnp.asarray(a).astype(dtype)
                          for a in schedule))
    sy = sigma_y if isinstance(sigma_y, jax.Array) else as_array(sigma_y, "sigma_y", integers=True, finite=False)
    if sy.ndim != 0:
        raise ValueError(expected("sigma_y", "a scalar", f"shape {tuple(sy.shape)}", raw=True))
    if is_concrete(sy):
        check_scalar(sy, "sigma_y", positive=True)
    for name, a in zip(Schedule._fields, schedule):
        strict = sigma_positive and name == "sigma"
        if is_concrete(a):
            v = np.asarray(a)
            if np.any(v <= 0 if strict else v < 0) or not np.all(np.isfinite(v)):
                need = "> 0 (this method divides by sigma^2)" if strict else ">= 0"
                raise ValueError(expected(f"schedule.{name}", f"finite values {need} in {dtype}",
                                          f"values in [{v.min()}, {v.max()}]", raw=True))
    if is_concrete(sy, schedule):
        return sy, schedule
    # Traced values: one run-time check for all of them, before the loop (see _loop).
    sig_ok = (schedule.sigma > 0) if sigma_positive else (schedule.sigma >= 0)
    bad = (~(jnp.isfinite(sy) & (sy > 0))
           | jnp.any(~(jnp.isfinite(schedule.sigma) & sig_ok))
           | jnp.any(jnp.stack([jnp.any(~(jnp.isfinite(a) & (a >= 0))) for a in schedule[1:]])))
    return error_if((sy, schedule), bad, "sigma_y, schedule",
                    f"sigma_y finite and > 0, schedule.sigma finite and {'>' if sigma_positive else '>='} 0, "
                    "schedule.alpha and schedule.step_size finite and >= 0")


def _validate(key, y, operator, denoiser, schedule, sigma_y, x0, x_true, *, random: bool, sigma_positive: bool):
    """Check the arguments of a method; return ``(key, y, x0, x_true, sigma_y, schedule)`` as the loop uses them."""
    if random or key is not None:
        key = check_key(key)
    _check_types(operator, denoiser, schedule)
    y = as_array(y, "y")
    check_ndim(y, "y", 3, "one image [H, W, C] (use restore_batch for a batch)")
    x0 = None if x0 is None else as_array(x0, "x0")
    x_true = None if x_true is None else as_array(x_true, "x_true")
    for name, arr in (("x0", x0), ("x_true", x_true)):
        if arr is not None and tuple(arr.shape) != tuple(y.shape):
            raise ValueError(expected(name, f"y's shape {tuple(y.shape)}", f"shape {tuple(arr.shape)}", raw=True))
    dtype = (y if x0 is None else x0).dtype
    sigma_y, schedule = _validate_values(schedule, sigma_y, dtype, sigma_positive=sigma_positive)
    return key, y, x0, x_true, sigma_y, schedule


def _loop(step: Callable, x0, y, operator, schedule: Schedule, key, x_true, clip: bool, track: bool, sigma_y,
          progress: ProgressArg = False, description: str = "restoration"):
    """Scan ``x <- step(x, sigma, alpha, delta, key_k)`` along the schedule (``key_k`` None without a key).

    ``schedule`` and ``sigma_y`` were checked by the caller (:func:`_validate`, the schedule
    already in ``x0``'s dtype): the loop body trusts them (:func:`jaxcore._util.trusted_values`),
    so it holds no run-time checks; on a GPU a check in the body is a conditional whose predicate
    the host reads at every iteration.
    """
    xs = (schedule.sigma, schedule.alpha, schedule.step_size, jnp.arange(schedule.num_steps))
    if key is not None:
        xs = xs + (jax.random.split(key, schedule.num_steps),)
    prog = Progress(progress, schedule.num_steps, description)

    def body(x, inp):
        sig, alp, dlt, index = inp[:4]
        k = inp[4] if key is not None else None
        with trusted_values(sig, dlt, sigma_y):
            x = step(x, sig, alp, dlt, k)
        if clip:
            x = jnp.clip(x, 0.0, 1.0)
        out = ()
        if track:
            fid = operator.data_fidelity(x, y, 1.0)
            out = (_psnr(x, x_true, 1.0) if x_true is not None else jnp.zeros((), x.dtype), fid)
        prog.update(index)  # the step index only: under restore_batch's vmap, one report for the batch
        return x, out

    x, out = jax.lax.scan(body, x0, xs)
    if track:
        return RestorationResult(x, out[0] if x_true is not None else None, out[1])
    return RestorationResult(x)


def _snore_step(operator, denoiser, y, sigma_y, num_samples, prox, antithetic):
    def regularizer_grad(x, sig, key):
        if antithetic:
            half = _normal(key, ((num_samples + 1) // 2,) + x.shape, x.dtype)
            z = jnp.concatenate([half, -half])[:num_samples]
        else:
            z = _normal(key, (num_samples,) + x.shape, x.dtype)
        den = denoiser(x[None] + sig * z, sig)
        return (x - jnp.mean(den, axis=0)) / sig**2

    def step(x, sig, alp, dlt, key):
        g = alp * regularizer_grad(x, sig, key)
        if prox:
            return operator.data_prox(x - dlt * g, y, sigma_y, dlt)
        return x - dlt * (operator.data_grad(x, y, sigma_y) + g)

    return step


def _red_step(operator, denoiser, y, sigma_y, prox):
    def step(x, sig, alp, dlt, _):
        g = alp * (x - denoiser(x, sig)) / sig**2
        if prox:
            return operator.data_prox(x - dlt * g, y, sigma_y, dlt)
        return x - dlt * (operator.data_grad(x, y, sigma_y) + g)

    return step


def _pnp_pgd_step(operator, denoiser, y, sigma_y):
    def step(x, sig, alp, dlt, _):
        return denoiser(x - dlt * operator.data_grad(x, y, sigma_y), sig)

    return step


def _pnp_hqs_step(operator, denoiser, y, sigma_y):
    def step(x, sig, alp, dlt, _):
        return denoiser(operator.data_prox(x, y, sigma_y, dlt), sig)

    return step


def _restore(kind: str, key, y, x0, operator, denoiser, schedule, sigma_y, x_true, *, num_samples: int = 1,
             prox: bool = False, antithetic: bool = False, clip: bool = True, track: bool = False,
             progress: ProgressArg = False):
    """One restoration of ``y`` by method ``kind`` on checked arguments (traced code, no checks).

    Runs in ``x0``'s (default ``y``'s) dtype, half precision in float32; ``x`` is cast back."""
    out_dtype = (y if x0 is None else x0).dtype
    work = compute_dtype(out_dtype)
    cast = lambda a: None if a is None else a.astype(work)  # noqa: E731
    y, x0, x_true, sigma_y = cast(y), cast(x0), cast(x_true), cast(sigma_y)
    schedule = Schedule(*(a.astype(work) for a in schedule))
    res = _restore_cast(kind, key, y, x0, operator, denoiser, schedule, sigma_y, x_true, num_samples=num_samples,
                        prox=prox, antithetic=antithetic, clip=clip, track=track, progress=progress)
    return res._replace(x=res.x.astype(out_dtype))


def _restore_cast(kind, key, y, x0, operator, denoiser, schedule, sigma_y, x_true, *, num_samples, prox,
                  antithetic, clip, track, progress=False):
    if kind == "snore":
        step = _snore_step(operator, denoiser, y, sigma_y, num_samples, prox, antithetic)
    elif kind == "red":
        step, key = _red_step(operator, denoiser, y, sigma_y, prox), None
    elif kind == "pnp_pgd":
        step, key = _pnp_pgd_step(operator, denoiser, y, sigma_y), None
    else:
        step, key = _pnp_hqs_step(operator, denoiser, y, sigma_y), None
    return _loop(step, y if x0 is None else x0, y, operator, schedule, key, x_true, clip, track, sigma_y,
                 progress, kind)


#: The compiled program of every method (one compilation per method, options, operator type and shapes).
_restore_program = eqx.filter_jit(_restore)


def _options(clip, track, progress=False, **more):
    out = {"clip": check_bool(clip, "clip"), "track": check_bool(track, "track"),
           "progress": check_progress(progress)}
    for name, v in more.items():
        out[name] = check_bool(v, name)
    return out


def snore(
    key: PRNGKeyArray,
    y: Float[Array, "H W C"],
    operator: AbstractOperator,
    denoiser: AbstractDenoiser | Callable,
    schedule: Schedule,
    sigma_y,
    *,
    x0: Float[Array, "H W C"] | None = None,
    num_samples: int = 1,
    prox: bool = False,
    antithetic: bool = False,
    clip: bool = True,
    x_true: Float[Array, "H W C"] | None = None,
    track: bool = False,
    progress: ProgressArg = False,
) -> RestorationResult:
    """SNORE: stochastic gradient descent on ``F(x, y) + alpha R_sigma(x)``.

    ``x_{k+1} = x_k - delta_k grad F(x_k) - delta_k alpha_k / sigma_k^2 (x_k - mean_j D_{sigma_k}(x_k + sigma_k z_{k,j}))``,
    ``z_{k,j} ~ N(0, I)``, ``j = 1..num_samples`` (the samples are batched through the
    denoiser). With ``prox=True`` (SNORE-Prox) the data term is handled by its
    proximal operator instead: ``x_{k+1} = prox_{delta_k F}(x_k - delta_k alpha_k grad R)``.

    Args:
        key: PRNG key (the same key gives the same result).
        y: observation ``[H, W, C]``, pixels nominally in [0, 1].
        operator: forward model ``A`` (:mod:`jaxcore.inverse.operators`).
        denoiser: ``D(x, sigma)``.
        schedule: per-step ``sigma``, ``alpha``, ``delta`` (:func:`constant_schedule`,
            :func:`annealed_schedule`).
        sigma_y: observation noise std (pixel units, > 0).
        x0: initial iterate (default ``y``).
        num_samples: noise draws averaged per step (static).
        prox: SNORE-Prox (static).
        antithetic: draw ``z`` in pairs ``(z, -z)`` (variance reduction; static).
        clip: project each iterate on [0, 1] (static).
        x_true: clean image for PSNR tracking.
        track: also return per-step PSNR and ``F(x_k, y) sigma_y^2`` (static).
        progress: ``False`` (default), ``True`` (a progress bar over the steps) or
            ``fn(steps_done, {})``, called on the host about 100 times per run.

    Returns:
        :class:`RestorationResult`: ``x [H, W, C]`` in ``y``'s (or ``x0``'s) dtype, and with
        ``track`` the ``[num_steps]`` histories.

    Raises:
        TypeError: ``key`` not a PRNG key; wrong operator/denoiser/schedule type; ``y``, ``x0``,
            ``x_true`` not float arrays (None, integers, complex); a flag not a bool.
        ValueError: ``y`` not ``[H, W, C]`` or with a NaN or inf pixel, ``x0`` or ``x_true`` shape
            mismatch, schedule arrays not 1-d of one length, ``sigma_y`` not a finite scalar
            ``> 0``, a schedule entry not finite, ``schedule.sigma <= 0`` or
            ``schedule.alpha``, ``.step_size < 0`` (in the image's dtype), ``num_samples < 1``;
            operator shape/channel mismatches (from the operator). Under ``jit`` the value checks
            run once before the loop and raise ``equinox``'s runtime error.

    References:
        Renaud, Prost, Leclaire & Papadakis, "Plug-and-play image restoration with stochastic
        denoising regularization", ICML 2024, Algorithm 1 and eq. (6).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.inverse import GaussianMMSEDenoiser, Identity, constant_schedule, snore
        >>> y = jnp.full((4, 4, 1), 0.6)
        >>> out = snore(jax.random.key(0), y, Identity(), GaussianMMSEDenoiser(0.5, 0.01),
        ...             constant_schedule(20, sigma=0.05, alpha=1.0, step_size=1e-3), 0.05)
        >>> out.x.shape, round(float(out.x.mean()), 2)  # about the noiseless fixed point 0.583 (see red)
        ((4, 4, 1), 0.58)
    """
    key, y, x0, x_true, sigma_y, schedule = _validate(key, y, operator, denoiser, schedule, sigma_y, x0, x_true,
                                                      random=True, sigma_positive=True)
    num_samples = check_int(num_samples, "num_samples", minimum=1)
    opts = _options(clip, track, progress, prox=prox, antithetic=antithetic)
    return _restore_program("snore", key, y, x0, operator, denoiser, schedule, sigma_y, x_true,
                            num_samples=num_samples, **opts)


def snore_prox(key: PRNGKeyArray, y, operator, denoiser, schedule: Schedule, sigma_y, **options) -> RestorationResult:
    """SNORE-Prox: :func:`snore` with ``prox=True``, ``x <- prox_{delta F}(x - delta alpha grad R_sigma(x))``.

    Arguments, returns and errors as :func:`snore` (``options`` are its keyword options).

    References:
        Renaud et al., ICML 2024, Algorithm 1 (SNORE-Prox variant).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.inverse import GaussianMMSEDenoiser, Identity, constant_schedule, snore_prox
        >>> out = snore_prox(jax.random.key(0), jnp.full((4, 4, 1), 0.6), Identity(),
        ...                  GaussianMMSEDenoiser(0.5, 0.01), constant_schedule(5, sigma=0.05, step_size=1e-3), 0.05)
        >>> out.x.shape
        (4, 4, 1)
    """
    return snore(key, y, operator, denoiser, schedule, sigma_y, prox=True, **options)


def annealed_snore(key: PRNGKeyArray, y, operator, denoiser, schedule: Schedule | None, sigma_y,
                   **options) -> RestorationResult:
    """Annealed SNORE: :func:`snore` along an :func:`annealed_schedule`.

    ``schedule=None`` gives 16 geometric stages of sigma from ``min(max(3 sigma_y, 30/255), 50/255)``
    down to ``max(1.5 sigma_y, 5/255)`` (10 steps each, then 140 at the end value),
    ``alpha = 0.4`` and step size ``0.5 sigma_y^2`` (the step on ``F = ||Ax - y||^2 / (2 sigma_y^2)``
    is then half the ``1/L`` step). These defaults were tuned on this package's DnCNN and
    crops of a training image; they are not the paper's values. ``options`` go to :func:`snore`.

    Args:
        key, y, operator, denoiser, sigma_y: as in :func:`snore` (``sigma_y`` concrete when
            ``schedule`` is None).
        schedule: an annealed :class:`Schedule`, or None for the default above.

    Returns:
        :class:`RestorationResult`, as :func:`snore`.

    Raises:
        As :func:`snore`; TypeError for a traced ``sigma_y`` with ``schedule=None``.

    References:
        Renaud et al., ICML 2024, Algorithm 2 (Annealed SNORE).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.inverse import GaussianMMSEDenoiser, Identity, annealed_snore
        >>> out = annealed_snore(jax.random.key(0), jnp.full((4, 4, 1), 0.6), Identity(),
        ...                      GaussianMMSEDenoiser(0.5, 0.01), None, 0.05)
        >>> out.x.shape
        (4, 4, 1)
    """
    if schedule is None:
        sy = check_scalar(sigma_y, "sigma_y", positive=True)
        schedule = annealed_schedule(
            sigma_start=min(max(3 * sy, 30 / 255), 50 / 255), sigma_end=max(1.5 * sy, 5 / 255),
            alpha_start=0.4, alpha_end=0.4, step_size=0.5 * sy**2, steps_per_stage=10, final_steps=140,
        )
    return snore(key, y, operator, denoiser, schedule, sigma_y, **options)


def red(
    key: PRNGKeyArray | None,
    y: Float[Array, "H W C"],
    operator: AbstractOperator,
    denoiser: AbstractDenoiser | Callable,
    schedule: Schedule,
    sigma_y,
    *,
    x0: Float[Array, "H W C"] | None = None,
    prox: bool = False,
    clip: bool = True,
    x_true: Float[Array, "H W C"] | None = None,
    track: bool = False,
    progress: ProgressArg = False,
) -> RestorationResult:
    """RED: gradient descent ``x <- x - delta (grad F(x) + alpha/sigma^2 (x - D_sigma(x)))``.

    ``prox=True`` gives RED-Prox ``x <- prox_{delta F}(x - delta alpha/sigma^2 (x - D_sigma(x)))``.

    Args:
        key: None, or a PRNG key, which is not used: RED is deterministic (the argument keeps
            the one signature of :data:`METHODS`).
        y, operator, denoiser, schedule, sigma_y, x0, clip, x_true, track, progress: as in :func:`snore`.
        prox: RED-Prox (static).

    Returns:
        :class:`RestorationResult`, as :func:`snore`.

    Raises:
        As :func:`snore` (``key`` neither None nor a PRNG key is a TypeError).

    References:
        Romano, Elad & Milanfar, "The little engine that could: regularization by denoising (RED)",
        SIAM J. Imaging Sci. 2017, eq. (38).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import GaussianMMSEDenoiser, Identity, constant_schedule, red
        >>> out = red(None, jnp.full((4, 4, 1), 0.6), Identity(), GaussianMMSEDenoiser(0.5, 0.01),
        ...           constant_schedule(20, sigma=0.05, step_size=1e-3), 0.05)
        >>> bool(jnp.all((out.x > 0.5) & (out.x < 0.6)))
        True
    """
    key, y, x0, x_true, sigma_y, schedule = _validate(key, y, operator, denoiser, schedule, sigma_y, x0, x_true,
                                                      random=False, sigma_positive=True)
    return _restore_program("red", None, y, x0, operator, denoiser, schedule, sigma_y, x_true,
                            **_options(clip, track, progress, prox=prox))


def red_prox(key: PRNGKeyArray | None, y, operator, denoiser, schedule: Schedule, sigma_y,
             **options) -> RestorationResult:
    """RED-Prox: :func:`red` with ``prox=True``, ``x <- prox_{delta F}(x - delta alpha/sigma^2 (x - D_sigma(x)))``.

    Arguments, returns and errors as :func:`red`.

    References:
        Romano, Elad & Milanfar, SIAM J. Imaging Sci. 2017 (proximal variant, Section 5).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import GaussianMMSEDenoiser, Identity, constant_schedule, red_prox
        >>> out = red_prox(None, jnp.full((4, 4, 1), 0.6), Identity(), GaussianMMSEDenoiser(0.5, 0.01),
        ...                constant_schedule(5, sigma=0.05, step_size=1e-3), 0.05)
        >>> out.x.shape
        (4, 4, 1)
    """
    return red(key, y, operator, denoiser, schedule, sigma_y, prox=True, **options)


def pnp_pgd(
    key: PRNGKeyArray | None,
    y: Float[Array, "H W C"],
    operator: AbstractOperator,
    denoiser: AbstractDenoiser | Callable,
    schedule: Schedule,
    sigma_y,
    *,
    x0: Float[Array, "H W C"] | None = None,
    clip: bool = True,
    x_true: Float[Array, "H W C"] | None = None,
    track: bool = False,
    progress: ProgressArg = False,
) -> RestorationResult:
    """Plug-and-play proximal gradient descent ``x <- D_sigma(x - tau grad F(x))``.

    ``tau`` is ``schedule.step_size`` (``alpha`` is unused); ``schedule.sigma = 0`` is allowed.

    Args:
        key: None or an unused PRNG key (PnP-PGD is deterministic), as in :func:`red`.
        y, operator, denoiser, schedule, sigma_y, x0, clip, x_true, track, progress: as in :func:`snore`.

    Returns:
        :class:`RestorationResult`, as :func:`snore`.

    Raises:
        As :func:`red` (``schedule.sigma >= 0`` instead of ``> 0``).

    References:
        Venkatakrishnan, Bouman & Wohlberg, "Plug-and-play priors for model based reconstruction",
        GlobalSIP 2013; Hurault, Leclaire & Papadakis, ICLR 2022, eq. (5).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import GaussianMMSEDenoiser, Identity, constant_schedule, pnp_pgd
        >>> out = pnp_pgd(None, jnp.full((4, 4, 1), 0.6), Identity(), GaussianMMSEDenoiser(0.5, 0.01),
        ...               constant_schedule(5, sigma=0.05, step_size=1e-3), 0.05)
        >>> bool(jnp.all(out.x < 0.6))
        True
    """
    key, y, x0, x_true, sigma_y, schedule = _validate(key, y, operator, denoiser, schedule, sigma_y, x0, x_true,
                                                      random=False, sigma_positive=False)
    return _restore_program("pnp_pgd", None, y, x0, operator, denoiser, schedule, sigma_y, x_true,
                            **_options(clip, track, progress))


def pnp_hqs(
    key: PRNGKeyArray | None,
    y: Float[Array, "H W C"],
    operator: AbstractOperator,
    denoiser: AbstractDenoiser | Callable,
    schedule: Schedule,
    sigma_y,
    *,
    x0: Float[Array, "H W C"] | None = None,
    clip: bool = True,
    x_true: Float[Array, "H W C"] | None = None,
    track: bool = False,
    progress: ProgressArg = False,
) -> RestorationResult:
    """Plug-and-play half-quadratic splitting ``x <- D_sigma(prox_{tau F}(x))``.

    ``tau`` is ``schedule.step_size``; ``schedule.sigma = 0`` is allowed.

    Args:
        key: None or an unused PRNG key (PnP-HQS is deterministic), as in :func:`red`.
        y, operator, denoiser, schedule, sigma_y, x0, clip, x_true, track, progress: as in :func:`snore`.

    Returns:
        :class:`RestorationResult`, as :func:`snore`.

    Raises:
        As :func:`pnp_pgd`.

    References:
        Zhang, Li, Zuo, Zhang, Van Gool & Timofte, "Plug-and-play image restoration with
        deep denoiser prior", IEEE TPAMI 2021, eqs. (6)-(7).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import GaussianMMSEDenoiser, Identity, constant_schedule, pnp_hqs
        >>> out = pnp_hqs(None, jnp.full((4, 4, 1), 0.6), Identity(), GaussianMMSEDenoiser(0.5, 0.01),
        ...               constant_schedule(5, sigma=0.05, step_size=1e-3), 0.05)
        >>> out.x.shape
        (4, 4, 1)
    """
    key, y, x0, x_true, sigma_y, schedule = _validate(key, y, operator, denoiser, schedule, sigma_y, x0, x_true,
                                                      random=False, sigma_positive=False)
    return _restore_program("pnp_hqs", None, y, x0, operator, denoiser, schedule, sigma_y, x_true,
                            **_options(clip, track, progress))


#: Every restoration method by name, all called as ``METHODS[name](key, y, operator, denoiser, schedule,
#: sigma_y, **options)`` (the names :func:`restore_batch` accepts).
METHODS: dict[str, Callable[..., RestorationResult]] = {
    "snore": snore,
    "snore_prox": snore_prox,
    "annealed_snore": annealed_snore,
    "red": red,
    "red_prox": red_prox,
    "pnp_pgd": pnp_pgd,
    "pnp_hqs": pnp_hqs,
}

#: Methods whose ``schedule.sigma`` may be 0 (they do not divide by sigma^2).
_SIGMA_MAY_BE_ZERO = ("pnp_pgd", "pnp_hqs")


def _restore_batch(method, keys, ys, operator, denoiser, schedule, sigma_y, x0s, x_true, operator_batched,
                   chunk_size, options):
    """:func:`restore_batch` on checked arguments (traced under :data:`_restore_batch_program`)."""
    fn = METHODS[method]
    op_axes = jax.tree.map(lambda _: 0, operator) if operator_batched else None

    def one(key, y, op, x0, xt):
        # sigma_y and the schedule were checked by restore_batch: the method trusts them
        with trusted_values(sigma_y, schedule):
            return fn(key, y, op, denoiser, schedule, sigma_y, x0=x0, x_true=xt, **options)

    if chunk_size is None:
        over_seeds = jax.vmap(one, in_axes=(0, None, None, None, None))
        over_images = jax.vmap(over_seeds, in_axes=(None, 0, op_axes, 0, 0 if x_true is not None else None))
        return over_images(keys, ys, operator, x0s, x_true)
    n_img, n_seeds = ys.shape[0], keys.shape[0]
    img = jnp.repeat(jnp.arange(n_img), n_seeds)  # run r: image r // n_seeds, seed r % n_seeds
    seed = jnp.tile(jnp.arange(n_seeds), n_img)

    def run(idx):
        i, j = idx
        op = jax.tree.map(lambda a: a[i], operator) if operator_batched else operator
        return one(keys[j], ys[i], op, x0s[i], None if x_true is None else x_true[i])

    out = jax.lax.map(run, (img, seed), batch_size=chunk_size)
    return jax.tree.map(lambda a: a.reshape((n_img, n_seeds) + a.shape[1:]), out)


_restore_batch_program = eqx.filter_jit(_restore_batch)


def _restore_batch_sharded(mesh, method, keys, ys, operator, denoiser, schedule, sigma_y, x0s, x_true,
                           operator_batched, chunk_size, options):
    """:func:`_restore_batch` under ``shard_map``: each device restores its images (and seeds) alone."""
    from jax.sharding import PartitionSpec as P

    img_axis = mesh.axis_names[0]
    seed_axis = mesh.axis_names[1] if len(mesh.axis_names) > 1 else None
    dynamic, static = eqx.partition((operator, denoiser, schedule, sigma_y), eqx.is_array)
    op_spec = P(img_axis) if operator_batched else P()
    specs = (jax.tree.map(lambda _: op_spec, dynamic[0]),) + tuple(jax.tree.map(lambda _: P(), d) for d in dynamic[1:])

    def local(keys, ys, dynamic, x0s, x_true):
        operator, denoiser, schedule, sigma_y = eqx.combine(dynamic, static)
        return _restore_batch(method, keys, ys, operator, denoiser, schedule, sigma_y, x0s, x_true,
                              operator_batched, chunk_size, options)

    images = P(img_axis)
    in_specs = (P(seed_axis), images, specs, images, None if x_true is None else images)
    args = jax.tree.map(lambda spec, x: _on_mesh(x, mesh, spec), in_specs, (keys, ys, dynamic, x0s, x_true),
                        is_leaf=lambda v: isinstance(v, P))
    run = jax.shard_map(local, mesh=mesh, in_specs=in_specs, out_specs=P(img_axis, seed_axis), check_vma=False)
    return run(*args)


def _on_mesh(x, mesh, spec):
    """``x`` laid out as ``spec`` on ``mesh`` inside a traced program (a mesh of explicit axes, as
    ``jax.make_mesh`` makes, takes ``reshard``; one of auto axes a sharding constraint)."""
    sharding = jax.sharding.NamedSharding(mesh, spec)
    if all(t == jax.sharding.AxisType.Explicit for t in mesh.axis_types):
        return jax.sharding.reshard(x, sharding)
    return jax.lax.with_sharding_constraint(x, sharding)


_restore_batch_sharded_program = eqx.filter_jit(_restore_batch_sharded)


def restore_batch(
    keys: PRNGKeyArray,
    ys: Float[Array, "num_images H W C"],
    operator: AbstractOperator,
    denoiser: AbstractDenoiser | Callable,
    schedule: Schedule,
    sigma_y,
    *,
    method: str,
    operator_batched: bool = False,
    x0s: Float[Array, "num_images H W C"] | None = None,
    x_true: Float[Array, "num_images H W C"] | None = None,
    chunk_size: int | None = None,
    mesh: jax.sharding.Mesh | None = None,
    **options,
) -> RestorationResult:
    """Run ``method`` on a batch of images and seeds, vmapped over both, as one compiled program.

    Args:
        keys: ``[num_seeds]`` PRNG keys (one run per image and key; the deterministic methods
            give the same result for every key).
        ys: observations ``[num_images, H, W, C]``.
        operator: forward model, shared by all images, or (``operator_batched=True``)
            an operator whose array leaves carry a leading ``num_images`` axis
            (e.g. from ``jax.vmap(Inpainting)(masks)``).
        denoiser, schedule, sigma_y, options: as in :func:`snore` (``options`` are the method's
            keyword options, e.g. ``num_samples``, ``clip``, ``track``).
        method: a key of :data:`METHODS` ("snore", "snore_prox", "annealed_snore", "red",
            "red_prox", "pnp_pgd", "pnp_hqs").
        x0s: initial iterates ``[num_images, H, W, C]`` (default ``ys``).
        x_true: clean images ``[num_images, H, W, C]`` for PSNR tracking.
        chunk_size: run the ``num_images x num_seeds`` restorations in vmapped chunks of this many,
            one chunk after the other (``jax.lax.map``), instead of all at once; ``None``
            (default) vmaps all. On CPU, restorations with the DnCNN run faster one at a
            time (``chunk_size=1``): one image's activations stay in cache (SNORE, 2 cores,
            paired median speed-up over vmapping all: 1.07x for 2 images x 4 seeds of
            64 x 64, 1.11x for 1 x 2 of 256 x 256, 1.44x for 2 x 2 of 256 x 256); on
            accelerators keep the default. Results are the same either way.
        mesh: a ``jax.sharding.Mesh`` to split the restorations over (``jax.shard_map``): its first
            axis splits the images, a second one (if any) the seeds; each device then restores its
            own images alone and the result comes back split the same way. ``None`` (default): one
            program that follows its inputs' shardings; there, XLA's partitioner gathers the batch
            around each FFT (``Blur``'s), which ``mesh=`` avoids. Multi-process runs pass a mesh of
            every process's devices.

    Returns:
        :class:`RestorationResult` with ``x`` of shape ``[num_images, num_seeds, H, W, C]``
        (histories ``[num_images, num_seeds, num_steps]``).

    Raises:
        TypeError: ``keys`` not PRNG keys; wrong operator/denoiser/schedule type; images not
            float arrays.
        ValueError: unknown ``method``; ``ys`` not 4-D; mismatched shapes (a batched operator
            without the leading ``num_images`` axis included); ``chunk_size < 1``; a ``mesh`` with
            more than two axes or whose axes do not divide ``num_images`` / ``num_seeds``; the value
            errors of the method.

    References:
        Renaud et al., ICML 2024 (SNORE); the methods' own references.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.inverse import GaussianMMSEDenoiser, Identity, constant_schedule, restore_batch
        >>> keys = jax.random.split(jax.random.key(0), 3)
        >>> out = restore_batch(keys, jnp.full((2, 4, 4, 1), 0.6), Identity(), GaussianMMSEDenoiser(0.5, 0.01),
        ...                     constant_schedule(5, sigma=0.05, step_size=1e-3), 0.05, method="snore")
        >>> out.x.shape
        (2, 3, 4, 4, 1)
    """
    method = check_choice(method, "method", sorted(METHODS))
    keys = check_key(keys, "keys", batch=True)
    if keys.ndim != 1:
        raise ValueError(expected("keys", "a 1-d array of keys [num_seeds]", f"shape {tuple(keys.shape)}", raw=True))
    _check_types(operator, denoiser, schedule)
    ys = as_array(ys, "ys")
    check_ndim(ys, "ys", 4, "shape [num_images, H, W, C]")
    x0s = None if x0s is None else as_array(x0s, "x0s")
    x_true = None if x_true is None else as_array(x_true, "x_true")
    for name, arr in (("x0s", x0s), ("x_true", x_true)):
        if arr is not None and tuple(arr.shape) != tuple(ys.shape):
            raise ValueError(expected(name, f"ys's shape {tuple(ys.shape)}", f"shape {tuple(arr.shape)}",
                                      raw=True))
    x0s = ys if x0s is None else x0s
    operator_batched = check_bool(operator_batched, "operator_batched")
    if operator_batched:
        for leaf in jax.tree_util.tree_leaves(eqx.filter(operator, eqx.is_array)):
            if leaf.ndim < 1 or leaf.shape[0] != ys.shape[0]:
                raise ValueError(expected("operator", f"array leaves with a leading num_images axis {ys.shape[0]} "
                                          "(operator_batched=True)", f"a leaf of shape {tuple(leaf.shape)}",
                                          raw=True))
    if chunk_size is not None:
        chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
    sigma_y, schedule = _validate_values(schedule, sigma_y, x0s.dtype,
                                         sigma_positive=method not in _SIGMA_MAY_BE_ZERO)
    if mesh is not None:
        _check_mesh(mesh, ys.shape[0], keys.shape[0])
        return _restore_batch_sharded_program(mesh, method, keys, ys, operator, denoiser, schedule, sigma_y, x0s,
                                              x_true, operator_batched, chunk_size, options)
    return _restore_batch_program(method, keys, ys, operator, denoiser, schedule, sigma_y, x0s, x_true,
                                  operator_batched, chunk_size, options)


def _check_mesh(mesh, num_images: int, num_seeds: int) -> None:
    """A mesh of one or two axes that divide the images and the seeds."""
    if not isinstance(mesh, jax.sharding.Mesh):
        raise TypeError(expected("mesh", "a jax.sharding.Mesh or None", type(mesh).__name__, raw=True))
    if len(mesh.axis_names) not in (1, 2):
        raise ValueError(expected("mesh", "one axis (images) or two (images, seeds)",
                                  f"axes {tuple(mesh.axis_names)}", raw=True))
    for name, count, what in zip(mesh.axis_names, (num_images, num_seeds), ("num_images", "num_seeds")):
        if count % mesh.shape[name]:
            raise ValueError(expected("mesh", f"axis {name!r} of a size that divides {what} ({count})",
                                      f"size {mesh.shape[name]}", raw=True))
