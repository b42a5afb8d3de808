"""Buffer donation of the streaming updates (``donate=True``): the same state as the copying update, written
into the input's buffers (the input is consumed), with the capacities a copy of the stream would reach."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import graphs as G


def _stream(donate, batches, keep=None):
    g, _ = G.sbm_graph(jax.random.key(0), [30, 30], 0.4, 0.02)
    state, _ = G.init_clustering(jax.random.key(1), g, 2, sampling_constant=5.0, num_init=2)
    for i, (s, d) in enumerate(batches):
        old = state
        state = G.update_clustering(jax.random.key(10 + i), state, s, d, donate=donate)
        if keep is not None:
            keep.append(old)
    return state


def _batches():
    rng = np.random.default_rng(3)
    out = []
    for step in range(4):  # new vertices 60.. (singletons in the contracted graph) and edges among old ones
        s = np.concatenate([rng.integers(0, 60, 6), 60 + np.arange(3 * step, 3 * step + 3)])
        d = np.concatenate([(s[:6] + rng.integers(1, 59, 6)) % 60, rng.integers(0, 60, 3)])
        out.append((s, d))
    return out


@pytest.mark.slow  # init_clustering and every update compile twice (copying and donating): ~40 CPU-s
def test_donated_stream_equals_the_copying_stream_and_consumes_its_inputs():
    batches = _batches()
    want = _stream(False, batches)
    olds = []
    got = _stream(True, batches, keep=olds)
    for name in ("graph", "sparsifier"):
        for a, b in zip(jax.tree.leaves(getattr(got, name)), jax.tree.leaves(getattr(want, name))):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=name)
    cg, cw = got.contracted, want.contracted
    s = int(cw.num_supernodes)
    assert int(cg.num_supernodes) == s and cg.supernode_capacity >= cw.supernode_capacity
    np.testing.assert_array_equal(np.asarray(cg.matrix)[:s, :s], np.asarray(cw.matrix)[:s, :s])
    for f in ("assign", "edge_weight", "degree_then"):
        np.testing.assert_array_equal(np.asarray(getattr(cg, f)), np.asarray(getattr(cw, f)), err_msg=f)
    # a donated input's buffers are gone unless they had to grow (then the update wrote into bigger copies)
    caps = lambda st: (st.graph.vertex_capacity, st.graph.edge_capacity, st.graph.width)  # noqa: E731
    for old, new in zip(olds, olds[1:] + [got]):
        if caps(old) == caps(new):
            assert old.graph.src.is_deleted() and old.sparsifier.weight.is_deleted()
            if old.contracted.supernode_capacity == new.contracted.supernode_capacity:
                assert old.contracted.matrix.is_deleted()
    assert any(old.graph.src.is_deleted() and old.contracted.matrix.is_deleted() for old in olds)


def test_donated_insert_consumes_its_input_and_the_copying_one_does_not():
    g = G.from_edges([0, 1, 2], [1, 2, 3], edge_capacity=64)
    kept = G.add_edges(g, [3], [4])
    assert not g.src.is_deleted() and int(g.num_edges) == 3 and int(kept.num_edges) == 4
    got = G.add_edges(g, [3], [4], donate=True)  # room for the edge: written into g's buffers
    assert g.src.is_deleted() and g.neighbors.is_deleted()
    with pytest.raises(RuntimeError, match="deleted"):
        np.asarray(g.src)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(kept)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_donated_insert_widens_the_table_before_it_writes():
    g = G.from_edges([0, 1], [1, 2], width=1)  # a star of 20 edges at 0: the width must grow to 32
    ref = G.add_edges(g, np.zeros(20, int), np.arange(3, 23))
    got = G.add_edges(jax.tree.map(jnp.copy, g), np.zeros(20, int), np.arange(3, 23), donate=True)
    assert got.width == ref.width >= 21
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(TypeError, match="donate: expected a bool"):
        G.add_edges(g, [0], [5], donate=1)
