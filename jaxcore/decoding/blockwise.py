"""Blockwise controlled decoding and best-of-K: sample K continuations, keep the best, repeat.

Blockwise CD (:func:`blockwise_generate`) draws K continuations of M tokens from the base model
(the K copies as one batch of ``lm.generate``), scores each extended prefix with a value head, keeps
the argmax and repeats for ``N / M`` blocks (one ``lax.scan``). M = N is best-of-K ranked by the
scorer; M = 1 is a tokenwise sampler. :func:`best_of_k` ranks K whole answers by the reward itself
(the baseline). Ties go to the candidate drawn first (the lowest index; :func:`select_best`), so the
law of the kept sequence is :func:`best_of_k_law`.

References:
    S. Mudgal et al., "Controlled Decoding from Language Models", ICML 2024, Sec. 4 (blockwise CD,
    Eq. 6) and Sec. 5 (best-of-K; the KL bound log K - (K - 1) / K).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Float, Int

from jaxcore import lm
from jaxcore._util import (as_float_array, check_finite, check_int, check_key, check_scalar, check_shape, error_if, expected,
                           is_concrete)

from .losses import check_prompt
from .scorers import check_scorer

__all__ = ["BestOfKResult", "BlockwiseResult", "best_of_k", "best_of_k_kl", "best_of_k_law", "blockwise_generate",
           "select_best"]


def select_best(rewards: Float[Array, "... K"]) -> Int[Array, "..."]:
    """Index of the best of K candidates: the first maximum (ties: the earliest drawn).

    Args:
        rewards: ``[..., K]`` finite scores.

    Returns:
        ``[...]`` int32 indices.

    Raises:
        TypeError: non-numeric (or None) rewards.
        ValueError: a scalar or an empty last axis; a NaN score (also under ``jit``).

    Examples:
        >>> import jax.numpy as jnp
        >>> select_best(jnp.array([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]])).tolist()
        [1, 0]
    """
    r = as_float_array(rewards, "rewards")
    if r.ndim < 1:
        raise ValueError(expected("rewards", "a [..., K] array of candidate scores", f"shape {tuple(r.shape)}", raw=True))
    if r.shape[-1] == 0:
        raise ValueError(expected("rewards", "at least one candidate (K >= 1)", f"shape {tuple(r.shape)}", raw=True))
    if is_concrete(r):
        if np.isnan(np.asarray(r)).any():  # on the host: no compiled program per shape
            raise ValueError(expected("rewards", "scores that are not NaN", np.asarray(r)))
    else:
        r = error_if(r, jnp.isnan(r), "rewards", "scores that are not NaN")
    return _first_max(r)


@jax.jit
def _first_max(r):
    return jnp.argmax(r, axis=-1).astype(jnp.int32)


def best_of_k_law(logprob: Float[Array, " n"], reward: Float[Array, " n"], num_candidates: int) -> Float[Array, " n"]:
    """Exact ``P(best-of-K = y)`` over a finite support with the first-drawn tie rule.

    With ``F(r) = P(r(Y) <= r)``, ``F(r-) = P(r(Y) < r)`` and ``m(r) = P(r(Y) = r)`` under the base
    model: ``P(best = y) = p(y) / m(r_y) * (F(r_y)^K - F(r_y-)^K)``; for distinct rewards this is
    ``F(r_y)^K - F(r_y-)^K``. (Among the draws at the maximal level the first is kept, and which draw
    is first does not depend on its identity, so within a level the kept y follows p.)

    Args:
        logprob: ``[n]`` base log-probabilities of the whole support (summing to 1 in probability, within
            1e-4; ``-inf`` for zero mass).
        reward: ``[n]`` finite rewards.
        num_candidates: K >= 1.

    Returns:
        ``[n]`` probabilities (0 where the base mass is 0).

    Raises:
        ValueError: a concrete ``logprob`` with NaN or +inf, or whose probabilities do not sum to 1; a
            non-finite reward; K < 1.

    Examples:
        >>> import jax.numpy as jnp
        >>> best_of_k_law(jnp.log(jnp.array([0.5, 0.5])), jnp.array([0.0, 1.0]), 2).tolist()
        [0.25, 0.75]
    """
    k = check_int(num_candidates, "num_candidates", minimum=1)
    lp = as_float_array(logprob, "logprob")
    r = as_float_array(reward, "reward")
    check_shape(r, "reward", lp.shape)
    if is_concrete(lp, r):
        a = np.asarray(lp, np.float64)
        if np.isnan(a).any() or (a == np.inf).any():
            raise ValueError(expected("logprob", "log-probabilities (no NaN, no +inf)", _first(a, np.isnan(a) | (a == np.inf)),
                                      raw=True))
        total = float(np.exp(a).sum())
        if abs(total - 1.0) > 1e-4:
            raise ValueError(expected("logprob", "log-probabilities of the whole support (exp summing to 1)",
                                      f"a total mass of {total:.6g}", raw=True))
        check_finite(r, "reward")
    return _best_of_k_law(lp, r, jnp.asarray(k, lp.dtype))


def _first(a, bad):
    i = np.argwhere(bad)[0]
    return f"{a[tuple(i)]} at index {tuple(int(j) for j in i)}"


@jax.jit
def _best_of_k_law(lp, r, k):
    p = jnp.exp(lp)
    le = jnp.sum(jnp.where(r[None, :] <= r[:, None], p[None, :], 0.0), axis=1)
    lt = jnp.sum(jnp.where(r[None, :] < r[:, None], p[None, :], 0.0), axis=1)
    # a level of zero base mass is never drawn: 0, not 0 / 0
    m = le - lt
    return jnp.where(p > 0, p / jnp.where(m > 0, m, 1.0) * (le ** k - lt ** k), 0.0)


def best_of_k_kl(num_candidates: int) -> float:
    """The KL bound ``log K - (K - 1) / K`` (nats) of best-of-K to the base model.

    Examples:
        >>> best_of_k_kl(1)
        0.0
    """
    k = check_int(num_candidates, "num_candidates", minimum=1)
    return float(np.log(k) - (k - 1) / k)


class BestOfKResult(NamedTuple):
    """What :func:`best_of_k` returns.

    Attributes:
        tokens: ``[B, N]`` the kept answers.
        mask: ``[B, N]`` their masks.
        reward: ``[B]`` their rewards.
        index: ``[B]`` which candidate was kept.
        candidates: ``[B, K, N]`` all candidates.
        candidate_rewards: ``[B, K]`` their rewards.
    """

    tokens: Int[Array, "B N"]
    mask: Array
    reward: Float[Array, " B"]
    index: Int[Array, " B"]
    candidates: Int[Array, "B K N"]
    candidate_rewards: Float[Array, "B K"]


def best_of_k(key, model: lm.Llama, prompt_tokens, prompt_mask=None, *, reward_fn: Callable, num_candidates: int,
              max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
              eos_token_id: int | None = None) -> BestOfKResult:
    """Best-of-K: draw K answers per prompt (one batched ``lm.generate``), keep the highest reward.

    Args:
        key: a ``jax.random.key``.
        model: a :class:`jaxcore.lm.Llama`.
        prompt_tokens: ``[B, P]`` left-padded prompts; prompt_mask: ``[B, P]`` bool or None.
        reward_fn: ``reward_fn(tokens[B*K, N], mask[B*K, N]) -> [B*K]`` (host or jnp; rows grouped by
            prompt: rows ``b*K .. b*K + K - 1`` answer prompt b).
        num_candidates: K >= 1.
        max_new_tokens, temperature, top_k, eos_token_id: as :func:`jaxcore.lm.generate`.

    Returns:
        A :class:`BestOfKResult` (ties: the first drawn, :func:`select_best`).

    Raises:
        TypeError, ValueError: bad arguments or rewards of the wrong shape / NaN.

    References:
        Mudgal et al., ICML 2024, Sec. 5 (best-of-K baseline).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore import lm
        >>> model = lm.random_llama(jax.random.key(0))
        >>> count7 = lambda t, m: jnp.sum(t == 7, axis=1)
        >>> out = best_of_k(jax.random.key(1), model, jnp.array([[1, 2]]), reward_fn=count7,
        ...                 num_candidates=4, max_new_tokens=3)  # doctest: +SKIP
        >>> bool(out.reward[0] == out.candidate_rewards[0].max())  # doctest: +SKIP
        True
    """
    check_key(key)
    k = check_int(num_candidates, "num_candidates", minimum=1)
    prompt, mask = check_prompt(prompt_tokens, prompt_mask)
    if not callable(reward_fn):
        raise TypeError(expected("reward_fn", "a callable reward_fn(tokens, mask)", type(reward_fn).__name__,
                                 raw=True))
    b = prompt.shape[0]
    out = lm.generate(key, model, jnp.repeat(prompt, k, axis=0), jnp.repeat(mask, k, axis=0),
                      max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, eos_token_id=eos_token_id)
    r = as_float_array(reward_fn(out.tokens, out.mask), "reward_fn(tokens, mask)", dtype=jnp.float32)
    check_shape(r, "reward_fn(tokens, mask)", (b * k,))
    if bool(jnp.any(jnp.isnan(r))):
        raise ValueError(expected("reward_fn(tokens, mask)", "rewards that are not NaN", np.asarray(r)))
    r = r.reshape(b, k)
    idx = select_best(r)
    cand = out.tokens.reshape(b, k, -1)
    return BestOfKResult(_pick(cand, idx), _pick(out.mask.reshape(b, k, -1), idx), _pick(r, idx), idx, cand, r)


def _pick(x, index):
    """``x[b, index[b]]`` for every row b of ``x [B, K, ...]`` as a gather with a batch dimension (a
    batch split over devices stays split; indexing with ``arange(B)`` makes XLA's partitioner gather it)."""
    return jnp.take_along_axis(x, index.reshape(index.shape + (1,) * (x.ndim - 1)), axis=1)[:, 0]


class BlockwiseResult(NamedTuple):
    """What :func:`blockwise_generate` returns.

    Attributes:
        tokens: ``[B, N]`` int32 the kept tokens.
        scores: ``[B, N / M]`` the scorer's value of each kept block's prefix.
        model_logprobs: ``[B, N]`` base log-probabilities of the kept tokens.
    """

    tokens: Int[Array, "B N"]
    scores: Float[Array, "B nb"]
    model_logprobs: Float[Array, "B N"]


@eqx.filter_jit
def _blockwise_jit(key, model, prompt, mask, scorer, k, m, n, temperature, top_k):
    b, p = prompt.shape
    pad = n - m
    buf = jnp.concatenate([jnp.zeros((b, pad), jnp.int32), prompt], axis=1)
    bmask = jnp.concatenate([jnp.zeros((b, pad), bool), mask], axis=1)

    def block(carry, kb):
        buf, bmask = carry
        rb, rm = jnp.repeat(buf, k, axis=0), jnp.repeat(bmask, k, axis=0)
        out = lm.generate(kb, model, rb, rm, max_new_tokens=m, temperature=temperature, top_k=top_k)
        seq = jnp.concatenate([rb, out.tokens], axis=1)
        smask = jnp.concatenate([rm, jnp.ones((b * k, m), bool)], axis=1)
        hid = lm.forward_hidden(model, seq, smask).residual[:, -1, -1]
        score = scorer(hid).reshape(b, k)
        best = select_best(score)
        chosen = _pick(out.tokens.reshape(b, k, m), best)
        mlp = _pick(out.model_logprobs.reshape(b, k, m), best)
        nbuf = jnp.concatenate([buf, chosen], axis=1)[:, m:]
        nmask = jnp.concatenate([bmask, jnp.ones((b, m), bool)], axis=1)[:, m:]
        return (nbuf, nmask), (chosen, _pick(score, best), mlp)

    _, (toks, scores, mlps) = lax.scan(block, (buf, bmask), jax.random.split(key, n // m))
    flat = lambda a: jnp.moveaxis(a, 0, 1).reshape(b, -1)  # noqa: E731
    return BlockwiseResult(flat(toks), scores.T, flat(mlps))


def blockwise_generate(key, model: lm.Llama, prompt_tokens, prompt_mask=None, *, scorer, num_candidates: int,
                       block_size: int, max_new_tokens: int, temperature: float = 1.0,
                       top_k: int | None = None) -> BlockwiseResult:
    """Blockwise CD: per block, K base continuations of M tokens; keep the one the value head ranks best.

    ``y_block = argmax_{k} V(x, y_<, z_k)`` over ``z_1..z_K ~ p(. | x, y_<)`` of M tokens each, for
    ``N / M`` blocks (no end-of-sequence handling: every row gets N tokens).

    Args:
        key: a ``jax.random.key``.
        model: a :class:`jaxcore.lm.Llama`.
        prompt_tokens: ``[B, P]`` left-padded prompts; prompt_mask: ``[B, P]`` bool or None.
        scorer: a :class:`ValueHead` (or :func:`combine` of them) on the model's hidden states.
        num_candidates: K >= 1.
        block_size: M >= 1 dividing ``max_new_tokens`` (M = N: best-of-K by the scorer).
        max_new_tokens: N.
        temperature, top_k: of the base sampler (as :func:`jaxcore.lm.generate`).

    Returns:
        A :class:`BlockwiseResult`.

    Raises:
        TypeError, ValueError: bad arguments; M not dividing N.

    References:
        Mudgal et al., "Controlled Decoding from Language Models", ICML 2024, Sec. 4, Eq. 6.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore import lm
        >>> from jaxcore.decoding import ValueHead
        >>> model = lm.random_llama(jax.random.key(0))
        >>> out = blockwise_generate(jax.random.key(1), model, jnp.array([[1, 2]]), scorer=ValueHead(32),
        ...                          num_candidates=2, block_size=2, max_new_tokens=4)  # doctest: +SKIP
        >>> out.tokens.shape, out.scores.shape  # doctest: +SKIP
        ((1, 4), (1, 2))
    """
    check_key(key)
    if not isinstance(model, lm.Llama):
        raise TypeError(expected("model", "a jaxcore.lm.Llama", type(model).__name__, raw=True))
    check_scorer(scorer, "value")
    if scorer.dim != model.config.dim:
        raise ValueError(expected("scorer", f"a head of hidden size {model.config.dim} (the model's)", scorer.dim))
    prompt, mask = check_prompt(prompt_tokens, prompt_mask)
    k = check_int(num_candidates, "num_candidates", minimum=1)
    n = check_int(max_new_tokens, "max_new_tokens", minimum=1)
    m = check_int(block_size, "block_size", minimum=1, maximum=n)
    if n % m:
        raise ValueError(expected("block_size", f"a divisor of max_new_tokens = {n}", m))
    t = check_scalar(temperature, "temperature", positive=True)
    tk = None if top_k is None else check_int(top_k, "top_k", minimum=1)
    if prompt.shape[1] + n > model.config.max_positions:
        raise ValueError(expected("max_new_tokens", f"at most max_positions - P = "
                                  f"{model.config.max_positions - prompt.shape[1]}", n))
    if not isinstance(mask, jax.core.Tracer):  # under an outer jit (a sharded batch, say) the check is the caller's
        m_np = np.asarray(mask)
        if not m_np[:, -1].all():
            raise ValueError(expected("prompt_mask", "left-padded prompts (each row's last entry True)", m_np))
    return _blockwise_jit(key, model, prompt, mask, scorer, k, m, n, t, tk)
