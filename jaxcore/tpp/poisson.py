"""Homogeneous (marked) Poisson process: constant intensities ``lambda_k = mu_k``.

``log L = sum_i log mu_{m_i} - T sum_k mu_k``; the maximum-likelihood rate is
``mu_k = N_k / T`` (count over total exposure). As a jump-diffusion,
``d eta = 0`` with ``eta(0) = log mu`` and no jumps (Zhang et al., ICML 2024, Sec. 3).

References:
    D. J. Daley, D. Vere-Jones, "An Introduction to the Theory of Point
    Processes, Vol. I", Springer 2003, Sec. 2.1 and Prop. 7.2.III.
"""

from __future__ import annotations

import functools
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from jaxcore._util import check_int, check_key, check_positive, check_scalar, error_if, expected, is_concrete

from ._checks import as_param, check_query_times, checked
from .events import EventBatch, check_batch, check_marks
from .solver import ClassicalTPP, JumpDiffusion


@jax.jit
def _intensity(mu, t):
    return jnp.broadcast_to(mu, t.shape + mu.shape)


@jax.jit
def _compensator(mu, t):
    return t[..., None] * mu


@jax.jit
def _loglik(mu, marks, mask, T):
    log_term = jnp.sum(jnp.where(mask, jnp.log(mu)[marks], 0.0), axis=1)
    return log_term - T * jnp.sum(mu)


@jax.jit
def _closed_form_rates(mu, marks, mask, T):
    counts = jnp.sum(jax.nn.one_hot(marks, mu.shape[0]) * mask[..., None], axis=(0, 1))
    return jnp.maximum(counts / jnp.sum(T), 1e-12).astype(mu.dtype)


@functools.partial(jax.jit, static_argnums=(3, 4))
def _simulate(key, mu, T, L, B):
    """Exact simulation of ``B`` sequences into ``[B, L]`` buffers, one program per (L, B) and dtype."""
    k_gap, k_mark = jax.random.split(key)
    dtype = mu.dtype
    total = jnp.sum(mu)
    gaps = jax.random.exponential(k_gap, (B, L + 1), dtype) / total
    arrivals = jnp.cumsum(gaps, axis=1)
    mask = arrivals[:, :L] <= T
    overflow = arrivals[:, L] <= T
    n = jnp.sum(mask, axis=1)
    last = jnp.where(n > 0, jnp.take_along_axis(arrivals, jnp.maximum(n - 1, 0)[:, None], 1)[:, 0], 0.0)
    times = jnp.where(mask, arrivals[:, :L], last[:, None])
    marks = jax.random.categorical(k_mark, jnp.log(mu), shape=(B, L))
    marks = jnp.where(mask, marks, 0).astype(jnp.int32)
    return EventBatch(times, marks, mask, jnp.full((B,), T, dtype), mu.shape[0]), overflow


