"""Evolving graphs to cluster: stochastic block model streams and growing kNN graphs of real data.

A :class:`GraphStream` is an initial edge list, then batches of inserted edges, with the true
labels of the vertices present after each step. :func:`sbm_stream` grows an SBM by new clusters
of new vertices (the paper's "new clusters" experiment, with new vertices); :func:`sbm_merge_stream`
joins clusters pairwise by dense edges between them (the paper's "merging clusters"); :func:`knn_stream`
grows the kNN graph of labelled points class by class (the paper's MNIST experiment). Edge
sampling is exact (distinct pairs, a binomial count per block pair) with NumPy, seeded from the
JAX key.

References:
    S. Laenen, H. Sun. "Dynamic Spectral Clustering with Provable Approximation Guarantee."
    ICML 2024, Section 5 (experiments: SBM streams; kNN graphs of MNIST and EMNIST).
    P. Holland, K. Laskey, S. Leinhardt. "Stochastic blockmodels: first steps." Social Networks 5, 1983.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcore._util import check_int, check_key, check_scalar, expected

from .graph import DynamicGraph, from_edges

__all__ = ["GraphStream", "knn_edges", "knn_stream", "sbm_edges", "sbm_graph", "sbm_merge_stream", "sbm_stream"]


class GraphStream(NamedTuple):
    """An evolving graph: initial edges, inserted batches and the truth after each step.

    Attributes:
        src, dst: ``[m0]`` int32 initial edges.
        batches: tuple of ``(src, dst)`` int32 arrays, the edges inserted at steps 1, 2, ...
        labels: tuple of ``[n_t]`` int32 true clusters of the vertices ``0 .. n_t - 1`` present after
            step t (``labels[0]``: the initial graph), one more entry than ``batches``.

    Examples:
        >>> GraphStream._fields
        ('src', 'dst', 'batches', 'labels')
    """

    src: np.ndarray
    dst: np.ndarray
    batches: tuple
    labels: tuple

    @property
    def num_clusters(self) -> list[int]:
        """The number of true clusters after each step."""
        return [int(np.unique(lab).size) for lab in self.labels]


def _rng(key: Any) -> np.random.Generator:
    return np.random.default_rng(np.asarray(jax.random.key_data(key)).astype(np.uint64).tolist())


def _block_pairs(rng: np.random.Generator, n_a: int, n_b: int, prob: float, same: bool) -> tuple:
    """Exact G(n, p) edges of one block pair: binomial count, distinct pair indices, decoded."""
    total = n_a * (n_a - 1) // 2 if same else n_a * n_b
    if total == 0 or prob == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    m = rng.binomial(total, prob)
    idx = rng.choice(total, size=m, replace=False) if m < total else np.arange(total)
    if not same:
        return idx // n_b, idx % n_b
    # triangle index t -> (a, b), a < b, rows a = 0 .. n-2 holding n-1-a pairs each
    n = n_a
    t = idx.astype(np.float64)
    a = np.floor(n - 0.5 - np.sqrt((n - 0.5) ** 2 - 2.0 * t)).astype(np.int64)
    start = a * (2 * n - a - 1) // 2
    a = np.where(start > idx, a - 1, a)
    start = a * (2 * n - a - 1) // 2
    nxt = (a + 1) * (2 * n - a - 2) // 2
    a = np.where(idx >= nxt, a + 1, a)
    start = a * (2 * n - a - 1) // 2
    b = idx - start + a + 1
    return a, b


def _check_probs(p: Any, q: Any) -> tuple[float, float]:
    return (check_scalar(p, "p", low=0.0, high=1.0), check_scalar(q, "q", low=0.0, high=1.0))


def _check_sizes(sizes: Any, name: str) -> list[int]:
    if isinstance(sizes, (int, np.integer)) or sizes is None:
        raise TypeError(expected(name, "a sequence of cluster sizes", type(sizes).__name__, raw=True))
    out = [check_int(s, name, minimum=1) for s in sizes]
    if not out:
        raise ValueError(expected(name, "at least one cluster", "an empty sequence", raw=True))
    return out


def sbm_edges(key: Any, sizes: Sequence[int], p: float, q: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges of a stochastic block model: pairs inside a block with prob ``p``, across with ``q``.

    Args:
        key: a ``jax.random.key`` (seeds NumPy's generator).
        sizes: cluster sizes (ints >= 1); vertices are numbered block by block.
        p, q: within- and between-cluster edge probabilities (in [0, 1]).

    Returns:
        ``(src, dst, labels)``: int32 ``[m]`` edges (each pair once, ``src < dst``) and ``[n]`` labels.

    Raises:
        TypeError: a key that is not a PRNG key, sizes that are not ints.
        ValueError: probabilities outside [0, 1], sizes < 1.

    References:
        P. Holland, K. Laskey, S. Leinhardt, Social Networks 1983.

    Examples:
        >>> import jax
        >>> s, d, lab = sbm_edges(jax.random.key(0), [3, 2], 1.0, 0.0)
        >>> sorted(zip(s.tolist(), d.tolist())), lab.tolist()
        ([(0, 1), (0, 2), (1, 2), (3, 4)], [0, 0, 0, 1, 1])
    """
    key = check_key(key)
    sizes = _check_sizes(sizes, "sizes")
    p, q = _check_probs(p, q)
    rng = _rng(key)
    off = np.concatenate([[0], np.cumsum(sizes)])
    src, dst = [], []
    for i, ni in enumerate(sizes):
        for j in range(i, len(sizes)):
            a, b = _block_pairs(rng, ni, sizes[j], p if i == j else q, i == j)
            src.append(a + off[i])
            dst.append(b + off[j])
    labels = np.repeat(np.arange(len(sizes)), sizes).astype(np.int32)
    return np.concatenate(src).astype(np.int32), np.concatenate(dst).astype(np.int32), labels


