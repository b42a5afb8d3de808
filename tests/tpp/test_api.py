"""The public API's contracts: one compiled program per call (no recompiles), keys first, results
with history, the shared-decay Hawkes, evaluation, real-data batches, validator properties."""

import logging

import chex
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jaxcore.tpp import (
    NJDTPP,
    EvaluationResult,
    EventBatch,
    FitResult,
    Hawkes,
    Poisson,
    SelfCorrecting,
    SharedDecayHawkes,
    TrainResult,
    evaluate,
    event_batches,
    fit_mle,
    intensity_path,
    ks_statistic,
    nll_per_event,
    predict_next,
    prediction_scores,
    solve,
    time_rescaling_ks,
    train,
)

from ._oracles import hawkes_loglik


class _Compiles(logging.Handler):
    def __init__(self):
        super().__init__()
        self.count = 0

    def emit(self, record):
        if record.getMessage().startswith("Compiling"):
            self.count += 1


def compiles(fn):
    """Number of XLA compilations while running ``fn()``."""
    handler = _Compiles()
    logger = logging.getLogger("jax")
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    try:
        with jax.log_compiles():
            jax.block_until_ready(fn())
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    return handler.count


def _batch():
    return EventBatch.from_sequences([[0.3, 1.0, 2.2], [0.5, 0.9]], [[0, 1, 0], [1, 1]], T=3.0, num_marks=2)


def test_second_call_with_the_same_shapes_does_not_recompile():
    b = _batch()
    hawkes = Hawkes([0.2, 0.3], [[0.2, 0.1], [0.1, 0.3]], 1.2)
    njd = NJDTPP(2, key=jax.random.key(0), width=4, depth=1)
    pred = predict_next(hawkes.jump_diffusion(), b, horizon=2.0, num_grid=8, method="exact")
    calls = {
        "log_likelihood": lambda: hawkes.log_likelihood(b),
        "intensity": lambda: hawkes.intensity(b, jnp.ones((2, 3))),
        "compensator": lambda: hawkes.compensator(b),
        "simulate": lambda: hawkes.simulate(jax.random.key(1), 5.0, 16, 3),
        "poisson": lambda: Poisson([0.5, 1.0]).log_likelihood(b),
        "self_correcting": lambda: SelfCorrecting(0.5, 0.2).simulate(jax.random.key(1), 5.0, 16, 3),
        "solve": lambda: solve(njd, b, jax.random.key(2), num_substeps=2),
        "predict_next": lambda: predict_next(hawkes.jump_diffusion(), b, horizon=2.0, num_grid=8, method="exact"),
        "prediction_scores": lambda: prediction_scores(pred, b),
        "time_rescaling_ks": lambda: time_rescaling_ks(hawkes.jump_diffusion(), b, method="exact"),
        "ks_statistic": lambda: ks_statistic(jnp.ones(5)),
        "nll_per_event": lambda: nll_per_event(jnp.ones(2), jnp.ones(2, jnp.int32)),
        "intensity_path": lambda: intensity_path(hawkes.jump_diffusion(), b.times[0], b.marks[0], b.mask[0],
                                                 jnp.linspace(0.0, 3.0, 5)),
    }  # evaluate, fit_mle and train: checked in their own tests below
    for name, fn in calls.items():
        fn()
        assert compiles(fn) == 0, name


