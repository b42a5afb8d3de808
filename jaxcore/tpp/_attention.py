"""The causal self-attention history encoders shared by THP and SAHP (private)."""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float


def temporal_encoding(t: Float[Array, " L"], d: int, *, interleaved: bool = False) -> Float[Array, "L d"]:
    """``[sin, cos](t / 10000^{2j / d})`` (Zuo et al., ICML 2020, eq. 2), ``[L, d]``: the sines then the
    cosines, or with ``interleaved`` feature ``2j`` the sine and ``2j + 1`` the cosine of frequency ``j``
    (EasyTPP's layout)."""
    j = np.arange(d // 2 + d % 2)
    freq = jnp.asarray(1.0 / 10000.0 ** (2 * j / d), t.dtype)
    ang = t[:, None] * freq[None]
    if interleaved:
        return jnp.stack([jnp.sin(ang), jnp.cos(ang)], -1).reshape(t.shape[0], -1)[:, :d]
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


class PlainAttention(eqx.Module):
    """Causal multi-head self-attention with biased query/key/value maps and no output projection (the
    heads' outputs concatenated): EasyTPP's ``MultiHeadAttention(output_linear=False)``."""

    to_query: eqx.nn.Linear
    to_key: eqx.nn.Linear
    to_value: eqx.nn.Linear
    num_heads: int = eqx.field(static=True)

    def __init__(self, d: int, heads: int, *, key, dtype):
        kq, kk, kv = jax.random.split(key, 3)
        self.to_query = eqx.nn.Linear(d, d, key=kq, dtype=dtype)
        self.to_key = eqx.nn.Linear(d, d, key=kk, dtype=dtype)
        self.to_value = eqx.nn.Linear(d, d, key=kv, dtype=dtype)
        self.num_heads = heads

    def __call__(self, x, attn_mask):
        n, d = x.shape
        h = self.num_heads
        q, k, v = (x @ lin.weight.T + lin.bias for lin in (self.to_query, self.to_key, self.to_value))
        q, k, v = (a.reshape(n, h, d // h) for a in (q, k, v))
        scores = jnp.einsum("qhc,khc->hqk", q, k) / math.sqrt(d // h)
        scores = jnp.where(attn_mask[None], scores, -jnp.inf)
        return jnp.einsum("hqk,khc->qhc", jax.nn.softmax(scores, axis=-1), v).reshape(n, d)


def _inputs(embedding, start, times, marks, mask, temporal: bool):
    d = start.shape[0]
    x = embedding[marks] + (temporal_encoding(times, d) if temporal else 0.0)
    x = jnp.where(mask[:, None], x, 0.0)
    x = jnp.concatenate([start[None], x])
    L1 = x.shape[0]
    valid = jnp.concatenate([jnp.ones((1,), bool), mask])
    causal = jnp.tril(jnp.ones((L1, L1), bool)) & valid[None, :]
    return x, causal


def encode(embedding, start, layers, times, marks, mask) -> Array:
    """``[L + 1, d]`` states: a learned start token at ``t = 0``, then each event's type embedding plus its
    temporal encoding, through causal attention layers (row ``i`` attends to the start and events ``< i``)."""
    x, causal = _inputs(embedding, start, times, marks, mask, True)
    for layer in layers:
        x = layer(x, causal)
    return x


def encode_easytpp(embedding, start, layers, feed_forward, times, marks, mask) -> Array:
    """``[L + 1, d]`` states in EasyTPP's THP layout: the start token at ``t = 0`` and the type embeddings;
    before every layer the (interleaved) temporal encoding is added, then attention and the one
    feed-forward block ``ff2(relu(ff1(x)))`` that every layer shares, with no residual path or layer norm."""
    x, causal = _inputs(embedding, start, times, marks, mask, False)
    d = start.shape[0]
    tem = temporal_encoding(jnp.concatenate([jnp.zeros((1,), times.dtype), jnp.where(mask, times, 0.0)]), d,
                            interleaved=True)
    ff1, ff2 = feed_forward
    for layer in layers:
        x = layer(x + tem, causal)
        x = jax.nn.relu(x @ ff1.weight.T + ff1.bias) @ ff2.weight.T + ff2.bias
    return x
