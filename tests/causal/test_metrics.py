import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.causal.metrics import (
    edge_auprc,
    edge_auroc,
    expected_cpdag_shd,
    expected_edge_f1,
    expected_shd,
    hellinger,
    interventional_nll,
    kl_divergence,
    mmd_hamming,
    mmd_hamming_exact,
    predictive_nll,
    total_variation,
)
from jaxcore.causal import bge_local_scores, make_samples

CHAIN = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])
REV = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]])  # 2 -> 1 -> 0, Markov equivalent to CHAIN
COLL = np.array([[0, 1, 0], [0, 0, 0], [0, 1, 0]])  # 0 -> 1 <- 2
EMPTY = np.zeros((3, 3), int)


def test_expected_shd_and_cpdag_shd_hand():
    s = make_samples(np.stack([CHAIN, REV, COLL]), np.array([0.5, 0.25, 0.25]))
    # SHD to CHAIN: 0, 2, 1 -> 0.25*2 + 0.25*1
    np.testing.assert_allclose(float(expected_shd(s, CHAIN)), 0.75)
    # CPDAG: CHAIN and REV share 0-1-2 undirected; COLL is 0->1<-2: differs in both pairs
    np.testing.assert_allclose(float(expected_cpdag_shd(s, CHAIN)), 0.5)


def test_edge_f1_hand():
    s = make_samples(np.stack([CHAIN, COLL, EMPTY]), np.array([0.5, 0.3, 0.2]))
    m = expected_edge_f1(s, CHAIN)
    # COLL: TP 1 (0->1), FP 1, FN 1 -> P 0.5, R 0.5, F1 0.5; EMPTY: P 0, R 0, F1 0
    np.testing.assert_allclose(float(m["precision"]), 0.5 + 0.3 * 0.5)
    np.testing.assert_allclose(float(m["recall"]), 0.5 + 0.3 * 0.5)
    np.testing.assert_allclose(float(m["f1"]), 0.5 + 0.3 * 0.5)


def test_auroc_auprc_hand():
    truth = CHAIN
    probs = np.array([[0, 0.9, 0.1], [0.2, 0, 0.3], [0.3, 0.05, 0]])
    # positives 0.9, 0.3; negatives 0.1, 0.2, 0.3, 0.05: wins 4 + (3 + 0.5) = 7.5 of 8
    np.testing.assert_allclose(float(edge_auroc(probs, truth)), 7.5 / 8)
    # thresholds: 0.9 -> P 1, R .5 ; 0.3 (two tied, one positive) -> P 2/3, R 1
    np.testing.assert_allclose(float(edge_auprc(probs, truth)), 0.5 * 1 + 0.5 * 2 / 3, rtol=1e-6)
    with pytest.raises(ValueError, match="edge"):
        edge_auroc(probs, EMPTY)
    # the truth is read on the host: bool, float 0/1 and device int arrays give the same areas
    for t in (np.asarray(truth) != 0, np.asarray(truth, np.float32), jnp.asarray(truth, jnp.int32)):
        np.testing.assert_allclose(float(edge_auroc(probs, t)), 7.5 / 8)
        np.testing.assert_allclose(float(edge_auprc(probs, t)), 0.5 * 1 + 0.5 * 2 / 3, rtol=1e-6)
    with pytest.raises(ValueError, match="true_adjacency.*0/1"):
        edge_auroc(probs, 2 * np.asarray(truth))


def _k(a, b):
    m = ~np.eye(a.shape[0], dtype=bool)
    return 1.0 - np.sum(a[m] != b[m]) / m.sum()


