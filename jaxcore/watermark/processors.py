"""DiPmark and KGW as logits processors of ``jaxcore.lm``'s decoding loop.

A processor ``p`` has ``p.init(num_rows) -> state`` and
``p(state, logits[B, V], context[B, W]) -> (logits, state)`` with ``W = p.context_size``; it is
called once per generated token inside the jitted ``lax.scan`` of ``jaxcore.lm.generate``, with
``context[:, -1]`` the most recent token and -1 before the start of a left-padded prompt.

Per row and step, the context hash h = H_key(context) seeds the vocabulary permutation
(:mod:`jaxcore.watermark.permutation`). :class:`DiPmark` returns the log of the alpha-reweighted
distribution; :class:`KGW` adds delta to the green list. With ``skip_repeated`` (DiPmark's default)
a row whose context hash was already used in this generation is left unchanged: the hashes are kept
in a fixed-size open-addressing hash set (linear probing, ``capacity`` slots per row) in the state.
Reweighting the same context twice would correlate the draws and break distribution preservation of
the whole sequence; skipping it keeps every reweighted step an independent permutation.

Order matters: the processor must see the distribution that is sampled. Put temperature, top-k and
top-p BEFORE the watermark (``jaxcore.lm.chain(Temperature(0.7), DiPmark(...))`` with
``generate(..., temperature=1.0)``); a temperature applied after the reweight changes the
distribution that the watermark preserves.

References:
    Wu et al., "A Resilient and Accessible Distribution-Preserving Watermark for Large Language
    Models", ICML 2024, Algorithm 1 (generation, with the already-seen texture-key rule).
    Kirchenbauer et al., "A Watermark for Large Language Models", ICML 2023, Algorithm 2.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray, UInt32

from jaxcore import lm
from jaxcore._util import check_bool, check_int, check_key, check_scalar, expected

from .context import _hash, _secret_words
from .permutation import DEFAULT_ROUNDS, _check_method, _positions
from .reweight import _reweight_log

__all__ = ["DiPmark", "KGW", "WatermarkState"]


class WatermarkState(NamedTuple):
    """The decoding state of a watermark processor.

    Attributes:
        seen: ``uint32[B, capacity]`` open-addressing hash set of the context hashes used so far
            (0 marks an empty slot; a hash equal to 0 is stored as 1).
        num_watermarked: ``int32[B]`` steps that were reweighted (the others repeated a context).
        num_steps: ``int32[B]`` steps seen.

    Examples:
        >>> WatermarkState._fields
        ('seen', 'num_watermarked', 'num_steps')
    """

    seen: UInt32[Array, "B C"]
    num_watermarked: Int[Array, " B"]
    num_steps: Int[Array, " B"]


def _lookup_insert(table: UInt32[Array, " C"], h: UInt32[Array, ""]) -> tuple[Any, Any]:
    """Membership of h in one row's table, inserting it if absent (linear probing). -> (was_seen, table)."""
    cap = table.shape[0]
    h = jnp.where(h == 0, jnp.uint32(1), h)
    start = (h & jnp.uint32(cap - 1)).astype(jnp.int32)

    def cond(c):
        n = c
        v = table[(start + n) & (cap - 1)]
        return (v != 0) & (v != h) & (n < cap)

    n = jax.lax.while_loop(cond, lambda n: n + 1, jnp.int32(0))
    slot = (start + jnp.minimum(n, cap - 1)) & (cap - 1)
    v = table[slot]
    found = (v == h) & (n < cap)
    empty = (v == 0) & (n < cap)
    return found, table.at[slot].set(jnp.where(empty, h, v))


def _init_state(num_rows: Any, capacity: int) -> WatermarkState:
    b = check_int(num_rows, "num_rows", minimum=1)
    return WatermarkState(jnp.zeros((b, capacity), jnp.uint32), jnp.zeros(b, jnp.int32), jnp.zeros(b, jnp.int32))


def _common(vocab_size, context_size, method, num_rounds, capacity, skip_repeated):
    vocab_size = check_int(vocab_size, "vocab_size", minimum=2, maximum=2**30)
    context_size = check_int(context_size, "context_size", minimum=1, maximum=64)
    method, num_rounds = _check_method(method, num_rounds)
    capacity = check_int(capacity, "capacity", minimum=2)
    if capacity & (capacity - 1):
        raise ValueError(expected("capacity", "a power of two", capacity))
    return vocab_size, context_size, method, num_rounds, capacity, check_bool(skip_repeated, "skip_repeated")


