"""The classifier FALCON trains: an MLP feature extractor and a linear head over the fine classes."""

from __future__ import annotations

import equinox as eqx
import jax
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import check_int, check_key

__all__ = ["FalconMLP"]


class FalconMLP(eqx.Module):
    """``logits = W relu(MLP(x)) + b``: ``depth`` ReLU layers of ``width`` units, then a linear head.

    The reference code's single-cell model (4 layers of 64 units, ReLU after each, a linear head).
    Call on one sample (``[D] -> [F]``); ``jax.vmap`` for a batch.

    Args:
        in_size: D. num_classes: F (the fine classes, or C for a coarse classifier).
        width: hidden units. depth: hidden layers (>= 1).
        key: PRNG key (keyword-only, equinox's convention).

    Examples:
        >>> import jax
        >>> m = FalconMLP(5, 3, width=8, depth=2, key=jax.random.key(0))
        >>> m(jax.numpy.ones(5)).shape, m.embed(jax.numpy.ones(5)).shape
        ((3,), (8,))
    """

    layers: tuple[eqx.nn.Linear, ...]
    head: eqx.nn.Linear
    in_size: int = eqx.field(static=True)
    num_classes: int = eqx.field(static=True)

    def __init__(self, in_size: int, num_classes: int, *, width: int = 64, depth: int = 4, key: PRNGKeyArray):
        in_size = check_int(in_size, "in_size", minimum=1)
        num_classes = check_int(num_classes, "num_classes", minimum=1)
        width = check_int(width, "width", minimum=1)
        depth = check_int(depth, "depth", minimum=1)
        keys = jax.random.split(check_key(key), depth + 1)
        sizes = [in_size] + [width] * depth
        self.layers = tuple(eqx.nn.Linear(a, b, key=k) for a, b, k in zip(sizes[:-1], sizes[1:], keys[:-1]))
        self.head = eqx.nn.Linear(width, num_classes, key=keys[-1])
        self.in_size, self.num_classes = in_size, num_classes

    def embed(self, x: Float[Array, " D"]) -> Float[Array, " H"]:
        """The features before the head, ``[width]``."""
        for layer in self.layers:
            x = jax.nn.relu(layer(x))
        return x

    def __call__(self, x: Float[Array, " D"]) -> Float[Array, " F"]:
        return self.head(self.embed(x))
