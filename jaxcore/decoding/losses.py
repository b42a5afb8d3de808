"""Training data of prefix scorers (base-model rollouts on frozen hidden states) and the two losses.

A :class:`Rollouts` holds, for N base-model samples of L new tokens, the final residual stream at
the L + 1 prefixes (the prompt alone, then after each new token), the tokens, their mask, the
sequence reward and the base model's top-k next-token distribution at every prefix.

CD-FUDGE regresses the reward onto every prefix: ``L(V) = E sum_t (V(x, y_<=t) - r(x, y))^2``; its
minimiser is the conditional mean ``E[r | x, y_<=t]`` under the base model. CD-Q fits
``Q(x, y_<t, y_t)`` to the target ``r`` at the last token and ``sg(sum_z p(z | x, y_<=t) Q(x, y_<=t, z))``
before it (``sg``: stop-gradient); the exact value function is its fixed point.

References:
    S. Mudgal et al., "Controlled Decoding from Language Models", ICML 2024, Sec. 3.1 (CD-FUDGE,
    Eq. 4) and Sec. 3.2 (CD-Q, Eq. 5).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Bool, Float, Int

from jaxcore import lm
from jaxcore._util import as_float_array, check_finite, check_int, check_shape, expected, is_concrete

from .scorers import _q_vocab, check_scorer
from .tokenwise import _top_indices

__all__ = ["Rollouts", "cdq_loss", "fudge_loss", "rollouts"]


class Rollouts(eqx.Module):
    """Base-model samples prepared for training prefix scorers.

    Attributes:
        hidden: ``[N, L + 1, d]`` float32 final residual stream of each prefix (index 0: the prompt).
        tokens: ``[N, L]`` int32 sampled tokens.
        mask: ``[N, L]`` bool, True at live tokens (up to and including an end-of-sequence).
        reward: ``[N]`` float32 sequence rewards.
        next_ids: ``[N, L + 1, k]`` int32 the base model's k most likely next tokens after each prefix.
        next_probs: ``[N, L + 1, k]`` float32 their base probabilities renormalised over the k
            (k = V is exact).
        weight: ``[N]`` float32 sample weights (1 for samples; exact probabilities on the toy model).
        vocab_size: the base model's V (static; None: unknown). :func:`fit_cdq` and :func:`cdq_loss`
            refuse a Q head of another vocabulary.
        token_reward: ``[N, L]`` float32 per-token rewards of an additive reward
            ``r = sum_t token_reward[:, t]`` (the keyword and digit rewards: 1 / L per matching token),
            or None (default: the sequence reward only). With it, CD-Q's target is per position:
            ``Q(h_{t-1})[y_t] <- token_reward_t + sg(sum_z p(z) Q(h_t)[z])`` (the reward still to
            come from token t on; the reward already collected before t is the same for every
            candidate of step t and does not move the tilt), a lower-variance target than the
            sequence reward at the last token. CD-FUDGE's target stays ``reward`` (its value ranks
            whole blocks in blockwise CD, which needs the reward of the tokens inside the block).

    Raises:
        ValueError: built with fields of mismatched shapes, or (when concrete) a non-finite reward,
            a negative or non-finite weight, negative token ids or non-finite or negative
            next-token probabilities.
    """

    hidden: Float[Array, "N L1 d"]
    tokens: Int[Array, "N L"]
    mask: Bool[Array, "N L"]
    reward: Float[Array, " N"]
    next_ids: Int[Array, "N L1 k"]
    next_probs: Float[Array, "N L1 k"]
    weight: Float[Array, " N"]
    vocab_size: int | None = eqx.field(static=True, default=None)
    token_reward: Float[Array, "N L"] | None = None

    def __check_init__(self):
        if np.ndim(self.tokens) != 2:
            raise ValueError(expected("tokens", "a [N, L] array", f"shape {np.shape(self.tokens)}", raw=True))
        n, length = np.shape(self.tokens)
        want = {"mask": (n, length), "reward": (n,), "weight": (n,), "token_reward": (n, length)}
        for name, shape in want.items():
            if getattr(self, name) is not None and tuple(np.shape(getattr(self, name))) != shape:
                raise ValueError(expected(name, f"shape {shape} (N, L from tokens)", f"shape {np.shape(getattr(self, name))}", raw=True))
        h = np.shape(self.hidden)
        if len(h) != 3 or h[:2] != (n, length + 1):
            raise ValueError(expected("hidden", f"shape ({n}, {length + 1}, d)", f"shape {h}", raw=True))
        i = np.shape(self.next_ids)
        if len(i) != 3 or i[:2] != (n, length + 1) or np.shape(self.next_probs) != i:
            raise ValueError(expected("next_ids, next_probs", f"two arrays of shape ({n}, {length + 1}, k)",
                                      f"shapes {i}, {np.shape(self.next_probs)}", raw=True))
        if self.vocab_size is not None:
            check_int(self.vocab_size, "vocab_size", minimum=1)
        if is_concrete(self.reward, self.weight, self.tokens, self.next_ids, self.next_probs):
            check_finite(self.reward, "reward")
            if self.token_reward is not None and is_concrete(self.token_reward):
                check_finite(self.token_reward, "token_reward")
            w = np.asarray(self.weight)
            if not np.all(np.isfinite(w) & (w >= 0)):
                raise ValueError(expected("weight", "finite weights >= 0", w[~(np.isfinite(w) & (w >= 0))][0]))
            p = np.asarray(self.next_probs)
            if not np.all(np.isfinite(p) & (p >= 0)):
                raise ValueError(expected("next_probs", "finite probabilities >= 0", p[~(np.isfinite(p) & (p >= 0))][0]))
            for name in ("tokens", "next_ids"):
                a = np.asarray(getattr(self, name))
                if a.size and a.min() < 0:
                    raise ValueError(expected(name, "token ids >= 0", int(a.min())))
                if self.vocab_size is not None and a.size and a.max() >= self.vocab_size:
                    raise ValueError(expected(name, f"token ids < vocab_size = {self.vocab_size}", int(a.max())))

    @property
    def num_samples(self) -> int:
        return self.tokens.shape[0]


def _wmean(err, m, w):
    num = jnp.sum(w[:, None] * m * err)
    return num / jnp.maximum(jnp.sum(w[:, None] * m), 1e-30)


def fudge_loss(head, data: Rollouts) -> Float[Array, ""]:
    """CD-FUDGE's weighted squared error of the prefix values against the sequence reward.

    ``L = sum_n w_n sum_t m_nt (V(h_nt) - r_n)^2 / sum_n w_n sum_t m_nt`` over the prompt prefix and
    every live token.

    Args:
        head: a :class:`ValueHead` (or a combination of them).
        data: :class:`Rollouts`.

    Returns:
        The scalar loss (float32).

    Raises:
        TypeError: not a value head, not :class:`Rollouts`.
        ValueError: a head whose hidden size is not the data's.

    References:
        Mudgal et al., ICML 2024, Eq. 4.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.decoding import ValueHead, toy_rollouts, random_toy_lm, fudge_loss
        >>> import jax
        >>> toy = random_toy_lm(jax.random.key(0))
        >>> data = toy_rollouts(toy, jnp.ones(81))
        >>> float(fudge_loss(ValueHead(toy.num_nodes), data))    # V = 0, r = 1 everywhere
        1.0
    """
    check_scorer(head, "value", "head")
    check_rollouts(data, head)
    return _fudge_loss(head, data)


@eqx.filter_jit
def _fudge_loss(head, data):
    v = head(data.hidden)  # [N, L + 1]
    m = jnp.concatenate([jnp.ones_like(data.mask[:, :1]), data.mask], axis=1).astype(v.dtype)
    return _wmean((v - data.reward[:, None]) ** 2, m, data.weight)


def _cdq_targets(head, data: Rollouts):
    """CD-Q's target per token ``[N, L]`` (stop-gradient) and the Q of the sampled tokens ``[N, L]``."""
    q = head.at(data.hidden[:, :-1], data.tokens[..., None], check_ids=False)[..., 0]
    nxt = jnp.sum(data.next_probs[:, 1:] * head.at(data.hidden[:, 1:], data.next_ids[:, 1:], check_ids=False), axis=-1)
    live_next = jnp.concatenate([data.mask[:, 1:], jnp.zeros_like(data.mask[:, :1])], axis=1)
    terminal = data.mask & ~live_next
    if data.token_reward is None:
        target = jnp.where(terminal, data.reward[:, None], lax.stop_gradient(nxt))
    else:  # per position: this token's reward plus the expected reward still to come
        target = data.token_reward + jnp.where(terminal, 0.0, lax.stop_gradient(nxt))
    return q, target