def test_train_is_key_first_and_returns_its_history():
    b = EventBatch.from_sequences([[0.4, 1.1, 1.5]], T=2.0)
    m = NJDTPP(1, key=jax.random.key(0), width=4, depth=1)
    nll0 = -float(solve(m, b, None, num_substeps=3).log_likelihood[0]) / 3
    # zero learning rate, one sequence, drift only: every minibatch is the batch and the loss never moves
    seen = []
    res = train(jax.random.key(1), m, b, num_steps=4, batch_size=1, optimizer=optax.sgd(0.0), num_substeps=3,
                stochastic=False, valid_batch=b, eval_every=2, progress=lambda step, metrics: seen.append(step))
    assert isinstance(res, TrainResult)
    assert seen and seen[-1] == 4  # the callback reports from inside the compiled loop
    chex.assert_shape(res.losses, (4,))
    chex.assert_shape(res.valid_losses, (2,))
    np.testing.assert_allclose(np.asarray(res.losses), nll0, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(res.valid_losses), nll0, rtol=1e-5)
    # with learning, the returned model is the validation-best one
    def again():
        return train(jax.random.key(1), m, b, num_steps=6, batch_size=1, num_substeps=3, stochastic=False,
                     valid_batch=b, eval_every=2)

    res = again()
    best = -float(solve(res.model, b, None, num_substeps=3).log_likelihood[0]) / 3
    assert best == pytest.approx(float(np.min(np.asarray(res.valid_losses))), rel=1e-5)
    assert compiles(lambda: again().losses) == 0  # one program, reused by a second call
    with pytest.raises(TypeError, match=r"key: expected a jax.random.key\(...\) array, got int"):
        train(0, m, b)
    with pytest.raises(ValueError, match="num_steps: expected an int >= 1"):
        train(jax.random.key(0), m, b, num_steps=0)
    with pytest.raises(TypeError, match="progress: expected a bool or a callable"):
        train(jax.random.key(0), m, b, progress="yes")


def test_shared_decay_hawkes_equals_hawkes_with_equal_decays(x64):
    rng = np.random.default_rng(5)
    times = [np.sort(rng.uniform(0, 6, n)) for n in (0, 4, 9)]
    marks = [rng.integers(0, 2, len(t)) for t in times]
    b = EventBatch.from_sequences(times, marks, T=6.0, num_marks=2)
    mu, alpha, beta = np.array([0.3, 0.2]), np.array([[0.4, 0.1], [0.2, 0.5]]), 1.7
    shared = SharedDecayHawkes(mu, alpha, beta)
    general = Hawkes(mu, alpha, np.full((2, 2), beta))
    for method in ("scan", "associative"):
        np.testing.assert_allclose(np.asarray(shared.log_likelihood(b, method=method)),
                                   np.asarray(general.log_likelihood(b, method=method)), rtol=1e-13)
    ref = [hawkes_loglik(mu, alpha, np.full((2, 2), beta), t, m, 6.0) for t, m in zip(times, marks)]
    np.testing.assert_allclose(np.asarray(shared.log_likelihood(b)), ref, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(shared.compensator(b)), np.asarray(general.compensator(b)), rtol=1e-13)
    # its jump-diffusion integrates to the same likelihood (exact flow)
    np.testing.assert_allclose(np.asarray(solve(shared.jump_diffusion(), b, method="exact").log_likelihood), ref,
                               rtol=1e-10)
    assert float(shared.branching_ratio()) == pytest.approx(float(general.branching_ratio()), rel=1e-12)
    with pytest.raises(ValueError, match="beta: expected a scalar"):
        SharedDecayHawkes(mu, alpha, np.ones((2, 2)))
    with pytest.raises(ValueError, match="beta: expected finite values > 0"):
        SharedDecayHawkes(mu, alpha, 0.0)


def test_shared_decay_hawkes_fit_recovers_parameters(x64):
    true = SharedDecayHawkes(0.5, 0.6, 1.5)
    b, overflow = true.simulate(jax.random.key(0), 250.0, 800, 6)
    assert not bool(np.any(overflow))
    init = SharedDecayHawkes(0.3, 0.3, 1.0)
    res = fit_mle(init, b, num_steps=40)
    assert compiles(lambda: fit_mle(init, b, num_steps=40).losses) == 0
    assert isinstance(res, FitResult)
    chex.assert_shape(res.losses, (40,))
    m = res.model
    assert isinstance(m, SharedDecayHawkes) and m.beta.shape == ()
    # ~6 x 250 x 1.25 = 1900 events: standard errors of several percent
    assert float(m.mu[0]) == pytest.approx(0.5, rel=0.3)
    assert float(m.alpha[0, 0]) == pytest.approx(0.6, rel=0.2)
    assert float(m.beta) == pytest.approx(1.5, rel=0.3)
    # the MLE beats the truth on its training data
    n = float(b.num_events.sum())
    assert -float(m.log_likelihood(b).sum()) / n <= -float(true.log_likelihood(b).sum()) / n + 1e-9


