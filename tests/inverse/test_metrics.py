"""Tests of jaxcore.inverse.metrics: PSNR closed form, SSIM against scikit-image."""

import jax.numpy as jnp
import numpy as np
import pytest
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from jaxcore.datasets import load_image
from jaxcore.inverse import psnr, ssim


def test_psnr_closed_form_and_skimage():
    x = jnp.zeros((2, 8, 8, 3))
    ref = jnp.full((2, 8, 8, 3), 0.1)
    np.testing.assert_allclose(psnr(x, ref), [20.0, 20.0], rtol=1e-5)
    rng = np.random.default_rng(0)
    a = rng.random((16, 16, 3))
    b = np.clip(a + 0.05 * rng.standard_normal(a.shape), 0, 1)
    np.testing.assert_allclose(psnr(jnp.asarray(b), jnp.asarray(a)),
                               peak_signal_noise_ratio(a, b, data_range=1.0), rtol=1e-5)
    with pytest.raises(ValueError, match="same shape"):
        psnr(x, ref[0])
    with pytest.raises(ValueError, match="data_range: expected a finite number > 0, got 0.0"):
        psnr(x, ref, data_range=0.0)
    # one compiled program: a second call with the same shapes reuses it (same values, no new trace)
    np.testing.assert_array_equal(psnr(x + 0.01, ref), psnr(x + 0.01, ref))


@pytest.mark.parametrize("gaussian", [False, True])
@pytest.mark.parametrize("channels", [1, 3])
def test_ssim_agrees_with_skimage_on_real_image(gaussian, channels):
    img = load_image("chelsea")[60:124, 100:180]
    img = img[..., :1] if channels == 1 else img
    rng = np.random.default_rng(1)
    noisy = np.clip(img + 0.08 * rng.standard_normal(img.shape), 0, 1).astype(np.float32)
    kw = dict(gaussian_weights=True, sigma=1.5, use_sample_covariance=False) if gaussian else {}
    ref = structural_similarity(img.astype(np.float64), noisy.astype(np.float64), data_range=1.0,
                                channel_axis=-1, **kw)
    got = ssim(jnp.asarray(noisy), jnp.asarray(img), **kw)
    np.testing.assert_allclose(got, ref, atol=2e-5)


def test_ssim_identity_symmetry_batch():
    rng = np.random.default_rng(2)
    a = jnp.asarray(rng.random((3, 20, 20, 1)), jnp.float32)
    b = jnp.asarray(rng.random((3, 20, 20, 1)), jnp.float32)
    np.testing.assert_allclose(ssim(a, a), 1.0, atol=1e-5)
    np.testing.assert_allclose(ssim(a, b), ssim(b, a), atol=1e-6)
    np.testing.assert_allclose(ssim(a, b)[1], ssim(a[1], b[1]), atol=1e-6)
    with pytest.raises(ValueError, match="win_size: expected an odd int >= 3, got 4"):
        ssim(a, b, win_size=4)
