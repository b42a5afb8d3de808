import numpy as np
import pytest

from jaxcore.causal import (
    ScoreTable,
    bge_local_scores,
    dag_log_scores,
    enumerate_dags,
    exact_edge_marginals,
    exact_map_dag,
    exact_posterior,
    log_num_orders,
    order_modular_prior_table,
    subset_logsumexp,
    superset_logsumexp,
)


def _data(d, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(25, d))
    x[:, 1] += x[:, 0]
    x[:, d - 1] += 0.7 * x[:, 1]
    return x


def test_zeta_transforms(x64):
    x = np.random.default_rng(0).normal(size=16)
    sub = np.asarray(subset_logsumexp(x))
    sup = np.asarray(superset_logsumexp(x))
    for s in range(16):
        np.testing.assert_allclose(sub[s], np.log(sum(np.exp(x[t]) for t in range(16) if t & ~s == 0)))
        np.testing.assert_allclose(sup[s], np.log(sum(np.exp(x[t]) for t in range(16) if s & ~t == 0)))


@pytest.mark.parametrize("d", [3, 5])
def test_dp_equals_enumeration(d, x64):
    table = bge_local_scores(_data(d, d)) + order_modular_prior_table(d)
    dags = enumerate_dags(d)
    post = exact_posterior(table, dags, log_weights=log_num_orders(dags.parents))
    res = exact_edge_marginals(table)
    np.testing.assert_allclose(np.asarray(res.edge_marginals), np.asarray(post.edge_marginals), atol=1e-10)
    np.testing.assert_allclose(float(res.log_evidence), float(post.log_evidence), rtol=1e-12)
    np.testing.assert_allclose(np.exp(np.asarray(res.parent_set_posterior)).sum(1), 1.0, rtol=1e-10)


def test_dp_in_degree_bound_equals_enumeration(x64):
    d = 4
    table = ScoreTable(np.asarray(bge_local_scores(_data(d, 9), max_parents=1).table), max_parents=1)
    dags = enumerate_dags(d)
    post = exact_posterior(table, dags, log_weights=log_num_orders(dags.parents))
    res = exact_edge_marginals(table)
    np.testing.assert_allclose(np.asarray(res.edge_marginals), np.asarray(post.edge_marginals), atol=1e-10)


def test_map_dag_equals_enumeration_argmax(x64):
    table = bge_local_scores(_data(5, 3))
    dags = enumerate_dags(5)
    scores = np.asarray(dag_log_scores(table, dags.parents))
    parents, best = exact_map_dag(table)
    np.testing.assert_allclose(float(best), scores.max(), rtol=1e-12)
    np.testing.assert_allclose(float(dag_log_scores(table, parents[None])[0]), scores.max(), rtol=1e-12)


def test_errors():
    with pytest.raises(ValueError, match="shape"):
        exact_edge_marginals(ScoreTable(np.zeros((3, 3))))
    t = np.zeros((3, 4))
    t[1, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        exact_edge_marginals(ScoreTable(t))
    with pytest.raises(TypeError, match="ScoreTable"):
        exact_edge_marginals(np.zeros((3, 4)))
