"""Sorting along the last axis, fast on every backend.

XLA:CPU lowers ``sort`` to a comparator-driven sort that is about 20x slower
than NumPy's (measured: 0.31 s against 0.016 s for [512, 1000] float32 on one
core). On the CPU backend :func:`sort_last` therefore sorts on the host with
``np.sort`` through ``jax.pure_callback``; on GPU/TPU it is ``jnp.sort``. The
choice is made at lowering time by ``lax.platform_dependent``, so the same
jitted function is fast everywhere. Forward-mode and reverse-mode derivatives
are those of the sort (a permutation of the tangents).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array


def _host_sort(x: Array) -> Array:
    return jax.pure_callback(
        lambda v: np.sort(v, axis=-1), jax.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="expand_dims"
    )


def _host_argsort(x: Array) -> Array:
    return jax.pure_callback(
        lambda v: np.argsort(v, axis=-1, kind="stable").astype(np.int32),
        jax.ShapeDtypeStruct(x.shape, jnp.int32),
        x,
        vmap_method="expand_dims",
    )


def _device_argsort(x: Array) -> Array:
    return jnp.argsort(x, axis=-1, stable=True).astype(jnp.int32)


def argsort_last(x: Array) -> Array:
    """Stable argsort along the last axis (int32), host NumPy on CPU."""
    return jax.lax.platform_dependent(x, cpu=_host_argsort, default=_device_argsort)


@jax.custom_jvp
def sort_last(x: Array) -> Array:
    """Sort along the last axis (host NumPy on CPU, ``jnp.sort`` elsewhere); differentiable."""
    return jax.lax.platform_dependent(x, cpu=_host_sort, default=lambda v: jnp.sort(v, axis=-1))


@sort_last.defjvp
def _sort_last_jvp(primals: tuple[Array], tangents: tuple[Array]) -> tuple[Array, Array]:
    (x,), (dx,) = primals, tangents
    idx = argsort_last(x)
    return jnp.take_along_axis(x, idx, axis=-1), jnp.take_along_axis(dx, idx, axis=-1)
