"""Sequence log-probabilities and perplexity under a :class:`Llama`."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from .head import _model_logprobs
from .model import Intervention, Llama, _acc, check_intervention, check_model, check_tokens

__all__ = ["perplexity", "sequence_logprob", "token_logprobs"]


def _scored(mask, target_mask):
    """Positions i >= 1 that are targets and real, with a real token before them."""
    prev = jnp.concatenate([jnp.zeros_like(mask[:, :1]), jnp.cumsum(mask, axis=1)[:, :-1] > 0], axis=1)
    return mask & target_mask & prev


@eqx.filter_jit
def _token_logprobs_jit(model, tokens, mask, target_mask, intervention):
    # the logits that predict tokens[:, i] sit at the previous real position; with left (or no)
    # padding that is i - 1. The head runs by vocabulary chunks (no [B, L, V] logits; lm/head.py).
    tok_lp = _model_logprobs(model, tokens, mask, intervention) if tokens.shape[1] > 1 \
        else jnp.zeros((tokens.shape[0], 0), _acc(model.dtype))
    tok_lp = jnp.concatenate([jnp.zeros_like(tok_lp[:, :1]), tok_lp], axis=1)
    scored = _scored(mask, target_mask)
    return jnp.where(scored, tok_lp, 0.0), scored


def _check(model, tokens, mask, target_mask, intervention):
    check_model(model)
    tokens, mask = check_tokens(model, tokens, mask)
    if target_mask is None:
        target = mask
    else:
        # the ids were checked just above: a second run-time check would add a second host callback
        _, target = check_tokens(model, tokens, target_mask, mask_name="target_mask", check_ids=False)
    if not isinstance(mask, jax.core.Tracer):
        m = np.asarray(mask).astype(np.int8)
        if (np.diff(m, axis=1) < 0).any() and (np.diff(m, axis=1) > 0).any():
            raise ValueError("mask: expected left or right padding (one contiguous run of True per row), "
                             "got gaps inside a row")
    return tokens, mask, target, check_intervention(model, intervention)


def token_logprobs(model: Llama, tokens: Int[Array, "B L"], mask: Bool[Array, "B L"] | None = None, *,
                   target_mask: Bool[Array, "B L"] | None = None,
                   intervention: Intervention | None = None) -> Float[Array, "B L"]:
    """``log p(x_i | x_<i)`` at every scored position, 0 elsewhere.

    Scored: real tokens (``mask``) that are targets (``target_mask``, default ``mask``) and
    have at least one real token before them.

    Args:
        model: a :class:`Llama`.
        tokens: ``[B, L]`` int token ids (left- or right-padded).
        mask: ``[B, L]`` bool, True at real tokens (default all True).
        target_mask: ``[B, L]`` bool, the tokens to score (e.g. a continuation after its prompt).
        intervention: an optional :class:`Intervention`.

    Returns:
        ``[B, L]`` float32 log-probabilities (nats).

    Raises:
        TypeError, ValueError: as :func:`forward`; a mask with gaps inside a row.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.lm import random_llama
        >>> model = random_llama(jax.random.key(0))
        >>> lp = token_logprobs(model, jnp.array([[1, 2, 3]]))
        >>> float(lp[0, 0]), bool(lp[0, 1] < 0)
        (0.0, True)
    """
    tokens, mask, target, intervention = _check(model, tokens, mask, target_mask, intervention)
    return _token_logprobs_jit(model, tokens, mask, target, intervention)[0]


def sequence_logprob(model: Llama, tokens: Int[Array, "B L"], mask: Bool[Array, "B L"] | None = None, *,
                     target_mask: Bool[Array, "B L"] | None = None,
                     intervention: Intervention | None = None) -> Float[Array, " B"]:
    """Log-probability of each sequence's scored tokens, ``sum_i log p(x_i | x_<i)`` (nats).

    The first real token is conditioned on, not scored (there is no BOS convention imposed); see
    :func:`token_logprobs` for the scored positions.

    Args:
        model, tokens, mask, target_mask, intervention: as :func:`token_logprobs`.

    Returns:
        ``[B]`` float32.

    Raises:
        TypeError, ValueError: as :func:`token_logprobs`.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.lm import random_llama
        >>> model = random_llama(jax.random.key(0))
        >>> sequence_logprob(model, jnp.array([[1, 2, 3]])).shape
        (1,)
    """
    tokens, mask, target, intervention = _check(model, tokens, mask, target_mask, intervention)
    return jnp.sum(_token_logprobs_jit(model, tokens, mask, target, intervention)[0], axis=1)


def perplexity(model: Llama, tokens: Int[Array, "B L"], mask: Bool[Array, "B L"] | None = None, *,
               target_mask: Bool[Array, "B L"] | None = None,
               intervention: Intervention | None = None) -> Float[Array, " B"]:
    """Per-sequence perplexity ``exp(-mean_i log p(x_i | x_<i))`` over the scored tokens.

    Args:
        model, tokens, mask, target_mask, intervention: as :func:`token_logprobs`.

    Returns:
        ``[B]`` float32 (NaN for a row with no scored token).

    Raises:
        TypeError, ValueError: as :func:`token_logprobs`.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.lm import random_llama
        >>> model = random_llama(jax.random.key(0))
        >>> bool(perplexity(model, jnp.array([[1, 2, 3]]))[0] > 1.0)
        True
    """
    tokens, mask, target, intervention = _check(model, tokens, mask, target_mask, intervention)
    lp, scored = _token_logprobs_jit(model, tokens, mask, target, intervention)
    n = jnp.sum(scored, axis=1)
    return jnp.exp(-jnp.sum(lp, axis=1) / jnp.where(n > 0, n, jnp.nan))