class Poisson(ClassicalTPP):
    """Homogeneous Poisson process with ``K`` event types of rates ``mu`` ``[K]`` (events per unit time).

    ``lambda_k(t) = mu_k``; ``log L = sum_i log mu_{m_i} - T sum_k mu_k``.

    Attributes:
        mu: rates ``[K]`` (> 0, events per unit time); a scalar gives ``K = 1``.

    Raises:
        ValueError: ``mu`` not 1-D, or non-positive / NaN / inf entries.

    References:
        Daley & Vere-Jones (2003), Sec. 2.1.

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import Poisson
        >>> batch, overflow = Poisson(2.0).simulate(jax.random.key(0), 10.0, 64, 3)
        >>> fitted = Poisson(1.0).fit_closed_form(batch)            # mu = N / T
        >>> bool(abs(fitted.mu[0] - batch.num_events.sum() / 30.0) < 1e-6)
        True
    """

    mu: Float[Array, " K"]

    def __init__(self, mu: Any):
        mu = as_param(mu, "mu")
        if mu.ndim == 0:
            mu = mu[None]
        if mu.ndim != 1:
            raise ValueError(expected("mu", "shape [K]", f"shape {mu.shape}", raw=True))
        check_positive(mu, "mu")
        self.mu = mu

    @property
    def num_marks(self) -> int:
        """Number of event types ``K``."""
        return self.mu.shape[0]

    def intensity(self, batch: EventBatch, t: Float[Array, "batch query"]) -> Float[Array, "batch query K"]:
        """``lambda_k(t) = mu_k`` at query times ``[B, Q]``; returns ``[B, Q, K]``."""
        check_batch(batch)
        check_marks(batch, self.num_marks)
        return _intensity(checked(self.mu, "mu", "positive"), check_query_times(t, batch.num_sequences))

    def compensator(self, batch: EventBatch, t: Float[Array, "batch query"] | None = None) -> Array:
        """``Lambda_k(t) = mu_k t``: ``[B, Q, K]`` at ``t`` ``[B, Q]``, or ``[B, K]`` at ``T``."""
        check_batch(batch)
        check_marks(batch, self.num_marks)
        return _compensator(checked(self.mu, "mu", "positive"),
                            batch.T if t is None else check_query_times(t, batch.num_sequences))

    def log_likelihood(self, batch: EventBatch) -> Float[Array, " batch"]:
        """``[B]`` exact log-likelihoods (nats): ``sum_i log mu_{m_i} - T sum_k mu_k``."""
        check_batch(batch)
        check_marks(batch, self.num_marks)
        return _loglik(checked(self.mu, "mu", "positive"), batch.marks, batch.mask, batch.T)

    def simulate(self, key: PRNGKeyArray, T: float, max_events: int, num_sequences: int
                 ) -> tuple[EventBatch, Bool[Array, " batch"]]:
        """Exact simulation on ``[0, T]``: cumulative sums of Exp(sum mu) gaps, types ~ Categorical(mu / sum mu).

        Returns:
            ``(batch, overflow)``: ``[B, L]`` buffers and ``[B]`` flags, True where more
            than ``max_events`` events fell in ``[0, T]`` (truncated).
        """
        check_key(key)
        if is_concrete(T):
            check_scalar(T, "T", positive=True)
        L = check_int(max_events, "max_events", minimum=1)
        B = check_int(num_sequences, "num_sequences", minimum=1)
        return _simulate(key, checked(self.mu, "mu", "positive"), jnp.asarray(T, self.mu.dtype), L, B)

    def fit_closed_form(self, batch: EventBatch) -> Poisson:
        """The maximum-likelihood rates ``mu_k = N_k / sum_b T_b`` (counts floored at 1e-12).

        Raises:
            TypeError: not an :class:`EventBatch`.
            ValueError: marks outside ``[0, K)``; a total observation time ``sum_b T_b`` of 0 (no
                rate is identified; it gave NaN), checked on the host when concrete and at run time
                under ``jit``.
        """
        check_batch(batch)
        check_marks(batch, self.num_marks)
        total = jnp.sum(batch.T)
        if is_concrete(total):
            if not float(total) > 0:
                raise ValueError(expected("batch.T", "a total observation time > 0", float(total)))
        else:
            batch = eqx.tree_at(lambda b: b.T, batch, error_if(batch.T, ~(total > 0), "batch.T",
                                                              "a total observation time > 0"))
        return eqx.tree_at(lambda m: m.mu, self, _closed_form_rates(self.mu, batch.marks, batch.mask, batch.T))

    def to_unconstrained(self) -> dict[str, Array]:
        """``log mu`` for unconstrained optimisation."""
        return {"mu": jnp.log(self.mu)}

    def from_unconstrained(self, u: dict[str, Array]) -> Poisson:
        """The model with ``mu = exp(u)``."""
        return eqx.tree_at(lambda m: m.mu, self, jnp.exp(u["mu"]))

    def jump_diffusion(self) -> PoissonSDE:
        """``d eta = 0``, ``eta(0) = log mu``, no jumps."""
        return PoissonSDE(self.mu)


class PoissonSDE(JumpDiffusion):
    """Poisson process as a (trivial) log-intensity jump-diffusion: ``d eta = 0``, ``eta(0) = log mu``.

    Attributes:
        mu: ``[K]`` rates (events per unit time).

    References:
        Zhang et al., ICML 2024, Sec. 3.

    Examples:
        >>> from jaxcore.tpp import EventBatch, Poisson, solve
        >>> batch = EventBatch.from_sequences([[0.5, 1.0]], T=2.0)
        >>> round(float(solve(Poisson(1.0).jump_diffusion(), batch, method="exact").log_likelihood[0]), 6)
        -2.0
    """

    mu: Float[Array, " K"]

    def __check_init__(self):
        if is_concrete(self.mu):
            checked(self.mu, "mu", "positive")

    def _checked(self) -> PoissonSDE:
        return eqx.tree_at(lambda d: d.mu, self, checked(self.mu, "mu", "positive"))

    def initial_state(self) -> Array:
        return jnp.log(self.mu)

    def drift(self, t, eta):
        return jnp.zeros_like(eta)

    def jump(self, t, eta):
        return jnp.zeros((eta.shape[0], eta.shape[0]), eta.dtype)

    def flow(self, t, eta, h):
        return eta, jnp.sum(jnp.exp(eta)) * h
