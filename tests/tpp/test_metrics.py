import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxcore.tpp import (
    EventBatch,
    Hawkes,
    JumpDiffusion,
    Poisson,
    ks_statistic,
    nll_per_event,
    predict_next,
    prediction_scores,
    time_rescaling_ks,
)


def test_ks_statistic_matches_scipy():
    rng = np.random.default_rng(0)
    x = rng.exponential(1.3, 57)
    mask = rng.uniform(size=57) < 0.7
    d = float(ks_statistic(jnp.asarray(x), jnp.asarray(mask)))
    assert d == pytest.approx(stats.kstest(x[mask], "expon").statistic, abs=1e-6)
    assert float(jax.jit(ks_statistic)(jnp.zeros(3), jnp.zeros(3, bool))) == 0.0  # under jit: documented 0


def test_nll_per_event():
    assert float(nll_per_event(jnp.array([-3.0, -5.0]), jnp.array([2, 2]))) == pytest.approx(2.0)


def test_poisson_prediction_is_mean_gap_and_rate_share(x64):
    b = EventBatch.from_sequences([[0.5, 1.0, 2.0]], [[0, 1, 1]], T=3.0, num_marks=2)
    p = predict_next(Poisson([0.5, 1.5]).jump_diffusion(), b, horizon=30.0, num_grid=3000)
    # next gap ~ Exp(2): mean 0.5 (truncation at 30 is negligible)
    np.testing.assert_allclose(np.asarray(p.time[0, :2]), np.asarray(b.times[0, :2]) + 0.5, rtol=1e-4)
    np.testing.assert_allclose(np.asarray(p.type_probs[0, 0]), [0.25, 0.75], rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(p.valid[0]), [True, True, False])
    rmse, acc = prediction_scores(p, b)
    expected = np.sqrt(((1.0 - 1.0) ** 2 + (1.5 - 2.0) ** 2) / 2)
    assert float(rmse) == pytest.approx(expected, rel=1e-3)
    assert float(acc) == pytest.approx(1.0)


def test_hawkes_prediction_matches_quadrature(x64):
    model = Hawkes(0.3, 0.9, 1.5)
    b = EventBatch.from_sequences([[1.0, 1.2]], T=2.0)
    p = predict_next(model.jump_diffusion(), b, horizon=40.0, num_grid=2000, num_substeps=100)
    # after the second event: lambda(s) = mu + a e^{-b (s - 1)} + a e^{-b (s - 1.2)}
    s = np.linspace(1.2, 61.2, 600001)
    lam = 0.3 + 0.9 * np.exp(-1.5 * (s - 1.0)) + 0.9 * np.exp(-1.5 * (s - 1.2))
    Lam = np.concatenate([[0], np.cumsum((lam[1:] + lam[:-1]) / 2 * np.diff(s))])
    dens = lam * np.exp(-Lam)
    mean = np.sum(((s * dens)[1:] + (s * dens)[:-1]) / 2 * np.diff(s))
    assert float(p.time[0, 1]) == pytest.approx(mean, rel=5e-3)
    exact = predict_next(model.jump_diffusion(), b, horizon=40.0, num_grid=2000, method="exact")
    assert float(exact.time[0, 1]) == pytest.approx(mean, rel=1e-4)
    with pytest.raises(ValueError, match="method: expected 'scan' or 'exact'"):
        predict_next(model.jump_diffusion(), b, horizon=1.0, method="diffrax")


def test_exact_prediction_is_finite_where_euler_diverges(x64):
    stiff = Hawkes(0.4, 0.7, 20.0)
    b = EventBatch.from_sequences([[1.0, 3.0, 3.1]], T=5.0)
    p = predict_next(stiff.jump_diffusion(), b, horizon=20.0, num_grid=4000, method="exact")
    assert np.all(np.isfinite(np.asarray(p.time)))
    # two events 0.1 apart, beta = 20: after the third the excess has not decayed; the gap mean lies below 1/mu
    assert float(p.time[0, 2]) - 3.1 < 1 / 0.4


