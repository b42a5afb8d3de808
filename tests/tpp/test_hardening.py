"""Regression tests of issue 15 (hardening) for the tpp family: each reproducer, and its class."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxcore import tpp
from jaxcore.tpp import NJDTPP, EventBatch, Hawkes, Poisson, SelfCorrecting, SharedDecayHawkes

RUNTIME = (RuntimeError, ValueError, jax.errors.JaxRuntimeError)


def _direct(times, marks=None, mask=None, T=(1.0,), num_marks=1):
    times = jnp.asarray(times, jnp.float32)
    marks = jnp.zeros(times.shape, jnp.int32) if marks is None else jnp.asarray(marks, jnp.int32)
    mask = jnp.ones(times.shape, bool) if mask is None else jnp.asarray(mask, bool)
    return EventBatch(times, marks, mask, jnp.asarray(T, jnp.float32), num_marks)


# --- from_sequences: dtypes that do not hold the times -------------------------------------------------

def test_int_dtype_for_times_is_refused():
    with pytest.raises(TypeError, match=r"dtype: expected a float dtype .*event times"):
        EventBatch.from_sequences([[0.5, 1.5]], T=2.0, dtype=jnp.int32)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_dtype_for_times_is_refused(dtype):
    with pytest.raises(TypeError, match=r"dtype: expected float32 or float64"):
        EventBatch.from_sequences([[1000.1, 1000.2, 1000.3]], T=2000.0, dtype=dtype)


def test_float32_cast_that_merges_times_is_refused():
    times = 1e7 + 0.1 * np.arange(500)
    with pytest.raises(ValueError, match=r"times\[0\]\[1\]: expected event times that survive the cast to "
                                         r"dtype=float32.*float64.*jax_enable_x64.*shift the time origin"):
        EventBatch.from_sequences([times], T=2e7)
    # the same gaps near the origin survive
    b = EventBatch.from_sequences([times - 1e7], T=100.0)
    assert len(np.unique(np.asarray(b.times[0]))) == 500


def test_float64_keeps_times_near_1e7(x64):
    times = 1e7 + 0.1 * np.arange(500)
    b = EventBatch.from_sequences([times], T=2e7, dtype=jnp.float64)
    assert len(np.unique(np.asarray(b.times[0]))) == 500


# --- the constructor validates ----------------------------------------------------------------------------

def test_direct_constructor_refuses_unsorted_times():
    with pytest.raises(ValueError, match=r"times\[0\]\[1\]: expected event times sorted"):
        _direct([[0.5, 0.2]])


def test_direct_constructor_refuses_times_past_T():
    with pytest.raises(ValueError, match=r"times\[0\]\[1\]: expected a time in \[0, T\]"):
        _direct([[0.5, 1.5]])
    with pytest.raises(ValueError, match=r"times\[0\]\[0\]: expected a time in \[0, T\]"):
        _direct([[-0.5, 0.5]])


def test_direct_constructor_refuses_marks_out_of_range():
    with pytest.raises(ValueError, match=r"marks\[0\]\[1\]: expected an event type in \[0, 2\)"):
        _direct([[0.2, 0.5]], marks=[[0, 2]], num_marks=2)
    with pytest.raises(ValueError, match=r"marks\[0\]\[0\]"):
        _direct([[0.2, 0.5]], marks=[[-1, 0]], num_marks=2)


def test_direct_constructor_refuses_inconsistent_mask_and_shapes():
    with pytest.raises(ValueError, match=r"mask\[0\]\[1\]: expected the real events first"):
        _direct([[0.2, 0.5]], mask=[[False, True]])
    with pytest.raises(ValueError, match=r"marks: expected the shape of times"):
        EventBatch(jnp.zeros((1, 2)), jnp.zeros((1, 3), jnp.int32), jnp.ones((1, 2), bool), jnp.ones(1))
    with pytest.raises(ValueError, match=r"T: expected shape \[batch\]"):
        EventBatch(jnp.zeros((1, 2)), jnp.zeros((1, 2), jnp.int32), jnp.ones((1, 2), bool), jnp.ones(2))
    with pytest.raises(TypeError, match=r"times: expected a float32/float64 array"):
        EventBatch(jnp.zeros((1, 2), jnp.int32), jnp.zeros((1, 2), jnp.int32), jnp.ones((1, 2), bool), jnp.ones(1))
    with pytest.raises(TypeError, match=r"marks: expected an integer array"):
        EventBatch(jnp.zeros((1, 2)), jnp.zeros((1, 2)), jnp.ones((1, 2), bool), jnp.ones(1))
    with pytest.raises(ValueError, match=r"T\[0\]: expected a finite, non-negative window end"):
        _direct([[0.2]], T=[np.nan])
    with pytest.raises(ValueError, match=r"times\[0\]\[0\]: expected a finite event time"):
        _direct([[np.nan]])


def test_direct_constructor_accepts_valid_and_traced_batches():
    b = _direct([[0.2, 0.5, 0.5]], mask=[[True, True, False]])
    assert Hawkes(0.2, 0.5, 1.0).log_likelihood(b).shape == (1,)
    # inside a compiled program the values are tracers and are not checked (shapes/dtypes still are)
    f = jax.jit(lambda t: EventBatch(t, jnp.zeros(t.shape, jnp.int32), jnp.ones(t.shape, bool),
                                     jnp.ones(t.shape[:1])).times)
    assert f(jnp.array([[0.1, 0.2]])).shape == (1, 2)


# --- traced parameters are checked at run time --------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda mu: Hawkes(mu, 0.5, 1.0),
    lambda mu: SharedDecayHawkes(mu, 0.5, 1.0),
    lambda mu: Poisson(mu),
    lambda mu: SelfCorrecting(mu, 0.2),
])
def test_traced_negative_rate_raises_under_jit(make):
    b = EventBatch.from_sequences([[0.5, 1.0]], T=2.0)
    f = jax.jit(lambda mu: make(mu).log_likelihood(b))
    assert np.isfinite(float(f(0.2)[0]))
    with pytest.raises(RUNTIME, match=r"mu: expected finite values > 0"):
        jax.block_until_ready(f(-0.2))
    with pytest.raises(RUNTIME, match=r"mu: expected finite values > 0"):
        jax.block_until_ready(f(jnp.nan))


def test_traced_alpha_beta_and_compensator_checked_under_jit():
    b = EventBatch.from_sequences([[0.5, 1.0]], T=2.0)
    f = jax.jit(lambda a: Hawkes(0.2, a, 1.0).compensator(b))
    with pytest.raises(RUNTIME, match=r"alpha: expected finite values >= 0"):
        jax.block_until_ready(f(-0.1))
    g = jax.jit(lambda be: Hawkes(0.2, 0.5, be).intensity(b, jnp.ones((1, 2))))
    with pytest.raises(RUNTIME, match=r"beta: expected finite values > 0"):
        jax.block_until_ready(g(0.0))
    h = jax.jit(lambda mu: tpp.solve(Poisson(mu).jump_diffusion(), b, method="exact").log_likelihood)
    with pytest.raises(RUNTIME, match=r"mu: expected finite values > 0"):
        jax.block_until_ready(h(-1.0))


def test_fit_mle_has_no_runtime_check_in_its_loop():
    # the fit loop's parameters are softplus-mapped (positive by construction) and trusted inside the scan
    b = EventBatch.from_sequences([[0.5, 1.0, 1.5]], T=2.0)
    res = tpp.fit_mle(Hawkes(0.3, 0.3, 1.0), b, num_steps=3, optimizer=optax.adam(0.05))
    jaxpr = str(jax.make_jaxpr(lambda u: Hawkes(0.3, 0.3, 1.0).from_unconstrained(u).log_likelihood(b))(
        Hawkes(0.3, 0.3, 1.0).to_unconstrained()))
    assert "callback" in jaxpr  # a fresh traced model is checked ...
    assert np.all(np.isfinite(np.asarray(res.losses)))


def test_sde_classes_refuse_bad_parameters():
    with pytest.raises(ValueError, match="mu: expected finite values > 0"):
        tpp.PoissonSDE(jnp.array([-1.0]))
    with pytest.raises(ValueError, match="beta: expected finite values > 0"):
        tpp.HawkesSDE(jnp.array([0.2]), jnp.array([[0.5]]), jnp.array(np.nan))
    with pytest.raises(ValueError, match="alpha: expected finite values >= 0"):
        tpp.SelfCorrectingSDE(jnp.array(0.5), jnp.array(-0.2))


# --- NJDTPP -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_njdtpp_refuses_non_finite_init_log_rate(value):
    with pytest.raises(ValueError, match="init_log_rate: expected a finite number"):
        NJDTPP(1, key=jax.random.key(0), init_log_rate=value)


def test_njdtpp_refuses_bad_constructor_arguments():
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        NJDTPP(1, key=0)
    with pytest.raises(TypeError, match="dtype: expected float32 or float64"):
        NJDTPP(1, key=jax.random.key(0), dtype=jnp.float16)
    with pytest.raises(TypeError, match="dtype: expected a float dtype"):
        NJDTPP(1, key=jax.random.key(0), dtype=jnp.int32)
    with pytest.raises(TypeError, match="init_log_rate: expected a finite number"):
        NJDTPP(1, key=jax.random.key(0), init_log_rate=None)
    with pytest.raises(ValueError, match="num_marks: expected an int >= 1"):
        NJDTPP(0, key=jax.random.key(0))


def test_njdtpp_nan_weights_refused_by_solve():
    m = NJDTPP(1, key=jax.random.key(0), width=4, depth=1)
    bad = eqx.tree_at(lambda m: m.eta0, m, jnp.array([np.nan]))
    b = EventBatch.from_sequences([[0.5]], T=1.0)
    with pytest.raises(ValueError, match="model: expected finite values"):
        tpp.solve(bad, b)


def _linear_njdtpp(c, d, k=1.0):
    """depth 0: the drift is linear, f(eta) = -k (eta - c), and every event adds d to eta."""
    m = NJDTPP(1, key=jax.random.key(0), depth=0, init_log_rate=c)
    return eqx.tree_at(
        lambda m: (m.drift_net.layers[0].weight, m.drift_net.layers[0].bias,
                   m.jump_net.layers[0].weight, m.jump_net.layers[0].bias),
        m, (jnp.full((1, 1), -k), jnp.full((1,), k * c), jnp.zeros((1, 1)), jnp.full((1,), d)))


def test_njdtpp_long_gap_is_finite_and_matches_the_closed_form():
    # issue 15: one 5e5 gap (T = 1e6) gave -inf (explicit Euler over 5e4-long steps overflowed)
    b = EventBatch.from_sequences([[1.0, 5e5 + 1.0]], T=1e6)
    ll = tpp.solve(NJDTPP(1, key=jax.random.key(0)), b).log_likelihood
    assert np.isfinite(float(ll[0]))
    ll_noise = tpp.solve(NJDTPP(1, key=jax.random.key(0)), b, jax.random.key(1)).log_likelihood
    assert np.isfinite(float(ll_noise[0]))
    # closed form: eta = c until the first event, then c + d e^{-s} after each event (s since it)
    c, d = -2.0, 0.5
    ein = sum(d ** j / (j * math.factorial(j)) for j in range(1, 30))  # int_0^inf (exp(d e^-s) - 1) ds
    exact = 2 * c - math.exp(c) * (1.0 + 5e5 + (5e5 - 1.0) + 2 * ein)
    got = float(tpp.solve(_linear_njdtpp(c, d), b).log_likelihood[0])
    assert got == pytest.approx(exact, rel=1e-5)


def test_njdtpp_short_gaps_keep_explicit_euler():
    # ordinary gaps stay on the explicit step (same numbers as before the switch existed)
    c, d = -1.0, 0.3
    m = _linear_njdtpp(c, d, k=0.5)
    b = EventBatch.from_sequences([[0.5, 1.0, 2.0]], T=3.0)
    n = 10
    ll = float(tpp.solve(m, b, num_substeps=n, scheme="euler").log_likelihood[0])
    # hand-written explicit Euler of the same system
    eta, comp, logs, t_prev = c, 0.0, 0.0, 0.0
    for t in [0.5, 1.0, 2.0, 3.0]:
        h = (t - t_prev) / n
        for _ in range(n):
            comp += math.exp(eta) * h
            eta = eta + h * (-0.5 * (eta - c))
        if t < 3.0:
            logs += eta
            eta += d
        t_prev = t
    assert ll == pytest.approx(logs - comp, rel=1e-5)
    # the default exponential scheme: the exact flow of this linear drift, the exact integral of exp
    # of the linearly interpolated log-intensity
    ll = float(tpp.solve(m, b, num_substeps=n).log_likelihood[0])
    eta, comp, logs, t_prev = c, 0.0, 0.0, 0.0
    for t in [0.5, 1.0, 2.0, 3.0]:
        h = (t - t_prev) / n
        for _ in range(n):
            new = c + (eta - c) * math.exp(-0.5 * h)
            comp += h * (math.exp(new) - math.exp(eta)) / (new - eta) if new != eta else h * math.exp(eta)
            eta = new
        if t < 3.0:
            logs += eta
            eta += d
        t_prev = t
    assert ll == pytest.approx(logs - comp, rel=1e-5)


def test_train_default_optimizer_is_clipped_adam():
    from jaxcore.tpp.training import _default_optimizer

    opt = _default_optimizer()
    g = {"w": jnp.full((4,), 1e6)}
    upd, _ = opt.update(g, opt.init(g), g)
    assert np.all(np.isfinite(np.asarray(upd["w"])))
    assert "clipping" in tpp.train.__doc__ and "14.5" in tpp.train.__doc__ and "1.73" in tpp.train.__doc__
    with pytest.raises(TypeError, match="optimizer: expected an optax.GradientTransformation"):
        tpp.train(jax.random.key(0), NJDTPP(1, key=jax.random.key(0), width=2, depth=0),
                  EventBatch.from_sequences([[0.5]], T=1.0), optimizer="adam")


# --- the class in every public function -------------------------------------------------------------------

def test_int_seed_as_key_refused_everywhere():
    b = EventBatch.from_sequences([[0.5]], T=1.0)
    m = NJDTPP(1, key=jax.random.key(0), width=2, depth=0)
    calls = [
        lambda: Hawkes(0.2, 0.5, 1.0).simulate(0, 1.0, 4, 1),
        lambda: Poisson(1.0).simulate(0, 1.0, 4, 1),
        lambda: SelfCorrecting(0.5, 0.2).simulate(0, 1.0, 4, 1),
        lambda: tpp.synthetic_poisson(0),
        lambda: tpp.solve(m, b, 0),
        lambda: tpp.train(0, m, b, num_steps=1),
        lambda: tpp.evaluate(m, b, 0, horizon=1.0),
    ]
    for call in calls:
        with pytest.raises(TypeError, match="key: expected a jax.random.key"):
            call()


@pytest.mark.parametrize("make, name", [
    (lambda: Hawkes(None, 0.5, 1.0), "mu"),
    (lambda: Hawkes(0.2, None, 1.0), "alpha"),
    (lambda: Hawkes(0.2, 0.5, "x"), "beta"),
    (lambda: SharedDecayHawkes(0.2, 0.5, None), "beta"),
    (lambda: Poisson(None), "mu"),
    (lambda: SelfCorrecting(0.5, None), "alpha"),
])
def test_none_and_strings_refused(make, name):
    with pytest.raises(TypeError, match=rf"{name}: expected a real number"):
        make()


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_precision_parameters_held_in_float32(dtype):
    m = Hawkes(jnp.array([0.2], dtype), jnp.array([[0.5]], dtype), jnp.array(1.0, dtype))
    assert m.mu.dtype == jnp.float32 and m.beta.dtype == jnp.float32
    b = EventBatch.from_sequences([[0.5, 1.0]], T=2.0)
    ref = Hawkes(0.2, 0.5, 1.0).log_likelihood(b)
    np.testing.assert_allclose(np.asarray(m.log_likelihood(b)), np.asarray(ref), rtol=1e-3)


def test_query_times_checked():
    b = EventBatch.from_sequences([[0.5, 1.0]], T=2.0)
    for model in (Hawkes(0.2, 0.5, 1.0), Poisson(1.0), SelfCorrecting(0.5, 0.2)):
        with pytest.raises(ValueError, match=r"t: expected query times of shape \[batch, query\]"):
            model.intensity(b, jnp.ones((2, 3)))
        with pytest.raises(ValueError, match=r"t: expected finite values >= 0"):
            model.compensator(b, jnp.array([[np.nan]]))
        with pytest.raises(TypeError, match=r"t: expected query times"):
            model.intensity(b, None)


def test_metrics_inputs_checked():
    with pytest.raises(ValueError, match="num_events: expected"):
        tpp.nll_per_event(jnp.array([-1.0, -2.0]), jnp.array([1]))
    with pytest.raises(ValueError, match="num_events: expected finite values >= 0"):
        tpp.nll_per_event(jnp.array([-1.0]), jnp.array([-1]))
    with pytest.raises(ValueError, match="log_likelihood: expected"):
        tpp.nll_per_event(jnp.array([np.nan]), jnp.array([1]))
    with pytest.raises(ValueError, match="samples: expected finite values >= 0"):
        tpp.ks_statistic(jnp.array([0.1, -1.0]))
    with pytest.raises(ValueError, match="mask: expected"):
        tpp.ks_statistic(jnp.array([0.1, 1.0]), jnp.array([True]))
    with pytest.raises(TypeError, match="samples: expected"):
        tpp.ks_statistic(None)
