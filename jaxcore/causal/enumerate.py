"""Every labelled DAG on d <= 6 nodes, built by recursion over an added node, cached on disk.

A DAG on ``d`` nodes is a DAG ``G'`` on the first ``d - 1`` nodes plus node
``d - 1`` with a parent set ``P`` and a child set ``C`` such that no child is an
ancestor-or-self of a parent in ``G'``: ``C ∩ anc*(P) = ∅``. Every DAG arises
exactly once, so the table is built with a few vectorised NumPy passes per
node (no loop over candidate graphs): 29281 DAGs (d = 5) in milliseconds and
3781503 (d = 6) in about a second. The result is stored as parent bitmasks
``[num_dags, d]`` uint8 (22 MiB for d = 6), sorted by :func:`dag_keys`, together
with each DAG's Markov-equivalence-class id (skeleton + v-structures), in ``cache_dir()/causal``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcore._util import cached_arrays, check_bool, expected

from ._checks import check_bitmasks
from .graphs import _compress, _parents_array, num_dags

__all__ = ["DAGTable", "enumerate_dags", "dag_keys", "mec_codes", "MAX_ENUMERATE_D"]

MAX_ENUMERATE_D = 6
_CACHE_VERSION = "2"  # 2: written by jaxcore._util.cached_arrays (with a key manifest)


class DAGTable(NamedTuple):
    """All DAGs on ``d`` nodes.

    Attributes:
        parents: ``[num_dags, d]`` uint8 parent bitmasks, sorted by key.
        keys: ``[num_dags]`` int32 unique keys (:func:`dag_keys`), increasing.
        mec: ``[num_dags]`` int32 Markov equivalence class id in ``[0, num_mecs)``.
        num_mecs: number of equivalence classes.

    Examples:
        >>> from jaxcore.causal import DAGTable
        >>> DAGTable._fields  # doctest: +ELLIPSIS
        (...)
    """

    parents: np.ndarray
    keys: np.ndarray
    mec: np.ndarray
    num_mecs: int


def dag_keys(parents) -> jax.Array:
    """A unique int32 key per DAG: compressed parent indices packed in base ``2**(d-1)``.

    ``key = sum_j c_j * 2**((d-1) j)`` with ``c_j`` from :func:`compress_parents`;
    ``d (d - 1) <= 30`` bits, so ``d <= 6``.

    Args:
        parents: ``[..., d]`` integer bitmasks, ``d <= 6``.

    Returns:
        ``[...]`` int32.

    Raises:
        ValueError: ``d > 6``.

    References:
        M. Koivisto, K. Sood, "Exact Bayesian structure discovery in Bayesian networks", JMLR 5, 2004, sec. 3 (parent sets indexed as subsets).

    Examples:
        >>> from jaxcore.causal import dag_keys
        >>> dag_keys([[0, 0], [0, 1], [2, 0]]).tolist()
        [0, 2, 1]
    """
    raw = parents
    parents = _parents_array(parents)
    d = parents.shape[-1]
    check_bitmasks(raw, "parents")
    if d > MAX_ENUMERATE_D:
        raise ValueError(expected("parents", f"d <= {MAX_ENUMERATE_D} nodes", f"d={d}", raw=True))
    return _dag_keys_jit(parents)


def _dag_keys(parents):
    d = parents.shape[-1]
    c = _compress(parents)
    shifts = (d - 1) * jnp.arange(d, dtype=jnp.int32)
    return jnp.sum(c << shifts, axis=-1).astype(jnp.int32)


_dag_keys_jit = jax.jit(_dag_keys)


def _build_parents(d: int) -> np.ndarray:
    """Parent bitmasks [n, d] of all DAGs on d nodes (unsorted)."""
    par = np.zeros((1, 0), np.uint8)
    for m in range(d):  # add node m to DAGs on nodes 0..m-1
        n_prev = par.shape[0]
        full = (1 << m) - 1
        # ancestor-or-self masks of each existing node, by d rounds of propagation
        anc = (par.astype(np.int64) | (np.int64(1) << np.arange(m, dtype=np.int64)))  # [n, m]
        for _ in range(m):
            new = anc.copy()
            for j in range(m):
                for i in range(m):
                    has = ((par[:, j] >> i) & 1).astype(bool)
                    new[has, j] |= anc[has, i]
            anc = new
        subsets = np.arange(1 << m, dtype=np.int64)
        # ancP[n, P] = OR_{p in P} anc*(p)
        ancp = np.zeros((n_prev, 1 << m), np.int64)
        for p in range(m):
            inp = ((subsets >> p) & 1).astype(bool)
            ancp[:, inp] |= anc[:, p : p + 1]
        free = full & ~ancp  # allowed children
        # valid[n, P, C]: C ⊆ free[n, P]
        valid = (subsets[None, None, :] & ~free[:, :, None]) == 0
        gi, pi, ci = np.nonzero(valid)
        new_par = np.empty((gi.size, m + 1), np.uint8)
        for j in range(m):
            new_par[:, j] = par[gi, j] | (((ci >> j) & 1) << m).astype(np.uint8)
        new_par[:, m] = pi.astype(np.uint8)
        par = new_par
    return par


def mec_codes(parents: np.ndarray) -> np.ndarray:
    """An int64 code per DAG equal for exactly the Markov-equivalent DAGs (host side, NumPy).

    Two DAGs are Markov equivalent iff they share skeleton and v-structures
    (Verma & Pearl 1990). The code packs the skeleton (``d (d - 1) / 2`` bits)
    and the set of edges that lie in a v-structure (``d (d - 1)`` bits); given
    the skeleton, the v-structure edges determine the v-structures.

    Args:
        parents: ``[n, d]`` integer bitmasks, ``d <= 7``.

    Returns:
        ``[n]`` int64 codes.

    Raises:
        ValueError: ``parents`` not ``[n, d]`` or ``d > 7``.

    References:
        T. Verma, J. Pearl, "Equivalence and synthesis of causal models", UAI 1990.

    Examples:
        >>> from jaxcore.causal import mec_codes
        >>> c = mec_codes([[0, 1, 2], [2, 4, 0], [0, 0, 3]])  # chain, reversed chain, collider
        >>> bool(c[0] == c[1]), bool(c[0] == c[2])
        (True, False)
    """
    if parents is None:
        raise TypeError(expected("parents", "an integer array [n, d]", "None", raw=True))
    check_bitmasks(parents, "parents")
    parents = np.asarray(parents).astype(np.int64)
    if parents.ndim != 2:
        raise ValueError(expected("parents", "shape [n, d]", f"shape {parents.shape}", raw=True))
    n, d = parents.shape
    if d > 7:
        raise ValueError(expected("parents", "d <= 7 nodes", f"d={d}", raw=True))
    children = np.zeros_like(parents)
    for j in range(d):
        for i in range(d):
            children[:, i] |= ((parents[:, j] >> i) & 1) << j
    nb = parents | children
    code = np.zeros(n, np.int64)
    bit = 0
    for i in range(d):
        for j in range(i + 1, d):
            code |= ((nb[:, i] >> j) & 1) << bit
            bit += 1
    for k in range(d):
        for i in range(d):
            if i == k:
                continue
            is_par = (parents[:, k] >> i) & 1
            other = parents[:, k] & ~nb[:, i] & ~(np.int64(1) << i)
            code |= (is_par & (other != 0)) << bit
            bit += 1
    return code


def _mec_ids(parents: np.ndarray) -> tuple[np.ndarray, int]:
    _, inv = np.unique(mec_codes(parents), return_inverse=True)
    return inv.astype(np.int32).reshape(-1), int(inv.max()) + 1


def _build_table(d: int) -> dict[str, np.ndarray]:
    parents = _build_parents(d)
    keys = np.asarray(dag_keys(jnp.asarray(parents, jnp.int32)))
    order = np.argsort(keys, kind="stable")
    parents, keys = parents[order], keys[order]
    mec, num_mecs = _mec_ids(parents)
    return {"parents": parents, "keys": keys, "mec": mec, "num_mecs": np.int64(num_mecs)}


def enumerate_dags(d: int, *, cache: bool = True) -> DAGTable:
    """All labelled DAGs on ``d <= 6`` nodes with their equivalence classes.

    Counts are 1, 3, 25, 543, 29281, 3781503 DAGs and 1, 2, 11, 185, 8782,
    1067825 equivalence classes for d = 1..6. The first call for a given ``d``
    builds the table (a few seconds at d = 6)
    and stores it in ``jaxcore.datasets.cache_dir()/causal``; later calls load it.

    Args:
        d: number of nodes, 1..6.
        cache: read and write the on-disk cache.

    Returns:
        :class:`DAGTable`.

    Raises:
        ValueError: if ``d`` is not in 1..6; for larger graphs use
            :func:`jaxcore.causal.exact_edge_marginals` (exact edge marginals by
            dynamic programming) or the MCMC samplers
            (:func:`jaxcore.causal.structure_mcmc`, :func:`jaxcore.causal.order_mcmc`).
        TypeError: ``d`` is not an int.

    References:
        R. W. Robinson, "Counting labeled acyclic digraphs", 1973 (the counts);
        S. B. Gillispie, M. D. Perlman, "Enumerating Markov equivalence classes
        of acyclic digraph models", UAI 2001 (the class counts).

    Examples:
        >>> from jaxcore.causal import enumerate_dags
        >>> t = enumerate_dags(3, cache=False)
        >>> t.parents.shape, t.num_mecs
        ((25, 3), 11)
    """
    if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
        raise TypeError(expected("d", "an int", type(d).__name__, raw=True))
    d = int(d)
    if d < 1 or d > MAX_ENUMERATE_D:
        raise ValueError(expected(
            "d", f"an int in 1..{MAX_ENUMERATE_D} to enumerate every DAG "
            "(for larger d use exact_edge_marginals, exact edge marginals by dynamic programming over subsets, "
            "or structure_mcmc / order_mcmc)",
            f"d={d} ({num_dags(d) if d >= 0 else 0} DAGs)", raw=True))
    cache = check_bool(cache, "cache")
    if cache:
        z = cached_arrays(f"dags-d{d}", lambda: _build_table(d), version=_CACHE_VERSION, folder="causal",
                          keys=("parents", "keys", "mec", "num_mecs"))
    else:
        z = _build_table(d)
    return DAGTable(z["parents"], z["keys"], z["mec"], int(z["num_mecs"]))