class _Watermark(lm.LogitsProcessor):
    """The shared state and hashing of the two watermarks (abstract: :class:`DiPmark` and :class:`KGW` are final)."""

    key: PRNGKeyArray
    vocab_size: int = eqx.field(static=True)
    context_size: int = eqx.field(static=True)
    method: str = eqx.field(static=True)
    num_rounds: int = eqx.field(static=True)
    capacity: int = eqx.field(static=True)
    skip_repeated: bool = eqx.field(static=True)

    def init(self, num_rows: int) -> WatermarkState:
        """The empty state for ``num_rows`` rows (an empty hash set per row)."""
        return _init_state(num_rows, self.capacity)

    def _prepare(self, state, logits, context):
        if logits.ndim != 2 or logits.shape[-1] != self.vocab_size:
            raise ValueError(expected("logits", f"a [batch, {self.vocab_size}] array", f"shape {tuple(logits.shape)}", raw=True))
        if context.ndim != 2 or context.shape[-1] < self.context_size or context.shape[0] != logits.shape[0]:
            raise ValueError(expected("context", f"a [{logits.shape[0]}, >= {self.context_size}] array of token ids",
                                      f"shape {tuple(context.shape)}", raw=True))
        secret = _secret_words(self.key)
        h = _hash(secret, context[:, -self.context_size:])
        if self.skip_repeated:
            seen, table = jax.vmap(_lookup_insert)(state.seen, h)
        else:
            seen, table = jnp.zeros(h.shape, bool), state.seen
        positions = _positions(secret, h, self.vocab_size, self.method, self.num_rounds)
        new_state = WatermarkState(table, state.num_watermarked + (~seen).astype(jnp.int32), state.num_steps + 1)
        return seen, positions, new_state


class DiPmark(_Watermark):
    """DiPmark's distribution-preserving watermark (alpha-reweight) as a ``jaxcore.lm`` logits processor.

    Per row: h = H_key(last ``context_size`` tokens); pi_h the keyed vocabulary permutation;
    output log P_W with P_W(t) = g(F(t)) - g(F(t) - P(t)), g(x) = max(x - alpha, 0) +
    max(x - (1 - alpha), 0), F the cumulative of P = softmax(logits) in pi_h's order. A row whose h
    was already used in this generation is returned unchanged (``skip_repeated``).

    Args:
        vocab_size: V, the model's vocabulary (the logits' last axis).
        key: the secret watermark key (keyword-only; detection needs the same key).
        alpha: reweight strength in [0, 1/2] (a traced field: changing it does not recompile).
        context_size: k >= 1 previous tokens in the context key (``context_size`` of the protocol).
        method: "feistel" (keyed bijection, O(V) per step) or "shuffle" (``jax.random.permutation``).
        num_rounds: Feistel rounds.
        capacity: slots of the per-row hash set (a power of two, >= the number of new tokens).
            When a row's set is full, new contexts are still watermarked but no longer remembered.
        skip_repeated: apply the already-seen context rule.

    Raises:
        TypeError / ValueError: a bad key or setting (at construction); logits or context of the
            wrong shape (when called).

    References:
        Wu et al., ICML 2024, Algorithm 1 and Eq. (2).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> wm = DiPmark(5, key=jax.random.key(0), alpha=0.5, context_size=1)
        >>> state = wm.init(1)
        >>> logits, state = wm(state, jnp.log(jnp.full((1, 5), 0.2)), jnp.array([[3]]))
        >>> round(float(jnp.exp(logits).sum()), 6), int(state.num_watermarked[0])
        (1.0, 1)
        >>> _, state = wm(state, logits, jnp.array([[3]]))  # same context again: left unchanged
        >>> int(state.num_watermarked[0]), int(state.num_steps[0])
        (1, 2)
    """

    alpha: Float[Array, ""]

    def __init__(
        self,
        vocab_size: int,
        *,
        key: PRNGKeyArray,
        alpha: float = 0.45,
        context_size: int = 5,
        method: Literal["feistel", "shuffle"] = "feistel",
        num_rounds: int = DEFAULT_ROUNDS,
        capacity: int = 1024,
        skip_repeated: bool = True,
    ):
        self.key = check_key(key)
        (self.vocab_size, self.context_size, self.method, self.num_rounds, self.capacity,
         self.skip_repeated) = _common(vocab_size, context_size, method, num_rounds, capacity, skip_repeated)
        self.alpha = jnp.asarray(check_scalar(alpha, "alpha", low=0.0, high=0.5), jnp.float32)

    def __call__(self, state: WatermarkState, logits: Float[Array, "B V"], context: Int[Array, "B W"]):
        """Reweight one step's logits; returns ``(log P_W [B, V] float32, new state)``."""
        seen, positions, new_state = self._prepare(state, logits, context)
        logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
        out = _reweight_log(logp, positions, self.alpha.astype(jnp.float32))
        return jnp.where(seen[:, None], logits.astype(jnp.float32), out), new_state


