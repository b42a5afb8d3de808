"""Small helpers shared by the tpp modules (not public)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def is_concrete(*xs: Any) -> bool:
    """True if no argument is a tracer (values can be checked in Python)."""
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(xs))


def as_float(x: Any, name: str, shape: tuple[int, ...] | None = None) -> jax.Array:
    """Convert to a float array; raise TypeError/ValueError naming ``name``."""
    try:
        arr = jnp.asarray(x)
    except TypeError as e:  # pragma: no cover - message passthrough
        raise TypeError(f"{name}: expected a float array, got {type(x).__name__}") from e
    if not (jnp.issubdtype(arr.dtype, jnp.floating) or jnp.issubdtype(arr.dtype, jnp.integer)):
        raise TypeError(f"{name}: expected a float array, got dtype {arr.dtype}")
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        arr = arr.astype(jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)
    if shape is not None and arr.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {arr.shape}")
    return arr


def check_positive(x: jax.Array, name: str, *, allow_zero: bool = False) -> None:
    """Raise ValueError if a concrete array has a non-finite or non-positive entry."""
    if not is_concrete(x):
        return
    a = np.asarray(x)
    bad = ~np.isfinite(a) | ((a < 0) if allow_zero else (a <= 0))
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name}: expected finite {kind} values, got {a[idx] if a.ndim else a} at index {idx}")


def check_positive_scalar(x: Any, name: str) -> None:
    """Raise ValueError unless a concrete scalar is finite and > 0."""
    if is_concrete(x):
        v = np.asarray(x)
        if v.ndim != 0 or not np.isfinite(v) or v <= 0:
            raise ValueError(f"{name}: expected a finite positive scalar, got {x!r}")


def check_int(x: Any, name: str, minimum: int = 1) -> int:
    """Return ``int(x)`` or raise naming ``name``."""
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"{name}: expected an int, got {type(x).__name__}")
    if x < minimum:
        raise ValueError(f"{name}: expected an int >= {minimum}, got {x}")
    return int(x)


def linear_recurrence(a: jax.Array, b: jax.Array) -> jax.Array:
    """``x_i = a_i * x_{i-1} + b_i`` with ``x_{-1} = 0`` along axis 0 by a parallel (associative) scan."""

    def combine(left, right):
        a1, b1 = left
        a2, b2 = right
        return a1 * a2, a2 * b1 + b2

    return jax.lax.associative_scan(combine, (a, b))[1]
