"""The variational factors of the adaptive networks: mean-field Gaussian weights and Beta stick posteriors.

The networks (:mod:`jaxcore.bnp.networks`) hold one :class:`MeanFieldGaussian` per weight tensor and one
:class:`BetaSticks` for the depth; priors are models of the same configuration holding the prior's values.

References:
    Thapa & Li, "Bayesian Adaptation of Network Depth and Width for Continual Learning", ICML 2024, Sec. 3.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

__all__ = [
    "BetaSticks",
    "MeanFieldGaussian",
]


class MeanFieldGaussian(eqx.Module):
    """Mean-field Gaussian factor ``N(loc, exp(log_scale)^2)`` of one weight tensor (elementwise).

    Attributes:
        loc: means, float, the weight tensor's shape.
        log_scale: log standard deviations, float, same shape.

    Examples:
        >>> import jax.numpy as jnp
        >>> g = MeanFieldGaussian(jnp.zeros(3), jnp.zeros(3))
        >>> g.loc.shape
        (3,)
    """

    loc: Float[Array, "..."]
    log_scale: Float[Array, "..."]


class BetaSticks(eqx.Module):
    """Log concentrations of the stick posteriors ``nu_k ~ Beta(exp(log_a_k), exp(log_b_k))``.

    Attributes:
        log_a: ``[K]`` float, ``log a_k``.
        log_b: ``[K]`` float, ``log b_k``.

    Examples:
        >>> import jax.numpy as jnp
        >>> BetaSticks(jnp.zeros(2), jnp.zeros(2)).log_a.shape
        (2,)
    """

    log_a: Float[Array, " K"]
    log_b: Float[Array, " K"]


def _gauss(key, shape, init_scale, loc_scale):
    return MeanFieldGaussian(
        loc_scale * jax.random.normal(key, shape),
        jnp.full(shape, np.log(init_scale), jnp.result_type(float)),  # not weak-typed
    )


def _gauss_prior(shape, scale):
    return MeanFieldGaussian(jnp.zeros(shape), jnp.full(shape, np.log(scale), jnp.result_type(float)))
