"""The one interface every temporal point process of the family implements, and the result types it returns.

:class:`AbstractTPP` is an abstract equinox module: every model kind (the classical Poisson, Hawkes and
self-correcting processes, the jump-diffusions :class:`~jaxcore.tpp.JumpDiffusion` with the NJDTPP, and the
neural TPPs RMTPP, NHP, THP, SAHP, IFTPP, AttNHP) subclasses it and implements its abstract methods, so that
evaluation (:func:`jaxcore.tpp.evaluate`) and model comparison (:func:`jaxcore.tpp.compare_models`) treat
them alike. Following equinox's abstract/final pattern, the base holds only abstract methods; each kind's
implementation is concrete and final.

This module imports no other model module of the family (the kinds import it), so there is no import circle.

References:
    D. J. Daley, D. Vere-Jones, "An Introduction to the Theory of Point Processes", Springer, 2003 (the
    conditional intensity and the log-likelihood ``sum_i log lambda_{m_i}(t_i) - int_0^T sum_k lambda_k``).
    S. Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024, Sec. 4.3-5 (prediction and
    evaluation of every model kind).
"""

from __future__ import annotations

import abc
from typing import Any, NamedTuple

import equinox as eqx
from jaxtyping import Array, Float, PRNGKeyArray

from .events import EventBatch


class NextEventSamples(NamedTuple):
    """Draws of the next event after each history prefix (``[B, L, num_samples]``).

    Attributes:
        time: sampled absolute next-event times.
        type: sampled types (int32).
        type_probs: ``[B, L, num_samples, K]`` ``lambda_k / sum lambda`` at each sampled time.
        accepted: False where no event was drawn within the horizon (time censored).

    Examples:
        >>> from jaxcore.tpp import NextEventSamples
        >>> NextEventSamples._fields
        ('time', 'type', 'type_probs', 'accepted')
    """

    time: Array
    type: Array
    type_probs: Array
    accepted: Array


class GeneratedEvents(NamedTuple):
    """Events generated after each history (:meth:`AbstractTPP.generate`, ``[B, num_events]``).

    Attributes:
        time: absolute event times.
        type: event types (int32).
        accepted: False once a draw found no event within the horizon (that entry and later ones are not events).

    Examples:
        >>> from jaxcore.tpp import GeneratedEvents
        >>> GeneratedEvents._fields
        ('time', 'type', 'accepted')
    """

    time: Array
    type: Array
    accepted: Array


class NextEventPrediction(NamedTuple):
    """Predictions of event ``i+1`` from the history up to event ``i`` (``[B, L]`` each).

    Attributes:
        time: predicted time of the next event (same unit as the batch).
        type: predicted type (int32).
        type_probs: ``[B, L, K]`` predicted type probabilities.
        valid: True where event ``i+1`` exists (targets ``times[:, i+1]``, ``marks[:, i+1]``).

    Examples:
        >>> from jaxcore.tpp import NextEventPrediction
        >>> NextEventPrediction._fields
        ('time', 'type', 'type_probs', 'valid')
    """

    time: Array
    type: Array
    type_probs: Array
    valid: Array


class EvaluationTerms(NamedTuple):
    """What a model contributes to :func:`jaxcore.tpp.evaluate` (:meth:`AbstractTPP.evaluation_terms`).

    Attributes:
        log_likelihood: ``[B]`` per-sequence log-likelihoods (nats) on ``[0, T]``.
        prediction: a :class:`NextEventPrediction` of ``[B, L]`` arrays.
        rescaled_gaps: ``[B, L]`` compensator increments between consecutive events (0 at padding): the
            time-rescaled gaps, i.i.d. Exp(1) under the true model.

    Examples:
        >>> from jaxcore.tpp import EvaluationTerms
        >>> EvaluationTerms._fields
        ('log_likelihood', 'prediction', 'rescaled_gaps')
    """

    log_likelihood: Array
    prediction: NextEventPrediction
    rescaled_gaps: Array


