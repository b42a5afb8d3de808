"""jaxcore.causal: Bayesian causal discovery: DAGs, scores, exact and approximate posteriors, metrics.

Exact posteriors over every DAG for d <= 6 (:func:`enumerate_dags`, :func:`exact_posterior`),
exact edge marginals for d up to ~20 (:func:`dp_edge_marginals`), approximate posteriors in
one weighted-DAG-sample format (:class:`DAGSamples`: :func:`structure_mcmc`, :func:`order_mcmc`,
:func:`bootstrap_map_dags`, :func:`dibs_svi`) and the metrics that compare them
(Karimi Mamaghan et al., ICML 2024).
"""

from .bootstrap import bootstrap_map_dags
from .dp import DPResult, dp_edge_marginals, dp_map_dag, subset_logsumexp, superset_logsumexp
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
from .latent import dibs_model, dibs_svi
from .mcmc import order_mcmc, structure_mcmc
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
    mec_posterior,
    posterior_entropy,
)
from .samples import DAGSamples, dag_distribution, make_samples, mec_distribution
from .scores import (
    bdeu_local_scores,
    bge_local_scores,
    erdos_renyi_prior_table,
    nig_local_scores,
    order_modular_prior_table,
    parent_set_list,
    sparsity_prior_table,
    uniform_prior_table,
)

__all__ = [
    "DAGSamples", "DAGTable", "DPResult", "ExactPosterior", "MAX_ENUMERATE_D",
    "adjacency_to_parents", "bdeu_local_scores", "bge_local_scores", "bootstrap_map_dags", "check_dag",
    "compress_parents", "cpdag", "cpdag_shd", "dag_distribution", "dag_keys", "dag_log_scores", "dibs_model",
    "dibs_svi", "dp_edge_marginals", "dp_map_dag", "edge_auprc", "edge_auroc", "edge_marginals_from_posterior",
    "enumerate_dags", "erdos_renyi_prior_table", "exact_posterior", "expand_parents", "expected_cpdag_shd",
    "expected_edge_f1", "expected_shd", "hellinger", "interventional_nll", "is_dag", "kl_divergence",
    "log_num_orders", "make_samples", "mec_codes", "mec_distribution", "mec_posterior", "mmd_hamming",
    "mmd_hamming_exact", "nig_local_scores", "num_dags", "num_linear_extensions", "order_mcmc",
    "order_modular_prior_table", "parent_set_list", "parents_to_adjacency", "posterior_entropy",
    "predictive_nll", "shd", "sparsity_prior_table", "structure_mcmc", "subset_logsumexp",
    "superset_logsumexp", "topological_order", "total_variation", "uniform_prior_table",
]
