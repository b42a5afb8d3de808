"""The beta process and the Indian buffet process as numpyro distribution classes.

- :class:`StickBreakingBetaProcess` (and :func:`stick_breaking_log_weights`): the truncated stick-breaking
  construction of the beta process, ``nu_k ~ Beta(a, b)``, ``pi_k = prod_{j<=k} nu_j``.
- :class:`IndianBuffetProcess` and :func:`ibp_sample`: the Indian buffet process with a fixed maximum number
  of features (padded, with a mask).

Both are ``numpyro.distributions.Distribution`` subclasses, usable inside numpyro models
(``numpyro.sample("pi", StickBreakingBetaProcess(...))``).

References:
    Teh, Gorur & Ghahramani, "Stick-breaking construction for the Indian buffet process", AISTATS 2007.
    Griffiths & Ghahramani, "The Indian buffet process: an introduction and review", JMLR 2011.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betaln, gammaln, xlog1py, xlogy
from numpyro.distributions import Distribution, constraints
from numpyro.distributions.util import validate_sample

from jaxcore._util import check_int, check_key, check_positive, check_range, expected

from ._checks import float_arg
from .sampling import _GAMMA_PROPOSALS, _gamma_from_uniforms, _uniform_open, gamma_rsample

__all__ = [
    "IndianBuffetProcess",
    "StickBreakingBetaProcess",
    "ibp_sample",
    "stick_breaking_log_weights",
]


def stick_breaking_log_weights(nu: jax.Array) -> jax.Array:
    """Log stick-breaking weights ``log pi_k = sum_{j<=k} log nu_j`` along the last axis.

    Computed as a cumulative sum of logs, so deep truncations do not underflow.

    Args:
        nu: stick proportions in (0, 1), ``[..., K]``.

    Returns:
        ``log pi``, ``[..., K]``, same dtype as ``nu`` (nats).

    Raises:
        ValueError: a concrete ``nu`` outside ``(0, 1]``.

    References:
        Teh, Gorur & Ghahramani, "Stick-breaking construction for the Indian
        buffet process", AISTATS 2007, eq. (6).

    Examples:
        >>> import jax.numpy as jnp
        >>> stick_breaking_log_weights(jnp.array([0.5, 0.5, 0.5]))
        Array([-0.693..., -1.386..., -2.079...], dtype=float32)
    """
    nu = float_arg(nu, "nu")
    if nu.ndim < 1:
        raise ValueError(expected("nu", "an array [..., K] with at least one axis", f"shape {nu.shape}", raw=True))
    check_range(nu, "nu", 0.0, 1.0, low_open=True)
    return _stick_breaking_log_weights_jit(nu)


def _stick_breaking_log_weights(nu):
    return jnp.cumsum(jnp.log(nu), axis=-1)


_stick_breaking_log_weights_jit = jax.jit(_stick_breaking_log_weights)


class StickBreakingBetaProcess(Distribution):
    """Truncated stick-breaking beta process: ``pi_k = prod_{j<=k} nu_j``, ``nu_j ~ Beta(a, b)``.

    The sample is the decreasing vector ``pi`` of activation probabilities of
    ``K`` atoms (here: the ``K`` hidden layers). Its density follows from the
    change of variables ``nu_k = pi_k / pi_{k-1}`` (Jacobian ``prod_{k>=2} 1/pi_{k-1}``)::

        log p(pi) = sum_k log Beta(pi_k / pi_{k-1}; a, b) - sum_{k<K} log pi_k,

    and ``E[pi_k] = (a / (a + b))^k``. The beta process with concentration
    ``alpha`` is ``a = alpha, b = 1``.

    Args:
        concentration1: ``a > 0``, scalar or ``[..., K]`` (per-atom values allowed).
        concentration0: ``b > 0``, broadcastable with ``concentration1``.
        truncation: ``K >= 1``, the number of atoms (static Python int).

    Sample:
        ``pi``, ``[*sample_shape, *batch_shape, K]``, float in (0, 1), non-increasing.

    Raises:
        ValueError: non-positive/non-finite concentrations, ``truncation < 1``.
        TypeError: ``truncation`` not an int.

    References:
        Teh, Gorur & Ghahramani, "Stick-breaking construction for the Indian
        buffet process", AISTATS 2007, eq. (6); Thapa & Li, "Bayesian Adaptation
        of Network Depth and Width for Continual Learning", ICML 2024, Sec. 3.

    Examples:
        >>> import jax
        >>> d = StickBreakingBetaProcess(2.0, 1.0, truncation=3)
        >>> d.mean
        Array([0.666..., 0.444..., 0.296...], dtype=float32)
        >>> pi = d.sample(jax.random.key(0), (4,))
        >>> pi.shape, d.log_prob(pi).shape
        ((4, 3), (4,))
    """

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.independent(constraints.unit_interval, 1)
    reparametrized_params = ["concentration1", "concentration0"]
    pytree_aux_fields = ("truncation",)

    def __init__(self, concentration1, concentration0=1.0, truncation: int = 10, *, validate_args=None):
        truncation = check_int(truncation, "truncation", 1)
        check_positive(concentration1, "concentration1")
        check_positive(concentration0, "concentration0")
        a = jnp.asarray(concentration1)
        b = jnp.asarray(concentration0)
        try:
            shape = jnp.broadcast_shapes(jnp.shape(a), jnp.shape(b), (truncation,))
        except ValueError:
            shape = None
        if shape is None or shape[-1] != truncation:
            raise ValueError(expected(
                "concentration1/concentration0", f"a last axis of length 1 or truncation={truncation}",
                f"shapes {jnp.shape(a)} and {jnp.shape(b)}", raw=True))
        self.concentration1 = jnp.broadcast_to(a, shape).astype(jnp.result_type(float))
        self.concentration0 = jnp.broadcast_to(b, shape).astype(jnp.result_type(float))
        self.truncation = truncation
        super().__init__(batch_shape=shape[:-1], event_shape=(truncation,), validate_args=validate_args)

    @property
    def mean(self):
        """``E[pi_k] = prod_{j<=k} a_j / (a_j + b_j)`` (the nu_j are independent)."""
        return jnp.cumprod(self.concentration1 / (self.concentration1 + self.concentration0), axis=-1)

    def sample_sticks(self, key, sample_shape=()):
        """Draw the stick proportions ``nu``, reparameterised (differentiable in ``a``, ``b``).

        When every ``b = 1`` (the beta process proper) the draw is the exact
        inverse CDF ``nu = U^(1/a)`` (one uniform per stick); otherwise
        ``nu = G_a / (G_a + G_b)`` with :func:`gamma_rsample` draws (implicit
        reparameterisation gradients). The branch is a ``lax.cond`` on the values.
        Returns ``[*sample_shape, *batch_shape, K]``.
        """
        check_key(key)
        shape = tuple(sample_shape) + self.batch_shape + self.event_shape
        return _sample_sticks_jit(key, self.concentration1, self.concentration0, shape)

    def sample(self, key, sample_shape=()):
        """``pi`` draws ``[*sample_shape, *batch_shape, K]`` (reparameterised, see :meth:`sample_sticks`)."""
        check_key(key)
        shape = tuple(sample_shape) + self.batch_shape + self.event_shape
        return _sample_pi_jit(key, self.concentration1, self.concentration0, shape)

    @validate_sample
    def log_prob(self, value):
        """``log p(pi)`` (nats), ``[*sample_shape, *batch_shape]``.

        ``value`` ``[..., K]`` in ``[0, 1]`` (a concrete value outside is a ValueError; NaN too).
        The Beta terms use ``xlogy`` / ``xlog1py``, so ``nu = 1`` with ``b = 1`` and ``nu = 0`` with
        ``a = 1`` are finite.
        """
        value = float_arg(value, "value")
        if jnp.ndim(value) < 1 or jnp.shape(value)[-1] != self.truncation:
            raise ValueError(expected("value", f"shape [..., {self.truncation}] (truncation)",
                                      f"shape {jnp.shape(value)}", raw=True))
        check_range(value, "value", 0.0, 1.0)
        return _stick_log_prob_jit(value, self.concentration1, self.concentration0)


def _sample_sticks(key, a, b, shape):
    a = jnp.broadcast_to(a, shape)
    b = jnp.broadcast_to(b, shape)
    tiny = jnp.finfo(a.dtype).tiny
    eps = jnp.finfo(a.dtype).eps

    def inverse_cdf(key):
        u = _uniform_open(key, shape, a.dtype)
        return jnp.exp(jnp.log(u) / a)

    def via_gamma(key):
        u = _uniform_open(key, (2, 2 * _GAMMA_PROPOSALS + 1) + shape, a.dtype)  # one generator call
        g1 = _gamma_from_uniforms(a, u[0])
        g0 = _gamma_from_uniforms(b, u[1])
        return g1 / jnp.maximum(g1 + g0, tiny)

    nu = jax.lax.cond(jnp.all(b == 1.0), inverse_cdf, via_gamma, key)
    return jnp.clip(nu, tiny, 1.0 - eps)


def _stick_log_prob(value, a, b):
    log_pi = jnp.log(value)
    prev = jnp.concatenate([jnp.zeros_like(log_pi[..., :1]), log_pi[..., :-1]], axis=-1)
    log_nu = log_pi - prev
    nu = jnp.exp(log_nu)
    # xlogy / xlog1py: a = 1 at nu = 0 and b = 1 at nu = 1 give 0 * log 0 = 0 (the density is finite there)
    lp = xlogy(a - 1, nu) + xlog1py(b - 1, -nu) - betaln(a, b)
    return jnp.sum(lp, axis=-1) - jnp.sum(prev, axis=-1)


_sample_sticks_jit = jax.jit(_sample_sticks, static_argnames="shape")
_sample_pi_jit = jax.jit(lambda key, a, b, shape: jnp.exp(_stick_breaking_log_weights(_sample_sticks(key, a, b, shape))),
                         static_argnames="shape")
_stick_log_prob_jit = jax.jit(_stick_log_prob)


def _poisson_inverse_cdf(u, rate, max_count: int):
    """Smallest k in [0, max_count] with CDF(k) >= u, for Poisson(rate); clipped at max_count."""
    ks = jnp.arange(max_count + 1, dtype=rate.dtype)
    log_pmf = ks * jnp.log(rate) - rate - gammaln(ks + 1)
    cdf = jnp.cumsum(jnp.exp(log_pmf))
    return jnp.sum(u > cdf[:-1]).astype(jnp.int32)


def ibp_sample(key: jax.Array, alpha, num_customers: int, max_features: int):
    """One draw of the Indian buffet process, truncated at ``max_features`` dishes.

    Customer ``i`` (1-based) takes each dish ``k`` already tasted ``m_k`` times
    with probability ``m_k / i``, then ``Poisson(alpha / i)`` new dishes. Dishes
    are columns in order of first tasting; columns past ``max_features`` are
    dropped and counted in ``overflow``. A ``lax.scan`` over customers.

    Args:
        key: PRNG key.
        alpha: mass parameter ``alpha > 0``, scalar float.
        num_customers: ``N`` (static int >= 1).
        max_features: ``F`` (static int >= 1), the padded width.

    Returns:
        ``(Z, num_features, overflow)``: ``Z`` ``[N, F]`` bool (columns
        ``>= num_features`` are all False padding); ``num_features`` int32, the
        number of non-empty columns ``K+`` (``<= F``); ``overflow`` int32, dishes
        that did not fit (0 unless ``F`` is too small; ``E[K+] = alpha * H_N``).

    Raises:
        ValueError / TypeError: invalid ``alpha``, ``num_customers``, ``max_features`` or ``key``.

    References:
        Griffiths & Ghahramani, "Infinite latent feature models and the Indian
        buffet process", NeurIPS 2005, Sec. 4 (the culinary metaphor, eq. 14).

    Examples:
        >>> import jax
        >>> z, num_features, overflow = ibp_sample(jax.random.key(0), 2.0, 5, 16)
        >>> z.shape, z.dtype, int(overflow)
        ((5, 16), dtype('bool'), 0)
    """
    check_key(key)
    num_customers = check_int(num_customers, "num_customers", 1)
    max_features = check_int(max_features, "max_features", 1)
    check_positive(alpha, "alpha")
    return _ibp_sample_jit(key, jnp.asarray(alpha, jnp.result_type(float)), num_customers, max_features)


def _ibp_sample(key, alpha, num_customers: int, max_features: int):
    u = jax.random.uniform(key, (num_customers, max_features + 1), alpha.dtype)  # one generator call
    return _ibp_from_uniforms(u[:, :-1], u[:, -1], alpha, max_features)


_ibp_sample_jit = jax.jit(_ibp_sample, static_argnames=("num_customers", "max_features"))


def _ibp_from_uniforms(u_old, u_new, alpha, max_features: int):
    cols = jnp.arange(max_features)

    def step(carry, inp):
        counts, k_plus, overflow = carry
        i, u_row, n_new = inp
        existing = (cols < k_plus) & (u_row * i < counts)
        fresh = (cols >= k_plus) & (cols < k_plus + n_new)
        row = existing | fresh
        new_k = jnp.minimum(k_plus + n_new, max_features)
        overflow = overflow + jnp.maximum(k_plus + n_new - max_features, 0)
        return (counts + row, new_k, overflow), row

    n = u_old.shape[0]
    init = (jnp.zeros(max_features, u_old.dtype), jnp.int32(0), jnp.int32(0))
    idx = jnp.arange(1, n + 1, dtype=u_old.dtype)
    # new dishes of every customer at once (their rates alpha / i are known up front); the scan only
    # carries the dish counts
    n_new = jax.vmap(lambda u, i: _poisson_inverse_cdf(u, alpha / i, max_features))(u_new, idx)
    (_, k_plus, overflow), z = jax.lax.scan(step, init, (idx, u_old, n_new))
    return z, k_plus, overflow


class IndianBuffetProcess(Distribution):
    """The Indian buffet process over binary matrices ``[N, F]`` (padded to ``F`` columns).

    The density is that of the sequential (culinary) process for the matrix with
    columns in order of first tasting (the form :func:`ibp_sample` produces)::

        log P(Z) = K+ log alpha - alpha H_N - sum_i log K1^(i)!
                   + sum_{k<=K+} [log (N - m_k)! + log (m_k - 1)! - log N!],

    where ``K1^(i)`` is the number of dishes first tasted by customer ``i`` and
    ``m_k`` the column sums. Matrices not in that order (a non-empty column after
    an empty one, or columns not sorted by first row) get ``-inf``. Mass beyond
    ``F`` columns is lost (``P(K+ > F)``; choose ``F`` well above ``alpha H_N``).

    Args:
        alpha: mass ``alpha > 0`` (scalar or batch).
        num_customers: ``N`` (static int).
        max_features: ``F`` (static int), the padded number of columns.

    Raises:
        ValueError / TypeError: invalid arguments.

    References:
        Griffiths & Ghahramani, "Infinite latent feature models and the Indian
        buffet process", NeurIPS 2005, eq. (14) and Sec. 4.

    Examples:
        >>> import numpy as np
        >>> d = IndianBuffetProcess(1.5, num_customers=2, max_features=3)
        >>> round(float(d.mean_num_features), 4)   # alpha * H_2
        2.25
        >>> z = np.array([[1, 1, 0], [0, 1, 0]], bool)  # customer 1: two dishes; customer 2: the second
        >>> float(d.log_prob(z))  # 2 log 1.5 - 1.5 H_2 - log 2! + log(1! 0! / 2!) + log(0! 1! / 2!)
        -3.518...
    """

    arg_constraints = {"alpha": constraints.positive}
    support = constraints.independent(constraints.boolean, 2)
    pytree_aux_fields = ("num_customers", "max_features")

    def __init__(self, alpha, num_customers: int, max_features: int, *, validate_args=None):
        self.num_customers = check_int(num_customers, "num_customers", 1)
        self.max_features = check_int(max_features, "max_features", 1)
        check_positive(alpha, "alpha")
        self.alpha = jnp.asarray(alpha, jnp.result_type(float))
        super().__init__(
            batch_shape=jnp.shape(self.alpha),
            event_shape=(self.num_customers, self.max_features),
            validate_args=validate_args,
        )

    @property
    def harmonic_number(self):
        return float(np.sum(1.0 / np.arange(1, self.num_customers + 1)))

    @property
    def mean_num_features(self):
        """``E[K+] = alpha * H_N`` (before truncation at ``F``)."""
        return self.alpha * self.harmonic_number

    def sample(self, key, sample_shape=()):
        """Binary matrices ``[*sample_shape, *batch_shape, N, F]`` (:func:`ibp_sample` per draw)."""
        check_key(key)
        shape = tuple(sample_shape) + self.batch_shape
        return _ibp_dist_sample_jit(key, self.alpha, shape, self.num_customers, self.max_features)

    def log_prob(self, value):
        """``log P(Z)`` (nats) of left-ordered matrices; ``-inf`` for matrices not in that order."""
        return _ibp_log_prob_jit(jnp.asarray(value), self.alpha, self.num_customers, self.harmonic_number)


def _ibp_dist_sample(key, alpha, shape, num_customers, max_features):
    n = int(np.prod(shape)) if shape else 1
    keys = jax.random.split(key, n)
    alphas = jnp.broadcast_to(alpha, shape).reshape(n)
    u = jax.vmap(lambda k: jax.random.uniform(k, (num_customers, max_features + 1), alphas.dtype))(keys)
    f = lambda u, a: _ibp_from_uniforms(u[:, :-1], u[:, -1], a, max_features)[0]  # noqa: E731
    z = jax.vmap(f)(u, alphas)
    return z.reshape(shape + (num_customers, max_features))


def _ibp_log_prob(value, alpha, n, h_n):
    z = value.astype(bool)
    m = jnp.sum(z, axis=-2)  # column sums [..., F]
    nonempty = m > 0
    k_plus = jnp.sum(nonempty, axis=-1)
    # first row of each column (n if empty)
    rows = jnp.arange(n)[:, None]
    first = jnp.min(jnp.where(z, rows, n), axis=-2)
    # valid order: non-empty columns first, and first-tasting rows non-decreasing
    prefix_ok = jnp.all(nonempty[..., 1:] <= nonempty[..., :-1], axis=-1)
    sorted_ok = jnp.all((first[..., 1:] >= first[..., :-1]) | ~nonempty[..., 1:], axis=-1)
    k1 = jnp.sum(jax.nn.one_hot(first, n + 1, dtype=jnp.int32)[..., :n], axis=-2)  # new dishes per customer
    dtype = alpha.dtype
    mf = m.astype(dtype)
    col = jnp.where(nonempty, gammaln(n - mf + 1) + gammaln(jnp.maximum(mf, 1.0)) - gammaln(n + 1.0), 0.0)
    lp = (
        k_plus * jnp.log(alpha)
        - alpha * h_n
        - jnp.sum(gammaln(k1.astype(dtype) + 1), axis=-1)
        + jnp.sum(col, axis=-1)
    )
    return jnp.where(prefix_ok & sorted_ok, lp, -jnp.inf)


_ibp_dist_sample_jit = jax.jit(_ibp_dist_sample, static_argnames=("shape", "num_customers", "max_features"))
_ibp_log_prob_jit = jax.jit(_ibp_log_prob, static_argnames=("n", "h_n"))
