"""Row chunks that keep a device-split batch split: ``lax.map`` over interleaved chunks of rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax


def interleaved_map(fn: Callable[[Any], Any], xs: Any, chunk_size: int) -> Any:
    """``fn`` over chunks of ``chunk_size`` rows of the pytree ``xs`` (one ``lax.map``), outputs in row order.

    With ``m = ceil(B / chunk_size)`` chunks, chunk ``j`` holds rows ``j, j + m, j + 2 m, ...``: a batch
    split over ``D`` devices along its rows (``D`` dividing ``chunk_size`` and ``chunk_size`` dividing
    ``B``) stays split inside every chunk, where contiguous chunks (rows ``j c .. (j + 1) c - 1``) would each
    live on one device and make the loop gather them. ``B`` not a multiple of ``chunk_size``: the last
    ``m chunk_size - B`` slots repeat row 0 and are dropped from the result. ``fn`` maps a ``[c, ...]``
    pytree to a pytree of ``[c, ...]`` arrays; traceable.
    """
    n = jax.tree.leaves(xs)[0].shape[0]
    num = -(-n // chunk_size)
    pad = num * chunk_size - n

    def split(a):  # [B, ...] -> [m, c, ...], chunk j = rows j, j + m, ...
        a = jnp.concatenate([a, jnp.repeat(a[:1], pad, axis=0)], axis=0) if pad else a
        return jnp.swapaxes(a.reshape(chunk_size, num, *a.shape[1:]), 0, 1)

    def merge(a):  # [m, c, ...] -> [B, ...], the inverse permutation
        return jnp.swapaxes(a, 0, 1).reshape(num * chunk_size, *a.shape[2:])[:n]

    return jax.tree.map(merge, lax.map(fn, jax.tree.map(split, xs)))
