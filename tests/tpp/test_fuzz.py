"""Fuzzing of every export of ``jaxcore.tpp`` (issue 15): dtypes, NaN/inf/negative/zero values,
None, wrong shapes and int keys. The outcome is a finite value (for valid input) or a
ValueError/TypeError whose message names the argument; never a NaN from valid input, never an
exception from inside JAX. Shapes come from small fixed sets so examples share compilations.
"""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxcore import tpp

# export -> what it is fuzzed with (containers are NamedTuples: built by the functions below)
FUZZ_TABLE = {
    "EventBatch": "from_sequences: times (NaN/inf/negative/unsorted/past T, None), marks out of range, T, "
                  "dtype (int32/float16/bfloat16/float32/float64); constructor: dtypes, shapes, values",
    "Hawkes": "mu/alpha/beta: dtype x {NaN, inf, negative, zero, positive}, None, wrong shape",
    "SharedDecayHawkes": "mu/alpha/beta: dtype x values, None, wrong shape",
    "Poisson": "mu: dtype x values, None, wrong shape",
    "SelfCorrecting": "mu/alpha: dtype x values, None, wrong shape",
    "HawkesSDE": "mu/alpha/beta values", "PoissonSDE": "mu values", "SelfCorrectingSDE": "mu/alpha values",
    "NJDTPP": "num_marks/width/depth ints and non-ints, init_log_rate values, dtype, key (int/None)",
    "JumpDiffusion": "abstract base: through solve with each concrete dynamics",
    "solve": "num_substeps, method, convention, key (int/None/key), dynamics type",
    "log_likelihood": "as solve", "intensity_path": "times/grid values and shapes, marks dtype, mask dtype",
    "intensity": "not fuzzed (test_metrics: refusals of t's shape, method, model type)",
    "as_jump_diffusion": "through solve and time_rescaling_ks (dynamics type)",
    "time_rescaling_ks": "dynamics, method, batch type", "ks_statistic": "samples dtype x values, mask shape",
    "nll_per_event": "log_likelihood/num_events dtype x values, shapes",
    "predict_next": "horizon values, num_grid, method", "prediction_scores": "pred/batch types",
    "sample_next": "horizon values, num_grid (test_metrics: num_samples, key)",
    "generate": "not fuzzed (test_metrics: num_events, the jump-diffusion path)",
    "evaluate": "horizon, num_samples, num_grid, key", "fit_mle": "num_steps, model type, batch type",
    "train": "num_steps, batch_size, key, model type", "save_checkpoint": "model type",
    "load_checkpoint": "a file that is not a checkpoint", "event_batches": "name (unknown, None, int)",
    "validate_sequence": "times values, marks range, T values",
    "synthetic_hawkes": "key, num_sequences, T, max_events", "synthetic_poisson": "as synthetic_hawkes",
    "synthetic_self_correcting": "as synthetic_hawkes",
    "EvaluationResult": "container", "EventSplits": "container", "FitResult": "container",
    "NextEventPrediction": "container", "SolveResult": "container", "TrainResult": "container",
    # neural baselines: not in the hypothesis fuzzer yet; their refusals are in tests/tpp/test_neural.py
    "NeuralTPP": "abstract base: through each concrete model",
    "RMTPP": "not fuzzed (test_neural: refusals)", "NHP": "not fuzzed (test_neural: refusals)",
    "THP": "not fuzzed (test_neural: refusals)", "SAHP": "not fuzzed (test_neural: refusals)",
    "IFTPP": "not fuzzed (test_neural: refusals)",
    "AttNHP": "not fuzzed (test_attnhp: refusals)",
    "NeuralLikelihood": "container", "NextEventSamples": "container", "GeneratedEvents": "container",
    "AbstractTPP": "abstract base: through each concrete model (test_interface)",
    "ClassicalTPP": "abstract base: through Poisson, Hawkes, SharedDecayHawkes, SelfCorrecting",
    "EvaluationTerms": "container", "ComparisonResult": "container",
    "compare_models": "not fuzzed (test_comparison: refusals of key, neural names, self_correcting, truth)",
}

