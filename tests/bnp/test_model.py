"""The structure-adaptive Bayesian MLP/CNN: ELBO, its gradient, masks, residual identity."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxcore.bnp import inference as inference_module
from jaxcore.bnp import model as model_module
from jaxcore.bnp.inference import FitResult, FitState, SVIStepResult, fit, make_svi_step
from jaxcore.bnp.networks import AdaptiveCNN, AdaptiveMLP


def _sample_noise(model, key, params, s):
    return params.sample_noise(key, s)


# one compilation per configuration: the model's arrays are traced arguments
_init = eqx.filter_jit(lambda model, key: model_module._rebuild(model, key))
_init_prior = eqx.filter_jit(lambda model: model.init_prior())


def _mlp(**kw):
    """The architecture as a shape template (no arrays computed); ``_init`` builds the network."""
    return eqx.filter_eval_shape(lambda k: AdaptiveMLP(6, 8, 3, 2, 3, key=k, **kw), jax.random.key(0))


def _set(model, where, value):
    return eqx.tree_at(where, model, value)


def _data(key, n=16, d=6, c=3):
    kx, ky = jax.random.split(key)
    return jax.random.normal(kx, (n, d)), jax.random.randint(ky, (n,), 0, c)


@pytest.mark.parametrize("tau", [0.05, pytest.param(0.3, marks=pytest.mark.slow)])
def test_elbo_and_gradient_finite(key, tau):
    model = _mlp(temperature=tau, prior_temperature=tau)
    x, y = _data(jax.random.key(1))

    @jax.jit
    def value_and_grad(gamma):
        params = _init(model, key)
        params = _set(params, lambda m: m.gamma, params.gamma + gamma)
        f = lambda p: p.elbo(jax.random.key(2), _init_prior(model), x, y, 1, 100.0, 4)[0]
        return jax.value_and_grad(f)(params)

    for gamma in (-30.0, 0.0, 30.0):
        v, g = value_and_grad(gamma)
        assert np.isfinite(v)
        assert all(np.all(np.isfinite(np.asarray(l))) for l in jax.tree.leaves(g))
        if gamma == 0.0:  # masks not saturated: the sticks and gamma get a gradient from the data term
            assert float(jnp.abs(g.gamma).max()) > 0 and float(jnp.abs(g.sticks.log_a).max()) > 0


@pytest.mark.slow
def test_cnn_elbo_and_gradient_finite(key):
    model = AdaptiveCNN(1, 4, 2, 2, 3, temperature=0.1, prior_temperature=0.1, key=key)
    params = model
    x = jax.random.uniform(jax.random.key(1), (5, 8, 8, 1))
    y = jnp.array([0, 1, 2, 0, 1])
    v, g = jax.jit(jax.value_and_grad(lambda p: p.elbo(key, _init_prior(model), x, y, 0, 50.0, 3)[0]))(params)
    assert np.isfinite(v) and all(np.all(np.isfinite(np.asarray(l))) for l in jax.tree.leaves(g))
    # flattened images are accepted too
    v2 = jax.jit(lambda p: p.elbo(key, _init_prior(model), x.reshape(5, 64), y, 0, 50.0, 3)[0])(params)
    np.testing.assert_allclose(v, v2, rtol=1e-6)
    assert params.hard_masks().shape == (2, 4)


def test_vmapped_samples_equal_average_of_single_samples(key):
    model = _mlp()
    params = _init(model, key)
    prior = _init_prior(model)
    x, y = _data(jax.random.key(3))
    noise = _sample_noise(model, jax.random.key(4), params, 3)
    ef = jax.jit(lambda nz: params.elbo_from_noise(prior, nz, x, y, 0, 50.0)[0])
    full = ef(noise)
    singles = [ef(jax.tree.map(lambda a: a[s:s + 1], noise)) for s in range(3)]
    np.testing.assert_allclose(full, np.mean(singles), rtol=1e-5)
    e = jax.jit(lambda p: p.elbo(jax.random.key(4), prior, x, y, 0, 50.0, 3)[0])(params)
    np.testing.assert_allclose(e, full, rtol=1e-6)


def test_elbo_gradient_matches_finite_differences(x64, key):
    model = _mlp()
    params = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), _init(model, key))
    params = _set(params, lambda m: m.gamma, params.gamma + 0.3)
    prior = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), _init_prior(model))
    x, y = _data(jax.random.key(5))
    x = x.astype(jnp.float64)
    noise = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), _sample_noise(model, jax.random.key(6), params, 2))
    # one compilation: the finite differences read the value of the same value-and-gradient function
    vg = jax.jit(jax.value_and_grad(lambda p: p.elbo_from_noise(prior, noise, x, y, 1, 40.0)[0]))
    f = lambda p: vg(p)[0]  # noqa: E731
    g = vg(params)[1]
    eps = 1e-6
    for path in [("w_in", "loc", (2, 3)), ("w_hidden", "log_scale", (1, 4, 5)), ("gamma", None, (0, 8, 7)),
                 ("w_head", "loc", (1, 8, 2)), ("w_head", "log_scale", (1, 3, 0))]:
        name, field, idx = path
        where = (lambda m: getattr(m, name)) if field is None else (lambda m: getattr(getattr(m, name), field))
        def bump(d):
            return f(_set(params, where, where(params).at[idx].add(d)))
        fd = (bump(eps) - bump(-eps)) / (2 * eps)
        got = where(g)[idx]
        np.testing.assert_allclose(got, fd, rtol=1e-5, atol=1e-9)


def test_zero_masks_make_hidden_layers_identity(key):
    model = _mlp()
    params = _init(model, key)
    x, _ = _data(jax.random.key(7))
    zero = jnp.zeros(model.mask_shape(), bool)
    out = params.predict_logits(zero, x, 1)
    w_in, w_head = params.w_in.loc, params.w_head.loc[1]
    h = jax.nn.relu(jnp.concatenate([x, jnp.ones((x.shape[0], 1))], 1) @ w_in)
    np.testing.assert_allclose(out, jnp.concatenate([h, jnp.ones((x.shape[0], 1))], 1) @ w_head, rtol=1e-6, atol=1e-6)
    # a single active mask entry in layer 2 changes the output only through that weight
    params = _set(params, lambda m: m.w_head.loc, params.w_head.loc + 1.0)
    one = zero.at[1, 0, 0].set(True)
    h1 = h.at[:, 0].add(jax.nn.relu(h[:, 0] * params.w_hidden.loc[1, 0, 0]))
    expect = jnp.concatenate([h1, jnp.ones((x.shape[0], 1))], 1) @ params.w_head.loc[0]
    np.testing.assert_allclose(params.predict_logits(one, x, 0), expect, rtol=1e-5, atol=1e-5)


def test_hard_masks_threshold_on_expected_pi(key):
    model = _mlp(alpha=3.0, beta=1.0)
    params = _init(model, key)
    hard = lambda p: p.hard_masks()  # noqa: E731
    # E[pi] = (3/4)^k: logits log(3) [k=1], log(0.5625/0.4375) [k=2], log(0.421875/0.578125) < 0 [k=3]
    masks = np.asarray(hard(params))
    assert masks[0].all() and masks[1].all() and not masks[2].any()
    params = _set(params, lambda m: m.gamma, params.gamma.at[2, 0, 0].set(1.0).at[0].set(-5.0))
    masks = np.asarray(hard(params))
    assert not masks[0].any() and masks[2].sum() == 1 and masks[2, 0, 0]
    assert _init(_mlp(adapt_structure=False), key).hard_masks().all()


def test_posterior_to_prior_keeps_untrained_heads(key):
    model = _mlp()
    params = jax.tree.map(lambda a: a + 1.0, _init(model, key))
    prior = _init_prior(model)
    new = params.posterior_to_prior(prior, 0)
    np.testing.assert_array_equal(new.w_in.loc, params.w_in.loc)
    np.testing.assert_array_equal(new.w_head.loc[0], params.w_head.loc[0])
    np.testing.assert_array_equal(new.w_head.loc[1], prior.w_head.loc[1])
    np.testing.assert_array_equal(new.gamma, params.gamma)


@pytest.mark.slow
def test_fit_increases_elbo(key):
    model = _mlp()
    x, y = _data(jax.random.key(8), n=64)
    y = (x[:, 0] > 0).astype(jnp.int32)
    params, _, losses = fit(key, _init(model, key), _init_prior(model), x, y, 64, 0,
                            num_steps=150, batch_size=32, num_samples=2, learning_rate=1e-2)
    assert float(losses[-20:].mean()) < float(losses[:20].mean())
    acc = jnp.mean(jnp.argmax(params.predict_logits(params.hard_masks(), x, 0), -1) == y)
    assert float(acc) > 0.8


def test_invalid_configuration_and_shapes(key):
    with pytest.raises(ValueError, match="temperature: expected"):
        _mlp(temperature=0.0)
    with pytest.raises(ValueError, match="alpha: expected"):
        _mlp(alpha=-1.0)
    with pytest.raises(ValueError, match="width: expected"):
        AdaptiveMLP(6, 0, 3, 2, 3, key=key)
    with pytest.raises(TypeError, match="truncation: expected"):
        AdaptiveMLP(6, 8, 2.0, 2, 3, key=key)
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        AdaptiveMLP(6, 8, 2, 2, 3, key=0)
    with pytest.raises(TypeError, match="key"):
        AdaptiveMLP(6, 8, 2, 2, 3)  # the key is required (keyword-only)
    model = _mlp()
    params = _init(model, key)
    with pytest.raises(ValueError, match=r"x: expected shape \[batch, 6\]"):
        params.elbo(key, _init_prior(model), jnp.ones((4, 5)), jnp.zeros(4, jnp.int32), 0, 10.0)
    with pytest.raises(ValueError, match=r"y: expected shape \[4\]"):
        params.elbo(key, _init_prior(model), jnp.ones((4, 6)), jnp.zeros(3, jnp.int32), 0, 10.0)
    with pytest.raises(ValueError, match="masks: expected shape"):
        params.predict_logits(jnp.ones((2, 9, 8), bool), jnp.ones((4, 6)), 0)
    with pytest.raises(TypeError, match="key: expected"):
        params.elbo(0, _init_prior(model), jnp.ones((4, 6)), jnp.zeros(4, jnp.int32), 0, 10.0)


def test_fit_rejects_bad_input(key):
    model = _mlp()
    p, pr = _init(model, key), _init_prior(model)
    x, y = jnp.ones((4, 6)), jnp.zeros(4, jnp.int32)
    with pytest.raises(ValueError, match="batch_size: expected"):
        fit(key, p, pr, x, y, 4, 0, num_steps=2, batch_size=0)
    with pytest.raises(TypeError, match="num_steps: expected"):
        fit(key, p, pr, x, y, 4, 0, num_steps=2.0, batch_size=2)
    with pytest.raises(ValueError, match="num_valid: expected"):
        fit(key, p, pr, x, y, 10, 0, num_steps=2, batch_size=2)
    with pytest.raises(ValueError, match="y: expected shape"):
        fit(key, p, pr, x, y[:3], 4, 0, num_steps=2, batch_size=2)
    with pytest.raises(TypeError, match="key: expected"):
        fit(0, p, pr, x, y, 4, 0, num_steps=2, batch_size=2)
    with pytest.raises(TypeError, match="progress: expected"):
        fit(key, p, pr, x, y, 4, 0, num_steps=2, batch_size=2, progress="yes")


def test_vcl_switch_equals_fixed_structure_model(key):
    """``adapt=False`` (traced) is VCL: the same ELBO as a model built without structure adaptation."""
    model = _mlp()
    fixed = _mlp(adapt_structure=False)
    params = _init(model, key)
    params = _set(params, lambda m: m.gamma, params.gamma - 1.0)  # masks well away from 1, so the switch matters
    prior = jax.tree.map(lambda a: a + 0.1, _init_prior(model))
    x, y = _data(jax.random.key(9))
    noise = _sample_noise(model, jax.random.key(10), params, 2)
    f = jax.jit(lambda p, on: p.elbo_from_noise(prior, noise, x, y, 0, 30.0, adapt=on)[0])
    plain = {k: noise[k] for k in ("eps_in", "eps_hidden", "eps_head")}
    as_fixed = model_module._rebuild(fixed, key)  # the same arrays in a model without structure adaptation
    as_fixed = jax.tree.unflatten(jax.tree.structure(as_fixed), jax.tree.leaves(params))
    want = jax.jit(lambda p, nz: p.elbo_from_noise(prior, nz, x, y, 0, 30.0)[0])(as_fixed, plain)
    np.testing.assert_allclose(f(params, jnp.asarray(False)), want, rtol=1e-6)
    assert abs(float(f(params, jnp.asarray(True)) - want)) > 1e-3
    assert params.hard_masks(jnp.asarray(False)).all()
    np.testing.assert_array_equal(params.hard_masks(jnp.asarray(True)), params.hard_masks())


def test_equal_temperature_mask_kl_matches_general_form():
    """The closed-form equal-temperature mask KL equals the log-density difference it simplifies."""
    from jaxcore.bnp.kl import _kl_relaxed_from_noise

    model = _mlp()
    rng = np.random.default_rng(0)  # inputs from NumPy: no eager JAX operations to compile
    shape = (2,) + model.mask_shape()
    gamma = (3.0 * rng.normal(size=model.mask_shape())).astype(np.float32)
    gamma0 = (3.0 * rng.normal(size=model.mask_shape())).astype(np.float32)
    u = rng.uniform(1e-6, 1 - 1e-6, size=shape).astype(np.float32)
    logistic = (np.log(u) - np.log1p(-u)).astype(np.float32)
    log_pi = np.log(np.array([[0.9, 0.5, 0.1], [0.7, 0.6, 0.05]], np.float32))

    @jax.jit  # one compilation instead of one per eager operation
    def forms(log_pi, gamma, gamma0, logistic, u):
        q = model.mask_logits(log_pi, jnp.broadcast_to(gamma, shape))
        p = model.mask_logits(log_pi, jnp.broadcast_to(gamma0, shape))
        general = jnp.sum(_kl_relaxed_from_noise(logistic, q, p, model.temperature, model.prior_temperature))
        closed = AdaptiveMLP._mask_kl_sum(model, log_pi, q, gamma, gamma0, logistic)
        # with the uniforms given (as the sampler passes them) instead of sigmoid(L)
        given = AdaptiveMLP._mask_kl_sum(model, log_pi, q, gamma, gamma0, logistic, u)
        return general, closed, given

    general, closed, given = forms(log_pi, gamma, gamma0, logistic, u)
    np.testing.assert_allclose(closed, general, rtol=2e-5)
    np.testing.assert_allclose(given, general, rtol=2e-5)


def test_fused_noise_is_open_interval_and_standard(key):
    from jaxcore.bnp.sampling import _normal_from_uniform, _uniform_open

    u = np.asarray(_uniform_open(key, (200_000,)))
    assert u.min() > 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 5 * np.sqrt(1 / 12 / u.size)
    z = np.asarray(_normal_from_uniform(jnp.asarray(u)))
    assert np.all(np.isfinite(z)) and abs(z.mean()) < 5 / np.sqrt(z.size) and abs(z.std() - 1) < 0.01
    # extreme grid points stay finite
    assert np.all(np.isfinite(np.asarray(_normal_from_uniform(jnp.array([2.0**-24, 1 - 2.0**-24], jnp.float32)))))


def test_normal_from_uniform_matches_float64_quantile_on_the_grid():
    """The float32 inverse normal CDF on the sampler's 23-bit grid (every 7th point and both ends) is
    within 1e-6 of scipy's float64 quantile and antisymmetric about u = 1/2; float64 input is exact."""
    from scipy import special

    from jaxcore.bnp.sampling import _normal_from_uniform

    k = np.concatenate([np.arange(0, 2**23, 7), [1, 2, 2**23 - 2, 2**23 - 1]]).astype(np.float64)
    u = (k + 0.5) * 2.0**-23
    want = np.sqrt(2.0) * special.erfinv(2.0 * u - 1.0)
    f = jax.jit(_normal_from_uniform)
    got = np.asarray(f(jnp.asarray(u, jnp.float32)), np.float64)
    assert np.max(np.abs(got - want)) < 1e-6
    mirror = np.asarray(f(jnp.asarray(1.0 - u, jnp.float32)), np.float64)
    np.testing.assert_array_equal(mirror, -got)
    with jax.enable_x64(True):
        np.testing.assert_allclose(np.asarray(f(jnp.asarray(u[:1000]))), want[:1000], rtol=1e-13, atol=1e-13)


