"""The synthetic event sets of Zhang et al. (ICML 2024, Sec. 5.1), sampled from the classical models.

Each generator is a named function of its own (never a stand-in for real data): it samples
``num_sequences`` sequences on ``[0, T]`` from the model with the paper's parameters and refuses
to return a truncated set. The key comes first; the sizes are keyword-only (the models'
``simulate(key, T, max_events, num_sequences)`` takes them positionally).

References:
    S. Zhang, C. Zhou, Y. Liu, P. Zhang, X. Lin, Z.-M. Ma, "Neural Jump-Diffusion Temporal
    Point Processes", ICML 2024, Sec. 5.1 (Poisson lambda = 1; Hawkes mu = 0.2, alpha = 0.8,
    beta = 1.0; self-correcting mu = 0.5, alpha = 0.2).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from jaxtyping import PRNGKeyArray

from jaxcore._util import check_int, check_key, check_scalar, expected

from .events import EventBatch
from .hawkes import Hawkes
from .poisson import Poisson
from .self_correcting import SelfCorrecting


def _sample(model: Any, key: PRNGKeyArray, num_sequences: int, T: float, max_events: int) -> EventBatch:
    check_key(key)
    num_sequences = check_int(num_sequences, "num_sequences", minimum=1)
    T = check_scalar(T, "T", positive=True)
    max_events = check_int(max_events, "max_events", minimum=1)
    batch, overflow = model.simulate(key, T, max_events, num_sequences)
    overflow = np.asarray(overflow)
    if bool(np.any(overflow)):
        raise ValueError(expected("max_events", f"a buffer large enough for every sequence (sequence "
                                                f"{int(np.argmax(overflow))} overflowed; raise it)", max_events))
    return batch


def synthetic_poisson(key: PRNGKeyArray, *, num_sequences: int = 64, T: float = 100.0,
                      max_events: int = 200) -> EventBatch:
    """The paper's synthetic Poisson set: a homogeneous Poisson process of rate ``lambda = 1``.

    Args:
        key: PRNG key.
        num_sequences: number of sequences ``B``.
        T: window end (time units, > 0).
        max_events: buffer length ``L`` per sequence.

    Returns:
        An :class:`EventBatch` ``[B, L]`` with ``num_marks = 1``.

    Raises:
        TypeError: ``key`` is not a PRNG key.
        ValueError: non-positive sizes or ``T``; a sequence has more than ``max_events`` events.

    References:
        Zhang et al., ICML 2024, Sec. 5.1.

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import synthetic_poisson
        >>> synthetic_poisson(jax.random.key(0), num_sequences=2, T=10.0, max_events=60).times.shape
        (2, 60)
    """
    return _sample(Poisson(1.0), key, num_sequences, T, max_events)


def synthetic_hawkes(key: PRNGKeyArray, *, num_sequences: int = 64, T: float = 100.0,
                     max_events: int = 400) -> EventBatch:
    """The paper's synthetic Hawkes set: exponential Hawkes ``mu = 0.2, alpha = 0.8, beta = 1.0``.

    Args:
        key: PRNG key.
        num_sequences: number of sequences ``B``.
        T: window end (time units, > 0).
        max_events: buffer length ``L`` per sequence.

    Returns:
        An :class:`EventBatch` ``[B, L]`` with ``num_marks = 1``.

    Raises:
        TypeError: ``key`` is not a PRNG key.
        ValueError: non-positive sizes or ``T``; a sequence has more than ``max_events`` events.

    References:
        Zhang et al., ICML 2024, Sec. 5.1.

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import synthetic_hawkes
        >>> synthetic_hawkes(jax.random.key(0), num_sequences=2, T=10.0, max_events=60).num_sequences
        2
    """
    return _sample(Hawkes(0.2, 0.8, 1.0), key, num_sequences, T, max_events)


def synthetic_self_correcting(key: PRNGKeyArray, *, num_sequences: int = 64, T: float = 100.0,
                              max_events: int = 400) -> EventBatch:
    """The paper's synthetic self-correcting set: ``lambda(t) = exp(0.5 t - 0.2 N(t-))``.

    Args:
        key: PRNG key.
        num_sequences: number of sequences ``B``.
        T: window end (time units, > 0).
        max_events: buffer length ``L`` per sequence.

    Returns:
        An :class:`EventBatch` ``[B, L]`` with ``num_marks = 1``.

    Raises:
        TypeError: ``key`` is not a PRNG key.
        ValueError: non-positive sizes or ``T``; a sequence has more than ``max_events`` events.

    References:
        Zhang et al., ICML 2024, Sec. 5.1; Isham & Westcott (1979).

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import synthetic_self_correcting
        >>> synthetic_self_correcting(jax.random.key(0), num_sequences=2, T=10.0, max_events=60).max_events
        60
    """
    return _sample(SelfCorrecting(0.5, 0.2), key, num_sequences, T, max_events)
