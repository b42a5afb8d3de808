"""jaxcore.bnp: beta/Bernoulli-process priors and Bayesian adaptation of network depth and width.

References:
    Thapa & Li, "Bayesian Adaptation of Network Depth and Width for Continual
    Learning", ICML 2024.
"""

from .continual import (
    METHODS,
    ContinualConfig,
    ContinualResult,
    active_depth,
    active_fraction,
    average_accuracy,
    backward_transfer,
    mask_union,
    run_continual,
)
from .distributions import (
    BernoulliProcessMask,
    IndianBuffetProcess,
    LogitRelaxedBernoulli,
    RelaxedBernoulli,
    StickBreakingBetaProcess,
    bernoulli_process_logits,
    gamma_rsample,
    ibp_sample,
    stick_breaking_log_weights,
)
from .kl import kl_beta, kl_normal, kl_relaxed_bernoulli_mc
from .model import AdaptiveCNN, AdaptiveMLP, FitState, fit, make_svi_step

__all__ = [
    "METHODS",
    "AdaptiveCNN",
    "AdaptiveMLP",
    "BernoulliProcessMask",
    "ContinualConfig",
    "ContinualResult",
    "FitState",
    "IndianBuffetProcess",
    "LogitRelaxedBernoulli",
    "RelaxedBernoulli",
    "StickBreakingBetaProcess",
    "active_depth",
    "active_fraction",
    "average_accuracy",
    "backward_transfer",
    "bernoulli_process_logits",
    "fit",
    "gamma_rsample",
    "ibp_sample",
    "kl_beta",
    "kl_normal",
    "kl_relaxed_bernoulli_mc",
    "make_svi_step",
    "mask_union",
    "run_continual",
    "stick_breaking_log_weights",
]
