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

from jaxcore._util import check_auto_mesh, check_int, expected, is_concrete

from ._checks import check_acyclic, check_bitmasks, check_log_prob
from .enumerate import DAGTable, enumerate_dags
from .graphs import _acyclic_residual_jit, _compress, _num_linear_extensions, _parents_array, _parents_to_adj_jit
from .scores import ScoreTable, as_score_table

__all__ = [
    "ExactPosterior",
    "dag_log_scores",
    "exact_posterior",
    "edge_marginals_from_posterior",
    "mec_posterior",
    "mec_log_posterior",
    "posterior_entropy",
    "log_num_orders",
]


class ExactPosterior(NamedTuple):
    """The exact posterior over all DAGs on ``d`` nodes.

    Attributes:
        log_prob: ``[num_dags]`` normalised log posterior (nats), aligned with ``dags.parents``.
        log_evidence: scalar ``logsumexp`` of the unnormalised scores.
        edge_marginals: ``[d, d]`` posterior probability of each edge ``i -> j``.
        mec_prob: ``[num_mecs]`` posterior of each Markov equivalence class.
        entropy: posterior entropy over DAGs (nats).
        mec_entropy: posterior entropy over equivalence classes (nats).

    Examples:
        >>> from jaxcore.causal import ExactPosterior
        >>> ExactPosterior._fields  # doctest: +ELLIPSIS
        (...)
    """

    log_prob: jax.Array
    log_evidence: jax.Array
    edge_marginals: jax.Array
    mec_prob: jax.Array
    entropy: jax.Array
    mec_entropy: jax.Array


def _dag_log_scores(table, parents):
    d = table.shape[0]
    c = _compress(parents)
    return jnp.sum(table[jnp.arange(d), c], axis=-1)


_dag_log_scores_jit = jax.jit(_dag_log_scores)


def _check_dags(dags, d=None, name="dags"):
    if not isinstance(dags, DAGTable):
        raise TypeError(expected(name, "a DAGTable (from enumerate_dags)", type(dags).__name__, raw=True))
    if d is not None and dags.parents.shape[1] != d:
        raise ValueError(expected(name, f"an enumeration of DAGs on d={d} nodes", f"d={dags.parents.shape[1]}",
                                  raw=True))
    n = np.shape(dags.parents)[0]
    mec = np.asarray(dags.mec)
    if mec.shape != (n,) or np.shape(dags.keys) != (n,):
        raise ValueError(expected(f"{name}.mec", f"shape [{n}] like {name}.parents", f"shape {mec.shape}", raw=True))
    if n and (mec.min() < 0 or mec.max() >= int(dags.num_mecs)):
        raise ValueError(expected(f"{name}.mec", f"class ids in [0, num_mecs={int(dags.num_mecs)})",
                                  f"range [{mec.min()}, {mec.max()}]", raw=True))
    return dags


def _check_log_prob(log_prob, n, name="log_prob", normalised=True):
    return check_log_prob(log_prob, name, n, normalised=normalised)


def dag_log_scores(table: ScoreTable, parents: Int[Array, "n d"]) -> Float[Array, " n"]:
    """Unnormalised log score of each DAG: ``sum_j table[j, c_j]``.

    Args:
        table: :class:`ScoreTable` of local scores (+ local log prior).
        parents: ``[n, d]`` parent bitmasks.

    Returns:
        ``[n]`` log scores (nats), the dtype of the table.

    Raises:
        TypeError: ``table`` is not a :class:`ScoreTable`.
        ValueError: if the shapes disagree, or a bitmask is out of range (``< 0``, ``>= 2**d``, or
            node ``j``'s own bit set; checked when concrete, never clamped).

    References:
        D. Heckerman, D. Geiger, D. M. Chickering, "Learning Bayesian networks", Machine Learning 1995 (decomposable scores).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import dag_log_scores, sparsity_prior_table
        >>> dag_log_scores(sparsity_prior_table(3, 1.0), np.array([[0, 1, 3], [0, 0, 0]])).tolist()
        [-3.0, 0.0]
    """
    t = as_score_table(table)
    raw = parents
    parents = _parents_array(parents)
    if parents.ndim < 1 or parents.shape[-1] != t.d:
        raise ValueError(expected("parents", f"last axis d={t.d}", f"shape {tuple(parents.shape)}", raw=True))
    check_bitmasks(raw, "parents")
    check_auto_mesh(parents, "parents")
    return _dag_log_scores_jit(t.table, parents)


