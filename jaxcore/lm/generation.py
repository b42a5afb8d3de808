"""Generation: prefill, a static KV cache and a ``lax.scan`` sampler with a logits-processor hook."""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Bool, Float, Int

from .._util.checks import check_bool, check_int, check_scalar, error_if, expected
from .._util.keys import check_key
from .model import (
    _NEG,
    _acc,
    Intervention,
    Llama,
    _block,
    _head,
    _run_layers,
    check_intervention,
    check_model,
    check_tokens,
)
from .processors import MIN_TEMPERATURE, Temperature, TopK, TopP, check_processor

__all__ = ["GenerateResult", "generate"]


class GenerateResult(NamedTuple):
    """What :func:`generate` returns.

    Attributes:
        tokens: ``[B, N]`` int32 generated token ids (``pad_token_id`` after an end-of-sequence).
        mask: ``[B, N]`` bool, True at tokens generated before and including the first
            ``eos_token_id`` of the row (all True without ``eos_token_id``).
        logprobs: ``[B, N]`` float32 log-probability of each token under the distribution it was
            drawn from (after the processor, temperature, top-k, top-p; 0 for greedy and masked).
        model_logprobs: ``[B, N]`` float32 log-probability under the model itself (temperature 1,
            no processing; 0 where masked).
        processor_state: the user processor's final state (``None`` without a processor).
    """

    tokens: Int[Array, "B N"]
    mask: Bool[Array, "B N"]
    logprobs: Float[Array, "B N"]
    model_logprobs: Float[Array, "B N"]
    processor_state: Any


def _prefill(model: Llama, tokens, mask, cache_len, intervention):
    """Run the prompt; return the last position's logits, the KV cache (per layer ``[B, T, K, h]``)
    and the last position's final residual stream ``[B, d]``."""
    x, _, out = _run_layers(model, tokens, mask, intervention, collect=False, keep_kv=True)
    logits = _head(model, x[:, -1:])[:, 0]
    pad = [(0, 0), (0, cache_len - tokens.shape[1]), (0, 0), (0, 0)]
    ck = tuple(jnp.pad(k, pad) for k, _ in out["kv"])
    cv = tuple(jnp.pad(v, pad) for _, v in out["kv"])
    return logits, ck, cv, x[:, -1]


def _decode_step(model: Llama, ck, cv, token, position, index, key_mask, intervention):
    """One token through the model with the cache (written in place at ``index``); returns its
    next-token logits, the cache and its final residual stream ``[B, d]``."""
    c = model.config
    x = jnp.take(model.embed, token, axis=0).astype(_acc(model.dtype))[:, None]
    bias = jnp.where(key_mask, 0.0, _NEG).astype(jnp.float32)[:, None, :]
    positions = position[:, None]
    res = None if intervention is None else intervention.residual
    scl = None if intervention is None else intervention.mlp_scale
    zero = jnp.zeros((), jnp.int32)
    new_k, new_v = [], []
    for i, lw in enumerate(model.layers):

        def write(k, v, _ka, _va, i=i):
            k_all = lax.dynamic_update_slice(ck[i], k.astype(ck[i].dtype), (zero, index, zero, zero))
            v_all = lax.dynamic_update_slice(cv[i], v.astype(cv[i].dtype), (zero, index, zero, zero))
            new_k.append(k_all)
            new_v.append(v_all)
            return k_all, v_all

        x, _, _, _ = _block(c, lw, x, positions, None, None, bias, write, None if scl is None else scl[i])
        if res is not None:
            x = x + res[i].astype(x.dtype)
    return _head(model, x)[:, 0], tuple(new_k), tuple(new_v), x[:, 0]


