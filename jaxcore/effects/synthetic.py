"""Seeded synthetic families of observational data sets with known average treatment effects.

- :func:`linear_design`: one data set, ``Y = x . beta + tau T + eps`` with logistic confounded
  treatment: the effect ``tau`` is known exactly (an oracle for every estimator).
- :func:`heterogeneous_design`: one data set whose effect varies with a covariate whose
  distribution differs between the arms, so that the ATE and the ATT differ, both known in closed
  form (an oracle for the ``estimand="att"`` estimators).
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

from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import PRNGKeyArray

from jaxcore._util import check_choice, check_finite, check_int, check_key, check_positive, default_float

from .data import EffectData

__all__ = ["DesignResult", "heterogeneous_design", "linear_design", "synthetic_family"]


class DesignResult(NamedTuple):
    """A data set with its true effects: :func:`heterogeneous_design`.

    Attributes:
        data: :class:`EffectData` ``[1, N, D]`` (its ``ate`` field is the population ATE).
        ate: ``[1]`` the population ATE ``E[tau(x)]`` (closed form).
        att: ``[1]`` the population ATT ``E[tau(x) | T = 1]`` (closed form).
        sample_ate: ``[1]`` the mean of ``tau(x_i)`` over the data set's units.
        sample_att: ``[1]`` the mean of ``tau(x_i)`` over its treated units.

    Examples:
        >>> DesignResult._fields
        ('data', 'ate', 'att', 'sample_ate', 'sample_att')
    """

    data: EffectData
    ate: jnp.ndarray
    att: jnp.ndarray
    sample_ate: jnp.ndarray
    sample_att: jnp.ndarray


def heterogeneous_design(
    key: PRNGKeyArray,
    num_units: int = 1000,
    num_features: int = 3,
    *,
    treated_fraction: float = 0.3,
    shift: float = 1.0,
    effect: float = 1.0,
    slope: float = 2.0,
    noise: float = 1.0,
) -> DesignResult:
    """One data set with a heterogeneous effect and known ATE != ATT (closed forms).

    ``T ~ Bernoulli(p)``; ``x | T ~ N(T shift e_1, I_D)`` (the treated shifted along the first covariate), so
    the propensity is exactly logistic in ``x``: ``logit e(x) = logit p + shift x_1 - shift^2 / 2``;
    ``tau(x) = effect + slope x_1``; ``Y = x . 1 + tau(x) T + noise N(0, 1)`` (both arms' outcome models are
    linear). Then ``ATE = effect + slope p shift`` and ``ATT = effect + slope shift``.

    Args:
        key: PRNG key.
        num_units: N (>= 4); the first unit is treated and the second a control (both arms present).
        num_features: D (>= 1).
        treated_fraction: ``p`` in (0, 1).
        shift: the treated arm's mean of ``x_1``.
        effect, slope: ``tau(x) = effect + slope x_1``.
        noise: outcome noise sd (>= 0; 0 makes the outcome models exact).

    Returns:
        :class:`DesignResult`.

    Raises:
        TypeError: ``key`` is not a PRNG key.
        ValueError: invalid sizes, a fraction outside (0, 1), a negative noise, non-finite parameters.

    Examples:
        >>> r = heterogeneous_design(jax.random.key(0), 200, 2, treated_fraction=0.25, shift=1.0, effect=1.0,
        ...                          slope=2.0)
        >>> float(r.ate[0]), float(r.att[0])
        (1.5, 3.0)
    """
    check_key(key)
    n = check_int(num_units, "num_units", 4)
    dim = check_int(num_features, "num_features", 1)
    check_finite(treated_fraction, "treated_fraction")
    if not 0.0 < float(treated_fraction) < 1.0:
        raise ValueError(f"treated_fraction: expected a number in (0, 1), got {treated_fraction!r}")
    for name, val in (("shift", shift), ("effect", effect), ("slope", slope)):
        check_finite(val, name)
    check_positive(noise, "noise", allow_zero=True)
    dtype = default_float()
    kt, kx, ke = jax.random.split(key, 3)
    t = jax.random.bernoulli(kt, treated_fraction, (n,)).astype(dtype).at[0].set(1.0).at[1].set(0.0)
    x = jax.random.normal(kx, (n, dim), dtype).at[:, 0].add(shift * t)
    tau = effect + slope * x[:, 0]
    y = x.sum(-1) + tau * t + noise * jax.random.normal(ke, (n,), dtype)
    ate = jnp.asarray([effect + slope * treated_fraction * shift], dtype)
    att = jnp.asarray([effect + slope * shift], dtype)
    data = EffectData(x[None], t[None], y[None], jnp.ones((1, n), bool), ate)
    return DesignResult(data, ate, att, jnp.mean(tau)[None], (jnp.sum(tau * t) / jnp.sum(t))[None])


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
