"""KL divergences: closed forms against numpyro and Monte Carlo; relaxed-mask KL against quadrature."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd
import pytest
from numpyro.distributions.kl import kl_divergence

from jaxcore.bnp.kl import kl_beta, kl_normal, kl_relaxed_bernoulli_mc
from jaxcore.bnp.distributions import LogitRelaxedBernoulli

def _kl_beta_mpmath(a1, b1, a2, b2, dps=60):
    """The textbook closed form at ``dps`` decimal digits (the oracle of every Beta KL test)."""
    import mpmath as mp

    with mp.workdps(dps):
        a1, b1, a2, b2 = (mp.mpf(float(v)) for v in (a1, b1, a2, b2))
        kl = (mp.log(mp.beta(a2, b2)) - mp.log(mp.beta(a1, b1)) + (a1 - a2) * mp.digamma(a1)
              + (b1 - b2) * mp.digamma(b1) + (a2 - a1 + b2 - b1) * mp.digamma(a1 + b1))
        return float(kl)


PAIRS = [(2.0, 1.0, 2.0, 1.0), (0.5, 3.0, 2.0, 1.0), (5.0, 2.0, 1.5, 1.5), (30.0, 40.0, 1.0, 1.0)]


@pytest.mark.parametrize("a1,b1,a2,b2", PAIRS)
def test_kl_beta_closed_form_matches_numpyro_and_monte_carlo(x64, a1, b1, a2, b2):
    kl = float(kl_beta(a1, b1, a2, b2))
    # numpyro evaluates the textbook form, whose float64 cancellation costs ~4e-9 relative at (30, 40, 1, 1)
    # (kl_beta's cancellation-free form agrees with 60-digit mpmath to 1e-12); rtol was 1e-10 against numpyro
    np.testing.assert_allclose(kl, _kl_beta_mpmath(a1, b1, a2, b2), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(kl, kl_divergence(nd.Beta(a1, b1), nd.Beta(a2, b2)), rtol=1e-8, atol=1e-12)
    n = 200_000
    x = nd.Beta(a1, b1).sample(jax.random.key(0), (n,))
    terms = np.asarray(nd.Beta(a1, b1).log_prob(x) - nd.Beta(a2, b2).log_prob(x))
    assert abs(terms.mean() - kl) < 5 * terms.std() / np.sqrt(n) + 1e-12
    assert kl >= 0.0
    if (a1, b1) == (a2, b2):
        assert abs(kl) < 1e-12


def test_kl_normal_matches_numpyro(x64):
    m1, s1, m2, s2 = jnp.array([0.0, 1.0, -2.0]), jnp.array([1.0, 0.1, 3.0]), jnp.array([0.0, 0.0, 1.0]), jnp.array([1.0, 2.0, 0.5])
    np.testing.assert_allclose(kl_normal(m1, s1, m2, s2), kl_divergence(nd.Normal(m1, s1), nd.Normal(m2, s2)), rtol=1e-12)
    assert float(kl_normal(m1, s1, m1, s1).sum()) == 0.0


@pytest.mark.parametrize("tq,tp,lq,lp", [(0.2, 0.2, 1.0, -1.0), (0.1, 0.3, -3.0, 2.0), (0.5, 0.5, 0.0, 0.0)])
def test_relaxed_kl_monte_carlo_matches_quadrature(x64, tq, tp, lq, lp):
    ys = np.linspace(-600, 600, 1_200_001)
    q = LogitRelaxedBernoulli(tq, lq)
    p = LogitRelaxedBernoulli(tp, lp)
    lqy = np.asarray(q.log_prob(ys))
    exact = np.trapezoid(np.exp(lqy) * (lqy - np.asarray(p.log_prob(ys))), ys)
    n = 200_000
    est = float(kl_relaxed_bernoulli_mc(jax.random.key(1), lq, lp, tq, tp, num_samples=n))
    y = q.sample(jax.random.key(1), (n,))
    sd = float(np.std(np.asarray(q.log_prob(y) - p.log_prob(y))))
    assert abs(est - exact) < 5 * sd / np.sqrt(n) + 1e-9
    if (tq, lq) == (tp, lp):
        assert abs(est) < 1e-12 and abs(exact) < 1e-9


def test_relaxed_kl_finite_with_gradients_at_low_temperature():
    lq = jnp.array([-60.0, -5.0, 0.0, 5.0, 60.0])
    lp = jnp.array([60.0, 0.0, -8.0, 5.0, -60.0])
    for tau in (0.05, 0.1, 0.3):
        f = lambda l: jnp.sum(kl_relaxed_bernoulli_mc(jax.random.key(2), l, lp, tau, num_samples=64))
        v, g = jax.value_and_grad(f)(lq)
        assert np.isfinite(v) and np.all(np.isfinite(np.asarray(g)))


def test_kl_invalid_arguments():
    with pytest.raises(ValueError, match="a1"):
        kl_beta(0.0, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="b2"):
        kl_beta(1.0, 1.0, 1.0, -2.0)
    with pytest.raises(ValueError, match="temperature"):
        kl_relaxed_bernoulli_mc(jax.random.key(0), 0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="prior_temperature"):
        kl_relaxed_bernoulli_mc(jax.random.key(0), 0.0, 0.0, 0.1, -1.0)
    with pytest.raises(ValueError, match="num_samples"):
        kl_relaxed_bernoulli_mc(jax.random.key(0), 0.0, 0.0, 0.1, num_samples=0)


def test_mask_kl_depends_on_shared_pi_only_when_temperatures_differ(x64):
    """The model's mask KL uses the same sampled logit(pi) in q and p (as the official code does): with
    tau_q == tau_p it is invariant to that common shift (a translation of logit space applied to both laws),
    with tau_q != tau_p it is not; the exact Bernoulli KL would depend on pi in both cases."""
    from jaxcore.bnp.kl import _kl_relaxed_from_noise

    eps = jax.random.logistic(jax.random.key(0), (64,), jnp.float64)
    gamma_q, gamma_p = 1.3, -0.4
    def kl(logit_pi, tq, tp):
        return np.asarray(_kl_relaxed_from_noise(eps, logit_pi + gamma_q, logit_pi + gamma_p, tq, tp))
    np.testing.assert_allclose(kl(-3.0, 0.2, 0.2), kl(2.0, 0.2, 0.2), rtol=1e-12, atol=1e-12)
    assert np.max(np.abs(kl(-3.0, 0.2, 0.5) - kl(2.0, 0.2, 0.5))) > 1e-2
    def bern(l):  # closed-form KL(Bern(sigmoid(l + gamma_q)) || Bern(sigmoid(l + gamma_p)))
        q, p = jax.nn.sigmoid(l + gamma_q), jax.nn.sigmoid(l + gamma_p)
        return float(q * jnp.log(q / p) + (1 - q) * jnp.log((1 - q) / (1 - p)))
    assert abs(bern(-3.0) - bern(2.0)) > 1e-2
