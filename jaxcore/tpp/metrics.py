"""Scores of point-process models: NLL per event, next-event RMSE and accuracy, time-rescaling KS.

Goodness of fit uses the time-rescaling theorem (Brown et al., 2002): under the
true model the compensator increments between consecutive events are i.i.d.
Exp(1); the KS statistic compares their empirical law with Exp(1). Next-event
predictions (:meth:`jaxcore.tpp.AbstractTPP.predict_next`) are scored by the RMSE
of the predicted time and the accuracy of the predicted type.
:func:`jaxcore.tpp.evaluate` (``evaluation.py``) combines them.

References:
    E. N. Brown, R. Barbieri, V. Ventura, R. E. Kass, L. M. Frank, "The
    time-rescaling theorem and its application to neural spike train data
    analysis", Neural Computation 14(2), 2002.
    Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024, Sec. 5.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from jaxcore._util import check_positive, expected, is_concrete

from ._checks import as_param
from ._integrate import prepare_solve, solve_batch
from .base import NextEventPrediction
from .events import EventBatch, check_batch
from .solver import JumpDiffusion, as_jump_diffusion


def nll_per_event(log_likelihood: Float[Array, " batch"], num_events: Array) -> Float[Array, ""]:
    """Negative log-likelihood per event, ``-sum_b log L_b / sum_b N_b`` (nats).

    Args:
        log_likelihood: ``[B]`` per-sequence log-likelihoods (nats).
        num_events: ``[B]`` event counts (``EventBatch.num_events``); a total of 0 counts as 1.

    Returns:
        Scalar float, nats per event (integer inputs are converted to float exactly).

    Raises:
        TypeError: None or non-numeric inputs.
        ValueError: the shapes differ or are not 1-D; no sequence (``B = 0``: nothing to
            average); a NaN log-likelihood; negative or non-finite counts.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.tpp import nll_per_event
        >>> float(nll_per_event(jnp.array([-3.0, -5.0]), jnp.array([2, 2])))
        2.0
    """
    ll = as_param(log_likelihood, "log_likelihood")
    n = as_param(num_events, "num_events")
    if ll.ndim != 1:
        raise ValueError(expected("log_likelihood", "shape [batch]", f"shape {tuple(ll.shape)}", raw=True))
    if n.shape != ll.shape:
        raise ValueError(expected("num_events", f"shape {tuple(ll.shape)} (that of log_likelihood)",
                                  f"shape {tuple(n.shape)}", raw=True))
    if ll.shape[0] == 0:
        raise ValueError(expected("log_likelihood", "at least one sequence", "shape (0,)", raw=True))
    if is_concrete(ll) and bool(jnp.any(jnp.isnan(ll))):
        raise ValueError(expected("log_likelihood", "no NaN entry", "a NaN entry", raw=True))
    check_positive(n, "num_events", allow_zero=True)
    return nll_per_event_unchecked(ll, n)


@jax.jit
def nll_per_event_unchecked(log_likelihood, num_events):
    return -jnp.sum(log_likelihood) / jnp.maximum(jnp.sum(num_events), 1)


def ks_statistic(samples: Float[Array, " n"], mask: Bool[Array, " n"] | None = None) -> Float[Array, ""]:
    """Kolmogorov-Smirnov distance between the empirical law of ``samples[mask]`` and Exp(1).

    ``D = max_i max(i/n - F(x_(i)), F(x_(i)) - (i-1)/n)``, ``F(x) = 1 - e^{-x}``.

    Args:
        samples: ``[n]`` (any shape, flattened) non-negative values.
        mask: which entries count (default all), same shape.

    Returns:
        Scalar ``D`` in [0, 1]; integer samples are converted to float. Under ``jit`` with no
        valid sample it is 0 (a distance from nothing: check the mask's count).

    Raises:
        TypeError: None or non-numeric ``samples``.
        ValueError: negative or non-finite samples (where counted); ``mask`` of another shape; no
            valid sample (empty ``samples`` or an all-False ``mask``) when concrete.

    References:
        Brown et al., Neural Computation 14(2), 2002 (time-rescaling goodness of fit).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.tpp import ks_statistic
        >>> round(float(ks_statistic(jnp.array([0.1, 0.7, 2.0]))), 4)
        0.2382
    """
    x = as_param(samples, "samples")
    if mask is not None:
        if np.shape(mask) != tuple(x.shape):
            raise ValueError(expected("mask", f"shape {tuple(x.shape)} (that of samples)",
                                      f"shape {np.shape(mask)}", raw=True))
        mask = jnp.asarray(mask, bool)
    if is_concrete(x, mask):
        if x.size == 0 or (mask is not None and not bool(jnp.any(mask))):
            name, got = ("samples", "an empty array") if x.size == 0 else ("mask", "an all-False mask")
            raise ValueError(expected(name, "at least one valid sample", got, raw=True))
        check_positive(x if mask is None else jnp.where(mask, x, 0.0), "samples", allow_zero=True)
    return _ks_statistic(x, mask)


def ks_unchecked(samples, mask):
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


_ks_statistic = jax.jit(ks_unchecked)


def time_rescaling_ks(dynamics: JumpDiffusion, batch: EventBatch, key: PRNGKeyArray | None = None,
                      **solve_kwargs: Any) -> Float[Array, ""]:
    """KS statistic of the rescaled inter-event times ``Lambda(t_{i-1}, t_i)`` against Exp(1), pooled over the batch.

    Under the true model the compensator increments between events are i.i.d. Exp(1)
    (the time-rescaling theorem); ``D`` is their KS distance to Exp(1).

    Args:
        dynamics: a :class:`JumpDiffusion` (NJDTPP, ``model.jump_diffusion()``) or a classical model
            (``Poisson``, ``Hawkes``, ``SharedDecayHawkes``, ``SelfCorrecting``), taken as its jump-diffusion.
        batch: ``B`` sequences.
        key: Brownian key passed to :func:`solve`; ``None`` integrates the drift only.
        **solve_kwargs: passed to :func:`solve` (``method``, ``num_substeps``, ``convention``, ...). Without
            ``method``, the exact closed-form flow is used where one exists and ``key`` is None (every
            classical model), else :func:`solve`'s default ``"scan"``.

    Returns:
        Scalar KS statistic in [0, 1].

    Raises:
        TypeError/ValueError: as :func:`solve`.

    References:
        Brown et al., Neural Computation 14(2), 2002, Sec. 2.

    Examples:
        >>> from jaxcore.tpp import EventBatch, Poisson, time_rescaling_ks
        >>> batch = EventBatch.from_sequences([[0.5, 1.5, 2.0]], T=3.0)
        >>> d = time_rescaling_ks(Poisson(1.0), batch)      # the exact flow of the classical model
        >>> 0.0 <= float(d) <= 1.0
        True
    """
    dynamics = as_jump_diffusion(dynamics)
    if "method" not in solve_kwargs and key is None and dynamics.has_flow():
        solve_kwargs["method"] = "exact"
    args = prepare_solve(dynamics, batch, key, **solve_kwargs)
    return _time_rescaling_run(args)


def _time_rescaling_impl(args):
    batch, convention = args[1], args[5]
    res = solve_batch(*args)
    mask = batch.mask
    if convention == "paper":
        mask = mask & (jnp.arange(batch.max_events) > 0)[None]
    return ks_unchecked(res.interval_compensator, mask)


_time_rescaling_run = eqx.filter_jit(_time_rescaling_impl)


def prediction_scores(pred: NextEventPrediction, batch: EventBatch) -> tuple[Array, Array]:
    """``(rmse, accuracy)`` of next-event predictions against the batch's next events.

    RMSE of the predicted next time (time unit) and accuracy of the predicted
    type, over positions where a next event exists.

    Args:
        pred: a :class:`NextEventPrediction` for ``batch``.
        batch: the ``B`` sequences the predictions were made on.

    Returns:
        ``(rmse, accuracy)``: scalars (time unit; fraction in [0, 1]).

    Raises:
        TypeError: ``pred`` is not a NextEventPrediction or ``batch`` not an EventBatch.

    Examples:
        >>> from jaxcore.tpp import EventBatch, Poisson, predict_next, prediction_scores
        >>> batch = EventBatch.from_sequences([[0.5, 1.0, 2.0]], T=3.0)
        >>> pred = predict_next(Poisson(2.0).jump_diffusion(), batch, horizon=10.0, method="exact")
        >>> rmse, acc = prediction_scores(pred, batch)
        >>> float(acc)
        1.0
    """
    if not isinstance(pred, NextEventPrediction):
        raise TypeError(expected("pred", "a jaxcore.tpp.NextEventPrediction", type(pred).__name__, raw=True))
    check_batch(batch)
    return _prediction_scores(pred, batch)


def prediction_scores_unchecked(pred, batch):
    target_t = jnp.concatenate([batch.times[:, 1:], batch.times[:, -1:]], axis=1)
    target_m = jnp.concatenate([batch.marks[:, 1:], batch.marks[:, -1:]], axis=1)
    n = jnp.maximum(jnp.sum(pred.valid), 1)
    rmse = jnp.sqrt(jnp.sum(jnp.where(pred.valid, (pred.time - target_t) ** 2, 0.0)) / n)
    acc = jnp.sum(pred.valid & (pred.type == target_m)) / n
    return rmse, acc


_prediction_scores = eqx.filter_jit(prediction_scores_unchecked)