class AbstractTPP(eqx.Module):
    """Abstract temporal point process with ``K`` event types: likelihood, intensity, sampling, prediction.

    A model gives the conditional intensity ``lambda_k(t | H_t)`` of each type given the events strictly
    before ``t``; the log-likelihood of a sequence on ``[0, T]`` is
    ``sum_i log lambda_{m_i}(t_i) - int_0^T sum_k lambda_k(s) ds`` (nats). Every model kind implements:

    - :attr:`num_marks`: ``K``.
    - :meth:`log_likelihood` ``(batch, ...) -> [B]`` nats.
    - :meth:`intensity` ``(batch, t) -> [B, Q, K]`` at query times ``t`` ``[B, Q]`` (events per unit time).
    - :meth:`sample_next` ``(key, batch, *, horizon, num_samples, ...)`` -> :class:`NextEventSamples`: draws of
      the next event after every history prefix.
    - :meth:`predict_next` ``(key, batch, *, horizon, ...)`` -> :class:`NextEventPrediction`: the predicted
      next time and type (the key may be ``None`` for the kinds whose prediction is deterministic: the
      classical processes and jump-diffusions predict from the drift-only density; a neural TPP samples by
      thinning and needs one).
    - :meth:`generate` ``(key, batch, *, num_events, horizon, ...)`` -> :class:`GeneratedEvents`: events
      drawn one after another after each history.
    - :meth:`evaluation_terms` -> :class:`EvaluationTerms`: the likelihoods, predictions and rescaled gaps
      :func:`jaxcore.tpp.evaluate` scores, each kind in its own compiled program.

    The base holds no implementation (equinox's abstract/final pattern): subclass it and implement every
    abstract method; the family's concrete classes are final.

    References:
        Daley & Vere-Jones (2003), Ch. 7; Zhang et al., ICML 2024, Sec. 4.3-5.

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import NHP, NJDTPP, AbstractTPP, Hawkes
        >>> models = [Hawkes(0.2, 0.8, 1.0), NJDTPP(1, key=jax.random.key(0), width=4),
        ...           NHP(1, key=jax.random.key(1), hidden=4)]
        >>> all(isinstance(m, AbstractTPP) for m in models)
        True
    """

    @property
    @abc.abstractmethod
    def num_marks(self) -> int:
        """The number of event types ``K``."""

    @abc.abstractmethod
    def log_likelihood(self, batch: EventBatch, *args: Any, **kwargs: Any) -> Float[Array, " batch"]:
        """``[B]`` log-likelihoods (nats) of the sequences on ``[0, T]``."""

    @abc.abstractmethod
    def intensity(self, batch: EventBatch, t: Float[Array, "batch query"]) -> Float[Array, "batch query K"]:
        """``lambda_k(t)`` given the events strictly before ``t``, at query times ``[B, Q]``; ``[B, Q, K]``."""

    @abc.abstractmethod
    def sample_next(self, key: PRNGKeyArray, batch: EventBatch, *, horizon: float, num_samples: int = 16,
                    **kwargs: Any) -> NextEventSamples:
        """``num_samples`` draws of the next event after every history prefix, ``[B, L, num_samples]``."""

    @abc.abstractmethod
    def predict_next(self, key: PRNGKeyArray | None, batch: EventBatch, *, horizon: float,
                     **kwargs: Any) -> NextEventPrediction:
        """The predicted next time and type after every history prefix, ``[B, L]``."""

    @abc.abstractmethod
    def generate(self, key: PRNGKeyArray, batch: EventBatch, *, num_events: int, horizon: float,
                 **kwargs: Any) -> GeneratedEvents:
        """``num_events`` events drawn one after another after each history, ``[B, num_events]``."""

    @abc.abstractmethod
    def evaluation_terms(self, key: PRNGKeyArray | None, batch: EventBatch, *, horizon: float,
                         num_substeps: int = 10, num_samples: int = 1, num_grid: int = 256,
                         chunk_size: int | None = None) -> EvaluationTerms:
        """The likelihoods, next-event predictions and rescaled gaps that :func:`jaxcore.tpp.evaluate` scores."""
