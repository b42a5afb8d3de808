"""Seeded synthetic families of observational data sets with known average treatment effects.

- :func:`linear_design`: one data set, ``Y = x . beta + tau T + eps`` with logistic confounded
  treatment: the effect ``tau`` is known exactly (an oracle for every estimator).
- :func:`synthetic_family`: ``B`` data sets, each with its own random mechanism, for CInA's
  multi-data-set (self-supervised) training and its in- / out-of-distribution tests, in kind of
  Zhang et al. (2024), Section 5.1: covariates ``x ~ N(mu, I)``; treatment
  ``T ~ Bernoulli(sigmoid(x . g / sqrt(D)))``; outcome
  ``Y = x . b + c sin(x_1) + tau(x) T + eps`` with a heterogeneous effect ``tau(x) = tau (1 + x_2 / 2)``.
  ``distribution="in"``: ``mu = 0``, ``g ~ N(0, 1)``, ``tau ~ U(1, 3)``; ``"out"``: shifted and
  more strongly confounded data sets (``mu = 0.5``, ``g ~ N(0, 2^2)``, ``tau ~ U(-3, -1)``).
  The reported ``ate`` is the sample average of ``tau(x_i)`` over the data set's units.
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
from jaxtyping import PRNGKeyArray

from jaxcore._util import check_choice, check_finite, check_int, check_key, check_positive, default_float

from .data import EffectData

__all__ = ["linear_design", "synthetic_family"]


def linear_design(
    key: PRNGKeyArray,
    num_units: int = 500,
    num_features: int = 5,
    *,
    effect: float = 1.0,
    confounding: float = 1.0,
    noise: float = 1.0,
) -> EffectData:
    """One data set with a linear outcome and a known constant treatment effect.

    ``x ~ N(0, I_D)``, ``T ~ Bernoulli(sigmoid(confounding * x . 1 / sqrt(D)))``,
    ``Y = x . 1 + effect * T + noise * N(0, 1)``.

    Args:
        key: PRNG key.
        num_units: N (>= 4).
        num_features: D (>= 1).
        effect: the true ATE.
        confounding: strength of the covariates' effect on treatment (>= 0).
        noise: outcome noise sd (> 0).

    Returns:
        :class:`EffectData` with ``B = 1`` and ``ate = [effect]``.

    Raises:
        TypeError: ``key`` is not a PRNG key.
        ValueError: invalid sizes or scales, a NaN/inf ``effect``.

    Examples:
        >>> d = linear_design(jax.random.key(0), 100, 3, effect=2.0)
        >>> d.x.shape, float(d.ate[0])
        ((1, 100, 3), 2.0)
    """
    check_key(key)
    n = check_int(num_units, "num_units", 4)
    dim = check_int(num_features, "num_features", 1)
    check_positive(confounding, "confounding", allow_zero=True)
    check_positive(noise, "noise")
    check_finite(effect, "effect")
    dtype = default_float()
    kx, kt, ke = jax.random.split(key, 3)
    x = jax.random.normal(kx, (n, dim), dtype)
    p = jax.nn.sigmoid(confounding * x.sum(-1) / jnp.sqrt(dim))
    t = jax.random.bernoulli(kt, p).astype(dtype)
    t = t.at[0].set(1.0).at[1].set(0.0)  # both arms present
    y = x.sum(-1) + effect * t + noise * jax.random.normal(ke, (n,), dtype)
    return EffectData(x[None], t[None], y[None], jnp.ones((1, n), bool), jnp.asarray([effect], dtype))


@jax.jit(static_argnames=("num_datasets", "num_units", "num_features", "out"))
def _family(key, num_datasets, num_units, num_features, out):
    dtype = default_float()

    def one(k):
        kx, kg, kb, kc, kt, kw, ke = jax.random.split(k, 7)
        mu = 0.5 if out else 0.0
        x = mu + jax.random.normal(kx, (num_units, num_features), dtype)
        g = (2.0 if out else 1.0) * jax.random.normal(kg, (num_features,), dtype)
        b = jax.random.normal(kb, (num_features,), dtype)
        c = jax.random.normal(kc, (), dtype)
        tau = jax.random.uniform(kt, (), dtype, -3.0, -1.0) if out else jax.random.uniform(kt, (), dtype, 1.0, 3.0)
        p = jax.nn.sigmoid(x @ g / jnp.sqrt(num_features))
        t = jax.random.bernoulli(kw, p).astype(dtype).at[0].set(1.0).at[1].set(0.0)
        x2 = x[:, 1 % num_features]
        effect = tau * (1.0 + 0.5 * x2)
        y = x @ b + c * jnp.sin(x[:, 0]) + effect * t + jax.random.normal(ke, (num_units,), dtype)
        return x, t, y, jnp.mean(effect)

    x, t, y, ate = jax.vmap(one)(jax.random.split(key, num_datasets))
    return EffectData(x, t, y, jnp.ones((num_datasets, num_units), bool), ate)


def synthetic_family(
    key: PRNGKeyArray,
    num_datasets: int,
    num_units: int = 200,
    num_features: int = 5,
    *,
    distribution: Literal["in", "out"] = "in",
) -> EffectData:
    """``B`` data sets, each drawn from its own random confounded mechanism (module docstring).

    Args:
        key: PRNG key.
        num_datasets: B (>= 1).
        num_units: N per data set (>= 4).
        num_features: D (>= 2).
        distribution: ``"in"`` (the training distribution) or ``"out"`` (shifted covariates,
            stronger confounding, effects of the other sign).

    Returns:
        :class:`EffectData` ``[B, N, D]`` with the sample ATE of each data set.

    Raises:
        TypeError: ``key`` is not a PRNG key.
        ValueError: invalid sizes or distribution.

    References:
        Zhang et al., ICML 2024, Section 5.1 (synthetic multi-data-set experiments, in kind).

    Examples:
        >>> d = synthetic_family(jax.random.key(3), 2, 30, 3)
        >>> d.x.shape, bool(jnp.all(d.ate > 0))
        ((2, 30, 3), True)
    """
    check_key(key)
    b = check_int(num_datasets, "num_datasets", 1)
    n = check_int(num_units, "num_units", 4)
    dim = check_int(num_features, "num_features", 2)
    check_choice(distribution, "distribution", ("in", "out"))
    return _family(key, b, n, dim, distribution == "out")
