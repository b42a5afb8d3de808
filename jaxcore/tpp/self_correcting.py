"""Self-correcting (stress-release) process: ``lambda(t) = exp(mu t - alpha N(t-))``.

Each event lowers the log-intensity by ``alpha`` while it grows linearly at rate
``mu``: as a jump-diffusion ``d eta = mu dt - alpha dN`` with ``eta(0) = 0``
(Zhang et al., ICML 2024, Sec. 3). Between events ``t_{i}`` and ``t_{i+1}``
(``i`` events so far) the compensator is ``e^{-alpha i} (e^{mu t_{i+1}} - e^{mu t_i}) / mu``,
so the likelihood is exact in O(L), and the next event time can be drawn by
exact inversion: ``t' = t + log1p(mu E e^{alpha i - mu t}) / mu`` with ``E ~ Exp(1)``.

References:
    V. Isham, M. Westcott, "A self-correcting point process", Stochastic
    Processes and their Applications 8(3), 1979.
"""

from __future__ import annotations

import functools
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from jaxcore._util import check_int, check_key, check_positive, check_scalar, expected, is_concrete

from ._checks import as_param, check_query_times, checked
from .events import EventBatch, check_batch, check_marks
from .solver import ClassicalTPP, JumpDiffusion


def _segment_integral(mu, a, b, count, alpha):
    """``int_a^b exp(mu s - alpha count) ds`` computed stably as ``exp(mu a - alpha count) expm1(mu (b-a)) / mu``."""
    return jnp.exp(mu * a - alpha * count) * jnp.expm1(mu * (b - a)) / mu


def _loglik_one(mu, alpha, times, mask, T):
    L = times.shape[0]
    count = jnp.arange(L, dtype=times.dtype)  # events strictly before event i
    prev = jnp.concatenate([jnp.zeros((1,), times.dtype), times[:-1]])
    log_term = jnp.sum(jnp.where(mask, mu * times - alpha * count, 0.0))
    comp = jnp.sum(jnp.where(mask, _segment_integral(mu, prev, times, count, alpha), 0.0))
    n = jnp.sum(mask)
    last = jnp.where(n > 0, times[jnp.maximum(n - 1, 0)], 0.0)
    comp = comp + _segment_integral(mu, last, T, n.astype(times.dtype), alpha)
    return log_term - comp


def _compensator_at(mu, alpha, times, mask, t):
    L = times.shape[0]
    count = jnp.arange(L, dtype=times.dtype)
    prev = jnp.concatenate([jnp.zeros((1,), times.dtype), times[:-1]])
    before = mask & (times < t)
    comp = jnp.sum(jnp.where(before, _segment_integral(mu, prev, jnp.minimum(times, t), count, alpha), 0.0))
    n = jnp.sum(before)
    last = jnp.where(n > 0, times[jnp.maximum(n - 1, 0)], 0.0)
    return comp + _segment_integral(mu, last, t, n.astype(times.dtype), alpha)



# batched closed forms, each compiled once per shape
_compensator_end = jax.jit(jax.vmap(_compensator_at, in_axes=(None, None, 0, 0, 0)))
_compensator_batch = jax.jit(jax.vmap(jax.vmap(_compensator_at, in_axes=(None, None, None, None, 0)),
                                      in_axes=(None, None, 0, 0, 0)))
_loglik_batch = jax.jit(jax.vmap(_loglik_one, in_axes=(None, None, 0, 0, 0)))


@jax.jit
def _intensity(mu, alpha, times, mask, t):
    n = jnp.sum(mask[:, None, :] & (times[:, None, :] < t[..., None]), axis=-1)
    return jnp.exp(mu * t - alpha * n)[..., None]


