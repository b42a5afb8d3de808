"""The neural acoustic field: reciprocity by construction, self-supervised training, baselines, bad input."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.acoustics import (AcousticField, Room, inverse_distance_rir, nearest_neighbour_rir, predict_rir,
                               random_pairs, rir_errors, simulate_probing, train_field)

DIMS = [5.0, 4.0, 3.0]


def _field(**kw):
    # the shapes of the docstring examples, so the compiled programs are shared
    return AcousticField(DIMS, 64, key=jax.random.key(0), width=16, depth=1, fs=8000.0, env_hop=16, **kw)


def test_reciprocity_exact_by_construction():
    f = _field()
    s = jax.random.uniform(jax.random.key(1), (5, 3)) * jnp.asarray(DIMS)
    r = jax.random.uniform(jax.random.key(2), (5, 3)) * jnp.asarray(DIMS)
    assert np.array_equal(np.asarray(predict_rir(f, s, r)), np.asarray(predict_rir(f, r, s)))


def test_ablation_without_reciprocity_is_not_symmetric():
    f = _field(reciprocal=False)
    s, r = jnp.array([[1.0, 1.0, 1.0]]), jnp.array([[1.3, 1.2, 1.0]])  # arrival at sample 51 of 64
    a, b = np.asarray(predict_rir(f, s, r))[0, 56:], np.asarray(predict_rir(f, r, s))[0, 56:]
    assert np.abs(a - b).max() > 1e-3 * np.abs(a).max()


def test_direct_path_is_the_free_field_arrival():
    f = _field()
    s, r = jnp.array([[1.0, 1.0, 1.0]]), jnp.array([[1.5, 1.0, 1.0]])
    h = np.asarray(predict_rir(f, s, r))[0]
    tau = 0.5 * 8000 / 343 + 40
    assert np.argmax(np.abs(h)) == round(tau)
    assert abs(h[round(tau)] - np.sinc(round(tau) - tau) * (0.5 + 0.5 * np.cos(np.pi * (round(tau) - np.floor(tau)) / 41))
               / (4 * np.pi * 0.5)) < 0.05 / (4 * np.pi * 0.5)


@pytest.fixture(scope="module")
def probing():
    # the shapes of train_field's docstring example (2 pairs, 64 taps, a 32-sample probe): one compile
    room = Room(DIMS, absorption=0.4, fs=8000.0)
    s, r = random_pairs(jax.random.key(0), room, 2)
    return simulate_probing(jax.random.key(1), room, s, r, order=4, num_samples=64, probe_length=32)


def test_self_supervised_training_reads_recordings_only(probing):
    data = probing
    f = _field()
    res = train_field(jax.random.key(3), f, data.sources, data.receivers, data.recordings, probe=data.probe,
                      num_steps=3, batch_size=2)
    assert res.history.shape == (3,) and np.all(np.isfinite(res.history))
    # the same recordings with the RIRs wiped give the same run: the RIRs are never read
    data2 = data._replace(rirs=jnp.zeros_like(data.rirs))
    res2 = train_field(jax.random.key(3), f, data2.sources, data2.receivers, data2.recordings, probe=data2.probe,
                       num_steps=3, batch_size=2)
    np.testing.assert_array_equal(res.history, res2.history)
    # and the loss goes down on a longer run of the same program's shapes
    assert float(res.history[-1]) < float(res.history[0]) + 1e-3


def test_baselines_by_hand():
    ts = jnp.array([[1.0, 1.0, 1.0], [3.0, 3.0, 1.0], [4.0, 1.0, 2.0]])
    tr = jnp.array([[2.0, 2.0, 1.0], [4.0, 1.0, 1.0], [1.0, 3.0, 2.0]])
    th = jnp.arange(3.0)[:, None] * jnp.ones((3, 4))
    # the swapped training pair is found with reciprocity, not without
    q_s, q_r = tr[1:2], ts[1:2]
    assert float(nearest_neighbour_rir(ts, tr, th, q_s, q_r)[0, 0]) == 1.0
    assert float(nearest_neighbour_rir(ts, tr, th, q_s, q_r, reciprocal=False)[0, 0]) != 1.0
    d = np.sqrt(((np.asarray(ts) - [2.0, 2.0, 2.0]) ** 2).sum(1) + ((np.asarray(tr) - [3.0, 2.0, 1.0]) ** 2).sum(1))
    w = d**-2.0
    want = (w * np.arange(3.0)).sum() / w.sum()
    got = inverse_distance_rir(ts, tr, th, jnp.array([[2.0, 2.0, 2.0]]), jnp.array([[3.0, 2.0, 1.0]]),
                               num_neighbours=3, reciprocal=False)
    np.testing.assert_allclose(got[0], want, rtol=1e-5)


def test_rir_errors_zero_on_truth_and_positive_otherwise():
    t = jnp.arange(4000) / 8000.0
    h = (jnp.exp(-6.9 * t / 0.3) * jax.random.normal(jax.random.key(0), (4000,)))[None]
    e = rir_errors(h, h, 8000.0)
    assert all(float(jnp.max(v)) < 1e-5 for v in e)
    g = (jnp.exp(-6.9 * t / 0.4) * jax.random.normal(jax.random.key(1), (4000,)))[None]
    e2 = rir_errors(g, h, 8000.0)
    assert abs(float(e2.t60_pct[0]) - 100 / 3) < 5 and float(e2.stft[0]) > 0.1


def test_bad_input_refused():
    f = _field()
    s = jnp.ones((2, 3))
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        train_field(0, f, s, s + 1, jnp.zeros((2, 64)))
    with pytest.raises(ValueError, match="targets: expected \\[2, 64\\] RIRs"):
        train_field(jax.random.key(0), f, s, s + 1, jnp.zeros((2, 63)))
    with pytest.raises(ValueError, match="targets: expected \\[2, T \\+ N - 1\\] recordings"):
        train_field(jax.random.key(0), f, s, s + 1, jnp.zeros((2, 64)), probe=jnp.ones(8))
    with pytest.raises(ValueError, match="num_steps: expected an int >= 1"):
        train_field(jax.random.key(0), f, s, s + 1, jnp.zeros((2, 64)), num_steps=0)
    with pytest.raises(ValueError, match="targets: expected finite values"):
        train_field(jax.random.key(0), f, s, s + 1, jnp.full((2, 64), jnp.nan))
    with pytest.raises(ValueError, match="pred: expected finite values"):
        rir_errors(jnp.full((1, 64), jnp.inf), jnp.ones((1, 64)), 8000.0)
    with pytest.raises(TypeError, match="progress: expected a bool or a callable"):
        train_field(jax.random.key(0), f, s, s + 1, jnp.zeros((2, 64)), progress="yes")
    with pytest.raises(ValueError, match="dims: expected three finite room sizes"):
        AcousticField([1.0, 2.0], 64, key=jax.random.key(0))
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        AcousticField(DIMS, 64, key=1)
    with pytest.raises(ValueError, match="sources: expected a \\[P, 3\\]"):
        predict_rir(f, jnp.ones((2, 2)), jnp.ones((2, 2)))
    with pytest.raises(ValueError, match="num_neighbours: expected an int in \\[1, 1\\]"):
        inverse_distance_rir(s[:1], s[:1] + 1, jnp.ones((1, 4)), s, s + 1, num_neighbours=2)
