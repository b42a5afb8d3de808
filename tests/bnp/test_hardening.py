"""Regression tests of issue 15 (hardening) for the bnp family: each reproducer, then its class."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import bnp

from .test_kl import _kl_beta_mpmath

EXTREME = [(1e6, 1e6, 1.0, 1.0), (1e30, 1e30, 1.0, 1.0), (1e-30, 1.0, 1.0, 1.0), (1.0, 1.0, 1e-30, 1e-30),
           (1e30, 1e30, 1e-30, 1e-30), (1e-30, 2e-30, 1.0, 1.0), (30.0, 40.0, 1.0, 1.0), (12.0, 9.5, 11.0, 3.0),
           (1e6, 1e6, 1e6 + 10.0, 1e6)]


def test_kl_beta_large_concentrations_float32():
    """Issue 15: kl_beta(1e6, 1e6, 1, 1) was 8.0 in float32 (6.53 in float64) and negative at 1e30."""
    np.testing.assert_allclose(float(bnp.kl_beta(1e6, 1e6, 1.0, 1.0)), 6.528537766617507, rtol=1e-5)
    kl30 = float(bnp.kl_beta(1e30, 1e30, 1.0, 1.0))
    assert kl30 > 0
    np.testing.assert_allclose(kl30, _kl_beta_mpmath(1e30, 1e30, 1.0, 1.0), rtol=1e-5)


@pytest.mark.parametrize("a1,b1,a2,b2", EXTREME)
def test_kl_beta_float32_and_float64_against_mpmath_from_1e_minus30_to_1e30(a1, b1, a2, b2):
    args32 = [np.float32(v) for v in (a1, b1, a2, b2)]
    ref = _kl_beta_mpmath(*args32)
    kl32 = float(bnp.kl_beta(*args32))
    assert kl32 >= 0.0 and np.isfinite(kl32)
    np.testing.assert_allclose(kl32, ref, rtol=2e-5, atol=5e-6)
    with jax.enable_x64(True):
        kl64 = float(bnp.kl_beta(*[np.float64(v) for v in args32]))
    np.testing.assert_allclose(kl64, ref, rtol=1e-10, atol=1e-12)


def test_kl_beta_equal_arguments_zero_and_never_negative_at_extremes():
    for v in (1e-30, 1e-3, 1.0, 7.0, 1e6, 1e30):
        assert float(bnp.kl_beta(v, 2 * v, v, 2 * v)) == 0.0
    grid = jnp.asarray([1e-30, 1e-10, 0.3, 1.0, 9.99, 10.0, 1e3, 1e10, 1e30], jnp.float32)
    a1, b1, a2, b2 = jnp.meshgrid(grid, grid, grid, grid, indexing="ij")
    kl = np.asarray(bnp.kl_beta(a1, b1, a2, b2))
    assert not np.isnan(kl).any() and (kl >= 0).all()


def test_kl_beta_gradient_matches_textbook_form(x64):
    from jaxcore.bnp.kl import _kl_beta_textbook

    for args in [(1.5, 2.0, 3.0, 4.0), (0.3, 12.0, 11.0, 0.7), (25.0, 40.0, 2.0, 3.0)]:
        g = jax.grad(lambda *a: bnp.kl_beta(*a), argnums=(0, 1, 2, 3))(*args)
        g0 = jax.grad(_kl_beta_textbook, argnums=(0, 1, 2, 3))(*args)
        np.testing.assert_allclose(np.array(g), np.array(g0), rtol=1e-7, atol=1e-9)


def test_kl_normal_extreme_scales_and_half_precision():
    assert np.isclose(float(bnp.kl_normal(0.0, 1e-30, 0.0, 1e30)), 0.5 * (-1.0 - 2.0 * np.log(1e-60)), rtol=1e-5)
    assert float(bnp.kl_normal(1e30, 1e30, 1e30, 1e30)) == 0.0
    assert float(bnp.kl_normal(0.0, 1.001, 0.0, 1.0)) > 0.0
    for dt in (jnp.float16, jnp.bfloat16):
        out = bnp.kl_normal(jnp.asarray(0.0, dt), jnp.asarray(2.0, dt), jnp.asarray(0.0, dt), jnp.asarray(1.0, dt))
        assert out.dtype == dt and np.isclose(float(out), 1.5 - np.log(2.0), rtol=1e-2)
        out = bnp.kl_beta(*(jnp.asarray(v, dt) for v in (2.0, 1.0, 1.0, 1.0)))
        assert out.dtype == dt and np.isclose(float(out), np.log(2.0) - 0.5, rtol=1e-2)
    assert bnp.kl_beta(2, 1, 1, 1).dtype == jnp.float32  # integers become the default float


def test_kl_normal_negative_scale_refused_on_host_and_under_jit():
    """Issue 15: kl_normal(0., -1., 0., 1.) was 0."""
    with pytest.raises(ValueError, match=r"^scale1: expected finite values > 0, got -1.0"):
        bnp.kl_normal(0.0, -1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match=r"^scale2: expected finite values > 0, got nan"):
        bnp.kl_normal(0.0, 1.0, 0.0, float("nan"))
    with pytest.raises(ValueError, match=r"^loc2: expected finite values"):
        bnp.kl_normal(0.0, 1.0, float("inf"), 1.0)
    with pytest.raises(Exception, match="scale1: expected finite values > 0"):
        jax.block_until_ready(eqx.filter_jit(bnp.kl_normal)(0.0, jnp.float32(-1.0), 0.0, 1.0))
    with pytest.raises(Exception, match="a2: expected finite values > 0"):
        jax.block_until_ready(eqx.filter_jit(bnp.kl_beta)(1.0, 1.0, jnp.float32(-1.0), 1.0))
    assert float(jax.jit(bnp.kl_normal)(0.0, 1.0, 1.0, 1.0)) == 0.5


def test_kl_refuses_none_and_mismatched_shapes():
    with pytest.raises(TypeError, match=r"^a1: expected a real number or array, got None"):
        bnp.kl_beta(None, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"^a1, b1, a2, b2: expected broadcastable shapes"):
        bnp.kl_beta(jnp.ones(3), jnp.ones(4), 1.0, 1.0)
    with pytest.raises(ValueError, match=r"loc1, scale1, loc2, scale2: expected broadcastable shapes"):
        bnp.kl_normal(jnp.zeros(2), jnp.ones(3), 0.0, 1.0)


def test_stick_breaking_log_prob_at_boundary_sticks():
    """Issue 15: StickBreakingBetaProcess(2.5, 1, 3).log_prob([1, .6, .3]) was nan (0 * log 0)."""
    d = bnp.StickBreakingBetaProcess(2.5, 1.0, truncation=3)
    lp = float(d.log_prob(jnp.array([1.0, 0.6, 0.3])))
    nu = np.array([1.0, 0.6, 0.5])
    expect = np.sum(1.5 * np.log(nu) + np.log(2.5)) - np.log(1.0) - np.log(0.6)
    np.testing.assert_allclose(lp, expect, rtol=1e-5)
    d1 = bnp.StickBreakingBetaProcess(3.0, 1.0, truncation=2)  # b = 1: nu = 1 (pi_2 = pi_1) is finite
    assert np.isfinite(float(d1.log_prob(jnp.array([0.5, 0.5]))))
    with pytest.raises(ValueError, match=r"^value: expected values in \[0, 1\]"):
        d.log_prob(jnp.array([1.2, 0.6, 0.3]))
    with pytest.raises(ValueError, match=r"^value: expected shape \[\.\.\., 3\]"):
        d.log_prob(jnp.array([0.5, 0.3]))


def test_bernoulli_process_logits_nan_gamma_refused():
    """Issue 15: bernoulli_process_logits(gamma=nan) ran."""
    with pytest.raises(ValueError, match=r"^gamma: expected finite values, got nan"):
        bnp.bernoulli_process_logits(jnp.log(0.5), float("nan"))
    with pytest.raises(ValueError, match=r"^gamma: expected finite values"):
        bnp.BernoulliProcessMask(jnp.log(0.5), jnp.array([0.0, jnp.inf]))
    with pytest.raises(ValueError, match=r"^log_pi: expected finite values"):  # NaN: refused before the range
        bnp.bernoulli_process_logits(float("nan"), 0.0)
    with pytest.raises(ValueError, match=r"^temperature: expected finite values > 0, got inf"):
        bnp.LogitRelaxedBernoulli(float("inf"), 0.0)


def _model():
    return bnp.AdaptiveMLP(3, 4, 2, 2, 2, key=jax.random.key(0))


def test_fit_refuses_negative_learning_rate_bad_labels_and_tasks():
    """Issue 15: fit(learning_rate=-1), labels outside the class range and task indices past the heads ran."""
    m = _model()
    x, y = jnp.ones((4, 3)), jnp.array([0, 1, 0, 1])
    kw = dict(num_steps=2, batch_size=2)
    with pytest.raises(ValueError, match=r"^learning_rate: expected a finite number > 0, got -1"):
        bnp.fit(jax.random.key(1), m, m.init_prior(), x, y, 4, 0, learning_rate=-1, **kw)
    with pytest.raises(ValueError, match=r"^learning_rate: expected a finite number > 0, got nan"):
        bnp.fit(jax.random.key(1), m, m.init_prior(), x, y, 4, 0, learning_rate=float("nan"), **kw)
    with pytest.raises(ValueError, match=r"^y: expected labels in \[0, 2\) \(num_classes\), got 2"):
        bnp.fit(jax.random.key(1), m, m.init_prior(), x, jnp.array([0, 1, 2, 1]), 4, 0, **kw)
    with pytest.raises(ValueError, match=r"^y: expected labels in \[0, 2\)"):
        bnp.fit(jax.random.key(1), m, m.init_prior(), x, jnp.array([0, -1, 0, 1]), 4, 0, **kw)
    with pytest.raises(TypeError, match=r"^y: expected integer labels"):
        bnp.fit(jax.random.key(1), m, m.init_prior(), x, jnp.zeros(4), 4, 0, **kw)
    with pytest.raises(ValueError, match=r"^task: expected an int in \[0, 1\], got 2"):
        bnp.fit(jax.random.key(1), m, m.init_prior(), x, y, 4, 2, **kw)
    with pytest.raises(ValueError, match=r"^task: expected an int in \[0, 1\], got -1"):
        bnp.fit(jax.random.key(1), m, m.init_prior(), x, y, 4, -1, **kw)
    # padding rows past num_valid may hold any label
    res = bnp.fit(jax.random.key(1), m, m.init_prior(), x, jnp.array([0, 1, 0, 7]), 3, 1, **kw)
    assert np.isfinite(np.asarray(res.losses)).all()


def test_fit_traced_learning_rate_and_task_checked_once_at_run_time():
    m = _model()
    x, y = jnp.ones((4, 3)), jnp.array([0, 1, 0, 1])
    run = eqx.filter_jit(lambda lr, t: bnp.fit(jax.random.key(1), m, m.init_prior(), x, y, 4, t,
                                               num_steps=2, batch_size=2, learning_rate=lr).losses)
    assert np.isfinite(np.asarray(run(jnp.float32(1e-2), jnp.int32(1)))).all()
    with pytest.raises(Exception, match="learning_rate: expected a finite number > 0"):
        jax.block_until_ready(run(jnp.float32(-1.0), jnp.int32(0)))
    with pytest.raises(Exception, match="task: expected an int in"):
        jax.block_until_ready(run(jnp.float32(1e-2), jnp.int32(5)))


def test_model_methods_refuse_out_of_range_task_and_labels():
    m = _model()
    x, y = jnp.ones((4, 3)), jnp.array([0, 1, 0, 1])
    with pytest.raises(ValueError, match=r"^task: expected an int in \[0, 1\]"):
        m.predict_logits(m.hard_masks(), x, 2)
    with pytest.raises(ValueError, match=r"^task: expected an int in \[0, 1\]"):
        m.elbo(jax.random.key(0), m.init_prior(), x, y, 3, 10.0)
    with pytest.raises(ValueError, match=r"^y: expected labels in \[0, 2\)"):
        m.elbo(jax.random.key(0), m.init_prior(), x, y + 5, 0, 10.0)
    import optax

    opt = optax.adam(1e-2)
    step = bnp.make_svi_step(opt, 1)
    with pytest.raises(ValueError, match=r"^y: expected labels in \[0, 2\)"):
        step(jax.random.key(0), bnp.FitState(m, opt.init(m)), m.init_prior(), x, y + 2, 0, 4.0)
    with pytest.raises(ValueError, match=r"^task: expected an int in \[0, 1\]"):
        step(jax.random.key(0), bnp.FitState(m, opt.init(m)), m.init_prior(), x, y, 2, 4.0)


def test_continual_config_refuses_bad_budget():
    """Issue 15: ContinualConfig(num_steps=-1) ran."""
    with pytest.raises(ValueError, match=r"^config.num_steps: expected an int >= 1, got -1"):
        bnp.ContinualConfig(num_steps=-1)
    with pytest.raises(ValueError, match=r"^config.learning_rate: expected a finite number > 0"):
        bnp.ContinualConfig(learning_rate=-1.0)
    with pytest.raises(ValueError, match=r"^config.ewc_lambda: expected a finite number >= 0"):
        bnp.ContinualConfig(ewc_lambda=float("nan"))
    with pytest.raises(TypeError, match=r"^config.batch_size: expected an int"):
        bnp.ContinualConfig(batch_size=2.5)
    assert bnp.ContinualConfig(num_steps=10)._fields[0] == "num_steps"


def _tasks(num_tasks=2, label=0):
    from types import SimpleNamespace

    x = np.ones((num_tasks, 8, 3), np.float32)
    y = np.full((num_tasks, 8), label, np.int32)
    n = np.full((num_tasks,), 8, np.int32)
    return SimpleNamespace(x_train=x, y_train=y, n_train=n, x_test=x, y_test=y, n_test=n)


def test_run_continual_single_key_more_tasks_than_heads_and_labels():
    """Issue 15: a single key gave a raw error; task indices past the heads were clamped."""
    tmpl = eqx.filter_eval_shape(bnp.AdaptiveMLP, 3, 4, 2, 2, 2, key=jax.random.key(0))
    cfg = bnp.ContinualConfig(num_steps=2, batch_size=2, num_fisher_samples=2)
    with pytest.raises(TypeError, match=r"^keys: expected a 1-d batch of PRNG keys \[seeds\].*got a single key"):
        bnp.run_continual(jax.random.key(0), "finetune", tmpl, _tasks(), cfg)
    with pytest.raises(TypeError, match=r"^keys: expected a 1-d batch of PRNG keys"):
        bnp.run_continual(jax.random.split(jax.random.key(0), (2, 2)), "finetune", tmpl, _tasks(), cfg)
    with pytest.raises(TypeError, match=r"^keys: expected"):
        bnp.run_continual(3, "finetune", tmpl, _tasks(), cfg)
    keys = jax.random.split(jax.random.key(0), 2)
    with pytest.raises(ValueError, match=r"^tasks: expected at most model.num_heads = 2 tasks"):
        bnp.run_continual(keys, "finetune", tmpl, _tasks(3), cfg)
    # one head is shared by every task (Permuted MNIST's domain-incremental setting): three tasks run
    one = eqx.filter_eval_shape(bnp.AdaptiveMLP, 3, 4, 2, 1, 2, key=jax.random.key(0))
    r = bnp.run_continual(keys[:1], "finetune", one, _tasks(3), cfg)
    acc = np.asarray(r.accuracy)[0]  # [after task, on task]: tasks not yet seen are NaN
    low = np.tril(np.ones((3, 3), bool))
    assert acc.shape == (3, 3) and np.all(np.isfinite(acc[low])) and np.all(np.isnan(acc[~low]))
    with pytest.raises(ValueError, match=r"^tasks.y_train\[0\]: expected labels in \[0, 2\)"):
        bnp.run_continual(keys, "finetune", tmpl, _tasks(2, label=2), cfg)
    with pytest.raises(TypeError, match=r"^config: expected a ContinualConfig"):
        bnp.run_continual(keys, "finetune", tmpl, _tasks(), {"num_steps": 2})


def test_gamma_rsample_shape_and_half_precision():
    with pytest.raises(ValueError, match=r"^shape: expected an int >= 0, got -1"):
        bnp.gamma_rsample(jax.random.key(0), 2.0, (-1,))
    with pytest.raises(ValueError, match=r"^shape: expected a shape that a's shape \(3,\) broadcasts to"):
        bnp.gamma_rsample(jax.random.key(0), jnp.ones(3), (4,))
    with pytest.raises(TypeError, match=r"^shape: expected a tuple of ints"):
        bnp.gamma_rsample(jax.random.key(0), 2.0, 3)
    x = bnp.gamma_rsample(jax.random.key(0), jnp.asarray(2.0, jnp.float16), (4000,))
    assert x.dtype == jnp.float16 and abs(float(x.astype(jnp.float32).mean()) - 2.0) < 0.1


def test_metrics_refuse_none_and_scalar_sticks():
    with pytest.raises(TypeError, match=r"^acc: expected an array, got None"):
        bnp.average_accuracy(None)
    with pytest.raises(TypeError, match=r"^masks: expected an array, got None"):
        bnp.mask_union(None)
    with pytest.raises(ValueError, match=r"^nu: expected an array \[\.\.\., K\]"):
        bnp.stick_breaking_log_weights(0.5)


# --- deep-fuzz findings (issue 15, second round) -------------------------------------------------------


def test_bernoulli_process_logits_converts_ints_explicitly_and_refuses_infinite_log_pi():
    import jax.numpy as jnp

    out = bnp.bernoulli_process_logits(np.array([-2, -1], np.int32), np.int32(1))
    ref = bnp.bernoulli_process_logits(np.array([-2.0, -1.0], np.float32), 1.0)
    assert out.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(out), np.asarray(ref), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(out), np.array([-2.0, -1.0]) - np.log1p(-np.exp([-2.0, -1.0])) + 1.0,
                               rtol=1e-5)
    for bad in (-np.inf, np.nan):
        with pytest.raises(ValueError, match="^log_pi: expected finite values"):
            bnp.bernoulli_process_logits(np.array([bad, -1.0]), 0.0)
        with pytest.raises(ValueError, match="^log_pi: expected finite values"):
            bnp.BernoulliProcessMask(np.array([bad, -1.0]), 0.0)
    with pytest.raises(ValueError, match=r"^log_pi: expected values in \(-inf, 0\]"):
        bnp.bernoulli_process_logits(np.array([0.5]), 0.0)


def test_bernoulli_process_logits_checks_a_traced_log_pi_at_run_time():
    import equinox as eqx
    import jax

    f = jax.jit(bnp.bernoulli_process_logits)
    for bad in (0.5, -np.inf):
        with pytest.raises((eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError), match="log_pi: expected"):
            jax.block_until_ready(f(np.array([bad, -1.0], np.float32), np.float32(0.0)))


def test_relaxed_bernoulli_accepts_a_finite_bfloat16_logit_of_1e30():
    import jax.numpy as jnp

    d = bnp.RelaxedBernoulli(0.3, jnp.asarray(1e30, jnp.bfloat16))
    assert np.isfinite(float(d.logits))
    assert np.isfinite(np.asarray(d.log_prob(np.full((3,), 0.5, np.float32)), np.float64)).all()


def test_elbo_and_svi_step_refuse_nan_inputs_empty_batches_and_bad_scalars():
    # issue 48 item 19: elbo with NaN x / an empty batch / num_data=0 gave NaN; make_svi_step(kl_weight=-1) ran.
    import optax

    m = _model()
    k, prior = jax.random.key(0), m.init_prior()
    x, y = jnp.ones((4, 3)), jnp.array([0, 1, 0, 1])
    value, _ = m.elbo(k, prior, x, y, 0, 10.0)
    assert bool(jnp.isfinite(value))
    noise = m.sample_noise(k, 1)
    np.testing.assert_allclose(m.elbo_from_noise(prior, noise, x, y, 0, 10.0)[0],
                               m.elbo_from_noise(prior, noise, x, y, 0, 10.0)[0])
    for args, match in (((x.at[1, 2].set(jnp.nan), y, 0, 10.0), "^x: expected finite values"),
                        ((x[:0], y[:0], 0, 10.0), "^x: expected at least one row"),
                        ((x, y, 0, 0.0), "^num_data: expected a finite number > 0"),
                        ((x, y, 0, float("nan")), "^num_data: expected a finite number > 0")):
        with pytest.raises(ValueError, match=match):
            m.elbo(k, prior, *args)
        with pytest.raises(ValueError, match=match):
            m.elbo_from_noise(prior, noise, *args)
    with pytest.raises(ValueError, match="^kl_weight: expected a finite number >= 0"):
        m.elbo(k, prior, x, y, 0, 10.0, kl_weight=-1.0)
    opt = optax.adam(1e-2)
    with pytest.raises(ValueError, match="^kl_weight: expected a finite number >= 0, got -1.0"):
        bnp.make_svi_step(opt, 1, kl_weight=-1.0)
    step = bnp.make_svi_step(opt, 1)
    state = bnp.FitState(m, opt.init(m))
    assert bool(jnp.isfinite(step(k, state, prior, x, y, 0, 4.0).loss))
    with pytest.raises(ValueError, match="^num_data: expected a finite number > 0"):
        step(k, state, prior, x, y, 0, 0)
    with pytest.raises(ValueError, match="^x: expected finite values"):
        step(k, state, prior, x.at[0, 0].set(jnp.inf), y, 0, 4.0)