def sbm_graph(key: Any, sizes: Sequence[int], p: float, q: float) -> tuple[DynamicGraph, np.ndarray]:
    """A stochastic block model as a :class:`DynamicGraph` with its ``[n]`` true labels.

    Args:
        key, sizes, p, q: as :func:`sbm_edges`.

    Returns:
        ``(graph, labels)``.

    Raises:
        TypeError, ValueError: as :func:`sbm_edges`.

    References:
        P. Holland, K. Laskey, S. Leinhardt, Social Networks 1983.

    Examples:
        >>> import jax
        >>> g, lab = sbm_graph(jax.random.key(0), [50, 50], 0.3, 0.01)
        >>> int(g.num_vertices), lab.shape
        (100, (100,))
    """
    s, d, lab = sbm_edges(key, sizes, p, q)
    return from_edges(s, d, num_vertices=int(lab.size)), lab


def sbm_stream(key: Any, sizes: Sequence[int], p: float, q: float, new_sizes: Sequence[int],
               p_new: float | None = None) -> GraphStream:
    """An SBM that grows by new clusters: step t adds ``new_sizes[t]`` new vertices forming a cluster.

    The new cluster's pairs are edges with probability ``p_new`` and each new vertex joins every
    vertex already present with probability ``q``.

    Args:
        key: a ``jax.random.key``.
        sizes: initial cluster sizes.
        p, q: initial within- and between-cluster probabilities (and q for the new vertices).
        new_sizes: the size of the cluster arriving at each step (ints >= 1).
        p_new: within-cluster probability of the arriving clusters (default ``p``).

    Returns:
        :class:`GraphStream` with ``len(new_sizes)`` batches.

    Raises:
        TypeError, ValueError: as :func:`sbm_edges`.

    References:
        S. Laenen, H. Sun, ICML 2024, Section 5 (SBM with new clusters).

    Examples:
        >>> import jax
        >>> st = sbm_stream(jax.random.key(0), [30, 30], 0.5, 0.01, [10, 10], p_new=0.9)
        >>> len(st.batches), st.num_clusters, st.labels[-1].shape
        (2, [2, 3, 4], (80,))
    """
    key = check_key(key)
    new_sizes = _check_sizes(new_sizes, "new_sizes")
    k0, k1 = jax.random.split(key)
    src, dst, labels = sbm_edges(k0, sizes, p, q)
    p_new = p if p_new is None else check_scalar(p_new, "p_new", low=0.0, high=1.0)
    rng = _rng(k1)
    n, lab = int(labels.size), labels
    batches, truth = [], [labels]
    for t, size in enumerate(new_sizes):
        a, b = _block_pairs(rng, size, size, p_new, True)
        c, d = _block_pairs(rng, size, n, q, False)      # new vertex c joins old vertex d
        bs = np.concatenate([a + n, c + n]).astype(np.int32)
        bd = np.concatenate([b + n, d]).astype(np.int32)
        perm = rng.permutation(bs.size)
        batches.append((bs[perm], bd[perm]))
        lab = np.concatenate([lab, np.full(size, lab.max() + 1, np.int32)])
        truth.append(lab)
        n += size
    return GraphStream(src, dst, tuple(batches), tuple(truth))