def test_cnn_patch_convolution_equals_lax_convolution():
    h = np.random.default_rng(0).normal(size=(3, 8, 8, 5)).astype(np.float32)
    w = np.random.default_rng(1).normal(size=(9 * 5 + 1, 7)).astype(np.float32)

    @jax.jit  # one compilation for both
    def both(h, w):
        ref = jax.lax.conv_general_dilated(h, w[:-1].reshape(3, 3, 5, 7), (1, 1), "SAME",
                                           dimension_numbers=("NHWC", "HWIO", "NHWC")) + w[-1]
        return AdaptiveCNN._conv(h, w), ref

    got, ref = both(h, w)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_equal_temperature_mask_kl_stable_at_extreme_logits():
    """Far-apart posterior and prior logits (|gamma0 - gamma| up to 100): the one-log form stays finite
    and equals the float64 softplus form ``sum (gamma - gamma0) + 2 softplus(d - L) - 2 softplus(-L)``."""
    model = _mlp()
    rng = np.random.default_rng(1)
    shape = (3,) + model.mask_shape()
    gamma = rng.uniform(-50, 50, size=model.mask_shape()).astype(np.float32)
    gamma0 = rng.uniform(-50, 50, size=model.mask_shape()).astype(np.float32)
    u = ((rng.integers(0, 2**23, size=shape) + 0.5) * 2.0**-23).astype(np.float32)  # the sampler's grid
    logistic = np.log(u / (1 - u)).astype(np.float32)
    log_pi = np.log(np.full((3, model.truncation), 0.5, np.float32))
    got = jax.jit(lambda g, g0, L, u: model._mask_kl_sum(log_pi, None, g, g0, L, u))(gamma, gamma0, logistic, u)
    d = gamma0.astype(np.float64) - gamma
    L = logistic.astype(np.float64)
    want = 3 * np.sum(gamma - gamma0, dtype=np.float64) + 2 * np.sum(np.logaddexp(0, d - L) - np.logaddexp(0, -L))
    assert np.isfinite(float(got))
    np.testing.assert_allclose(float(got), want, rtol=1e-5)


