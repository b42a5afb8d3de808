"""Step schedules of the restoration solvers: per-step denoiser level, regularisation weight and step size.

A :class:`Schedule` holds three ``[num_steps]`` arrays; :func:`constant_schedule` and :func:`annealed_schedule`
build them (the latter is Annealed SNORE's, Renaud et al. ICML 2024, Algorithm 2), and :func:`recommended_schedule`
gives the settings of jaxcore's restoration benchmark (:data:`RECOMMENDED`). The solvers
(:mod:`jaxcore.inverse.solvers`) read one row of the schedule per step.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from jaxcore._util import check_choice, check_float_dtype, check_int, check_scalar, error_if, expected, is_concrete

from ._checks import as_array

__all__ = ["Schedule", "constant_schedule", "annealed_schedule", "RECOMMENDED", "recommended_schedule"]


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
    return check_float_dtype(dtype)


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


def _check_schedule(schedule) -> None:
    """A :class:`Schedule` of three 1-d arrays of one length ``num_steps >= 1`` (values unchecked)."""
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


def _checked_values(schedule: Schedule, sigma_y, dtype, *, sigma_positive: bool):
    """Check ``sigma_y`` and the schedule's values; return them as the solver loop uses them.

    The schedule is cast to the dtype the loop runs in first (a float16 image turns a large
    float32 value into inf). Concrete values are checked here in Python; traced ones by one
    run-time check, before the loop, which then trusts them (see :func:`jaxcore.inverse.solvers._solve`);
    values a caller already checked and trusts (:func:`~jaxcore.inverse.restore_batch`) are returned as they are.
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
    # Traced values: one run-time check for all of them, before the loop (see solvers._solve).
    sig_ok = (schedule.sigma > 0) if sigma_positive else (schedule.sigma >= 0)
    bad = (~(jnp.isfinite(sy) & (sy > 0))
           | jnp.any(~(jnp.isfinite(schedule.sigma) & sig_ok))
           | jnp.any(jnp.stack([jnp.any(~(jnp.isfinite(a) & (a >= 0))) for a in schedule[1:]])))
    return error_if((sy, schedule), bad, "sigma_y, schedule",
                    f"sigma_y finite and > 0, schedule.sigma finite and {'>' if sigma_positive else '>='} 0, "
                    "schedule.alpha and schedule.step_size finite and >= 0")