def _extend_hidden(model: Llama, ck, cv, key_mask, candidates, position, intervention):
    """The final residual stream ``[B, k, d]`` of the prefix extended by each of ``candidates``
    ``[B, k]`` (one token each, at rotary ``position`` ``[B]``): the k candidates run as one batch of
    queries that attend to the cache (read only) and each to itself only."""
    c = model.config
    b, k = candidates.shape
    x = jnp.take(model.embed, candidates, axis=0).astype(_acc(model.dtype))
    own = jnp.broadcast_to(jnp.eye(k, dtype=bool)[None], (b, k, k))
    ok = jnp.concatenate([jnp.broadcast_to(key_mask[:, None, :], (b, k, key_mask.shape[1])), own], axis=2)
    bias = jnp.where(ok, 0.0, _NEG).astype(jnp.float32)
    positions = jnp.broadcast_to(position[:, None], (b, k))
    res = None if intervention is None else intervention.residual
    scl = None if intervention is None else intervention.mlp_scale
    for i, lw in enumerate(model.layers):

        def read(kn, vn, _ka, _va, i=i):
            return (jnp.concatenate([ck[i], kn.astype(ck[i].dtype)], axis=1),
                    jnp.concatenate([cv[i], vn.astype(cv[i].dtype)], axis=1))

        x, _, _, _ = _block(c, lw, x, positions, None, None, bias, read, None if scl is None else scl[i])
        if res is not None:
            x = x + res[i].astype(x.dtype)
    return x


def _sample(key, logits, sampler, greedy):
    """Draw one token per row; return it and its log-probability under the sampled distribution."""
    if not greedy:  # the row maximum shifted to 0 changes no distribution; z / (a tiny temperature) stays finite
        top = jnp.max(logits, axis=-1, keepdims=True)
        logits = logits - jnp.where(jnp.isfinite(top), top, 0.0)
    z, _ = sampler(sampler.init(logits.shape[0]), logits, None) if sampler is not None else (logits, None)
    if greedy:
        tok = jnp.argmax(z, axis=-1).astype(jnp.int32)
        return tok, jnp.zeros(tok.shape, jnp.float32)
    tok = jax.random.categorical(key, z, axis=-1).astype(jnp.int32)
    lp = jnp.take_along_axis(jax.nn.log_softmax(z, axis=-1), tok[:, None], axis=-1)[:, 0]
    return tok, lp


class _Sampler(eqx.Module):
    """Temperature, top-k and top-p in that order (stateless, ignores the context)."""

    parts: tuple

    def init(self, num_rows):
        return ()

    def __call__(self, state, logits, context):
        for p in self.parts:
            logits, _ = p((), logits, context)
        return logits, state


@eqx.filter_jit
def _generate_jit(key, model, prompt, prompt_mask, processor, sampler, intervention, num_new, greedy, eos, pad):
    b, p_len = prompt.shape
    cache_len = p_len + num_new - 1
    logits, ck, cv, hidden = _prefill(model, prompt, prompt_mask, max(cache_len, p_len), intervention)
    cache_len = max(cache_len, p_len)
    n_real = jnp.sum(prompt_mask, axis=1).astype(jnp.int32)
    key_mask = jnp.concatenate([prompt_mask, jnp.zeros((b, max(cache_len - p_len, 0)), bool)], axis=1)
    w = 1 if processor is None else processor.context_size
    ctx = jnp.where(prompt_mask, prompt, -1)
    if p_len < w:
        ctx = jnp.concatenate([jnp.full((b, w - p_len), -1, jnp.int32), ctx], axis=1)
    ctx = ctx[:, ctx.shape[1] - w:]
    pstate = None if processor is None else processor.init(b)
    keys = jax.random.split(key, num_new)
    uses_hidden = processor is not None and bool(getattr(processor, "uses_hidden", False))

    def emit(logits, pstate, ctx, done, k, hidden, ck, cv, key_mask, position):
        raw = logits
        if uses_hidden:
            extend = lambda cand: _extend_hidden(model, ck, cv, key_mask, cand.astype(jnp.int32),  # noqa: E731
                                                 position, intervention)
            logits, pstate = processor(pstate, logits, ctx, hidden=hidden, extend=extend)
        elif processor is not None:
            logits, pstate = processor(pstate, logits, ctx)
        # a row the sampler cannot draw from: a NaN or +inf logit, or no finite one (all -inf)
        bad = ~done & (jnp.any(jnp.isnan(logits) | (logits == jnp.inf), axis=-1) | ~jnp.any(jnp.isfinite(logits), axis=-1))
        tok, lp = _sample(k, logits, sampler, greedy)
        mlp = jnp.take_along_axis(jax.nn.log_softmax(raw, axis=-1), tok[:, None], axis=-1)[:, 0]
        live = ~done
        tok = jnp.where(live, tok, pad)
        lp = jnp.where(live, lp, 0.0)
        mlp = jnp.where(live, mlp, 0.0)
        done = done | (tok == eos)  # eos = -1 when there is none
        ctx = jnp.concatenate([ctx[:, 1:], tok[:, None]], axis=1)
        return tok, lp, mlp, live, pstate, ctx, done, bad

    done0 = jnp.zeros((b,), bool)
    tok, lp, mlp, live, pstate, ctx, done, bad = emit(logits, pstate, ctx, done0, keys[0], hidden, ck, cv, key_mask,
                                                      n_real)

    def step(carry, xs):
        ck, cv, key_mask, tok, pstate, ctx, done = carry
        t, k = xs
        index = p_len + t
        key_mask = lax.dynamic_update_slice(key_mask, jnp.ones((b, 1), bool), (0, index))
        logits, ck, cv, hidden = _decode_step(model, ck, cv, tok, n_real + t, index, key_mask, intervention)
        tok, lp, mlp, live, pstate, ctx, done, bad = emit(logits, pstate, ctx, done, k, hidden, ck, cv, key_mask,
                                                          n_real + t + 1)
        return (ck, cv, key_mask, tok, pstate, ctx, done), (tok, lp, mlp, live, bad)

    carry = (ck, cv, key_mask, tok, pstate, ctx, done)
    final, (toks, lps, mlps, lives, bads) = lax.scan(step, carry,
                                                     (jnp.arange(num_new - 1, dtype=jnp.int32), keys[1:]))
    cat = lambda first, rest: jnp.concatenate([first[:, None], rest.T], axis=1)  # noqa: E731
    return GenerateResult(cat(tok, toks), cat(live, lives), cat(lp, lps), cat(mlp, mlps), final[4]), cat(bad, bads)


