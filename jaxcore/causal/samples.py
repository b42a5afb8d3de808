"""The weighted-DAG-sample format returned by every approximate posterior in :mod:`jaxcore.causal`."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .enumerate import DAGTable, dag_keys
from .graphs import adjacency_to_parents, is_dag

__all__ = ["DAGSamples", "make_samples", "dag_distribution", "mec_distribution"]


class DAGSamples(NamedTuple):
    """A weighted sample of DAGs (an approximate posterior).

    Attributes:
        adjacency: ``[n, d, d]`` int32 0/1, ``[k, i, j] = 1`` for ``i -> j`` in sample ``k``.
        weights: ``[n]`` non-negative weights summing to 1 (``1/n`` for MCMC draws).
    """

    adjacency: jax.Array
    weights: jax.Array


def make_samples(adjacency: Int[Array, "n d d"], weights: Float[Array, " n"] | None = None) -> DAGSamples:
    """Build a :class:`DAGSamples`, normalising ``weights`` (uniform if None).

    Args:
        adjacency: ``[n, d, d]`` 0/1 (nonzero = edge) adjacency matrices, each acyclic.
        weights: optional ``[n]`` non-negative weights with a positive sum.

    Returns:
        :class:`DAGSamples` with int32 0/1 adjacency and weights summing to 1.

    Raises:
        ValueError: if ``adjacency`` is not ``[n, d, d]``, a sample is cyclic (checked when the
            input is concrete, not under ``jit``), or weights have the wrong length / are
            negative / sum to zero.
    """
    a = jnp.asarray(adjacency)
    if a.ndim != 3 or a.shape[1] != a.shape[2] or a.shape[0] < 1:
        raise ValueError(f"adjacency must have shape [n, d, d] with n >= 1, got {a.shape}")
    if not isinstance(a, jax.core.Tracer):
        ok = np.asarray(is_dag((a != 0).astype(jnp.int32)))
        if not ok.all():
            raise ValueError(f"adjacency must hold DAGs; sample {int(np.argmin(ok))} has a directed cycle or self-loop")
    if weights is None:
        w = jnp.full((a.shape[0],), 1.0 / a.shape[0])
    else:
        w = jnp.asarray(weights)
        if w.shape != (a.shape[0],):
            raise ValueError(f"weights must have shape [{a.shape[0]}], got {w.shape}")
        if not isinstance(w, jax.core.Tracer):
            wn = np.asarray(w)
            if np.any(~np.isfinite(wn)) or np.any(wn < 0) or wn.sum() <= 0:
                raise ValueError(f"weights must be finite, non-negative and sum to > 0, got sum {wn.sum()!r}")
        w = w / jnp.sum(w)
    return DAGSamples((a != 0).astype(jnp.int32), w)


def dag_distribution(samples: DAGSamples, dags: DAGTable) -> Float[Array, " n_dags"]:
    """The sample's distribution over the enumerated DAGs (weights summed per DAG).

    Args:
        samples: :class:`DAGSamples` on ``d <= 6`` nodes (every sample must be acyclic).
        dags: ``enumerate_dags(d)``.

    Returns:
        ``[n_dags]`` probabilities aligned with ``dags.parents``.

    Raises:
        ValueError: if ``d`` differs from the table's or a sample with positive weight is not
            among the enumerated DAGs (e.g. cyclic); checked when the input is concrete (under ``jit`` such a sample
            would be counted on a wrong DAG, so validate with :func:`make_samples` first).
    """
    d = samples.adjacency.shape[-1]
    if dags.parents.shape[1] != d:
        raise ValueError(f"samples have d={d} nodes but dags enumerates d={dags.parents.shape[1]}")
    keys = dag_keys(adjacency_to_parents(samples.adjacency))
    table_keys = jnp.asarray(dags.keys)
    idx = jnp.searchsorted(table_keys, keys)
    idx = jnp.clip(idx, 0, dags.keys.shape[0] - 1)
    if not isinstance(keys, jax.core.Tracer):
        found = np.asarray((table_keys[idx] == keys) | (samples.weights == 0))  # zero-weight (e.g. DiBS cyclic) draws ignored
        if not found.all():
            raise ValueError(f"samples.adjacency[{int(np.argmin(found))}] is not a DAG on d={d} nodes "
                             "(not among the enumerated DAGs)")
    return jax.ops.segment_sum(samples.weights, idx, num_segments=dags.keys.shape[0])


def mec_distribution(dag_probs: Float[Array, " n_dags"], dags: DAGTable) -> Float[Array, " n_mecs"]:
    """Sum a distribution over DAGs into one over Markov equivalence classes."""
    return jax.ops.segment_sum(dag_probs, jnp.asarray(dags.mec), num_segments=int(dags.n_mecs))
