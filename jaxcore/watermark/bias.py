"""How far keyed permutations are from uniform ones, measured where it matters for DiPmark.

DiPmark preserves the distribution exactly when the permutation is uniformly random. For a
pseudorandom family (the Feistel network) the preservation error is E_h[P_W] - P over context
hashes h. :func:`permutation_bias` estimates it by Monte Carlo over ``num_samples`` random hashes,
with per-token standard errors, and two statistics that are about 1 for uniform permutations and
grow with any bias the sample can resolve:

- ``chi2_per_dof``: mean over tokens with P > 0 of ((mean_t - P_t) / se_t)^2 (the reweighted
  distribution's deviation in units of its Monte Carlo error);
- ``position_chi2_per_dof``: Pearson's chi-square of the (token group x position bin) counts,
  ``num_groups`` x ``num_groups`` cells, over (num_groups - 1)^2 degrees of freedom (positions of
  tokens with nearby ids landing together would show here; slightly below 1 for true permutations,
  whose counts are sampled without replacement).

Run it with ``method="shuffle"`` (``jax.random.permutation``) for the reference values at the same
sample size.

References:
    Wu et al., ICML 2024, Theorem 4.2 (distribution preservation under uniform permutations).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import as_float_array, check_int, check_key, check_ndim, check_scalar, error_if, expected

from .context import _secret_words
from .permutation import DEFAULT_ROUNDS, _check_method, _positions
from .reweight import _reweight_log

__all__ = ["BiasResult", "permutation_bias"]


class BiasResult(NamedTuple):
    """Result of :func:`permutation_bias`.

    Attributes:
        mean: ``[V]`` the reweighted distribution averaged over the sampled hashes.
        stderr: ``[V]`` its Monte Carlo standard error per token.
        l1: ``||mean - probs||_1``.
        chi2_per_dof: mean squared standardised deviation over tokens with P > 0 (about 1 if unbiased).
        position_chi2_per_dof: the position-uniformity chi-square over its degrees of freedom.

    Examples:
        >>> BiasResult._fields
        ('mean', 'stderr', 'l1', 'chi2_per_dof', 'position_chi2_per_dof')
    """

    mean: Float[Array, " V"]
    stderr: Float[Array, " V"]
    l1: Float[Array, ""]
    chi2_per_dof: Float[Array, ""]
    position_chi2_per_dof: Float[Array, ""]


def permutation_bias(
    key: PRNGKeyArray,
    probs: Float[Array, " V"],
    *,
    alpha: float = 0.5,
    num_samples: int = 1024,
    method: Literal["feistel", "shuffle"] = "feistel",
    num_rounds: int = DEFAULT_ROUNDS,
    num_groups: int = 32,
    chunk_size: int = 64,
) -> BiasResult:
    """Monte Carlo estimate of DiPmark's preservation error E_h[P_W] - P for a permutation family.

    Args:
        key: PRNG key: the secret and the ``num_samples`` context hashes are drawn from it.
        probs: ``[V]`` a next-token distribution.
        alpha: the reweight's alpha in [0, 1/2].
        num_samples: S hashes (a multiple of ``chunk_size``).
        method, num_rounds: the permutation family (see :func:`jaxcore.watermark.vocab_positions`).
        num_groups: token groups and position bins of the position chi-square (2 <= G <= V).
        chunk_size: hashes per vmapped chunk (memory: ``chunk_size * V`` floats).

    Returns:
        :class:`BiasResult`.

    Raises:
        ValueError / TypeError: bad probabilities or settings.

    References:
        Wu et al., ICML 2024, Theorem 4.2.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> p = jnp.array([0.4, 0.3, 0.2, 0.1])
        >>> r = permutation_bias(jax.random.key(0), p, num_samples=256, num_groups=2, method="shuffle")
        >>> bool(r.l1 < 0.1)
        True
    """
    check_key(key)
    probs = as_float_array(probs, "probs")
    check_ndim(probs, "probs", 1, "a [V] distribution")
    v = probs.shape[0]
    if v < 2:
        raise ValueError(expected("probs", "a distribution over V >= 2 tokens", f"shape {probs.shape}", raw=True))
    alpha = check_scalar(alpha, "alpha", low=0.0, high=0.5)
    chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
    num_samples = check_int(num_samples, "num_samples", minimum=2 * chunk_size if chunk_size > 1 else 2)
    if num_samples % chunk_size:
        raise ValueError(expected("num_samples", f"a multiple of chunk_size = {chunk_size}", num_samples))
    num_groups = check_int(num_groups, "num_groups", minimum=2, maximum=v)
    method, num_rounds = _check_method(method, num_rounds)
    probs = error_if(probs, ~jnp.all(probs >= 0) | (jnp.abs(jnp.sum(probs) - 1) > 1e-3), "probs",
                     "non-negative probabilities summing to one")
    return _bias_jit(key, probs, alpha, num_samples, method, num_rounds, num_groups, chunk_size)


@jax.jit(static_argnums=(3, 4, 5, 6, 7))
def _bias_jit(key, probs, alpha, num_samples, method, num_rounds, num_groups, chunk_size):
    v = probs.shape[0]
    k_secret, k_seeds = jax.random.split(key)
    secret = _secret_words(k_secret)
    seeds = jax.random.bits(k_seeds, (num_samples // chunk_size, chunk_size), jnp.uint32)
    logp = jnp.log(probs)
    group = (jnp.arange(v) * num_groups) // v

    def body(carry, s):
        acc, acc2, counts = carry
        pos = _positions(secret, s, v, method, num_rounds)  # [c, V]
        pw = jnp.exp(_reweight_log(jnp.broadcast_to(logp, pos.shape), pos, jnp.asarray(alpha, probs.dtype)))
        cell = group[None, :] * num_groups + (pos * num_groups) // v
        counts = counts.at[cell.reshape(-1)].add(1.0)
        return (acc + pw.sum(0), acc2 + (pw * pw).sum(0), counts), None

    zero = jnp.zeros(v, probs.dtype)
    (acc, acc2, counts), _ = jax.lax.scan(body, (zero, zero, jnp.zeros(num_groups * num_groups, probs.dtype)), seeds)
    mean = acc / num_samples
    var = jnp.maximum(acc2 / num_samples - mean * mean, 0) * num_samples / (num_samples - 1)
    se = jnp.sqrt(var / num_samples)
    live = (probs > 0) & (se > 0)
    zt = jnp.where(live, (mean - probs) / jnp.where(live, se, 1), 0)
    chi2 = jnp.sum(zt * zt) / jnp.maximum(jnp.sum(live), 1)
    sizes = jnp.bincount(group, length=num_groups).astype(probs.dtype)
    bins = jnp.bincount((jnp.arange(v) * num_groups) // v, length=num_groups).astype(probs.dtype)
    expected_counts = num_samples * sizes[:, None] * bins[None, :] / v
    pchi2 = jnp.sum((counts.reshape(num_groups, num_groups) - expected_counts) ** 2 / expected_counts)
    return BiasResult(mean, se, jnp.sum(jnp.abs(mean - probs)), chi2, pchi2 / (num_groups - 1) ** 2)
