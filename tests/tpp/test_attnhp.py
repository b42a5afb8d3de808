"""AttNHP (attentive neural Hawkes process): oracles for its layer equations and the shared interface."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxcore import tpp
from jaxcore.tpp import AttNHP, EventBatch

SEQS = ([[0.3, 0.9, 1.0, 2.6], [1.5, 3.0], []], [[0, 1, 1, 0], [1, 0], []])
T = 4.0


def _batch(dtype=jnp.float64, max_events=5, seqs=SEQS):
    """The test batch, padded to 5 events by default (the shapes shared by the tests' compiled programs)."""
    return EventBatch.from_sequences(seqs[0], seqs[1], T=T, num_marks=2, dtype=dtype, max_events=max_events)


def _model(dtype=jnp.float64, vivid=True, **kw):
    """A tiny AttNHP; ``vivid`` scales the weights up so that the intensity varies visibly between events."""
    kw = {"d_model": 4, "num_heads": 2, "num_layers": 2, **kw}
    m = AttNHP(2, key=jax.random.key(0), dtype=dtype, **kw)
    if vivid:
        m = eqx.tree_at(lambda m: (m.embedding, m.query, m.head.weight), m,
                        (m.embedding * 4, m.query * 4, m.head.weight * 40))
        m = eqx.tree_at(lambda m: [layer.weight for layer in m.qkv], m, [layer.weight * 3 for layer in m.qkv])
    return m


def _features(t, d):
    j = np.arange(d // 2 + d % 2)
    ang = t / 10000.0 ** (2 * j / d)
    return np.concatenate([np.sin(ang), np.cos(ang)])[:d]


def _reference_intensity(model, times, marks, t, window=None):
    """Yang, Mei & Eisner (2022) eqs. for one query time ``t``, event by event in NumPy (float64); with a
    ``window`` W every embedding attends to its last W past events only."""
    d, h = model.query.shape[0], model.num_heads
    dh = d // h
    past = [(tj, kj) for tj, kj in zip(times, marks) if tj < t]
    x_ev = [np.asarray(model.embedding[k], np.float64) for _, k in past]  # layer 0 of each event
    x_q = np.asarray(model.query, np.float64)
    for layer in model.qkv:
        W, b = np.asarray(layer.weight, np.float64), np.asarray(layer.bias, np.float64)

        def proj(tt, x, part):
            return W[part * d:(part + 1) * d] @ np.concatenate([_features(tt, d), x]) + b[part * d:(part + 1) * d]

        keys = [proj(tj, x, 1) for (tj, _), x in zip(past, x_ev)]
        vals = [proj(tj, x, 2) for (tj, _), x in zip(past, x_ev)]

        def attend(q, n):  # over the first n events (the last W of them), with the "1 +" null term
            out = np.zeros(d)
            js = range(0 if window is None else max(0, n - window), n)
            for hh in range(h):
                sl = slice(hh * dh, (hh + 1) * dh)
                a = np.array([math.exp(q[sl] @ keys[j][sl] / math.sqrt(dh)) for j in js])
                v = np.array([vals[j][sl] for j in js]).reshape(len(js), dh)
                out[sl] = (a @ v) / (1.0 + a.sum())
            return out

        new_ev = [x + np.tanh(attend(proj(tj, x, 0), j)) for j, ((tj, _), x) in enumerate(zip(past, x_ev))]
        x_q = x_q + np.tanh(attend(proj(t, x_q, 0), len(past)))
        x_ev = new_ev
    z = np.asarray(model.head.weight, np.float64) @ x_q + np.asarray(model.head.bias, np.float64)
    return np.logaddexp(0.0, z)


def test_intensity_matches_the_layer_equations_event_by_event(x64):
    m = _model()
    batch = _batch()
    q = np.array([[0.1, 0.3, 0.95, 1.0, 3.9], [0.1, 1.5, 2.0, 3.0, 3.9], [0.1, 0.5, 1.0, 2.0, 3.9]])
    got = np.asarray(m.intensity(batch, jnp.asarray(q)))  # 0.3, 1.0, 1.5, 3.0 are event times: strictly before
    for b, (seq, marks) in enumerate(zip(*SEQS)):
        for j, t in enumerate(q[b]):
            np.testing.assert_allclose(got[b, j], _reference_intensity(m, seq, marks, t), rtol=1e-11)
    # the intensity moves between events (the query embeds t), unlike a constant between events
    assert abs(got[0, 4, 0] - _reference_intensity(m, SEQS[0][0], SEQS[1][0], 2.7)[0]) > 1e-2 * got[0, 4, 0]
    # with no past event the attention adds nothing (the "1 +" null term): lambda = softplus(W query + b)
    closed = np.logaddexp(0.0, np.asarray(m.head.weight) @ np.asarray(m.query) + np.asarray(m.head.bias))
    np.testing.assert_allclose(got[2, :3], np.broadcast_to(closed, (3, 2)), rtol=1e-13)


def test_history_window_matches_the_windowed_equations(x64):
    batch = _batch()
    q = jnp.asarray([[0.1, 0.95, 1.0, 2.0, 3.9]] * 3)
    w2 = _model(max_history=2)
    got = np.asarray(w2.intensity(batch, q))
    for b, (seq, marks) in enumerate(zip(*SEQS)):
        for j, t in enumerate(np.asarray(q[b])):
            np.testing.assert_allclose(got[b, j], _reference_intensity(w2, seq, marks, t, window=2), rtol=1e-11)
    full = np.asarray(_model().intensity(batch, q))
    assert not np.allclose(got[0, 3:], full[0, 3:])  # 3 or 4 past events: the window cuts
    np.testing.assert_allclose(got[:, :2], full[:, :2], rtol=1e-13)  # at most 2 past events: the same model
    # a window of 4 on sequences of at most 4 events: the full model through the windowed state
    w4 = _model(max_history=4)
    np.testing.assert_allclose(np.asarray(w4.intensity(batch, q)), full, rtol=1e-13)


def test_intensity_is_causal(x64):
    m = _model()
    seq, marks = [0.3, 0.9, 1.0, 2.6], [0, 1, 1, 0]
    q = jnp.array([[0.95, 1.0, 1.02, 2.0, 3.0]] * 3)
    base = _batch(seqs=([seq] * 3, [marks] * 3))
    # events at and after 1.0 changed (times, types, one more event) in row 1; the first event moved in row 2
    other = _batch(seqs=([seq, [0.3, 0.9, 1.05, 1.1, 3.5], [0.5, 0.9, 1.0, 2.6]],
                         [marks, [0, 1, 0, 1, 1], marks]))
    a, b = np.asarray(m.intensity(base, q)), np.asarray(m.intensity(other, q))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1, :2], b[1, :2])  # at 0.95 and 1.0 (events strictly before) the same
    assert not np.allclose(a[1, 2:], b[1, 2:])  # from 1.02 on the changed event at 1.0 is history
    assert not np.allclose(a[2, 0], b[2, 0])  # and the past matters: the moved first event changes 0.95


