"""The cosine k-nearest-neighbour graph, blocked over rows, optionally within groups (coarse classes)."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxcore._util import as_float_array, check_finite, check_int, check_ndim, expected

__all__ = ["KnnGraph", "knn_graph"]


class KnnGraph(NamedTuple):
    """A directed kNN graph.

    Attributes:
        indices: ``[N, K]`` int32, the neighbours of each row, most similar first (never the row itself).
        similarities: ``[N, K]`` their cosine similarities in [-1, 1].
    """

    indices: Int[Array, "N K"]
    similarities: Float[Array, "N K"]


@functools.partial(jax.jit, static_argnames=("num_neighbors", "block_size"))
def _knn(x, groups, num_neighbors, block_size):
    n = x.shape[0]
    norm = jnp.sqrt(jnp.sum(x * x, axis=1, keepdims=True))
    xn = x / jnp.where(norm > 0, norm, 1.0)
    num_blocks = -(-n // block_size)
    pad = num_blocks * block_size - n
    rows = jnp.pad(xn, ((0, pad), (0, 0)))
    row_groups = jnp.pad(groups, (0, pad), constant_values=-1)
    ids = jnp.arange(num_blocks * block_size)

    def block(args):
        xb, gb, ib = args
        sim = xb @ xn.T  # [B, N]
        bad = (gb[:, None] != groups[None, :]) | (ib[:, None] == jnp.arange(n)[None, :])
        sim = jnp.where(bad, -jnp.inf, sim)
        vals, idx = jax.lax.top_k(sim, num_neighbors)
        return vals, idx.astype(jnp.int32)

    vals, idx = jax.lax.map(block, (rows.reshape(num_blocks, block_size, -1),
                                    row_groups.reshape(num_blocks, block_size),
                                    ids.reshape(num_blocks, block_size)))
    return idx.reshape(-1, num_neighbors)[:n], vals.reshape(-1, num_neighbors)[:n]


def knn_graph(
    features: Float[Array, "N D"],
    num_neighbors: int,
    *,
    groups: Int[Array, " N"] | None = None,
    block_size: int = 256,
) -> KnnGraph:
    """The ``num_neighbors`` most cosine-similar rows of every row (excluding itself), blocked over rows.

    ``sim(i, j) = <x_i, x_j> / (|x_i| |x_j|)``; one ``[block_size, N]`` similarity block at a time,
    ``lax.top_k`` on each, all in one jitted program. With ``groups`` (FALCON's kNN graph: neighbours
    within the same coarse class) rows only see rows of their own group. Zero rows have similarity 0.

    Args:
        features: ``[N, D]`` real.
        num_neighbors: K >= 1, less than the size of the smallest group (or than N).
        groups: optional ``[N]`` int group ids.
        block_size: rows per block (>= 1; memory ``block_size * N`` floats).

    Returns:
        :class:`KnnGraph`.

    Raises:
        ValueError: bad shapes, non-finite features, a group with K or fewer members.

    References:
        Gadetsky et al., ICML 2024: neighbours are searched within each coarse class (the reference
        code's ``find_neighbors.py``, 20 neighbours, cosine).

    Examples:
        >>> import jax.numpy as jnp
        >>> g = knn_graph(jnp.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]]), 1)
        >>> g.indices[:, 0].tolist()
        [1, 0, 3, 2]
    """
    check_ndim(features, "features", 2, "a [N, D] array")
    x = as_float_array(features, "features")
    check_finite(x, "features")
    n = x.shape[0]
    num_neighbors = check_int(num_neighbors, "num_neighbors", minimum=1)
    block_size = check_int(block_size, "block_size", minimum=1)
    if groups is None:
        g = np.zeros(n, np.int32)
    else:
        check_ndim(groups, "groups", 1, "a [N] int array")
        g = np.asarray(groups)
        if g.shape[0] != n or g.dtype.kind not in "iu":
            raise ValueError(expected("groups", f"a [{n}] int array", f"{g.dtype} array of shape {g.shape}", raw=True))
    _, counts = np.unique(g, return_counts=True)
    if counts.min() <= num_neighbors:
        raise ValueError(expected("num_neighbors", f"an int below the smallest group's size {counts.min()}",
                                  num_neighbors))
    block_size = min(block_size, n)
    idx, vals = _knn(x, jnp.asarray(g, jnp.int32), num_neighbors, block_size)
    return KnnGraph(idx, vals)