def test_time_rescaling_ks_separates_true_and_wrong_models():
    model = Hawkes(0.5, 0.8, 1.2)
    b, _ = model.simulate(jax.random.key(0), 200.0, 700, 4)
    n = float(b.num_events.sum())
    d_true = float(time_rescaling_ks(model.jump_diffusion(), b, num_substeps=20))
    d_wrong = float(time_rescaling_ks(Poisson(n / 800.0).jump_diffusion(), b))
    assert d_true < 1.63 / np.sqrt(n)
    assert d_wrong > 2 * d_true


@pytest.fixture(scope="module")
def hawkes2():
    """A two-type Hawkes process (one shared decay) and 4 simulated sequences on [0, 20], shared by the tests."""
    h = Hawkes(np.array([0.3, 0.2], np.float32), np.array([[0.5, 0.2], [0.1, 0.4]], np.float32), np.float32(1.3))
    b, _ = h.simulate(jax.random.key(0), 20.0, 64, 4)
    q = jax.random.uniform(jax.random.key(1), (4, 12), minval=0.0, maxval=20.0)
    return h, b, q.at[:, 0].set(b.times[:, 2])  # one query at an event time


def test_time_rescaling_ks_takes_classical_models_and_their_exact_flow(hawkes2):
    """A classical model is its jump-diffusion; without ``method`` the exact flow is used, whose rescaled gaps
    are the model's closed-form compensator increments."""
    from jaxcore.tpp import solve

    model, b, _ = hawkes2
    d = float(time_rescaling_ks(model, b))
    assert d == float(time_rescaling_ks(model.jump_diffusion(), b, method="exact"))
    gaps = solve(model, b, method="exact").interval_compensator
    comp = np.asarray(model.compensator(b, b.times)).sum(-1)
    closed = np.diff(np.concatenate([np.zeros((4, 1)), comp], 1), axis=1)
    mask = np.asarray(b.mask)
    np.testing.assert_allclose(np.asarray(gaps)[mask], closed[mask], rtol=2e-4, atol=1e-5)
    assert d == pytest.approx(float(ks_statistic(jnp.asarray(np.where(mask, closed, 0.0)), jnp.asarray(mask))),
                              abs=2e-4)
    with pytest.raises(TypeError, match="dynamics: expected a jaxcore.tpp.JumpDiffusion or a classical model"):
        time_rescaling_ks("hawkes", b)


def test_intensity_one_convention_for_every_model(hawkes2):
    """``tpp.intensity(model, batch, t)``: a classical model's closed form and the exact flow of its
    jump-diffusion agree; at an event time the intensity is the one just before the jump."""
    from jaxcore.tpp import NJDTPP, intensity

    h, b, q = hawkes2
    closed = np.asarray(h.intensity(b, q))
    np.testing.assert_array_equal(np.asarray(intensity(h, b, q)), closed)
    np.testing.assert_allclose(np.asarray(intensity(h.jump_diffusion(), b, q)), closed, rtol=2e-6)
    with pytest.raises(ValueError, match="method: expected 'scan' for NJDTPP"):
        intensity(NJDTPP(2, key=jax.random.key(3), width=8, depth=1), b, q, method="exact")
    with pytest.raises(ValueError, match=r"t: expected query times of shape \[batch, query\] = \[4, \*\]"):
        intensity(h.jump_diffusion(), b, q[0])
    with pytest.raises(TypeError, match="model: expected a jaxcore.tpp.JumpDiffusion or a classical model"):
        intensity(object(), b, q)


@pytest.mark.slow
def test_intensity_scan_and_other_models(hawkes2):
    """The sub-stepped scan converges to the exact flow; self-correcting flow = closed form; NJDTPP (no flow)."""
    from jaxcore.tpp import NJDTPP, SelfCorrecting, intensity

    h, b, q = hawkes2
    closed = np.asarray(h.intensity(b, q))
    np.testing.assert_allclose(np.asarray(intensity(h.jump_diffusion(), b, q, method="scan", num_substeps=40)),
                               closed, rtol=3e-4)
    sc = SelfCorrecting(0.5, 0.3)
    b2, _ = sc.simulate(jax.random.key(2), 10.0, 64, 4)
    q2 = q / 2.0
    np.testing.assert_allclose(np.asarray(intensity(sc.jump_diffusion(), b2, q2)), np.asarray(sc.intensity(b2, q2)),
                               rtol=2e-6)
    lam = np.asarray(intensity(NJDTPP(2, key=jax.random.key(3), width=8, depth=1), b, q))
    assert lam.shape == (4, 12, 2) and np.all(np.isfinite(lam)) and np.all(lam > 0)


