"""PRNG key checks (DESIGN rule 1: a random function takes ``key`` first, required)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .checks import expected

__all__ = ["check_key", "is_key"]


def is_key(key: Any) -> bool:
    """True for a typed key (``jax.random.key``) or a raw ``uint32[..., 2]`` key (``jax.random.PRNGKey``)."""
    dtype = getattr(key, "dtype", None)
    if dtype is None or not isinstance(key, (jax.Array, np.ndarray)):
        return False
    if jnp.issubdtype(dtype, jax.dtypes.prng_key):
        return True
    return dtype == jnp.uint32 and key.ndim >= 1 and key.shape[-1] == 2


def check_key(key: Any, name: str = "key", *, batch: bool = False) -> jax.Array:
    """Return ``key`` if it is a PRNG key array; else ``TypeError`` in the house dialect.

    Args:
        key: a ``jax.random.key(...)`` array (or a legacy raw ``jax.random.PRNGKey``).
        name: the argument's name for the message.
        batch: if False, the key must be a single key (shape ``()`` typed, ``(2,)`` raw).

    Raises:
        TypeError: ``key`` is an int, None or any other non-key value, or a batch of keys
            where one key is expected.
    """
    if not is_key(key):
        got = type(key).__name__ if not hasattr(key, "dtype") else f"{type(key).__name__} of dtype {key.dtype}"
        raise TypeError(expected(name, "a jax.random.key(...) array", got, raw=True))
    if not batch:
        typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
        if (typed and key.ndim != 0) or (not typed and key.shape != (2,)):
            raise TypeError(expected(name, "a single jax.random.key(...) (not a batch of keys)",
                                     f"keys of shape {tuple(key.shape)}", raw=True))
    return key
