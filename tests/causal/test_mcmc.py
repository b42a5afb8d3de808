import jax
import numpy as np
import pytest

from jaxcore.causal import (
    ScoreTable,
    bge_local_scores,
    dag_distribution,
    enumerate_dags,
    exact_posterior,
    is_dag,
    log_num_orders,
    order_mcmc,
    order_modular_prior_table,
    structure_mcmc,
)


def _table(d=4):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, d))
    x[:, 1] += x[:, 0]
    x[:, 2] += 0.8 * x[:, 1]
    x[:, 3] += 0.5 * x[:, 0]
    return bge_local_scores(x)


def test_structure_mcmc_reaches_exact_posterior():
    table = _table()
    dags = enumerate_dags(4)
    exact = np.exp(np.asarray(exact_posterior(table, dags).log_prob))
    res = structure_mcmc(jax.random.key(0), table, num_chains=8, num_samples=1500, thin=4, burn_in=200)
    s, acc = res.samples, res.acceptance_rate
    assert s.adjacency.shape == (12000, 4, 4)
    assert bool(np.all(np.asarray(is_dag(s.adjacency))))
    np.testing.assert_allclose(float(s.weights.sum()), 1.0, rtol=1e-5)
    q = np.asarray(dag_distribution(s, dags))
    tv = 0.5 * np.abs(q - exact).sum()
    assert tv < 0.05, tv
    assert np.all((np.asarray(acc) > 0) & (np.asarray(acc) < 1))


def test_order_mcmc_reaches_order_modular_posterior():
    table = _table() + order_modular_prior_table(4)
    dags = enumerate_dags(4)
    exact = np.exp(np.asarray(exact_posterior(table, dags, log_weights=log_num_orders(dags.parents)).log_prob))
    s = order_mcmc(jax.random.key(1), table, num_chains=8, num_samples=1500, thin=2, burn_in=50).samples
    q = np.asarray(dag_distribution(s, dags))
    tv = 0.5 * np.abs(q - exact).sum()
    assert tv < 0.05, tv


def test_errors():
    with pytest.raises(ValueError, match="num_chains"):
        structure_mcmc(jax.random.key(0), ScoreTable(np.zeros((3, 4))), num_chains=0)
    cyc = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]])
    with pytest.raises(ValueError, match="acyclic"):
        structure_mcmc(jax.random.key(0), ScoreTable(np.zeros((3, 4))), init=cyc)
    with pytest.raises(ValueError, match="shape"):
        order_mcmc(jax.random.key(0), ScoreTable(np.zeros((3, 3))))
    with pytest.raises(TypeError, match="ScoreTable"):
        order_mcmc(jax.random.key(0), np.zeros((3, 4)))
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        structure_mcmc(0, ScoreTable(np.zeros((3, 4))))


@pytest.mark.parametrize("sampler", ["structure", "order"])
def test_progress_reports_draws_and_leaves_the_chain_unchanged(sampler):
    import numpy as np

    from jaxcore.causal import bge_local_scores, order_mcmc, structure_mcmc

    fn = structure_mcmc if sampler == "structure" else order_mcmc
    table = bge_local_scores(np.random.default_rng(0).normal(size=(40, 3)))
    kw = dict(num_chains=2, num_samples=20, thin=1, burn_in=0)
    seen = []
    with_bar = fn(jax.random.key(3), table, progress=lambda step, metrics: seen.append(step), **kw)
    plain = fn(jax.random.key(3), table, **kw)
    np.testing.assert_array_equal(with_bar.samples.adjacency, plain.samples.adjacency)
    assert seen == list(range(1, 21))  # one report per draw for all chains together (20 draws: every 1)
    with pytest.raises(TypeError, match="progress: expected a bool or a callable"):
        fn(jax.random.key(3), table, progress="yes", **kw)