def test_random_words_vmap_over_keys_equals_loop_and_threefry_blocks():
    """The noise words: pair i is threefry_2x32(key, (i, 0)); vmap over keys gives each key its own words
    (XLA's RngBitGenerator batching rule alone would use the first key for the whole batch)."""
    import jax.extend.random

    from jaxcore.bnp.sampling import _random_words

    keys = jax.random.split(jax.random.key(5), 3)
    n = 7
    loop = np.stack([np.asarray(jax.jit(lambda k: _random_words(k, n))(k)) for k in keys])
    batched = np.asarray(jax.jit(jax.vmap(lambda k: _random_words(k, n)))(keys))
    np.testing.assert_array_equal(batched, loop)
    assert len({tuple(r) for r in loop}) == 3
    kd = jax.random.key_data(keys[1])
    blocks = [np.asarray(jax.extend.random.threefry_2x32(kd, jnp.array([i, 0], jnp.uint32))) for i in range(4)]
    np.testing.assert_array_equal(loop[1], np.concatenate(blocks)[:n])
    # Random123's known-answer vector of Threefry-2x32-20 at key (0, 0), counter (0, 0)
    zero = jax.random.wrap_key_data(jnp.zeros((2,), jnp.uint32))
    np.testing.assert_array_equal(np.asarray(_random_words(zero, 2)), np.array([0x6B200159, 0x99BA4EFE], np.uint32))
    # the words XLA's RngBitGenerator gives with its Threefry algorithm (the generator the words came from before)
    state = jnp.concatenate([kd.astype(jnp.uint32), jnp.zeros((2,), jnp.uint32)])
    _, xla = jax.lax.rng_bit_generator(state, (1001,), jnp.uint32, algorithm=jax.lax.RandomAlgorithm.RNG_THREE_FRY)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda k: _random_words(k, 1001))(keys[1])), np.asarray(xla))