def test_compensator_matches_a_dense_integral_of_the_intensity(x64):
    m = _model()
    batch = _batch()
    parts = m.log_likelihood_parts(batch, num_quadrature=24)
    n, width = 2000, 5 * 2000  # midpoint rule on each inter-event interval (never at an event time)
    mids, widths = np.zeros((3, width)), np.zeros((3, width))
    for b, seq in enumerate(SEQS[0]):
        edges = np.concatenate([[0.0], seq, [T]])
        k = n * (len(edges) - 1)
        mids[b, :k] = np.concatenate([a + (np.arange(n) + 0.5) * (c - a) / n for a, c in zip(edges[:-1], edges[1:])])
        widths[b, :k] = np.repeat(np.diff(edges) / n, n)
    lam = np.asarray(m.intensity(batch, jnp.asarray(mids))).sum(-1)  # one [3, 10000] program
    for b, seq in enumerate(SEQS[0]):
        k = len(seq)
        assert float(parts.compensator[b]) == pytest.approx(float(widths[b] @ lam[b]), rel=1e-7)
        np.testing.assert_allclose(np.asarray(parts.interval_compensator[b, :k]),  # interval by interval
                                   (widths[b] * lam[b])[:n * k].reshape(k, n).sum(1), rtol=1e-7)
    # and the log-intensity term is sum_i log lambda_{m_i}(t_i) of the intensity at the events (same program
    # shape as test_intensity_matches...: [3, 5] queries)
    lam_ev = np.asarray(m.intensity(batch, batch.times))
    want = [sum(math.log(lam_ev[b, i, k]) for i, k in enumerate(SEQS[1][b])) for b in range(3)]
    np.testing.assert_allclose(np.asarray(parts.log_intensity), want, rtol=1e-12)


def test_log_likelihood_is_padding_invariant_and_compiled_once(x64, compiles):
    m = _model()
    short, long = _batch(), _batch(max_events=9)
    a = np.asarray(m.log_likelihood(short, num_quadrature=24))
    assert np.all(np.isfinite(a))
    np.testing.assert_allclose(np.asarray(m.log_likelihood(long, num_quadrature=24)), a, rtol=1e-12)
    other = eqx.tree_at(lambda m: m.query, m, -m.query)  # new weights, same structure and shapes
    with compiles() as c:
        b = other.log_likelihood(short, num_quadrature=24)
    assert len(c) == 0 and not np.allclose(np.asarray(b), a)