@pytest.mark.slow
def test_sample_next_mean_matches_the_grid_integral_for_njdtpp():
    """NJDTPP's next-event draws (inversion of the drift path's compensator): the mean sampled time after each
    event within 5 standard errors of predict_next's integral of the same path, and types by rate share."""
    from jaxcore.tpp import NJDTPP, sample_next

    model = NJDTPP(2, key=jax.random.key(0), width=8, init_log_rate=float(np.log(0.7)))
    batch = EventBatch.from_sequences([[0.4, 1.1, 2.5], [0.8, 1.0]], [[0, 1, 1], [1, 0]], T=4.0, num_marks=2)
    kw = {"horizon": 6.0, "num_grid": 256}
    s = sample_next(jax.random.key(1), model, batch, num_samples=2000, **kw)
    pred = predict_next(model, batch, **kw)
    t, mean = np.asarray(s.time, np.float64), np.asarray(pred.time, np.float64)
    se = t.std(-1) / np.sqrt(t.shape[-1])
    real = np.asarray(batch.mask)
    assert np.all(np.abs(t.mean(-1) - mean)[real] < 5 * se[real]), (t.mean(-1), mean, se)
    share = np.asarray(jnp.mean(s.type == 1, -1), np.float64)
    np.testing.assert_allclose(share[real], np.asarray(pred.type_probs[..., 1])[real], atol=0.05)
    assert float(jnp.mean(s.accepted[real])) > 0.9  # a 6-unit horizon censors few draws, if any


def test_sample_next_poisson_gaps_are_exponential():
    from jaxcore.tpp import sample_next

    batch = EventBatch.from_sequences([[0.5, 1.0]], T=2.0)
    s = sample_next(jax.random.key(2), Poisson(2.0).jump_diffusion(), batch, horizon=20.0, num_samples=3000,
                    method="exact")
    gaps = np.asarray(s.time[0, 0] - 0.5, np.float64)
    assert stats.kstest(gaps, stats.expon(scale=0.5).cdf).pvalue > 1e-3
    with pytest.raises(ValueError, match="num_samples: expected"):
        sample_next(jax.random.key(2), Poisson(2.0).jump_diffusion(), batch, horizon=1.0, num_samples=0)
    with pytest.raises(TypeError, match="key: expected"):
        sample_next(0, Poisson(2.0).jump_diffusion(), batch, horizon=1.0)


@pytest.mark.slow
def test_generate_continues_a_hawkes_process_with_its_jumps():
    """From empty histories, generate's events of Hawkes(0.2, 0.8, 1) through its exact flow: the mean count on
    [0, 20] is the closed form m T + (mu - m)(1 - e^{-cT}) / c (c = beta - alpha, m = beta mu / c) within 5 SE,
    which needs every jump; Poisson's generated gaps are Exp(rate)."""
    from jaxcore.tpp import generate

    mu, a, b, Tw = 0.2, 0.8, 1.0, 20.0
    empty = EventBatch.from_sequences([[]] * 400, T=1.0, max_events=1)
    g = generate(jax.random.key(3), Hawkes(mu, a, b).jump_diffusion(), empty, num_events=64, horizon=50.0,
                 method="exact")
    t = np.asarray(g.time, np.float64)
    assert np.all(np.diff(t, axis=1) >= 0) and bool(jnp.all(g.accepted[:, :10]))
    counts = np.sum((t <= Tw) & np.asarray(g.accepted), axis=1)
    c = b - a
    m = b * mu / c
    expected = m * Tw + (mu - m) * (1 - np.exp(-c * Tw)) / c
    assert abs(counts.mean() - expected) < 5 * counts.std() / np.sqrt(len(counts)), (counts.mean(), expected)
    hist = EventBatch.from_sequences([[0.5, 1.0]] * 200, T=1.0)
    p = generate(jax.random.key(4), Poisson(2.0).jump_diffusion(), hist, num_events=5, horizon=20.0, method="exact")
    gaps = np.diff(np.concatenate([np.full((200, 1), 1.0), np.asarray(p.time, np.float64)], 1), axis=1).ravel()
    assert stats.kstest(gaps, stats.expon(scale=0.5).cdf).pvalue > 1e-3
    from jaxcore.tpp import NJDTPP

    nj = generate(jax.random.key(5), NJDTPP(2, key=jax.random.key(6), width=8), EventBatch.from_sequences(
        [[0.4, 1.1], [0.8]], [[0, 1], [1]], T=2.0, num_marks=2), num_events=6, horizon=30.0)
    assert np.all(np.diff(np.asarray(nj.time), axis=1) > 0) and bool(jnp.all(nj.time[:, 0] > jnp.array([1.1, 0.8])))
    with pytest.raises(ValueError, match="num_events: expected"):
        generate(jax.random.key(4), Poisson(2.0).jump_diffusion(), hist, num_events=0, horizon=1.0)