class KGW(_Watermark):
    """Kirchenbauer et al.'s soft red-list watermark as a ``jaxcore.lm`` logits processor.

    Per row: h = H_key(last ``context_size`` tokens); the green list is the tokens at positions
    < floor(gamma V) of pi_h; output ``logits + delta * green``.

    Args:
        vocab_size: V.
        key: the secret key (keyword-only).
        gamma: green-list fraction in (0, 1).
        delta: bias added to green logits, >= 0 (a traced field).
        context_size: k previous tokens (KGW's h; 1 in the paper's main experiments).
        method, num_rounds: the permutation (as :class:`DiPmark`).
        capacity, skip_repeated: the already-seen rule (off by default, as in the paper).

    Raises:
        TypeError / ValueError: bad settings or shapes.

    References:
        Kirchenbauer et al., "A Watermark for Large Language Models", ICML 2023, Algorithm 2.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> wm = KGW(4, key=jax.random.key(0), gamma=0.5, delta=2.0)
        >>> logits, _ = wm(wm.init(1), jnp.zeros((1, 4)), jnp.array([[1]]))
        >>> sorted(logits[0].tolist())
        [0.0, 0.0, 2.0, 2.0]
    """

    gamma: float = eqx.field(static=True)
    delta: Float[Array, ""]

    def __init__(
        self,
        vocab_size: int,
        *,
        key: PRNGKeyArray,
        gamma: float = 0.5,
        delta: float = 2.0,
        context_size: int = 1,
        method: Literal["feistel", "shuffle"] = "feistel",
        num_rounds: int = DEFAULT_ROUNDS,
        capacity: int = 1024,
        skip_repeated: bool = False,
    ):
        self.key = check_key(key)
        (self.vocab_size, self.context_size, self.method, self.num_rounds, self.capacity,
         self.skip_repeated) = _common(vocab_size, context_size, method, num_rounds, capacity, skip_repeated)
        self.gamma = check_scalar(gamma, "gamma", low=0.0, high=1.0, low_open=True, high_open=True)
        green = int(self.gamma * self.vocab_size)
        if not 1 <= green <= self.vocab_size - 1:  # no green (or no red) token: nothing to bias or detect
            raise ValueError(expected("gamma", f"a green-list fraction with floor(gamma V) in [1, V - 1] for V = "
                                      f"{self.vocab_size} (at least {1 / self.vocab_size:.4g})",
                                      f"{self.gamma} (floor(gamma V) = {green})", raw=True))
        self.delta = jnp.asarray(check_scalar(delta, "delta", nonnegative=True), jnp.float32)

    @property
    def num_green(self) -> int:
        """Size of the green list, floor(gamma V)."""
        return int(self.gamma * self.vocab_size)

    def __call__(self, state: WatermarkState, logits: Float[Array, "B V"], context: Int[Array, "B W"]):
        """Bias one step's logits; returns ``(logits + delta green [B, V] float32, new state)``."""
        seen, positions, new_state = self._prepare(state, logits, context)
        green = (positions < self.num_green) & ~seen[:, None]
        return logits.astype(jnp.float32) + self.delta * green.astype(jnp.float32), new_state
