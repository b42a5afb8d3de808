"""Exact posteriors over every DAG on d <= 6 nodes: a gather and a sum per DAG.

Given a local-score table ``table[j, c]`` (log marginal likelihood plus log
prior of node ``j`` having the parent set with compressed index ``c``), the
unnormalised log posterior of DAG ``G`` is ``sum_j table[j, c_j(G)]``; the
normalised posterior, edge marginals, the posterior over Markov equivalence
classes and the entropy follow by ``logsumexp`` and segment sums.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .enumerate import DAGTable, enumerate_dags
from .graphs import compress_parents, num_linear_extensions

__all__ = [
    "ExactPosterior",
    "dag_log_scores",
    "exact_posterior",
    "edge_marginals_from_posterior",
    "mec_posterior",
    "posterior_entropy",
    "log_num_orders",
]


class ExactPosterior(NamedTuple):
    """The exact posterior over all DAGs on ``d`` nodes.

    Attributes:
        log_prob: ``[n_dags]`` normalised log posterior (nats), aligned with ``dags.parents``.
        log_evidence: scalar ``logsumexp`` of the unnormalised scores.
        edge_marginals: ``[d, d]`` posterior probability of each edge ``i -> j``.
        mec_prob: ``[n_mecs]`` posterior of each Markov equivalence class.
        entropy: posterior entropy over DAGs (nats).
        mec_entropy: posterior entropy over equivalence classes (nats).
    """

    log_prob: jax.Array
    log_evidence: jax.Array
    edge_marginals: jax.Array
    mec_prob: jax.Array
    entropy: jax.Array
    mec_entropy: jax.Array


def _check_table(table, d=None):
    shape = np.shape(table)
    if len(shape) != 2 or shape[1] != 1 << (shape[0] - 1):
        raise ValueError(f"table must have shape [d, 2**(d-1)], got {shape}")
    if d is not None and shape[0] != d:
        raise ValueError(f"table has d={shape[0]} nodes but the DAGs have d={d}")
    return shape[0]


def dag_log_scores(
    table: Float[Array, "d two_pow_d_minus_1"], parents: Int[Array, "n d"]
) -> Float[Array, " n"]:
    """Unnormalised log score of each DAG: ``sum_j table[j, c_j]``.

    Args:
        table: ``[d, 2**(d-1)]`` local scores (+ local log prior).
        parents: ``[n, d]`` parent bitmasks.

    Returns:
        ``[n]`` log scores, the dtype of ``table``.

    Raises:
        ValueError: if the shapes disagree.
    """
    d = _check_table(table)
    if np.shape(parents)[-1] != d:
        raise ValueError(f"parents must have last axis d={d}, got shape {np.shape(parents)}")
    c = compress_parents(parents)
    return jnp.sum(jnp.asarray(table)[jnp.arange(d), c], axis=-1)


def _edge_marginals(prob, parents, d):
    parents = jnp.asarray(parents).astype(jnp.int32)
    rows = [prob @ ((parents >> i) & 1).astype(prob.dtype) for i in range(d)]
    return jnp.stack(rows)  # [i, j] = P(i in pa_j)


def edge_marginals_from_posterior(log_prob: Float[Array, " n"], parents: Int[Array, "n d"]) -> Float[Array, "d d"]:
    """Posterior edge probabilities ``P(i -> j) = sum_G p(G) [i in pa_j(G)]``.

    Args:
        log_prob: ``[n]`` normalised log posterior.
        parents: ``[n, d]`` parent bitmasks.

    Returns:
        ``[d, d]`` probabilities (zero diagonal).
    """
    return _edge_marginals(jnp.exp(log_prob), parents, np.shape(parents)[-1])


def mec_posterior(log_prob: Float[Array, " n"], mec: Int[Array, " n"], n_mecs: int) -> Float[Array, " n_mecs"]:
    """Posterior of each Markov equivalence class: ``sum_{G in class} p(G)`` (a segment sum)."""
    return jax.ops.segment_sum(jnp.exp(log_prob), jnp.asarray(mec), num_segments=int(n_mecs))


def posterior_entropy(log_prob: Float[Array, " n"]) -> Float[Array, ""]:
    """Entropy ``-sum p log p`` (nats) of a normalised log-probability vector (0 log 0 = 0)."""
    p = jnp.exp(log_prob)
    return -jnp.sum(jnp.where(p > 0, p * log_prob, 0.0))


def log_num_orders(parents: Int[Array, "n d"], chunk: int = 1 << 15) -> np.ndarray:
    """``log`` of the number of topological orders of each DAG (host loop over chunks).

    Add it to :func:`dag_log_scores` (with :func:`~jaxcore.causal.scores.order_modular_prior_table`)
    to get the posterior under the order-modular prior that
    :func:`~jaxcore.causal.dp.dp_edge_marginals` and order MCMC target.

    Returns:
        ``[n]`` float64 NumPy array.
    """
    parents = np.asarray(parents)
    n, d = parents.shape
    f = jax.jit(num_linear_extensions)
    out = np.empty(n, np.float64)
    for s in range(0, n, chunk):
        block = parents[s : s + chunk]
        pad = chunk - block.shape[0]
        if pad:
            block = np.concatenate([block, np.zeros((pad, d), block.dtype)])
        out[s : s + chunk - pad] = np.log(np.asarray(f(jnp.asarray(block, jnp.int32)), np.float64))[: chunk - pad]
    return out


@functools.partial(jax.jit, static_argnames="n_mecs")
def _posterior_core(table, parents, mec, extra, n_mecs):
    d = table.shape[0]
    scores = dag_log_scores(table, parents) + extra
    log_z = jax.nn.logsumexp(scores)
    log_prob = scores - log_z
    prob = jnp.exp(log_prob)
    edges = _edge_marginals(prob, parents, d)
    mec_prob = jax.ops.segment_sum(prob, mec, num_segments=n_mecs)
    ent = -jnp.sum(jnp.where(prob > 0, prob * log_prob, 0.0))
    mec_ent = -jnp.sum(jnp.where(mec_prob > 0, mec_prob * jnp.log(jnp.where(mec_prob > 0, mec_prob, 1.0)), 0.0))
    return ExactPosterior(log_prob, log_z, edges, mec_prob, ent, mec_ent)


def exact_posterior(
    table: Float[Array, "d two_pow_d_minus_1"],
    dags: DAGTable | None = None,
    *,
    log_weights: Float[Array, " n"] | None = None,
) -> ExactPosterior:
    """The exact posterior over all DAGs on ``d <= 6`` nodes.

    ``log p(G | D) = sum_j table[j, c_j(G)] + w(G) - logsumexp_G(...)``.

    Args:
        table: ``[d, 2**(d-1)]`` local log scores with the local log prior added
            (e.g. ``bge_local_scores(x) + erdos_renyi_prior_table(d, p)``).
        dags: the enumeration (default ``enumerate_dags(d)``, cached on disk).
        log_weights: optional ``[n_dags]`` extra log prior per DAG, e.g.
            :func:`log_num_orders` for the order-modular prior.

    Returns:
        :class:`ExactPosterior`.

    Raises:
        ValueError: table not ``[d, 2**(d-1)]`` or ``d > 6`` (the message names
            :func:`~jaxcore.causal.dp.dp_edge_marginals` and the MCMC samplers).
    """
    d = _check_table(table)
    if dags is None:
        dags = enumerate_dags(d)
    if dags.parents.shape[1] != d:
        raise ValueError(f"table has d={d} nodes but the DAG table has d={dags.parents.shape[1]}")
    if not isinstance(table, jax.core.Tracer) and np.any(np.isnan(np.asarray(table))):
        raise ValueError("table contains NaN")
    n = dags.parents.shape[0]
    extra = jnp.zeros((n,), jnp.asarray(table).dtype) if log_weights is None else jnp.asarray(log_weights, jnp.asarray(table).dtype)
    return _posterior_core(
        jnp.asarray(table), jnp.asarray(dags.parents, jnp.int32), jnp.asarray(dags.mec), extra,
        n_mecs=int(dags.n_mecs),
    )
