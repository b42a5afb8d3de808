"""Preference pairs: for each prompt, the least and the most toxic of K sampled continuations.

A :class:`PreferencePairs` holds both sequences of every pair as one left-padded array
``[N, 2, L]`` (index 0 the chosen = preferred continuation, 1 the rejected one) with its real-token
mask and the loss mask of the continuation, so that a DPO step runs policy and reference over
``[2 B, L]`` in one forward each.

References:
    Lee et al., "A Mechanistic Understanding of Alignment Algorithms: A Case Study on DPO and
    Toxicity", ICML 2024, Section 5 (pairwise data: a non-toxic and a toxic continuation of
    each prompt).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxcore._util import check_ndim, check_shape, expected

__all__ = ["PreferencePairs", "preference_pairs"]


class PreferencePairs(eqx.Module):
    """A batch of DPO pairs (index 0 of axis 1 is chosen, 1 rejected), left-padded.

    Attributes:
        tokens: ``[N, 2, L]`` int32 prompt + continuation ids.
        mask: ``[N, 2, L]`` bool, True at real tokens (one run at the right end of each row).
        loss_mask: ``[N, 2, L]`` bool, True at the continuation's tokens (the scored ones).
        scores: ``[N, 2]`` float32 the scorer's value of the chosen and the rejected continuation
            (e.g. P(offensive)).

    Examples:
        >>> import jax.numpy as jnp
        >>> t = jnp.zeros((3, 2, 5), jnp.int32); m = jnp.ones((3, 2, 5), bool)
        >>> pairs = PreferencePairs(t, m, m, jnp.zeros((3, 2)))
        >>> pairs.num_pairs, pairs.take(jnp.array([0, 2])).tokens.shape
        (3, (2, 2, 5))
    """

    tokens: Int[Array, "N 2 L"]
    mask: Bool[Array, "N 2 L"]
    loss_mask: Bool[Array, "N 2 L"]
    scores: Float[Array, "N 2"]

    def __check_init__(self):
        if not isinstance(self.tokens, jax.core.Tracer):
            check_ndim(self.tokens, "tokens", 3, "a [num_pairs, 2, length] array")
            check_shape(self.tokens, "tokens", (None, 2, None), "a [num_pairs, 2, length] array")
            for name in ("mask", "loss_mask"):
                check_shape(getattr(self, name), name, tuple(np.shape(self.tokens)))
            check_shape(self.scores, "scores", tuple(np.shape(self.tokens))[:2])

    @property
    def num_pairs(self) -> int:
        """N, the number of pairs."""
        return int(self.tokens.shape[0])

    def take(self, index) -> PreferencePairs:
        """The pairs at ``index`` (an int array), e.g. a minibatch."""
        return jax.tree_util.tree_map(lambda a: a[index], self)


def _left_pack(tokens, mask, loss_mask):
    """Move every row's real tokens to its right end, keeping their order (one row)."""
    order = jnp.argsort(mask, stable=True)
    return tokens[order], mask[order], loss_mask[order]


@jax.jit
def _pairs_jit(prompt, pmask, cont, cmask, scores):
    n, k, c = cont.shape
    lo = jnp.argmin(scores, axis=1)
    hi = jnp.argmax(scores, axis=1)
    idx = jnp.stack([lo, hi], axis=1)  # [N, 2]
    sel = lambda a: jnp.take_along_axis(a, idx[:, :, None], axis=1)  # noqa: E731
    ct, cm = sel(cont), sel(cmask)
    pt = jnp.broadcast_to(prompt[:, None], (n, 2, prompt.shape[1]))
    pm = jnp.broadcast_to(pmask[:, None], (n, 2, prompt.shape[1]))
    tokens = jnp.concatenate([pt, ct], axis=2)
    mask = jnp.concatenate([pm, cm], axis=2)
    loss = jnp.concatenate([jnp.zeros_like(pm), cm], axis=2)
    pack = jax.vmap(jax.vmap(_left_pack))
    tokens, mask, loss = pack(tokens, mask, loss)
    tokens = jnp.where(mask, tokens, 0)
    return PreferencePairs(tokens, mask, loss, jnp.take_along_axis(scores, idx, axis=1).astype(jnp.float32))


def preference_pairs(prompt_tokens: Int[Array, "N P"], prompt_mask: Bool[Array, "N P"],
                     continuations: Int[Array, "N K C"], continuation_mask: Bool[Array, "N K C"],
                     scores: Float[Array, "N K"]) -> PreferencePairs:
    """DPO pairs from K scored continuations per prompt: chosen = lowest score, rejected = highest.

    ``y_w = argmin_k s_k``, ``y_l = argmax_k s_k`` (ties: the first); each sequence is the prompt
    followed by the continuation, re-packed to left padding (continuations cut by an
    end-of-sequence token leave padding in the middle).

    Args:
        prompt_tokens: ``[N, P]`` int ids, left-padded.
        prompt_mask: ``[N, P]`` bool.
        continuations: ``[N, K, C]`` int ids (``K >= 2`` samples per prompt).
        continuation_mask: ``[N, K, C]`` bool (``GenerateResult.mask``).
        scores: ``[N, K]`` finite floats, higher = worse (toxicity).

    Returns:
        A :class:`PreferencePairs` with ``L = P + C``.

    Raises:
        ValueError: shapes disagree, ``K < 2``, non-finite scores.
        TypeError: token ids are not integers.

    References:
        Lee et al., ICML 2024, Section 5; Rafailov et al., NeurIPS 2023, Section 4.

    Examples:
        >>> import jax.numpy as jnp
        >>> pairs = preference_pairs(jnp.array([[1, 2]]), jnp.array([[True, True]]),
        ...                          jnp.array([[[3, 4], [5, 6], [7, 8]]]), jnp.ones((1, 3, 2), bool),
        ...                          jnp.array([[0.5, 0.1, 0.9]]))
        >>> pairs.tokens[0].tolist(), [round(float(s), 2) for s in pairs.scores[0]]
        ([[1, 2, 5, 6], [1, 2, 7, 8]], [0.1, 0.9])
    """
    arrs = {}
    for name, x in (("prompt_tokens", prompt_tokens), ("continuations", continuations)):
        a = np.asarray(x)
        if a.dtype.kind not in "iu":
            raise TypeError(expected(name, "an integer array of token ids", f"dtype {a.dtype}", raw=True))
        arrs[name] = a.astype(np.int32)
    pt, ct = arrs["prompt_tokens"], arrs["continuations"]
    check_ndim(pt, "prompt_tokens", 2, "a [num_prompts, prompt_length] array")
    check_ndim(ct, "continuations", 3, "a [num_prompts, num_samples, length] array")
    n, k, c = ct.shape
    check_shape(pt, "prompt_tokens", (n, None), f"{n} rows (one per prompt of continuations)")
    pm = np.asarray(prompt_mask).astype(bool)
    cm = np.asarray(continuation_mask).astype(bool)
    check_shape(pm, "prompt_mask", pt.shape)
    check_shape(cm, "continuation_mask", ct.shape)
    if k < 2:
        raise ValueError(expected("continuations", "at least 2 samples per prompt (axis 1)", f"shape {ct.shape}",
                                  raw=True))
    s = np.asarray(scores, np.float64)
    check_shape(s, "scores", (n, k))
    if not np.isfinite(s).all():
        raise ValueError(expected("scores", "finite values", s[~np.isfinite(s)][0]))
    return _pairs_jit(jnp.asarray(pt), jnp.asarray(pm), jnp.asarray(ct), jnp.asarray(cm), jnp.asarray(s, jnp.float32))
