"""Directed acyclic graphs as adjacency tensors and parent-set bitmasks.

Conventions used throughout :mod:`jaxcore.causal`:

- An adjacency tensor ``adjacency[..., i, j] = 1`` means the edge ``i -> j``
  (row = parent, column = child); diagonal entries are zero.
- A parent-set bitmask ``parents[..., j]`` is an integer whose bit ``i`` is set
  when ``i`` is a parent of ``j`` (at most 31 nodes).
- A *compressed* parent index of node ``j`` numbers the subsets of the other
  ``d - 1`` nodes: bit ``i`` of the mask for ``i < j``, bit ``i - 1`` for ``i > j``.
  Local-score tables ``[d, 2**(d-1)]`` are indexed by it.
- A CPDAG is an adjacency tensor in which a directed edge ``i -> j`` has
  ``cpdag[i, j] = 1, cpdag[j, i] = 0`` and an undirected edge ``i - j`` has both
  entries 1.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int

from jaxcore._util import check_int, expected, is_concrete

from ._checks import check_acyclic, check_binary, check_bitmasks, host_array

__all__ = [
    "adjacency_to_parents",
    "parents_to_adjacency",
    "compress_parents",
    "expand_parents",
    "is_dag",
    "check_dag",
    "topological_order",
    "cpdag",
    "shd",
    "cpdag_shd",
    "num_linear_extensions",
    "num_dags",
]


def _check_square(adjacency, name="adjacency"):
    if adjacency is None or isinstance(adjacency, (str, bytes, dict)):
        raise TypeError(expected(name, "an adjacency array [..., d, d]", type(adjacency).__name__, raw=True))
    shape = tuple(np.shape(adjacency))
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(expected(name, "shape [..., d, d] (square in its last two axes)", f"shape {shape}", raw=True))
    if shape[-1] > 31:
        raise ValueError(expected(name, "at most 31 nodes (bitmask encoding)", f"d={shape[-1]}", raw=True))
    return shape[-1]


def _int_array(x, name):
    a = x if isinstance(x, jax.Array) else jnp.asarray(host_array(x, name))
    if not (jnp.issubdtype(a.dtype, jnp.integer) or jnp.issubdtype(a.dtype, jnp.floating) or a.dtype == jnp.bool_):
        raise TypeError(expected(name, "an integer, bool or float array", f"dtype {a.dtype}", raw=True))
    return a


def _parents_array(parents, name="parents"):
    """Parent bitmasks as an int32 JAX array (one dtype, so jitted callers compile once)."""
    a = _int_array(parents, name)
    if a.ndim < 1:
        raise ValueError(expected(name, "shape [..., d]", f"shape {tuple(a.shape)}", raw=True))
    if a.shape[-1] > 31:
        raise ValueError(expected(name, "at most 31 nodes (bitmask encoding)", f"d={a.shape[-1]}", raw=True))
    return a.astype(jnp.int32)


def _adjacency_array(adjacency, name="adjacency"):
    _check_square(adjacency, name)
    check_binary(adjacency, name)
    return (_int_array(adjacency, name) != 0).astype(jnp.int32)


def num_dags(d: int) -> int:
    """Number of labelled DAGs on ``d`` nodes (Robinson's recursion, OEIS A003024).

    ``a(n) = sum_{k=1}^{n} (-1)^(k+1) C(n, k) 2^(k (n-k)) a(n-k)``, ``a(0) = 1``.

    Args:
        d: number of nodes, ``>= 0``.

    Returns:
        the count, a Python int (exact).

    Raises:
        ValueError / TypeError: ``d`` not a non-negative int.

    References:
        R. W. Robinson, "Counting labeled acyclic digraphs", New Directions in the
        Theory of Graphs, 1973.

    Examples:
        >>> from jaxcore.causal import num_dags
        >>> [num_dags(d) for d in range(6)]
        [1, 1, 3, 25, 543, 29281]
    """
    d = check_int(d, "d", 0)
    a = [1]
    for n in range(1, d + 1):
        a.append(sum((-1) ** (k + 1) * math.comb(n, k) * 2 ** (k * (n - k)) * a[n - k] for k in range(1, n + 1)))
    return a[d]


def adjacency_to_parents(adjacency: Int[Array, "... d d"]) -> Int[Array, "... d"]:
    """Parent-set bitmasks of adjacency tensors.

    ``parents[..., j] = sum_i adjacency[..., i, j] * 2**i``.

    Args:
        adjacency: ``[..., d, d]`` 0/1 (any integer or bool dtype), ``i -> j`` at ``[i, j]``.

    Returns:
        ``[..., d]`` int32 bitmasks.

    Raises:
        ValueError: if ``adjacency`` is not square in its last two axes, d > 31, or an entry is not 0/1.
        TypeError: ``adjacency`` is None or not a real array.

    References:
        M. Koivisto, K. Sood, "Exact Bayesian structure discovery in Bayesian networks", JMLR 5, 2004, sec. 3 (parent sets indexed as subsets).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import adjacency_to_parents
        >>> adjacency_to_parents(np.array([[0, 1, 1], [0, 0, 1], [0, 0, 0]])).tolist()
        [0, 1, 3]
    """
    return _adj_to_parents_jit(_adjacency_array(adjacency))


def _adj_to_parents(adjacency):
    d = adjacency.shape[-1]
    w = (jnp.int32(1) << jnp.arange(d, dtype=jnp.int32))[:, None]
    return jnp.sum((adjacency != 0).astype(jnp.int32) * w, axis=-2)


_adj_to_parents_jit = jax.jit(_adj_to_parents)


def parents_to_adjacency(parents: Int[Array, "... d"]) -> Int[Array, "... d d"]:
    """Adjacency tensors of parent-set bitmasks (inverse of :func:`adjacency_to_parents`).

    Args:
        parents: ``[..., d]`` integer bitmasks.

    Returns:
        ``[..., d, d]`` int32 0/1 with ``[i, j] = bit i of parents[j]``.

    Raises:
        ValueError: ``parents`` is a scalar, has more than 31 nodes, or a bitmask is out of range
            (``< 0``, ``>= 2**d``, or node ``j``'s own bit set: never clamped).

    References:
        M. Koivisto, K. Sood, "Exact Bayesian structure discovery in Bayesian networks", JMLR 5, 2004, sec. 3 (parent sets indexed as subsets).

    Examples:
        >>> from jaxcore.causal import parents_to_adjacency
        >>> parents_to_adjacency([0, 1, 3]).tolist()
        [[0, 1, 1], [0, 0, 1], [0, 0, 0]]
    """
    p = _parents_array(parents)
    check_bitmasks(parents, "parents")
    return _parents_to_adj_jit(p)


def _parents_to_adj(parents):
    parents = parents.astype(jnp.int32)
    d = parents.shape[-1]
    return (parents[..., None, :] >> jnp.arange(d, dtype=jnp.int32)[:, None]) & 1


_parents_to_adj_jit = jax.jit(_parents_to_adj)


def compress_parents(parents: Int[Array, "... d"]) -> Int[Array, "... d"]:
    """Compressed parent indices in ``[0, 2**(d-1))`` (bit ``j`` of node ``j``'s mask removed).

    ``c_j = (m_j & (2**j - 1)) | ((m_j >> (j + 1)) << j)``.

    Args:
        parents: ``[..., d]`` integer bitmasks with bit ``j`` of ``parents[..., j]`` clear.

    Returns:
        ``[..., d]`` int32 column indices into a ``[d, 2**(d-1)]`` :class:`ScoreTable`.

    Raises:
        ValueError: ``parents`` is a scalar, has more than 31 nodes, or a bitmask is out of range
            (``< 0``, ``>= 2**d``, or node ``j``'s own bit set).

    References:
        M. Koivisto, K. Sood, "Exact Bayesian structure discovery in Bayesian networks", JMLR 5, 2004, sec. 3 (parent sets indexed as subsets).

    Examples:
        >>> from jaxcore.causal import compress_parents
        >>> compress_parents([0b110, 0b101, 0b011]).tolist()  # node j's own bit j is dropped
        [3, 3, 3]
    """
    p = _parents_array(parents)
    check_bitmasks(parents, "parents")
    return _compress_jit(p)


def _compress(parents):
    parents = jnp.asarray(parents).astype(jnp.int32)
    j = jnp.arange(parents.shape[-1], dtype=jnp.int32)
    return (parents & ((1 << j) - 1)) | ((parents >> (j + 1)) << j)


def _expand(index):
    index = jnp.asarray(index).astype(jnp.int32)
    j = jnp.arange(index.shape[-1], dtype=jnp.int32)
    return (index & ((1 << j) - 1)) | ((index >> j) << (j + 1))


_compress_jit = jax.jit(_compress)
_expand_jit = jax.jit(_expand)


def expand_parents(index: Int[Array, "... d"]) -> Int[Array, "... d"]:
    """Parent bitmasks from compressed indices (inverse of :func:`compress_parents`).

    ``m_j = (c_j & (2**j - 1)) | ((c_j >> j) << (j + 1))``.

    Args:
        index: ``[..., d]`` compressed parent indices in ``[0, 2**(d-1))``.

    Returns:
        ``[..., d]`` int32 parent bitmasks.

    Raises:
        ValueError: ``index`` is a scalar, has more than 31 nodes, or an index is outside
            ``[0, 2**(d-1))`` (checked when concrete; never clamped).

    References:
        M. Koivisto, K. Sood, "Exact Bayesian structure discovery in Bayesian networks", JMLR 5, 2004, sec. 3 (parent sets indexed as subsets).

    Examples:
        >>> from jaxcore.causal import expand_parents
        >>> expand_parents([3, 3, 3]).tolist()
        [6, 5, 3]
    """
    p = _parents_array(index, "index")
    check_bitmasks(index, "index", compressed=True)
    return _expand_jit(p)


def _acyclic_residual(parents):
    """Nodes left after ``d`` rounds of removing sources; 0 iff acyclic. parents: [..., d] int32."""
    parents = jnp.asarray(parents).astype(jnp.int32)  # int64 bitmasks under x64 would break the int32 loop carry
    d = parents.shape[-1]
    bits = jnp.int32(1) << jnp.arange(d, dtype=jnp.int32)
    full = jnp.int32((1 << d) - 1)

    def body(_, remaining):
        # a remaining node is a source when none of its parents remain
        is_source = ((parents & remaining[..., None]) == 0) & ((remaining[..., None] & bits) != 0)
        removed = jnp.sum(jnp.where(is_source, bits, 0), axis=-1, dtype=jnp.int32)  # int32 under x64 too
        return remaining & ~removed

    return jax.lax.fori_loop(0, d, body, jnp.full(parents.shape[:-1], full, jnp.int32))


_acyclic_residual_jit = jax.jit(lambda p: _acyclic_residual(p))


def is_dag(adjacency: Int[Array, "... d d"]) -> jax.Array:
    """Whether each graph is a DAG (no directed cycle, no self-loop).

    Repeatedly removes the nodes without a remaining parent (Kahn 1962); the
    graph is acyclic iff all ``d`` nodes are removed after ``d`` rounds.

    Args:
        adjacency: ``[..., d, d]`` 0/1.

    Returns:
        ``[...]`` bool.

    Raises:
        ValueError: if ``adjacency`` is not square in its last two axes.

    References:
        A. B. Kahn, "Topological sorting of large networks", CACM 1962.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import is_dag
        >>> is_dag(np.array([[[0, 1], [0, 0]], [[0, 1], [1, 0]]])).tolist()
        [True, False]
    """
    return _is_dag_jit(_adjacency_array(adjacency))


@jax.jit
def _is_dag_jit(adjacency):
    return _acyclic_residual(_adj_to_parents(adjacency)) == 0


def check_dag(adjacency, name: str = "adjacency") -> np.ndarray:
    """Validate (host side) that ``adjacency`` is a 0/1 DAG; return it as an int32 NumPy array.

    Args:
        adjacency: ``[..., d, d]`` candidate DAG(s).
        name: the argument name used in error messages.

    Returns:
        ``[..., d, d]`` int32 NumPy array.

    Raises:
        ValueError: if not square, not 0/1, or cyclic (the message names ``name``).

    References:
        A. B. Kahn, "Topological sorting of large networks", CACM 1962 (the acyclicity test).

    Examples:
        >>> from jaxcore.causal import check_dag
        >>> check_dag([[0, 1], [0, 0]]).tolist()
        [[0, 1], [0, 0]]
    """
    a = np.asarray(adjacency)
    _check_square(a, name)
    if not np.all((a == 0) | (a == 1)):
        raise ValueError(expected(name, "0/1 entries", "other values", raw=True))
    if not bool(np.all(np.asarray(is_dag(a)))):
        raise ValueError(expected(name, "an acyclic graph (a DAG)", "a directed cycle or self-loop", raw=True))
    return a.astype(np.int32)


def topological_order(adjacency: Int[Array, "d d"]) -> Int[Array, " d"]:
    """A topological order of a DAG (parents before children; ties by node index).

    Kahn's algorithm in ``d`` vectorised rounds: each round removes every node whose
    parents have all been removed; nodes removed in earlier rounds come first.

    Args:
        adjacency: ``[d, d]`` 0/1 DAG (use :func:`is_dag` to check; a cyclic
            graph yields the nodes on cycles last, in index order).

    Returns:
        ``[d]`` int32 permutation of ``0..d-1``.

    Raises:
        ValueError: ``adjacency`` is not ``[d, d]``.

    References:
        A. B. Kahn, "Topological sorting of large networks", CACM 1962.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import topological_order
        >>> topological_order(np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]])).tolist()
        [2, 1, 0]
    """
    a = _adjacency_array(adjacency)
    if a.ndim != 2:
        raise ValueError(expected("adjacency", "shape [d, d]", f"shape {tuple(a.shape)}", raw=True))
    return _topological_order_jit(a)


@jax.jit
def _topological_order_jit(adjacency):
    parents = _adj_to_parents(adjacency)
    d = parents.shape[-1]
    bits = jnp.int32(1) << jnp.arange(d, dtype=jnp.int32)

    def body(r, carry):
        remaining, level = carry
        is_source = ((parents & remaining) == 0) & ((remaining & bits) != 0)
        level = jnp.where(is_source, r, level)
        removed = jnp.sum(jnp.where(is_source, bits, 0), dtype=jnp.int32)
        return remaining & ~removed, level

    _, level = jax.lax.fori_loop(0, d, body, (jnp.int32((1 << d) - 1), jnp.full((d,), d, jnp.int32)))
    return jnp.argsort(level * d + jnp.arange(d), stable=True).astype(jnp.int32)


def cpdag(adjacency: Int[Array, "... d d"]) -> Int[Array, "... d d"]:
    """The CPDAG (essential graph) of the Markov equivalence class of a DAG.

    An edge is compelled iff it is in a v-structure or forced by Meek's rules
    R1-R3 (R4 is never needed without background knowledge; Meek 1995); the
    rules are applied to a fixed point (``d * (d - 1) / 2`` rounds).
    Compelled edges keep their direction, the others become undirected.

    Args:
        adjacency: ``[..., d, d]`` 0/1 DAG(s).

    Returns:
        ``[..., d, d]`` int32 CPDAG (undirected edges are symmetric 1s).

    Raises:
        ValueError: ``adjacency`` is not square in its last two axes, not 0/1, or (when concrete)
            has a directed cycle or self-loop (a CPDAG is defined for DAGs only).

    References:
        C. Meek, "Causal inference and causal explanation with background
        knowledge", UAI 1995 (rules R1-R3). D. M. Chickering, "A transformational
        characterization of equivalent Bayesian network structures", UAI 1995.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import cpdag
        >>> cpdag(np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])).tolist()  # a chain: all undirected
        [[0, 1, 0], [1, 0, 1], [0, 1, 0]]
    """
    a = _adjacency_array(adjacency)
    check_acyclic(a, "adjacency")
    return _cpdag_jit(a)


@jax.jit
def _cpdag_jit(a):
    return _cpdag(a)


def _cpdag(a):
    d = a.shape[-1]
    at = jnp.swapaxes(a, -1, -2)
    skel = a | at
    nonadj = (1 - skel) * (1 - jnp.eye(d, dtype=jnp.int32))
    # v-structures: i -> k <- j with i, j non-adjacent: edge i->k compelled
    # exists j: a[j,k] & nonadj[i,j]
    v = a * (jnp.einsum("...ij,...jk->...ik", nonadj, a) > 0)

    def step(_, comp):
        und = a * (1 - comp)  # oriented as in the DAG, not yet compelled (i->j with i-j in the PDAG)
        # R1: c -> i, i - j, c and j non-adjacent  =>  i -> j
        r1 = und * (jnp.einsum("...ci,...cj->...ij", comp, nonadj) > 0)
        # R2: i -> k -> j and i - j  =>  i -> j
        r2 = und * (jnp.einsum("...ik,...kj->...ij", comp, comp) > 0)
        # R3: i - k, i - l, k -> j, l -> j, k and l non-adjacent, i - j  =>  i -> j
        undsym = und + jnp.swapaxes(und, -1, -2)
        kl = undsym[..., :, :, None] * comp[..., None, :, :]  # [i,k,j]: i-k and k->j
        cnt = jnp.einsum("...ikj,...kl,...ilj->...ij", kl, nonadj, kl)
        r3 = und * (cnt > 0)
        return comp | r1 | r2 | r3

    comp = jax.lax.fori_loop(0, max(1, d * (d - 1) // 2), step, v)
    return a | (at * (1 - jnp.swapaxes(comp, -1, -2)))


def _pair_codes(g):
    """Status code of each pair i<j: 0 none, 1 i->j, 2 j->i, 3 both (undirected)."""
    return g + 2 * jnp.swapaxes(g, -1, -2)


def shd(adjacency_a: Int[Array, "... d d"], adjacency_b: Int[Array, "... d d"]) -> jax.Array:
    """Structural Hamming distance between graphs.

    Number of node pairs ``{i, j}`` whose edge status (absent, ``i -> j``,
    ``j -> i``, undirected) differs; a reversed edge counts once.

    Args:
        adjacency_a, adjacency_b: ``[..., d, d]`` 0/1 (broadcastable).

    Returns:
        ``[...]`` int32 distances.

    Raises:
        ValueError: not square, not 0/1, different ``d``, or batch shapes that do not broadcast.

    References:
        I. Tsamardinos, L. E. Brown, C. F. Aliferis, "The max-min hill-climbing
        Bayesian network structure learning algorithm", Machine Learning 2006.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import shd
        >>> int(shd(np.array([[0, 1], [0, 0]]), np.array([[0, 0], [1, 0]])))  # one reversal
        1
    """
    a, b = _pair_args(adjacency_a, adjacency_b)
    return _shd_jit(a, b)


def _pair_args(adjacency_a, adjacency_b):
    a = _adjacency_array(adjacency_a, "adjacency_a")
    b = _adjacency_array(adjacency_b, "adjacency_b")
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(expected("adjacency_b", f"d={a.shape[-1]} nodes like adjacency_a", f"d={b.shape[-1]}",
                                  raw=True))
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ValueError(expected("adjacency_b", f"a batch shape broadcastable with adjacency_a's {a.shape}",
                                  f"shape {b.shape}", raw=True)) from None
    return a, b


@jax.jit
def _shd_jit(a, b):
    return _shd(a, b)


def _shd(a, b):
    d = a.shape[-1]
    diff = _pair_codes(a) != _pair_codes(b)
    upper = jnp.triu(jnp.ones((d, d), bool), 1)
    return jnp.sum(diff & upper, axis=(-2, -1)).astype(jnp.int32)


def cpdag_shd(adjacency_a: Int[Array, "... d d"], adjacency_b: Int[Array, "... d d"]) -> jax.Array:
    """SHD between the CPDAGs of two DAGs (0 iff Markov equivalent).

    Args:
        adjacency_a, adjacency_b: ``[..., d, d]`` 0/1 DAGs (broadcastable).

    Returns:
        ``[...]`` int32.

    Raises:
        ValueError: not square, not 0/1, different ``d``, batch shapes that do not broadcast, or (when
            concrete) a cyclic graph.

    References:
        I. Tsamardinos, L. E. Brown, C. F. Aliferis, Machine Learning 2006 (SHD); D. M. Chickering, UAI 1995 (CPDAGs).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import cpdag_shd
        >>> int(cpdag_shd(np.array([[0, 1], [0, 0]]), np.array([[0, 0], [1, 0]])))  # Markov equivalent
        0
    """
    a, b = _pair_args(adjacency_a, adjacency_b)
    check_acyclic(a, "adjacency_a")
    check_acyclic(b, "adjacency_b")
    return _cpdag_shd_jit(a, b)


@jax.jit
def _cpdag_shd_jit(a, b):
    return _shd(_cpdag(a), _cpdag(b))


def num_linear_extensions(parents: Int[Array, "... d"]) -> jax.Array:
    """Number of topological orders (linear extensions) of each DAG.

    Dynamic programming over the sets ``S`` that can come first (down-sets):
    ``L(∅) = 1``, ``L(S) = sum_{j in S, pa(j) ⊆ S \\ {j}} L(S \\ {j})``; the count is ``L(V)``.

    Args:
        parents: ``[..., d]`` integer bitmasks of DAGs, ``d <= 20``.

    Returns:
        ``[...]`` float32 counts (exact up to 2**24; use x64 for larger).

    Raises:
        ValueError: ``d > 20``, a bitmask out of range, or (when concrete) a cyclic graph.

    References:
        G. Brightwell, P. Winkler, "Counting linear extensions", Order 1991 (#P-completeness;
        the subset DP is the standard exact method).

    Examples:
        >>> from jaxcore.causal import num_linear_extensions
        >>> num_linear_extensions([[0, 0, 0], [0, 1, 2]]).tolist()  # empty graph: 3!; chain: 1
        [6.0, 1.0]
    """
    p = _parents_array(parents)
    if p.shape[-1] > 20:
        raise ValueError(expected("parents", "d <= 20 nodes", f"d={p.shape[-1]}", raw=True))
    check_bitmasks(parents, "parents")
    if is_concrete(p):
        check_acyclic(_parents_to_adj_jit(p), "parents", ok=_acyclic_residual_jit(p) == 0)
    return _num_linear_extensions_jit(p)


def _num_linear_extensions(parents):
    parents = jnp.asarray(parents).astype(jnp.int32)
    d = parents.shape[-1]
    sets = jnp.arange(1 << d, dtype=jnp.int32)
    bits = jnp.int32(1) << jnp.arange(d, dtype=jnp.int32)
    dtype = jnp.result_type(float)
    # L_new(S) = [S = ∅] + sum_{j in S, pa(j) ⊆ S\j} L(S \ j): correct on |S| <= k after k rounds.
    in_s = (sets[:, None] & bits) != 0  # [2^d, d]
    prev = sets[:, None] & ~bits  # [2^d, d]

    def body(_, L):
        ok = in_s & ((parents[..., None, :] & ~prev) == 0)
        vals = jnp.take(L, prev, axis=-1)  # [..., 2^d, d]
        new = jnp.sum(jnp.where(ok, vals, 0), axis=-1)
        return new.at[..., 0].set(1)

    L0 = jnp.zeros(parents.shape[:-1] + (1 << d,), dtype).at[..., 0].set(1)
    L = jax.lax.fori_loop(0, d, body, L0)
    return L[..., -1]


_num_linear_extensions_jit = jax.jit(_num_linear_extensions)
