"""Private argument checks of the bnp family (built on ``jaxcore._util.checks``)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from jaxcore._util import as_float_array, checked_finite, checked_positive, expected


def float_arg(x: Any, name: str):
    """``x`` as a floating JAX array (ints/bools become the default float); TypeError names ``name``."""
    if x is None:
        raise TypeError(expected(name, "a real number or array", "None", raw=True))
    return as_float_array(x, name)


def positive_arg(x: Any, name: str, *, allow_zero: bool = False):
    """A float array whose entries are finite and > 0 (>= 0): checked on the host when concrete,
    at run time (``equinox.error_if``) when traced."""
    return checked_positive(float_arg(x, name), name, allow_zero=allow_zero)


def finite_arg(x: Any, name: str):
    """A float array whose entries are finite (host check when concrete, ``error_if`` when traced)."""
    return checked_finite(float_arg(x, name), name)


def broadcast_args(named: tuple[tuple[str, Any], ...]) -> tuple:
    """The broadcast shape of the arguments; ValueError naming them when they do not broadcast."""
    shapes = [tuple(np.shape(v)) for _, v in named]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        names = ", ".join(n for n, _ in named)
        got = ", ".join(f"{n} {s}" for (n, _), s in zip(named, shapes))
        raise ValueError(expected(names, "broadcastable shapes", got, raw=True)) from None


def positive_args(named: tuple[tuple[str, Any], ...], *, allow_zero: bool = False) -> tuple:
    """:func:`positive_arg` of each ``(name, value)`` after checking the shapes broadcast."""
    out = tuple(positive_arg(v, n, allow_zero=allow_zero) for n, v in named)
    broadcast_args(tuple(zip((n for n, _ in named), out)))
    return out


def compute_dtype(*xs):
    """``(dtype, work)``: the result float dtype of ``xs`` and the dtype to compute in (float32 for half)."""
    dtype = jnp.result_type(*xs, float)
    work = jnp.dtype(jnp.float32) if jnp.finfo(dtype).bits < 32 else dtype
    return dtype, work
