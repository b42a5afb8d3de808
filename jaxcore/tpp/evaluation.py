"""Evaluation of any model of the family on test sequences: NLL per event, next-event RMSE and accuracy, KS.

:func:`evaluate` asks the model (any :class:`jaxcore.tpp.AbstractTPP`) for its
:meth:`~jaxcore.tpp.AbstractTPP.evaluation_terms` (log-likelihoods, next-event predictions, rescaled gaps:
each model kind computes them its own way, in one compiled program) and scores them with the functions of
``metrics.py``.

References:
    Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024, Sec. 5 (NLL, RMSE, accuracy).
    E. N. Brown, R. Barbieri, V. Ventura, R. E. Kass, L. M. Frank, "The time-rescaling theorem and its
    application to neural spike train data analysis", Neural Computation 14(2), 2002 (KS).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
from jaxtyping import Array, PRNGKeyArray

from .base import AbstractTPP, EvaluationTerms
from .events import EventBatch
from .metrics import ks_unchecked, nll_per_event_unchecked, prediction_scores_unchecked
from .solver import as_jump_diffusion


class EvaluationResult(NamedTuple):
    """Test metrics of one model on one batch (:func:`evaluate`); scalars.

    Attributes:
        nll: negative log-likelihood per event (nats), ``-sum log L / sum N``.
        rmse: root mean squared error of the predicted next-event time (the batch's time unit).
        accuracy: fraction of next-event types predicted correctly, in [0, 1].
        ks: time-rescaling KS statistic of the pooled rescaled gaps against Exp(1), in [0, 1].

    Examples:
        >>> from jaxcore.tpp import EvaluationResult
        >>> EvaluationResult._fields
        ('nll', 'rmse', 'accuracy', 'ks')
    """

    nll: Array
    rmse: Array
    accuracy: Array
    ks: Array


def evaluate(
    dynamics: Any,
    batch: EventBatch,
    key: PRNGKeyArray | None = None,
    *,
    horizon: float,
    num_substeps: int = 10,
    num_samples: int = 1,
    num_grid: int = 256,
    chunk_size: int | None = None,
) -> EvaluationResult:
    """Score a model on test sequences: NLL per event, next-event RMSE and type accuracy, time-rescaling KS.

    Dynamics with a closed-form flow (the classical processes) are integrated exactly
    (``method="exact"``: exact NLL and KS); others (NJDTPP) by the Euler-Maruyama solver
    with ``num_substeps`` steps per gap. With a ``key`` the NLL is averaged over
    ``num_samples`` Brownian paths; ``key=None`` integrates the drift only (deterministic).
    Predictions (:func:`predict_next`, ``num_grid`` steps over ``horizon``) and the KS
    statistic (:func:`time_rescaling_ks`) are drift-only. Each model kind computes its
    :class:`EvaluationTerms` (:meth:`AbstractTPP.evaluation_terms`) in one compiled program,
    scored in a second. A neural TPP (:class:`jaxcore.tpp.NeuralTPP`) is scored on its own likelihood (closed-form or
    16-node quadrature compensator) and predicts by thinning (:meth:`NeuralTPP.predict_next`,
    ``max(num_samples, 16)`` draws; ``key`` required).

    Args:
        dynamics: any :class:`AbstractTPP`: a :class:`JumpDiffusion` (``NJDTPP``, ``HawkesSDE``, ...), a
            classical model (``Poisson``, ``Hawkes``, ``SharedDecayHawkes``, ``SelfCorrecting``) or a neural
            TPP (``RMTPP``, ``NHP``, ``THP``, ``SAHP``, ``IFTPP``, ``AttNHP``).
        batch: ``B`` test sequences.
        key: PRNG key for the Brownian paths of the NLL, or ``None`` (drift only).
        horizon: prediction horizon (time unit, > 0), e.g. a few mean gaps.
        num_substeps: Euler steps per gap (ignored by the exact flow).
        num_samples: Brownian paths averaged for the NLL (with a ``key``).
        num_grid: steps of the prediction grid over ``horizon``.
        chunk_size: a neural TPP's thinning draws, ``chunk_size`` (sequence, position) pairs at a time
            (memory; see :meth:`NeuralTPP.sample_next`); ``None``: all at once. Ignored by the others.

    Returns:
        An :class:`EvaluationResult` ``(nll, rmse, accuracy, ks)`` of scalars.

    Raises:
        TypeError: ``dynamics`` is not a model of the family (an AbstractTPP); bad key.
        ValueError: non-positive ``horizon``, ``num_substeps``, ``num_samples``, ``num_grid`` or ``chunk_size``;
            the batch's number of marks differs from the model's.

    References:
        Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024, Sec. 5
        (NLL, RMSE, accuracy); Brown et al., Neural Computation 14(2), 2002 (KS).

    Examples:
        >>> from jaxcore.tpp import EventBatch, Poisson, evaluate
        >>> batch = EventBatch.from_sequences([[0.5, 1.0, 2.0]], T=3.0)
        >>> r = evaluate(Poisson(1.0), batch, horizon=5.0)
        >>> round(float(r.nll), 4), float(r.accuracy)
        (1.0, 1.0)
    """
    if not isinstance(dynamics, AbstractTPP):
        dynamics = as_jump_diffusion(dynamics)  # a duck-typed classical model, or a TypeError
    terms = dynamics.evaluation_terms(key, batch, horizon=horizon, num_substeps=num_substeps,
                                      num_samples=num_samples, num_grid=num_grid, chunk_size=chunk_size)
    return _score(terms, batch)


@eqx.filter_jit
def _score(terms: EvaluationTerms, batch: EventBatch) -> EvaluationResult:
    """The four scores of a model's evaluation terms on ``batch``, one program."""
    rmse, acc = prediction_scores_unchecked(terms.prediction, batch)
    ks = ks_unchecked(terms.rescaled_gaps, batch.mask)
    return EvaluationResult(nll_per_event_unchecked(terms.log_likelihood, batch.num_events), rmse, acc, ks)
