"""jaxcore.tpp: temporal point processes as log-intensity jump-diffusions.

Classical processes (Poisson, exponential Hawkes, self-correcting) with exact
O(L) likelihoods, simulation and optax MLE; a jump-diffusion SDE solver
(scan Euler-Maruyama or diffrax); the Neural Jump-Diffusion TPP (Zhang et al.,
ICML 2024).
"""

from .events import EventBatch, validate_sequence
from .fit import FitResult, fit_mle
from .hawkes import Hawkes, HawkesSDE
from .poisson import Poisson, PoissonSDE
from .self_correcting import SelfCorrecting, SelfCorrectingSDE
from .solver import JumpDiffusion, SolveResult, intensity_path, log_likelihood, solve

__all__ = [
    "EventBatch",
    "FitResult",
    "Hawkes",
    "HawkesSDE",
    "JumpDiffusion",
    "Poisson",
    "PoissonSDE",
    "SelfCorrecting",
    "SelfCorrectingSDE",
    "SolveResult",
    "fit_mle",
    "intensity_path",
    "log_likelihood",
    "solve",
    "validate_sequence",
]
