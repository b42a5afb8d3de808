"""jaxcore.causal: Bayesian causal discovery: DAGs, scores, exact and approximate posteriors, metrics.

A decomposable score is a :class:`ScoreTable` (``[d, 2**(d-1)]`` local log scores, validated
once) from :func:`bge_local_scores` / :func:`nig_local_scores` / :func:`bdeu_local_scores`, plus a
prior table. From it: the exact posterior over every DAG for d <= 6 (:func:`exact_posterior`),
exact edge marginals and the MAP DAG by dynamic programming for d up to ~20
(:func:`exact_edge_marginals`, :func:`exact_map_dag`), approximate posteriors in one
weighted-DAG-sample format (:class:`DAGSamples` inside :class:`MCMCResult` /
:class:`BootstrapResult` / :class:`DiBSResult`: :func:`structure_mcmc`, :func:`order_mcmc`,
:func:`bootstrap_map_dags`, :func:`dibs_svi`) and the metrics that compare them
(Karimi Mamaghan et al., ICML 2024). The main workflow, on the Sachs protein data
(``load_sachs``) or, as here, on a random linear-Gaussian network:

>>> import jax, numpy as np
>>> from jaxcore import causal
>>> from jaxcore.datasets.causal_data import sample_linear_gaussian_network
>>> net = causal.random_linear_gaussian_network(0, 3, 0.5)
>>> x = sample_linear_gaussian_network(net, 50, seed=0)
>>> x = ((x - x.mean(0)) / x.std(0)).astype(np.float32)
>>> table = causal.bge_local_scores(x) + causal.erdos_renyi_prior_table(3, 0.5)
>>> post = causal.exact_posterior(table)                       # all 25 DAGs
>>> mcmc = causal.structure_mcmc(jax.random.key(0), table, num_chains=2, num_samples=20, thin=2, burn_in=10)
>>> q = causal.dag_distribution(mcmc.samples, causal.enumerate_dags(3))
>>> tv = float(causal.total_variation(q, np.exp(post.log_prob)))
>>> e_shd = float(causal.expected_shd(mcmc.samples, net["adjacency"]))
>>> 0.0 <= tv <= 1.0 and e_shd >= 0.0
True
"""

from .bootstrap import BootstrapResult, bootstrap_map_dags
from .dynamic_programming import (
    EdgeMarginalsResult,
    MAPDAGResult,
    exact_edge_marginals,
    exact_map_dag,
    subset_logsumexp,
    superset_logsumexp,
)
from .enumerate import MAX_ENUMERATE_D, DAGTable, dag_keys, enumerate_dags, mec_codes
from .graphs import (
    adjacency_to_parents,
    check_dag,
    compress_parents,
    cpdag,
    cpdag_shd,
    expand_parents,
    is_dag,
    num_dags,
    num_linear_extensions,
    parents_to_adjacency,
    shd,
    topological_order,
)
from .latent import DiBSResult, dibs_model, dibs_svi
from .mcmc import MCMCResult, order_mcmc, structure_mcmc
from .metrics import (
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
from .posterior import (
    ExactPosterior,
    dag_log_scores,
    edge_marginals_from_posterior,
    exact_posterior,
    log_num_orders,
    mec_log_posterior,
    mec_posterior,
    posterior_entropy,
)
from .samples import (
    DAGSamples,
    dag_distribution,
    edge_marginals_from_samples,
    make_samples,
    mec_distribution,
    pad_samples,
)
from .scores import (
    MAX_TABLE_D,
    ScoreTable,
    bdeu_local_scores,
    bge_local_scores,
    erdos_renyi_prior_table,
    nig_local_scores,
    order_modular_prior_table,
    parent_set_list,
    sparsity_prior_table,
    uniform_prior_table,
)
from .synthetic import random_linear_gaussian_network

__all__ = [
    "BootstrapResult", "DAGSamples", "DAGTable", "DiBSResult", "EdgeMarginalsResult", "ExactPosterior",
    "MAPDAGResult", "MAX_ENUMERATE_D", "MAX_TABLE_D", "MCMCResult", "ScoreTable",
    "adjacency_to_parents", "bdeu_local_scores", "bge_local_scores", "bootstrap_map_dags", "check_dag",
    "compress_parents", "cpdag", "cpdag_shd", "dag_distribution", "dag_keys", "dag_log_scores", "dibs_model",
    "dibs_svi", "edge_auprc", "edge_auroc", "edge_marginals_from_posterior", "edge_marginals_from_samples",
    "enumerate_dags", "erdos_renyi_prior_table", "exact_edge_marginals", "exact_map_dag", "exact_posterior",
    "expand_parents", "expected_cpdag_shd", "expected_edge_f1", "expected_shd", "hellinger", "interventional_nll",
    "is_dag", "kl_divergence", "log_num_orders", "make_samples", "mec_codes", "mec_distribution",
    "mec_log_posterior", "mec_posterior", "mmd_hamming", "mmd_hamming_exact", "nig_local_scores", "num_dags",
    "num_linear_extensions", "order_mcmc", "order_modular_prior_table", "pad_samples", "parent_set_list",
    "parents_to_adjacency", "posterior_entropy", "predictive_nll", "random_linear_gaussian_network", "shd",
    "sparsity_prior_table", "structure_mcmc", "subset_logsumexp", "superset_logsumexp", "topological_order",
    "total_variation", "uniform_prior_table",
]
