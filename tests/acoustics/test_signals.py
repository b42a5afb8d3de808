"""Signal kernels against NumPy, pyroomacoustics' measure_rt60 and closed forms."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.acoustics import (Room, acoustic_metrics, eyring_t60, fft_convolve, highpass, image_source_rir,
                               multi_resolution_stft_loss, reverberation_time, sabine_t60, schroeder_decay,
                               stft_error, wiener_deconvolve)


@pytest.fixture(scope="module")
def ism_rir():
    room = Room([5.0, 4.0, 3.0], absorption=0.3, fs=8000.0)
    return np.asarray(image_source_rir(room, [[1.2, 1.1, 1.3], [1.2, 1.1, 1.3]], [[3.9, 2.7, 1.5], [2.1, 3.3, 2.0]],
                                       order=24, num_samples=2048))


def test_fft_convolve_equals_numpy(x64):
    rng = np.random.default_rng(0)
    x, h = rng.normal(size=(3, 37)), rng.normal(size=(3, 21))
    y = fft_convolve(x, h)
    np.testing.assert_allclose(y, np.stack([np.convolve(a, b) for a, b in zip(x, h)]), atol=1e-12)


def test_schroeder_decay_by_hand(x64):
    h = np.random.default_rng(1).normal(size=50)
    e = np.cumsum((h**2)[::-1])[::-1]
    np.testing.assert_allclose(schroeder_decay(h), 10 * np.log10(e / e[0]), atol=1e-10)


@pytest.mark.parametrize("decay_db", [20.0, 30.0, 60.0])
def test_t60_equals_pyroomacoustics_measure_rt60(ism_rir, decay_db):
    exp = pytest.importorskip("pyroomacoustics.experimental")
    got = reverberation_time(ism_rir, 8000.0, decay_db=decay_db)
    for i in range(2):
        want = exp.measure_rt60(ism_rir[i], fs=8000, decay_db=decay_db)
        assert abs(float(got[i]) - want) <= 1e-4 * want


def test_metrics_closed_forms_and_batch():
    fs = 8000.0
    t = jnp.arange(2048) / fs
    noise = jax.random.normal(jax.random.key(0), (2048,))
    h = jnp.exp(-3 * np.log(10) * t / 0.2) * noise  # energy decays 60 dB in 0.2 s
    # impulses: 2 at the onset (sample 10), 1 within 2.5 ms (sample 25), 1 after 50 ms (sample 1000)
    g = jnp.zeros(2048).at[10].set(2.0).at[25].set(1.0).at[1000].set(1.0)
    m = acoustic_metrics(jnp.stack([h, g]), fs)
    assert m.t60.shape == (2,)
    assert abs(float(m.t60[0]) - 0.2) < 0.01 and abs(float(m.edt[0]) - 0.2) < 0.02
    np.testing.assert_allclose(float(m.c50[1]), 10 * np.log10(5.0), rtol=1e-5)
    np.testing.assert_allclose(float(m.d50[1]), 5.0 / 6.0, rtol=1e-5)
    np.testing.assert_allclose(float(m.drr[1]), 10 * np.log10(5.0), rtol=1e-5)
    m2 = acoustic_metrics(jnp.stack([0.5 * h, g]), fs)   # scale invariant
    np.testing.assert_allclose(np.asarray(m2.t60), np.asarray(m.t60), rtol=1e-5)


def test_stft_losses():
    x = jax.random.normal(jax.random.key(0), (2, 600))
    np.testing.assert_allclose(multi_resolution_stft_loss(x, x), 0.0, atol=1e-6)
    assert np.all(np.asarray(multi_resolution_stft_loss(0.5 * x, x)) > 0.5)
    np.testing.assert_allclose(stft_error(x, x), 0.0, atol=1e-6)
    # a gain of 10 is one decade on every bin that sits above the floor
    assert 0.9 < float(stft_error(10 * x[0], x[0])) < 1.01
    with pytest.raises(ValueError, match="pred: expected the shape of target"):
        multi_resolution_stft_loss(x[:, :10], x)


def test_highpass_equals_scipy_sosfiltfilt_inside(ism_rir):
    """The zero-phase FFT high-pass has filtfilt's 2nd-order Butterworth gain: equal away from the edges
    (scipy pads the ends by odd extension), and it removes the ISM's positive offset."""
    signal = pytest.importorskip("scipy.signal")
    sos = signal.butter(2, 30.0, btype="highpass", fs=8000.0, output="sos")
    ref = signal.sosfiltfilt(sos, ism_rir.astype(np.float64), axis=-1)
    got = np.asarray(highpass(ism_rir, 8000.0, 30.0))
    inner = slice(0, 1800)
    assert np.linalg.norm(got[:, inner] - ref[:, inner]) / np.linalg.norm(ref[:, inner]) < 1e-3
    assert abs(got[:, 200:].mean()) < 0.05 * abs(ism_rir[:, 200:].mean())


def test_wiener_deconvolution_recovers_rir(ism_rir):
    probe = jax.random.normal(jax.random.key(0), (512,))
    y = fft_convolve(probe, ism_rir)
    h = wiener_deconvolve(y, probe, 2048, snr_db=80.0)
    assert float(jnp.linalg.norm(h - ism_rir) / np.linalg.norm(ism_rir)) < 1e-3


@pytest.mark.slow
def test_t60_of_a_long_ism_decay_near_eyring_and_sabine():
    """A cube with uniform walls, order 60 (a full 60 dB decay): the ISM's T30 lies above Eyring's and
    within 25% above Sabine's (measured: T30 0.420 s, Sabine 0.358 s, Eyring 0.301 s; purely specular
    reflections in a uniform shoebox keep axial and tangential energy that decays slower than the diffuse
    field Sabine and Eyring assume, a known bias of the image-source method)."""
    room = Room([4.0, 4.0, 4.0], absorption=0.3, fs=8000.0)
    h = image_source_rir(room, [[1.1, 1.3, 1.7]], [[2.9, 2.6, 2.2]], order=60, num_samples=4000)
    t30 = float(reverberation_time(h, 8000.0, decay_db=30.0)[0])
    ey, sa = float(eyring_t60(room)), float(sabine_t60(room))
    assert ey <= sa <= t30 <= 1.25 * sa, (t30, ey, sa)
