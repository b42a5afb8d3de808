"""jaxcore.ipm: distances between laws of random probability measures (HIPM d_lip, WoW_p).

References:
    M. Catalano, H. Lavenant. "Hierarchical Integral Probability Metrics: A
    distance on random probability measures with low sample complexity."
    ICML 2024.
"""

from .generators import (
    BaseSampler,
    dirichlet_process_finite,
    dirichlet_process_stick_breaking,
    dirichlet_process_urn,
    dp_approximation_bounds,
    hierarchical_gaussian,
    uniform_base,
    uniform_mixture_base,
)
from .hipm import DLipResult, dlip, hipm_features, hipm_objective, lower_bound, w1_empirical
from .samples import HierarchicalSample, from_groups, hierarchical_sample
from .two_sample import TwoSampleResult, permutation_test, pool
from .wow import inner_cost_matrix, outer_ot_cost, wasserstein_1d, wow

__all__ = [
    "BaseSampler",
    "DLipResult",
    "HierarchicalSample",
    "TwoSampleResult",
    "dirichlet_process_finite",
    "dirichlet_process_stick_breaking",
    "dirichlet_process_urn",
    "dlip",
    "dp_approximation_bounds",
    "from_groups",
    "hierarchical_gaussian",
    "hierarchical_sample",
    "hipm_features",
    "hipm_objective",
    "inner_cost_matrix",
    "lower_bound",
    "outer_ot_cost",
    "permutation_test",
    "pool",
    "uniform_base",
    "uniform_mixture_base",
    "w1_empirical",
    "wasserstein_1d",
    "wow",
]
