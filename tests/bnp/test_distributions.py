"""Oracle tests of the beta/Bernoulli-process distributions."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd
import pytest
from scipy import stats

from jaxcore.bnp.distributions import BernoulliProcessMask, LogitRelaxedBernoulli, RelaxedBernoulli, bernoulli_process_logits
from jaxcore.bnp.processes import IndianBuffetProcess, StickBreakingBetaProcess, ibp_sample, stick_breaking_log_weights


# one compilation for every (a, b): the concentrations are traced arguments
_sticks_40k = jax.jit(lambda a, b: StickBreakingBetaProcess(a, b, 6).sample(jax.random.key(1), (40_000,)))


@pytest.mark.parametrize("a,b", [(2.0, 1.0), (0.7, 1.5), (5.0, 2.0)])
def test_stick_breaking_mean_matches_closed_form(a, b):
    k, n = 6, 40_000
    d = StickBreakingBetaProcess(a, b, k)
    pi = np.asarray(_sticks_40k(jnp.float32(a), jnp.float32(b)))
    exact = (a / (a + b)) ** np.arange(1, k + 1)
    se = pi.std(0) / np.sqrt(n)
    assert np.all(np.abs(pi.mean(0) - exact) < 4 * se + 1e-7)
    np.testing.assert_allclose(d.mean, exact, rtol=1e-6)
    assert np.all(np.diff(pi, axis=-1) <= 0)  # non-increasing


def test_stick_breaking_log_prob_change_of_variables(x64):
    a, b = 2.5, 1.5
    nu = jnp.array([[0.3, 0.9, 0.5], [0.95, 0.2, 0.01]])

    @jax.jit  # one compilation instead of one per eager float64 op
    def both(nu):
        pi = jnp.cumprod(nu, -1)
        beta = nd.Beta(a, b)
        expected = beta.log_prob(nu).sum(-1) - jnp.log(pi[:, 0]) - jnp.log(pi[:, 1])
        # K = 1 is a Beta
        return (StickBreakingBetaProcess(a, b, 3).log_prob(pi), expected,
                StickBreakingBetaProcess(a, b, 1).log_prob(nu[:, :1]), beta.log_prob(nu[:, 0]))

    got, expected, got1, expected1 = both(nu)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    np.testing.assert_allclose(got1, expected1, rtol=1e-12)


def test_stick_breaking_density_integrates_to_one(x64):
    # K = 2: integrate p(pi1, pi2) over 0 < pi2 < pi1 < 1 on a midpoint grid
    d = StickBreakingBetaProcess(2.0, 1.5, 2)
    n = 600
    g = (np.arange(n) + 0.5) / n
    p1, p2 = np.meshgrid(g, g, indexing="ij")
    inside = p2 < p1
    lp = d.log_prob(jnp.stack([p1, np.where(inside, p2, 0.5 * p1)], -1))
    total = np.sum(np.where(inside, np.exp(np.asarray(lp)), 0.0)) / n**2
    assert abs(total - 1.0) < 5e-3


def test_stick_breaking_log_weights_no_underflow():
    nu = jnp.full((400,), 0.1, jnp.float32)
    lw = stick_breaking_log_weights(nu)
    assert np.all(np.isfinite(lw))
    np.testing.assert_allclose(lw[-1], 400 * np.log(0.1), rtol=1e-5)


@pytest.mark.parametrize("alpha,n", [(2.0, 10), (5.0, 30)])
def test_ibp_expected_features_is_alpha_harmonic(alpha, n):
    draws = 4000
    keys = jax.random.split(jax.random.key(3), draws)
    z, kplus, overflow = jax.vmap(lambda k: ibp_sample(k, alpha, n, 128))(keys)
    assert int(overflow.sum()) == 0
    h_n = np.sum(1.0 / np.arange(1, n + 1))
    kplus = np.asarray(kplus, np.float64)
    se = kplus.std() / np.sqrt(draws)
    assert abs(kplus.mean() - alpha * h_n) < 4 * se
    # every customer tastes Poisson(alpha) dishes in total
    rows = np.asarray(z.sum(-1), np.float64)
    assert abs(rows.mean() - alpha) < 4 * rows.std() / np.sqrt(rows.size)
    # K+ counts exactly the non-empty columns, all at the front
    nonempty = np.asarray(z.any(1))
    np.testing.assert_array_equal(nonempty.sum(-1), kplus)
    assert np.all(nonempty[:, 1:] <= nonempty[:, :-1])


def _all_left_ordered(n, f):
    for bits in itertools.product([0, 1], repeat=n * f):
        yield np.array(bits, bool).reshape(n, f)


def test_ibp_log_prob_brute_force_mass(x64):
    # sum over every 2 x 4 binary matrix = P(K+ <= 4) with K+ ~ Poisson(alpha * H_2)
    alpha, n, f = 1.3, 2, 4
    d = IndianBuffetProcess(alpha, n, f)
    mats = np.stack(list(_all_left_ordered(n, f)))
    mass = np.exp(np.asarray(d.log_prob(mats))).sum()
    np.testing.assert_allclose(mass, stats.poisson.cdf(f, alpha * 1.5), rtol=1e-10)


def test_ibp_sampler_frequencies_match_log_prob():
    alpha, n, f, draws = 1.0, 2, 3, 30_000
    keys = jax.random.split(jax.random.key(11), draws)
    z = np.asarray(jax.jit(jax.vmap(lambda k: ibp_sample(k, alpha, n, f)[0]))(keys))
    d = IndianBuffetProcess(alpha, n, f)
    codes = z.reshape(draws, -1) @ (1 << np.arange(n * f))
    freq = np.bincount(codes, minlength=1 << (n * f)) / draws
    mats = np.stack([np.array([(c >> i) & 1 for i in range(n * f)], bool).reshape(n, f) for c in range(1 << (n * f))])
    log_prob = jax.jit(d.log_prob)
    lp = np.asarray(log_prob(mats), np.float64)
    p = np.exp(lp)
    fits = lp > -np.inf
    assert np.all(freq[~fits] == 0)  # the sampler never produces a non-left-ordered matrix
    # where nothing overflowed (K+ <= 3 here has probability > 0.9), frequencies match the pmf
    se = np.sqrt(p * (1 - p) / draws)
    ok = fits & (np.asarray(mats.sum(1).astype(bool).sum(-1)) < f)
    assert np.all(np.abs(freq[ok] - p[ok]) < 5 * se[ok] + 1e-4)
    # IBP distribution sample() goes through the same process
    zs = d.sample(jax.random.key(0), (5,))
    assert zs.shape == (5, n, f)
    assert np.all(np.isfinite(np.asarray(jax.jit(d.log_prob)(zs))))


def test_bernoulli_process_mask_matches_bernoulli(x64):
    log_pi = jnp.array([-1e-3, -0.5, -3.0, -300.0])[:, None]
    gamma = jnp.array([[-4.0, 0.0, 2.0, 40.0]])
    d = BernoulliProcessMask(log_pi, gamma)
    pi = np.exp(np.asarray(log_pi))
    logits = np.log(pi) - np.log1p(-pi) + np.asarray(gamma)
    np.testing.assert_allclose(d.logits, logits, rtol=1e-10)
    assert np.all(np.isfinite(d.logits))
    ref = nd.BernoulliLogits(logits)
    for v in (0, 1):
        np.testing.assert_allclose(d.log_prob(jnp.full(d.batch_shape, v)), ref.log_prob(v), rtol=1e-10)
    np.testing.assert_array_equal(d.hard(), logits > 0)
    # float32 tiny pi: logit stays finite and ~ log pi
    lg = bernoulli_process_logits(jnp.float32(-200.0), 0.0)
    assert np.isfinite(lg) and abs(float(lg) + 200.0) < 1e-3
    freq = np.asarray(BernoulliProcessMask(jnp.log(0.3), 0.0).sample(jax.random.key(0), (20000,))).mean()
    assert abs(freq - 0.3) < 0.015


TEMPS = [0.05, 0.1, 0.2, 0.3]
LOGITS = [-80.0, -20.0, -5.0, 0.0, 5.0, 20.0, 80.0]


@jax.jit  # the temperature is traced: one compilation for the whole grid
def _relaxed_grid_values(tau, logits):
    d = RelaxedBernoulli(tau, logits)
    z = d.sample(jax.random.key(0), (256,))
    # exactly saturated samples (0 and 1 in float32) and the interior
    edge = jnp.broadcast_to(jnp.array([0.0, 1.0, 0.5, 1e-30])[:, None], (4, logits.size))
    y = d.sample_logit(jax.random.key(1), (256,))
    ly = LogitRelaxedBernoulli(tau, logits)
    g = jax.grad(lambda l: jnp.sum(RelaxedBernoulli(tau, l).log_prob(z)))(logits)
    return (d.log_prob(z), d.log_prob(edge), d.log_prob_logit(y),
            ly.log_prob(jnp.array([-1e30, -1e4, 0.0, 1e4, 1e30])[:, None]), g)


@pytest.mark.parametrize("tau", TEMPS)
def test_relaxed_bernoulli_log_prob_finite_on_grid(tau):
    values = _relaxed_grid_values(jnp.float32(tau), jnp.array(LOGITS, jnp.float32))
    for name, v in zip(("samples", "saturated", "logit samples", "extreme logits", "gradient"), values):
        assert np.all(np.isfinite(np.asarray(v))), name


def test_relaxed_bernoulli_density_normalised_and_matches_numpyro(x64):
    for tau, logit in [(0.1, -2.0), (0.3, 1.5), (0.5, 0.0)]:
        d = RelaxedBernoulli(tau, logit)
        ys = np.linspace(-400, 400, 400_001)
        p = np.exp(np.asarray(d.base.log_prob(ys)))
        assert abs(np.trapezoid(p, ys) - 1.0) < 1e-6
        z = jnp.array([0.01, 0.2, 0.5, 0.9, 0.999])
        np.testing.assert_allclose(d.log_prob(z), nd.RelaxedBernoulliLogits(tau, logit).log_prob(z), rtol=1e-8)


def test_relaxed_bernoulli_low_temperature_is_bernoulli():
    d = RelaxedBernoulli(0.05, jnp.float32(0.8))
    z = np.asarray(d.sample(jax.random.key(2), (40_000,)))
    assert abs((z > 0.5).mean() - jax.nn.sigmoid(0.8)) < 0.01


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_invalid_concentrations_and_temperatures(bad):
    with pytest.raises(ValueError, match="concentration1"):
        StickBreakingBetaProcess(bad, 1.0, 3)
    with pytest.raises(ValueError, match="concentration0"):
        StickBreakingBetaProcess(1.0, bad, 3)
    with pytest.raises(ValueError, match="alpha"):
        IndianBuffetProcess(bad, 3, 4)
    with pytest.raises(ValueError, match="alpha"):
        ibp_sample(jax.random.key(0), bad, 3, 4)
    with pytest.raises(ValueError, match="temperature"):
        RelaxedBernoulli(bad, 0.0)
    with pytest.raises(ValueError, match="temperature"):
        LogitRelaxedBernoulli(bad, 0.0)


def test_invalid_shapes_and_sizes():
    with pytest.raises(ValueError, match="truncation"):
        StickBreakingBetaProcess(1.0, 1.0, 0)
    with pytest.raises(TypeError, match="truncation"):
        StickBreakingBetaProcess(1.0, 1.0, 2.5)
    with pytest.raises(ValueError, match="truncation"):
        StickBreakingBetaProcess(jnp.ones(3), 1.0, 4)
    with pytest.raises(ValueError, match="num_customers"):
        ibp_sample(jax.random.key(0), 1.0, 0, 4)
    with pytest.raises(TypeError, match="max_features"):
        IndianBuffetProcess(1.0, 3, 4.0)
    with pytest.raises(ValueError, match="logits"):
        RelaxedBernoulli(0.1, jnp.array([0.0, jnp.inf]))


def test_usable_inside_numpyro_model():
    import numpyro
    from numpyro.handlers import seed, trace

    def model():
        pi = numpyro.sample("pi", StickBreakingBetaProcess(2.0, 1.0, 4))
        numpyro.sample("z", BernoulliProcessMask(jnp.log(pi)[:, None], jnp.zeros((4, 3))).to_event(2))
        numpyro.sample("r", RelaxedBernoulli(0.1, jnp.zeros(3)).to_event(1))

    tr = trace(seed(model, 0)).get_trace()
    assert tr["pi"]["value"].shape == (4,) and tr["z"]["value"].shape == (4, 3)
    lp = sum(float(site["fn"].log_prob(site["value"]).sum()) for site in tr.values())
    assert np.isfinite(lp)


_stick_mean_grad = jax.jit(jax.grad(  # (a, b) traced: one compilation for both sampling paths
    lambda a, b: StickBreakingBetaProcess(a, b, 2).sample(jax.random.key(4), (100_000,))[:, 0].mean()))


@pytest.mark.parametrize("a,b", [(3.0, 1.0), (2.0, 2.0), (0.5, 1.0), (0.4, 0.7)])
def test_stick_reparameterisation_gradient(a, b):
    # d/da E[nu_1] = b / (a + b)^2 for nu_1 ~ Beta(a, b); both the inverse-CDF (b = 1) and gamma paths
    g = float(_stick_mean_grad(jnp.float32(a), jnp.float32(b)))
    # pathwise derivative samples have sd well below 1 here; a 4% tolerance is > 5 standard errors
    np.testing.assert_allclose(g, b / (a + b) ** 2, rtol=0.04)


def test_gamma_rsample_distribution_and_gradient():
    from jaxcore.bnp.sampling import gamma_rsample

    draw = jax.jit(jax.value_and_grad(lambda a: gamma_rsample(jax.random.key(0), a, (40_000,)).mean()))
    sample = jax.jit(lambda a: gamma_rsample(jax.random.key(0), a, (40_000,)))
    for a in (0.3, 1.0, 4.0):
        x = np.asarray(sample(jnp.float32(a)), np.float64)
        assert stats.kstest(x, stats.gamma(a).cdf).pvalue > 1e-3
        g = float(draw(jnp.float32(a))[1])
        assert abs(g - 1.0) < 0.03  # d/da E[x] = 1