def test_svi_noise_laws_and_independence():
    """The draws of an ELBO estimate: the Gaussians are N(0, 1), the mask noise is Logistic(0, 1) =
    logit(u) with u ~ U(0, 1) on the open interval, and draws of different kinds and samples are
    uncorrelated (KS tests, moments, lag correlations; 64 samples of a width-16 network, about 35k
    draws of each kind)."""
    from scipy import stats

    model = AdaptiveMLP(3, 16, 2, 1, 2, key=jax.random.key(0))
    noise = jax.tree.map(np.asarray, model.sample_noise(jax.random.key(3), 64))
    gauss = np.concatenate([noise[n].reshape(-1) for n in ("eps_in", "eps_hidden", "eps_head")]).astype(np.float64)
    n = gauss.size
    assert stats.kstest(gauss, "norm").pvalue > 1e-3
    assert abs(gauss.mean()) < 5 / np.sqrt(n) and abs(gauss.std() - 1) < 5 / np.sqrt(2 * n)
    assert abs(stats.kurtosis(gauss)) < 5 * np.sqrt(24 / n)
    u, L = noise["logistic_u"].astype(np.float64), noise["logistic"].astype(np.float64)
    assert u.min() > 0 and u.max() < 1
    assert stats.kstest(u.reshape(-1), "uniform").pvalue > 1e-3
    assert stats.kstest(L.reshape(-1), "logistic").pvalue > 1e-3
    np.testing.assert_allclose(L, np.log(u / (1 - u)), rtol=1e-5, atol=1e-6)
    h = noise["eps_hidden"].astype(np.float64)
    bound = 5 / np.sqrt(h.size)
    assert abs(np.corrcoef(h.reshape(-1), L.reshape(-1))[0, 1]) < bound  # weight and mask noise of one weight
    assert abs(np.corrcoef(h[:-1].reshape(-1), h[1:].reshape(-1))[0, 1]) < bound  # consecutive samples
    assert len(np.unique(noise["eps_hidden"])) > 0.99 * h.size
    g1 = noise["g1"].astype(np.float64)  # Gamma(a) with a = alpha = 2 at initialisation
    assert abs(g1.mean() - 2.0) < 5 * np.sqrt(2.0 / g1.size)


