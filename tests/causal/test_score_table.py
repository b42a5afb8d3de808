import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jaxcore.causal import (
    ScoreTable,
    bge_local_scores,
    dag_log_scores,
    enumerate_dags,
    erdos_renyi_prior_table,
    exact_edge_marginals,
    exact_posterior,
    order_modular_prior_table,
    structure_mcmc,
)


def test_score_table_validates_once_at_construction():
    with pytest.raises(ValueError, match=r"table: expected shape \[d, 2\*\*\(d-1\)\]"):
        ScoreTable(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="d <= 24"):
        ScoreTable(jax.ShapeDtypeStruct((25, 1 << 24), jnp.float32))
    bad = np.zeros((3, 4))
    bad[2, 3] = np.inf
    with pytest.raises(ValueError, match=r"\+inf"):
        ScoreTable(bad)
    with pytest.raises(TypeError, match="float"):
        ScoreTable(np.zeros((3, 4), np.int32))
    with pytest.raises(ValueError, match="max_parents"):
        ScoreTable(np.zeros((3, 4)), max_parents=1)  # the 2-parent column is not -inf
    with pytest.raises(ValueError, match="max_parents"):
        ScoreTable(np.zeros((3, 4)), max_parents=-1)
    t = ScoreTable(np.where(np.arange(4) == 3, -np.inf, 0.0)[None].repeat(3, 0), max_parents=1)
    assert (t.d, t.max_parents) == (3, 1)
    assert ScoreTable(np.zeros((3, 4)), max_parents=7).max_parents == 2


def test_score_table_arithmetic_and_pytree():
    x = np.random.default_rng(0).normal(size=(20, 3))
    s = bge_local_scores(x, max_parents=1)
    p = erdos_renyi_prior_table(3, 0.3)
    for total in (s + p, p + s, s + np.asarray(p.table), np.asarray(p.table) + s):
        assert isinstance(total, ScoreTable) and total.max_parents == 1
        np.testing.assert_allclose(np.asarray(total.table), np.asarray(s.table) + np.asarray(p.table))
    with pytest.raises(ValueError, match="d=3"):
        s + erdos_renyi_prior_table(4, 0.3)
    leaves, treedef = jax.tree_util.tree_flatten(s)
    assert len(leaves) == 1  # d and max_parents are static
    back = jax.tree_util.tree_unflatten(treedef, leaves)
    assert back.d == 3 and back.max_parents == 1
    # under jit the table is traced: construction checks shapes only
    doubled = jax.jit(lambda t: t + t)(s)
    np.testing.assert_allclose(np.asarray(doubled.table), 2 * np.asarray(s.table))


@given(st.integers(0, 2**31 - 1), st.sampled_from([3, 4]))
def test_posterior_normalised_and_consistent(seed, d):
    """Property: for any table, the exact posterior sums to one and matches a direct softmax."""
    rng = np.random.default_rng(seed)
    table = ScoreTable(rng.normal(scale=3.0, size=(d, 1 << (d - 1))).astype(np.float32))
    dags = enumerate_dags(d)
    post = exact_posterior(table, dags)
    p = np.exp(np.asarray(post.log_prob, np.float64))
    np.testing.assert_allclose(p.sum(), 1.0, rtol=1e-4)
    s = np.asarray(dag_log_scores(table, dags.parents), np.float64)
    q = np.exp(s - s.max())
    np.testing.assert_allclose(p, q / q.sum(), rtol=2e-3, atol=1e-7)
    np.testing.assert_allclose(np.asarray(post.mec_prob).sum(), 1.0, rtol=1e-4)
    em = np.asarray(post.edge_marginals)
    assert np.all((em >= -1e-6) & (em <= 1 + 1e-6)) and np.all(np.diag(em) == 0)


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=4, max_size=4))
def test_score_table_refuses_nan_and_plus_inf(values):
    a = np.asarray(values, np.float32).reshape(1, 1, 4)[0].repeat(3, 0)
    bad = np.isnan(a).any() or np.isposinf(a).any()
    if bad:
        with pytest.raises(ValueError, match="table: expected finite or -inf entries"):
            ScoreTable(a)
    else:
        assert ScoreTable(a).d == 3


def test_no_recompile_on_second_call(compiles):
    from jaxcore.causal import dynamic_programming as DP
    from jaxcore.causal import mcmc as M
    from jaxcore.causal import scores as S

    rng = np.random.default_rng(0)
    tables = [bge_local_scores(rng.normal(size=(30, 4))) + order_modular_prior_table(4) for _ in range(2)]
    with compiles() as c:
        bge_local_scores(rng.normal(size=(30, 4)))
    assert len(c) == 0
    exact_edge_marginals(tables[0])
    n = DP._dp._cache_size()
    exact_edge_marginals(tables[1])
    assert DP._dp._cache_size() == n
    structure_mcmc(jax.random.key(0), tables[0], num_chains=2, num_samples=5, thin=2, burn_in=0)
    n = M._structure._cache_size()
    structure_mcmc(jax.random.key(1), tables[1], num_chains=2, num_samples=5, thin=2, burn_in=0)
    assert M._structure._cache_size() == n
