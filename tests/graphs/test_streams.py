"""SBM and kNN streams: exact pair sampling, kNN against scikit-learn, the dynamic algorithm end to end."""

import jax
import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score
from sklearn.neighbors import NearestNeighbors

from jaxcore.graphs import (from_edges, init_clustering, knn_edges, knn_stream, query_clustering, sbm_edges,
                            sbm_merge_stream, sbm_stream, update_clustering)


def test_sbm_edges_exact_pairs():
    s, d, lab = sbm_edges(jax.random.key(0), [7, 5], 1.0, 0.0)
    assert sorted(zip(s.tolist(), d.tolist())) == [(i, j) for i in range(7) for j in range(i + 1, 7)] + \
        [(i, j) for i in range(7, 12) for j in range(i + 1, 12)]
    s, d, _ = sbm_edges(jax.random.key(1), [300, 200], 0.1, 0.01)
    pairs = set(zip(s.tolist(), d.tolist()))
    assert len(pairs) == s.size and np.all(s < d)
    inside = (s < 300) == (d < 300)
    # binomial counts within 5 standard deviations
    for cnt, tot, p in ((inside.sum(), 300 * 299 / 2 + 200 * 199 / 2, 0.1), ((~inside).sum(), 300 * 200, 0.01)):
        assert abs(cnt - tot * p) < 5 * np.sqrt(tot * p * (1 - p))


def test_knn_edges_match_sklearn():
    x = np.random.default_rng(0).normal(size=(150, 4)).astype(np.float32)
    s, d = knn_edges(x, 5, chunk_size=64)
    idx = NearestNeighbors(n_neighbors=6).fit(x).kneighbors(x, return_distance=False)[:, 1:]
    ref = {(min(i, j), max(i, j)) for i in range(150) for j in idx[i]}
    assert set(zip(s.tolist(), d.tolist())) == ref


@pytest.mark.slow
def test_dynamic_stream_ari_one():
    st = sbm_stream(jax.random.key(0), [30, 30, 30], 0.5, 0.01, [15, 15], p_new=0.9)
    state, first = init_clustering(jax.random.key(1), from_edges(st.src, st.dst), 3, sampling_constant=2.0)
    assert adjusted_rand_score(st.labels[0], np.asarray(first.labels)[:90]) == 1.0
    for t, (s, d) in enumerate(st.batches):
        state = update_clustering(jax.random.key(10 + t), state, s, d)
        r = query_clustering(jax.random.key(20 + t), state, st.num_clusters[t + 1])
        n = st.labels[t + 1].size
        assert adjusted_rand_score(st.labels[t + 1], np.asarray(r.labels)[:n]) == 1.0
        state = r.state


def test_knn_stream_order():
    x = np.concatenate([np.zeros((6, 2)), np.full((6, 2), 9.0), np.full((6, 2), 20.0)])
    x = x + np.random.default_rng(0).normal(size=x.shape)
    st = knn_stream(jax.random.key(0), x, np.repeat([0, 1, 2], 6), 3, 1, num_batches=2)
    assert len(st.batches) == 4 and st.num_clusters == [1, 2, 2, 3, 3]
    top = max(int(np.max(st.src, initial=0)), int(np.max(st.dst, initial=0)))
    assert top < 6                                      # the initial graph holds the first class only


def test_refusals():
    with pytest.raises(ValueError, match="p: expected a number in"):
        sbm_edges(jax.random.key(0), [3], 1.5, 0.0)
    with pytest.raises(TypeError, match="sizes: expected a sequence of cluster sizes"):
        sbm_edges(jax.random.key(0), 3, 0.5, 0.0)
    with pytest.raises(ValueError, match="num_neighbors: expected an int in"):
        knn_edges(np.zeros((3, 2)), 3)


def test_merge_stream_pairs_and_labels():
    # r = 1: every pair between the two clusters arrives; no noise; labels of b become a
    st = sbm_merge_stream(jax.random.key(0), [6, 4, 3, 5], 1.0, 0.0, [(2, 1), (0, 3)], r=1.0)
    (s1, d1), (s2, d2) = st.batches
    assert sorted(zip(s1.tolist(), d1.tolist())) == [(i, j) for i in range(10, 13) for j in range(6, 10)]
    assert sorted(zip(s2.tolist(), d2.tolist())) == [(i, j) for i in range(6) for j in range(13, 18)]
    assert st.num_clusters == [4, 3, 2]
    np.testing.assert_array_equal(st.labels[1], [0] * 6 + [2] * 7 + [3] * 5)
    np.testing.assert_array_equal(st.labels[2], [0] * 6 + [2] * 7 + [0] * 5)
    # r < 1: a binomial count within 5 standard deviations; noise s adds pairs anywhere
    st = sbm_merge_stream(jax.random.key(1), [200, 200], 0.1, 0.0, [(0, 1)], r=0.3, s=0.01)
    s, d = st.batches[0]
    across = (s < 200) != (d < 200)
    tot = 200 * 200
    assert abs(across.sum() - tot * 0.3 - 400 * 399 / 2 * 0.01 / 2) < 5 * np.sqrt(tot * 0.3)
    assert abs((~across).sum() - 2 * 200 * 199 / 2 * 0.01) < 5 * np.sqrt(2 * 200 * 199 / 2 * 0.01)


def test_merge_stream_refusals():
    key = jax.random.key(0)
    with pytest.raises(ValueError, match=r"^merges\[1\]: expected two different clusters present at step 2"):
        sbm_merge_stream(key, [5, 5, 5], 0.5, 0.0, [(0, 1), (0, 1)])   # 1 was merged into 0 at step 1
    with pytest.raises(ValueError, match=r"^merges\[0\]: expected two different clusters"):
        sbm_merge_stream(key, [5, 5], 0.5, 0.0, [(1, 1)])
    with pytest.raises(TypeError, match="^merges: expected a sequence of \\(a, b\\) pairs"):
        sbm_merge_stream(key, [5, 5], 0.5, 0.0, (0, 1))
    with pytest.raises(TypeError, match=r"^merges\[0\]: expected a pair"):
        sbm_merge_stream(key, [5, 5], 0.5, 0.0, [0])
    with pytest.raises(ValueError, match="^r: expected a number in"):
        sbm_merge_stream(key, [5, 5], 0.5, 0.0, [(0, 1)], r=1.5)


@pytest.mark.slow
def test_dynamic_merge_stream_tracks_the_merges():
    st = sbm_merge_stream(jax.random.key(0), [60, 60, 30, 30], 0.5, 0.005, [(2, 3), (0, 2)], r=0.8)
    state, first = init_clustering(jax.random.key(1), from_edges(st.src, st.dst), 4, sampling_constant=2.0)
    assert adjusted_rand_score(st.labels[0], np.asarray(first.labels)[:180]) == 1.0
    for t, (s, d) in enumerate(st.batches):
        state = update_clustering(jax.random.key(10 + t), state, s, d)
        r = query_clustering(jax.random.key(20 + t), state, st.num_clusters[t + 1])
        assert adjusted_rand_score(st.labels[t + 1], np.asarray(r.labels)[:180]) == 1.0
        state = r.state