def test_mmd_matches_pairwise_u_statistic():
    rng = np.random.default_rng(0)
    xs = np.triu((rng.random((7, 4, 4)) < 0.5).astype(int), 1)
    ys = np.triu((rng.random((5, 4, 4)) < 0.3).astype(int), 1)
    m, n = len(xs), len(ys)
    kxx = sum(_k(xs[i], xs[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    kyy = sum(_k(ys[i], ys[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    kxy = sum(_k(xs[i], ys[j]) for i in range(m) for j in range(n)) / (m * n)
    got = mmd_hamming(make_samples(xs), make_samples(ys))
    np.testing.assert_allclose(float(got), kxx + kyy - 2 * kxy, rtol=1e-5, atol=1e-7)
    # against an exact distribution the exact side keeps its diagonal
    p = rng.dirichlet(np.ones(5))
    kyy_exact = sum(p[i] * p[j] * _k(ys[i], ys[j]) for i in range(n) for j in range(n))
    kxy_exact = sum(p[j] * _k(xs[i], ys[j]) for i in range(m) for j in range(n)) / m
    got = mmd_hamming(make_samples(xs), make_samples(ys, p), exact_q=True)
    np.testing.assert_allclose(float(got), kxx + kyy_exact - 2 * kxy_exact, rtol=1e-5, atol=1e-7)
    mu = np.einsum("n,nij->ij", p, ys)
    np.testing.assert_allclose(float(mmd_hamming_exact(make_samples(xs), mu)), float(got), rtol=1e-5, atol=1e-7)


def test_distribution_distances_hand():
    p = jnp.array([0.5, 0.5, 0.0])
    q = jnp.array([0.25, 0.25, 0.5])
    np.testing.assert_allclose(float(total_variation(p, q)), 0.5)
    np.testing.assert_allclose(float(kl_divergence(p, q)), np.log(2.0), rtol=1e-6)
    with pytest.warns(RuntimeWarning, match=r"p puts mass 0.5 on 1 entries where q is 0"):
        assert np.isinf(float(kl_divergence(q, p)))
    np.testing.assert_allclose(float(hellinger(p, q)), np.sqrt(1 - np.sqrt(0.5)), rtol=1e-6)
    np.testing.assert_allclose(float(hellinger(p, p)), 0.0, atol=1e-4)


def test_predictive_and_interventional_nll(x64):
    rng = np.random.default_rng(1)
    tr = rng.normal(size=(20, 3))
    te = rng.normal(size=(4, 3))
    s = make_samples(CHAIN[None])
    t_all = np.asarray(bge_local_scores(np.concatenate([tr, te])).table)
    t_tr = np.asarray(bge_local_scores(tr).table)
    idx = [0, 1, 2]  # compressed parent indices of the chain: {}, {0}, {1}
    want = -(sum(t_all[j, c] - t_tr[j, c] for j, c in enumerate(idx))) / 4
    np.testing.assert_allclose(float(predictive_nll(s, tr, te)), want, rtol=1e-10)
    # intervening on every node leaves nothing to predict
    np.testing.assert_allclose(float(interventional_nll(s, tr, te, np.ones(3))), 0.0, atol=1e-12)
    want_int = -(t_all[2, 2] - t_tr[2, 2] + t_all[1, 1] - t_tr[1, 1]) / 4
    np.testing.assert_allclose(float(interventional_nll(s, tr, te, np.array([1, 0, 0]))), want_int, rtol=1e-10)
    # a mixture's NLL lies between its components'
    two = make_samples(np.stack([CHAIN, EMPTY]))
    a = float(predictive_nll(make_samples(EMPTY[None]), tr, te))
    b = float(predictive_nll(two, tr, te))
    assert min(a, want) - 1e-9 <= b <= max(a, want) + 1e-9


def test_bad_inputs():
    with pytest.raises(TypeError, match="DAGSamples"):
        expected_shd(CHAIN, CHAIN)
    with pytest.raises(ValueError, match="d="):
        expected_shd(make_samples(CHAIN[None]), np.zeros((4, 4)))
    with pytest.raises(ValueError, match="NaN"):
        predictive_nll(make_samples(CHAIN[None]), np.full((3, 3), np.nan), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="shape"):
        make_samples(np.zeros((3, 3)))
