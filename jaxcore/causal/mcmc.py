"""Structure MCMC and order MCMC over DAGs as ``lax.scan`` chains, ``vmap``-ed over chains.

Both samplers read a local-score table ``[d, 2**(d-1)]`` (log marginal
likelihood plus local log prior) and return :class:`~jaxcore.causal.samples.DAGSamples`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxcore._util import Progress, ProgressArg, check_int, check_key, check_progress, expected

from ._checks import host_array
from .dynamic_programming import _subset_lse
from .graphs import _acyclic_residual, _adj_to_parents, _check_square, _compress, _expand, _is_dag_jit, _parents_to_adj
from .samples import DAGSamples
from .scores import ScoreTable, as_score_table

__all__ = ["MCMCResult", "structure_mcmc", "order_mcmc"]


class MCMCResult(NamedTuple):
    """Result of :func:`structure_mcmc` and :func:`order_mcmc`.

    Attributes:
        samples: :class:`DAGSamples` of ``num_chains * num_samples`` equally weighted draws,
            chain-major (draw ``k`` of chain ``c`` at ``c * num_samples + k``).
        acceptance_rate: ``[num_chains]`` fraction of accepted moves after burn-in.
        log_scores: ``[num_chains, num_samples]`` trace of the chain's log score at each kept
            draw (nats): the DAG's ``sum_j table[j, pa_j]`` for structure MCMC, the order's
            ``sum_j logsumexp_{pa ⊆ pred(j)} table[j, pa]`` for order MCMC.

    Examples:
        >>> from jaxcore.causal import MCMCResult
        >>> MCMCResult._fields  # doctest: +ELLIPSIS
        (...)
    """

    samples: DAGSamples
    acceptance_rate: Float[Array, " num_chains"]
    log_scores: Float[Array, "num_chains num_samples"]


def _check(key, table, num_chains, num_samples, thin, burn_in):
    check_key(key)
    t = as_score_table(table)
    if t.d < 2:
        raise ValueError(expected("table", "d >= 2 nodes for MCMC", f"d={t.d}", raw=True))
    check_int(num_chains, "num_chains", 1)
    check_int(num_samples, "num_samples", 1)
    check_int(thin, "thin", 1)
    check_int(burn_in, "burn_in", 0)
    return t


def _graph_score(table, parents):
    d = table.shape[0]
    return jnp.sum(table[jnp.arange(d), _compress(parents)])


def _as_samples(parents, dtype):
    d = parents.shape[-1]
    adj = _parents_to_adj(parents.reshape(-1, d))
    return DAGSamples(adj, jnp.full((adj.shape[0],), 1.0 / adj.shape[0], dtype))


@functools.partial(jax.jit, static_argnames=("num_chains", "num_samples", "thin", "burn_in", "progress"))
def _structure(key, table, init_parents, num_chains, num_samples, thin, burn_in, progress=False):
    d = table.shape[0]
    prog = Progress(progress, num_samples, "structure MCMC")

    def step(state, k):
        parents, score = state
        k1, k2 = jax.random.split(k)
        pair = jax.random.randint(k1, (), 0, d * (d - 1))
        i = pair // (d - 1)
        jj = pair % (d - 1)
        j = jj + (jj >= i)
        bi = jnp.int32(1) << i
        bj = jnp.int32(1) << j
        has_ij = (parents[j] & bi) != 0
        has_ji = (parents[i] & bj) != 0
        # delete i->j | reverse j->i into i->j | add i->j  (a symmetric proposal)
        pj = jnp.where(has_ij, parents[j] & ~bi, parents[j] | bi)
        pi = jnp.where(has_ji & ~has_ij, parents[i] & ~bj, parents[i])
        new = parents.at[j].set(pj).at[i].set(pi)
        acyclic = _acyclic_residual(new) == 0
        new_score = _graph_score(table, new)
        accept = acyclic & (jnp.log(jax.random.uniform(k2)) < new_score - score)
        parents = jnp.where(accept, new, parents)
        score = jnp.where(accept, new_score, score)
        return (parents, score), accept

    def chain(k, p0):
        state = (p0, _graph_score(table, p0))
        kb, ks = jax.random.split(k)
        state, _ = jax.lax.scan(step, state, jax.random.split(kb, burn_in)) if burn_in else (state, None)

        def draw(state, xs):
            kk, idx = xs
            state, acc = jax.lax.scan(step, state, jax.random.split(kk, thin))
            prog.update(idx)  # the draw index is shared by all chains: one report per draw, not per chain
            return state, (state[0], state[1], jnp.mean(acc))

        _, (ps, scores, acc) = jax.lax.scan(draw, state, (jax.random.split(ks, num_samples), jnp.arange(num_samples)))
        return ps, jnp.mean(acc), scores

    keys = jax.random.split(key, num_chains)
    ps, acc, scores = jax.vmap(chain)(keys, init_parents)
    return MCMCResult(_as_samples(ps, table.dtype), acc, scores)


def structure_mcmc(
    key: jax.Array,
    table: ScoreTable,
    *,
    num_chains: int = 4,
    num_samples: int = 1000,
    thin: int = 10,
    burn_in: int = 1000,
    init: jax.Array | None = None,
    progress: ProgressArg = False,
) -> MCMCResult:
    """Structure MCMC (Madigan & York 1995) with add / delete / reverse moves.

    Each step draws an ordered pair ``(i, j)`` uniformly; it deletes ``i -> j`` if present,
    reverses ``j -> i`` into ``i -> j`` if that is present, else adds ``i -> j``. The proposal
    is symmetric, cyclic proposals are rejected, and a move is accepted with probability
    ``min(1, exp(score' - score))``, so the chain targets ``p(G | D) ∝ exp(sum_j table[j, pa_j])``.
    Chains are ``lax.scan`` loops ``vmap``-ed over chains, in one jitted program per
    (``d``, counts).

    Args:
        key: PRNG key (``jax.random.key``).
        table: :class:`ScoreTable` of local log scores + local log prior (``-inf`` excludes a
            parent set), ``d >= 2``.
        num_chains: independent chains, run with ``vmap``.
        num_samples: draws kept per chain.
        thin: steps between kept draws.
        burn_in: steps discarded first.
        init: optional ``[num_chains, d, d]`` or ``[d, d]`` starting DAGs (default: empty graphs).
        progress: ``False`` (default), ``True`` (a progress bar over the kept draws) or
            ``fn(draws_done, {})``, called on the host about 100 times per run.

    Returns:
        :class:`MCMCResult`: ``num_chains * num_samples`` equally weighted draws, the per-chain
        acceptance rates and the log-score trace.

    Raises:
        TypeError: ``key`` is not a PRNG key; ``table`` is not a :class:`ScoreTable`; ``progress`` is
            neither a bool nor a callable.
        ValueError: ``d < 2``, non-positive counts, or a cyclic / wrongly shaped ``init``.

    References:
        D. Madigan, J. York, "Bayesian graphical models for discrete data", International
        Statistical Review 1995; P. Giudici, R. Castelo, "Improving Markov chain Monte Carlo
        model search for data mining", Machine Learning 2003 (edge reversal).

    Examples:
        >>> import jax, numpy as np
        >>> from jaxcore.causal import bge_local_scores, structure_mcmc
        >>> x = np.random.default_rng(0).normal(size=(50, 3))
        >>> res = structure_mcmc(jax.random.key(0), bge_local_scores(x), num_chains=2, num_samples=20,
        ...                      thin=2, burn_in=10)
        >>> res.samples.adjacency.shape, res.log_scores.shape, res.acceptance_rate.shape
        ((40, 3, 3), (2, 20), (2,))
    """
    t = _check(key, table, num_chains, num_samples, thin, burn_in)
    d = t.d
    if init is None:
        p0 = jnp.zeros((num_chains, d), jnp.int32)
    else:
        _check_square(init, "init")
        a = jnp.asarray(host_array(init, "init"))
        if a.shape[-2:] != (d, d) or a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[0] != num_chains):
            raise ValueError(expected("init", f"shape [num_chains, d, d] or [d, d] with num_chains={num_chains}, "
                                              f"d={d}", f"shape {a.shape}", raw=True))
        a = (a != 0).astype(jnp.int32)
        p0 = jnp.broadcast_to(_adj_to_parents(a), (num_chains, d))
        if not bool(jnp.all(_is_dag_jit(a))):
            raise ValueError(expected("init", "acyclic graphs (DAGs)", "a directed cycle or self-loop", raw=True))
    return _structure(key, t.table, p0, num_chains, num_samples, thin, burn_in, check_progress(progress))


@functools.partial(jax.jit, static_argnames=("num_chains", "num_samples", "thin", "burn_in", "progress"))
def _order(key, table, num_chains, num_samples, thin, burn_in, progress=False):
    d = table.shape[0]
    prog = Progress(progress, num_samples, "order MCMC")
    alpha = _subset_lse(table)
    nodes = jnp.arange(d, dtype=jnp.int32)
    cidx = jnp.arange(1 << (d - 1), dtype=jnp.int32)

    def pred_masks(perm):
        pos = jnp.zeros((d,), jnp.int32).at[perm].set(nodes)
        before = pos[:, None] < pos[None, :]  # [i, j]: i precedes j
        return jnp.sum(jnp.where(before, jnp.int32(1) << nodes[:, None], 0), axis=0)

    def order_score(perm):
        pm = _compress(pred_masks(perm))
        return jnp.sum(alpha[nodes, pm])

    def step(state, k):
        perm, score = state
        k1, k2 = jax.random.split(k)
        ab = jax.random.choice(k1, d, (2,), replace=False)
        new = perm.at[ab[0]].set(perm[ab[1]]).at[ab[1]].set(perm[ab[0]])
        new_score = order_score(new)
        accept = jnp.log(jax.random.uniform(k2)) < new_score - score
        return (jnp.where(accept, new, perm), jnp.where(accept, new_score, score)), accept

    def sample_dag(perm, k):
        allowed = _compress(pred_masks(perm))  # [d] compressed masks of predecessors
        ok = (cidx[None, :] & ~allowed[:, None]) == 0
        logits = jnp.where(ok, table, -jnp.inf)
        c = jax.random.categorical(k, logits, axis=-1)
        return _expand(c.astype(jnp.int32))

    def chain(k):
        k0, kb, ks = jax.random.split(k, 3)
        perm = jax.random.permutation(k0, d).astype(jnp.int32)
        state = (perm, order_score(perm))
        if burn_in:
            state, _ = jax.lax.scan(step, state, jax.random.split(kb, burn_in))

        def draw(state, xs):
            kk, idx = xs
            k_steps, k_dag = jax.random.split(kk)
            state, acc = jax.lax.scan(step, state, jax.random.split(k_steps, thin))
            prog.update(idx)
            return state, (sample_dag(state[0], k_dag), state[1], jnp.mean(acc))

        _, (ps, scores, acc) = jax.lax.scan(draw, state, (jax.random.split(ks, num_samples), jnp.arange(num_samples)))
        return ps, jnp.mean(acc), scores

    ps, acc, scores = jax.vmap(chain)(jax.random.split(key, num_chains))
    return MCMCResult(_as_samples(ps, table.dtype), acc, scores)


def order_mcmc(
    key: jax.Array,
    table: ScoreTable,
    *,
    num_chains: int = 4,
    num_samples: int = 1000,
    thin: int = 5,
    burn_in: int = 500,
    progress: ProgressArg = False,
) -> MCMCResult:
    """Order MCMC (Friedman & Koller 2003): Metropolis-Hastings over node orders, one DAG per kept order.

    The order score is ``sum_j logsumexp_{pa ⊆ pred(j)} table[j, pa]`` (a zeta transform of each
    row, computed once); moves swap two positions (symmetric). Each kept order yields one DAG
    drawn exactly from ``p(G | order, D)``, parent sets independently per node. The target over
    DAGs is the order-modular one, ``p(G) ∝ #orders(G) exp(sum_j table[j, pa_j])``; compare it with
    :func:`~jaxcore.causal.exact_posterior` using ``log_weights=log_num_orders(...)``.

    Args:
        key: PRNG key (``jax.random.key``).
        table: :class:`ScoreTable` of local log scores + local log prior, ``d >= 2``; d up to
            ~14 (each draw touches ``d 2**(d-1)`` entries).
        num_chains, num_samples, thin, burn_in, progress: as in :func:`structure_mcmc`.

    Returns:
        :class:`MCMCResult` with ``num_chains * num_samples`` equally weighted draws (the
        log-score trace holds the order scores).

    Raises:
        TypeError: ``key`` is not a PRNG key; ``table`` is not a :class:`ScoreTable`.
        ValueError: ``d < 2`` or bad counts.

    References:
        N. Friedman, D. Koller, "Being Bayesian about network structure: a Bayesian approach
        to structure discovery in Bayesian networks", Machine Learning 50, 2003, sec. 3-4.

    Examples:
        >>> import jax, numpy as np
        >>> from jaxcore.causal import bge_local_scores, order_mcmc, order_modular_prior_table
        >>> x = np.random.default_rng(0).normal(size=(50, 3))
        >>> table = bge_local_scores(x) + order_modular_prior_table(3)
        >>> res = order_mcmc(jax.random.key(0), table, num_chains=2, num_samples=10, thin=2, burn_in=5)
        >>> res.samples.adjacency.shape, float(res.samples.weights.sum())
        ((20, 3, 3), 1.0)
    """
    t = _check(key, table, num_chains, num_samples, thin, burn_in)
    return _order(key, t.table, num_chains, num_samples, thin, burn_in, check_progress(progress))
