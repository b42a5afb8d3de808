import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxcore.tpp import EventBatch, Poisson, fit_mle, ks_statistic


def test_loglik_closed_form(x64):
    mu = np.array([0.5, 2.0])
    b = EventBatch.from_sequences([[0.1, 0.7, 1.5], [0.4]], [[0, 1, 1], [0]], T=[2.0, 3.0], num_marks=2)
    ll = np.asarray(Poisson(mu).log_likelihood(b))
    np.testing.assert_allclose(ll, [np.log(0.5) + 2 * np.log(2.0) - 2.5 * 2.0, np.log(0.5) - 2.5 * 3.0], rtol=1e-14)
    np.testing.assert_allclose(np.asarray(Poisson(mu).compensator(b)), [[1.0, 4.0], [1.5, 6.0]])
    lam = np.asarray(Poisson(mu).intensity(b, jnp.ones((2, 3))))
    assert lam.shape == (2, 3, 2) and np.all(lam == mu)


def test_simulation_counts_marks_and_rescaling(x64):
    mu = np.array([1.0, 3.0])
    b, overflow = Poisson(mu).simulate(jax.random.key(0), 5.0, 80, 4000)
    assert not bool(np.any(overflow))
    counts = np.asarray(b.num_events)
    assert abs(counts.mean() - 20.0) < 4 * np.sqrt(20.0 / 4000)  # Var N = E N = 20
    marks, mask = np.asarray(b.marks), np.asarray(b.mask)
    assert abs((marks[mask] == 1).mean() - 0.75) < 4 * np.sqrt(0.75 * 0.25 / mask.sum())
    # inter-event gaps of the ground process rescaled by sum(mu): first gaps are exactly Exp(1)
    first = np.asarray(b.times)[:, 0][mask[:, 0]] * mu.sum()
    assert float(ks_statistic(jnp.asarray(first))) < 1.63 / np.sqrt(first.size)


def test_overflow_and_padding():
    b, overflow = Poisson(5.0).simulate(jax.random.key(1), 10.0, 20, 3)
    assert bool(np.all(overflow)) and bool(np.all(b.mask))
    b, overflow = Poisson(0.1).simulate(jax.random.key(2), 1.0, 20, 50)
    t, k = np.asarray(b.times), np.asarray(b.mask)
    n = k.sum(1)
    for i in range(50):
        assert np.all(t[i, n[i]:] == (t[i, n[i] - 1] if n[i] else 0.0))


def test_fit_closed_form_and_optax_agree(x64):
    b, _ = Poisson([0.5, 1.5]).simulate(jax.random.key(3), 50.0, 200, 8)
    closed = Poisson([1.0, 1.0]).fit_closed_form(b)
    counts = np.array([((np.asarray(b.marks) == k) & np.asarray(b.mask)).sum() for k in range(2)])
    np.testing.assert_allclose(np.asarray(closed.mu), counts / 400.0, rtol=1e-12)
    for opt, steps in ((None, 30), (optax.adam(0.05), 300)):
        fitted = fit_mle(Poisson([1.0, 1.0]), b, num_steps=steps, optimizer=opt).model
        np.testing.assert_allclose(np.asarray(fitted.mu), np.asarray(closed.mu), rtol=1e-3)


def test_errors():
    with pytest.raises(ValueError, match="mu: expected finite values > 0"):
        Poisson([1.0, -1.0])
    with pytest.raises(ValueError, match=r"mu: expected shape \[K\]"):
        Poisson(np.ones((2, 2)))
    with pytest.raises(TypeError, match="num_sequences: expected an int"):
        Poisson(1.0).simulate(jax.random.key(0), 1.0, 5, 2.0)


def test_fit_closed_form_refuses_zero_observation_time():
    # issue 48 item 19: zero events over zero time gave a NaN rate.
    with pytest.raises(ValueError, match="^batch.T: expected a total observation time > 0, got 0.0"):
        Poisson(1.0).fit_closed_form(EventBatch.from_sequences([[]], T=0.0))
    batch = EventBatch.from_sequences([[0.5, 1.0], []], T=[2.0, 2.0])
    np.testing.assert_allclose(Poisson(1.0).fit_closed_form(batch).mu, [0.5])
    fit = jax.jit(lambda b: Poisson(1.0).fit_closed_form(b).mu)
    np.testing.assert_allclose(fit(batch), [0.5])
    with pytest.raises(Exception, match="batch.T: expected a total observation time > 0"):
        jax.block_until_ready(fit(EventBatch.from_sequences([[]], T=0.0)))