def test_evaluate_matches_its_parts(x64):
    b = EventBatch.from_sequences([[0.5, 1.0, 2.0, 2.2], [0.3, 1.7]], T=3.0)
    model = Poisson(1.3)
    r = evaluate(model, b, horizon=6.0)
    assert isinstance(r, EvaluationResult)
    assert compiles(lambda: evaluate(model, b, horizon=6.0).nll) == 0
    n = 6
    closed = -(n * np.log(1.3) - 2 * 3.0 * 1.3) / n  # Poisson: sum log mu - T mu per sequence
    assert float(r.nll) == pytest.approx(closed, rel=1e-12)
    pred = predict_next(model.jump_diffusion(), b, horizon=6.0, num_grid=256, method="exact")
    rmse, acc = prediction_scores(pred, b)
    assert float(r.rmse) == pytest.approx(float(rmse), rel=1e-12) and float(r.accuracy) == float(acc) == 1.0
    ks = time_rescaling_ks(model.jump_diffusion(), b, method="exact")
    assert float(r.ks) == pytest.approx(float(ks), rel=1e-12)
    # a stochastic model with a key: the NLL is the mean over the Brownian paths
    njd = NJDTPP(1, key=jax.random.key(0), width=2, depth=0)
    key = jax.random.key(4)
    r2 = evaluate(njd, b, key, horizon=6.0, num_substeps=1, num_samples=2, num_grid=4)
    lls = [solve(njd, b, k, num_substeps=1).log_likelihood for k in jax.random.split(key, 2)]
    assert float(r2.nll) == pytest.approx(float(nll_per_event(np.mean(lls, 0), b.num_events)), rel=1e-10)
    with pytest.raises(ValueError, match="horizon: expected a finite number > 0"):
        evaluate(model, b, horizon=0.0)
    with pytest.raises(TypeError, match="dynamics: expected a jaxcore.tpp.JumpDiffusion or a classical model"):
        evaluate(object(), b, horizon=1.0)


def test_event_batches_on_real_data():
    coal = event_batches("coal")
    splits = (coal.train, coal.valid, coal.test)
    assert sum(s.num_sequences for s in splits) == 28
    assert sum(int(s.num_events.sum()) for s in splits) == 191
    assert len({s.max_events for s in splits}) == 1 and coal.num_marks == 1
    np.testing.assert_allclose(np.asarray(coal.test.T), 4.0)


def test_checkpoint_template_draws_no_weights(tmp_path):
    m = NJDTPP(1, key=jax.random.key(7), width=4, depth=1)
    from jaxcore.tpp import load_checkpoint, save_checkpoint

    save_checkpoint(tmp_path / "m.eqx", m)
    assert eqx.tree_equal(load_checkpoint(tmp_path / "m.eqx"), m)


# float32-representable times (a float64 time that the float32 cast merges with its neighbour is refused)
_sorted_seqs = st.lists(st.lists(st.floats(0.0, 5.0, allow_nan=False, allow_subnormal=False, width=32),
                                 min_size=0, max_size=6).map(sorted),
                        min_size=2, max_size=2)


@given(_sorted_seqs)
def test_from_sequences_round_trips_and_padding_changes_no_likelihood(seqs):
    b = EventBatch.from_sequences(seqs, T=5.0, max_events=6)
    times, marks, T = b.to_sequences()
    for got, want in zip(times, seqs):
        np.testing.assert_allclose(got, np.asarray(want, np.float32))
    assert all(len(m) == len(s) for m, s in zip(marks, seqs))
    longer = EventBatch.from_sequences(seqs, T=5.0, max_events=9)
    h = Hawkes(0.4, 0.5, 1.3)
    np.testing.assert_allclose(np.asarray(h.log_likelihood(longer)), np.asarray(h.log_likelihood(b)),
                               rtol=1e-5, atol=1e-5)


@given(st.lists(st.floats(0.0, 5.0, allow_nan=False), min_size=2, max_size=6))
def test_from_sequences_refuses_unsorted_times_naming_the_position(times):
    order = np.argsort(times, kind="stable")
    if np.all(np.diff(times) >= 0):
        EventBatch.from_sequences([times], T=5.0)  # sorted: accepted
        return
    i = int(np.flatnonzero(np.diff(times) < 0)[0]) + 1
    with pytest.raises(ValueError, match=rf"times\[0\]\[{i}\]: expected event times sorted"):
        EventBatch.from_sequences([times], T=5.0)
    EventBatch.from_sequences([list(np.asarray(times)[order])], T=5.0)