def cdq_loss(head, data: Rollouts) -> Float[Array, ""]:
    """CD-Q's Bellman-style weighted squared error.

    ``L = E sum_t (Q(h_{t-1})[y_t] - v_t)^2`` with ``v_t = r`` at the last live token and
    ``v_t = sg(sum_z p(z | y_<=t) Q(h_t)[z])`` before it (``p`` the base model, over its top-k).
    With ``data.token_reward`` (an additive reward ``r_t``): ``v_t = r_t + sg(...)``, and ``r_t``
    alone at the last live token.

    Args:
        head: a :class:`QHead` (or a combination of them).
        data: :class:`Rollouts`.

    Returns:
        The scalar loss (float32).

    Raises:
        TypeError: not a Q head, not :class:`Rollouts`.
        ValueError: a head whose hidden size or vocabulary is not the data's.

    References:
        Mudgal et al., ICML 2024, Eq. 5.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.decoding import QHead, toy_rollouts, random_toy_lm, cdq_loss
        >>> toy = random_toy_lm(jax.random.key(0))
        >>> data = toy_rollouts(toy, jnp.ones(81))
        >>> float(cdq_loss(QHead(toy.num_nodes, 3), data))      # Q = 0: only the last step misses r = 1
        0.25
    """
    check_scorer(head, "q", "head")
    check_rollouts(data, head)
    return _cdq_loss(head, data)


