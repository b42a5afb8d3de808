"""Perturbation radii: a constant or an optax schedule, and GSAM's learning-rate-proportional schedule."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int

from jaxcore._util import check_int, check_scalar, expected, is_concrete

from ._checks import _as_scalar, _check_radius, _checked_value

#: A radius: a float ``>= 0`` or an optax schedule ``count -> rho`` (``optax.Schedule``).
Radius = float | optax.Schedule


def _rho_at(rho: Radius, count: Any) -> Array:
    return jnp.asarray(rho(count) if callable(rho) else rho)


_rho_at_jit = eqx.filter_jit(_rho_at)


def rho_at(rho: Radius, count: Int[Array, ""] | int) -> Float[Array, ""]:
    """The perturbation radius at step ``count``: ``rho`` itself, or ``rho(count)`` for a schedule.

    Args:
        rho: a float ``>= 0`` or an ``optax.Schedule`` ``count -> rho``.
        count: the step count (int scalar).

    Returns:
        The radius (scalar array).

    Raises:
        TypeError, ValueError: ``rho`` is neither a schedule nor a finite number ``>= 0`` (a
            schedule's value and a traced ``rho`` are checked too, at run time under ``jit``);
            ``count`` not an int scalar, or negative.

    References:
        Zhuang et al., "Surrogate Gap Minimization Improves Sharpness-Aware
        Training", ICLR 2022, Sec. 5.1 (scheduled radii).

    Examples:
        >>> import optax
        >>> from jaxcore.sam import rho_at
        >>> float(rho_at(0.05, 3)), float(rho_at(optax.linear_schedule(0.1, 0.0, 10), 5))
        (0.05, 0.05)
    """
    _check_radius(rho)
    if not callable(rho):
        rho = _checked_value(rho, "rho")
    if not eqx.is_array_like(count) or not jnp.issubdtype(jnp.result_type(count), jnp.integer) \
            or isinstance(count, bool) or jnp.ndim(count) != 0:
        raise TypeError(expected("count", "an int scalar (the step count)", count))
    if is_concrete(count):
        check_int(count, "count", minimum=0)
    out = _rho_at_jit(rho if callable(rho) else _as_scalar(rho), _as_scalar(count))
    if callable(rho):  # a schedule's value: the radius it gives must be >= 0 too
        if jnp.ndim(out) != 0:
            raise TypeError(expected("rho", "a schedule returning a scalar", f"shape {jnp.shape(out)}", raw=True))
        out = _checked_value(out, "rho")
    return out


def lr_proportional_rho(
    lr_schedule: optax.Schedule, lr_max: float, lr_min: float, rho_max: float, rho_min: float = 0.0
) -> optax.Schedule:
    """GSAM's radius schedule that follows the learning rate.

    ``rho_t = rho_min + (rho_max - rho_min) (lr_t - lr_min) / (lr_max - lr_min)``,
    clipped at 0.

    Args:
        lr_schedule: optax schedule ``count -> lr``.
        lr_max, lr_min: the schedule's largest and smallest learning rates.
        rho_max, rho_min: radii at ``lr_max`` and ``lr_min`` (>= 0).

    Returns:
        An ``optax.Schedule`` ``count -> rho`` (float32 scalar).

    Raises:
        ValueError: ``lr_max <= lr_min`` or a negative radius.

    References:
        Zhuang et al., "Surrogate Gap Minimization Improves Sharpness-Aware
        Training", ICLR 2022, Sec. 5.1 ("rho_t proportional to lr_t").

    Examples:
        >>> import optax
        >>> from jaxcore.sam import lr_proportional_rho
        >>> sched = lr_proportional_rho(optax.linear_schedule(1.0, 0.1, 10), 1.0, 0.1, rho_max=0.05)
        >>> round(float(sched(0)), 6), round(float(sched(10)), 6)
        (0.05, 0.0)
    """
    if not callable(lr_schedule):
        raise TypeError(expected("lr_schedule", "an optax schedule count -> lr", type(lr_schedule).__name__,
                                 raw=True))
    lr_min = check_scalar(lr_min, "lr_min")
    check_scalar(lr_max, "lr_max", low=lr_min, low_open=True)
    _check_radius(rho_max, "rho_max", schedule=False)
    _check_radius(rho_min, "rho_min", schedule=False)

    def schedule(count: jax.Array) -> jax.Array:
        lr = lr_schedule(count)
        rho = rho_min + (rho_max - rho_min) * (lr - lr_min) / (lr_max - lr_min)
        return jnp.maximum(rho, 0.0)

    return schedule
