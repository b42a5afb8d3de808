"""jaxcore.tpp: temporal point processes as log-intensity jump-diffusions.

Classical processes (Poisson, exponential Hawkes, self-correcting) with exact
O(L) likelihoods, simulation and optax MLE; a jump-diffusion SDE solver
(scan Euler-Maruyama or diffrax); the Neural Jump-Diffusion TPP (Zhang et al.,
ICML 2024).
"""

from .events import EventBatch, validate_sequence
from .fit import FitResult, fit_mle
from .hawkes import Hawkes, HawkesSDE
from .metrics import (
    NextEventPrediction,
    ks_statistic,
    nll_per_event,
    predict_next,
    prediction_scores,
    time_rescaling_ks,
)
from .njdtpp import NJDTPP, TrainResult, load_checkpoint, save_checkpoint, train
from .poisson import Poisson, PoissonSDE
from .self_correcting import SelfCorrecting, SelfCorrectingSDE
from .solver import JumpDiffusion, SolveResult, intensity_path, log_likelihood, solve

__all__ = [
    "EventBatch",
    "FitResult",
    "Hawkes",
    "HawkesSDE",
    "JumpDiffusion",
    "NJDTPP",
    "NextEventPrediction",
    "Poisson",
    "PoissonSDE",
    "SelfCorrecting",
    "SelfCorrectingSDE",
    "SolveResult",
    "TrainResult",
    "fit_mle",
    "intensity_path",
    "ks_statistic",
    "load_checkpoint",
    "nll_per_event",
    "predict_next",
    "prediction_scores",
    "save_checkpoint",
    "time_rescaling_ks",
    "train",
    "log_likelihood",
    "solve",
    "validate_sequence",
]
