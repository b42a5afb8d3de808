import math

import numpy as np
import pytest

from jaxcore.causal import (
    ScoreTable,
    bge_local_scores,
    dag_log_scores,
    edge_marginals_from_posterior,
    enumerate_dags,
    exact_posterior,
    mec_log_posterior,
    mec_posterior,
    parents_to_adjacency,
    posterior_entropy,
    uniform_prior_table,
)


def test_uniform_table_gives_uniform_posterior():
    dags = enumerate_dags(4)
    post = exact_posterior(uniform_prior_table(4), dags)
    np.testing.assert_allclose(float(post.entropy), math.log(543), rtol=1e-5)
    np.testing.assert_allclose(np.exp(np.asarray(post.log_prob)).sum(), 1.0, rtol=1e-5)
    # edge i -> j appears in the same number of DAGs for every pair: 543 DAGs, by symmetry
    em = np.asarray(post.edge_marginals)
    off = em[~np.eye(4, dtype=bool)]
    np.testing.assert_allclose(off, off[0], rtol=1e-5)
    assert np.all(np.diag(em) == 0)


def test_posterior_against_bruteforce(x64):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20, 3))
    x[:, 2] += x[:, 0] - x[:, 1]
    table = bge_local_scores(x)
    dags = enumerate_dags(3)
    post = exact_posterior(table, dags)
    s = np.asarray(dag_log_scores(table, dags.parents))
    p = np.exp(s - s.max())
    p /= p.sum()
    np.testing.assert_allclose(np.exp(np.asarray(post.log_prob)), p, rtol=1e-10)
    adj = np.asarray(parents_to_adjacency(dags.parents))
    np.testing.assert_allclose(np.asarray(post.edge_marginals), np.einsum("n,nij->ij", p, adj), rtol=1e-10)
    mec = np.zeros(dags.num_mecs)
    np.add.at(mec, dags.mec, p)
    np.testing.assert_allclose(np.asarray(post.mec_prob), mec, rtol=1e-10)
    np.testing.assert_allclose(float(post.entropy), -(p * np.log(p)).sum(), rtol=1e-10)
    np.testing.assert_allclose(float(post.mec_entropy), -(mec * np.log(mec)).sum(), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(edge_marginals_from_posterior(post.log_prob, dags.parents)), np.asarray(post.edge_marginals))
    np.testing.assert_allclose(np.asarray(mec_posterior(post.log_prob, dags)), mec, rtol=1e-10)
    np.testing.assert_allclose(float(posterior_entropy(post.log_prob)), float(post.entropy))
    # the v-structure 0 -> 2 <- 1 is the most probable class
    top = dags.parents[np.argmax(p)]
    assert top[2] == 0b011


def test_errors():
    with pytest.raises(ValueError, match="shape"):
        exact_posterior(ScoreTable(np.zeros((3, 3))))
    with pytest.raises(ValueError, match="exact_edge_marginals"):
        exact_posterior(ScoreTable(np.zeros((7, 64))))
    bad = np.zeros((3, 4))
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        exact_posterior(ScoreTable(bad))
    with pytest.raises(TypeError, match="ScoreTable"):
        exact_posterior(np.zeros((3, 4)))


@pytest.mark.parametrize("d", [3, 4])
def test_mec_log_posterior_bruteforce(d, x64):
    rng = np.random.default_rng(d)
    x = rng.normal(size=(15, d))
    x[:, 1] += x[:, 0]
    dags = enumerate_dags(d)
    post = exact_posterior(bge_local_scores(x), dags)
    lp = np.asarray(post.log_prob)
    got = np.asarray(mec_log_posterior(post.log_prob, dags))
    want = np.full(dags.num_mecs, -np.inf)
    for g in range(lp.shape[0]):
        want[dags.mec[g]] = np.logaddexp(want[dags.mec[g]], lp[g])
    np.testing.assert_allclose(got, want, rtol=1e-10)
    np.testing.assert_allclose(np.exp(got), np.asarray(post.mec_prob), rtol=1e-10)
    np.testing.assert_allclose(np.exp(got), np.asarray(mec_posterior(post.log_prob, dags)), rtol=1e-10)


def test_mec_log_posterior_no_underflow_in_float32():
    dags = enumerate_dags(3)
    lp = np.full(25, -1e4, np.float32)
    lp[0] = 0.0
    got = np.asarray(mec_log_posterior(lp, dags))
    assert np.all(np.isfinite(got))  # exp(-1e4) underflows; the log posterior does not
    sizes = np.bincount(dags.mec, minlength=dags.num_mecs)
    others = np.arange(dags.num_mecs) != dags.mec[0]
    np.testing.assert_allclose(got[others], -1e4 + np.log(sizes[others]), rtol=1e-6)
    with pytest.raises(ValueError, match="log_prob"):
        mec_log_posterior(lp[:5], dags)


def test_no_recompile_on_second_call():
    from jaxcore.causal import posterior as P

    dags = enumerate_dags(3)
    rng = np.random.default_rng(0)
    exact_posterior(bge_local_scores(rng.normal(size=(10, 3))), dags)
    n = P._posterior_core._cache_size()
    post = exact_posterior(bge_local_scores(rng.normal(size=(10, 3))), dags)
    assert P._posterior_core._cache_size() == n
    mec_log_posterior(post.log_prob, dags)
    m = P._mec_logsumexp._cache_size()
    mec_log_posterior(post.log_prob + 0.0, dags)
    assert P._mec_logsumexp._cache_size() == m