@functools.partial(jax.jit, static_argnums=(4, 5))
def _simulate(key, mu, alpha, T, L, B):
    """Exact simulation of ``B`` sequences into ``[B, L]`` buffers, one program per (L, B) and dtype."""
    dtype = mu.dtype
    E = jax.random.exponential(key, (B, L + 1), dtype)

    def one(e):
        def step(carry, ei):
            t, n = carry
            t_new = t + jnp.log1p(mu * ei * jnp.exp(alpha * n - mu * t)) / mu
            return (t_new, n + 1.0), t_new

        _, arr = jax.lax.scan(step, (jnp.zeros((), dtype), jnp.zeros((), dtype)), e)
        return arr

    arrivals = jax.vmap(one)(E)
    mask = arrivals[:, :L] <= T
    overflow = arrivals[:, L] <= T
    n = jnp.sum(mask, axis=1)
    last = jnp.where(n > 0, jnp.take_along_axis(arrivals, jnp.maximum(n - 1, 0)[:, None], 1)[:, 0], 0.0)
    times = jnp.where(mask, arrivals[:, :L], last[:, None])
    marks = jnp.zeros((B, L), jnp.int32)
    return EventBatch(times, marks, mask, jnp.full((B,), T, dtype), 1), overflow


class SelfCorrecting(ClassicalTPP):
    """Univariate self-correcting process ``lambda(t) = exp(mu t - alpha N(t-))``.

    Attributes:
        mu: growth rate of the log-intensity (> 0, per unit time).
        alpha: drop of the log-intensity per event (>= 0).

    Raises:
        ValueError: non-scalar parameters; non-positive ``mu``, negative ``alpha``, NaN/inf.

    References:
        Isham & Westcott (1979); Zhang et al., ICML 2024, Sec. 5.1 (synthetic
        set with mu = 0.5, alpha = 0.2).

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import SelfCorrecting
        >>> model = SelfCorrecting(0.5, 0.2)
        >>> batch, overflow = model.simulate(jax.random.key(0), 20.0, 128, 2)
        >>> model.log_likelihood(batch).shape, bool(overflow.any())
        ((2,), False)
    """

    mu: Float[Array, ""]
    alpha: Float[Array, ""]

    def __init__(self, mu: Any, alpha: Any):
        mu = as_param(mu, "mu")
        alpha = as_param(alpha, "alpha")
        if mu.ndim != 0:
            raise ValueError(expected("mu", "a scalar", f"shape {mu.shape}", raw=True))
        if alpha.ndim != 0:
            raise ValueError(expected("alpha", "a scalar", f"shape {alpha.shape}", raw=True))
        check_positive(mu, "mu")
        check_positive(alpha, "alpha", allow_zero=True)
        self.mu, self.alpha = mu, alpha

    num_marks = 1

    def _checked_params(self) -> tuple[Array, Array]:
        """``(mu, alpha)`` after their checks (host when concrete, one ``error_if`` each when traced)."""
        return checked(self.mu, "mu", "positive"), checked(self.alpha, "alpha", "nonnegative")

    def intensity(self, batch: EventBatch, t: Float[Array, "batch query"]) -> Float[Array, "batch query 1"]:
        """``lambda(t) = exp(mu t - alpha N(t-))`` at ``t`` ``[B, Q]``; returns ``[B, Q, 1]``."""
        check_batch(batch)
        check_marks(batch, 1)
        return _intensity(*self._checked_params(), batch.times, batch.mask,
                          check_query_times(t, batch.num_sequences))

    def compensator(self, batch: EventBatch, t: Float[Array, "batch query"] | None = None) -> Array:
        """``Lambda(t)``: ``[B, Q, 1]`` at ``t`` ``[B, Q]``, or ``[B, 1]`` at ``T``."""
        check_batch(batch)
        check_marks(batch, 1)
        mu, alpha = self._checked_params()
        if t is None:
            return _compensator_end(mu, alpha, batch.times, batch.mask, batch.T)[:, None]
        return _compensator_batch(mu, alpha, batch.times, batch.mask,
                                  check_query_times(t, batch.num_sequences))[..., None]

    def log_likelihood(self, batch: EventBatch) -> Float[Array, " batch"]:
        """``[B]`` exact log-likelihoods (nats), O(L): ``sum_i (mu t_i - alpha (i-1)) - Lambda(T)``."""
        check_batch(batch)
        check_marks(batch, 1)
        return _loglik_batch(*self._checked_params(), batch.times, batch.mask, batch.T)

    def simulate(self, key: PRNGKeyArray, T: float, max_events: int, num_sequences: int
                 ) -> tuple[EventBatch, Bool[Array, " batch"]]:
        """Exact simulation by inversion of the compensator, ``lax.scan`` over the buffer, vmapped.

        Returns:
            ``(batch, overflow)``: ``[B, L]`` buffers and ``[B]`` flags, True where
            more than ``max_events`` events fell in ``[0, T]``.
        """
        check_key(key)
        if is_concrete(T):
            check_scalar(T, "T", positive=True)
        L = check_int(max_events, "max_events", minimum=1)
        B = check_int(num_sequences, "num_sequences", minimum=1)
        return _simulate(key, *self._checked_params(), jnp.asarray(T, self.mu.dtype), L, B)

    def to_unconstrained(self) -> dict[str, Array]:
        """Inverse-softplus parameters for unconstrained optimisation."""
        inv = lambda x: jnp.log(jnp.expm1(jnp.maximum(x, 1e-6)))  # noqa: E731
        return {"mu": inv(self.mu), "alpha": inv(self.alpha)}

    def from_unconstrained(self, u: dict[str, Array]) -> SelfCorrecting:
        """The model with softplus-transformed parameters."""
        return eqx.tree_at(lambda m: (m.mu, m.alpha), self, (jax.nn.softplus(u["mu"]), jax.nn.softplus(u["alpha"])))

    def jump_diffusion(self) -> SelfCorrectingSDE:
        """``d eta = mu dt - alpha dN``, ``eta(0) = 0``."""
        return SelfCorrectingSDE(self.mu, self.alpha)


