import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.tpp import EventBatch, SelfCorrecting, fit_mle, ks_statistic

from ._oracles import self_correcting_loglik


def test_loglik_and_compensator_match_bruteforce(x64):
    rng = np.random.default_rng(0)
    times = [np.sort(rng.uniform(0, 6, n)) for n in (0, 3, 9)]
    b = EventBatch.from_sequences(times, T=6.0, max_events=12)
    model = SelfCorrecting(0.5, 0.2)
    ll = np.asarray(model.log_likelihood(b))
    np.testing.assert_allclose(ll, [self_correcting_loglik(0.5, 0.2, t, 6.0) for t in times], rtol=1e-12)
    # compensator at T = sum log lambda - log L
    logsum = [sum(0.5 * t - 0.2 * i for i, t in enumerate(ts)) for ts in times]
    np.testing.assert_allclose(np.asarray(model.compensator(b))[:, 0], np.array(logsum) - ll, rtol=1e-12)
    # intensity is exp(mu t - alpha N(t-)); compensator at t is its integral (checked by quadrature)
    q = np.linspace(0, 6, 4001)
    lam = np.asarray(model.intensity(b, jnp.broadcast_to(q, (3, q.size))))[2, :, 0]
    n = np.searchsorted(times[2], q, side="left")
    np.testing.assert_allclose(lam, np.exp(0.5 * q - 0.2 * n), rtol=1e-12)
    c = np.asarray(model.compensator(b, jnp.asarray([[3.0], [3.0], [3.0]])))[2, 0, 0]
    grid = np.linspace(0, 3, 300001)
    ng = np.searchsorted(times[2], grid, side="left")
    f = np.exp(0.5 * grid - 0.2 * ng)
    np.testing.assert_allclose(c, np.sum((f[1:] + f[:-1]) / 2 * np.diff(grid)), rtol=1e-6)


def test_simulation_rescaled_gaps_are_exp1(x64):
    model = SelfCorrecting(0.5, 0.2)
    b, overflow = model.simulate(jax.random.key(0), 200.0, 700, 8)
    assert not bool(np.any(overflow))
    comp = np.asarray(model.compensator(b, b.times))[..., 0]
    gaps = np.diff(np.concatenate([np.zeros((8, 1)), comp], axis=1), axis=1)
    mask = np.asarray(b.mask)
    assert float(ks_statistic(jnp.asarray(gaps), jnp.asarray(mask))) < 1.63 / np.sqrt(mask.sum())
    # the count tracks mu t / alpha (stress release keeps N(t) near mu t / alpha)
    assert abs(np.asarray(b.num_events).mean() - 0.5 * 200.0 / 0.2) < 10.0


def test_padding_invariance(x64):
    b = EventBatch.from_sequences([[0.5, 1.0, 2.0]], T=3.0)
    b2 = EventBatch.from_sequences([[0.5, 1.0, 2.0]], T=3.0, max_events=9)
    m = SelfCorrecting(0.7, 0.3)
    np.testing.assert_allclose(np.asarray(m.log_likelihood(b)), np.asarray(m.log_likelihood(b2)), rtol=1e-14)


def test_fit_recovers_parameters(x64):
    b, _ = SelfCorrecting(0.5, 0.2).simulate(jax.random.key(1), 100.0, 400, 16)
    fitted = fit_mle(SelfCorrecting(1.0, 1.0), b, num_steps=60).model
    assert float(fitted.mu) == pytest.approx(0.5, rel=0.15)
    assert float(fitted.alpha) == pytest.approx(0.2, rel=0.15)


def test_errors():
    with pytest.raises(ValueError, match="mu: expected a scalar"):
        SelfCorrecting([0.5, 0.5], 0.2)
    with pytest.raises(ValueError, match="alpha: expected finite values >= 0"):
        SelfCorrecting(0.5, -0.2)
    with pytest.raises(ValueError, match="batch.num_marks: expected 1"):
        SelfCorrecting(0.5, 0.2).log_likelihood(EventBatch.from_sequences([[0.1]], [[1]], num_marks=2))
