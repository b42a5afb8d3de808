"""The random substitution attack of DiPmark's robustness experiments.

A fraction eps of each text's real tokens, chosen uniformly without replacement, is replaced by
tokens drawn uniformly from the rest of the vocabulary. Each substitution changes the token and
the context keys of the next k tokens, so up to (k + 1) eps of the scored tokens lose their signal.

References:
    Wu et al., "A Resilient and Accessible Distribution-Preserving Watermark for Large Language
    Models", ICML 2024, Section 6 (robustness: random token replacement, eps in {0.1, 0.2, 0.3}).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int, PRNGKeyArray

from jaxcore._util import check_int, check_key, check_scalar, is_concrete

from .context import _mask, _token_array

__all__ = ["substitution_attack"]


def substitution_attack(
    key: PRNGKeyArray,
    tokens: Int[Array, "B L"],
    mask: Bool[Array, "B L"] | None,
    eps: float,
    vocab_size: int,
    *,
    scored: Bool[Array, "B L"] | None = None,
) -> Int[Array, "B L"]:
    """Replace round(eps n) of each text's n attackable tokens by other uniformly random tokens.

    Args:
        key: PRNG key (positions and replacements).
        tokens: ``int[B, L]`` token ids in ``[0, V)``.
        mask: ``bool[B, L]`` real tokens (None: all).
        eps: fraction in [0, 1].
        vocab_size: V >= 2.
        scored: ``bool[B, L]`` the positions that may be attacked (None: all real ones), e.g. the
            generation but not the prompt.

    Returns:
        ``int32[B, L]``: the attacked texts; exactly round(eps n) entries per row differ.

    Raises:
        TypeError / ValueError: a bad key, tokens, masks, eps outside [0, 1], V < 2.

    References:
        Wu et al., ICML 2024, Section 6.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> t = jnp.zeros((1, 10), jnp.int32)
        >>> int((substitution_attack(jax.random.key(0), t, None, 0.3, 50) != t).sum())
        3
    """
    check_key(key)
    tokens = _token_array(tokens, "tokens", min_ndim=2, allow_minus_one=False)
    mask = _mask(mask, tokens)
    scored = _mask(scored, tokens, "scored")
    vocab_size = check_int(vocab_size, "vocab_size", minimum=2)
    if is_concrete(eps):
        eps = check_scalar(eps, "eps", low=0.0, high=1.0)
    return _attack_jit(key, tokens, mask & scored, jnp.asarray(eps, jnp.float32), vocab_size)


@jax.jit(static_argnums=4)
def _attack_jit(key, tokens, allowed, eps, vocab_size):
    k1, k2 = jax.random.split(key)
    u = jax.random.uniform(k1, tokens.shape)
    u = jnp.where(allowed, u, 2.0)
    rank = jnp.argsort(jnp.argsort(u, axis=-1), axis=-1)
    n = jnp.sum(allowed, axis=-1, keepdims=True)
    num = jnp.round(eps * n).astype(jnp.int32)
    hit = allowed & (rank < num)
    shift = jax.random.randint(k2, tokens.shape, 1, vocab_size)
    return jnp.where(hit, (tokens + shift) % vocab_size, tokens).astype(jnp.int32)