def _edge_marginals(prob, parents, d):
    parents = jnp.asarray(parents).astype(jnp.int32)
    rows = [prob @ ((parents >> i) & 1).astype(prob.dtype) for i in range(d)]
    return jnp.stack(rows)  # [i, j] = P(i in pa_j)


@jax.jit
def _edge_marginals_from_log(log_prob, parents):
    return _edge_marginals(jnp.exp(log_prob), parents, parents.shape[-1])


def edge_marginals_from_posterior(log_prob: Float[Array, " n"], parents: Int[Array, "n d"]) -> Float[Array, "d d"]:
    """Posterior edge probabilities ``P(i -> j) = sum_G p(G) [i in pa_j(G)]``.

    Args:
        log_prob: ``[n]`` normalised log posterior (nats).
        parents: ``[n, d]`` parent bitmasks.

    Returns:
        ``[d, d]`` probabilities (zero diagonal).

    Raises:
        ValueError: shapes disagree, ``log_prob`` has NaN / ``+inf`` or is not normalised
            (``logsumexp`` 0 within ``max(1e-3, 16 eps)``), or a bitmask is out of range.

    References:
        A. Karimi Mamaghan et al., "Challenges and considerations in the evaluation of Bayesian causal discovery", ICML 2024.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import edge_marginals_from_posterior
        >>> lp = np.log(np.array([0.25, 0.75]))
        >>> edge_marginals_from_posterior(lp, np.array([[0, 1], [0, 0]])).tolist()
        [[0.0, 0.25], [0.0, 0.0]]
    """
    raw = parents
    parents = _parents_array(parents)
    if parents.ndim != 2:
        raise ValueError(expected("parents", "shape [n, d]", f"shape {tuple(parents.shape)}", raw=True))
    check_bitmasks(raw, "parents")
    return _edge_marginals_from_log(_check_log_prob(log_prob, parents.shape[0]), parents)


@functools.partial(jax.jit, static_argnames="num_mecs")
def _mec_sum(log_prob, mec, num_mecs):
    return jax.ops.segment_sum(jnp.exp(log_prob), mec, num_segments=num_mecs)


@functools.partial(jax.jit, static_argnames="num_mecs")
def _mec_logsumexp(log_prob, mec, num_mecs):
    m = jax.ops.segment_max(log_prob, mec, num_segments=num_mecs)
    m_safe = jnp.where(jnp.isfinite(m), m, 0.0)
    s = jax.ops.segment_sum(jnp.exp(log_prob - m_safe[mec]), mec, num_segments=num_mecs)
    return jnp.log(s) + m_safe


def mec_posterior(log_prob: Float[Array, " num_dags"], dags: DAGTable) -> Float[Array, " num_mecs"]:
    """Posterior of each Markov equivalence class: ``sum_{G in class} p(G)`` (a segment sum).

    Args:
        log_prob: ``[num_dags]`` normalised log posterior aligned with ``dags.parents``.
        dags: :func:`enumerate_dags` of the same ``d``.

    Returns:
        ``[num_mecs]`` probabilities.

    Raises:
        TypeError: ``dags`` is not a :class:`DAGTable`.
        ValueError: ``log_prob`` has the wrong length, a NaN / ``+inf`` entry or is not normalised
            (``logsumexp`` 0 within ``max(1e-3, 16 eps)``); ``dags.mec`` out of ``[0, num_mecs)``.

    References:
        A. Karimi Mamaghan et al., "Challenges and considerations in the evaluation of Bayesian causal discovery", ICML 2024. T. Verma, J. Pearl, UAI 1990 (equivalence classes).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import enumerate_dags, mec_posterior
        >>> dags = enumerate_dags(2)  # 3 DAGs, 2 classes: empty, and 0 -> 1 ~ 1 -> 0
        >>> sorted(np.round(np.asarray(mec_posterior(np.log(np.full(3, 1 / 3)), dags)), 4).tolist())
        [0.3333, 0.6667]
    """
    dags = _check_dags(dags)
    lp = _check_log_prob(log_prob, dags.parents.shape[0])
    return _mec_sum(lp, jnp.asarray(dags.mec), num_mecs=int(dags.num_mecs))


