"""The Transformer Hawkes Process (THP).

Causal self-attention over the events (type embedding plus a sinusoidal temporal encoding)
gives the state ``s_i``; between events the intensity is a softplus of a linear trend in the
elapsed time::

    lambda_k(t_i + dt) = softplus(alpha_k dt + w_k . s_{i+1} + b_k)

with the interval compensator by quadrature. Two encoders: ``"pre-norm"`` (default; residual
pre-norm transformer layers) and ``"easytpp"`` (EasyTPP 0.3.0's THP layout, for comparisons
weight for weight).

References:
    S. Zuo, H. Jiang, Z. Li, T. Zhao, H. Zha, "Transformer Hawkes Process", ICML 2020, eqs. (2), (6);
    S. Xue et al., "EasyTPP: Towards Open Benchmarking Temporal Point Processes", ICLR 2024.
"""

from __future__ import annotations

from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import check_choice, check_int, check_key, default_float, expected

from ._attention import AttentionLayer, PlainAttention, encode, encode_easytpp
from ._checks import float_dtype
from .neural import NeuralTPP, log_softplus

ENCODERS = ("pre-norm", "easytpp")


def check_model_sizes(d_model: int, num_heads: int, num_layers: int) -> tuple[int, int, int]:
    d = check_int(d_model, "d_model", minimum=2)
    h = check_int(num_heads, "num_heads", minimum=1)
    n = check_int(num_layers, "num_layers", minimum=0)
    if d % h:
        raise ValueError(expected("num_heads", f"a divisor of d_model={d}", h))
    return d, h, n


def attention_trunk(num_marks, d_model, num_heads, num_layers, key, dtype, layer=AttentionLayer):
    """Checked sizes and the shared encoder of THP and SAHP: ``(K, d, dtype, head_key, (embedding, start,
    layers))`` with mark embeddings ``[K, d]``, the start vector ``[d]`` and ``num_layers`` layers built as
    ``layer(d, num_heads, key=..., dtype=...)``."""
    K = check_int(num_marks, "num_marks", minimum=1)
    d, h, n = check_model_sizes(d_model, num_heads, num_layers)
    check_key(key)
    dtype = float_dtype(default_float() if dtype is None else dtype)
    keys = jax.random.split(key, n + 3)
    embedding = jax.random.normal(keys[0], (K, d), dtype) * 0.1
    start = jax.random.normal(keys[1], (d,), dtype) * 0.1
    layers = tuple(layer(d, h, key=k, dtype=dtype) for k in keys[3:])
    return K, d, dtype, keys[2], (embedding, start, layers)


class THP(NeuralTPP):
    """Transformer Hawkes process (an equinox module).

    The ``"easytpp"`` encoder is EasyTPP 0.3.0's ``THP`` (dropout 0, ``use_ln`` off): before each
    layer the temporal encoding (sines and cosines interleaved) is added to the layer's input,
    each layer is multi-head attention with biased query/key/value maps and no output projection
    followed by one feed-forward block ``d -> 2d -> d`` (ReLU) shared by all layers, with no
    residual path and no layer norm. EasyTPP's intensity ``ScaledSoftplus(decay dt + W h + b +
    base)`` at its initial ``beta = 1`` is this model's with ``alpha = decay``, ``w = W``,
    ``b = b + base``; its start is a padding event at ``t = 0`` (zero embedding) where this
    model's ``start`` is learned.

    Attributes:
        embedding: ``[K, d]`` type embeddings.
        start: ``[d]`` the start token (the state before the first event).
        layers: causal attention layers.
        feed_forward: ``()`` (pre-norm: inside each layer) or the shared ``(d -> 2d, 2d -> d)`` pair (easytpp).
        head: ``d -> K`` (``w``, ``b``).
        alpha: ``[K]`` elapsed-time coefficients.
        encoder: ``"pre-norm"`` or ``"easytpp"`` (static).

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import THP, EventBatch
        >>> model = THP(2, key=jax.random.key(0), d_model=8, num_heads=2, num_layers=1)
        >>> batch = EventBatch.from_sequences([[0.3, 1.2]], [[0, 1]], T=2.0, num_marks=2)
        >>> model.log_likelihood(batch).shape
        (1,)
        >>> THP(2, key=jax.random.key(0), d_model=8, encoder="easytpp").log_likelihood(batch).shape
        (1,)

    References:
        Zuo et al., ICML 2020; Xue et al., ICLR 2024 (EasyTPP).
    """

    embedding: Float[Array, "K d"]
    start: Float[Array, " d"]
    layers: tuple
    feed_forward: tuple
    head: eqx.nn.Linear
    alpha: Float[Array, " K"]
    encoder: str = eqx.field(static=True)

    def __init__(self, num_marks: int, *, key: PRNGKeyArray, d_model: int = 32, num_heads: int = 2,
                 num_layers: int = 2, init_rate: float = 1.0, encoder: Literal["pre-norm", "easytpp"] = "pre-norm",
                 dtype: Any = None):
        """Build the networks.

        Args:
            num_marks: ``K``.
            key: PRNG key for the weights.
            d_model, num_heads, num_layers: attention sizes (``num_heads`` divides ``d_model``).
            init_rate: initial intensity of each type (the head's bias is its softplus inverse).
            encoder: ``"pre-norm"`` (residual pre-norm layers, GELU feed-forward in each) or
                ``"easytpp"`` (EasyTPP's layout, above).
            dtype: float32 (default; float64 under x64) or float64.

        Raises:
            ValueError: bad sizes or an unknown ``encoder``. TypeError: ``key`` not a PRNG key, non-float ``dtype``.
        """
        self.encoder = check_choice(encoder, "encoder", ENCODERS)
        layer = PlainAttention if self.encoder == "easytpp" else AttentionLayer
        K, d, dtype, head_key, (self.embedding, self.start, self.layers) = attention_trunk(
            num_marks, d_model, num_heads, num_layers, key, dtype, layer=layer)
        if self.encoder == "easytpp":
            head_key, k1, k2 = jax.random.split(head_key, 3)
            self.feed_forward = (eqx.nn.Linear(d, 2 * d, key=k1, dtype=dtype),
                                 eqx.nn.Linear(2 * d, d, key=k2, dtype=dtype))
        else:
            self.feed_forward = ()
        head = eqx.nn.Linear(d, K, key=head_key, dtype=dtype)
        b = float(jnp.log(jnp.expm1(jnp.asarray(float(init_rate)))))
        self.head = eqx.tree_at(lambda m: (m.weight, m.bias), head, (head.weight * 0.1, jnp.full((K,), b, dtype)))
        self.alpha = jnp.full((K,), -0.1, dtype)

    @property
    def num_marks(self) -> int:
        return self.alpha.shape[0]

    def states(self, times, marks, mask):
        if self.encoder == "easytpp":
            return encode_easytpp(self.embedding, self.start, self.layers, self.feed_forward, times, marks, mask)
        return encode(self.embedding, self.start, self.layers, times, marks, mask)

    def log_intensity(self, state, dt):
        return log_softplus(self.alpha * dt + self.head(state))
