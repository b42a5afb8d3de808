"""Next-event prediction, sampling and generation as functions of a jump-diffusion (or a classical model).

The functional forms of :meth:`jaxcore.tpp.JumpDiffusion.predict_next`, ``sample_next`` and ``generate``,
with the solver's settings as keywords (``method="scan"`` by default, as :func:`jaxcore.tpp.solve`).
Every model kind also has these as methods (:class:`jaxcore.tpp.AbstractTPP`).

References:
    Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024, Sec. 4.3.
"""

from __future__ import annotations

from jaxtyping import PRNGKeyArray

from .base import GeneratedEvents, NextEventPrediction, NextEventSamples
from .events import EventBatch
from .solver import JumpDiffusion, as_jump_diffusion


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
        horizon: how far ahead to integrate (same time unit, > 0), e.g. several mean gaps.
        num_grid: steps over the horizon.
        num_substeps: steps per gap when integrating the history (``method="scan"``).
        convention: likelihood convention of the history pass (see :func:`solve`).
        method: ``"scan"`` (Euler steps, any dynamics) or ``"exact"`` (the
            closed-form :meth:`JumpDiffusion.flow` of the classical processes; stable
            at any step size).

    Returns:
        A :class:`NextEventPrediction` of ``[B, L]`` (and ``[B, L, K]``) arrays.

    Raises:
        ValueError: non-positive ``horizon`` or ``num_grid``; ``method`` not
            ``"scan"``/``"exact"`` or ``"exact"`` without a closed-form flow.

    References:
        Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024, Sec. 4.3.

    Examples:
        >>> from jaxcore.tpp import EventBatch, Poisson, predict_next
        >>> batch = EventBatch.from_sequences([[0.5, 1.0, 2.0]], T=3.0)
        >>> pred = predict_next(Poisson(2.0).jump_diffusion(), batch, horizon=10.0, method="exact")
        >>> pred.time.shape, bool(pred.valid[0, -1])
        ((1, 3), False)
    """
    return as_jump_diffusion(dynamics).predict_next(None, batch, horizon=horizon, num_grid=num_grid,
                                                    num_substeps=num_substeps, convention=convention, method=method)


def sample_next(key: PRNGKeyArray, dynamics: JumpDiffusion, batch: EventBatch, *, horizon: float,
                num_samples: int = 16, num_grid: int = 256, num_substeps: int = 10, convention: str = "window",
                method: str = "scan", stochastic: bool = False) -> NextEventSamples:
    """Sample the next event after every event of a jump-diffusion TPP (NJDTPP, the classical SDEs), drift-only
    or with the diffusion's Brownian part.

    The history is integrated as in :func:`predict_next`; after event ``i`` the drift path on
    ``num_grid`` steps over ``horizon`` gives the compensator ``Lambda(s)`` at the step ends
    (linear in between), and each draw inverts it (time rescaling): ``E ~ Exp(1)``, next time
    ``t_i + Lambda^{-1}(E)``, its type drawn with probabilities ``lambda_k / sum lambda`` at
    the start of its step; ``E > Lambda(horizon)`` censors the draw at ``t_i + horizon``
    (``accepted`` False). This samples exactly the discretised path whose density
    :func:`predict_next` integrates (not Ogata thinning: with a compensator on the grid,
    inversion needs no intensity bound and accepts every draw).

    With ``stochastic=True`` (``method="scan"``, a model whose ``stochastic`` is True) the history
    is integrated by Euler-Maruyama on one Brownian path (``num_substeps`` per gap; the prior path,
    as in the likelihood) and each draw follows its own Brownian path on the grid (the steps and
    compensator of :func:`generate` with ``stochastic=True``), so a draw samples the next event of
    the jump-diffusion process itself.

    Args:
        key: PRNG key.
        dynamics: a :class:`JumpDiffusion` (or a classical model's ``jump_diffusion()``).
        batch: ``B`` sequences.
        horizon: look-ahead (time unit, > 0).
        num_samples: draws per event.
        num_grid: steps over ``horizon``.
        num_substeps, convention, method: as :func:`predict_next`.
        stochastic: include the diffusion's Brownian part (default False: drift only).

    Returns:
        A :class:`jaxcore.tpp.NextEventSamples` of ``[B, L, num_samples]`` arrays (``type_probs``
        ``[B, L, num_samples, K]``); draws after padding are meaningless.

    Raises:
        TypeError: ``key`` is not a PRNG key; ``stochastic`` not a bool.
        ValueError: non-positive ``horizon``, ``num_samples`` or ``num_grid``; a bad ``method``;
            ``stochastic=True`` with ``method="exact"``.

    References:
        Zhang et al., ICML 2024, Sec. 4.3; E. N. Brown et al., "The time-rescaling theorem and its
        application to neural spike train data analysis", Neural Computation 14(2), 2002.

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import EventBatch, Poisson, sample_next
        >>> batch = EventBatch.from_sequences([[0.5, 1.0, 2.0]], T=3.0)
        >>> s = sample_next(jax.random.key(0), Poisson(2.0).jump_diffusion(), batch, horizon=10.0, method="exact")
        >>> s.time.shape, bool(s.accepted.all())
        ((1, 3, 16), True)
    """
    return as_jump_diffusion(dynamics).sample_next(key, batch, horizon=horizon, num_samples=num_samples,
                                                   num_grid=num_grid, num_substeps=num_substeps,
                                                   convention=convention, method=method, stochastic=stochastic)


def generate(key: PRNGKeyArray, dynamics: JumpDiffusion, batch: EventBatch, *, num_events: int, horizon: float,
             num_grid: int = 256, num_substeps: int = 10, convention: str = "window", method: str = "scan",
             stochastic: bool = False) -> GeneratedEvents:
    """Multi-step generation for a jump-diffusion TPP (NJDTPP, the classical SDEs): ``num_events``
    events after each sequence's last event, one :func:`sample_next` draw at a time; drift-only, or
    with the diffusion's Brownian part (``stochastic=True``).

    From the state after the last event (the initial state at ``t = 0`` for an empty history)
    the drift path on ``num_grid`` steps over ``horizon`` is inverted at ``E ~ Exp(1)``; the
    state is carried to the drawn time within its step, the type drawn with probabilities
    ``lambda_k / sum lambda`` there, the jump applied, and the next draw starts from that
    event. A draw beyond ``horizon`` ends that sequence's generation (``accepted`` False from
    there on). Vmapped over sequences; one ``lax.scan`` over the new events.

    With ``stochastic=True`` (``method="scan"``, a model whose ``stochastic`` is True) the
    log-intensity follows its SDE ``d eta = f dt + g dW`` (Zhang et al. 2024, Eq. 5): the history by
    Euler-Maruyama with ``num_substeps`` per gap (its own Brownian path), each draw's grid path by
    Euler-Maruyama steps ``eta + f h + g sqrt(h) z`` with the left-point compensator
    ``h sum exp(eta)``, and the state at the drawn time inside a step by the Brownian bridge between
    the step's ends. Each draw of ``key`` is then a sample of the discretised jump-diffusion process
    itself (the grid path is re-drawn from the state after each event). A model without diffusion
    (``stochastic`` False) is generated drift-only either way.

    Args:
        key: PRNG key.
        dynamics: a :class:`JumpDiffusion`.
        batch: ``B`` histories.
        num_events: events to generate per sequence (>= 1).
        horizon, num_grid, num_substeps, convention, method: as :func:`sample_next`.
        stochastic: include the diffusion's Brownian part (default False: drift only).

    Returns:
        A :class:`jaxcore.tpp.GeneratedEvents` of ``[B, num_events]`` arrays.

    Raises:
        As :func:`sample_next`; ``num_events < 1``; ``stochastic`` not a bool (TypeError) or
        ``stochastic=True`` with ``method="exact"`` (ValueError: the exact flow is the drift's).

    References:
        Zhang et al., ICML 2024, Sec. 4.3; Brown et al., Neural Computation 14(2), 2002.

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import EventBatch, Poisson, generate
        >>> batch = EventBatch.from_sequences([[0.5, 1.0]], T=1.0)
        >>> g = generate(jax.random.key(0), Poisson(2.0).jump_diffusion(), batch, num_events=3, horizon=20.0,
        ...              method="exact")
        >>> g.time.shape, bool((g.time[0] > 1.0).all())
        ((1, 3), True)
    """
    return as_jump_diffusion(dynamics).generate(key, batch, num_events=num_events, horizon=horizon, num_grid=num_grid,
                                                num_substeps=num_substeps, convention=convention, method=method,
                                                stochastic=stochastic)
