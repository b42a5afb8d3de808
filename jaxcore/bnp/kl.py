"""KL divergences of the structure-adaptive variational posterior.

- :func:`kl_beta`: ``KL(Beta(a1, b1) || Beta(a2, b2))`` in closed form (depth sticks).
- :func:`kl_normal`: ``KL(N(m1, s1^2) || N(m2, s2^2))`` in closed form (mean-field weights).
- :func:`kl_relaxed_bernoulli_mc`: Monte Carlo KL between two relaxed-Bernoulli
  (binary Concrete) masks, computed in logit space (no closed form exists).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import betaln, digamma

from jaxcore._util import check_finite, check_int, check_key, check_positive

from .distributions import _logit_relaxed_log_prob, _logit_relaxed_sample

__all__ = ["kl_beta", "kl_normal", "kl_relaxed_bernoulli_mc"]


def kl_beta(a1, b1, a2, b2):
    """Closed-form ``KL(Beta(a1, b1) || Beta(a2, b2))`` (elementwise, nats).

    ``KL = log B(a2, b2) - log B(a1, b1) + (a1 - a2) psi(a1) + (b1 - b2) psi(b1)
    + (a2 - a1 + b2 - b1) psi(a1 + b1)``.

    Args:
        a1, b1: concentrations of the first Beta (> 0), broadcastable arrays.
        a2, b2: concentrations of the second Beta (> 0).

    Returns:
        KL in nats, broadcast shape of the inputs, float.

    Raises:
        ValueError: a concrete concentration that is not finite and > 0.

    References:
        Standard result; e.g. Nalisnick & Smyth, "Stick-Breaking Variational
        Autoencoders", ICLR 2017, appendix (Beta KL).

    Examples:
        >>> kl_beta(2.0, 1.0, 2.0, 1.0)
        Array(0., dtype=float32)
        >>> float(kl_beta(2.0, 1.0, 1.0, 1.0))  # KL(Beta(2, 1) || U(0, 1)) = log 2 - 1/2
        0.193...
    """
    for name, v in (("a1", a1), ("b1", b1), ("a2", a2), ("b2", b2)):
        check_positive(v, name)
    return _kl_beta_jit(*(jnp.asarray(v, jnp.result_type(v, float)) for v in (a1, b1, a2, b2)))


def _kl_beta(a1, b1, a2, b2):
    a1, b1, a2, b2 = (jnp.asarray(v, jnp.result_type(v, float)) for v in (a1, b1, a2, b2))
    return (
        betaln(a2, b2)
        - betaln(a1, b1)
        + (a1 - a2) * digamma(a1)
        + (b1 - b2) * digamma(b1)
        + (a2 - a1 + b2 - b1) * digamma(a1 + b1)
    )


_kl_beta_jit = jax.jit(_kl_beta)


def kl_normal(loc1, scale1, loc2, scale2):
    """Closed-form ``KL(N(loc1, scale1^2) || N(loc2, scale2^2))`` (elementwise, nats).

    ``KL = log(s2 / s1) + (s1^2 + (m1 - m2)^2) / (2 s2^2) - 1/2``.

    Args:
        loc1, scale1: mean and standard deviation (> 0) of the first Gaussian.
        loc2, scale2: of the second Gaussian; all broadcastable.

    Returns:
        KL in nats, broadcast shape, float.

    Raises:
        ValueError: a concrete scale that is not finite and > 0.

    References:
        Nguyen, Li, Bui & Turner, "Variational Continual Learning", ICLR 2018, eq. (4).

    Examples:
        >>> float(kl_normal(0.0, 1.0, 1.0, 1.0))  # (m1 - m2)^2 / 2
        0.5
    """
    check_positive(scale1, "scale1")
    check_positive(scale2, "scale2")
    return _kl_normal_jit(*(jnp.asarray(v, jnp.result_type(v, float)) for v in (loc1, scale1, loc2, scale2)))


def _kl_normal(loc1, scale1, loc2, scale2):
    ratio = jnp.square(scale1 / scale2)
    return 0.5 * (ratio + jnp.square((loc1 - loc2) / scale2) - 1.0 - jnp.log(ratio))


_kl_normal_jit = jax.jit(_kl_normal)


def kl_relaxed_bernoulli_mc(key, q_logits, p_logits, temperature, prior_temperature=None, num_samples: int = 1):
    """Monte Carlo ``KL(q || p)`` between relaxed-Bernoulli masks, evaluated in logit space.

    ``KL = E_{y ~ q}[log q(y) - log p(y)]`` with ``q = LogitRelaxedBernoulli(tau_q, l_q)``,
    ``p = LogitRelaxedBernoulli(tau_p, l_p)``; the KL is invariant to the
    bijection ``z = sigmoid(y)``, and logit-space densities are finite for any
    temperature and logit. The estimate is unbiased and reparameterised
    (differentiable in ``q_logits``).

    Args:
        key: PRNG key.
        q_logits: posterior logits, ``[...]``.
        p_logits: prior logits, broadcastable with ``q_logits``.
        temperature: posterior temperature ``tau_q > 0``.
        prior_temperature: ``tau_p > 0``; defaults to ``temperature``.
        num_samples: Monte Carlo samples averaged (static int >= 1).

    Returns:
        Per-element KL estimate in nats, broadcast shape of the logits.

    Raises:
        ValueError: invalid temperatures, non-finite logits or ``num_samples``.
        TypeError: ``key`` is not a PRNG key, ``num_samples`` not an int.

    References:
        Maddison, Mnih & Teh, "The Concrete Distribution", ICLR 2017, Sec. 5 / appendix C
        (relaxed KL estimated by sampling); Thapa & Li, ICML 2024, Sec. 3.3.

    Examples:
        >>> import jax
        >>> kl = kl_relaxed_bernoulli_mc(jax.random.key(0), 1.0, -1.0, 0.2, num_samples=64)
        >>> kl.shape, bool(kl > 0)
        ((), True)
    """
    check_key(key)
    num_samples = check_int(num_samples, "num_samples", 1)
    check_positive(temperature, "temperature")
    prior_temperature = temperature if prior_temperature is None else prior_temperature
    check_positive(prior_temperature, "prior_temperature")
    check_finite(q_logits, "q_logits")
    check_finite(p_logits, "p_logits")
    args = (jnp.asarray(v, jnp.result_type(v, float)) for v in (q_logits, p_logits, temperature, prior_temperature))
    return _kl_relaxed_mc_jit(key, *args, num_samples)


def _kl_relaxed_mc(key, q_logits, p_logits, temperature, prior_temperature, num_samples):
    tq, lq = jnp.broadcast_arrays(temperature, q_logits)
    tp, lp = jnp.broadcast_arrays(prior_temperature, p_logits)
    shape = (num_samples,) + tq.shape  # q's batch shape (the draws are q's)
    y = _logit_relaxed_sample(key, lq, tq, shape)
    return jnp.mean(_logit_relaxed_log_prob(y, lq, tq) - _logit_relaxed_log_prob(y, lp, tp), axis=0)


_kl_relaxed_mc_jit = jax.jit(_kl_relaxed_mc, static_argnames="num_samples")


def _kl_relaxed_from_noise(noise, q_logits, p_logits, temperature, prior_temperature):
    """Single-sample KL given logistic ``noise`` (used by the model to share noise with the mask)."""
    y = (q_logits + noise) / temperature
    tq = q_logits - temperature * y
    tp = p_logits - prior_temperature * y
    log_q = jnp.log(temperature) + tq - 2.0 * jax.nn.softplus(tq)
    log_p = jnp.log(prior_temperature) + tp - 2.0 * jax.nn.softplus(tp)
    return log_q - log_p
