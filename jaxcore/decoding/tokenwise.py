"""Tokenwise controlled decoding: logits processors ``z + lambda Q`` for :func:`jaxcore.lm.generate`.

Token ``y_t`` is drawn from ``pi_lambda(y | x, y_<t) ∝ p(y | x, y_<t) exp(lambda Q(x, y_<t, y))``, the
solution of the KL-regularised tokenwise RL problem ``max E_pi[Q] - KL(pi || p) / lambda``.
:class:`CDQ` adds ``lambda Q(h_t)`` from a :class:`QHead` over the whole vocabulary (one d x V product
per token). :class:`CDFudge` scores prefixes with a :class:`ValueHead`: it takes the base model's
``k`` most likely next tokens, runs the k extended prefixes as one batched step on the shared KV
cache, and adds ``lambda V(x, y_<t, y)`` to those k logits; **the other V - k tokens keep their base
logits** (k = V is exact CD-FUDGE; the cost is one extra decoding step of k tokens per token).

Both set ``uses_hidden = True`` (the hook that hands them the hidden state and the extension
function) and are called before temperature / top-k / top-p. ``strength`` (lambda) is an array
field: a sweep over lambda reuses one compiled program; lambda = 0 reproduces base sampling bit for
bit with the same keys.

References:
    S. Mudgal et al., "Controlled Decoding from Language Models", ICML 2024, Sec. 2 (Eq. 2-3: the
    tilted tokenwise policy) and Sec. 3.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Float

from jaxcore import lm
from jaxcore.lm.processors import ordered_bits
from jaxcore._util import as_float_array, check_finite, check_int, check_scalar, default_float, expected, is_concrete

from .scorers import _q_vocab, check_scorer

__all__ = ["CDFudge", "CDQ", "tilted_kl"]


def _strength(strength):
    if is_concrete(strength):
        check_scalar(strength, "strength", nonnegative=True)
    return jnp.asarray(strength, default_float())


def _check_sizes(scorer, hidden):
    """ValueError (at trace time: shapes are static) unless the hidden size is the scorer's."""
    if hidden is None or np.shape(hidden)[-1:] != (scorer.dim,):
        got = "None" if hidden is None else f"shape {tuple(np.shape(hidden))}"
        raise ValueError(expected("hidden", f"hidden states of size {scorer.dim} (the scorer's dim: the model's)",
                                  got, raw=True))


class CDQ(lm.LogitsProcessor):
    """CD-Q's processor: ``z_t + lambda Q(h_t)`` for every token at once.

    Args:
        scorer: a :class:`QHead` or a :func:`combine` of Q heads (hidden size = the model's, V its
            vocabulary).
        strength: lambda >= 0 (0: the base model).

    Raises:
        TypeError: not a Q scorer. ValueError: a negative or non-finite strength; when called
            (inside ``lm.generate``), a head whose hidden size or vocabulary is not the model's.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.decoding import QHead
        >>> p = CDQ(QHead(4, 3), 2.0)      # with lm.generate(key, model, prompt, ..., processor=p)
        >>> z, _ = p(p.init(1), jnp.zeros((1, 3)), None, hidden=jnp.ones((1, 4)))
        >>> z.tolist()                     # a zero head leaves the logits as they are
        [[0.0, 0.0, 0.0]]
    """

    scorer: object
    strength: Float[Array, ""]
    uses_hidden = True

    def __init__(self, scorer, strength):
        self.scorer = check_scorer(scorer, "q")
        self.strength = _strength(strength)

    def __call__(self, state, logits, context, *, hidden, extend=None):
        _check_sizes(self.scorer, hidden)
        v = _q_vocab(self.scorer)
        if v != logits.shape[-1]:
            raise ValueError(expected("scorer", f"a Q head over the model's vocabulary of {logits.shape[-1]} tokens",
                                      f"a head over {v} tokens", raw=True))
        q = self.scorer(hidden)
        return logits + self.strength * q.astype(logits.dtype), state


