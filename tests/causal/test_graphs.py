import itertools

import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.causal.enumerate import enumerate_dags, mec_codes
from jaxcore.causal.graphs import (
    adjacency_to_parents,
    check_dag,
    compress_parents,
    cpdag,
    cpdag_shd,
    expand_parents,
    is_dag,
    num_dags,
    num_linear_extensions,
    parents_to_adjacency,
    shd,
    topological_order,
)


def test_num_dags_robinson():
    assert [num_dags(d) for d in range(7)] == [1, 1, 3, 25, 543, 29281, 3781503]


def test_parents_roundtrip_and_compression():
    rng = np.random.default_rng(0)
    a = np.triu((rng.random((20, 5, 5)) < 0.5).astype(np.int32), 1)
    p = adjacency_to_parents(a)
    np.testing.assert_array_equal(parents_to_adjacency(p), a)
    np.testing.assert_array_equal(expand_parents(compress_parents(p)), p)
    assert int(jnp.max(compress_parents(p))) < 2**4
    # node 2 with parents {0, 3}: compressed bits 0 and 2 -> 5
    assert int(compress_parents(jnp.array([0, 0, 0b1001, 0, 0]))[2]) == 5


def test_is_dag_cases():
    chain = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])
    cycle = chain.copy()
    cycle[2, 0] = 1
    loop = np.zeros((3, 3), int)
    loop[1, 1] = 1
    np.testing.assert_array_equal(is_dag(np.stack([chain, cycle, loop])), [True, False, False])
    with pytest.raises(ValueError, match="acyclic"):
        check_dag(cycle)
    with pytest.raises(ValueError, match="square"):
        is_dag(np.zeros((3, 4)))


def test_topological_order_respects_edges():
    rng = np.random.default_rng(1)
    for _ in range(10):
        perm = rng.permutation(6)
        a = np.triu((rng.random((6, 6)) < 0.4).astype(int), 1)[np.ix_(perm, perm)]
        order = np.asarray(topological_order(a))
        pos = np.empty(6, int)
        pos[order] = np.arange(6)
        i, j = np.nonzero(a)
        assert np.all(pos[i] < pos[j])
        assert sorted(order) == list(range(6))


def test_cpdag_hand_cases():
    # collider 0 -> 2 <- 1 stays directed
    col = np.zeros((3, 3), int)
    col[0, 2] = col[1, 2] = 1
    np.testing.assert_array_equal(cpdag(col), col)
    # chain 0 -> 1 -> 2 becomes undirected
    chain = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])
    np.testing.assert_array_equal(cpdag(chain), chain + chain.T)
    # collider plus 2 -> 3: R1 compels 2 -> 3
    g = np.zeros((4, 4), int)
    g[0, 2] = g[1, 2] = g[2, 3] = 1
    np.testing.assert_array_equal(cpdag(g), g)


def test_cpdag_classes_match_skeleton_vstructure_codes():
    dags = enumerate_dags(4)
    adj = parents_to_adjacency(jnp.asarray(dags.parents, jnp.int32))
    cp = np.asarray(cpdag(adj)).reshape(adj.shape[0], -1)
    _, cp_ids = np.unique(cp, axis=0, return_inverse=True)
    _, vp_ids = np.unique(mec_codes(dags.parents), return_inverse=True)
    assert cp_ids.max() + 1 == vp_ids.max() + 1 == 185
    # same partition
    pairs = set(zip(cp_ids.ravel().tolist(), vp_ids.ravel().tolist()))
    assert len(pairs) == 185
    # every member of a class has the same CPDAG; its CPDAG-SHD to the class representative is 0
    first = {}
    for k, c in enumerate(vp_ids.ravel()):
        first.setdefault(c, k)
    reps = np.array([first[c] for c in vp_ids.ravel()])
    assert int(jnp.max(cpdag_shd(adj, adj[reps]))) == 0


def test_shd_hand():
    a = np.zeros((3, 3), int)
    a[0, 1] = a[1, 2] = 1
    b = np.zeros((3, 3), int)
    b[1, 0] = 1  # reversed
    b[0, 2] = 1  # extra, and 1 -> 2 missing
    assert int(shd(a, b)) == 3
    assert int(shd(a, a)) == 0
    # an undirected edge vs a directed one differs
    u = a.copy()
    u[1, 0] = 1
    assert int(shd(a, u)) == 1


def test_num_linear_extensions_bruteforce():
    rng = np.random.default_rng(2)
    for _ in range(8):
        a = np.triu((rng.random((5, 5)) < 0.4).astype(int), 1)
        brute = sum(
            all(p.index(i) < p.index(j) for i, j in zip(*np.nonzero(a))) for p in itertools.permutations(range(5))
        )
        assert int(num_linear_extensions(adjacency_to_parents(a))) == brute
