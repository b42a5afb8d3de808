import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxcore.tpp import EventBatch, Hawkes, ks_statistic

from ._oracles import hawkes_compensator, hawkes_intensity, hawkes_loglik

MU = np.array([0.3, 0.5])
ALPHA = np.array([[0.4, 0.2], [0.3, 0.6]])
BETA = np.array([[1.0, 2.0], [1.5, 0.8]])


def _batch(rng, n_seq=3, T=8.0, max_events=None):
    times, marks = [], []
    for b in range(n_seq):
        n = rng.integers(0, 12)
        times.append(np.sort(rng.uniform(0, T, n)))
        marks.append(rng.integers(0, 2, n))
    return EventBatch.from_sequences(times, marks, T, num_marks=2, max_events=max_events), times, marks


def test_loglik_matches_bruteforce_multivariate(x64):
    rng = np.random.default_rng(0)
    b, times, marks = _batch(rng, 4)
    model = Hawkes(MU, ALPHA, BETA)
    for method in ("associative", "scan", "auto"):
        ll = np.asarray(model.log_likelihood(b, method=method))
        ref = [hawkes_loglik(MU, ALPHA, BETA, t, m, 8.0) for t, m in zip(times, marks)]
        np.testing.assert_allclose(ll, ref, rtol=1e-12)


def test_intensity_and_compensator_match_bruteforce(x64):
    rng = np.random.default_rng(1)
    b, times, marks = _batch(rng, 2)
    model = Hawkes(MU, ALPHA, BETA)
    q = np.sort(rng.uniform(0, 8, (2, 5)), axis=1)
    lam = np.asarray(model.intensity(b, q))
    comp = np.asarray(model.compensator(b, q))
    for i in range(2):
        for j in range(5):
            np.testing.assert_allclose(lam[i, j], hawkes_intensity(MU, ALPHA, BETA, times[i], marks[i], q[i, j]),
                                       rtol=1e-12)
            np.testing.assert_allclose(comp[i, j], hawkes_compensator(MU, ALPHA, BETA, times[i], marks[i], q[i, j]),
                                       rtol=1e-12)
    cT = np.asarray(model.compensator(b))
    np.testing.assert_allclose(cT[0], hawkes_compensator(MU, ALPHA, BETA, times[0], marks[0], 8.0), rtol=1e-12)


def test_padding_and_vmap_do_not_change_results(x64):
    rng = np.random.default_rng(2)
    b, times, marks = _batch(rng, 3)
    b_long = EventBatch.from_sequences(times, marks, 8.0, num_marks=2, max_events=b.max_events + 7)
    model = Hawkes(MU, ALPHA, BETA)
    ll = np.asarray(model.log_likelihood(b))
    np.testing.assert_allclose(np.asarray(model.log_likelihood(b_long)), ll, rtol=1e-13)
    for i in range(3):
        single = EventBatch.from_sequences([times[i]], [marks[i]], 8.0, num_marks=2, max_events=b.max_events)
        np.testing.assert_allclose(np.asarray(model.log_likelihood(single))[0], ll[i], rtol=1e-13)


def test_gradient_matches_finite_differences(x64):
    rng = np.random.default_rng(3)
    b, _, _ = _batch(rng, 2)

    @jax.jit
    def f(mu, alpha, beta):
        return jnp.sum(Hawkes(mu, alpha, beta).log_likelihood(b))

    args = [jnp.asarray(MU), jnp.asarray(ALPHA), jnp.asarray(BETA)]
    grads = jax.grad(lambda a: f(*a))(args)
    eps = 1e-6
    for which in range(3):
        flat = np.asarray(args[which]).ravel()
        for j in range(flat.size):
            up = [np.asarray(a).copy() for a in args]
            dn = [np.asarray(a).copy() for a in args]
            up[which].ravel()[j] += eps
            dn[which].ravel()[j] -= eps
            fd = (float(f(*up)) - float(f(*dn))) / (2 * eps)
            np.testing.assert_allclose(np.asarray(grads[which]).ravel()[j], fd, rtol=1e-6, atol=1e-8)