class CDFudge(lm.LogitsProcessor):
    """CD-FUDGE's processor: ``z_t[y] + lambda V(x, y_<t, y)`` for the base model's top-k tokens y.

    Args:
        scorer: a :class:`ValueHead` or a :func:`combine` of value heads.
        strength: lambda >= 0.
        num_candidates: k >= 1 candidates scored per step (the rest keep their base logits).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.decoding import ValueHead
        >>> head = eqx.tree_at(lambda h: h.bias, ValueHead(2), jnp.array(0.5))   # V = 0.5 everywhere
        >>> p = CDFudge(head, 2.0, num_candidates=1)   # lm.generate(..., processor=p) passes extend
        >>> extend = lambda cand: jnp.ones(cand.shape + (2,))     # hidden states of the extended prefixes
        >>> p(p.init(1), jnp.array([[0.0, 3.0, 1.0]]), None, hidden=None, extend=extend)[0].tolist()
        [[0.0, 4.0, 1.0]]
    """

    scorer: object
    strength: Float[Array, ""]
    num_candidates: int = eqx.field(static=True)
    uses_hidden = True

    def __init__(self, scorer, strength, num_candidates: int = 16):
        self.scorer = check_scorer(scorer, "value")
        self.strength = _strength(strength)
        self.num_candidates = check_int(num_candidates, "num_candidates", minimum=1)

    def __call__(self, state, logits, context, *, hidden, extend):
        k = min(self.num_candidates, logits.shape[-1])
        cand = _top_indices(logits, k)
        h = extend(cand)
        _check_sizes(self.scorer, h)
        v = self.scorer(h)  # [B, k]
        add = jax.vmap(lambda z, c, dv: z.at[c].add(dv))  # a scatter with a batch dimension: rows stay local
        return add(logits, cand, self.strength * v.astype(logits.dtype)), state


def _top_indices(z, k):
    """``lax.top_k(z, k)[1]`` as a stable sort along the last axis, which XLA's partitioner keeps row-local
    (it gathers a batch split over devices around ``top_k``). The sort key is the float's bits mapped to
    unsigned integers in descending float order (``top_k``'s total order: +0 before -0, NaN first), ties
    to the lower index."""
    descending = ~ordered_bits(z)
    iota = lax.broadcasted_iota(jnp.int32, z.shape, z.ndim - 1)
    return lax.sort((descending, iota), dimension=z.ndim - 1, num_keys=1, is_stable=True)[1][..., :k]


def tilted_kl(logits: Float[Array, "... V"], q: Float[Array, "... V"], strength) -> Float[Array, "..."]:
    """``KL(pi_lambda || p)`` of one tilted step in closed form (nats).

    ``KL = lambda E_pi[Q] - log E_p[exp(lambda Q)]`` with ``p = softmax(z)`` and
    ``pi_lambda = softmax(z + lambda Q)``; summed over steps along samples of pi it is an unbiased
    estimate of the sequence KL (chain rule).

    Args:
        logits: ``[..., V]`` base logits (``-inf`` allowed: zero mass).
        q: ``[..., V]`` finite token values.
        strength: lambda >= 0.

    Returns:
        ``[...]`` float KL >= 0, computed as ``sum pi (log pi - log p)`` from the tilted log-probabilities
        (no cancellation at large ``lambda``: the limit ``-log p(argmax q)`` is reached).

    Raises:
        TypeError: non-numeric (or None) ``logits`` or ``q``.
        ValueError: scalar logits, ``q`` of another shape; a NaN or infinite entry of a concrete
            ``q``; ``strength`` negative or not finite.

    References:
        Mudgal et al., ICML 2024, Eq. 2-3.

    Examples:
        >>> import jax.numpy as jnp
        >>> float(tilted_kl(jnp.zeros(2), jnp.array([0.0, 1.0]), 0.0))
        0.0
    """
    z, qa = as_float_array(logits, "logits"), as_float_array(q, "q")
    if z.ndim < 1:
        raise ValueError(expected("logits", "a [..., V] array", f"shape {tuple(z.shape)}", raw=True))
    if qa.shape != z.shape:
        raise ValueError(expected("q", f"shape {tuple(z.shape)} (that of logits)", f"shape {tuple(qa.shape)}", raw=True))
    check_finite(qa, "q")
    return _tilted_kl(z, qa, _strength(strength))


@jax.jit
def _tilted_kl(z, q, lam):
    # sum_v pi_v (log pi_v - log p_v) from the tilted log-probabilities themselves: the closed form
    # lambda E_pi[Q] - log E_p[exp(lambda Q)] subtracts two numbers of size lambda |Q| and cancels in float32
    # (0.0 instead of log 2 at lambda = 1e10 for z = log[.5, .3, .2], q = [1, 0, -1])
    lp = jax.nn.log_softmax(z, axis=-1)
    lpi = jax.nn.log_softmax(jnp.where(jnp.isfinite(lp), lp + lam * q, -jnp.inf), axis=-1)
    pi = jnp.exp(lpi)
    return jnp.maximum(jnp.sum(jnp.where(pi > 0, pi * (lpi - lp), 0.0), axis=-1), 0.0)
