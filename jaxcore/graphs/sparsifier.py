"""The dynamic cluster-preserving sparsifier: edges sampled by degree, resampled when degrees move.

Each vertex has ``p_u = min(1, C log n / d_u)``; an edge ``(u, v)`` of weight ``w`` is kept with
probability ``p_e = p_u + p_v - p_u p_v`` and weight ``w / p_e``, so every kept weight is unbiased,
``E[w_H(e)] = w``. Under insertions each new edge is sampled with the current degrees; a vertex whose
``p_u`` moved by more than ``resample_factor`` (10 in the reference code) since its edges were last
sampled has all its edges resampled (``O(d_u)`` work through the adjacency table); when at least
``rebuild_fraction * n`` vertices (n/100) need it at once, or ``log n`` grew by that factor, the
whole sparsifier is rebuilt.

References:
    S. Laenen, H. Sun. "Dynamic Spectral Clustering with Provable Approximation Guarantee."
    ICML 2024, Section 3 (Algorithm 1, the dynamic cluster-preserving sparsifier).
    H. Sun, L. Zanetti. "Distributed graph clustering and sparsification." ACM TOPC 6(3), 2019
    (the cluster-preserving sparsifier, sampling probability p_u + p_v - p_u p_v).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from jaxcore._util import check_bool, check_int, check_key, check_scalar, expected

from .graph import DynamicGraph, capacity_bucket

__all__ = ["Sparsifier", "sparsify", "update_sparsifier"]


class Sparsifier(eqx.Module):
    """A sparsifier H of a :class:`DynamicGraph` G, edge by edge (module docstring).

    Attributes:
        weight: ``[edge_capacity]`` kept weight ``w_e / p_e`` of each edge of G (0: not kept).
        prob: ``[vertex_capacity]`` ``p_u`` when u's edges were last sampled (0: never sampled).
        log_n: scalar ``log n`` at the last rebuild.
        num_rebuilds: int32 scalar, rebuilds since :func:`sparsify` (that one not counted).
        num_resampled: int32 scalar, vertices whose edges were resampled, in total.
        sampling_constant: C (static).
        resample_factor: the factor by which ``p_u`` may move before u is resampled (static).
        rebuild_fraction: fraction of n that triggers a rebuild (static).

    Examples:
        >>> import jax
        >>> from jaxcore.graphs import from_edges
        >>> h = sparsify(jax.random.key(0), from_edges([0, 1], [1, 2]))
        >>> h.weight[:2].tolist()                       # p = 1 on a tiny graph: every edge kept
        [1.0, 1.0]
    """

    weight: Float[Array, " E"]
    prob: Float[Array, " V"]
    log_n: Float[Array, ""]
    num_rebuilds: Int[Array, ""]
    num_resampled: Int[Array, ""]
    sampling_constant: float = eqx.field(static=True)
    resample_factor: float = eqx.field(static=True)
    rebuild_fraction: float = eqx.field(static=True)


def _log_n(graph: DynamicGraph, dtype: Any) -> Array:
    return jnp.log(jnp.maximum(graph.num_vertices, 2).astype(dtype))


def _vertex_prob(degree: Array, log_n: Array, c: float) -> Array:
    return jnp.minimum(1.0, c * log_n / jnp.maximum(degree, jnp.finfo(degree.dtype).tiny))


def _sample_edges(key: Array, graph: DynamicGraph, ids: Array, log_n: Array, c: float) -> Array:
    """Kept weight ``w / p_e`` or 0 for the edges ``ids`` under the current degrees (one uniform each)."""
    pu = _vertex_prob(graph.degree[graph.src[ids]], log_n, c)
    pv = _vertex_prob(graph.degree[graph.dst[ids]], log_n, c)
    pe = pu + pv - pu * pv
    keep = jax.random.uniform(key, ids.shape, graph.weight.dtype) < pe
    return jnp.where(keep, graph.weight[ids] / pe, 0.0)


def _rebuild(key: Array, h: Sparsifier, graph: DynamicGraph) -> Sparsifier:
    log_n = _log_n(graph, graph.weight.dtype)
    ids = jnp.arange(graph.edge_capacity)
    w = jnp.where(ids < graph.num_edges, _sample_edges(key, graph, ids, log_n, h.sampling_constant), 0.0)
    live = jnp.arange(graph.vertex_capacity) < graph.num_vertices
    prob = jnp.where(live, _vertex_prob(graph.degree, log_n, h.sampling_constant), 0.0)
    return eqx.tree_at(lambda t: (t.weight, t.prob, t.log_n), h, (w, prob, log_n))


@partial(jax.jit, static_argnames=("sampling_constant", "resample_factor", "rebuild_fraction"))
def _sparsify(key: Array, graph: DynamicGraph, sampling_constant: float, resample_factor: float,
              rebuild_fraction: float) -> Sparsifier:
    dt = graph.weight.dtype
    h = Sparsifier(jnp.zeros_like(graph.weight), jnp.zeros_like(graph.degree), jnp.zeros((), dt),
                   jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32), sampling_constant, resample_factor,
                   rebuild_fraction)
    return _rebuild(key, h, graph)


def _check_common(graph: Any, sampling_constant: Any, resample_factor: Any, rebuild_fraction: Any) -> tuple:
    if not isinstance(graph, DynamicGraph):
        raise TypeError(expected("graph", "a DynamicGraph", type(graph).__name__, raw=True))
    c = check_scalar(sampling_constant, "sampling_constant", positive=True)
    f = check_scalar(resample_factor, "resample_factor", low=1.0, low_open=True)
    r = check_scalar(rebuild_fraction, "rebuild_fraction", low=0.0, high=1.0, low_open=True)
    return c, f, r


def sparsify(key: Any, graph: DynamicGraph, *, sampling_constant: float = 100.0, resample_factor: float = 10.0,
             rebuild_fraction: float = 0.01) -> Sparsifier:
    """Sample the cluster-preserving sparsifier of ``graph`` from scratch (``O(m)``).

    Args:
        key: a ``jax.random.key``.
        graph: the graph G.
        sampling_constant: C in ``p_u = min(1, C log n / d_u)`` (100 in the reference code's default;
            its SBM experiments use 5 and its MNIST experiments 1).
        resample_factor: a vertex is resampled when ``p_u`` moved by more than this factor (> 1).
        rebuild_fraction: rebuild when at least this fraction of n needs resampling at once (in (0, 1]).

    Returns:
        The :class:`Sparsifier`.

    Raises:
        TypeError: a key that is not a PRNG key, a non-graph.
        ValueError: constants out of range.

    References:
        S. Laenen, H. Sun, ICML 2024, Algorithm 1; H. Sun, L. Zanetti, ACM TOPC 2019.

    Examples:
        >>> import jax
        >>> from jaxcore.graphs import from_edges
        >>> g = from_edges([0, 0, 0, 0, 1], [1, 2, 3, 4, 2])
        >>> h = sparsify(jax.random.key(1), g, sampling_constant=0.2)
        >>> [round(p, 3) for p in h.prob[:3].tolist()]          # p_u = min(1, 0.2 log 5 / d_u)
        [0.08, 0.161, 0.161]
    """
    key = check_key(key)
    c, f, r = _check_common(graph, sampling_constant, resample_factor, rebuild_fraction)
    return _sparsify(key, graph, c, f, r)


def _update_impl(key: Array, h: Sparsifier, graph: DynamicGraph, num_new: Array, batch: int) -> Sparsifier:
    k_new, k_res, k_build = jax.random.split(key, 3)
    c, f = h.sampling_constant, h.resample_factor
    dt = graph.weight.dtype
    log_n = _log_n(graph, dt)
    first = graph.num_edges - num_new
    ids = first + jnp.arange(batch, dtype=jnp.int32)
    valid = jnp.arange(batch) < num_new
    ids_c = jnp.where(valid, ids, graph.edge_capacity)
    w_new = _sample_edges(k_new, graph, jnp.minimum(ids_c, graph.edge_capacity - 1), log_n, c)
    weight = h.weight.at[ids_c].set(w_new, mode="drop")

    # endpoints of the batch: the only vertices whose degree moved; each counted once
    ends = jnp.concatenate([graph.src[jnp.minimum(ids_c, graph.edge_capacity - 1)],
                            graph.dst[jnp.minimum(ids_c, graph.edge_capacity - 1)]])
    ends = jnp.where(jnp.concatenate([valid, valid]), ends, graph.vertex_capacity)
    ends = jnp.sort(ends)
    first_occ = jnp.concatenate([jnp.ones((1,), bool), ends[1:] != ends[:-1]]) & (ends < graph.vertex_capacity)
    ends_c = jnp.minimum(ends, graph.vertex_capacity - 1)
    p_now = _vertex_prob(graph.degree[ends_c], log_n, c)
    p_then = h.prob[ends_c]
    fresh = first_occ & (p_then == 0)                     # never sampled: all its edges are in this batch
    flag = first_occ & (p_then > 0) & ((p_now * f < p_then) | (p_now > f * p_then))
    prob = h.prob.at[jnp.where(fresh, ends, graph.vertex_capacity)].set(p_now, mode="drop")
    num_flag = jnp.sum(flag)
    threshold = jnp.maximum(1, jnp.floor(h.rebuild_fraction * graph.num_vertices.astype(dt)))
    rebuild = (num_flag >= threshold) | (log_n > f * h.log_n)
    h = eqx.tree_at(lambda t: (t.weight, t.prob), h, (weight, prob))

    def resample(h: Sparsifier) -> Sparsifier:
        rows = jnp.where(flag, ends, graph.vertex_capacity)
        rows_c = jnp.minimum(rows, graph.vertex_capacity - 1)
        eids = graph.edge_ids[rows_c]                                            # [2B, W]
        ok = (jnp.arange(graph.width)[None, :] < graph.count[rows_c][:, None]) & flag[:, None]
        # an edge between two flagged vertices is drawn once, from the row of its smaller endpoint
        flagged = jnp.sort(rows)
        nbr = graph.neighbors[rows_c]
        hit = flagged[jnp.minimum(jnp.searchsorted(flagged, nbr), flagged.shape[0] - 1)] == nbr
        ok &= ~hit | (rows_c[:, None] < nbr)
        w = _sample_edges(k_res, graph, eids, log_n, c)
        weight = h.weight.at[jnp.where(ok, eids, graph.edge_capacity)].set(w, mode="drop")
        prob = h.prob.at[rows].set(p_now, mode="drop")
        return eqx.tree_at(lambda t: (t.weight, t.prob, t.num_resampled), h,
                           (weight, prob, h.num_resampled + num_flag.astype(jnp.int32)))

    def full(h: Sparsifier) -> Sparsifier:
        h = _rebuild(k_build, h, graph)
        return eqx.tree_at(lambda t: t.num_rebuilds, h, h.num_rebuilds + 1)

    branch = jnp.where(rebuild, 2, jnp.where(num_flag > 0, 1, 0))
    return jax.lax.switch(branch, [lambda h: h, resample, full], h)


_update = jax.jit(_update_impl, static_argnames=("batch",))
_update_donated = jax.jit(_update_impl, static_argnames=("batch",), donate_argnums=1)  # writes into h's buffers


def _grow_like(h: Sparsifier, graph: DynamicGraph) -> Sparsifier:
    de = graph.edge_capacity - h.weight.shape[0]
    dv = graph.vertex_capacity - h.prob.shape[0]
    if de < 0 or dv < 0:
        raise ValueError(expected("graph", f"capacities at least the sparsifier's ({h.prob.shape[0]} vertices, "
                                  f"{h.weight.shape[0]} edges)",
                                  f"{graph.vertex_capacity} and {graph.edge_capacity}", raw=True))
    if de or dv:
        h = eqx.tree_at(lambda t: (t.weight, t.prob), h, (jnp.pad(h.weight, (0, de)), jnp.pad(h.prob, (0, dv))))
    return h


def update_sparsifier(key: Any, sparsifier: Sparsifier, graph: DynamicGraph, num_new: int, *,
                      donate: bool = False) -> Sparsifier:
    """Bring the sparsifier up to date after the last ``num_new`` edges of ``graph`` were inserted.

    New edges are sampled with the current degrees; vertices whose ``p_u`` moved by more than
    ``resample_factor`` have their edges resampled; past the rebuild threshold everything is
    resampled (module docstring). The common path costs ``O(B log B)`` for ``B = num_new``.

    Args:
        key: a ``jax.random.key``.
        sparsifier: the sparsifier of the graph before the insertion.
        graph: the graph after :func:`add_edges` of the new batch (buffers may have grown).
        num_new: how many edges the batch added (the last ``num_new`` edges of ``graph``).
        donate: write the update into ``sparsifier``'s buffers (XLA buffer donation; no copy of the
            ``[edge_capacity]`` weights per call): ``sparsifier`` must not be used afterwards.

    Returns:
        The updated :class:`Sparsifier` (padded to the graph's capacities).

    Raises:
        TypeError: a key that is not a PRNG key, wrong argument types.
        ValueError: ``num_new`` out of ``[0, num_edges]``.

    References:
        S. Laenen, H. Sun, ICML 2024, Algorithm 1 (update).

    Examples:
        >>> import jax
        >>> from jaxcore.graphs import add_edges, from_edges
        >>> g = from_edges([0], [1])
        >>> h = sparsify(jax.random.key(0), g)
        >>> g2 = add_edges(g, [1, 2], [2, 3])
        >>> h2 = update_sparsifier(jax.random.key(1), h, g2, 2)
        >>> h2.weight[:3].tolist()
        [1.0, 1.0, 1.0]
    """
    key = check_key(key)
    if not isinstance(sparsifier, Sparsifier):
        raise TypeError(expected("sparsifier", "a Sparsifier", type(sparsifier).__name__, raw=True))
    _check_common(graph, sparsifier.sampling_constant, sparsifier.resample_factor, sparsifier.rebuild_fraction)
    m = int(graph.num_edges)
    num_new = check_int(num_new, "num_new", minimum=0, maximum=m)
    update = _update_donated if check_bool(donate, "donate") else _update
    h = _grow_like(sparsifier, graph)
    if num_new == 0:
        return h
    return update(key, h, graph, jnp.asarray(num_new, jnp.int32), capacity_bucket(num_new))
