"""Regression tests of issue 15 (hardening) for jaxcore.causal: each reproducer refused with a message naming the argument."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import causal

CYCLE = np.array([[0, 1], [1, 0]])
SELF_LOOP = np.array([[1, 0], [0, 0]])


@pytest.fixture(scope="module")
def x():
    return np.random.default_rng(0).normal(size=(30, 3)).astype(np.float32)


# --- probabilities and weights ---------------------------------------------------------------


def test_total_variation_refuses_unnormalised():
    with pytest.raises(ValueError, match="^p: expected probabilities summing to 1"):
        causal.total_variation([2, 2], [0.5, 0.5])


def test_kl_divergence_refuses_nan():
    with pytest.raises(ValueError, match="^p: expected probabilities"):
        causal.kl_divergence([np.nan, 0.5], [0.5, 0.5])
    with pytest.raises(ValueError, match="^q: expected probabilities"):
        causal.kl_divergence([0.5, 0.5], [-0.5, 1.5])
    with pytest.raises(ValueError, match="^log_q: expected"):
        causal.kl_divergence([0.5, 0.5], [0.5, 0.5], log_q=[np.nan, 0.0])


def test_posterior_entropy_refuses_unnormalised():
    with pytest.raises(ValueError, match="^log_prob: expected normalised log probabilities"):
        causal.posterior_entropy(np.zeros(4))
    with pytest.raises(ValueError, match="^log_prob: expected"):
        causal.posterior_entropy(np.array([np.nan, 0.0]))
    assert float(causal.posterior_entropy(np.log(np.full(4, 0.25)))) == pytest.approx(np.log(4), rel=1e-5)


def test_dag_samples_refuses_unnormalised_weights():
    with pytest.raises(ValueError, match="^weights: expected probabilities summing to 1"):
        causal.DAGSamples(np.zeros((2, 2, 2), np.int32), np.array([5.0, 5.0]))
    s = causal.make_samples(np.zeros((2, 2, 2)), np.array([5.0, 5.0]))  # make_samples normalises
    assert s.weights.tolist() == [0.5, 0.5]
    for bad in ([np.inf, 1.0], [-1.0, 2.0], [np.nan, 1.0]):
        with pytest.raises(ValueError, match="^weights: expected"):
            causal.make_samples(np.zeros((2, 2, 2)), np.array(bad))


def test_mec_distribution_refuses_non_probabilities():
    dags = causal.enumerate_dags(2)
    with pytest.raises(ValueError, match="^dag_probs: expected probabilities"):
        causal.mec_distribution(np.ones(3), dags)
    with pytest.raises(TypeError, match="^dags: expected a DAGTable"):
        causal.mec_distribution(np.full(3, 1 / 3), None)


@pytest.mark.parametrize("scale", [1e-30, 1e30])
def test_distances_stable_at_extreme_scales(scale):
    # tiny probabilities (1e-30) and a probability vector built from huge weights (1e30) in float32
    p = np.array([1.0, scale, scale], np.float64)
    p = (p / p.sum()).astype(np.float32)
    q = np.array([scale, 1.0, scale], np.float64)
    q = (q / q.sum()).astype(np.float32)
    for f in (causal.total_variation, causal.hellinger):
        v = float(f(p, q))
        assert np.isfinite(v) and 0.0 <= v <= 1.0
    assert float(causal.hellinger(p, p)) == 0.0
    assert np.isfinite(float(causal.kl_divergence(p, p))) and float(causal.kl_divergence(p, p)) == pytest.approx(0.0, abs=1e-6)
    tiny = np.array([0.5, 0.5 - 1e-30, 1e-30], np.float32)
    np.testing.assert_allclose(float(causal.hellinger(tiny, tiny[[1, 0, 2]])), 0.0, atol=1e-6)
    lq = np.log(np.array([0.5, 0.5, 1e-30]))
    assert np.isfinite(float(causal.kl_divergence(np.array([0.5, 0.5, 0.0]), np.exp(lq), log_q=lq)))


# --- acyclicity ------------------------------------------------------------------------------


@pytest.mark.parametrize("graph", [CYCLE, SELF_LOOP], ids=["cycle", "self_loop"])
def test_cyclic_graphs_refused(graph):
    with pytest.raises(ValueError, match="^adjacency: expected an acyclic graph"):
        causal.cpdag(graph)
    with pytest.raises(ValueError, match="^adjacency_a: expected an acyclic graph"):
        causal.cpdag_shd(graph, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="^adjacency_b: expected an acyclic graph"):
        causal.cpdag_shd(np.zeros((2, 2)), graph)
    s = causal.make_samples(np.zeros((1, 2, 2)))
    with pytest.raises(ValueError, match="^true_adjacency: expected an acyclic graph"):
        causal.expected_shd(s, graph)
    with pytest.raises(ValueError, match="^true_adjacency: expected an acyclic graph"):
        causal.expected_cpdag_shd(s, graph)
    with pytest.raises(ValueError, match=r"^adjacency\[0\]: expected a DAG"):
        causal.DAGSamples(graph[None].astype(np.int32), np.array([1.0]))


def test_num_linear_extensions_refuses_cycles():
    with pytest.raises(ValueError, match="^parents: expected an acyclic graph"):
        causal.num_linear_extensions([2, 1])
    with pytest.raises(ValueError, match="^parents: expected parent bitmasks"):
        causal.num_linear_extensions([1, 0])  # node 0 its own parent
    with pytest.raises(ValueError, match="^parents: expected an acyclic graph"):
        causal.log_num_orders(np.array([[2, 1]]))


# --- index ranges ----------------------------------------------------------------------------


def test_expand_parents_range_checked():
    with pytest.raises(ValueError, match=r"^index: expected compressed parent indices in \[0, 2\*\*\(d-1\)\)"):
        causal.expand_parents([99, 0, 0])
    with pytest.raises(ValueError, match="^index: expected"):
        causal.expand_parents(99)
    with pytest.raises(ValueError, match="^index: expected"):
        causal.expand_parents([-1, 0, 0])
    with pytest.raises(ValueError, match="^parents: expected parent bitmasks"):
        causal.compress_parents([99, 0, 0])
    with pytest.raises(ValueError, match="^parents: expected parent bitmasks"):
        causal.parents_to_adjacency([8, 0, 0])


def test_dag_log_scores_and_mec_posterior_range_checked(x):
    table = causal.bge_local_scores(x)
    with pytest.raises(ValueError, match="^parents: expected parent bitmasks"):
        causal.dag_log_scores(table, np.array([[99, 0, 0]]))
    with pytest.raises(ValueError, match="^parents: expected parent bitmasks"):
        causal.dag_log_scores(table, np.array([[1, 0, 0]]))  # self-loop bit
    dags = causal.enumerate_dags(2)
    bad = dags._replace(mec=np.array([0, 1, 5], np.int32))
    with pytest.raises(ValueError, match=r"^dags.mec: expected class ids in \[0, num_mecs"):
        causal.mec_posterior(np.log(np.full(3, 1 / 3)), bad)
    with pytest.raises(ValueError, match=r"^dags.mec: expected"):
        causal.mec_log_posterior(np.log(np.full(3, 1 / 3)), bad)
    with pytest.raises(ValueError, match="^log_prob: expected normalised"):
        causal.mec_posterior(np.zeros(3), dags)


# --- NaN / inf hyper-parameters --------------------------------------------------------------


def test_nan_inf_hyperparameters_refused(x):
    with pytest.raises(ValueError, match="^alpha_mu: expected"):
        causal.bge_local_scores(x, alpha_mu=np.nan)
    with pytest.raises(ValueError, match="^alpha_w: expected"):
        causal.bge_local_scores(x, alpha_w=np.inf)
    with pytest.raises(ValueError, match="^mean_prior: expected finite"):
        causal.bge_local_scores(x, mean_prior=np.array([np.nan, 0.0, 0.0]))
    with pytest.raises(ValueError, match="^equivalent_sample_size: expected"):
        causal.bdeu_local_scores(np.zeros((5, 2), int), [2, 2], equivalent_sample_size=np.nan)
    with pytest.raises(ValueError, match="^penalty: expected"):
        causal.sparsity_prior_table(3, np.nan)
    with pytest.raises(ValueError, match="^b0: expected"):
        causal.nig_local_scores(x, b0=np.inf)
    with pytest.raises(ValueError, match="^weight_scale: expected"):
        causal.nig_local_scores(x, weight_scale=np.nan)


def test_score_table_inf_refused_before_samplers_and_exact_posterior():
    bad = np.zeros((2, 2))
    bad[0, 1] = np.inf
    with pytest.raises(ValueError, match=r"^table: expected finite or -inf entries"):
        causal.ScoreTable(bad)
    # every consumer takes a ScoreTable only, so raw arrays (with +inf or not) are refused by type
    for f in (causal.exact_posterior, causal.exact_edge_marginals, causal.exact_map_dag):
        with pytest.raises(TypeError, match="^table: expected a ScoreTable"):
            f(bad)
    import jax
    with pytest.raises(TypeError, match="^table: expected a ScoreTable"):
        causal.structure_mcmc(jax.random.key(0), bad)
    with pytest.raises(ValueError, match="^log_weights: expected"):
        causal.exact_posterior(causal.uniform_prior_table(2), log_weights=np.array([0.0, np.inf, 0.0]))
    with pytest.raises(ValueError, match="^log_weights: expected at least one DAG"):
        causal.exact_posterior(causal.uniform_prior_table(2), log_weights=np.full(3, -np.inf))


# --- half precision --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16])
@pytest.mark.parametrize("scorer", ["bge", "nig"])
def test_half_precision_scores_in_float32(x, dtype, scorer):
    f = {"bge": causal.bge_local_scores, "nig": causal.nig_local_scores}[scorer]
    t = f(jnp.asarray(x).astype(dtype))
    ref = f(jnp.asarray(x).astype(dtype).astype(jnp.float32))
    assert t.table.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(t.table), np.asarray(ref.table), rtol=1e-6)


# --- shapes, None, types ---------------------------------------------------------------------


def test_shape_and_none_arguments_named(x):
    with pytest.raises(ValueError, match="^adjacency_b: expected a batch shape broadcastable"):
        causal.shd(np.zeros((2, 3, 3)), np.zeros((4, 3, 3)))
    with pytest.raises(TypeError, match="^adjacency_a: expected"):
        causal.shd(None, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="^adjacency_b: expected d=2"):
        causal.shd(np.zeros((2, 2)), np.zeros((3, 3)))
    truth = np.array([[0, 1], [0, 0]])
    with pytest.raises(TypeError, match="^edge_probs: expected"):
        causal.edge_auroc(None, truth)
    with pytest.raises(ValueError, match="^edge_probs: expected shape"):
        causal.edge_auroc(np.zeros((3, 3)), truth)
    with pytest.raises(ValueError, match="^edge_probs: expected finite"):
        causal.edge_auprc(np.full((2, 2), np.nan), truth)
    with pytest.raises(ValueError, match="^true_adjacency: expected 0/1"):
        causal.edge_auroc(np.zeros((2, 2)), np.array([[0, 2], [0, 0]]))
    table = causal.bge_local_scores(x)
    with pytest.raises(ValueError, match=r"^log_weights: expected shape \[25\]"):
        causal.exact_posterior(table, log_weights=np.zeros(3))
    with pytest.raises(TypeError, match="^log_weights: expected"):
        causal.exact_posterior(table, log_weights="a")
    with pytest.raises(TypeError, match="^dags: expected a DAGTable"):
        causal.exact_posterior(table, dags=np.zeros(3))
    with pytest.raises(TypeError, match="^data: expected"):
        causal.bge_local_scores(None)
    with pytest.raises(TypeError, match="^arities: expected"):
        causal.bdeu_local_scores(np.zeros((4, 2), int), None)
    with pytest.raises(ValueError, match="^other: expected"):
        table + np.zeros(3)
    with pytest.raises(ValueError, match="^edge_marginals: expected"):
        causal.mmd_hamming_exact(causal.make_samples(np.zeros((2, 2, 2))), np.full((2, 2), 2.0))
    with pytest.raises(ValueError, match="^samples_p.weights: expected two or more draws"):
        causal.mmd_hamming(causal.make_samples(np.zeros((1, 2, 2))), causal.make_samples(np.zeros((2, 2, 2))))
    with pytest.raises(ValueError, match="^targets: expected"):
        causal.interventional_nll(causal.make_samples(np.zeros((1, 2, 2))), x[:, :2], x[:5, :2], np.array([2, 0]))


# --- run-time checks under jit ---------------------------------------------------------------


def test_traced_probabilities_and_weights_checked_at_run_time():
    import jax

    tv = jax.jit(causal.total_variation)
    assert float(tv(jnp.array([0.5, 0.5]), jnp.array([1.0, 0.0]))) == pytest.approx(0.5)
    with pytest.raises(Exception, match="p: expected probabilities"):
        tv(jnp.array([2.0, 2.0]), jnp.array([0.5, 0.5]))
    mk = jax.jit(causal.make_samples)
    with pytest.raises(Exception, match="weights: expected"):
        mk(jnp.zeros((2, 2, 2), jnp.int32), jnp.array([-1.0, 2.0]))