# ----------------------------------------------------------------------------- public step, fit, jit caches


def _fixed_model(key):
    """A small network without structure adaptation: the cheapest program to compile."""
    return AdaptiveMLP(3, 4, 1, 2, 2, key=key, adapt_structure=False)


def test_make_svi_step_is_value_and_grad_of_elbo_then_adam(key):
    """The public step equals -ELBO (the public method, same key), its gradient and optax's Adam update."""
    model = _fixed_model(key)
    prior = jax.tree.map(lambda a: a + 0.1, model.init_prior())
    x, y = _data(jax.random.key(11), n=8, d=3, c=2)
    opt = optax.adam(1e-2)
    step = make_svi_step(opt, num_samples=2)
    k = jax.random.key(12)
    out = step(k, FitState(model, opt.init(model)), prior, x, y, 1, 40.0)
    assert isinstance(out, SVIStepResult) and isinstance(out.state, FitState)
    np.testing.assert_allclose(out.loss, -model.elbo(k, prior, x, y, 1, 40.0, num_samples=2)[0], rtol=1e-6)
    grads = jax.jit(jax.grad(lambda m: -m.elbo(k, prior, x, y, 1, 40.0, num_samples=2)[0]))(model)
    for g, h in zip(jax.tree.leaves(out.grads), jax.tree.leaves(grads)):
        np.testing.assert_allclose(g, h, rtol=1e-5, atol=1e-8)
    updates, _ = opt.update(grads, opt.init(model), model)
    for u, v in zip(jax.tree.leaves(out.state.params), jax.tree.leaves(optax.apply_updates(model, updates))):
        np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-7)
    # a second call with the same shapes reuses the compiled program
    size = inference_module._svi_step_jit._cached._cache_size()
    step(jax.random.key(13), out.state, prior, x + 1.0, y, 1, 40.0)
    assert inference_module._svi_step_jit._cached._cache_size() == size
    with pytest.raises(TypeError, match="key: expected"):
        step(0, out.state, prior, x, y, 1, 40.0)
    with pytest.raises(ValueError, match="num_samples: expected"):
        make_svi_step(opt, num_samples=0)