def test_simulation_passes_time_rescaling(x64):
    # long windows: the censored last gap of each sequence biases the pooled gaps by O(1 / N)
    model = Hawkes(0.5, 0.8, 1.2)
    batch, overflow = model.simulate(jax.random.key(0), 1000.0, 3000, 6)
    assert not bool(np.any(overflow))
    # time rescaling: Lambda(t_i) - Lambda(t_{i-1}) are iid Exp(1) under the true model
    comp = np.asarray(model.compensator(batch, batch.times))[..., 0]
    gaps = np.diff(np.concatenate([np.zeros((batch.num_sequences, 1)), comp], axis=1), axis=1)
    mask = np.asarray(batch.mask)
    d = float(ks_statistic(jnp.asarray(gaps), jnp.asarray(mask)))
    assert d == pytest.approx(stats.kstest(gaps[mask], "expon").statistic, abs=1e-12)
    assert d < 1.63 / np.sqrt(mask.sum())  # 1% critical value
    # a wrong model (Poisson at the mean rate) is rejected
    wrong = Hawkes(float(mask.sum() / 6000.0), 1e-9, 1.0)
    comp_w = np.asarray(wrong.compensator(batch, batch.times))[..., 0]
    gaps_w = np.diff(np.concatenate([np.zeros((batch.num_sequences, 1)), comp_w], axis=1), axis=1)
    assert float(ks_statistic(jnp.asarray(gaps_w), jnp.asarray(mask))) > 3 * 1.63 / np.sqrt(mask.sum())


def test_simulation_mean_count(x64):
    mu, alpha, beta, T = 0.5, 0.8, 1.2, 20.0
    batch, overflow = Hawkes(mu, alpha, beta).simulate(jax.random.key(1), T, 200, 2000)
    assert not bool(np.any(overflow))
    # E N(T) = int_0^T m, with m' = beta mu - (beta - alpha) m, m(0) = mu
    c = beta - alpha
    m_inf = beta * mu / c
    expected = m_inf * T + (mu - m_inf) * (1 - np.exp(-c * T)) / c
    counts = np.asarray(batch.num_events)
    assert abs(counts.mean() - expected) < 4 * counts.std() / np.sqrt(len(counts))


def test_multivariate_simulation_mark_frequencies(x64):
    model = Hawkes(MU, ALPHA, BETA)
    batch, overflow = model.simulate(jax.random.key(1), 10.0, 400, 500)
    assert not bool(np.any(overflow))
    comp = np.asarray(model.compensator(batch))  # [B, K]; E N_k(T) = E Lambda_k(T)
    counts = np.stack([((np.asarray(batch.marks) == k) & np.asarray(batch.mask)).sum(1) for k in range(2)], 1)
    diff = counts - comp
    assert np.all(np.abs(diff.mean(0)) < 4 * diff.std(0) / np.sqrt(500))


def test_simulation_overflow_flag():
    model = Hawkes(2.0, 0.5, 1.0)
    batch, overflow = model.simulate(jax.random.key(0), 50.0, 10, 4)
    assert bool(np.all(overflow))
    assert bool(np.all(batch.mask))
    assert np.all(np.diff(np.asarray(batch.times), axis=1) >= 0)


def test_stationary_quantities():
    model = Hawkes(MU, ALPHA, BETA)
    r = np.max(np.abs(np.linalg.eigvals(ALPHA / BETA)))
    assert float(model.branching_ratio()) == pytest.approx(r, rel=1e-5)
    np.testing.assert_allclose(np.asarray(model.stationary_rate()), np.linalg.solve(np.eye(2) - ALPHA / BETA, MU),
                               rtol=1e-5)


def test_parameter_errors():
    with pytest.raises(ValueError, match="alpha: expected finite values >= 0"):
        Hawkes(0.2, -0.1, 1.0)
    with pytest.raises(ValueError, match="mu: expected finite values > 0"):
        Hawkes(0.0, 0.1, 1.0)
    with pytest.raises(ValueError, match=r"alpha: expected shape \[K, K\]"):
        Hawkes([0.2, 0.3], [0.1, 0.2], 1.0)
    with pytest.raises(ValueError, match="beta: expected a scalar or shape"):
        Hawkes([0.2, 0.3], np.eye(2), [1.0, 2.0])
    with pytest.raises(ValueError, match="method: expected"):
        Hawkes(0.2, 0.1, 1.0).log_likelihood(EventBatch.from_sequences([[0.1]]), method="fft")
    with pytest.raises(ValueError, match="beta: expected one decay rate shared by all pairs"):
        Hawkes(MU, ALPHA, BETA).jump_diffusion()
    with pytest.raises(ValueError, match="T: expected a finite number > 0"):
        Hawkes(0.2, 0.1, 1.0).simulate(jax.random.key(0), -1.0, 10, 2)
    with pytest.raises(ValueError, match="max_events: expected an int >= 1"):
        Hawkes(0.2, 0.1, 1.0).simulate(jax.random.key(0), 1.0, 0, 2)