def _check_merge(pair: Any, labels: np.ndarray, step: int) -> tuple[int, int]:
    name = f"merges[{step}]"
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise TypeError(expected(name, "a pair (a, b) of cluster labels", type(pair).__name__, raw=True))
    a, b = (check_int(c, name) for c in pair)
    present = np.unique(labels)
    if a == b or a not in present or b not in present:
        raise ValueError(expected(name, f"two different clusters present at step {step + 1} "
                                        f"({present.tolist()})", (a, b)))
    return a, b


def sbm_merge_stream(key: Any, sizes: Sequence[int], p: float, q: float, merges: Sequence[tuple[int, int]],
                     r: float = 0.95, s: float = 0.0) -> GraphStream:
    """An SBM whose clusters merge: step t joins clusters ``merges[t] = (a, b)`` into one (label ``a``).

    The paper's "merging clusters" experiment: each step inserts every pair between the two clusters
    as an edge with probability ``r``, plus Erdos-Renyi noise (each vertex pair with probability ``s``;
    a noise pair that is already an edge becomes a parallel edge, whose weights add). No vertices
    arrive; the number of clusters falls by one per step.

    Args:
        key: a ``jax.random.key``.
        sizes: initial cluster sizes (labels ``0 .. len(sizes) - 1``, vertices numbered block by block).
        p, q: within- and between-cluster probabilities of the initial graph.
        merges: ``(a, b)`` label pairs, one per step; both clusters must be present at that step (a
            cluster merged away earlier carries the label it was merged into).
        r: probability of each pair between the two merging clusters (in [0, 1]).
        s: per-step noise probability of every vertex pair (in [0, 1]).

    Returns:
        :class:`GraphStream` with ``len(merges)`` batches; ``labels[t]`` has ``b`` relabelled ``a``.

    Raises:
        TypeError: a key that is not a PRNG key; a merge that is not a pair of ints.
        ValueError: as :func:`sbm_edges`; ``r`` or ``s`` outside [0, 1]; a merge of a cluster with
            itself or of a label not present.

    References:
        S. Laenen, H. Sun, ICML 2024, Section 5 (SBM with merging clusters; the reference code's
        ``DynamicSBMGraphMerge``).

    Examples:
        >>> import jax
        >>> st = sbm_merge_stream(jax.random.key(0), [20, 10, 10], 0.5, 0.01, [(1, 2)], r=0.9)
        >>> st.num_clusters, bool((st.labels[1][20:] == 1).all()), st.batches[0][0].size > 70
        ([3, 2], True, True)
    """
    key = check_key(key)
    r = check_scalar(r, "r", low=0.0, high=1.0)
    s = check_scalar(s, "s", low=0.0, high=1.0)
    if isinstance(merges, (tuple, list)) and len(merges) == 2 and all(isinstance(c, (int, np.integer)) for c in merges):
        raise TypeError(expected("merges", "a sequence of (a, b) pairs", "a single pair", raw=True))
    k0, k1 = jax.random.split(key)
    src, dst, labels = sbm_edges(k0, sizes, p, q)
    rng = _rng(k1)
    n, lab = int(labels.size), labels
    batches, truth = [], [labels]
    for t, pair in enumerate(merges):
        a, b = _check_merge(pair, lab, t)
        va, vb = np.flatnonzero(lab == a), np.flatnonzero(lab == b)
        i, j = _block_pairs(rng, va.size, vb.size, r, False)
        u, w = _block_pairs(rng, n, n, s, True)
        bs = np.concatenate([va[i], u]).astype(np.int32)
        bd = np.concatenate([vb[j], w]).astype(np.int32)
        perm = rng.permutation(bs.size)
        batches.append((bs[perm], bd[perm]))
        lab = np.where(lab == b, a, lab).astype(np.int32)
        truth.append(lab)
    return GraphStream(src, dst, tuple(batches), tuple(truth))


