"""Fuzzing of every exported function of jaxcore.causal (issue 15).

Each entry of ``FUZZ`` names a public function, a builder of one valid call (small fixed shapes,
so examples do not recompile) and the arguments fuzzed. Hypothesis picks an entry's argument and a
corruption: a dtype cast (int32, float16, bfloat16, float32, float64), NaN, inf, a negative value,
zero, a mismatched shape, None or a wrong type. The outcome must be a result without NaN or +inf
(finite; -inf only in score tables, where it means "excluded") or a ValueError / TypeError whose
message names the argument; never an exception from inside JAX, LAPACK or NumPy.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxcore import causal

CORRUPTIONS = ("int32", "float16", "bfloat16", "float32", "float64", "nan", "inf", "negative", "zero",
               "shape", "none", "type")


@functools.lru_cache(maxsize=None)
def _fixtures():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 3)).astype(np.float32)
    chain = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]], np.int32)
    table = causal.bge_local_scores(x) + causal.uniform_prior_table(3)
    dags = causal.enumerate_dags(3)
    post = causal.exact_posterior(table, dags)
    samples = causal.make_samples(np.stack([chain, chain.T, 0 * chain]))
    probs = np.full(3, 1 / 3)
    return dict(x=x, chain=chain, table=table, dags=dags, post=post, samples=samples, probs=probs,
                lp=np.asarray(post.log_prob), dags2=causal.enumerate_dags(2),
                disc=rng.integers(0, 2, size=(16, 3)), edge=np.asarray(post.edge_marginals))


def _f():
    return _fixtures()


K = jax.random.key(0)


def _seeded_dibs_model(**kwargs):
    """dibs_model is a numpyro model: run it under a seed handler, as inference does."""
    import numpyro

    with numpyro.handlers.seed(rng_seed=0):
        return causal.dibs_model(**kwargs)

# name: (function, builder of the valid call's kwargs, fuzzed arguments)
FUZZ = {
    "DAGSamples": (causal.DAGSamples, lambda: dict(adjacency=np.stack([_f()["chain"]] * 2), weights=np.full(2, .5)),
                   ["adjacency", "weights"]),
    "ScoreTable": (causal.ScoreTable, lambda: dict(table=np.zeros((3, 4))), ["table", "max_parents"]),
    "adjacency_to_parents": (causal.adjacency_to_parents, lambda: dict(adjacency=_f()["chain"]), ["adjacency"]),
    "bdeu_local_scores": (causal.bdeu_local_scores, lambda: dict(data=_f()["disc"], arities=[2, 2, 2],
                                                                equivalent_sample_size=1.0),
                          ["data", "arities", "equivalent_sample_size"]),
    "bge_local_scores": (causal.bge_local_scores, lambda: dict(data=_f()["x"], alpha_mu=1.0, mean_prior=np.zeros(3)),
                         ["data", "alpha_mu", "mean_prior"]),
    "bootstrap_map_dags": (causal.bootstrap_map_dags, lambda: dict(key=K, data=_f()["x"], num_bootstrap=2),
                           ["data", "num_bootstrap"]),
    "check_dag": (causal.check_dag, lambda: dict(adjacency=_f()["chain"]), ["adjacency"]),
    "compress_parents": (causal.compress_parents, lambda: dict(parents=np.array([0, 1, 3])), ["parents"]),
    "cpdag": (causal.cpdag, lambda: dict(adjacency=_f()["chain"]), ["adjacency"]),
    "cpdag_shd": (causal.cpdag_shd, lambda: dict(adjacency_a=_f()["chain"], adjacency_b=_f()["chain"].T),
                  ["adjacency_a", "adjacency_b"]),
    "dag_distribution": (causal.dag_distribution, lambda: dict(samples=_f()["samples"], dags=_f()["dags"]),
                         ["samples", "dags"]),
    "dag_keys": (causal.dag_keys, lambda: dict(parents=np.array([0, 1, 3])), ["parents"]),
    "dag_log_scores": (causal.dag_log_scores, lambda: dict(table=_f()["table"], parents=np.array([[0, 1, 3]])),
                       ["table", "parents"]),
    "dibs_model": (_seeded_dibs_model, lambda: dict(x=_f()["x"], alpha=2.0, beta=5.0), ["x", "alpha", "beta"]),
    "dibs_svi": (causal.dibs_svi, lambda: dict(key=K, data=_f()["x"], num_steps=2, num_particles=4, alpha=2.0,
                                               learning_rate=0.02, weighting="uniform"),
                 ["data", "num_steps", "alpha", "learning_rate"]),
    "edge_auprc": (causal.edge_auprc, lambda: dict(edge_probs=_f()["edge"], true_adjacency=_f()["chain"]),
                   ["edge_probs", "true_adjacency"]),
    "edge_auroc": (causal.edge_auroc, lambda: dict(edge_probs=_f()["edge"], true_adjacency=_f()["chain"]),
                   ["edge_probs", "true_adjacency"]),
    "edge_marginals_from_posterior": (causal.edge_marginals_from_posterior,
                                      lambda: dict(log_prob=_f()["lp"], parents=_f()["dags"].parents),
                                      ["log_prob", "parents"]),
    "edge_marginals_from_samples": (causal.edge_marginals_from_samples, lambda: dict(samples=_f()["samples"]),
                                    ["samples"]),
    "enumerate_dags": (causal.enumerate_dags, lambda: dict(d=3), ["d"]),
    "erdos_renyi_prior_table": (causal.erdos_renyi_prior_table, lambda: dict(d=3, edge_probability=0.5),
                                ["d", "edge_probability"]),
    "exact_edge_marginals": (causal.exact_edge_marginals, lambda: dict(table=_f()["table"]), ["table"]),
    "exact_map_dag": (causal.exact_map_dag, lambda: dict(table=_f()["table"]), ["table"]),
    "exact_posterior": (causal.exact_posterior, lambda: dict(table=_f()["table"], log_weights=np.zeros(25)),
                        ["table", "log_weights"]),
    "expand_parents": (causal.expand_parents, lambda: dict(index=np.array([0, 1, 3])), ["index"]),
    "expected_cpdag_shd": (causal.expected_cpdag_shd, lambda: dict(samples=_f()["samples"],
                                                                   true_adjacency=_f()["chain"]),
                           ["samples", "true_adjacency"]),
    "expected_edge_f1": (causal.expected_edge_f1, lambda: dict(samples=_f()["samples"], true_adjacency=_f()["chain"]),
                         ["samples", "true_adjacency"]),
    "expected_shd": (causal.expected_shd, lambda: dict(samples=_f()["samples"], true_adjacency=_f()["chain"]),
                     ["samples", "true_adjacency"]),
    "hellinger": (causal.hellinger, lambda: dict(p=_f()["probs"], q=_f()["probs"][::-1]), ["p", "q"]),
    "interventional_nll": (causal.interventional_nll,
                           lambda: dict(samples=_f()["samples"], train=_f()["x"], interventional=_f()["x"][:4],
                                        targets=np.array([1, 0, 0])),
                           ["samples", "train", "interventional", "targets"]),
    "is_dag": (causal.is_dag, lambda: dict(adjacency=_f()["chain"]), ["adjacency"]),
    "kl_divergence": (causal.kl_divergence, lambda: dict(p=_f()["probs"], q=_f()["probs"]), ["p", "q"]),
    "log_num_orders": (causal.log_num_orders, lambda: dict(parents=np.array([[0, 1, 3]]), chunk_size=4),
                       ["parents", "chunk_size"]),
    "make_samples": (causal.make_samples, lambda: dict(adjacency=np.stack([_f()["chain"]] * 2),
                                                       weights=np.array([1.0, 3.0])),
                     ["adjacency", "weights"]),
    "mec_codes": (causal.mec_codes, lambda: dict(parents=np.array([[0, 1, 3]])), ["parents"]),
    "mec_distribution": (causal.mec_distribution, lambda: dict(dag_probs=np.full(3, 1 / 3), dags=_f()["dags2"]),
                         ["dag_probs", "dags"]),
    "mec_log_posterior": (causal.mec_log_posterior, lambda: dict(log_prob=_f()["lp"], dags=_f()["dags"]),
                          ["log_prob", "dags"]),
    "mec_posterior": (causal.mec_posterior, lambda: dict(log_prob=_f()["lp"], dags=_f()["dags"]),
                      ["log_prob", "dags"]),
    "mmd_hamming": (causal.mmd_hamming, lambda: dict(samples_p=_f()["samples"], samples_q=_f()["samples"]),
                    ["samples_p", "samples_q", "exact_p"]),
    "mmd_hamming_exact": (causal.mmd_hamming_exact, lambda: dict(samples=_f()["samples"],
                                                                 edge_marginals=_f()["edge"]),
                          ["samples", "edge_marginals"]),
    "nig_local_scores": (causal.nig_local_scores, lambda: dict(data=_f()["x"], weight_scale=1.0, a0=1.0, b0=1.0),
                         ["data", "weight_scale", "a0", "b0"]),
    "num_dags": (causal.num_dags, lambda: dict(d=3), ["d"]),
    "num_linear_extensions": (causal.num_linear_extensions, lambda: dict(parents=np.array([0, 1, 3])), ["parents"]),
    "order_mcmc": (causal.order_mcmc, lambda: dict(key=K, table=_f()["table"], num_chains=1, num_samples=2, thin=1,
                                                   burn_in=0),
                   ["table", "num_samples", "burn_in"]),
    "order_modular_prior_table": (causal.order_modular_prior_table, lambda: dict(d=3), ["d"]),
    "pad_samples": (causal.pad_samples, lambda: dict(samples=_f()["samples"], num_samples=4),
                    ["samples", "num_samples"]),
    "parent_set_list": (causal.parent_set_list, lambda: dict(d=3, max_parents=1), ["d", "max_parents"]),
    "parents_to_adjacency": (causal.parents_to_adjacency, lambda: dict(parents=np.array([0, 1, 3])), ["parents"]),
    "posterior_entropy": (causal.posterior_entropy, lambda: dict(log_prob=_f()["lp"]), ["log_prob"]),
    "predictive_nll": (causal.predictive_nll, lambda: dict(samples=_f()["samples"], train=_f()["x"],
                                                           test=_f()["x"][:4]),
                       ["samples", "train", "test"]),
    "random_linear_gaussian_network": (causal.random_linear_gaussian_network,
                                       lambda: dict(seed=0, d=3, edge_probability=0.5),
                                       ["seed", "d", "edge_probability"]),
    "shd": (causal.shd, lambda: dict(adjacency_a=_f()["chain"], adjacency_b=_f()["chain"].T),
            ["adjacency_a", "adjacency_b"]),
    "sparsity_prior_table": (causal.sparsity_prior_table, lambda: dict(d=3, penalty=1.0), ["d", "penalty"]),
    "structure_mcmc": (causal.structure_mcmc, lambda: dict(key=K, table=_f()["table"], num_chains=1, num_samples=2,
                                                           thin=1, burn_in=0, init=_f()["chain"]),
                       ["table", "num_chains", "init"]),
    "subset_logsumexp": (causal.subset_logsumexp, lambda: dict(x=np.zeros(4)), ["x"]),
    "superset_logsumexp": (causal.superset_logsumexp, lambda: dict(x=np.zeros(4)), ["x"]),
    "topological_order": (causal.topological_order, lambda: dict(adjacency=_f()["chain"]), ["adjacency"]),
    "total_variation": (causal.total_variation, lambda: dict(p=_f()["probs"], q=_f()["probs"]), ["p", "q"]),
    "uniform_prior_table": (causal.uniform_prior_table, lambda: dict(d=3), ["d"]),
}

# exported names that are not functions (types, constants, result containers): nothing to fuzz
NOT_FUZZED = {"BootstrapResult", "DAGTable", "DiBSResult", "EdgeMarginalsResult", "ExactPosterior",
              "MAPDAGResult", "MAX_ENUMERATE_D", "MAX_TABLE_D", "MCMCResult"}
# the two functions are allowed a NaN-free -inf (log of 0, an excluded parent set)
NEG_INF_OK = {"ScoreTable", "bge_local_scores", "nig_local_scores", "bdeu_local_scores", "dag_log_scores",
              "exact_posterior", "subset_logsumexp", "superset_logsumexp", "parent_set_list", "mec_log_posterior",
              "log_num_orders", "erdos_renyi_prior_table", "sparsity_prior_table", "order_modular_prior_table",
              "uniform_prior_table", "bootstrap_map_dags", "structure_mcmc", "order_mcmc", "exact_edge_marginals",
              "exact_map_dag", "kl_divergence"}


def test_table_covers_all_exports():
    assert set(FUZZ) | NOT_FUZZED == set(causal.__all__)


def _corrupt(value, how):
    """Apply one corruption to a valid argument value."""
    if how == "none":
        return None
    if how == "type":
        return "a string"
    if isinstance(value, (causal.DAGSamples, causal.ScoreTable, causal.DAGTable, jax.Array)) and \
            not isinstance(value, jax.Array):
        return {"shape": np.zeros((2, 2))}.get(how, object())
    if isinstance(value, str):
        return value.upper()
    a = np.asarray(value) if not isinstance(value, jax.Array) else value
    if isinstance(value, (bool, np.bool_)):
        return {"int32": np.int32(1), "zero": 0}.get(how, 1.5)
    if how in ("int32", "float32", "float64", "float16"):
        return np.asarray(a).astype(how) if np.ndim(a) else getattr(np, how)(np.asarray(a).item())
    if how == "bfloat16":
        return jnp.asarray(a, jnp.bfloat16)
    if how == "shape":
        return np.zeros((2,) + np.shape(a)) if np.ndim(a) == 0 else np.asarray(a)[..., :-1]
    b = np.array(a, np.float64)
    if how == "zero":
        return np.zeros_like(b) if b.ndim else 0.0
    fill = {"nan": np.nan, "inf": np.inf, "negative": -1.0}[how]
    if b.ndim == 0:
        return fill if how != "negative" else -abs(float(b)) - 1.0
    b.reshape(-1)[0] = fill
    return b


def _leaves_ok(out, neg_inf_ok):
    for leaf in jax.tree_util.tree_leaves(out, is_leaf=lambda v: isinstance(v, (np.ndarray, jax.Array))):
        if isinstance(leaf, (np.ndarray, jax.Array, float, np.floating)):
            a = np.asarray(leaf)
            if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
                a = a.astype(np.float64)
                assert not np.isnan(a).any(), "NaN output"
                assert not np.isposinf(a).any(), "+inf output"
                if not neg_inf_ok:
                    assert np.isfinite(a).all(), "-inf output"


def _check_call(name, arg, how):
    fn, build, _ = FUZZ[name]
    kwargs = build()
    kwargs[arg] = _corrupt(kwargs.get(arg, True), how)
    try:
        out = fn(**kwargs)
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        assert arg in msg.split(":")[0] or msg.startswith(arg) or f"{arg}" in msg, (name, arg, how, msg)
        assert ": expected " in msg, (name, arg, how, msg)
        return
    _leaves_ok(out, name in NEG_INF_OK)


_CASES = [(n, a) for n, (_, _, args) in FUZZ.items() for a in args]
_GROUPS = {
    "graphs": [c for c in _CASES if c[0] in {"adjacency_to_parents", "check_dag", "compress_parents", "cpdag",
                                              "cpdag_shd", "dag_keys", "expand_parents", "is_dag", "num_dags",
                                              "num_linear_extensions", "parents_to_adjacency", "shd",
                                              "topological_order", "mec_codes", "enumerate_dags"}],
    "samples_metrics": [c for c in _CASES if c[0] in {"DAGSamples", "make_samples", "pad_samples", "dag_distribution",
                                                      "mec_distribution", "edge_marginals_from_samples",
                                                      "expected_shd", "expected_cpdag_shd", "expected_edge_f1",
                                                      "edge_auroc", "edge_auprc", "mmd_hamming", "mmd_hamming_exact",
                                                      "kl_divergence", "total_variation", "hellinger"}],
    "posterior": [c for c in _CASES if c[0] in {"dag_log_scores", "edge_marginals_from_posterior", "exact_posterior",
                                                "mec_posterior", "mec_log_posterior", "posterior_entropy",
                                                "log_num_orders", "subset_logsumexp", "superset_logsumexp",
                                                "exact_edge_marginals", "exact_map_dag"}],
    "scores": [c for c in _CASES if c[0] in {"ScoreTable", "bge_local_scores", "nig_local_scores",
                                             "bdeu_local_scores", "uniform_prior_table", "erdos_renyi_prior_table",
                                             "sparsity_prior_table", "order_modular_prior_table", "parent_set_list",
                                             "random_linear_gaussian_network"}],
    "samplers": [c for c in _CASES if c[0] in {"structure_mcmc", "order_mcmc", "bootstrap_map_dags", "dibs_svi",
                                               "dibs_model", "predictive_nll", "interventional_nll"}],
}


def test_groups_cover_table():
    assert sorted(c for g in _GROUPS.values() for c in g) == sorted(_CASES)


@pytest.mark.parametrize("group", sorted(_GROUPS))
def test_fuzz(group):
    @given(case=st.sampled_from(_GROUPS[group]), how=st.sampled_from(CORRUPTIONS))
    def run(case, how):
        _check_call(*case, how)

    run()


@pytest.mark.slow
@pytest.mark.parametrize("group", sorted(_GROUPS))
def test_fuzz_deep(group):
    @settings(max_examples=40)
    @given(case=st.sampled_from(_GROUPS[group]), how=st.sampled_from(CORRUPTIONS))
    def run(case, how):
        _check_call(*case, how)

    run()


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_fuzz_metrics_sweep(how):
    """Deterministic sweep of every corruption over the probability metrics (cheap: no recompiles beyond dtypes)."""
    for name in ("kl_divergence", "total_variation", "hellinger"):
        for arg in FUZZ[name][2]:
            _check_call(name, arg, how)
