"""KL divergences of the structure-adaptive variational posterior.

- :func:`kl_beta`: ``KL(Beta(a1, b1) || Beta(a2, b2))`` in closed form (depth sticks).
- :func:`kl_normal`: ``KL(N(m1, s1^2) || N(m2, s2^2))`` in closed form (mean-field weights).
- :func:`kl_relaxed_bernoulli_mc`: Monte Carlo KL between two relaxed-Bernoulli
  (binary Concrete) masks, computed in logit space (no closed form exists).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betaln, digamma, gammaln

from jaxcore._util import check_finite, check_int, check_key, check_positive

from ._checks import broadcast_args, compute_dtype, finite_arg, positive_arg, positive_args
from .distributions import _logit_relaxed_log_prob, _logit_relaxed_sample

__all__ = ["kl_beta", "kl_normal", "kl_relaxed_bernoulli_mc"]


def kl_beta(a1, b1, a2, b2):
    """Closed-form ``KL(Beta(a1, b1) || Beta(a2, b2))`` (elementwise, nats), stable in float32.

    ``KL = log B(a2, b2) - log B(a1, b1) + (a1 - a2) psi(a1) + (b1 - b2) psi(b1)
    + (a2 - a1 + b2 - b1) psi(a1 + b1)``, evaluated in a form where the large terms cancel
    analytically: with Stirling's remainder ``R(x) = log Gamma(x) - (x - 1/2) log x + x - log(2 pi) / 2``,
    ``D(x) = log x - psi(x)``, ``c = a + b`` and ``g(r) = r - 1 - log r >= 0``,

    ``KL = a2 g(p1 / p2) + b2 g(q1 / q2) + (log a1 + log b1 - log c1 - log a2 - log b2 + log c2) / 2
    + (a2 - a1) (D(a1) - D(c1)) + (b2 - b1) (D(b1) - D(c1))
    + R(a2) + R(b2) - R(c2) - R(a1) - R(b1) + R(c1)``, ``p = a / c``, ``q = b / c``,

    with ``R`` and ``D`` from their asymptotic series for ``x >= 10``. The textbook form loses
    every digit in float32 once the concentrations reach about 1e5 (``kl_beta(1e6, 1e6, 1, 1)`` was
    8.0 for 6.53, and negative at 1e30); this one keeps about 1e-5 absolute accuracy from 1e-30 to
    1e30. Rounding below zero is returned as 0 (a KL is never negative); a KL beyond the dtype's
    range is ``inf``.

    Args:
        a1, b1: concentrations of the first Beta (> 0), broadcastable arrays.
        a2, b2: concentrations of the second Beta (> 0).

    Returns:
        KL in nats, broadcast shape of the inputs, float: the inputs' float dtype (integers become
        the default float; float16/bfloat16 are computed in float32 and cast back).

    Raises:
        ValueError: a concentration that is not finite and > 0 (concrete values on the host; traced
            values at run time through ``equinox.error_if``).
        TypeError: a concentration that is not real numeric data (None, strings, complex).

    References:
        Standard result; e.g. Nalisnick & Smyth, "Stick-Breaking Variational
        Autoencoders", ICLR 2017, appendix (Beta KL); Abramowitz & Stegun 6.1.40, 6.3.18
        (the asymptotic series of log Gamma and psi).

    Examples:
        >>> kl_beta(2.0, 1.0, 2.0, 1.0)
        Array(0., dtype=float32)
        >>> float(kl_beta(2.0, 1.0, 1.0, 1.0))  # KL(Beta(2, 1) || U(0, 1)) = log 2 - 1/2
        0.193...
        >>> round(float(kl_beta(1e6, 1e6, 1.0, 1.0)), 3)  # float64's value 6.529
        6.529
    """
    args = positive_args((("a1", a1), ("b1", b1), ("a2", a2), ("b2", b2)))
    return _kl_beta_jit(*args)


def _kl_beta_textbook(a1, b1, a2, b2):
    """The textbook form (exact in float64 for moderate values; the oracle of the tests)."""
    return (
        betaln(a2, b2)
        - betaln(a1, b1)
        + (a1 - a2) * digamma(a1)
        + (b1 - b2) * digamma(b1)
        + (a2 - a1 + b2 - b1) * digamma(a1 + b1)
    )


_ASYMPTOTIC_FROM = 10.0
_HALF_LOG_2PI = 0.5 * float(np.log(2.0 * np.pi))


def _stirling_remainder(x):
    """``R(x) = log Gamma(x) - (x - 1/2) log x + x - log(2 pi) / 2`` (about ``1 / (12 x)``), no cancellation."""
    big = x >= _ASYMPTOTIC_FROM
    xs = jnp.where(big, x, _ASYMPTOTIC_FROM)  # both branches finite (gradients of jnp.where)
    xd = jnp.where(big, 1.0, x)
    t = 1.0 / jnp.square(xs)
    series = (1.0 / 12.0 + t * (-1.0 / 360.0 + t * (1.0 / 1260.0 + t * (-1.0 / 1680.0 + t * (
        1.0 / 1188.0 + t * (-691.0 / 360360.0)))))) / xs
    direct = gammaln(xd) - (xd - 0.5) * jnp.log(xd) + xd - _HALF_LOG_2PI
    return jnp.where(big, series, direct)


def _digamma_defect(x):
    """``(D(x), Q(x))`` with ``D(x) = log x - psi(x)`` and ``Q(x) = x D(x) - 1/2`` (bounded in ``[0, 1/2]``)."""
    big = x >= _ASYMPTOTIC_FROM
    xs = jnp.where(big, x, _ASYMPTOTIC_FROM)
    xd = jnp.where(big, 1.0, x)
    t = 1.0 / jnp.square(xs)
    # x P(x), P(x) = log x - 1/(2x) - psi(x) = sum_k B_2k / (2k x^2k)
    q_series = (1.0 / 12.0 + t * (-1.0 / 120.0 + t * (1.0 / 252.0 + t * (-1.0 / 240.0 + t * (
        1.0 / 132.0 + t * (-691.0 / 32760.0)))))) / xs
    d_direct = jnp.log(xd) - digamma(xd)
    q = jnp.where(big, q_series, xd * d_direct - 0.5)
    d = jnp.where(big, (0.5 + q_series) / xs, d_direct)
    return d, q


def _g_ratio(p, p0, log_p, log_p0):
    """``g(r) = r - 1 - log r >= 0`` at ``r = p / p0`` (a series near ``r = 1``; ``log r`` from the logs
    ``log_p - log_p0`` where ``p`` or ``p0`` underflowed)."""
    r = p / p0
    dlt = r - 1.0
    near = jnp.abs(dlt) < 1e-2
    ds = jnp.where(near, dlt, 0.0)
    series = jnp.square(ds) * (0.5 + ds * (-1.0 / 3.0 + ds * (0.25 + ds * (-0.2 + ds / 6.0))))
    tiny = jnp.finfo(r.dtype).tiny
    far = (p < tiny) | (p0 < tiny) | ~jnp.isfinite(r) | (r < tiny)
    rf = jnp.where(near | far, 2.0, r)
    lr = jnp.where(far, log_p - log_p0, 0.0)
    big = jnp.where(lr > 0, jnp.inf, -1.0 - lr)  # r - 1 - log r where r over- or underflowed
    direct = jnp.where(far, big, rf - 1.0 - jnp.log(rf))
    return jnp.maximum(jnp.where(near, series, direct), 0.0)


def _kl_beta(a1, b1, a2, b2):
    dtype, work = compute_dtype(a1, b1, a2, b2)
    a1, b1, a2, b2 = (jnp.asarray(v, work) for v in (a1, b1, a2, b2))
    c1, c2 = a1 + b1, a2 + b2
    # the barrier keeps XLA from folding (a1 / c1) / (a2 / c2) into (a1 c2) / (c1 a2), which overflows
    p1, q1, p2, q2 = jax.lax.optimization_barrier((a1 / c1, b1 / c1, a2 / c2, b2 / c2))
    la1, lb1, lc1, la2, lb2, lc2 = (jnp.log(v) for v in (a1, b1, c1, a2, b2, c2))
    mean_term = a2 * _g_ratio(p1, p2, la1 - lc1, la2 - lc2) + b2 * _g_ratio(q1, q2, lb1 - lc1, lb2 - lc2)
    half_log = 0.5 * ((la1 - la2) + (lb1 - lb2) - (lc1 - lc2))
    (da1, qa1), (db1, qb1), (dc1, qc1) = _digamma_defect(a1), _digamma_defect(b1), _digamma_defect(c1)
    # a1 (D(a1) - D(c1)) + b1 (D(b1) - D(c1)) - Q(a1) - Q(b1) + Q(c1) - 1/2 = 0 identically (x D(x) - Q(x) = 1/2)
    psi_term = (a2 - a1) * jnp.maximum(da1 - dc1, 0.0) + (b2 - b1) * jnp.maximum(db1 - dc1, 0.0)
    r = _stirling_remainder
    gamma_term = (r(a2) - r(a1)) + (r(b2) - r(b1)) - (r(c2) - r(c1))
    kl = mean_term + half_log + psi_term + gamma_term
    return jnp.maximum(kl, 0.0).astype(dtype)


_kl_beta_jit = jax.jit(_kl_beta)


def kl_normal(loc1, scale1, loc2, scale2):
    """Closed-form ``KL(N(loc1, scale1^2) || N(loc2, scale2^2))`` (elementwise, nats).

    ``KL = log(s2 / s1) + (s1^2 + (m1 - m2)^2) / (2 s2^2) - 1/2``.

    Args:
        loc1, scale1: mean and standard deviation (> 0) of the first Gaussian.
        loc2, scale2: of the second Gaussian; all broadcastable.

    Computed as ``(g(r^2) + ((m1 - m2) / s2)^2) / 2`` with ``r = s1 / s2`` and ``g(u) = u - 1 - log u >= 0``
    (a series near ``u = 1``, ``log r`` from the logs where ``r^2`` leaves the float range), so it is
    finite and never negative for scales from 1e-30 to 1e30 in float32.

    Returns:
        KL in nats, broadcast shape, float (the inputs' float dtype; integers become the default
        float; float16/bfloat16 are computed in float32 and cast back).

    Raises:
        ValueError: a scale that is not finite and > 0 or a location that is not finite (concrete
            values on the host; traced scales at run time through ``equinox.error_if``), or shapes
            that do not broadcast.
        TypeError: an argument that is not real numeric data (None, strings).

    References:
        Nguyen, Li, Bui & Turner, "Variational Continual Learning", ICLR 2018, eq. (4).

    Examples:
        >>> float(kl_normal(0.0, 1.0, 1.0, 1.0))  # (m1 - m2)^2 / 2
        0.5
    """
    args = (finite_arg(loc1, "loc1"), positive_arg(scale1, "scale1"), finite_arg(loc2, "loc2"),
            positive_arg(scale2, "scale2"))
    broadcast_args(tuple(zip(("loc1", "scale1", "loc2", "scale2"), args)))
    return _kl_normal_jit(*args)


def _kl_normal(loc1, scale1, loc2, scale2):
    dtype, work = compute_dtype(loc1, scale1, loc2, scale2)
    loc1, scale1, loc2, scale2 = (jnp.asarray(v, work) for v in (loc1, scale1, loc2, scale2))
    # 2 KL = g(r^2) + ((m1 - m2) / s2)^2, r = s1 / s2, g(u) = u - 1 - log u >= 0; log r from the logs
    # where r^2 under- or overflows (scales 1e-30 against 1e30)
    r = scale1 / scale2
    r2 = jnp.square(r)
    tiny = jnp.finfo(work).tiny
    far = ~(jnp.isfinite(r2) & (r2 >= tiny))
    rs = jnp.where(far, 1.0, r)
    dlt = jnp.where(far, 0.0, jnp.square(rs) - 1.0)
    near = jnp.abs(dlt) < 1e-2
    ds = jnp.where(near, dlt, 0.0)
    series = jnp.square(ds) * (0.5 + ds * (-1.0 / 3.0 + ds * (0.25 + ds * (-0.2 + ds / 6.0))))
    direct = jnp.square(rs) - 1.0 - 2.0 * jnp.log(jnp.where(near, 1.0, rs))
    lr = jnp.where(far, jnp.log(scale1) - jnp.log(scale2), 0.0)
    extreme = jnp.where(lr > 0, jnp.inf, -1.0 - 2.0 * lr)
    g = jnp.maximum(jnp.where(far, extreme, jnp.where(near, series, direct)), 0.0)
    return (0.5 * (g + jnp.square((loc1 - loc2) / scale2))).astype(dtype)


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
