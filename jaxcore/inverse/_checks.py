"""The inverse family's private argument checks (images, dtypes), on top of :mod:`jaxcore._util.checks`.

Precision policy of the family: half-precision images (float16, bfloat16) are computed in float32
internally and the result is cast back to the input dtype (the FFTs of :class:`Blur` and the
restoration loops have no half-precision form); integer images are converted exactly to float by
the metrics and refused by operators, denoisers and restoration methods (their pixels are in
[0, 1], so an integer image's scale is ambiguous: convert it explicitly, e.g. ``x / 255``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcore._util import check_finite, default_float, expected, is_concrete

HALF = (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))


def compute_dtype(dtype) -> jnp.dtype:
    """The dtype a computation on ``dtype`` data runs in: float32 for half precision, else ``dtype``."""
    dtype = jnp.dtype(dtype)
    return jnp.dtype(jnp.float32) if dtype in HALF else dtype


def _describe_type(x: Any) -> str:
    if hasattr(x, "dtype"):
        return f"{type(x).__name__} of dtype {x.dtype}"
    return type(x).__name__


def as_array(x: Any, name: str, *, integers: bool = False, finite: bool = True) -> jax.Array:
    """``x`` as a real JAX array (tracers pass through with their dtype checked).

    Args:
        integers: integer/bool data is converted exactly to float (float32, or float64 when it
            holds integers float32 cannot represent and ``jax_enable_x64`` is on); else refused.
        finite: a concrete array with a NaN or inf entry is a ValueError.

    Raises:
        TypeError: None, strings, objects, complex data; integer data when ``integers`` is False.
        ValueError: a NaN or inf entry (``finite``); integers that do not convert exactly.
    """
    if x is None or isinstance(x, (str, bytes, dict)):
        raise TypeError(expected(name, "a real float array", _describe_type(x), raw=True))
    if not isinstance(x, jax.Array):
        try:
            a = np.asarray(x)
        except Exception as exc:  # noqa: BLE001 - ragged lists and other non-arrays
            raise TypeError(expected(name, "a real float array", _describe_type(x), raw=True)) from exc
        if a.dtype.kind not in "biuf" and a.dtype.name != "bfloat16":
            raise TypeError(expected(name, "a real float array", f"dtype {a.dtype}", raw=True))
        if a.dtype == np.float64 and not jax.config.jax_enable_x64:
            a = a.astype(np.float32)
        x = jnp.asarray(a)
    dtype = x.dtype
    if jnp.issubdtype(dtype, jnp.integer) or dtype == jnp.bool_:
        if not integers:
            raise TypeError(expected(name, "a float array (pixels in [0, 1]; convert integer images "
                                     "explicitly, e.g. x / 255)", f"dtype {dtype}", raw=True))
        target = jnp.dtype(jnp.float32)
        if is_concrete(x) and x.size and dtype != jnp.bool_:
            big = float(np.max(np.abs(np.asarray(x).astype(np.float64))))
            if big > 2.0**24:
                if default_float() != jnp.float64:
                    raise ValueError(expected(name, "integers of magnitude <= 2**24 (exact in float32; enable "
                                              "jax_enable_x64 for larger)", f"a maximum magnitude {big:g}", raw=True))
                target = jnp.dtype(jnp.float64)
        return x.astype(target)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(expected(name, "a real float array", f"dtype {dtype}", raw=True))
    if finite:
        check_finite(x, name)
    return x


def as_image(x: Any, name: str, **kwargs) -> jax.Array:
    """:func:`as_array` plus at least 3 dimensions ``[..., H, W, C]``."""
    x = as_array(x, name, **kwargs)
    if x.ndim < 3:
        raise ValueError(expected(name, "images of shape [..., H, W, C] (at least 3 dimensions)",
                                  f"shape {tuple(x.shape)}", raw=True))
    return x