def mec_log_posterior(log_prob: Float[Array, " num_dags"], dags: DAGTable) -> Float[Array, " num_mecs"]:
    """Log posterior of each Markov equivalence class: ``logsumexp_{G in class} log p(G)``.

    A segment ``logsumexp`` (per-class maximum subtracted first), so classes whose probability
    underflows in :func:`mec_posterior` keep a finite log probability; use it as ``log_q`` of
    :func:`~jaxcore.causal.kl_divergence`.

    Args:
        log_prob: ``[num_dags]`` normalised log posterior (nats) aligned with ``dags.parents``.
        dags: :func:`enumerate_dags` of the same ``d``.

    Returns:
        ``[num_mecs]`` log probabilities (nats), dtype of ``log_prob``.

    Raises:
        TypeError: ``dags`` is not a :class:`DAGTable`.
        ValueError: ``log_prob`` has the wrong length, a NaN / ``+inf`` entry or is not normalised
            (``logsumexp`` 0 within ``max(1e-3, 16 eps)``); ``dags.mec`` out of ``[0, num_mecs)``.

    References:
        A. Karimi Mamaghan et al., "Challenges and considerations in the evaluation of Bayesian causal discovery", ICML 2024. T. Verma, J. Pearl, UAI 1990 (equivalence classes).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import enumerate_dags, mec_log_posterior
        >>> dags = enumerate_dags(2)
        >>> lp = np.array([0.0, -2000.0, -2000.0])  # exp underflows for both one-edge DAGs
        >>> out = np.asarray(mec_log_posterior(lp, dags))
        >>> sorted(np.round(out, 3).tolist())
        [-1999.307, 0.0]
    """
    dags = _check_dags(dags)
    lp = _check_log_prob(log_prob, dags.parents.shape[0])
    return _mec_logsumexp(lp, jnp.asarray(dags.mec), num_mecs=int(dags.num_mecs))


@jax.jit
def _entropy(log_prob):
    p = jnp.exp(log_prob)
    return -jnp.sum(jnp.where(p > 0, p * log_prob, 0.0))


def posterior_entropy(log_prob: Float[Array, " n"]) -> Float[Array, ""]:
    """Entropy ``-sum p log p`` (nats) of a normalised log-probability vector (0 log 0 = 0).

    Args:
        log_prob: ``[n]`` normalised log probabilities.

    Returns:
        scalar entropy (nats).

    Raises:
        ValueError: ``log_prob`` is not 1-d, has a NaN / ``+inf`` entry or is not normalised
            (``logsumexp`` 0 within ``max(1e-3, 16 eps)``).

    References:
        A. Karimi Mamaghan et al., "Challenges and considerations in the evaluation of Bayesian causal discovery", ICML 2024. (the posterior entropy as a difficulty measure)

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import posterior_entropy
        >>> round(float(posterior_entropy(np.log(np.full(4, 0.25)))), 4)
        1.3863
    """
    return _entropy(check_log_prob(log_prob, "log_prob"))


_num_linear_extensions_jit = jax.jit(_num_linear_extensions)


def log_num_orders(parents: Int[Array, "n d"], chunk_size: int = 1 << 15) -> np.ndarray:
    """``log`` of the number of topological orders of each DAG (jitted chunks of ``chunk_size`` DAGs).

    Add it to :func:`dag_log_scores` (with :func:`~jaxcore.causal.order_modular_prior_table`)
    to get the posterior under the order-modular prior that
    :func:`~jaxcore.causal.exact_edge_marginals` and order MCMC target.

    Args:
        parents: ``[n, d]`` parent bitmasks of DAGs, ``d <= 20``.
        chunk_size: DAGs per compiled call (memory bound: ``chunk_size * 2**d`` floats).

    Returns:
        ``[n]`` float64 NumPy array (nats).

    Raises:
        ValueError: ``parents`` not ``[n, d]``, ``d > 20``, a bitmask out of range, a cyclic graph,
            bad ``chunk_size``.

    References:
        N. Friedman, D. Koller, "Being Bayesian about network structure", Machine Learning 2003 (the order-modular prior).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import log_num_orders
        >>> np.exp(log_num_orders(np.array([[0, 0, 0], [0, 1, 2]]), chunk_size=4)).round(3).tolist()
        [6.0, 1.0]
    """
    if parents is None:
        raise TypeError(expected("parents", "an integer array [n, d]", "None", raw=True))
    parents = np.asarray(parents)
    if parents.ndim != 2:
        raise ValueError(expected("parents", "shape [n, d]", f"shape {parents.shape}", raw=True))
    if parents.shape[1] > 20:
        raise ValueError(expected("parents", "d <= 20 nodes", f"d={parents.shape[1]}", raw=True))
    check_bitmasks(parents, "parents")
    if parents.size:
        p = jnp.asarray(parents, jnp.int32)
        check_acyclic(_parents_to_adj_jit(p), "parents", ok=_acyclic_residual_jit(p) == 0)
    parents = parents.astype(np.int32)
    chunk = check_int(chunk_size, "chunk_size", 1)
    n, d = parents.shape
    f = _num_linear_extensions_jit
    out = np.empty(n, np.float64)
    for s in range(0, n, chunk):
        block = parents[s : s + chunk]
        pad = chunk - block.shape[0]
        if pad:
            block = np.concatenate([block, np.zeros((pad, d), block.dtype)])
        out[s : s + chunk - pad] = np.log(np.asarray(f(jnp.asarray(block, jnp.int32)), np.float64))[: chunk - pad]
    return out