@eqx.filter_jit
def _cdq_loss(head, data):
    q, target = _cdq_targets(head, data)
    return _wmean((q - target) ** 2, data.mask.astype(q.dtype), data.weight)


@eqx.filter_jit
def _rollouts_jit(model, prompt, prompt_mask, tokens, mask, top_k, chunk_size):
    n, p = prompt.shape
    seq = jnp.concatenate([prompt, tokens], axis=1)
    smask = jnp.concatenate([prompt_mask, jnp.ones_like(mask)], axis=1)
    pad = (-n) % chunk_size

    def one(args):
        s, m = args
        out = lm.forward_hidden(model, s, m)
        hid = out.residual[:, -1, p - 1:]
        lp = jax.nn.log_softmax(out.logits[:, p - 1:].astype(jnp.float32), axis=-1)
        ids = _top_indices(lp, top_k)  # row-local, unlike lax.top_k (see _top_indices)
        vals = jnp.take_along_axis(lp, ids, axis=-1)
        return hid, ids, jax.nn.softmax(vals, axis=-1)

    # chunk j holds rows j, j + num_chunks, j + 2 num_chunks, ...: a batch split over devices along its
    # rows stays split inside every chunk (contiguous chunks would make the loop gather them)
    def chunks(a):
        a = jnp.concatenate([a, jnp.repeat(a[:1], pad, axis=0)], axis=0) if pad else a
        return jnp.swapaxes(a.reshape(chunk_size, -1, *a.shape[1:]), 0, 1)

    hid, ids, probs = lax.map(one, (chunks(seq), chunks(smask)))
    flat = lambda a: jnp.swapaxes(a, 0, 1).reshape(-1, *a.shape[2:])[:n]  # noqa: E731
    return flat(hid), flat(ids), flat(probs)


