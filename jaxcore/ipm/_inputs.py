"""The ipm family's private input conversions (built on :mod:`jaxcore._util.checks`).

One rule for every real array a public ipm function takes (atoms, values, costs, slopes, weights):

- ``None``, strings, objects, complex and bool arrays are a :class:`TypeError` naming the argument;
- integers are converted to the default float dtype, exactly: a concrete integer that does not survive
  the cast (``|x| > 2**24`` in float32) is a :class:`ValueError`;
- half precision (float16, bfloat16) is computed in float32; the array functions cast their result
  back to the half dtype (:func:`half_dtype` says which);
- NaN and inf are a :class:`ValueError` on the host (concrete values) or an ``error_if`` run-time
  error under ``jit`` (traced values).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcore._util import (check_float_dtype, checked_simplex, default_float, expected, first_bad,
                           is_concrete)

_HALF = (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))

# rows of weights must sum to one within this tolerance (or a few epsilons of their dtype)
WEIGHT_TOL = 1e-4


def is_half(dtype: Any) -> bool:
    return jnp.dtype(dtype) in _HALF


def weight_tol(dtype: Any) -> float:
    """The tolerance on a row sum of weights stored in ``dtype``: 1e-4, or 4 epsilons of a half dtype."""
    return max(WEIGHT_TOL, 4.0 * float(jnp.finfo(dtype).eps)) if jnp.issubdtype(dtype, jnp.floating) else WEIGHT_TOL


def real_array(x: Any, name: str, what: str = "a real array") -> tuple[jax.Array, Any]:
    """``(array in its compute dtype, result dtype)``; see the module docstring for the rules."""
    if x is None:
        raise TypeError(expected(name, what, None))
    if isinstance(x, jax.Array):
        a = x
    else:
        try:
            a = np.asarray(x)
        except Exception as exc:  # noqa: BLE001 - ragged lists and the like are a type error for the user
            raise TypeError(expected(name, what, type(x).__name__, raw=True)) from exc
    dtype = jnp.dtype(a.dtype)
    if dtype == jnp.bool_ or not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)):
        raise TypeError(expected(name, f"{what} of real numbers (int or float, not bool)", f"dtype {dtype}", raw=True))
    if jnp.issubdtype(dtype, jnp.integer):
        target = default_float()
        if is_concrete(a):
            v = np.asarray(a)
            bad = v.astype(target).astype(np.float64) != v.astype(np.float64)
            if bad.any():
                raise ValueError(expected(name, f"integers exactly representable in {target.name}",
                                          first_bad(v, bad), raw=True))
        return jnp.asarray(a).astype(target), target
    if dtype in _HALF:
        return jnp.asarray(a).astype(jnp.float32), dtype
    dtype = jax.dtypes.canonicalize_dtype(dtype)
    return jnp.asarray(a).astype(dtype), dtype


def check_weights(w: jax.Array, name: str, tol: float) -> jax.Array:
    """Weights ``[..., m]``: finite, >= 0, each row summing to one within ``tol``; then normalised explicitly."""
    w = checked_simplex(w, name, tol, entries="finite non-negative weights",
                        rows=f"weights summing to one (within {tol:g})")
    return w / jnp.sum(w, axis=-1, keepdims=True)


def pow2_scale(*arrays: jax.Array) -> jax.Array:
    """A power of two c >= max |x| over the arrays (1 for all-zero input): x / c is exact and in [-1, 1].

    Used to compute |x - y|^p without overflow (1e30) or underflow (1e-30) in float32.
    """
    m = jnp.max(jnp.stack([jnp.max(jnp.abs(a)) for a in arrays]))
    m = jnp.where((m > 0) & jnp.isfinite(m), m, jnp.ones_like(m))
    _, e = jnp.frexp(m)
    return jnp.ldexp(jnp.ones_like(m), e)


def float_dtypes(dtype: Any, name: str = "dtype") -> tuple[Any, Any]:
    """``(compute dtype, result dtype)`` for a generator's ``dtype``: float32/float64, half sampled in float32."""
    d = check_float_dtype(dtype, name, "a floating dtype (float16, bfloat16, float32, float64)")
    if d in _HALF:
        return jnp.dtype(jnp.float32), d
    d = jax.dtypes.canonicalize_dtype(d)
    return d, d
