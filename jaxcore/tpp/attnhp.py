"""The Attentive Neural Hawkes Process (AttNHP, A-NHP).

Every event ``(k_j, t_j)`` and every query time ``t`` has a continuous-time embedding built
by attention over the events strictly before it. With the sinusoidal time features ``[[t]]``
(``d`` features, THP's frequencies) and ``[[k, t]]^(0)`` a learned type embedding (a learned
type-agnostic vector for a query time), layer ``l = 1..N`` is::

    [[k, t]]^(l) = [[k, t]]^(l-1) + tanh( sum_{j: t_j < t} v_j^(l) alpha_j / (1 + sum_{j: t_j < t} alpha_j) )
    alpha_j = exp(k_j^(l) . q^(l)(t) / sqrt(d_h)),   q^(l)(t) = Q^(l) [1; [[t]]; [[k, t]]^(l-1)],
    k_j^(l) = K^(l) [1; [[t_j]]; [[k_j, t_j]]^(l-1)],  v_j^(l) = V^(l) [1; [[t_j]]; [[k_j, t_j]]^(l-1)]

(per head, ``d_h = d / num_heads``, heads concatenated), and the intensity at ``t`` is
``lambda_k(t) = softplus(w_k . [[t]]^(N) + b_k)``. The query at ``t`` runs its own layer
stack over the fixed keys and values of the past events, so the intensity moves continuously
between events (THP's is a fixed function of the last hidden state there).

In the interface of :class:`jaxcore.tpp.NeuralTPP` the state of interval ``i`` is the flat
vector ``[t_{i-1}, lo, hi, K^(1), V^(1), ..., K^(N), V^(N)]`` (width ``3 + 2 N L d`` for a padded
length ``L``): the previous event time, the range of valid key slots (the attention mask is
``j < i``) and the keys and values of all ``L`` events per layer, so ``log_intensity(state,
dt)`` evaluates the query stack at ``t_{i-1} + dt`` and the Gauss-Legendre compensator and
thinning sampler of ``neural.py`` apply unchanged. Cost: ``O(N L^2 d)`` per sequence for the
states and ``O(N L d)`` per intensity evaluation (``O(g N L^2 d)`` for the likelihood with
``g`` quadrature nodes per interval); memory ``O(N L^2 d)`` per sequence for the states. The
thinning sampler evaluates ``B L num_samples num_proposals`` intensities at once, each ``O(N L d)``:
for long sequences (hundreds of events) that outgrows memory; ``max_history = W`` (attention to the
last ``W`` past events, a window the paper does not use) puts ``W`` in place of ``L`` in the state
and the per-evaluation cost.

References:
    C. Yang, H. Mei, J. Eisner, "Transformer Embeddings of Irregularly Spaced Events and Their
    Participants", ICLR 2022, Sec. 2 (eqs. (1)-(5): the time embedding, the layer update with
    the ``1 +`` null term in the attention denominator, the query/key/value maps and the
    softplus intensity). Simplifications here: the query of a time ``t`` is type-agnostic (one
    query stack for all ``K`` types and a linear head ``d -> K``, as EasyTPP's ``AttNHP``)
    instead of one embedding ``[[k, t]]`` per type; the intensity uses the top layer only and
    a plain (unscaled) softplus; the time features use THP's frequencies ``1 / 10000^{2j/d}``;
    multi-head attention splits ``d`` into ``num_heads`` heads without an output projection; no
    layer normalisation or dropout.
"""

from __future__ import annotations

import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import check_int, check_key, default_float, expected

from ._attention import temporal_encoding
from ._checks import float_dtype
from .neural import NeuralTPP, log_softplus
from .thp import check_model_sizes


def _attend(q, k, v, valid, num_heads):
    """``sum_j v_j alpha_j / (1 + sum_j alpha_j)`` over the ``valid`` rows, per head: ``[d]``."""
    L, d = k.shape
    dh = d // num_heads
    qh = q.reshape(num_heads, dh)
    kh = k.reshape(L, num_heads, dh)
    vh = v.reshape(L, num_heads, dh)
    s = jnp.einsum("hd,lhd->hl", qh, kh) / math.sqrt(dh)
    s = jnp.where(valid[None, :], s, -jnp.inf)
    # the null term (score 0, value 0) keeps the shift finite with no valid row
    m = jax.lax.stop_gradient(jnp.maximum(jnp.max(s, axis=1, keepdims=True), 0.0))
    e = jnp.exp(s - m)
    num = jnp.einsum("hl,lhd->hd", e, vh)
    den = jnp.exp(-m) + jnp.sum(e, axis=1, keepdims=True)
    return (num / den).reshape(d)


