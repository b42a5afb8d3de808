"""Neural TPP baselines (RMTPP, NHP, THP, SAHP, IFTPP): oracles for the shared interface."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxcore import tpp
from jaxcore.tpp import IFTPP, NHP, RMTPP, SAHP, THP, EventBatch

SEQS = ([[0.3, 0.9, 1.0, 2.6], [1.5, 3.0], []], [[0, 1, 1, 0], [1, 0], []])


def _batch(K=2, dtype=None):
    if K == 1:
        return EventBatch.from_sequences(SEQS[0], T=4.0, dtype=dtype)
    return EventBatch.from_sequences(SEQS[0], SEQS[1], T=4.0, num_marks=2, dtype=dtype)


def _renewal_rmtpp(b, w, dtype):
    """RMTPP with its history switched off: lambda(t_i + tau) = exp(b + w tau), a renewal process."""
    m = RMTPP(1, key=jax.random.key(0), hidden=4, embed=2, dtype=dtype)
    return eqx.tree_at(lambda m: (m.head.weight, m.head.bias, m.w), m,
                       (jnp.zeros_like(m.head.weight), jnp.full((1,), b, dtype), jnp.full((1,), w, dtype)))


def test_rmtpp_reproduces_a_closed_form_renewal_likelihood(x64):
    b, w = -0.4, -0.3
    m = _renewal_rmtpp(b, w, jnp.float64)
    batch = _batch(1, jnp.float64)
    got = np.asarray(m.log_likelihood(batch))
    for i, seq in enumerate(SEQS[0]):
        gaps = np.diff(np.concatenate([[0.0], seq, [4.0]]))
        comp = sum(math.exp(b) * math.expm1(w * g) / w for g in gaps)
        assert got[i] == pytest.approx(sum(b + w * g for g in gaps[:-1]) - comp, rel=1e-12)
    # the closed-form compensator equals the generic Gauss-Legendre one
    class Quad(RMTPP):
        closed_compensator = False

    full = RMTPP(2, key=jax.random.key(1), hidden=4, embed=2, dtype=jnp.float64)
    quad = Quad.__new__(Quad)
    for f in ("embedding", "cell", "s0", "head", "w"):
        object.__setattr__(quad, f, getattr(full, f))
    np.testing.assert_allclose(np.asarray(quad.log_likelihood(_batch(2, jnp.float64), num_quadrature=24)),
                               np.asarray(full.log_likelihood(_batch(2, jnp.float64))), rtol=1e-12)
    # intensity at query times: exp(b + w (t - last event before t))
    lam = np.asarray(m.intensity(batch, jnp.array([[0.2, 0.95, 3.0]] * 3)))[..., 0]
    np.testing.assert_allclose(lam[0], np.exp(b + w * np.array([0.2, 0.05, 0.4])), rtol=1e-12)


def test_iftpp_log_normal_mixture_matches_scipy(x64):
    from scipy import stats

    m = IFTPP(2, key=jax.random.key(2), hidden=6, embed=3, num_components=3, dtype=jnp.float64)
    m = eqx.tree_at(lambda m: m.mixture.weight, m, m.mixture.weight * 20.0)  # history-dependent mixtures
    batch = _batch(2, jnp.float64)
    got = np.asarray(m.log_likelihood(batch))
    S = jax.vmap(m.states)(batch.times, batch.marks, batch.mask)
    log_w, mu, log_sig = (np.asarray(x) for x in jax.vmap(jax.vmap(m.mixture_params))(S))
    p_marks = np.asarray(jax.nn.softmax(jax.vmap(jax.vmap(m.mark_head))(S), -1))
    for i, (seq, marks) in enumerate(zip(*SEQS)):
        gaps = np.diff(np.concatenate([[0.0], seq, [4.0]]))
        ll = 0.0
        for j, g in enumerate(gaps):
            mix = stats.lognorm(s=np.exp(log_sig[i, j]), scale=np.exp(mu[i, j]))
            w = np.exp(log_w[i, j])
            if j < len(seq):
                ll += np.log(p_marks[i, j, marks[j]]) + np.log(w @ mix.pdf(g))
            else:
                ll += np.log(w @ mix.sf(g))
        assert got[i] == pytest.approx(ll, rel=1e-10, abs=1e-10)


@pytest.mark.slow
def test_thinning_samples_a_constant_rate_and_predicts():
    rate, horizon = 2.0, 8.0
    m = _renewal_rmtpp(math.log(rate), 0.0, jnp.float32)
    batch = _batch(1)
    s = m.sample_next(jax.random.key(3), batch, horizon=horizon, num_samples=400, num_proposals=32)
    assert s.time.shape == (3, 4, 400) and s.type_probs.shape == (3, 4, 400, 1)
    dt = np.asarray(s.time - batch.times[:, :, None])[0]  # Exp(rate) gaps after each event of sequence 0
    assert bool(np.all(np.asarray(s.accepted)[0]))
    assert abs(dt.mean() - 1 / rate) < 5 * (1 / rate) / math.sqrt(dt.size)
    assert abs(np.mean(dt > 1.0) - math.exp(-rate)) < 0.02
    pred = m.predict_next(jax.random.key(4), batch, horizon=horizon, num_samples=64)
    np.testing.assert_array_equal(np.asarray(pred.valid[0]), [True, True, True, False])
    assert pred.time.shape == (3, 4) and bool(jnp.all(pred.type == 0))


def test_neural_models_refuse_bad_input():
    m = THP(2, key=jax.random.key(0), d_model=4, num_heads=2, num_layers=1)
    with pytest.raises(ValueError, match="num_heads: expected a divisor of d_model"):
        THP(2, key=jax.random.key(0), d_model=6, num_heads=4)
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        NHP(1, key=0)
    with pytest.raises(ValueError, match="num_marks"):
        m.log_likelihood(_batch(1))
    with pytest.raises(ValueError, match="horizon"):
        m.sample_next(jax.random.key(0), _batch(2), horizon=0.0)
    with pytest.raises(ValueError, match="over_sample"):
        m.sample_next(jax.random.key(0), _batch(2), horizon=1.0, over_sample=0.5)


MODELS = {
    "RMTPP": lambda k, dt: RMTPP(2, key=k, hidden=4, embed=3, dtype=dt),
    "NHP": lambda k, dt: NHP(2, key=k, hidden=4, dtype=dt),
    "THP": lambda k, dt: THP(2, key=k, d_model=4, num_heads=2, num_layers=1, dtype=dt),
    "THP-easytpp": lambda k, dt: THP(2, key=k, d_model=4, num_heads=2, num_layers=2, encoder="easytpp", dtype=dt),
    "SAHP": lambda k, dt: SAHP(2, key=k, d_model=4, num_heads=2, num_layers=1, dtype=dt),
    "IFTPP": lambda k, dt: IFTPP(2, key=k, hidden=4, embed=3, num_components=2, dtype=dt),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_neural_gradients_match_finite_differences_in_float64(x64, name):
    model = MODELS[name](jax.random.key(5), jnp.float64)
    batch = _batch(2, jnp.float64)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    flat, unravel = jax.flatten_util.ravel_pytree(params)

    def f(x):
        return jnp.sum(eqx.combine(unravel(x), static).log_likelihood(batch, num_quadrature=8))

    g = np.asarray(jax.grad(f)(flat))
    assert np.all(np.isfinite(g))
    v = np.asarray(jax.random.normal(jax.random.key(6), flat.shape, jnp.float64))
    eps = 1e-6
    fd = (float(f(flat + eps * v)) - float(f(flat - eps * v))) / (2 * eps)
    assert float(g @ v) == pytest.approx(fd, rel=1e-6, abs=1e-8)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_train_fits_every_neural_model(name):
    data = tpp.synthetic_hawkes(jax.random.key(7), num_sequences=16, T=20.0, max_events=80).trim(16)
    model = {"RMTPP": lambda k: RMTPP(1, key=k, hidden=8), "NHP": lambda k: NHP(1, key=k, hidden=8),
             "THP": lambda k: THP(1, key=k, d_model=8, num_layers=1),
             "THP-easytpp": lambda k: THP(1, key=k, d_model=8, num_layers=2, encoder="easytpp"),
             "SAHP": lambda k: SAHP(1, key=k, d_model=8, num_layers=1),
             "IFTPP": lambda k: IFTPP(1, key=k, hidden=8)}[name](jax.random.key(8))
    res = tpp.train(jax.random.key(9), model, data, num_steps=60, batch_size=8, num_quadrature=8)
    assert float(jnp.mean(res.losses[-10:])) < float(jnp.mean(res.losses[:10]))
    s = res.model.sample_next(jax.random.key(10), data[:2], horizon=10.0, num_samples=4)
    assert bool(jnp.all(jnp.isfinite(s.time)))


@pytest.mark.slow
def test_generate_continues_each_history_at_a_constant_rate():
    rate = 2.0
    m = _renewal_rmtpp(math.log(rate), 0.0, jnp.float32)
    batch = _batch(1)
    g = m.generate(jax.random.key(11), batch, num_events=200, horizon=10.0, num_proposals=32)
    assert g.time.shape == (3, 200) and bool(jnp.all(g.accepted))
    start = np.array([2.6, 3.0, 0.0])  # each history's last event (0 for the empty one)
    gaps = np.diff(np.concatenate([start[:, None], np.asarray(g.time)], 1), axis=1)
    assert np.all(gaps > 0)
    assert abs(gaps.mean() - 1 / rate) < 5 * (1 / rate) / math.sqrt(gaps.size)


def test_chunked_thinning_draws_the_same():
    """``chunk_size`` maps over (sequence, position) pairs: the same draws for the same key."""
    m = NHP(2, key=jax.random.key(0), hidden=4)
    key = jax.random.key(1)
    kw = {"horizon": 3.0, "num_samples": 4, "num_proposals": 16, "num_grid": 8}
    full = m.sample_next(key, _batch(2), **kw)
    part = m.sample_next(key, _batch(2), chunk_size=5, **kw)  # 12 pairs: chunks of 5, 5 and a remainder of 2
    for a, b in zip(full, part):
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=1e-6, atol=1e-7)
    assert bool(jnp.any(full.accepted)) and int(jnp.sum(full.type == 1)) > 0
    with pytest.raises(ValueError, match="chunk_size: expected"):
        m.sample_next(key, _batch(2), chunk_size=0, **kw)


@pytest.mark.slow
def test_chunked_thinning_needs_less_memory():
    """The full-history AttNHP's thinning: XLA's temporary memory shrinks with the chunk (B L samples
    (grid + proposals) intensity evaluations at once, each O(L), without one)."""
    from jaxcore.tpp import AttNHP

    m = AttNHP(1, key=jax.random.key(0), d_model=8, num_heads=2, num_layers=1)
    data = tpp.synthetic_poisson(jax.random.key(2), num_sequences=8, T=40.0, max_events=128).trim(64)

    def temp(c):
        f = jax.jit(lambda k: m.sample_next(k, data, horizon=3.0, chunk_size=c).time)
        return f.lower(jax.random.key(1)).compile().memory_analysis().temp_size_in_bytes

    full, chunked = temp(None), temp(32)
    assert chunked < full / 4, (full, chunked)