def rollouts(model: lm.Llama, prompt_tokens, prompt_mask, result: lm.GenerateResult, reward, *,
             top_k: int = 64, chunk_size: int = 8, token_reward=None) -> Rollouts:
    """Prepare base-model samples for :func:`fit_fudge` / :func:`fit_cdq` (one jitted forward).

    Runs the frozen model over ``[prompt, result.tokens]`` in chunks of ``chunk_size`` rows and keeps
    the final residual stream of the L + 1 prefixes and the top-k next-token distribution there.

    Args:
        model: the frozen :class:`jaxcore.lm.Llama` that sampled ``result``.
        prompt_tokens: ``[N, P]`` left-padded prompts (repeat a prompt for several samples).
        prompt_mask: ``[N, P]`` bool or None (all real).
        result: the :class:`jaxcore.lm.GenerateResult` of those prompts (``[N, L]``).
        reward: ``[N]`` finite sequence rewards.
        top_k: k next tokens kept per prefix for CD-Q's target (at most V; V is exact).
        chunk_size: rows per forward (memory); chunk j holds rows j, j + N / chunk_size, ..., so rows
            split over D devices stay split when ``chunk_size`` is a multiple of D dividing N.
        token_reward: ``[N, L]`` finite per-token rewards of an additive reward (zeroed past the
            mask), or None: see :class:`Rollouts` (CD-Q's per-position target).

    Returns:
        :class:`Rollouts` with unit weights.

    Raises:
        TypeError, ValueError: bad shapes or values.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore import lm
        >>> model = lm.random_llama(jax.random.key(0))
        >>> prompt = jnp.array([[1, 2, 3]] * 4)
        >>> out = lm.generate(jax.random.key(1), model, prompt, max_new_tokens=5)  # doctest: +SKIP
        >>> rollouts(model, prompt, None, out, jnp.arange(4.0), top_k=8).hidden.shape  # doctest: +SKIP
        (4, 6, 32)
    """
    if not isinstance(result, lm.GenerateResult):
        raise TypeError(expected("result", "a jaxcore.lm.GenerateResult", type(result).__name__, raw=True))
    tokens = jnp.asarray(result.tokens, jnp.int32)
    n, length = tokens.shape
    if prompt_mask is None:
        prompt_mask = jnp.ones(np.shape(prompt_tokens), bool)
    if not isinstance(model, lm.Llama):
        raise TypeError(expected("model", "a jaxcore.lm.Llama", type(model).__name__, raw=True))
    prompt, pmask = check_prompt(prompt_tokens, prompt_mask)
    if prompt.shape[0] != n:
        raise ValueError(expected("prompt_tokens", f"{n} rows (one per sample of result)", prompt.shape))
    r = as_float_array(reward, "reward", dtype=jnp.float32)
    check_shape(r, "reward", (n,))
    check_finite(r, "reward")  # on the host; under an outer jit the check is the caller's
    k = check_int(top_k, "top_k", minimum=1, maximum=model.config.vocab_size)
    c = check_int(chunk_size, "chunk_size", minimum=1)
    tr = None
    if token_reward is not None:
        tr = as_float_array(token_reward, "token_reward", dtype=jnp.float32)
        check_shape(tr, "token_reward", (n, length))
        check_finite(tr, "token_reward")
        tr = jnp.where(jnp.asarray(result.mask, bool), tr, 0.0)
    hid, ids, probs = _rollouts_jit(model, prompt, pmask, tokens, jnp.asarray(result.mask, bool), k, min(c, n))
    return Rollouts(hid, tokens, jnp.asarray(result.mask, bool), r, ids, probs, jnp.ones_like(r),
                    vocab_size=model.config.vocab_size, token_reward=tr)


def check_prompt(prompt_tokens, prompt_mask, name: str = "prompt_tokens"):
    """``[B, P]`` int32 tokens and bool mask (default all True), with their shapes checked."""
    t = np.asarray(prompt_tokens) if not isinstance(prompt_tokens, jax.Array) else prompt_tokens
    if t.ndim != 2 or not jnp.issubdtype(t.dtype, jnp.integer):
        raise TypeError(expected(name, "a [B, P] integer array", t))
    m = jnp.ones(t.shape, bool) if prompt_mask is None else jnp.asarray(prompt_mask)
    if m.shape != t.shape or m.dtype != bool:
        raise ValueError(expected("prompt_mask", f"a bool array of shape {tuple(t.shape)}", m))
    return jnp.asarray(t, jnp.int32), m


def check_rollouts(data, head=None, name: str = "data") -> Rollouts:
    """TypeError unless ``data`` is :class:`Rollouts`; ValueError unless it matches ``head``.

    The head's hidden size must be the data's; a Q head's vocabulary must be the data's
    ``vocab_size`` (when known) and hold every token and next-token id of the data (when concrete).
    """
    if not isinstance(data, Rollouts):
        raise TypeError(expected(name, "a jaxcore.decoding.Rollouts", type(data).__name__, raw=True))
    if head is not None and head.dim != data.hidden.shape[-1]:
        raise ValueError(expected(f"{name}.hidden", f"hidden size {head.dim} (the head's)", data.hidden.shape))
    v = _q_vocab(head)
    if v is not None:
        if data.vocab_size is not None and v != data.vocab_size:
            raise ValueError(expected("head", f"a Q head over the data's vocabulary of {data.vocab_size} tokens",
                                      f"a head over {v} tokens", raw=True))
        if is_concrete(data.tokens, data.next_ids):
            top = max(int(np.max(data.tokens, initial=0)), int(np.max(data.next_ids, initial=0)))
            if top >= v:
                raise ValueError(expected("head", f"a Q head over at least {top + 1} tokens (the data's ids)",
                                          f"a head over {v} tokens", raw=True))
    return data


