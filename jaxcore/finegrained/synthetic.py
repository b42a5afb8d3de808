"""Synthetic coarse-labelled data: Gaussian blobs whose coarse classes are unions of blobs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxcore._util import check_int, check_key, check_scalar, expected

__all__ = ["coarse_blobs"]


def coarse_blobs(
    key: PRNGKeyArray,
    num_per_class: int,
    groups: list[list[int]],
    dim: int,
    *,
    separation: float = 8.0,
) -> tuple[Float[Array, "N D"], Int[Array, " N"], Int[Array, " N"], Int[Array, " F"]]:
    """``num_per_class`` points of each of F unit-variance Gaussian blobs; coarse class c = union of ``groups[c]``.

    Blob means are ``separation`` times independent standard normal vectors scaled by ``1 / sqrt(dim)``
    (so typical distances between means are about ``separation * sqrt(2)``).

    Args:
        key: PRNG key. num_per_class: points per blob (>= 1).
        groups: a partition of ``range(F)`` into C non-empty lists (``[[0, 1], [2, 3, 4]]``).
        dim: D >= 1. separation: > 0.

    Returns:
        ``(x [N, D], fine [N] int32, coarse [N] int32, fine_to_coarse [F] int32)``, ``N = F num_per_class``,
        rows grouped by fine class.

    Raises:
        ValueError: ``groups`` not a partition of ``range(F)`` into non-empty lists.

    Examples:
        >>> import jax
        >>> x, fine, coarse, ftc = coarse_blobs(jax.random.key(0), 3, [[0, 2], [1]], 2)
        >>> x.shape, coarse.tolist(), ftc.tolist()
        ((9, 2), [0, 0, 0, 1, 1, 1, 0, 0, 0], [0, 1, 0])
    """
    key = check_key(key)
    num_per_class = check_int(num_per_class, "num_per_class", minimum=1)
    dim = check_int(dim, "dim", minimum=1)
    separation = check_scalar(separation, "separation", positive=True)
    flat = [f for g in groups for f in g] if isinstance(groups, (list, tuple)) and all(
        isinstance(g, (list, tuple)) and len(g) > 0 for g in groups) else None
    if not flat or sorted(flat) != list(range(len(flat))):
        raise ValueError(expected("groups", "a partition of range(F) into non-empty lists", groups))
    f = len(flat)
    ftc = np.zeros(f, np.int32)
    for c, g in enumerate(groups):
        ftc[list(g)] = c
    k1, k2 = jax.random.split(key)
    means = separation * jax.random.normal(k1, (f, dim)) / np.sqrt(dim)
    fine = jnp.repeat(jnp.arange(f, dtype=jnp.int32), num_per_class)
    x = means[fine] + jax.random.normal(k2, (f * num_per_class, dim))
    return x, fine, jnp.asarray(ftc)[fine], jnp.asarray(ftc)
