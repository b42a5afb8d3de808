"""The paper's comparison as one function: fit the classical processes, train the NJDTPP and the neural
baselines on the same training sequences, and score every model on the same test sequences.

References:
    Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024, Sec. 5 (Tables 1-3: the
    classical processes, NJDTPP and the neural baselines by test NLL per event, RMSE and accuracy).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import PRNGKeyArray

from jaxcore._util import check_bool, check_int, check_key, check_scalar, expected

from .attnhp import AttNHP
from .base import AbstractTPP
from .evaluation import EvaluationResult, evaluate
from .events import EventBatch, check_batch, check_marks
from .fit import fit_mle
from .hawkes import SharedDecayHawkes
from .iftpp import IFTPP
from .nhp import NHP
from .njdtpp import NJDTPP
from .poisson import Poisson
from .rmtpp import RMTPP
from .sahp import SAHP
from .self_correcting import SelfCorrecting
from .solver import ClassicalTPP
from .thp import THP
from .training import train

NEURAL_BASELINES = ("RMTPP", "NHP", "THP", "SAHP", "IFTPP", "AttNHP")


class ComparisonResult(NamedTuple):
    """Output of :func:`compare_models`.

    Attributes:
        scores: model name -> its :class:`EvaluationResult` on the test sequences (``"Poisson"``, ``"Hawkes"``,
            ``"Self-correcting"``, ``"NJDTPP"``, each neural baseline's name, ``"true model"``), in that order.
        models: model name -> the fitted model (an :class:`AbstractTPP`; the true model as given).
        horizon: the prediction horizon used (time unit): ``horizon_gaps`` mean gaps of the training set.

    Examples:
        >>> from jaxcore.tpp import ComparisonResult
        >>> ComparisonResult._fields
        ('scores', 'models', 'horizon')
    """

    scores: dict[str, EvaluationResult]
    models: dict[str, AbstractTPP]
    horizon: float


def compare_models(
    key: PRNGKeyArray,
    train_batch: EventBatch,
    valid_batch: EventBatch,
    test_batch: EventBatch,
    *,
    neural: Sequence[str] = (),
    self_correcting: bool = True,
    truth: ClassicalTPP | None = None,
    horizon_gaps: float = 8.0,
    num_substeps: int = 10,
    eval_substeps: int = 20,
    eval_samples: int = 1,
    mle_steps: int = 40,
    njdtpp_steps: int = 200,
    neural_steps: int = 100,
    batch_size: int = 16,
    width: int = 32,
    progress: Callable[[str], None] | None = None,
) -> ComparisonResult:
    """Fit the classical processes, train NJDTPP and the neural baselines, and :func:`evaluate` each on the test set.

    With ``r = N_train / sum T_train`` the training set's event rate and ``K`` its number of types: a
    Poisson process by its closed-form MLE; a shared-decay Hawkes process from
    ``mu = alpha = r / (2K)``, ``beta = r`` by :func:`fit_mle` (``mle_steps`` L-BFGS steps); with
    ``self_correcting`` a self-correcting process from ``mu = log(1 + r T) / T``, ``alpha = 0.1``
    (``T`` the mean window); an :class:`NJDTPP` of width ``width`` (initial log-rate ``log(r / K)``)
    by :func:`train` (``njdtpp_steps`` steps of ``batch_size`` sequences, ``num_substeps`` per gap,
    model selection on ``valid_batch`` every tenth of the run); each neural baseline in ``neural``
    alike for ``neural_steps`` steps, initialised at the rate ``r / K`` (AttNHP attending to its last
    32 events). Every model is scored by :func:`evaluate` with the horizon ``horizon_gaps / r``: the
    classical ones by their exact flow, NJDTPP by ``eval_substeps`` Euler steps per gap (finer than in
    training: a coarse left-point compensator can be gamed by an intensity rising within a gap) with
    its NLL averaged over ``eval_samples`` Brownian paths, the neural ones with 16 thinning draws (AttNHP's
    1,024 (sequence, position) pairs at a time). With ``truth`` the true model is scored alike.

    The keys: ``key`` split in three (NJDTPP's initialisation, training, evaluation); neural baseline ``j``
    (in the order given) from ``fold_in(key, 100 + j)`` split in three likewise.

    Args:
        key: PRNG key.
        train_batch, valid_batch, test_batch: the splits, with the same number of types ``K``.
        neural: names of the neural baselines to train, from ``RMTPP``, ``NHP``, ``THP``, ``SAHP``,
            ``IFTPP``, ``AttNHP``.
        self_correcting: also fit a self-correcting process (one type only).
        truth: the process that generated the data (synthetic sets), scored beside the fitted ones.
        horizon_gaps: the prediction horizon in mean gaps of the training set (> 0).
        num_substeps, eval_substeps: Euler steps per gap in NJDTPP's training and evaluation.
        eval_samples: Brownian paths averaged for NJDTPP's test NLL.
        mle_steps, njdtpp_steps, neural_steps: optimisation steps of each kind.
        batch_size: sequences per minibatch (NJDTPP and the neural baselines).
        width: hidden width of NJDTPP's MLPs and of the neural baselines.
        progress: ``fn(message)`` called before each fit (``None``: silent).

    Returns:
        A :class:`ComparisonResult` ``(scores, models, horizon)``.

    Raises:
        TypeError: ``key`` is not a PRNG key; a split is not an EventBatch; ``self_correcting`` not a bool;
            ``truth`` not a classical model.
        ValueError: an unknown neural baseline; the splits' numbers of types differ (or ``self_correcting``
            with more than one type); non-positive sizes or ``horizon_gaps``.

    References:
        Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024, Sec. 5.

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import compare_models, event_batches
        >>> coal = event_batches("coal")
        >>> res = compare_models(jax.random.key(0), coal.train, coal.valid, coal.test, self_correcting=False,
        ...                      neural=["IFTPP"], njdtpp_steps=200, neural_steps=100)  # doctest: +SKIP
        >>> list(res.scores)  # doctest: +SKIP
        ['Poisson', 'Hawkes', 'NJDTPP', 'IFTPP']
        >>> {name: round(float(r.nll), 3) for name, r in res.scores.items()}  # doctest: +SKIP
    """
    check_key(key)
    for name, b in (("train_batch", train_batch), ("valid_batch", valid_batch), ("test_batch", test_batch)):
        check_batch(b, name)
    K = train_batch.num_marks
    check_marks(valid_batch, K, "valid_batch")
    check_marks(test_batch, K, "test_batch")
    names = [str(x) for x in neural]
    for x in names:
        if x not in NEURAL_BASELINES:
            raise ValueError(expected("neural", f"names from {NEURAL_BASELINES}", x))
    if check_bool(self_correcting, "self_correcting") and K != 1:
        raise ValueError(expected("self_correcting", "False for a batch of more than one type (the "
                                                     "self-correcting process has one)", f"True with {K} types",
                                  raw=True))
    if truth is not None and not isinstance(truth, ClassicalTPP):
        raise TypeError(expected("truth", "a classical model (Poisson, Hawkes, SharedDecayHawkes, SelfCorrecting)",
                                 type(truth).__name__, raw=True))
    gaps = check_scalar(horizon_gaps, "horizon_gaps", positive=True)
    sub, e_sub, e_smp, mle, nj_steps, nn_steps, bs, w = (
        check_int(v, n, minimum=1) for n, v in (
            ("num_substeps", num_substeps), ("eval_substeps", eval_substeps), ("eval_samples", eval_samples),
            ("mle_steps", mle_steps), ("njdtpp_steps", njdtpp_steps), ("neural_steps", neural_steps),
            ("batch_size", batch_size), ("width", width)))
    say = progress if progress is not None else (lambda message: None)

    n_train = float(np.asarray(train_batch.num_events).sum())
    rate = max(n_train / float(np.asarray(train_batch.T).sum()), 1e-6)
    horizon = float(gaps) / rate  # a few mean gaps of the ground process
    dtype = train_batch.times.dtype
    models: dict[str, AbstractTPP] = {}
    models["Poisson"] = Poisson(jnp.full((K,), rate / K, dtype)).fit_closed_form(train_batch)
    say("fit Hawkes")
    # one decay shared by all pairs (the Markov jump-diffusion form); branching ratio 0.5
    h0 = SharedDecayHawkes(jnp.full((K,), 0.5 * rate / K), jnp.full((K, K), 0.5 * rate / K), rate)
    models["Hawkes"] = fit_mle(h0, train_batch, num_steps=mle).model
    if self_correcting:
        say("fit self-correcting")
        Tm = float(np.asarray(train_batch.T).mean())
        sc0 = SelfCorrecting(max(math.log1p(rate * Tm) / Tm, 1e-3), 0.1)
        models["Self-correcting"] = fit_mle(sc0, train_batch, num_steps=mle).model
    scores = {name: evaluate(m, test_batch, horizon=horizon, num_substeps=sub) for name, m in models.items()}

    say("train NJDTPP")
    k_init, k_train, k_eval = jax.random.split(key, 3)
    model = NJDTPP(K, key=k_init, width=w, init_log_rate=float(np.log(rate / K)))
    res = train(k_train, model, train_batch, num_steps=nj_steps, batch_size=bs, num_substeps=sub,
                valid_batch=valid_batch, eval_every=max(nj_steps // 10, 1))
    scores["NJDTPP"] = evaluate(res.model, test_batch, k_eval, horizon=horizon, num_substeps=e_sub,
                                num_samples=e_smp)
    models["NJDTPP"] = res.model
    for j, name in enumerate(names):
        say(f"train {name}")
        k_m, k_t, k_e = jax.random.split(jax.random.fold_in(key, 100 + j), 3)
        r = train(k_t, _neural_baseline(name, K, k_m, w, rate / K), train_batch, num_steps=nn_steps,
                  batch_size=bs, valid_batch=valid_batch, eval_every=max(nn_steps // 10, 1))
        # AttNHP's thinning in chunks of 1,024 (sequence, position) pairs: XLA's temporary memory on the tweets
        # test set (45 x 260) is 8.84 -> 1.02 GiB with the 32-event window, 49.9 -> 5.9 GiB for the full history
        scores[name] = evaluate(r.model, test_batch, k_e, horizon=horizon, num_samples=16,
                                chunk_size=1024 if name == "AttNHP" else None)
        models[name] = r.model
    if truth is not None:
        scores["true model"] = evaluate(truth, test_batch, horizon=horizon, num_substeps=sub)
        models["true model"] = truth
    return ComparisonResult(scores, models, horizon)


def _neural_baseline(name: str, K: int, key: PRNGKeyArray, width: int, rate: float) -> AbstractTPP:
    """A neural baseline of width ``width`` initialised at the per-type rate ``rate``."""
    if name == "RMTPP":
        return RMTPP(K, key=key, hidden=width, init_log_rate=float(np.log(rate)))
    if name == "NHP":
        return NHP(K, key=key, hidden=width, init_rate=rate)
    if name == "THP":
        return THP(K, key=key, d_model=width, num_layers=1, init_rate=rate)
    if name == "SAHP":
        return SAHP(K, key=key, d_model=width, num_layers=1, init_rate=rate)
    if name == "IFTPP":
        return IFTPP(K, key=key, hidden=width, init_log_gap=float(-np.log(rate * K)))
    # attention to the last 32 events: the full history's per-event cost is O(L) in training and thinning (its
    # thinning all at once took > 50 GB on the tweets test set; chunked, 5.9 GiB)
    return AttNHP(K, key=key, d_model=width, num_layers=1, init_rate=rate, max_history=32)
