"""Private argument checks of the tpp family (built on ``jaxcore._util``; not public API).

``as_param`` converts a model parameter (ints to the default float, half precision held in
float32, NaN/inf and wrong types refused); ``checked`` applies the run-time positivity checks
of traced parameters once, at the entry of a kernel (never inside a scan body), and the host
checks of concrete ones.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcore._util import as_float_array, check_finite, check_positive, error_if, expected, is_concrete

_HALF = (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))


def as_param(x: Any, name: str) -> jax.Array:
    """A float parameter array: ints/bools -> the default float, float16/bfloat16 -> float32 (the
    likelihoods are computed in float32 at least), None/strings/complex -> TypeError naming ``name``."""
    if x is None:
        raise TypeError(expected(name, "a real number or array", "None", raw=True))
    arr = as_float_array(x, name)
    if arr.dtype in _HALF:
        arr = arr.astype(jnp.float32)
    return arr


_KINDS = {
    "positive": ("finite values > 0", lambda a: ~(jnp.isfinite(a) & (a > 0))),
    "nonnegative": ("finite values >= 0", lambda a: ~(jnp.isfinite(a) & (a >= 0))),
    "finite": ("finite values", lambda a: ~jnp.isfinite(a)),
}


def host_check(x: Any, name: str, kind: str) -> None:
    """The concrete check of one parameter (``kind`` in positive / nonnegative / finite)."""
    if kind == "positive":
        check_positive(x, name)
    elif kind == "nonnegative":
        check_positive(x, name, allow_zero=True)
    else:
        check_finite(x, name)


def checked(x: Any, name: str, kind: str) -> Any:
    """``x`` after its check: on the host when concrete, through ``error_if`` when traced."""
    if is_concrete(x):
        host_check(x, name, kind)
        return x
    what, bad = _KINDS[kind]
    return error_if(x, jnp.any(bad(x)), name, what)


def check_query_times(t: Any, batch_size: int, name: str = "t") -> jax.Array:
    """Query times ``[B, Q]``: float, finite, non-negative, first axis the batch's."""
    if t is None:
        raise TypeError(expected(name, "query times of shape [batch, query]", "None", raw=True))
    arr = as_param(t, name)
    if arr.ndim != 2 or arr.shape[0] != batch_size:
        raise ValueError(expected(name, f"query times of shape [batch, query] = [{batch_size}, *]",
                                  f"shape {tuple(arr.shape)}", raw=True))
    check_positive(arr, name, allow_zero=True)
    return arr


def float_dtype(dtype: Any, name: str = "dtype") -> jnp.dtype:
    """A float32/float64 dtype (canonicalised: float64 without x64 is float32); else TypeError."""
    try:
        d = jnp.dtype(dtype)
    except TypeError as exc:
        raise TypeError(expected(name, "a float dtype (float32 or float64)", dtype)) from exc
    if d in _HALF:
        raise TypeError(expected(name, "float32 or float64 (half precision cannot hold event times or "
                                       "log-intensities faithfully)", str(d), raw=True))
    if not jnp.issubdtype(d, jnp.floating):
        raise TypeError(expected(name, "a float dtype (float32 or float64; integer event times would be "
                                       "truncated)", str(d), raw=True))
    return jnp.dtype(jax.dtypes.canonicalize_dtype(d))