@functools.partial(jax.jit, static_argnames="num_mecs")
def _posterior_core(table, parents, mec, extra, num_mecs):
    d = table.shape[0]
    scores = _dag_log_scores(table, parents) + extra
    log_z = jax.nn.logsumexp(scores)
    log_prob = scores - log_z
    prob = jnp.exp(log_prob)
    edges = _edge_marginals(prob, parents, d)
    mec_prob = jax.ops.segment_sum(prob, mec, num_segments=num_mecs)
    ent = -jnp.sum(jnp.where(prob > 0, prob * log_prob, 0.0))
    mec_ent = -jnp.sum(jnp.where(mec_prob > 0, mec_prob * jnp.log(jnp.where(mec_prob > 0, mec_prob, 1.0)), 0.0))
    return ExactPosterior(log_prob, log_z, edges, mec_prob, ent, mec_ent)


def exact_posterior(
    table: ScoreTable,
    dags: DAGTable | None = None,
    *,
    log_weights: Float[Array, " n"] | None = None,
) -> ExactPosterior:
    """The exact posterior over all DAGs on ``d <= 6`` nodes.

    ``log p(G | D) = sum_j table[j, c_j(G)] + w(G) - logsumexp_G(...)``.

    Args:
        table: :class:`ScoreTable` of local log scores with the local log prior added
            (e.g. ``bge_local_scores(x) + erdos_renyi_prior_table(d, p)``).
        dags: the enumeration (default ``enumerate_dags(d)``, cached on disk).
        log_weights: optional ``[num_dags]`` extra log prior per DAG, e.g.
            :func:`log_num_orders` for the order-modular prior.

    Returns:
        :class:`ExactPosterior`.

    Raises:
        TypeError: ``table`` is not a :class:`ScoreTable`.
        ValueError: ``d > 6`` (the message names :func:`~jaxcore.causal.exact_edge_marginals`
            and the MCMC samplers), ``dags`` / ``log_weights`` of another size, ``log_weights`` with
            a NaN or ``+inf`` entry (``-inf`` excludes a DAG), or ``dags.mec`` out of range.

    References:
        A. Karimi Mamaghan et al., "Challenges and considerations in the evaluation of Bayesian
        causal discovery", ICML 2024 (the exact posterior as the reference).

    Examples:
        >>> import math
        >>> from jaxcore.causal import exact_posterior, uniform_prior_table
        >>> post = exact_posterior(uniform_prior_table(3))  # 25 DAGs, equally likely
        >>> math.isclose(float(post.entropy), math.log(25), rel_tol=1e-5)
        True
    """
    t = as_score_table(table)
    d = t.d
    dags = enumerate_dags(d) if dags is None else _check_dags(dags, d)
    n = dags.parents.shape[0]
    dtype = t.table.dtype
    if log_weights is None:
        extra = jnp.zeros((n,), dtype)
    else:
        extra = jnp.asarray(_check_log_prob(log_weights, n, "log_weights", normalised=False), dtype)
    out = _posterior_core(
        t.table, jnp.asarray(dags.parents, jnp.int32), jnp.asarray(dags.mec), extra,
        num_mecs=int(dags.num_mecs),
    )
    if is_concrete(out.log_evidence) and not bool(jnp.isfinite(out.log_evidence)):
        name = "table" if log_weights is None else "log_weights"
        raise ValueError(expected(name, "at least one DAG with a finite log score (table + log_weights)",
                                  "-inf for every DAG", raw=True))
    return out
