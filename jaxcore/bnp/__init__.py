"""jaxcore.bnp: beta/Bernoulli-process priors and Bayesian adaptation of network depth and width.

The network (:class:`AdaptiveMLP`, an equinox model holding its variational parameters) has a
beta-process prior on its depth and Bernoulli-process masks on its weights; :func:`fit` maximises
one task's ELBO (one compiled ``lax.scan`` of :func:`make_svi_step`), the posterior becomes the
next task's prior, and :func:`run_continual` runs a whole task sequence against VCL, EWC and
fine-tuning. On Split-Digits (scikit-learn's digits, five two-class tasks):

>>> import jax
>>> from jaxcore.bnp import AdaptiveMLP, fit
>>> from jaxcore.datasets import split_digits
>>> tasks = split_digits()
>>> model = AdaptiveMLP(64, 16, 2, tasks.num_tasks, tasks.num_classes, key=jax.random.key(0))
>>> prior = model.init_prior()
>>> res = fit(jax.random.key(1), model, prior, tasks.x_train[0], tasks.y_train[0], tasks.n_train[0], 0,
...           num_steps=20, batch_size=32, num_samples=1, learning_rate=5e-3)
>>> res.losses.shape                               # -ELBO / N per step
(20,)
>>> next_prior = res.params.posterior_to_prior(prior, 0)
>>> logits = res.params.predict_logits(res.params.hard_masks(), tasks.x_test[0], 0)

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
from .distributions import BernoulliProcessMask, LogitRelaxedBernoulli, RelaxedBernoulli, bernoulli_process_logits
from .inference import FitResult, FitState, SVIStepResult, fit, make_svi_step
from .kl import kl_beta, kl_normal, kl_relaxed_bernoulli_mc
from .model import AbstractAdaptiveNetwork
from .networks import AdaptiveCNN, AdaptiveMLP
from .processes import IndianBuffetProcess, StickBreakingBetaProcess, ibp_sample, stick_breaking_log_weights
from .sampling import gamma_rsample
from .variational import BetaSticks, MeanFieldGaussian

__all__ = [
    "AbstractAdaptiveNetwork",
    "METHODS",
    "AdaptiveCNN",
    "AdaptiveMLP",
    "BernoulliProcessMask",
    "BetaSticks",
    "ContinualConfig",
    "ContinualResult",
    "FitResult",
    "FitState",
    "IndianBuffetProcess",
    "LogitRelaxedBernoulli",
    "MeanFieldGaussian",
    "RelaxedBernoulli",
    "SVIStepResult",
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