class AttNHP(NeuralTPP):
    """Attentive neural Hawkes process: attention embeddings of events and of query times (an equinox module).

    ``lambda_k(t) = softplus(w_k . [[t]]^(N) + b_k)``, ``[[t]]^(N)`` the query-time embedding of the module
    docstring's layer equations over the events before ``t``. The state of interval ``i`` (:meth:`states`,
    ``[3 + 2 N L d]``) holds ``t_{i-1}``, the valid slot range and every layer's keys and values of the ``L``
    padded events (of the last ``max_history`` events before ``t_i``, ``[3 + 2 N W d]``, with a window).

    Attributes:
        embedding: ``[K, d]`` type embeddings (layer 0 of an event).
        query: ``[d]`` layer 0 of a query time.
        qkv: ``num_layers`` maps ``2 d -> 3 d`` (``Q, K, V`` of ``[1; [[t]]; x]``, the bias is the ``1``).
        head: ``d -> K`` (``w``, ``b``).
        num_heads: attention heads (static).

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import AttNHP, EventBatch
        >>> model = AttNHP(2, key=jax.random.key(0), d_model=8, num_heads=2, num_layers=1)
        >>> batch = EventBatch.from_sequences([[0.3, 1.2]], [[0, 1]], T=2.0, num_marks=2)
        >>> model.log_likelihood(batch).shape
        (1,)

    References:
        Yang, Mei and Eisner, ICLR 2022, Sec. 2.
    """

    embedding: Float[Array, "K d"]
    query: Float[Array, " d"]
    qkv: tuple
    head: eqx.nn.Linear
    num_heads: int = eqx.field(static=True)
    max_history: int | None = eqx.field(static=True)

    def __init__(self, num_marks: int, *, key: PRNGKeyArray, d_model: int = 32, num_heads: int = 2,
                 num_layers: int = 2, init_rate: float = 1.0, max_history: int | None = None, dtype: Any = None):
        """Build the networks.

        Args:
            num_marks: ``K``.
            key: PRNG key for the weights.
            d_model: embedding width ``d`` (also the number of time features), >= 2.
            num_heads: attention heads, a divisor of ``d_model``.
            num_layers: attention layers ``N`` >= 1.
            init_rate: initial intensity of each type (the head's bias is its softplus inverse).
            max_history: ``None`` (the paper's model: every past event is attended to) or ``W >= 1``:
                events and query times attend to their last ``W`` past events only, so the state is
                ``[3 + 2 N W d]`` instead of ``[3 + 2 N L d]`` (identical to ``None`` while no event
                has more than ``W`` predecessors).
            dtype: float32 (default; float64 under x64) or float64.

        Raises:
            ValueError: ``num_marks < 1``, ``d_model < 2``, ``num_layers < 1``, ``num_heads`` not a
                divisor of ``d_model``, non-positive ``init_rate``, ``max_history < 1``.
            TypeError: ``key`` not a PRNG key, non-int sizes, non-float ``dtype``.
        """
        K = check_int(num_marks, "num_marks", minimum=1)
        check_int(num_layers, "num_layers", minimum=1)
        d, h, n = check_model_sizes(d_model, num_heads, num_layers)
        check_key(key)
        try:
            rate = float(init_rate)
        except (TypeError, ValueError):
            raise TypeError(expected("init_rate", "a real number", init_rate)) from None
        if not math.isfinite(rate) or rate <= 0:
            raise ValueError(expected("init_rate", "a finite number > 0", init_rate))
        self.max_history = None if max_history is None else check_int(max_history, "max_history", minimum=1)
        dtype = float_dtype(default_float() if dtype is None else dtype)
        keys = jax.random.split(key, n + 3)
        self.embedding = jax.random.normal(keys[0], (K, d), dtype) * 0.1
        self.query = jax.random.normal(keys[1], (d,), dtype) * 0.1
        self.qkv = tuple(eqx.nn.Linear(2 * d, 3 * d, key=k, dtype=dtype) for k in keys[3:])
        head = eqx.nn.Linear(d, K, key=keys[2], dtype=dtype)
        b = float(jnp.log(jnp.expm1(jnp.asarray(rate))))
        self.head = eqx.tree_at(lambda m: (m.weight, m.bias), head, (head.weight * 0.1, jnp.full((K,), b, dtype)))
        self.num_heads = h

    @property
    def num_marks(self) -> int:
        return self.embedding.shape[0]

    def states(self, times, marks, mask):
        """``[L + 1, 3 + 2 N W d]``: row ``i`` is ``[t_{i-1}, lo_i, hi_i, keys and values of every layer]``, the
        slots ``lo_i <= r < hi_i`` of the ``W`` key/value slots holding the events attended to
        (``W = L``: slot ``r`` is event ``r``, ``lo = 0, hi = i``; a window ``W < L``: slot ``r`` is event
        ``i - W + r``, ``lo = W - min(i, W), hi = W``)."""
        L = times.shape[0]
        d = self.query.shape[0]
        W = L if self.max_history is None else min(self.max_history, L)
        t = jnp.where(mask, times, 0.0)
        tf = temporal_encoding(t, d)
        x = jnp.where(mask[:, None], self.embedding[marks], 0.0)
        idx = jnp.arange(L)
        # event j attends to the (last W) events before it
        before = (idx[None, :] < idx[:, None]) & (idx[None, :] >= idx[:, None] - W) & mask[None, :]
        kv = []
        for layer in self.qkv:
            q, k, v = jnp.split(jax.vmap(layer)(jnp.concatenate([tf, x], -1)), 3, axis=-1)
            kv.append(jnp.stack([k, v]))
            x = x + jnp.tanh(jax.vmap(lambda qq, b: _attend(qq, k, v, b, self.num_heads))(q, before))
        kv = jnp.stack(kv)  # [N, 2, L, d]
        prev = jnp.concatenate([jnp.zeros((1,), t.dtype), t])
        rows = jnp.arange(L + 1)
        if W == L:
            # the rows share the keys and values; a broadcast then column writes (XLA:CPU copied a
            # concatenation of the broadcast element by element, 2x slower)
            flat = jnp.concatenate([jnp.zeros((3,), t.dtype), kv.reshape(-1)])
            S = jnp.broadcast_to(flat[None], (L + 1, flat.shape[0]))
            lo, hi = jnp.zeros((L + 1,), t.dtype), rows.astype(t.dtype)
        else:
            slot = rows[:, None] - W + jnp.arange(W)[None, :]  # [L + 1, W] event in each slot
            win = jnp.moveaxis(kv[:, :, jnp.clip(slot, 0, L - 1)], 2, 0)  # [L + 1, N, 2, W, d]
            S = jnp.concatenate([jnp.zeros((L + 1, 3), t.dtype), win.reshape(L + 1, -1)], 1)
            lo, hi = (W - jnp.minimum(rows, W)).astype(t.dtype), jnp.full((L + 1,), W, t.dtype)
        return S.at[:, 0].set(prev).at[:, 1].set(lo).at[:, 2].set(hi)

    def query_embedding(self, state: Float[Array, " D"], dt: Float[Array, ""]) -> Float[Array, " d"]:
        """``[[t]]^(N)`` at ``t = t_{i-1} + dt`` from the state of interval ``i``, ``[d]``."""
        d = self.query.shape[0]
        n = len(self.qkv)
        W = (state.shape[0] - 3) // (2 * n * d)
        kv = state[3:].reshape(n, 2, W, d)
        r = jnp.arange(W)
        valid = (r >= state[1]) & (r < state[2])
        tf = temporal_encoding((state[0] + dt)[None], d)[0]
        x = self.query
        for layer, (k, v) in zip(self.qkv, kv):
            q = layer.weight[:d] @ jnp.concatenate([tf, x]) + layer.bias[:d]  # Q only
            x = x + jnp.tanh(_attend(q, k, v, valid, self.num_heads))
        return x

    def log_intensity(self, state, dt):
        """``log lambda_k(t_{i-1} + dt)`` from the state of interval ``i``, ``[K]`` (nats)."""
        return log_softplus(self.head(self.query_embedding(state, dt)))