def test_gradient_matches_finite_differences_in_float64(x64):
    model = _model()
    batch = _batch()
    params, static = eqx.partition(model, eqx.is_inexact_array)
    flat, unravel = jax.flatten_util.ravel_pytree(params)

    def f(x):
        return jnp.sum(eqx.combine(unravel(x), static).log_likelihood(batch, num_quadrature=24))

    g = np.asarray(jax.grad(f)(flat))
    assert np.all(np.isfinite(g)) and np.all(np.abs(g) > 0).any()
    v = np.asarray(jax.random.normal(jax.random.key(6), flat.shape, jnp.float64))
    eps = 1e-6
    fd = (float(f(flat + eps * v)) - float(f(flat - eps * v))) / (2 * eps)
    assert float(g @ v) == pytest.approx(fd, rel=1e-6, abs=1e-8)


@pytest.mark.slow
def test_thinning_mean_next_time_matches_the_intensity(x64):
    m = _model()
    seq, marks = SEQS[0][0], SEQS[1][0]
    horizon, S = 3.0, 1000
    batch = EventBatch.from_sequences([seq], [marks], T=T, num_marks=2, dtype=jnp.float64)
    s = m.sample_next(jax.random.key(3), batch, horizon=horizon, num_samples=S, num_proposals=64)
    dt = np.asarray(s.time[0] - batch.times[0][:, None])  # [L, S], censored at the horizon
    n = 4000
    for i in range(len(seq)):
        # the history of position i: events 0..i (same padded length, one compiled program)
        hist = EventBatch.from_sequences([seq[:i + 1]], [marks[:i + 1]], T=seq[i] + horizon, num_marks=2,
                                         dtype=jnp.float64, max_events=len(seq))
        mids = (np.arange(n) + 0.5) * horizon / n
        lam = np.asarray(m.intensity(hist, jnp.asarray(seq[i] + mids[None])))[0].sum(-1)
        survival = np.exp(-np.concatenate([[0.0], np.cumsum(lam * horizon / n)]))
        want = float(np.sum((survival[:-1] + survival[1:]) / 2) * horizon / n)  # E[min(tau, horizon)]
        se = dt[i].std() / math.sqrt(S)
        assert abs(dt[i].mean() - want) < 5 * se, (i, dt[i].mean(), want, se)
        assert lam.max() > 1.2 * lam.min()  # a varying intensity, not a constant rate


@pytest.mark.slow
def test_train_lowers_the_nll_on_hawkes_data():
    data = tpp.synthetic_hawkes(jax.random.key(7), num_sequences=16, T=20.0, max_events=80).trim(16)
    model = AttNHP(1, key=jax.random.key(8), d_model=8, num_layers=1)
    res = tpp.train(jax.random.key(9), model, data, num_steps=60, batch_size=8, num_quadrature=8)
    assert float(jnp.mean(res.losses[-10:])) < float(jnp.mean(res.losses[:10]))
    s = res.model.sample_next(jax.random.key(10), data[:2], horizon=10.0, num_samples=4)
    assert bool(jnp.all(jnp.isfinite(s.time)))


def test_attnhp_refuses_bad_input():
    with pytest.raises(ValueError, match="num_heads: expected a divisor of d_model=6"):
        AttNHP(2, key=jax.random.key(0), d_model=6, num_heads=4)
    with pytest.raises(ValueError, match="num_layers: expected an int >= 1"):
        AttNHP(2, key=jax.random.key(0), num_layers=0)
    with pytest.raises(ValueError, match="num_marks: expected an int >= 1"):
        AttNHP(0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="d_model: expected an int >= 2"):
        AttNHP(1, key=jax.random.key(0), d_model=1, num_heads=1)
    with pytest.raises(TypeError, match="d_model: expected an int"):
        AttNHP(1, key=jax.random.key(0), d_model=8.0)
    with pytest.raises(ValueError, match="max_history: expected an int >= 1"):
        AttNHP(1, key=jax.random.key(0), max_history=0)
    with pytest.raises(ValueError, match="init_rate: expected a finite number > 0"):
        AttNHP(1, key=jax.random.key(0), init_rate=0.0)
    with pytest.raises(TypeError, match="init_rate: expected a real number"):
        AttNHP(1, key=jax.random.key(0), init_rate="fast")
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        AttNHP(1, key=0)
    with pytest.raises(TypeError, match="dtype: expected"):
        AttNHP(1, key=jax.random.key(0), dtype=jnp.int32)
    m = _model(jnp.float32, vivid=False)
    with pytest.raises(ValueError, match="num_marks"):
        m.log_likelihood(EventBatch.from_sequences([[0.5]], T=1.0))
    with pytest.raises(ValueError, match="horizon"):
        m.sample_next(jax.random.key(0), _batch(jnp.float32), horizon=0.0)