class SelfCorrectingSDE(JumpDiffusion):
    """Self-correcting process as a log-intensity jump-diffusion: ``d eta = mu dt - alpha dN``, ``eta(0) = 0``.

    Attributes:
        mu: scalar growth rate (per unit time); alpha: scalar drop per event.

    References:
        Zhang et al., ICML 2024, Sec. 3.

    Examples:
        >>> from jaxcore.tpp import EventBatch, SelfCorrecting, solve
        >>> batch = EventBatch.from_sequences([[0.5, 1.0]], T=2.0)
        >>> model = SelfCorrecting(0.5, 0.2)
        >>> exact = solve(model.jump_diffusion(), batch, method="exact").log_likelihood
        >>> bool(abs(exact[0] - model.log_likelihood(batch)[0]) < 1e-5)
        True
    """

    mu: Float[Array, ""]
    alpha: Float[Array, ""]

    def __check_init__(self):
        for name, x, kind in (("mu", self.mu, "positive"), ("alpha", self.alpha, "nonnegative")):
            if is_concrete(x):
                checked(x, name, kind)

    def _checked(self) -> SelfCorrectingSDE:
        return eqx.tree_at(lambda d: (d.mu, d.alpha), self,
                           (checked(self.mu, "mu", "positive"), checked(self.alpha, "alpha", "nonnegative")))

    def initial_state(self) -> Array:
        return jnp.zeros((1,), jnp.result_type(self.mu))

    def drift(self, t, eta):
        return jnp.full_like(eta, self.mu)

    def jump(self, t, eta):
        return jnp.full((1, 1), -self.alpha, eta.dtype)

    def flow(self, t, eta, h):
        # eta grows linearly: int exp(eta + mu s) ds = e^eta (e^{mu h} - 1) / mu
        x = self.mu * h
        small = jnp.abs(x) < 1e-6
        growth = jnp.where(small, h * (1.0 + 0.5 * x), jnp.expm1(x) / jnp.where(small, 1.0, self.mu))
        return eta + x, jnp.sum(jnp.exp(eta) * growth)
