"""Summed log-probabilities of the loss-masked tokens of a batch of sequences (DPO's log pi(y | x)).

For a sequence ``x_1..x_L`` with real-token mask ``m`` and loss mask ``c`` (the continuation
``y`` after its prompt ``x``), ``log pi(y | x) = sum_i c_i m_i m_{i-1} log softmax(z_{i-1})[x_i]``,
where ``z_{i-1}`` are the logits after the prefix ``x_1..x_{i-1}``. Computed by
:func:`jaxcore.lm.head.model_logprobs`: the chosen logit (a row gather of the head) minus a ``logsumexp``
accumulated over vocabulary chunks (no ``[B, L, V]`` logits), in float32, under one
``eqx.filter_jit`` program; the batch axis is the model's own (one forward of ``[B, L]``).

References:
    Rafailov et al., "Direct Preference Optimization: Your Language Model is Secretly a Reward
    Model", NeurIPS 2023, Eq. 7 (the log-ratios of the policy and the reference).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxcore import lm
from jaxcore._util import check_bool, expected
from jaxcore.lm.head import model_logprobs

__all__ = ["sequence_log_probs"]


def _token_log_probs(model, tokens, mask, loss_mask, intervention=None, check_ids=False):
    """[B, L] log p(x_i | x_<i) at the scored positions (0 elsewhere); traceable.

    ``check_ids``: check traced ids at run time (an ``error_if``, a host callback in the compiled program).
    Off by default: the public entries validate their tokens first (concrete ones on the host,
    traced ones by :func:`check_sequences` in the caller's trace)."""
    if tokens.shape[1] < 2:
        return jnp.zeros(tokens.shape, jnp.promote_types(model.dtype, jnp.float32))
    lp = model_logprobs(model, tokens, mask, intervention=intervention, check_ids=check_ids)
    scored = loss_mask[:, 1:] & mask[:, 1:] & mask[:, :-1]
    lp = jnp.where(scored, lp, 0.0)
    return jnp.concatenate([jnp.zeros_like(lp[:, :1]), lp], axis=1)


def _sequence_log_probs(model, tokens, mask, loss_mask, intervention=None, check_ids=False):
    return jnp.sum(_token_log_probs(model, tokens, mask, loss_mask, intervention, check_ids), axis=1)


@eqx.filter_jit
def _sequence_log_probs_jit(model, tokens, mask, loss_mask, intervention):
    return _sequence_log_probs(model, tokens, mask, loss_mask, intervention)


def _bool_mask(x, name, shape):
    if x is None:
        return jnp.ones(shape, bool)
    if isinstance(x, jax.core.Tracer):
        if tuple(x.shape) != tuple(shape):
            raise ValueError(expected(name, f"shape {tuple(shape)}", f"shape {tuple(x.shape)}", raw=True))
        return x.astype(bool)
    a = np.asarray(x)
    if a.dtype != np.bool_ and not (a.dtype.kind in "iu" and np.isin(a, (0, 1)).all()):
        raise TypeError(expected(name, "a bool (or 0/1) array", f"dtype {a.dtype}", raw=True))
    if a.shape != tuple(shape):
        raise ValueError(expected(name, f"shape {tuple(shape)}", f"shape {a.shape}", raw=True))
    return jnp.asarray(a.astype(bool))


def check_sequences(model, tokens, mask, loss_mask, *, prefix: str = "", check_ids: bool = True):
    """Validate ``tokens [B, L]``, a contiguous real-token ``mask`` and a ``loss_mask`` (host checks; traced ids
    at run time unless ``check_ids=False``)."""
    tokens, mask = lm.model.check_tokens(model, tokens, mask, name=prefix + "tokens", mask_name=prefix + "mask",
                                         check_ids=check_ids)
    if not isinstance(mask, jax.core.Tracer):
        m = np.asarray(mask).astype(np.int8)
        starts = np.sum(np.diff(np.pad(m, ((0, 0), (1, 0))), axis=1) > 0, axis=1)
        if (starts > 1).any():
            row = int(np.flatnonzero(starts > 1)[0])
            raise ValueError(expected(prefix + "mask", "one contiguous run of real tokens per row",
                                      f"row {row} with {int(starts[row])} runs", raw=True))
    loss_mask = _bool_mask(loss_mask, prefix + "loss_mask", tokens.shape) if loss_mask is not None else mask
    return tokens, mask, loss_mask


def sequence_log_probs(model: lm.Llama, tokens: Int[Array, "B L"], mask: Bool[Array, "B L"] | None = None,
                       loss_mask: Bool[Array, "B L"] | None = None, *,
                       intervention: lm.Intervention | None = None, check_ids: bool = True) -> Float[Array, " B"]:
    """Summed log-probability of each sequence's loss-masked tokens, ``sum_i c_i log p(x_i | x_<i)``.

    A token is scored when it is real, in ``loss_mask`` and has a real token before it (the first
    real token is conditioned on). Equals the sum over the scored positions of
    ``log_softmax(forward(model, tokens, mask))`` at the next token. Concrete ids are checked on the
    host and the compiled program holds no host callback; traced ids (a call inside your ``jit``) are
    checked at run time unless ``check_ids=False``.

    Args:
        model: a :class:`jaxcore.lm.Llama`.
        tokens: ``[B, L]`` int token ids.
        mask: ``[B, L]`` bool, True at real tokens, one contiguous run per row (left, right or both
            sides padded); default all True.
        loss_mask: ``[B, L]`` bool, the tokens to score (the continuation); default ``mask``.
        intervention: an optional :class:`jaxcore.lm.Intervention`.
        check_ids: check traced token ids at run time (an ``error_if``: a host callback, which makes JAX
            dispatch every call of the enclosing program through its Python path); ``False`` for ids
            validated once.

    Returns:
        ``[B]`` float32 log-probabilities (nats); 0 for a row with no scored token.

    Raises:
        TypeError: ``model`` is not a Llama; tokens not integers; masks not boolean.
        ValueError: ids out of range, shapes differ, a mask with gaps inside a row.

    References:
        Rafailov et al., "Direct Preference Optimization", NeurIPS 2023, Eq. 7.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore import lm
        >>> model = lm.random_llama(jax.random.key(0))
        >>> toks = jnp.array([[5, 6, 7, 8]])
        >>> lp = sequence_log_probs(model, toks, loss_mask=jnp.array([[False, False, True, True]]))
        >>> bool(jnp.allclose(lp, lm.token_logprobs(model, toks)[:, 2:].sum(1)))
        True
    """
    lm.model.check_model(model)
    tokens, mask, loss_mask = check_sequences(model, tokens, mask, loss_mask,
                                              check_ids=check_bool(check_ids, "check_ids"))
    intervention = lm.model.check_intervention(model, intervention)
    return _sequence_log_probs_jit(model, tokens, mask, loss_mask, intervention)
