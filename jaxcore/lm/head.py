"""Next-token log-probabilities through a large-vocabulary output head, vocabulary chunk by chunk.

``log p(t_n | h_n) = h_n . w_{t_n} - logsumexp_v(h_n . w_v)`` for rows ``h [N, d]`` and a head
``W`` (``[V, d]``, the tied embedding, or ``[d, V]``). The ``logsumexp`` is accumulated over
vocabulary chunks of ``chunk_size`` columns (one ``[N, chunk_size]`` block of logits at a time, still
in cache when it is reduced) and the target logit is a row gather of ``W``, so the ``[N, V]`` logits
are never materialised. The gradient is a ``jax.custom_vjp``: ``d/dz = g (onehot(t) - softmax(z))``,
recomputed chunk by chunk in the backward pass (memory ``O(N chunk_size)``), or, for a small block
(``N V`` at most :data:`SAVE_LOGITS_MAX` elements), from the logits kept by the forward pass (one
head product fewer; see :func:`next_token_logprobs`).
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float, Int

import numpy as np

from .._util.checks import check_bool, check_int, error_if, expected
from .model import Intervention, Llama, _final_norm, _head_weight, _run_layers, check_intervention, check_model, \
    check_tokens

__all__ = ["SAVE_LOGITS_MAX", "model_logprobs", "next_token_logprobs"]

SAVE_LOGITS_MAX = 1 << 25
"""The most logits (``N V`` elements, 128 MiB in float32) the forward pass keeps for the backward
pass; a larger block is recomputed chunk by chunk."""

DEFAULT_CHUNK = 8192


def _acc(dtype):
    return jnp.promote_types(dtype, jnp.float32)


def _slice(w, start, size, vocab_first):
    return lax.dynamic_slice_in_dim(w, start, size, axis=0 if vocab_first else 1)


def _logits(h, w, vocab_first):
    """``h @ W^T`` (``[V, d]`` head) or ``h @ W`` (``[d, V]``), in the weight dtype, accumulated in h's."""
    dims = (((1,), (1,)), ((), ())) if vocab_first else (((1,), (0,)), ((), ()))
    return lax.dot_general(h.astype(w.dtype), w, dims, preferred_element_type=h.dtype)


def _rounded(h, w):
    """``h`` rounded to the weight dtype (as the head products see it), in h's dtype."""
    return h.astype(w.dtype).astype(h.dtype)


def _blocks(vocab, chunk):
    """(number of full chunks, remainder) of a vocabulary of ``vocab`` columns."""
    return vocab // chunk, vocab % chunk


def _lse(h, w, t, chunk, vocab_first):
    """Row-wise ``logsumexp`` of the logits, accumulated over vocabulary chunks (online), and each row's target
    logit read from the same chunk products (``t [N]`` in ``[0, V)``).

    Reading the target logit from the products the normaliser sums (rather than a separate row gather,
    whose dot product rounds in another order) keeps ``z_t - logsumexp(z)`` exact when the logits are so
    large that one rounding step of them exceeds the log-probability itself (``|z| ~ 1e31`` in float32).
    """
    vocab = w.shape[0 if vocab_first else 1]
    num, rem = _blocks(vocab, chunk)

    def add(carry, z, start):
        acc, zt = carry
        idx = t - start
        inside = (idx >= 0) & (idx < z.shape[-1])
        picked = jnp.take_along_axis(z, jnp.clip(idx, 0, z.shape[-1] - 1)[:, None], axis=-1)[:, 0]
        return jnp.logaddexp(acc, jax.nn.logsumexp(z, axis=-1)), jnp.where(inside, picked, zt)

    carry = (jnp.full(h.shape[:1], -jnp.inf, h.dtype), jnp.zeros(h.shape[:1], h.dtype))
    if num:
        carry = lax.fori_loop(0, num, lambda i, c: add(c, _logits(h, _slice(w, i * chunk, chunk, vocab_first),
                                                                  vocab_first), i * chunk), carry)
    if rem:
        carry = add(carry, _logits(h, _slice(w, num * chunk, rem, vocab_first), vocab_first), num * chunk)
    return carry


