"""A tabular toy language model (V tokens, T steps: V^T sequences) for exact oracle checks.

Every prefix of length 0..T is a node of the V-ary tree (``(V^(T+1) - 1) / (V - 1)`` nodes, 121 for
V = 3, T = 4), numbered by length, then lexicographically. The model holds one logit row per
non-terminal node; its "hidden state" of a prefix is the one-hot vector of its node, so a
:class:`ValueHead` / :class:`QHead` on it is a table and the losses' minimisers are exact. The
sampler :func:`toy_sample` calls logits processors through the same ``uses_hidden`` hook as
:func:`jaxcore.lm.generate`, so the tokenwise processors run unchanged on the toy.

References:
    S. Mudgal et al., "Controlled Decoding from Language Models", ICML 2024 (the methods checked here).
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Float, Int

from jaxcore import lm
from jaxcore._util import as_float_array, check_finite, check_int, check_key, check_scalar, check_shape, expected

from .losses import Rollouts
from .scorers import _check_ids
from .tokenwise import tilted_kl

__all__ = ["ToyLM", "ToySample", "ToyValues", "random_toy_lm", "toy_logprob", "toy_rollouts", "toy_sample",
           "toy_sequences", "toy_tilted_kl", "toy_tilted_logprob", "toy_values"]


def _offset(t, v):
    return (v ** t - 1) // (v - 1)


class ToyLM(eqx.Module):
    """A tabular autoregressive model: ``p(y_t | y_<t) = softmax(logits[node(y_<t)])``.

    Attributes:
        logits: ``[M, V]`` logits of the ``M = (V^T - 1) / (V - 1)`` non-terminal nodes.
        vocab_size: V (static).
        length: T (static).
    """

    logits: Float[Array, "M V"]
    vocab_size: int = eqx.field(static=True)
    length: int = eqx.field(static=True)

    @property
    def num_nodes(self) -> int:
        """All prefixes, terminal ones included: the hidden size of heads on the toy."""
        return _offset(self.length + 1, self.vocab_size)

    def node(self, tokens: Int[Array, "... t"]) -> Int[Array, "..."]:
        """The node id of prefixes ``tokens`` (length t static)."""
        t = tokens.shape[-1]
        powers = self.vocab_size ** jnp.arange(t - 1, -1, -1)
        return _offset(t, self.vocab_size) + jnp.sum(tokens * powers, axis=-1).astype(jnp.int32)

    def child(self, node: Int[Array, "..."], t: Any, token: Int[Array, "..."]) -> Int[Array, "..."]:
        """The node after appending ``token`` to node ``node`` of length ``t``."""
        v = self.vocab_size
        return (_offset(t + 1, v) + (node - _offset(t, v)) * v + token).astype(jnp.int32)

    def hidden(self, node: Int[Array, "..."]) -> Float[Array, "... D"]:
        """One-hot features ``[..., num_nodes]`` (the logits' dtype) of nodes."""
        return jax.nn.one_hot(node, self.num_nodes, dtype=self.logits.dtype)


def random_toy_lm(key, vocab_size: int = 3, length: int = 4, *, scale: float = 1.0) -> ToyLM:
    """A toy model with logits ``scale * N(0, 1)`` at every non-terminal node.

    Args:
        key: a ``jax.random.key``.
        vocab_size: V >= 2.
        length: T >= 1.
        scale: logit standard deviation > 0.

    Returns:
        A :class:`ToyLM`.

    Raises:
        TypeError, ValueError: a bad key or size.

    Examples:
        >>> import jax
        >>> toy = random_toy_lm(jax.random.key(0))
        >>> toy.logits.shape, toy.num_nodes
        ((40, 3), 121)
    """
    check_key(key)
    v = check_int(vocab_size, "vocab_size", minimum=2)
    t = check_int(length, "length", minimum=1)
    s = check_scalar(scale, "scale", positive=True)
    return ToyLM(s * jax.random.normal(key, (_offset(t, v), v)), v, t)


def _check_toy(toy):
    if not isinstance(toy, ToyLM):
        raise TypeError(expected("toy", "a jaxcore.decoding.ToyLM", type(toy).__name__, raw=True))
    return toy


def toy_sequences(vocab_size: int = 3, length: int = 4) -> np.ndarray:
    """All ``V^T`` sequences ``[V^T, T]`` int32 in lexicographic order (row i is i in base V).

    Examples:
        >>> toy_sequences(2, 2).tolist()
        [[0, 0], [0, 1], [1, 0], [1, 1]]
    """
    v = check_int(vocab_size, "vocab_size", minimum=2)
    t = check_int(length, "length", minimum=1)
    return np.array(list(itertools.product(range(v), repeat=t)), np.int32)


def _step_logprobs(toy, seqs):
    """``[n, T, V]`` next-token log-probabilities along sequences ``[n, T]`` and the nodes ``[n, T + 1]``."""
    nodes = [jnp.full(seqs.shape[:1], 0, jnp.int32)]
    for t in range(toy.length):
        nodes.append(toy.child(nodes[-1], t, seqs[:, t]))
    nodes = jnp.stack(nodes, axis=1)
    lp = jax.nn.log_softmax(toy.logits[nodes[:, :-1]], axis=-1)
    return lp, nodes


def toy_logprob(toy: ToyLM, tokens: Int[Array, "n T"]) -> Float[Array, " n"]:
    """Exact ``log p(y)`` of sequences ``[n, T]`` under the toy model.

    Raises:
        TypeError: not a :class:`ToyLM`, non-integer tokens.
        ValueError: tokens not of shape ``[n, T]`` or an id outside ``[0, V)`` (under ``jit``: at
            run time, an ``EqxRuntimeError`` naming ``tokens``).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> toy = random_toy_lm(jax.random.key(0))
        >>> round(float(jnp.exp(toy_logprob(toy, toy_sequences())).sum()), 5)
        1.0
    """
    _check_toy(toy)
    seqs = _check_ids(tokens, toy.vocab_size, "tokens")
    check_shape(seqs, "tokens", (None, toy.length))
    return _logprob_jit(toy, seqs.astype(jnp.int32))


@eqx.filter_jit
def _logprob_jit(toy, seqs):
    lp, _ = _step_logprobs(toy, seqs)
    return jnp.sum(jnp.take_along_axis(lp, seqs[..., None], axis=-1)[..., 0], axis=-1)


class ToyValues(NamedTuple):
    """Exact value functions of a reward under the toy base model.

    Attributes:
        value: ``[num_nodes]`` ``V*(node) = E_p[r | prefix]`` (the reward itself at terminal nodes).
        q: ``[M, V]`` ``Q*(node, y) = V*(child(node, y))`` at the non-terminal nodes.
    """

    value: Float[Array, " D"]
    q: Float[Array, "M V"]


def _check_reward(toy, reward):
    r = as_float_array(reward, "reward")
    check_shape(r, "reward", (toy.vocab_size ** toy.length,))
    check_finite(r, "reward")
    return r


def toy_values(toy: ToyLM, reward: Float[Array, " n"]) -> ToyValues:
    """``V*`` and ``Q*`` of a sequence reward (indexed like :func:`toy_sequences`) by backward induction.

    ``V*(y_<=T) = r(y)``, ``V*(y_<t) = sum_y p(y | y_<t) V*(y_<t, y)``.

    Raises:
        TypeError: not a :class:`ToyLM`, a non-real reward.
        ValueError: a reward not of shape ``[V^T]`` or (when concrete) holding NaN/inf.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> toy = random_toy_lm(jax.random.key(0))
        >>> toy_values(toy, jnp.ones(81)).value[:3].tolist()
        [1.0, 1.0, 1.0]
    """
    _check_toy(toy)
    return _values_jit(toy, _check_reward(toy, reward))


@eqx.filter_jit
def _values_jit(toy, r):
    v, big_t = toy.vocab_size, toy.length
    p = jax.nn.softmax(toy.logits.astype(r.dtype), axis=-1)
    level = r  # values of the nodes of length t, in order
    parts = [r]
    qs = []
    for t in range(big_t - 1, -1, -1):
        q = level.reshape(-1, v)  # [V^t, V]: children of the nodes of length t
        qs.append(q)
        lo = _offset(t, v)
        level = jnp.sum(p[lo:lo + v ** t] * q, axis=-1)
        parts.append(level)
    return ToyValues(jnp.concatenate(parts[::-1]), jnp.concatenate(qs[::-1]))


def toy_rollouts(toy: ToyLM, reward: Float[Array, " n"]) -> Rollouts:
    """Every sequence of the toy model as :class:`Rollouts` weighted by its probability ``p(y)``.

    The losses on these data are the exact expected losses under the base model (next-token
    distributions are exact: k = V).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> toy = random_toy_lm(jax.random.key(0))
        >>> toy_rollouts(toy, jnp.ones(81)).hidden.shape
        (81, 5, 121)
    """
    _check_toy(toy)
    return _rollouts_jit(toy, _check_reward(toy, reward), jnp.asarray(toy_sequences(toy.vocab_size, toy.length)))


@eqx.filter_jit
def _rollouts_jit(toy, r, seqs):
    n = seqs.shape[0]
    lp, nodes = _step_logprobs(toy, seqs)
    logp = jnp.sum(jnp.take_along_axis(lp, seqs[..., None], axis=-1)[..., 0], axis=-1)
    next_lp = jnp.concatenate([lp, jnp.zeros((n, 1, toy.vocab_size), lp.dtype)], axis=1)  # terminal: unused
    ids = jnp.broadcast_to(jnp.arange(toy.vocab_size, dtype=jnp.int32), next_lp.shape)
    dt = toy.logits.dtype
    return Rollouts(toy.hidden(nodes), seqs, jnp.ones(seqs.shape, bool), r.astype(dt), ids,
                    jax.nn.softmax(next_lp, axis=-1), jnp.exp(logp).astype(dt), vocab_size=toy.vocab_size)


class ToySample(NamedTuple):
    """What :func:`toy_sample` returns.

    Attributes:
        tokens: ``[S, T]`` int32 sequences.
        logprobs: ``[S, T]`` log-probabilities under the distribution each token was drawn from.
        model_logprobs: ``[S, T]`` log-probabilities under the toy model.
    """

    tokens: Int[Array, "S T"]
    logprobs: Float[Array, "S T"]
    model_logprobs: Float[Array, "S T"]


@eqx.filter_jit
def _toy_sample_jit(key, toy, num_samples, processor):
    s = num_samples
    w = 1 if processor is None else processor.context_size
    uses_hidden = processor is not None and bool(getattr(processor, "uses_hidden", False))
    pstate = None if processor is None else processor.init(s)
    node0 = jnp.zeros((s,), jnp.int32)
    ctx0 = jnp.full((s, w), -1, jnp.int32)

    def step(carry, xs):
        node, ctx, pstate = carry
        t, k = xs
        raw = toy.logits[node]
        z = raw
        if uses_hidden:
            extend = lambda cand: toy.hidden(toy.child(node[:, None], t, cand))  # noqa: E731
            z, pstate = processor(pstate, raw, ctx, hidden=toy.hidden(node), extend=extend)
        elif processor is not None:
            z, pstate = processor(pstate, raw, ctx)
        tok = jax.random.categorical(k, z, axis=-1).astype(jnp.int32)
        lp = jnp.take_along_axis(jax.nn.log_softmax(z, axis=-1), tok[:, None], axis=-1)[:, 0]
        mlp = jnp.take_along_axis(jax.nn.log_softmax(raw, axis=-1), tok[:, None], axis=-1)[:, 0]
        ctx = jnp.concatenate([ctx[:, 1:], tok[:, None]], axis=1)
        return (toy.child(node, t, tok), ctx, pstate), (tok, lp, mlp)

    keys = jax.random.split(key, toy.length)
    _, (tok, lp, mlp) = lax.scan(step, (node0, ctx0, pstate), (jnp.arange(toy.length, dtype=jnp.int32), keys))
    return ToySample(tok.T, lp.T, mlp.T)


def toy_sample(key, toy: ToyLM, num_samples: int, *, processor=None) -> ToySample:
    """Draw sequences from the toy model, through an optional logits processor (as ``lm.generate``).

    Step t draws ``y_t ~ softmax(processor(z_t))`` with ``jax.random.categorical`` and the t-th of
    ``jax.random.split(key, T)``; a ``uses_hidden`` processor gets the one-hot node as ``hidden`` and
    ``extend(cand) -> one-hot children``.

    Args:
        key: a ``jax.random.key``.
        toy: a :class:`ToyLM`.
        num_samples: S >= 1 sequences.
        processor: a logits processor of :mod:`jaxcore.lm.processors` or :mod:`jaxcore.decoding`.

    Returns:
        A :class:`ToySample`.

    Raises:
        TypeError, ValueError: a bad key, toy, count or processor.

    Examples:
        >>> import jax
        >>> toy = random_toy_lm(jax.random.key(0))
        >>> toy_sample(jax.random.key(1), toy, 5).tokens.shape
        (5, 4)
    """
    check_key(key)
    _check_toy(toy)
    s = check_int(num_samples, "num_samples", minimum=1)
    if processor is not None:
        lm.processors.check_processor(processor)
    return _toy_sample_jit(key, toy, s, processor)


def toy_tilted_logprob(toy: ToyLM, q: Float[Array, "M V"], strength) -> Float[Array, " n"]:
    """``log pi_lambda(y)`` of every sequence (order of :func:`toy_sequences`) for the tokenwise tilt
    ``pi_lambda(y | y_<t) ∝ p(y | y_<t) exp(lambda q[node(y_<t), y])``.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> toy = random_toy_lm(jax.random.key(0))
        >>> lp = toy_tilted_logprob(toy, jnp.zeros((40, 3)), 1.0)
        >>> bool(jnp.allclose(lp, toy_logprob(toy, toy_sequences())))
        True
    """
    _check_toy(toy)
    lam = check_scalar(strength, "strength", nonnegative=True)
    qa = as_float_array(q, "q")
    check_shape(qa, "q", toy.logits.shape)
    seqs = jnp.asarray(toy_sequences(toy.vocab_size, toy.length))
    return _tilted_logprob_jit(toy, qa, jnp.asarray(lam, qa.dtype), seqs)


@eqx.filter_jit
def _tilted_logprob_jit(toy, qa, lam, seqs):
    tilted = ToyLM(toy.logits.astype(qa.dtype) + lam * qa, toy.vocab_size, toy.length)
    return _logprob_jit(tilted, seqs)


def toy_tilted_kl(toy: ToyLM, q: Float[Array, "M V"], strength) -> Float[Array, ""]:
    """``KL(pi_lambda || p)`` of the tokenwise tilt over whole sequences, by backward recursion.

    ``KL(node) = sum_y pi(y | node) [log pi(y | node) / p(y | node) + KL(child)]``, ``KL = 0`` at the
    leaves; per node, ``sum_y pi log pi / p = lambda E_pi[q] - log E_p[exp(lambda q)]``
    (:func:`tilted_kl`).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> toy = random_toy_lm(jax.random.key(0))
        >>> float(toy_tilted_kl(toy, jnp.ones((40, 3)), 3.0))    # a constant tilt changes nothing
        0.0
    """
    _check_toy(toy)
    lam = check_scalar(strength, "strength", nonnegative=True)
    qa = as_float_array(q, "q")
    check_shape(qa, "q", toy.logits.shape)
    return _tilted_kl_jit(toy, qa, jnp.asarray(lam, qa.dtype))


@eqx.filter_jit
def _tilted_kl_jit(toy, qa, lam):
    v = toy.vocab_size
    z = toy.logits.astype(qa.dtype)
    step_kl = tilted_kl(z, qa, lam)
    pi = jax.nn.softmax(z + lam * qa, axis=-1)
    level = jnp.zeros((v ** toy.length,), qa.dtype)
    for t in range(toy.length - 1, -1, -1):
        lo = _offset(t, v)
        level = step_kl[lo:lo + v ** t] + jnp.sum(pi[lo:lo + v ** t] * level.reshape(-1, v), axis=-1)
    return level[0]
