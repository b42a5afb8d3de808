"""Structure MCMC and order MCMC over DAGs as ``lax.scan`` chains, ``vmap``-ed over chains.

Both samplers read a local-score table ``[d, 2**(d-1)]`` (log marginal
likelihood plus local log prior) and return :class:`~jaxcore.causal.samples.DAGSamples`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .dp import subset_logsumexp
from .graphs import _acyclic_residual, adjacency_to_parents, compress_parents, expand_parents, parents_to_adjacency
from .samples import DAGSamples

__all__ = ["structure_mcmc", "order_mcmc"]


def _check(table, n_chains, n_samples, thin, burn_in):
    shape = np.shape(table)
    if len(shape) != 2 or shape[1] != 1 << (shape[0] - 1):
        raise ValueError(f"table must have shape [d, 2**(d-1)], got {shape}")
    if shape[0] < 2:
        raise ValueError(f"MCMC needs d >= 2 nodes, got d={shape[0]}")
    for nm, v, lo in (("n_chains", n_chains, 1), ("n_samples", n_samples, 1), ("thin", thin, 1), ("burn_in", burn_in, 0)):
        if not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"{nm} must be an int >= {lo}, got {v!r}")
    if not isinstance(table, jax.core.Tracer) and np.any(np.isnan(np.asarray(table))):
        raise ValueError("table contains NaN")
    return shape[0]


def _graph_score(table, parents):
    d = table.shape[0]
    return jnp.sum(table[jnp.arange(d), compress_parents(parents)])


@functools.partial(jax.jit, static_argnames=("n_chains", "n_samples", "thin", "burn_in"))
def _structure(key, table, init_parents, n_chains, n_samples, thin, burn_in):
    d = table.shape[0]

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

        def draw(state, kk):
            state, acc = jax.lax.scan(step, state, jax.random.split(kk, thin))
            return state, (state[0], jnp.mean(acc))

        _, (ps, acc) = jax.lax.scan(draw, state, jax.random.split(ks, n_samples))
        return ps, jnp.mean(acc)

    keys = jax.random.split(key, n_chains)
    return jax.vmap(chain)(keys, init_parents)


def structure_mcmc(
    key: jax.Array,
    table: Float[Array, "d two_pow_d_minus_1"],
    *,
    n_chains: int = 4,
    n_samples: int = 1000,
    thin: int = 10,
    burn_in: int = 1000,
    init: jax.Array | None = None,
    return_acceptance: bool = False,
):
    """Structure MCMC (Madigan & York 1995) with add / delete / reverse moves.

    Each step draws an ordered pair ``(i, j)`` uniformly; it deletes ``i -> j`` if present,
    reverses ``j -> i`` into ``i -> j`` if that is present, else adds ``i -> j``. The proposal
    is symmetric, cyclic proposals are rejected, and a move is accepted with probability
    ``min(1, exp(score' - score))``, so the chain targets ``p(G | D) ∝ exp(sum_j table[j, pa_j])``.

    Args:
        key: PRNG key.
        table: ``[d, 2**(d-1)]`` local log scores + local log prior (``-inf`` excludes a parent set).
        n_chains: independent chains, run with ``vmap``.
        n_samples: draws kept per chain.
        thin: steps between kept draws.
        burn_in: steps discarded first.
        init: optional ``[n_chains, d, d]`` or ``[d, d]`` starting DAGs (default: empty graphs).
        return_acceptance: also return the per-chain acceptance rate ``[n_chains]``.

    Returns:
        :class:`DAGSamples` with ``n_chains * n_samples`` equally weighted draws
        (and the acceptance rates if asked).

    Raises:
        ValueError: bad table shape / NaN, non-positive counts, or a cyclic ``init``.

    References:
        D. Madigan, J. York, "Bayesian graphical models for discrete data", International
        Statistical Review 1995; P. Giudici, R. Castelo, "Improving Markov chain Monte Carlo
        model search for data mining", Machine Learning 2003 (edge reversal).
    """
    d = _check(table, n_chains, n_samples, thin, burn_in)
    if init is None:
        p0 = jnp.zeros((n_chains, d), jnp.int32)
    else:
        a = jnp.asarray(init)
        if a.shape[-2:] != (d, d):
            raise ValueError(f"init must have shape [n_chains, d, d] or [d, d] with d={d}, got {a.shape}")
        p0 = jnp.broadcast_to(adjacency_to_parents(a), (n_chains, d))
        if not bool(jnp.all(_acyclic_residual(p0) == 0)):
            raise ValueError("init must be acyclic")
    ps, acc = _structure(key, jnp.asarray(table), p0, n_chains, n_samples, thin, burn_in)
    adj = parents_to_adjacency(ps.reshape(-1, d))
    out = DAGSamples(adj, jnp.full((adj.shape[0],), 1.0 / adj.shape[0], jnp.asarray(table).dtype))
    return (out, acc) if return_acceptance else out


@functools.partial(jax.jit, static_argnames=("n_chains", "n_samples", "thin", "burn_in"))
def _order(key, table, n_chains, n_samples, thin, burn_in):
    d = table.shape[0]
    alpha = subset_logsumexp(table)
    nodes = jnp.arange(d, dtype=jnp.int32)
    cidx = jnp.arange(1 << (d - 1), dtype=jnp.int32)

    def pred_masks(perm):
        pos = jnp.zeros((d,), jnp.int32).at[perm].set(nodes)
        before = pos[:, None] < pos[None, :]  # [i, j]: i precedes j
        return jnp.sum(jnp.where(before, jnp.int32(1) << nodes[:, None], 0), axis=0)

    def order_score(perm):
        pm = compress_parents(pred_masks(perm))
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
        allowed = compress_parents(pred_masks(perm))  # [d] compressed masks of predecessors
        ok = (cidx[None, :] & ~allowed[:, None]) == 0
        logits = jnp.where(ok, table, -jnp.inf)
        c = jax.random.categorical(k, logits, axis=-1)
        return expand_parents(c.astype(jnp.int32))

    def chain(k):
        k0, kb, ks = jax.random.split(k, 3)
        perm = jax.random.permutation(k0, d).astype(jnp.int32)
        state = (perm, order_score(perm))
        if burn_in:
            state, _ = jax.lax.scan(step, state, jax.random.split(kb, burn_in))

        def draw(state, kk):
            k_steps, k_dag = jax.random.split(kk)
            state, acc = jax.lax.scan(step, state, jax.random.split(k_steps, thin))
            return state, (sample_dag(state[0], k_dag), jnp.mean(acc))

        _, (ps, acc) = jax.lax.scan(draw, state, jax.random.split(ks, n_samples))
        return ps, jnp.mean(acc)

    return jax.vmap(chain)(jax.random.split(key, n_chains))


def order_mcmc(
    key: jax.Array,
    table: Float[Array, "d two_pow_d_minus_1"],
    *,
    n_chains: int = 4,
    n_samples: int = 1000,
    thin: int = 5,
    burn_in: int = 500,
    return_acceptance: bool = False,
):
    """Order MCMC (Friedman & Koller 2003): Metropolis-Hastings over node orders, one DAG per kept order.

    The order score is ``sum_j logsumexp_{pa ⊆ pred(j)} table[j, pa]`` (a zeta transform of each
    row, computed once); moves swap two positions (symmetric). Each kept order yields one DAG
    drawn exactly from ``p(G | order, D)``, parent sets independently per node. The target over
    DAGs is the order-modular one, ``p(G) ∝ #orders(G) exp(sum_j table[j, pa_j])``; compare it with
    :func:`~jaxcore.causal.posterior.exact_posterior` using ``log_weights=log_num_orders(...)``.

    Args:
        key: PRNG key.
        table: ``[d, 2**(d-1)]`` local log scores + local log prior; d up to ~14
            (each draw touches ``d 2**(d-1)`` entries).
        n_chains, n_samples, thin, burn_in: as in :func:`structure_mcmc`.
        return_acceptance: also return per-chain acceptance rates.

    Returns:
        :class:`DAGSamples` with ``n_chains * n_samples`` equally weighted draws.

    Raises:
        ValueError: bad table shape / NaN or bad counts.

    References:
        N. Friedman, D. Koller, "Being Bayesian about network structure: a Bayesian approach
        to structure discovery in Bayesian networks", Machine Learning 50, 2003, sec. 3-4.
    """
    d = _check(table, n_chains, n_samples, thin, burn_in)
    ps, acc = _order(key, jnp.asarray(table), n_chains, n_samples, thin, burn_in)
    adj = parents_to_adjacency(ps.reshape(-1, d))
    out = DAGSamples(adj, jnp.full((adj.shape[0],), 1.0 / adj.shape[0], jnp.asarray(table).dtype))
    return (out, acc) if return_acceptance else out