def _grad_block(z, lse, g):
    """The normaliser's share of ``d/dz``: ``-g softmax(z)`` of a block of logits."""
    return -g[:, None] * jnp.exp(z - lse[:, None])


def _weight_grad(dz, h, w, vocab_first):
    """The block's share of dW: ``dz^T h`` (``[c, d]``) or ``h^T dz`` (``[d, c]``), float32 (or float64)."""
    if vocab_first:
        return lax.dot_general(dz, h, (((0,), (0,)), ((), ())))
    return lax.dot_general(h, dz, (((0,), (0,)), ((), ())))


def _hidden_grad(dz, w, vocab_first):
    dims = (((1,), (0,)), ((), ())) if vocab_first else (((1,), (1,)), ((), ()))
    return lax.dot_general(dz.astype(w.dtype), w, dims, preferred_element_type=dz.dtype)


def _bwd_chunked(h, w, lse, g, chunk, vocab_first):
    vocab = w.shape[0 if vocab_first else 1]
    num, rem = _blocks(vocab, chunk)
    axis = 0 if vocab_first else 1

    def block(start, size, dh):
        wc = _slice(w, start, size, vocab_first)
        dz = _grad_block(_logits(h, wc, vocab_first), lse, g)
        return dh + _hidden_grad(dz, wc, vocab_first), _weight_grad(dz, h, wc, vocab_first).astype(w.dtype)

    dh = jnp.zeros_like(h)
    parts = []
    if num:
        def body(dh, i):
            return block(i * chunk, chunk, dh)

        dh, dws = lax.scan(body, dh, jnp.arange(num))  # [num, c, d] or [num, d, c]
        parts.append(dws.reshape(num * chunk, -1) if vocab_first
                     else jnp.moveaxis(dws, 0, 1).reshape(w.shape[0], num * chunk))
    if rem:
        dh, dw_rem = block(num * chunk, rem, dh)
        parts.append(dw_rem)
    dw = parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=axis)
    return dh, dw


