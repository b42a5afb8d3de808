"""Rewards computable offline: non-toxicity, brevity, and a keyword (topic) reward.

Each maps generated tokens (or their text) to one float per sequence:

- :func:`non_toxicity`: ``1 - P(offensive)`` of the decoded text under an offline toxicity scorer
  (``jaxcore.lm.load_toxicity_scorer()``: alt-profanity-check's linear model as arrays), in [0, 1].
- :func:`brevity`: ``1 - n / N`` with n the tokens up to and including the first end-of-sequence
  (N when there is none), in [0, 1); it rewards answers that end early.
- :func:`keyword_reward`: the fraction of the N tokens that are in a keyword set (a topic), in [0, 1];
  :func:`keyword_ids` lists the token ids of words (with and without a leading space).

References:
    S. Mudgal et al., "Controlled Decoding from Language Models", ICML 2024, Sec. 6 (the paper's
    rewards are dialog safety and response length; these are offline stand-ins of the same kinds).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxcore._util import check_int, expected

__all__ = ["brevity", "keyword_ids", "keyword_reward", "non_toxicity"]


def _tokens(tokens, name="tokens"):
    if tokens is None:
        raise TypeError(expected(name, "a [B, N] integer array", "None", raw=True))
    try:
        t = jnp.asarray(tokens)
    except (TypeError, ValueError) as exc:
        raise TypeError(expected(name, "a [B, N] integer array", type(tokens).__name__, raw=True)) from exc
    if t.ndim != 2 or not jnp.issubdtype(t.dtype, jnp.integer):
        raise TypeError(expected(name, "a [B, N] integer array", t))
    return t


def _tokens_1d(ids):
    if ids is None:
        raise TypeError(expected("ids", "a [k] integer array of token ids", "None", raw=True))
    try:
        a = jnp.asarray(ids)
    except (TypeError, ValueError) as exc:
        raise TypeError(expected("ids", "a [k] integer array of token ids", type(ids).__name__, raw=True)) from exc
    if a.size == 0:
        return a.astype(jnp.int32).reshape(-1)
    if not jnp.issubdtype(a.dtype, jnp.integer):
        raise TypeError(expected("ids", "a [k] integer array of token ids", f"dtype {a.dtype}", raw=True))
    return a.reshape(-1)


def brevity(tokens: Int[Array, "B N"], eos_token_id: int) -> Float[Array, " B"]:
    """``1 - n / N``: n tokens up to and including the first ``eos_token_id`` (N without one).

    Examples:
        >>> import jax.numpy as jnp
        >>> brevity(jnp.array([[5, 0, 0, 0], [5, 5, 5, 5]]), 0).tolist()
        [0.5, 0.0]
    """
    t = _tokens(tokens)
    eos = check_int(eos_token_id, "eos_token_id", minimum=0)
    return _brevity(t, jnp.asarray(eos, t.dtype))


@jax.jit
def _brevity(t, eos):
    n = t.shape[1]
    hit = t == eos
    first = jnp.where(hit.any(axis=1), jnp.argmax(hit, axis=1) + 1, n)
    return 1.0 - first.astype(jnp.float32) / n


def keyword_ids(tokenizer, words: Sequence[str]) -> np.ndarray:
    """Sorted unique ids of the words that the tokenizer encodes as one token (``"w"`` and ``" w"``).

    Args:
        tokenizer: a :class:`jaxcore.lm.Tokenizer` (or anything with ``encode(str) -> list[int]``).
        words: the topic's words.

    Returns:
        ``[k]`` int32 ids (empty if no word is a single token).

    Examples:
        >>> class Chars:
        ...     def encode(self, s): return [ord(c) for c in s]
        >>> keyword_ids(Chars(), ["a", "bb"]).tolist()
        [97]
    """
    if isinstance(words, str) or not isinstance(words, Sequence) or not all(isinstance(w, str) for w in words):
        raise TypeError(expected("words", "a sequence of strings (not one string)", words))
    if not callable(getattr(tokenizer, "encode", None)):
        raise TypeError(expected("tokenizer", "a tokenizer with encode(str) -> list[int]", type(tokenizer).__name__, raw=True))
    ids = set()
    for w in words:
        for form in (w, " " + w):
            enc = list(tokenizer.encode(form))
            if len(enc) == 1:
                ids.add(int(enc[0]))
    return np.array(sorted(ids), np.int32)


def keyword_reward(tokens: Int[Array, "B N"], ids: Int[Array, " k"], mask=None) -> Float[Array, " B"]:
    """The fraction of tokens (of the live ones under ``mask``) that are in ``ids`` (jit-able).

    Examples:
        >>> import jax.numpy as jnp
        >>> keyword_reward(jnp.array([[1, 2, 3, 1]]), jnp.array([1])).tolist()
        [0.5]
    """
    t = _tokens(tokens)
    ids = _tokens_1d(ids).astype(jnp.int32)
    m = jnp.ones(t.shape, bool) if mask is None else jnp.asarray(mask, bool)
    if m.shape != t.shape:
        raise ValueError(expected("mask", f"a bool array of shape {tuple(t.shape)}", m))
    return _keyword_reward(t, ids, m)


@jax.jit
def _keyword_reward(t, ids, m):
    hit = jnp.any(t[..., None] == ids, axis=-1) & m
    return jnp.sum(hit, axis=1) / jnp.maximum(jnp.sum(m, axis=1), 1)


def non_toxicity(texts: Sequence[str], scorer) -> np.ndarray:
    """``1 - P(offensive | text)`` per text (float64 in [0, 1]) under an offline toxicity scorer.

    Args:
        texts: the decoded answers.
        scorer: ``jaxcore.lm.load_toxicity_scorer()`` (any ``scorer(texts) -> [N]`` probabilities).

    Examples:
        >>> non_toxicity(["a", "b"], lambda t: [0.25, 1.0]).tolist()
        [0.75, 0.0]
    """
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not all(isinstance(t, str) for t in texts):
        raise TypeError(expected("texts", "a sequence of strings (not one string)", texts))
    if not callable(scorer):
        raise TypeError(expected("scorer", "a callable scorer(texts) -> probabilities", type(scorer).__name__, raw=True))
    p = np.asarray(scorer(list(texts)), np.float64)
    if p.shape != (len(texts),) or not np.all((p >= 0) & (p <= 1)):
        raise ValueError(expected("scorer(texts)", f"{len(texts)} probabilities in [0, 1]", p))
    return 1.0 - p