def test_fit_result_history_progress_and_no_recompile(key):
    model = _fixed_model(key)
    prior = model.init_prior()
    x, y = _data(jax.random.key(14), n=16, d=3, c=2)
    res = fit(jax.random.key(15), model, prior, x, y, 16, 0, num_steps=4, batch_size=4, num_samples=1)
    assert isinstance(res, FitResult) and res.losses.shape == (4,) and np.all(np.isfinite(res.losses))
    assert jax.tree.structure(res.params) == jax.tree.structure(model)
    size = inference_module._fit_jit._cached._cache_size()
    # other key, task, number of rows, learning rate and KL weight: the same compiled program
    again = fit(jax.random.key(16), model, prior, x, y, 12, 1, num_steps=4, batch_size=4, num_samples=1,
                learning_rate=5e-2, kl_weight=0.5)
    assert inference_module._fit_jit._cached._cache_size() == size
    assert not np.allclose(again.losses, res.losses)
    seen = []
    reported = fit(jax.random.key(15), model, prior, x, y, 16, 0, num_steps=4, batch_size=4, num_samples=1,
                   progress=lambda step, metrics: seen.append((step, metrics["loss"])))
    jax.block_until_ready(reported.losses)
    assert seen and seen[-1][0] == 4
    np.testing.assert_allclose(reported.losses, res.losses, rtol=1e-6)  # reporting does not change the fit
    np.testing.assert_allclose(seen[-1][1], res.losses[-1], rtol=1e-6)