class _BrownianLogIntensity(JumpDiffusion):
    """``d eta = a dt + s dW + c dN`` for one type, ``eta(0) = e0``."""

    stochastic = True
    e0: float = 0.0
    a: float = 0.0
    s: float = 0.5
    c: float = 0.0

    def initial_state(self):
        return jnp.full((1,), self.e0)

    def drift(self, t, eta):
        return jnp.full_like(eta, self.a)

    def diffusion(self, t, eta):
        return jnp.full_like(eta, self.s)

    def jump(self, t, eta):
        return jnp.full((1, 1), self.c, eta.dtype)


def test_generate_with_its_brownian_part_has_the_lognormal_mean_count():
    """eta = log(lam0) + s W (no drift, no jumps): E N(H) = lam0 (2 / s^2)(e^{s^2 H / 2} - 1), 4.71 events at
    lam0 = 1, s = 0.4, H = 4 (about 12 SE above the drift-only path's Poisson mean lam0 H = 4, also checked)."""
    from jaxcore.tpp import generate

    s, H, B = 0.4, 4.0, 2000
    dyn = _BrownianLogIntensity(s=s)
    empty = EventBatch.from_sequences([[]] * B, T=1.0, max_events=1)
    kw = {"num_events": 96, "horizon": 8.0, "num_grid": 512}
    expected = 2.0 / s**2 * np.expm1(s**2 * H / 2)
    for stochastic, want in ((True, expected), (False, H)):
        g = generate(jax.random.key(11), dyn, empty, stochastic=stochastic, **kw)
        t = np.asarray(g.time, np.float64)
        assert np.all(np.diff(t, axis=1) >= 0)
        assert np.all((t[:, -1] > H) | ~np.asarray(g.accepted[:, -1]))  # the buffer outlasts [0, H]
        counts = np.sum((t <= H) & np.asarray(g.accepted), axis=1)
        se = counts.std() / np.sqrt(B)
        assert abs(counts.mean() - want) < 5 * se, (stochastic, counts.mean(), want, se)
    with pytest.raises(ValueError, match="method"):
        generate(jax.random.key(0), dyn, empty, method="exact", stochastic=True, **kw)
    with pytest.raises(TypeError, match="stochastic"):
        generate(jax.random.key(0), dyn, empty, stochastic=1, **kw)