@partial(jax.jit, static_argnames=("k", "chunk_size"))
def _knn(x: jax.Array, k: int, chunk_size: int) -> jax.Array:
    n = x.shape[0]
    xx = jnp.sum(x * x, axis=1)
    pad = (-n) % chunk_size
    xp = jnp.pad(x, ((0, pad), (0, 0)))
    rows = jnp.arange(n + pad).reshape(-1, chunk_size)

    def one(r: jax.Array) -> jax.Array:
        d = xx[jnp.minimum(r, n - 1)][:, None] - 2.0 * xp[r] @ x.T + xx[None, :]
        d = jnp.where(r[:, None] == jnp.arange(n)[None, :], jnp.inf, d)  # no self
        return jax.lax.top_k(-d, k)[1]

    return jax.lax.map(one, rows).reshape(-1, k)[:n]


def knn_edges(x: Any, num_neighbors: int, *, chunk_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """The undirected kNN graph of the rows of ``x``: u ~ v if either is among the other's k nearest.

    Squared Euclidean distances by chunks of ``chunk_size`` rows (a matrix product each) and
    ``top_k``; each undirected pair is returned once.

    Args:
        x: ``[n, d]`` finite points.
        num_neighbors: k (int, ``1 <= k < n``).
        chunk_size: rows per distance block (memory ``chunk_size * n`` floats).

    Returns:
        ``(src, dst)`` int32 ``[m]`` with ``src < dst``, sorted.

    Raises:
        TypeError, ValueError: non-numeric or non-2-D ``x``, NaN/inf, points whose squared norms
            overflow ``x``'s dtype, ``num_neighbors`` out of range.

    Examples:
        >>> import numpy as np
        >>> s, d = knn_edges(np.array([[0.0], [1.0], [10.0], [11.0]]), 1)
        >>> list(zip(s.tolist(), d.tolist()))
        [(0, 1), (2, 3)]
    """
    from jaxcore._util import as_float_array, check_finite

    from .clustering import check_squared_distances

    xa = as_float_array(x, "x")
    if xa.ndim != 2 or xa.shape[0] < 2:
        raise ValueError(expected("x", "a 2-D array [n, d] with n >= 2", f"shape {tuple(xa.shape)}", raw=True))
    check_finite(xa, "x")
    check_squared_distances(xa, "x")
    n = int(xa.shape[0])
    k = check_int(num_neighbors, "num_neighbors", minimum=1, maximum=n - 1)
    chunk = check_int(chunk_size, "chunk_size", minimum=1)
    nbr = np.asarray(_knn(xa, k, min(chunk, n)))
    u = np.repeat(np.arange(n), k)
    v = nbr.reshape(-1)
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    pairs = np.unique(lo.astype(np.int64) * n + hi)
    return (pairs // n).astype(np.int32), (pairs % n).astype(np.int32)


def knn_stream(key: Any, x: Any, labels: Any, num_neighbors: int, initial_classes: int, *,
               classes_per_step: int = 1, num_batches: int = 1) -> GraphStream:
    """The kNN graph of labelled points, growing class by class (the paper's MNIST experiment).

    Classes arrive in a random order (``key``): the first ``initial_classes`` form the initial
    graph; then each group of ``classes_per_step`` classes arrives as ``num_batches`` batches of
    edges (those joining its points to the points present and to each other, shuffled). Vertices
    are numbered in order of arrival.

    Args:
        key: a ``jax.random.key`` (class order, batch split).
        x: ``[n, d]`` points.
        labels: ``[n]`` integer classes.
        num_neighbors: k of the kNN graph (built once on all points by :func:`knn_edges`).
        initial_classes: classes present at the start (int >= 1).
        classes_per_step: classes arriving together.
        num_batches: batches each arrival is split into (a query after each).

    Returns:
        :class:`GraphStream` (``labels[t]``: true classes, renumbered 0.. by arrival).

    Raises:
        TypeError, ValueError: bad shapes or counts.

    References:
        S. Laenen, H. Sun, ICML 2024, Section 5 (kNN graphs of MNIST growing by classes).

    Examples:
        >>> import jax, numpy as np
        >>> x = np.concatenate([np.zeros((5, 2)), np.ones((5, 2)) * 9, np.ones((5, 2)) * 20])
        >>> x = x + np.random.default_rng(0).normal(size=x.shape)
        >>> st = knn_stream(jax.random.key(0), x, np.repeat([0, 1, 2], 5), 3, 2)
        >>> len(st.batches), st.num_clusters
        (1, [2, 3])
    """
    key = check_key(key)
    lab = np.asarray(labels)
    if lab.dtype.kind not in "iu" or lab.ndim != 1:
        raise ValueError(expected("labels", "a 1-D integer array", f"dtype {lab.dtype}, shape {lab.shape}", raw=True))
    xa = np.asarray(x)
    if xa.ndim != 2 or xa.shape[0] != lab.size:
        raise ValueError(expected("x", f"points [n, d] with n = {lab.size}", f"shape {xa.shape}", raw=True))
    classes = np.unique(lab)
    c0 = check_int(initial_classes, "initial_classes", minimum=1, maximum=classes.size)
    cps = check_int(classes_per_step, "classes_per_step", minimum=1)
    nb = check_int(num_batches, "num_batches", minimum=1)
    rng = _rng(key)
    order = rng.permutation(classes)
    rank = np.empty(int(classes.max()) + 1, np.int64)
    rank[order] = np.arange(order.size)
    arrival = rank[lab]                                            # arrival position of each point's class
    group = np.where(arrival < c0, 0, 1 + (arrival - c0) // cps)
    perm = np.lexsort((np.arange(lab.size), group))               # vertex id = position in arrival order
    new_id = np.empty(lab.size, np.int64)
    new_id[perm] = np.arange(lab.size)
    s, d = knn_edges(xa, num_neighbors)
    s, d = new_id[s], new_id[d]
    gsorted = group[perm]
    eg = np.maximum(gsorted[s], gsorted[d])
    relabel = arrival[perm].astype(np.int32)
    src0, dst0 = s[eg == 0].astype(np.int32), d[eg == 0].astype(np.int32)
    batches, truth = [], [relabel[: int(np.sum(gsorted == 0))]]
    for g in range(1, int(gsorted.max()) + 1):
        sel = np.flatnonzero(eg == g)
        sel = sel[rng.permutation(sel.size)]
        n_g = int(np.sum(gsorted <= g))
        for part in np.array_split(sel, nb):
            batches.append((s[part].astype(np.int32), d[part].astype(np.int32)))
            truth.append(relabel[:n_g])
    return GraphStream(src0, dst0, tuple(batches), tuple(truth))