def _bwd_saved(h, w, z, lse, g, vocab_first):
    dz = _grad_block(z, lse, g)
    return _hidden_grad(dz, w, vocab_first), _weight_grad(dz, h, w, vocab_first).astype(w.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _logprobs(h, w, t, chunk, vocab_first):
    lse, zt = _lse(h, w, t, chunk, vocab_first)
    return zt - lse


def _save(h, w, vocab_first):
    return h.shape[0] * w.shape[0 if vocab_first else 1] <= SAVE_LOGITS_MAX


def _logprobs_fwd(h, w, t, chunk, vocab_first):
    if _save(h, w, vocab_first):
        z = _logits(h, w, vocab_first)
        lse = jax.nn.logsumexp(z, axis=-1)
        zt = jnp.take_along_axis(z, t[:, None], axis=-1)[:, 0]
    else:
        lse, zt = _lse(h, w, t, chunk, vocab_first)
        z = None
    return zt - lse, (h, w, t, z, lse)


def _logprobs_bwd(chunk, vocab_first, res, g):
    h, w, t, z, lse = res
    g = g.astype(h.dtype)
    if z is None:
        dh, dw = _bwd_chunked(h, w, lse, g, chunk, vocab_first)
    else:
        dh, dw = _bwd_saved(h, w, z, lse, g, vocab_first)
    # the target logit h . w_t (a row gather): g w_t into dh, g h into row t of dW
    rows = jnp.take(w, t, axis=0 if vocab_first else 1, mode="clip")
    rows = (rows if vocab_first else rows.T).astype(h.dtype)
    dh = dh + g[:, None] * rows
    upd = (g[:, None] * _rounded(h, w)).astype(w.dtype)
    dw = dw.at[t].add(upd, mode="drop") if vocab_first else dw.at[:, t].add(upd.T, mode="drop")
    return dh.astype(h.dtype), dw, None


_logprobs.defvjp(_logprobs_fwd, _logprobs_bwd)


def next_token_logprobs(hidden: Float[Array, "*batch d"], weight: Float[Array, "V d"], targets: Int[Array, "*batch"],
                        *, chunk_size: int = DEFAULT_CHUNK, vocab_first: bool = True,
                        check_ids: bool = True) -> Float[Array, "*batch"]:
    """``log softmax(hidden @ W^T)[targets]`` without materialising the ``[..., V]`` logits.

    ``log p_n = h_n . w_{t_n} - logsumexp_v h_n . w_v``: the normaliser is accumulated over vocabulary
    chunks of ``chunk_size`` (the last chunk may be shorter), the target logit is a row gather of
    ``W``. Differentiable in ``hidden`` and ``weight`` (a custom VJP: ``g (onehot - softmax)``,
    recomputed per chunk, or from the kept logits when ``N V <= SAVE_LOGITS_MAX``). The target logit is
    read from the same products the normaliser sums, so the result is exact (0 for a row whose target
    dominates) even when the logits' rounding step exceeds the log-probability (``|z| ~ 1e31`` in
    float32). Concrete ``targets`` are range-checked on the host; traced ones at run time (``check_ids``).

    Args:
        hidden: ``[..., d]`` float rows (float32, or float64 under ``jax_enable_x64``); the compute dtype.
        weight: the head, ``[V, d]`` (``vocab_first=True``, e.g. a tied embedding) or ``[d, V]``;
            float32, bfloat16, float16 or float64 (products accumulate in ``hidden``'s dtype).
        targets: ``[...]`` int ids in ``[0, V)``.
        chunk_size: vocabulary columns per block, >= 1.
        vocab_first: whether ``weight`` is ``[V, d]`` (else ``[d, V]``).
        check_ids: check traced ``targets`` (a caller's ``jit``) at run time with an ``error_if`` (a host
            callback in the compiled program); ``False`` for a caller that validated them once.

    Returns:
        ``[...]`` log-probabilities (nats), in ``hidden``'s dtype.

    Raises:
        TypeError: non-integer targets, non-float arrays.
        ValueError: shapes that do not match; a target id outside ``[0, V)`` (at run time under ``jit``).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> h = jax.random.normal(jax.random.key(0), (3, 4))
        >>> w = jax.random.normal(jax.random.key(1), (10, 4))
        >>> t = jnp.array([1, 5, 9])
        >>> lp = next_token_logprobs(h, w, t, chunk_size=4)
        >>> ref = jnp.take_along_axis(jax.nn.log_softmax(h @ w.T), t[:, None], 1)[:, 0]
        >>> bool(jnp.allclose(lp, ref, atol=1e-5))
        True
    """
    chunk = check_int(chunk_size, "chunk_size", minimum=1)
    vocab_first = check_bool(vocab_first, "vocab_first")
    for name, a in (("hidden", hidden), ("weight", weight)):
        if not jnp.issubdtype(jnp.result_type(a), jnp.floating):
            raise TypeError(expected(name, "a float array", f"dtype {jnp.result_type(a)}", raw=True))
    if not jnp.issubdtype(jnp.result_type(targets), jnp.integer):
        raise TypeError(expected("targets", "an integer array of token ids", f"dtype {jnp.result_type(targets)}",
                                 raw=True))
    hidden, weight, targets = jnp.asarray(hidden), jnp.asarray(weight), jnp.asarray(targets)
    d = weight.shape[1 if vocab_first else 0] if weight.ndim == 2 else None
    if weight.ndim != 2 or hidden.ndim < 1 or hidden.shape[-1] != d:
        raise ValueError(expected("weight", f"a {'[V, d]' if vocab_first else '[d, V]'} array matching hidden's "
                                  f"last axis {hidden.shape[-1:]}", f"shape {weight.shape}", raw=True))
    if targets.shape != hidden.shape[:-1]:
        raise ValueError(expected("targets", f"shape {hidden.shape[:-1]}", f"shape {targets.shape}", raw=True))
    vocab = weight.shape[0 if vocab_first else 1]
    if isinstance(targets, jax.core.Tracer):
        if check_bool(check_ids, "check_ids"):
            targets = error_if(targets, (targets < 0) | (targets >= vocab), "targets", f"token ids in [0, {vocab})")
    else:
        a = np.asarray(targets)
        if a.size and (a.min() < 0 or a.max() >= vocab):
            raise ValueError(expected("targets", f"token ids in [0, {vocab})", int(a[(a < 0) | (a >= vocab)][0])))
    return head_logprobs(hidden, weight, targets, chunk, vocab_first)


def head_logprobs(hidden, weight, targets, chunk_size: int = DEFAULT_CHUNK, vocab_first: bool = True):
    """:func:`next_token_logprobs` without validation, for traced callers (``hidden [..., d]``)."""
    h = hidden.astype(_acc(hidden.dtype))
    lead = h.shape[:-1]
    vocab = weight.shape[0 if vocab_first else 1]
    lp = _logprobs(h.reshape(-1, h.shape[-1]), weight, targets.reshape(-1).astype(jnp.int32),
                   min(chunk_size, vocab), vocab_first)
    return lp.reshape(lead)


def _model_logprobs(model: Llama, tokens, mask, intervention, chunk_size: int = DEFAULT_CHUNK):
    """``[B, L - 1]`` log p(tokens[:, i + 1] | tokens[:, :i + 1]) at every position (traceable, unvalidated)."""
    x, _, _ = _run_layers(model, tokens, mask, intervention, collect=False, keep_kv=False)
    w, vocab_first = _head_weight(model)
    return head_logprobs(_final_norm(model, x[:, :-1]), w, tokens[:, 1:], chunk_size, vocab_first)


def model_logprobs(model: Llama, tokens: Int[Array, "B L"], mask=None, *, intervention: Intervention | None = None,
                   chunk_size: int = DEFAULT_CHUNK, check_ids: bool = True) -> Float[Array, "B Lm1"]:
    """Log-probability of each next token, ``log p(x_{i+1} | x_<=i)``, at every position (unmasked).

    The forward of :func:`forward` up to the final norm, then :func:`next_token_logprobs` over the
    head (no ``[B, L, V]`` logits). Equals ``take_along_axis(log_softmax(forward(...)[:, :-1]),
    tokens[:, 1:])``. Traceable and differentiable (token ids are checked at run time under ``jit``);
    masking the positions to score is the caller's (with left padding, the log-prob of token ``i`` is
    at ``i - 1``).

    Args:
        model: a :class:`Llama`.
        tokens: ``[B, L]`` int token ids in ``[0, V)``, ``L >= 2``.
        mask: ``[B, L]`` bool, True at real tokens (default all True).
        intervention: an optional :class:`Intervention`.
        chunk_size: vocabulary columns per block of the head, >= 1.
        check_ids: check traced ids (a caller's ``jit``) at run time, as :func:`forward`'s ``check_ids``;
            ``False`` for a caller that validated them once (no host callback in its compiled program).

    Returns:
        ``[B, L - 1]`` float32 log-probabilities (nats); float64 for a float64 model.

    Raises:
        TypeError, ValueError: as :func:`forward`; a sequence shorter than 2 tokens.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.lm import forward, random_llama
        >>> model = random_llama(jax.random.key(0))
        >>> toks = jnp.array([[1, 2, 3, 4]])
        >>> ref = jnp.take_along_axis(jax.nn.log_softmax(forward(model, toks)[:, :-1]), toks[:, 1:, None], -1)[..., 0]
        >>> bool(jnp.allclose(model_logprobs(model, toks), ref, atol=1e-5))
        True
    """
    check_model(model)
    tokens, mask = check_tokens(model, tokens, mask, check_ids=bool(check_ids))
    if tokens.shape[1] < 2:
        raise ValueError(expected("tokens", "sequences of at least 2 tokens", f"shape {tuple(tokens.shape)}",
                                  raw=True))
    chunk = check_int(chunk_size, "chunk_size", minimum=1)
    return _model_logprobs_jit(model, tokens, mask, check_intervention(model, intervention), chunk)


@eqx.filter_jit
def _model_logprobs_jit(model, tokens, mask, intervention, chunk_size):
    return _model_logprobs(model, tokens, mask, intervention, chunk_size)