DTYPES = [np.int32, np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
VALUES = [0.5, 2.0, 0.0, -0.5, np.nan, np.inf, -np.inf]
BATCH = tpp.EventBatch.from_sequences([[0.5, 1.0, 1.8], [0.2]], T=2.0)
KEY = jax.random.key(0)


def test_table_covers_the_exports():
    assert set(FUZZ_TABLE) == set(tpp.__all__)


def _outcome(fn, names, valid):
    """Run ``fn``: valid input -> finite leaves; invalid -> ValueError/TypeError naming an argument."""
    try:
        out = fn()
    except (ValueError, TypeError) as e:
        msg = str(e)
        assert not valid, f"valid input raised {type(e).__name__}: {msg}"
        assert any(n in msg for n in names), f"message does not name {names}: {msg}"
        assert "expected" in msg, msg
        return None
    assert valid, f"invalid input accepted: {names}"
    for leaf in jax.tree_util.tree_leaves(out):
        a = np.asarray(leaf)
        if a.dtype.kind == "f":
            assert np.all(np.isfinite(a)), f"non-finite output {a} from valid input"
    return out


def _cast_ok(value, dtype, kind):
    v = float(np.asarray(value, np.float64).astype(dtype).astype(np.float64)) if np.isfinite(value) or \
        np.dtype(dtype).kind == "f" else None
    if v is None or not np.isfinite(v):
        return False
    return v > 0 if kind == "positive" else v >= 0


def _arr(value, dtype, shape=()):
    with np.errstate(invalid="ignore", over="ignore"):
        return np.full(shape, value, np.float64).astype(dtype) if np.isfinite(value) or np.dtype(dtype).kind == "f" \
            else np.full(shape, value, np.float64)  # NaN/inf cannot be an int: the float is passed


_param = st.tuples(st.sampled_from(VALUES), st.sampled_from(DTYPES))


@given(mu=_param, alpha=_param, beta=_param, shared=st.booleans())
def test_fuzz_hawkes(mu, alpha, beta, shared):
    cls = tpp.SharedDecayHawkes if shared else tpp.Hawkes
    valid = _cast_ok(*mu, "positive") and _cast_ok(*alpha, "nonnegative") and _cast_ok(*beta, "positive")

    def run():
        m = cls(_arr(*mu, (1,)), _arr(*alpha, (1, 1)), _arr(*beta))
        return m.log_likelihood(BATCH), m.compensator(BATCH)

    _outcome(run, ["mu", "alpha", "beta"], valid)


@given(mu=_param, alpha=_param, which=st.sampled_from(["poisson", "self_correcting"]))
def test_fuzz_poisson_and_self_correcting(mu, alpha, which):
    if which == "poisson":
        valid = _cast_ok(*mu, "positive")
        run = lambda: tpp.Poisson(_arr(*mu, (1,))).log_likelihood(BATCH)  # noqa: E731
    else:
        valid = _cast_ok(*mu, "positive") and _cast_ok(*alpha, "nonnegative")
        run = lambda: tpp.SelfCorrecting(_arr(*mu), _arr(*alpha)).log_likelihood(BATCH)  # noqa: E731
    _outcome(run, ["mu", "alpha"], valid)


@given(which=st.sampled_from(["Hawkes-mu", "Hawkes-alpha", "Hawkes-beta", "Poisson", "SelfCorrecting"]),
       bad=st.sampled_from([None, "x", np.ones((2, 3)), 1j]))
def test_fuzz_models_refuse_none_strings_and_shapes(which, bad):
    calls = {
        "Hawkes-mu": (lambda: tpp.Hawkes(bad, 0.5, 1.0), "mu"),
        "Hawkes-alpha": (lambda: tpp.Hawkes(0.2, bad, 1.0), "alpha"),
        "Hawkes-beta": (lambda: tpp.Hawkes(0.2, 0.5, bad), "beta"),
        "Poisson": (lambda: tpp.Poisson(bad), "mu"),
        "SelfCorrecting": (lambda: tpp.SelfCorrecting(bad, 0.2), "mu"),
    }
    fn, name = calls[which]
    _outcome(fn, [name], False)


_time = st.sampled_from([0.3, 0.7, 0.0, -0.1, np.nan, np.inf, 3.0])


@given(t0=_time, t1=_time, mark=st.sampled_from([0, 1, -1, 2]), dtype=st.sampled_from(DTYPES),
       T=st.sampled_from([1.0, 2.0, 0.5, -1.0, np.nan, np.inf]))
def test_fuzz_event_batch(t0, t1, mark, dtype, T):
    half_or_int = np.dtype(dtype).kind != "f" or dtype in (np.float16, ml_dtypes.bfloat16)
    valid = (np.isfinite(T) and T >= 0 and all(np.isfinite(t) and 0 <= t <= T for t in (t0, t1)) and t0 <= t1
             and mark in (0, 1) and not half_or_int)
    _outcome(lambda: tpp.EventBatch.from_sequences([[t0, t1]], [[0, mark]], T=T, num_marks=2, dtype=dtype),
             ["times", "marks", "T", "dtype"], valid)
    # the constructor itself, with arrays of that dtype
    times = _arr(t0, dtype, (1, 2))
    times[0, 1] = t1 if np.dtype(times.dtype).kind == "f" else times[0, 1]
    valid_direct = valid and np.dtype(times.dtype).kind == "f"
    _outcome(lambda: tpp.EventBatch(jnp.asarray(times), jnp.array([[0, mark]], jnp.int32), jnp.ones((1, 2), bool),
                                    jnp.array([T], jnp.float32), 2),
             ["times", "marks", "T", "dtype"], valid_direct)


@given(rate=st.sampled_from([0.0, 1.0, -3.0, np.nan, np.inf, None, "x"]),
       width=st.sampled_from([2, 0, 2.5, None]), key=st.sampled_from(["key", 0, None]),
       dtype=st.sampled_from([None, np.float32, np.float16, np.int32]))
def test_fuzz_njdtpp_constructor(rate, width, key, dtype):
    valid = (isinstance(rate, float) and np.isfinite(rate) and width == 2 and key == "key"
             and dtype in (None, np.float32))
    k = KEY if key == "key" else key
    _outcome(lambda: tpp.NJDTPP(1, key=k, width=width, depth=0, init_log_rate=rate, dtype=dtype),
             ["init_log_rate", "width", "key", "dtype"], valid)


_MODEL = tpp.NJDTPP(1, key=KEY, width=2, depth=0)


@given(num_substeps=st.sampled_from([2, 0, -1, 2.0, None]), key=st.sampled_from([None, "key", 3]),
       method=st.sampled_from(["scan", "exact", "rk4"]), convention=st.sampled_from(["window", "paper", "x"]))
def test_fuzz_solve(num_substeps, key, method, convention):
    valid = (num_substeps == 2 and isinstance(num_substeps, int) and key != 3 and method == "scan"
             and convention != "x")
    k = KEY if key == "key" else key
    _outcome(lambda: tpp.log_likelihood(_MODEL, BATCH, k, method=method, num_substeps=num_substeps,
                                        convention=convention),
             ["num_substeps", "key", "method", "convention"], valid)


@given(values=st.sampled_from([0.1, 1.0, -1.0, np.nan, np.inf]), dtype=st.sampled_from(DTYPES),
       mask_shape=st.sampled_from([(3,), (2,)]))
def test_fuzz_ks_statistic(values, dtype, mask_shape):
    x = _arr(values, dtype, (3,))
    xv = np.asarray(x, np.float64)
    valid = bool(np.all(np.isfinite(xv)) and np.all(xv >= 0)) and mask_shape == (3,)
    out = _outcome(lambda: tpp.ks_statistic(x, np.ones(mask_shape, bool)), ["samples", "mask"], valid)
    if out is not None:
        assert 0.0 <= float(out) <= 1.0


@given(ll=st.sampled_from([-1.0, 0.0, np.nan]), n=st.sampled_from([2, 0, -1]),
       dtype=st.sampled_from(DTYPES), shape=st.sampled_from([(2,), (3,)]))
def test_fuzz_nll_per_event(ll, n, dtype, shape):
    valid = np.isfinite(ll) and n >= 0 and shape == (2,)
    _outcome(lambda: tpp.nll_per_event(_arr(ll, np.float32, (2,)), _arr(n, dtype, shape)),
             ["log_likelihood", "num_events"], valid)


@given(horizon=st.sampled_from([1.0, 0.0, -1.0, np.nan, np.inf, None]), num_grid=st.sampled_from([4, 0, 4.0]),
       key=st.sampled_from([None, 0]))
def test_fuzz_evaluate_and_predict(horizon, num_grid, key):
    valid = horizon == 1.0 and num_grid == 4 and isinstance(num_grid, int)
    dyn = tpp.Poisson(1.0)
    _outcome(lambda: tpp.predict_next(dyn.jump_diffusion(), BATCH, horizon=horizon, num_grid=num_grid,
                                      method="exact"), ["horizon", "num_grid"], valid)
    _outcome(lambda: tpp.sample_next(KEY, dyn.jump_diffusion(), BATCH, horizon=horizon, num_grid=num_grid,
                                     method="exact"), ["horizon", "num_grid"], valid)
    _outcome(lambda: tpp.evaluate(dyn, BATCH, key, horizon=horizon, num_grid=num_grid),
             ["horizon", "num_grid", "key"], valid and key is None)


@given(times=st.sampled_from([[0.5, 1.0, 1.5], [1.0, 0.5, 1.5], [0.5, np.nan, 1.0]]),
       marks=st.sampled_from([[0, 0, 0], [0, 3, 0], [0.0, 0.0, 0.0]]),
       grid=st.sampled_from([[0.0, 1.0, 2.0], [0.0, 2.0, 1.0], [0.0, np.nan, 1.0]]))
def test_fuzz_intensity_path(times, marks, grid):
    valid = times == [0.5, 1.0, 1.5] and marks == [0, 0, 0] and isinstance(marks[0], int) and grid == [0.0, 1.0, 2.0]
    dyn = tpp.Hawkes(0.2, 0.5, 1.0).jump_diffusion()
    marks = np.asarray(marks) if isinstance(marks[0], float) else np.asarray(marks, np.int32)
    _outcome(lambda: tpp.intensity_path(dyn, np.asarray(times, np.float32), marks, np.ones(3, bool),
                                        np.asarray(grid, np.float32), method="exact"),
             ["times", "marks", "grid"], valid)


@given(num=st.sampled_from([2, 0, 2.0]), T=st.sampled_from([5.0, 0.0, -1.0, np.nan]),
       key=st.sampled_from(["key", 0]), which=st.sampled_from(["hawkes", "poisson", "self_correcting"]))
def test_fuzz_synthetic(num, T, key, which):
    fn = {"hawkes": tpp.synthetic_hawkes, "poisson": tpp.synthetic_poisson,
          "self_correcting": tpp.synthetic_self_correcting}[which]
    valid = num == 2 and isinstance(num, int) and T == 5.0 and key == "key"
    _outcome(lambda: fn(KEY if key == "key" else key, num_sequences=num, T=T, max_events=64),
             ["num_sequences", "T", "key"], valid)


@given(target=st.sampled_from(["fit_mle", "train", "save", "time_rescaling", "scores", "events", "validate"]),
       bad=st.sampled_from([None, 0, "x"]))
def test_fuzz_type_errors_of_the_remaining_functions(target, bad, tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "m.eqx"
    calls = {
        "fit_mle": (lambda: tpp.fit_mle(tpp.Poisson(1.0), bad), "batch"),
        "train": (lambda: tpp.train(bad, _MODEL, BATCH, num_steps=1), "key"),
        "save": (lambda: tpp.save_checkpoint(path, bad), "model"),
        "time_rescaling": (lambda: tpp.time_rescaling_ks(bad, BATCH), "dynamics"),
        "scores": (lambda: tpp.prediction_scores(bad, BATCH), "pred"),
        "events": (lambda: tpp.event_batches(bad), "name"),
        "validate": (lambda: tpp.validate_sequence(np.array([0.5, np.nan]), np.zeros(2, int), 1.0, 1), "times"),
    }
    fn, name = calls[target]
    _outcome(fn, [name], False)


def test_load_checkpoint_of_a_foreign_file(tmp_path):
    p = tmp_path / "x.eqx"
    p.write_bytes(b"\xff\xfe not a checkpoint")
    _outcome(lambda: tpp.load_checkpoint(p), ["path"], False)


@pytest.mark.slow
@settings(max_examples=40)
@given(mu=_param, alpha=_param, beta=_param, shared=st.booleans())
def test_fuzz_hawkes_deep(mu, alpha, beta, shared):
    test_fuzz_hawkes.hypothesis.inner_test(mu, alpha, beta, shared)


@pytest.mark.slow
@settings(max_examples=40)
@given(t0=_time, t1=_time, mark=st.sampled_from([0, 1, -1, 2]), dtype=st.sampled_from(DTYPES),
       T=st.sampled_from([1.0, 2.0, 0.5, -1.0, np.nan, np.inf]))
def test_fuzz_event_batch_deep(t0, t1, mark, dtype, T):
    test_fuzz_event_batch.hypothesis.inner_test(t0, t1, mark, dtype, T)