def test_model_methods_do_not_recompile(key):
    model = _fixed_model(key)
    prior = model.init_prior()
    x, y = _data(jax.random.key(17), n=8, d=3, c=2)
    model.elbo(jax.random.key(1), prior, x, y, 0, 10.0)
    model.predict_logits(model.hard_masks(), x, 0)
    sizes = [p._cached._cache_size() for p in (model_module._elbo_jit, model_module._predict_logits_jit,
                                               model_module._hard_masks_jit)]
    other = jax.tree.map(lambda a: a + 0.5, model)
    other.elbo(jax.random.key(2), prior, x + 1.0, y, 0, 10.0)
    other.predict_logits(other.hard_masks(), x + 1.0, 0)
    assert [p._cached._cache_size() for p in (model_module._elbo_jit, model_module._predict_logits_jit,
                                              model_module._hard_masks_jit)] == sizes


def test_elbo_other_task_and_data_size_reuse_the_program(key):
    model = _fixed_model(key)
    prior = model.init_prior()
    x, y = _data(jax.random.key(18), n=8, d=3, c=2)
    a = model.elbo(jax.random.key(1), prior, x, y, 0, 10.0)[0]
    size = model_module._elbo_jit._cached._cache_size()
    b = model.elbo(jax.random.key(1), prior, x, y, 1, 20.0, kl_weight=0.5)[0]
    assert model_module._elbo_jit._cached._cache_size() == size and float(a) != float(b)


def test_networks_share_one_abstract_base_and_are_final():
    """AdaptiveCNN no longer subclasses AdaptiveMLP: both are final implementations of AbstractAdaptiveNetwork,
    and a network missing part of its architecture cannot be built."""
    import dataclasses

    from jaxcore.bnp import AbstractAdaptiveNetwork

    for cls in (AdaptiveMLP, AdaptiveCNN):
        assert cls.__bases__ == (AbstractAdaptiveNetwork,) and not cls.__subclasses__()
    assert not issubclass(AdaptiveCNN, AdaptiveMLP)
    # the variational parameters first, in the layout flattened optimiser states were saved in
    names = [f.name for f in dataclasses.fields(AdaptiveMLP)]
    assert names[:5] == ["gamma", "sticks", "w_head", "w_hidden", "w_in"]
    assert names == [f.name for f in dataclasses.fields(AdaptiveCNN)]

    class NoHead(AbstractAdaptiveNetwork):  # implements nothing: abstract variables and methods missing
        pass

    with pytest.raises(TypeError):
        NoHead()
