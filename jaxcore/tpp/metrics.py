"""Evaluation of point-process models: NLL per event, next-event prediction, time-rescaling KS.

Next-event prediction follows Zhang et al. (ICML 2024, Sec. 4.3): after event
``i`` the intensity is integrated forward (drift only) and the next time is the
mean of the predicted density ``p(s) = lambda(s) exp(-int_{t_i}^s lambda)``,
``E[t_{i+1}] = t_i + int_0^H tau p(t_i + tau) dtau`` (mass beyond the horizon
``H`` is placed at ``H``); the type is ``argmax_k int lambda_k(s) exp(-int lambda) ds``.

Goodness of fit uses the time-rescaling theorem (Brown et al., 2002): under the
true model the compensator increments between consecutive events are i.i.d.
Exp(1); the KS statistic compares their empirical law with Exp(1).

References:
    E. N. Brown, R. Barbieri, V. Ventura, R. E. Kass, L. M. Frank, "The
    time-rescaling theorem and its application to neural spike train data
    analysis", Neural Computation 14(2), 2002.
    Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from ._common import check_int, check_positive_scalar
from .events import EventBatch, check_batch, check_marks
from .solver import JumpDiffusion, solve


def nll_per_event(log_likelihood: Float[Array, " batch"], num_events: Array) -> Float[Array, ""]:
    """Negative log-likelihood per event, ``-sum_b log L_b / sum_b N_b`` (nats)."""
    return -jnp.sum(log_likelihood) / jnp.maximum(jnp.sum(num_events), 1)


def ks_statistic(samples: Float[Array, " n"], mask: Bool[Array, " n"] | None = None) -> Float[Array, ""]:
    """Kolmogorov-Smirnov distance between the empirical law of ``samples[mask]`` and Exp(1).

    ``D = max_i max(i/n - F(x_(i)), F(x_(i)) - (i-1)/n)``, ``F(x) = 1 - e^{-x}``.

    Args:
        samples: ``[n]`` (any shape, flattened) non-negative values.
        mask: which entries count (default all).

    Returns:
        Scalar ``D`` in [0, 1] (0 for no valid sample).
    """
    x = jnp.ravel(samples)
    m = jnp.ones_like(x, bool) if mask is None else jnp.ravel(mask)
    n = jnp.sum(m)
    xs = jnp.sort(jnp.where(m, x, jnp.inf))
    F = -jnp.expm1(-xs)
    i = jnp.arange(1, x.shape[0] + 1, dtype=F.dtype)
    valid = i <= n
    nf = jnp.maximum(n, 1).astype(F.dtype)
    d = jnp.maximum(i / nf - F, F - (i - 1) / nf)
    return jnp.max(jnp.where(valid, d, 0.0))


def time_rescaling_ks(dynamics: JumpDiffusion, batch: EventBatch, key=None, **solve_kwargs) -> Float[Array, ""]:
    """KS statistic of the rescaled inter-event times ``Lambda(t_{i-1}, t_i)`` against Exp(1), pooled over the batch.

    Args:
        dynamics: a :class:`JumpDiffusion` (classical ``model.jump_diffusion()`` or NJDTPP).
        batch: sequences.
        key, solve_kwargs: passed to :func:`solve`.

    Returns:
        Scalar KS statistic.
    """
    res = solve(dynamics, batch, key, **solve_kwargs)
    mask = batch.mask
    if solve_kwargs.get("convention", "window") == "paper":
        mask = mask & (jnp.arange(batch.max_events) > 0)[None]
    return ks_statistic(res.interval_compensator, mask)


class NextEventPrediction(NamedTuple):
    """Predictions of event ``i+1`` from the history up to event ``i`` (``[B, L]`` each).

    Attributes:
        time: predicted time of the next event (same unit as the batch).
        type: predicted type (int32).
        type_probs: ``[B, L, K]`` predicted type probabilities.
        valid: True where event ``i+1`` exists (targets ``times[:, i+1]``, ``marks[:, i+1]``).
    """

    time: Array
    type: Array
    type_probs: Array
    valid: Array


def predict_next(dynamics: JumpDiffusion, batch: EventBatch, *, horizon: float, num_grid: int = 64,
                 num_substeps: int = 10, convention: str = "window", method: str = "scan") -> NextEventPrediction:
    """Predict each next event's time (mean of the predicted density) and type, drift-only.

    On each of the ``num_grid`` steps of length ``H / num_grid`` after event ``i`` the
    next event falls with probability ``exp(-Lambda_before) (1 - exp(-dLambda))``
    (``dLambda`` the step's compensator increment), placed at the step's midpoint
    and split between types in proportion to ``lambda_k`` at the step's start.

    Args:
        dynamics: the model's jump-diffusion.
        batch: ``B`` sequences; predictions are made after every real event.
        horizon: how far ahead to integrate (same time unit), e.g. several mean gaps.
        num_grid: steps over the horizon.
        num_substeps: steps per gap when integrating the history (``method="scan"``).
        convention: likelihood convention of the history pass (see :func:`solve`).
        method: ``"scan"`` (Euler steps, any dynamics) or ``"exact"`` (the
            closed-form :meth:`JumpDiffusion.flow` of the classical processes; stable
            at any step size).

    Returns:
        A :class:`NextEventPrediction`.

    Raises:
        ValueError: non-positive ``horizon`` or ``num_grid``; ``method`` not
            ``"scan"``/``"exact"`` or ``"exact"`` without a closed-form flow.
    """
    check_batch(batch)
    check_marks(batch, dynamics.num_marks)
    check_positive_scalar(horizon, "horizon")
    G = check_int(num_grid, "num_grid")
    if method not in ("scan", "exact"):
        raise ValueError(f"method: expected 'scan' or 'exact', got {method!r}")
    res = solve(dynamics, batch, None, num_substeps=num_substeps, convention=convention, method=method)
    dtype = batch.times.dtype
    h = jnp.asarray(horizon, dtype) / G
    tau = (jnp.arange(G, dtype=dtype) + 0.5) * h

    def after_event(eta_pre, t, m):
        eta = eta_pre + dynamics.jump(t, eta_pre)[:, m]

        def step(carry, k):
            eta, lam_int = carry
            lam = jnp.exp(eta)
            if method == "exact":
                eta_next, d_int = dynamics.flow(t + k * h, eta, h)
            else:
                eta_next, d_int = eta + dynamics.drift(t + k * h, eta) * h, jnp.sum(lam) * h
            p_step = jnp.exp(-lam_int) * -jnp.expm1(-d_int)  # P(next event in this step)
            share = lam / jnp.maximum(jnp.sum(lam), jnp.finfo(dtype).tiny)
            return (eta_next, lam_int + d_int), p_step * share

        (_, lam_int), dens = jax.lax.scan(step, (eta, jnp.zeros((), dtype)), jnp.arange(G, dtype=dtype))
        total = jnp.sum(dens, axis=1)  # [G] probability of the next event in each step
        tail = jnp.exp(-lam_int)
        mean = jnp.sum(total * tau) + tail * horizon
        probs = jnp.sum(dens, axis=0)
        probs = probs / jnp.maximum(jnp.sum(probs), jnp.finfo(dtype).tiny)
        return t + mean, probs

    f = jax.vmap(jax.vmap(after_event))
    time, probs = f(res.eta_events, batch.times, batch.marks)
    valid = batch.mask & jnp.concatenate([batch.mask[:, 1:], jnp.zeros((batch.batch_size, 1), bool)], axis=1)
    return NextEventPrediction(time, jnp.argmax(probs, axis=-1).astype(jnp.int32), probs, valid)


def prediction_scores(pred: NextEventPrediction, batch: EventBatch) -> tuple[Array, Array]:
    """``(rmse, accuracy)`` of next-event predictions against the batch's next events.

    RMSE of the predicted next time (time unit) and accuracy of the predicted
    type, over positions where a next event exists.
    """
    target_t = jnp.concatenate([batch.times[:, 1:], batch.times[:, -1:]], axis=1)
    target_m = jnp.concatenate([batch.marks[:, 1:], batch.marks[:, -1:]], axis=1)
    n = jnp.maximum(jnp.sum(pred.valid), 1)
    rmse = jnp.sqrt(jnp.sum(jnp.where(pred.valid, (pred.time - target_t) ** 2, 0.0)) / n)
    acc = jnp.sum(pred.valid & (pred.type == target_m)) / n
    return rmse, acc
