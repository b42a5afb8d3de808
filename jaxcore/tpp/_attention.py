"""The causal self-attention history encoder shared by THP and SAHP (private)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float


def temporal_encoding(t: Float[Array, " L"], d: int) -> Float[Array, "L d"]:
    """``[sin, cos](t / 10000^{2j / d})`` (Zuo et al., ICML 2020, eq. 2), ``[L, d]``."""
    j = np.arange(d // 2 + d % 2)
    freq = jnp.asarray(1.0 / 10000.0 ** (2 * j / d), t.dtype)
    ang = t[:, None] * freq[None]
    return jnp.concatenate([jnp.sin(ang), jnp.cos(ang)], -1)[:, :d]


class AttentionLayer(eqx.Module):
    """Pre-norm causal multi-head self-attention and a feed-forward block."""

    attn: eqx.nn.MultiheadAttention
    ff1: eqx.nn.Linear
    ff2: eqx.nn.Linear
    norm1: eqx.nn.LayerNorm
    norm2: eqx.nn.LayerNorm

    def __init__(self, d: int, heads: int, *, key, dtype):
        k1, k2, k3 = jax.random.split(key, 3)
        self.attn = eqx.nn.MultiheadAttention(heads, d, key=k1, dtype=dtype)
        self.ff1 = eqx.nn.Linear(d, 2 * d, key=k2, dtype=dtype)
        self.ff2 = eqx.nn.Linear(2 * d, d, key=k3, dtype=dtype)
        self.norm1 = eqx.nn.LayerNorm(d, dtype=dtype)
        self.norm2 = eqx.nn.LayerNorm(d, dtype=dtype)

    def __call__(self, x, attn_mask):
        y = jax.vmap(self.norm1)(x)
        x = x + self.attn(y, y, y, mask=attn_mask)
        y = jax.vmap(self.norm2)(x)
        return x + jax.vmap(lambda v: self.ff2(jax.nn.gelu(self.ff1(v))))(y)


def encode(embedding, start, layers, times, marks, mask) -> Array:
    """``[L + 1, d]`` states: a learned start token at ``t = 0``, then each event's type embedding plus its
    temporal encoding, through causal attention layers (row ``i`` attends to the start and events ``< i``)."""
    d = start.shape[0]
    x = embedding[marks] + temporal_encoding(times, d)
    x = jnp.where(mask[:, None], x, 0.0)
    x = jnp.concatenate([start[None], x])
    L1 = x.shape[0]
    valid = jnp.concatenate([jnp.ones((1,), bool), mask])
    causal = jnp.tril(jnp.ones((L1, L1), bool)) & valid[None, :]
    for layer in layers:
        x = layer(x, causal)
    return x
