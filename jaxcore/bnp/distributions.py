"""Bernoulli-process masks and their binary Concrete relaxation as numpyro distribution classes.

- :class:`BernoulliProcessMask` (and :func:`bernoulli_process_logits`): Bernoulli-process drop-connect masks
  ``z ~ Bernoulli(sigmoid(logit(pi_l) + gamma))``.
- :class:`LogitRelaxedBernoulli` and :class:`RelaxedBernoulli`: the binary Concrete distribution, with
  log-densities computed in logit space so they stay finite at low temperatures and extreme logits.

The beta and Indian buffet processes are in :mod:`jaxcore.bnp.processes`, the reparameterised Gamma draws in
:mod:`jaxcore.bnp.sampling`. All classes are ``numpyro.distributions.Distribution`` subclasses and can be used
inside numpyro models.

References:
    Maddison, Mnih & Teh, "The Concrete distribution", ICLR 2017. Jang, Gu & Poole, "Categorical
    reparameterization with Gumbel-softmax", ICLR 2017.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from numpyro.distributions import Distribution, constraints
from numpyro.distributions.util import promote_shapes

from jaxcore._util import check_key, checked_range

from ._checks import broadcast_args, finite_arg, positive_arg

__all__ = [
    "BernoulliProcessMask",
    "LogitRelaxedBernoulli",
    "RelaxedBernoulli",
    "bernoulli_process_logits",
]


def bernoulli_process_logits(log_pi, gamma):
    """Mask logits ``logit(pi_l) + gamma`` computed from ``log pi_l`` without cancellation.

    ``logit(pi) = log pi - log(1 - pi) = log pi - log1p(-exp(log pi))``.

    Args:
        log_pi: log activation probability of each layer, ``[..., L]``, finite and <= 0
            (``pi = 0`` exactly, ``log_pi = -inf``, is refused: its logit is ``-inf`` and the
            mask's log-mass ``z l - softplus(l)`` would be NaN at ``z = 0``; pass a large
            negative value instead). Integer or bool input is converted explicitly to the
            default float dtype (exact for ``|log_pi| < 2**24`` in float32).
        gamma: per-weight logit offsets, broadcastable against ``log_pi``
            expanded to the weight shape by the caller; ints converted as ``log_pi``.

    Returns:
        logits, broadcast shape of the inputs, float.

    Raises:
        ValueError: a ``log_pi`` that is NaN, infinite or > 0, a ``gamma`` that is NaN or inf
            (host check when concrete, ``equinox.error_if`` when traced), shapes that do not broadcast.
        TypeError: ``log_pi`` or ``gamma`` not real numeric data (None, strings).

    References:
        Thapa & Li, "Bayesian Adaptation of Network Depth and Width for
        Continual Learning", ICML 2024, Sec. 3 (width as a Bernoulli process).

    Examples:
        >>> import jax.numpy as jnp
        >>> bernoulli_process_logits(jnp.log(jnp.array([0.5, 0.8])), 0.0)
        Array([0.       , 1.386...], dtype=float32)
    """
    log_pi = finite_arg(log_pi, "log_pi")  # ints/bools -> the default float (explicit conversion)
    log_pi = checked_range(log_pi, "log_pi", None, 0.0)  # a log probability
    gamma = finite_arg(gamma, "gamma")
    broadcast_args((("log_pi", log_pi), ("gamma", gamma)))
    return _bernoulli_process_logits_jit(log_pi, gamma)


def _bernoulli_process_logits(log_pi, gamma):
    log_pi = jnp.minimum(log_pi, -jnp.finfo(jnp.result_type(log_pi)).eps)
    return log_pi - jnp.log(-jnp.expm1(log_pi)) + gamma


_bernoulli_process_logits_jit = jax.jit(_bernoulli_process_logits)


class BernoulliProcessMask(Distribution):
    """Bernoulli-process drop-connect masks ``z ~ Bernoulli(sigmoid(logit(pi) + gamma))``.

    ``pi`` is the activation probability of the layer the weights belong to
    (a stick-breaking weight), ``gamma`` a per-weight logit offset learned by
    the variational posterior. The log-mass is ``z * l - softplus(l)`` with
    ``l = logit(pi) + gamma`` (finite for all real ``l``).

    Args:
        log_pi: ``log pi`` of the layer, broadcastable against ``gamma`` (<= 0).
        gamma: per-weight offsets ``[..., out, in]`` (any real).

    Raises:
        ValueError: a concrete ``log_pi`` that is NaN or > 0.

    References:
        Thapa & Li, "Bayesian Adaptation of Network Depth and Width for
        Continual Learning", ICML 2024, Sec. 3 (width as a Bernoulli process).

    Examples:
        >>> import jax.numpy as jnp
        >>> d = BernoulliProcessMask(jnp.log(0.5), jnp.array([-1.0, 0.0, 2.0]))
        >>> d.hard()
        Array([False, False,  True], dtype=bool)
        >>> d.log_prob(jnp.array([0, 1, 1]))
        Array([-0.313..., -0.693..., -0.126...], dtype=float32)
    """

    arg_constraints = {"logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = False

    def __init__(self, log_pi, gamma=0.0, *, validate_args=None):
        self.logits = bernoulli_process_logits(log_pi, gamma)
        super().__init__(batch_shape=jnp.shape(self.logits), validate_args=validate_args)

    @property
    def probs(self):
        return jax.nn.sigmoid(self.logits)

    @property
    def mean(self):
        return self.probs

    def sample(self, key, sample_shape=()):
        """Bool masks ``[*sample_shape, *batch_shape]``."""
        check_key(key)
        return _bernoulli_sample_jit(key, self.logits, tuple(sample_shape) + self.batch_shape)

    def log_prob(self, value):
        """``z l - softplus(l)`` (nats)."""
        return _bernoulli_log_prob_jit(jnp.asarray(value, self.logits.dtype), self.logits)

    def hard(self):
        """The deterministic test-time mask ``1[logit(pi) + gamma > 0]`` (the mode)."""
        return self.logits > 0


class LogitRelaxedBernoulli(Distribution):
    """Binary Concrete in logit space: ``y = (logits + L) / temperature``, ``L ~ Logistic(0, 1)``.

    ``sigmoid(y)`` is the relaxed Bernoulli mask. The density of ``y`` is::

        log p(y) = log tau + l - tau y - 2 softplus(l - tau y),

    finite for every real ``y``, ``l`` and ``tau > 0`` (no ``log`` of a
    saturated sigmoid). KL divergences between relaxed masks are invariant to
    the bijection ``sigmoid``, so Monte Carlo KLs can use this density.

    Args:
        temperature: ``tau > 0`` (scalar or batch).
        logits: ``l``, any real, broadcastable with ``temperature``.

    Raises:
        ValueError: non-positive or non-finite temperature.

    References:
        Maddison, Mnih & Teh, "The Concrete Distribution", ICLR 2017, eq. (26);
        Jang, Gu & Poole, "Categorical Reparameterization with Gumbel-Softmax", ICLR 2017.

    Examples:
        >>> import jax
        >>> d = LogitRelaxedBernoulli(0.2, 1.0)
        >>> y = d.sample(jax.random.key(0), (3,))
        >>> y.shape, bool(jax.numpy.isfinite(d.log_prob(y)).all())
        ((3,), True)
    """

    arg_constraints = {"temperature": constraints.positive, "logits": constraints.real}
    support = constraints.real
    reparametrized_params = ["temperature", "logits"]

    def __init__(self, temperature, logits, *, validate_args=None):
        temperature = positive_arg(temperature, "temperature")
        logits = finite_arg(logits, "logits")  # (use a large finite value for near-certain masks)
        broadcast_args((("temperature", temperature), ("logits", logits)))
        self.temperature, self.logits = promote_shapes(temperature, logits)
        super().__init__(
            batch_shape=jnp.broadcast_shapes(jnp.shape(self.temperature), jnp.shape(self.logits)),
            validate_args=validate_args,
        )

    def sample(self, key, sample_shape=()):
        """Logit-space draws ``y`` ``[*sample_shape, *batch_shape]``, reparameterised in the logits."""
        check_key(key)
        return _logit_relaxed_sample_jit(key, self.logits, self.temperature, tuple(sample_shape) + self.batch_shape)

    def log_prob(self, value):
        """``log p(y)`` (nats), finite for every real ``y``."""
        return _logit_relaxed_log_prob_jit(value, self.logits, self.temperature)


class RelaxedBernoulli(Distribution):
    """Relaxed Bernoulli (binary Concrete) on [0, 1] with a log-density that never overflows.

    ``z = sigmoid(y)``, ``y ~`` :class:`LogitRelaxedBernoulli` ``(tau, l)``; the
    density is evaluated in logit space::

        log p(z) = log p_Y(y) + softplus(y) + softplus(-y),   y = logit(z),

    using ``log z = -softplus(-y)``, ``log(1 - z) = -softplus(y)``. ``z`` is
    clipped to ``[tiny, 1 - eps/2]`` before ``logit`` so that a float32 sample
    saturated to exactly 0 or 1 (frequent at ``tau <= 0.3`` with large logits)
    still has a finite log-density. Where the logit-space sample is at hand,
    prefer :meth:`log_prob_logit` (exact, no clipping).

    Args:
        temperature: ``tau > 0``.
        logits: any finite real, broadcastable with ``temperature``.

    Raises:
        ValueError: non-positive temperature or non-finite logits.

    References:
        Maddison, Mnih & Teh, "The Concrete Distribution", ICLR 2017, eq. (26).

    Examples:
        >>> import jax.numpy as jnp
        >>> d = RelaxedBernoulli(0.1, 0.0)
        >>> bool(jnp.isfinite(d.log_prob(jnp.array([0.0, 0.5, 1.0]))).all())
        True
    """

    arg_constraints = {"temperature": constraints.positive, "logits": constraints.real}
    support = constraints.unit_interval
    reparametrized_params = ["temperature", "logits"]

    def __init__(self, temperature, logits, *, validate_args=None):
        self.base = LogitRelaxedBernoulli(temperature, logits)
        self.temperature, self.logits = self.base.temperature, self.base.logits
        super().__init__(batch_shape=self.base.batch_shape, validate_args=validate_args)

    @property
    def probs(self):
        return jax.nn.sigmoid(self.logits)

    def sample_logit(self, key, sample_shape=()):
        """The logit-space sample ``y`` (``z = sigmoid(y)``)."""
        return self.base.sample(key, sample_shape)

    def sample(self, key, sample_shape=()):
        return jax.nn.sigmoid(self.sample_logit(key, sample_shape))

    def log_prob_logit(self, y):
        """``log p(z)`` at ``z = sigmoid(y)`` given the logit ``y`` (exact)."""
        return _relaxed_log_prob_logit_jit(y, self.logits, self.temperature)

    def log_prob(self, value):
        """``log p(z)`` (nats) for ``z`` in ``[0, 1]`` (clipped to ``[tiny, 1 - eps/2]``)."""
        return _relaxed_log_prob_jit(value, self.logits, self.temperature)


def _bernoulli_sample(key, logits, shape):
    return jax.random.bernoulli(key, jax.nn.sigmoid(logits), shape)


def _bernoulli_log_prob(value, logits):
    return value * logits - jax.nn.softplus(logits)


def _logit_relaxed_sample(key, logits, temperature, shape):
    dtype = jnp.result_type(logits, float)
    u = jax.random.uniform(key, shape, dtype, minval=jnp.finfo(dtype).tiny, maxval=1.0)
    noise = jnp.log(u) - jnp.log1p(-u)
    return (logits + noise) / temperature


def _logit_relaxed_log_prob(value, logits, temperature):
    t = logits - temperature * value
    return jnp.log(temperature) + t - 2.0 * jax.nn.softplus(t)


def _relaxed_log_prob_logit(y, logits, temperature):
    return _logit_relaxed_log_prob(y, logits, temperature) + jax.nn.softplus(y) + jax.nn.softplus(-y)


def _relaxed_log_prob(value, logits, temperature):
    dtype = jnp.result_type(value, float)
    finfo = jnp.finfo(dtype)
    z = jnp.clip(value, finfo.tiny, 1.0 - finfo.epsneg)
    y = jnp.log(z) - jnp.log1p(-z)
    return _relaxed_log_prob_logit(y, logits, temperature)


_bernoulli_sample_jit = jax.jit(_bernoulli_sample, static_argnames="shape")
_bernoulli_log_prob_jit = jax.jit(_bernoulli_log_prob)
_logit_relaxed_sample_jit = jax.jit(_logit_relaxed_sample, static_argnames="shape")
_logit_relaxed_log_prob_jit = jax.jit(_logit_relaxed_log_prob)
_relaxed_log_prob_logit_jit = jax.jit(_relaxed_log_prob_logit)
_relaxed_log_prob_jit = jax.jit(_relaxed_log_prob)