def generate(
    key,
    model: Llama,
    prompt_tokens: Int[Array, "B P"],
    prompt_mask: Bool[Array, "B P"] | None = None,
    *,
    max_new_tokens: int,
    processor=None,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
    intervention: Intervention | None = None,
    check_ids: bool = True,
    check_logits: bool = True,
) -> GenerateResult:
    """Sample continuations of a batch of left-padded prompts with a KV cache.

    The prompt is run once (prefill) into a static cache of ``P + N - 1`` positions; then one
    ``lax.scan`` draws token ``t``: logits ``z_t`` -> ``processor(state, z_t, context)`` ->
    ``/ temperature`` -> top-k -> top-p -> ``x_t ~ softmax`` and feeds ``x_t`` back through the
    cache. ``context`` holds the last ``processor.context_size`` tokens (-1 before a prompt's start).

    A processor with a true attribute ``uses_hidden`` is called as
    ``processor(state, z_t, context, hidden=h, extend=f)``: ``h`` ``[B, d]`` float32 is the final
    residual stream (before the final norm) of the current prefix, equal to
    ``forward_hidden(...).residual[:, -1]`` at its last position, and ``f(candidates[B, k]) -> [B, k, d]``
    gives the same for the prefix extended by each of k candidate tokens, in one batched step on the
    shared KV cache (read only; the cache is not changed).

    Args:
        key: a ``jax.random.key`` (one split per generated token).
        model: a :class:`Llama`.
        prompt_tokens: ``[B, P]`` int token ids, left-padded.
        prompt_mask: ``[B, P]`` bool, True at real tokens; each row is False...False True...True
            with at least one True (default all True).
        max_new_tokens: N >= 1 tokens to generate.
        processor: an optional logits processor (see :mod:`jaxcore.lm.processors`), applied first.
        temperature: > 0 (at least float32's smallest normal, 1.2e-38), or 0 for greedy decoding
            (argmax of the processed logits).
        top_k: keep the k most likely tokens (None: all).
        top_p: nucleus mass in (0, 1] (None or 1: all).
        eos_token_id: a token that ends a row; later tokens are ``pad_token_id`` and masked out.
        pad_token_id: the filler after ``eos_token_id`` (default ``eos_token_id``).
        intervention: an optional :class:`Intervention` applied at every position.
        check_ids: check traced prompt ids (``generate`` inside the caller's ``jit``) at run time
            (default). ``False`` skips that check, whose host callback makes JAX dispatch each call of
            the enclosing program through its Python path; only for ids validated beforehand.
            Concrete ids are always checked on the host (the compiled decoder then holds no callback).
        check_logits: refuse a step whose logits, after the processor, no token can be drawn from (a
            NaN or +inf logit, or every logit -inf): on the host after the program when the call is
            not traced (it waits for the result), at run time by an ``error_if`` inside the caller's
            ``jit``. ``False`` skips the check (such rows then draw an arbitrary token with a NaN
            log-probability).

    Returns:
        A :class:`GenerateResult`.

    Raises:
        TypeError: bad key, model, tokens or processor.
        ValueError: bad shapes, right-padded or empty prompts, out-of-range arguments,
            ``P + N`` beyond ``model.config.max_positions``, or (``check_logits``) a step whose
            processed logits hold no drawable token.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.lm import random_llama
        >>> model = random_llama(jax.random.key(0))
        >>> out = generate(jax.random.key(1), model, jnp.array([[1, 2, 3]]), max_new_tokens=4, top_k=5)
        >>> out.tokens.shape, out.logprobs.shape
        ((1, 4), (1, 4))
    """
    check_key(key)
    check_model(model)
    prompt, mask = check_tokens(model, prompt_tokens, prompt_mask, name="prompt_tokens", mask_name="prompt_mask",
                                check_ids=bool(check_ids))
    num_new = check_int(max_new_tokens, "max_new_tokens", minimum=1)
    c = model.config
    if prompt.shape[1] + num_new > c.max_positions:
        raise ValueError(expected("max_new_tokens", f"at most max_positions - P = {c.max_positions - prompt.shape[1]}",
                                  num_new))
    if not isinstance(mask, jax.core.Tracer):
        m = np.asarray(mask)
        if not m[:, -1].all():
            row = int(np.flatnonzero(~m[:, -1])[0])
            raise ValueError(expected("prompt_mask", "left-padded prompts (each row's last entry True)",
                                      f"row {row} ending in padding", raw=True))
        if (np.diff(m.astype(np.int8), axis=1) < 0).any():
            raise ValueError(expected("prompt_mask", "left padding only (False...False True...True per row)",
                                      m.astype(int)))
    if processor is not None:
        check_processor(processor)
    t = check_scalar(temperature, "temperature", nonnegative=True)
    if 0.0 < t < MIN_TEMPERATURE:
        raise ValueError(expected("temperature", f"0 (greedy) or a number >= {MIN_TEMPERATURE:.4g}", t))
    greedy = t == 0.0
    parts = []
    if not greedy:
        parts.append(Temperature(t))
    if top_k is not None:
        parts.append(TopK(check_int(top_k, "top_k", minimum=1)))
    if top_p is not None:
        pv = check_scalar(top_p, "top_p", low=0.0, high=1.0, low_open=True)
        if pv < 1.0:
            parts.append(TopP(pv))
    sampler = _Sampler(tuple(parts)) if parts else None
    eos = None if eos_token_id is None else check_int(eos_token_id, "eos_token_id", minimum=0,
                                                      maximum=c.vocab_size - 1)
    pad = pad_token_id if pad_token_id is not None else (eos if eos is not None else 0)
    pad = check_int(pad, "pad_token_id", minimum=0, maximum=c.vocab_size - 1)
    intervention = check_intervention(model, intervention)
    eos = jnp.asarray(-1 if eos is None else eos, jnp.int32)  # arrays: other ids do not recompile
    check_logits = check_bool(check_logits, "check_logits")
    out, bad = _generate_jit(key, model, prompt, mask, processor, sampler, intervention, num_new, greedy, eos,
                             jnp.asarray(pad, jnp.int32))
    what = "logits after the processor with a drawable token in every row (no NaN or +inf, not all -inf)"
    if not check_logits:
        return out
    if isinstance(bad, jax.core.Tracer):
        return error_if(out, bad, "processor", what)
    b = np.asarray(bad)
    if b.any():
        row, step = (int(i) for i in np.argwhere(b)[0])
        raise ValueError(expected("processor", what, f"row {row} at generated token {step}", raw=True))
    return out