@pytest.mark.slow
def test_generate_with_its_brownian_part_matches_a_brute_force_simulation():
    """With drift, diffusion and a jump at each event (the state at the drawn time comes from the Brownian bridge
    and every later event depends on it), the mean count on [0, 3] and the mean first and third event times
    against a NumPy simulation on a fine grid (Bernoulli events of probability lam dt per step), within 5
    combined SE."""
    from jaxcore.tpp import generate

    dyn = _BrownianLogIntensity(e0=0.0, a=0.3, s=0.5, c=-0.4)
    H, B = 3.0, 4000
    empty = EventBatch.from_sequences([[]] * B, T=1.0, max_events=1)
    g = generate(jax.random.key(12), dyn, empty, num_events=40, horizon=6.0, num_grid=768, stochastic=True)
    t = np.asarray(g.time, np.float64)
    acc = np.asarray(g.accepted)
    ours = np.sum((t <= H) & acc, axis=1)
    rng = np.random.default_rng(0)
    dt, n_steps = 2e-3, int(H / 2e-3)
    eta = np.zeros(B)
    count = np.zeros(B)
    first = np.full(B, np.nan)
    third = np.full(B, np.nan)
    for i in range(n_steps):
        ev = rng.uniform(size=B) < np.exp(eta) * dt
        count += ev
        first = np.where(ev & np.isnan(first), (i + 1) * dt, first)
        third = np.where(ev & (count == 3) & np.isnan(third), (i + 1) * dt, third)
        eta = eta + 0.3 * dt + 0.5 * np.sqrt(dt) * rng.standard_normal(B) - 0.4 * ev
    for name, a, b in (("count", ours, count),
                       ("first time", np.where(acc[:, 0] & (t[:, 0] <= H), t[:, 0], np.nan), first),
                       ("third time", np.where(acc[:, 2] & (t[:, 2] <= H), t[:, 2], np.nan), third)):
        a, b = a[~np.isnan(a)], b[~np.isnan(b)]
        se = np.sqrt(a.var() / len(a) + b.var() / len(b))
        assert abs(a.mean() - b.mean()) < 5 * se, (name, a.mean(), b.mean(), se)


@pytest.mark.slow
def test_sample_next_with_its_brownian_part_matches_a_brute_force_simulation():
    """After one event at t1 = 1e-3, the next event of d eta = dW - 0.4 dN from eta(0) = 0: the
    mean of min(next gap, 3) over 20 sequences x 200 draws against a NumPy simulation on a fine grid (the
    history's own Brownian step included: each sequence has one history path), within 5 combined SE. Little
    power against a missing diffusion at this size (the drift-only draws: 1.320 vs the simulation's 1.257, SE
    0.023); the generate tests above carry that check."""
    from jaxcore.tpp import sample_next

    dyn = _BrownianLogIntensity(e0=0.0, a=0.0, s=1.0, c=-0.4)
    t1, cap, B, S = 1e-3, 3.0, 20, 200
    hist = EventBatch.from_sequences([[t1]] * B, T=t1)
    kw = {"horizon": 6.0, "num_grid": 768, "num_samples": S}
    s = sample_next(jax.random.key(13), dyn, hist, stochastic=True, **kw)
    assert s.time.shape == (B, 1, S)
    got = np.minimum(np.asarray(s.time, np.float64)[:, 0] - t1, cap).ravel()
    rng = np.random.default_rng(1)
    n, dt = B * S, 2e-3
    eta = np.sqrt(t1) * rng.standard_normal(n) - 0.4
    first = np.full(n, cap)
    for i in range(int(cap / dt)):
        ev = (rng.uniform(size=n) < np.exp(eta) * dt) & (first == cap)
        first = np.where(ev, (i + 1) * dt, first)
        eta = eta + np.sqrt(dt) * rng.standard_normal(n)
    se = np.sqrt(got.var() / n + first.var() / n)
    assert abs(got.mean() - first.mean()) < 5 * se, (got.mean(), first.mean(), se)


def test_metrics_refuse_nothing_to_average():
    # issue 48 item 19: nll_per_event on empty input and ks_statistic all-masked returned 0.
    with pytest.raises(ValueError, match="^log_likelihood: expected at least one sequence"):
        nll_per_event(jnp.zeros(0), jnp.zeros(0, jnp.int32))
    assert float(nll_per_event(jnp.array([-3.0]), jnp.array([0]))) == 3.0  # documented: a total of 0 counts as 1
    with pytest.raises(ValueError, match="^mask: expected at least one valid sample, got an all-False mask"):
        ks_statistic(jnp.array([0.1, 0.7]), jnp.array([False, False]))
    with pytest.raises(ValueError, match="^samples: expected at least one valid sample, got an empty array"):
        ks_statistic(jnp.zeros(0))
    x = jnp.array([0.1, 0.7, 2.0, 5.0])
    d = float(ks_statistic(x, jnp.array([True, True, True, False])))
    assert d == pytest.approx(stats.kstest([0.1, 0.7, 2.0], "expon").statistic, abs=1e-6)
