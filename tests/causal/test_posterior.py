import math

import numpy as np
import pytest

from jaxcore.causal.enumerate import enumerate_dags
from jaxcore.causal.graphs import parents_to_adjacency
from jaxcore.causal.posterior import (
    dag_log_scores,
    edge_marginals_from_posterior,
    exact_posterior,
    mec_posterior,
    posterior_entropy,
)
from jaxcore.causal.scores import bge_local_scores, uniform_prior_table


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
    mec = np.zeros(dags.n_mecs)
    np.add.at(mec, dags.mec, p)
    np.testing.assert_allclose(np.asarray(post.mec_prob), mec, rtol=1e-10)
    np.testing.assert_allclose(float(post.entropy), -(p * np.log(p)).sum(), rtol=1e-10)
    np.testing.assert_allclose(float(post.mec_entropy), -(mec * np.log(mec)).sum(), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(edge_marginals_from_posterior(post.log_prob, dags.parents)), np.asarray(post.edge_marginals))
    np.testing.assert_allclose(np.asarray(mec_posterior(post.log_prob, dags.mec, dags.n_mecs)), mec, rtol=1e-10)
    np.testing.assert_allclose(float(posterior_entropy(post.log_prob)), float(post.entropy))
    # the v-structure 0 -> 2 <- 1 is the most probable class
    top = dags.parents[np.argmax(p)]
    assert top[2] == 0b011


def test_errors():
    with pytest.raises(ValueError, match="shape"):
        exact_posterior(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="dp_edge_marginals"):
        exact_posterior(np.zeros((7, 64)))
    bad = np.zeros((3, 4))
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        exact_posterior(bad)
