"""Regression tests of issue 15 (hardening) for the inverse family: each reproducer, and its class."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.inverse import (
    METHODS,
    Blur,
    GaussianMMSEDenoiser,
    GradientStepDenoiser,
    Identity,
    Inpainting,
    TVDenoiser,
    add_gaussian_noise,
    constant_schedule,
    degrade,
    make_task,
    psnr,
    random_mask,
    restore_batch,
    ssim,
    standard_normal,
    uniform_kernel,
)


def _u8_pair():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (16, 16, 1)).astype(np.uint8)
    b = np.clip(a.astype(np.int64) + rng.integers(-40, 41, a.shape), 0, 255).astype(np.uint8)
    return a, b


def test_psnr_uint8_is_converted_exactly_not_wrapped():
    """Reproducer: psnr(u8a, u8b, 255.) gave 27.84 dB where the float values gave 18.04."""
    a, b = _u8_pair()
    want = psnr(a.astype(np.float32), b.astype(np.float32), 255.0)
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    np.testing.assert_allclose(float(psnr(a, b, 255.0)), 10 * np.log10(255.0**2 / mse), rtol=1e-5)
    np.testing.assert_allclose(psnr(a, b, 255.0), want, rtol=1e-6)
    np.testing.assert_allclose(psnr(jnp.asarray(a), b, 255.0), want, rtol=1e-6)  # mixed: one uint8, one jax
    np.testing.assert_allclose(ssim(a, b, 255.0), ssim(a.astype(np.float32), b.astype(np.float32), 255.0),
                               rtol=1e-5)
    assert psnr(a, b, 255.0).dtype == jnp.float32


def test_metrics_refuse_bad_ranges_and_inputs():
    """Reproducer: ssim(data_range=-1) ran; NaN/inf are refused too; None and wrong shapes name the argument."""
    x = jnp.full((8, 8, 1), 0.5)
    for bad in (-1.0, 0.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="data_range: expected"):
            ssim(x, x, data_range=bad)
        with pytest.raises(ValueError, match="data_range: expected"):
            psnr(x, x, data_range=bad)
    for name, kw in (("k1", {"k1": -0.01}), ("k2", {"k2": float("nan")}), ("sigma", {"sigma": float("inf")})):
        with pytest.raises(ValueError, match=f"{name}: expected"):
            ssim(x, x, **kw)
    with pytest.raises(TypeError, match="ref: expected"):
        psnr(x, None)
    with pytest.raises(TypeError, match="x: expected"):
        ssim(None, x)
    with pytest.raises(ValueError, match="ref: expected the same shape"):
        psnr(x, x[:4])
    with pytest.raises(ValueError, match="x: expected finite values"):
        psnr(x.at[0, 0, 0].set(jnp.nan), x)
    with pytest.raises(TypeError, match="use_sample_covariance: expected a bool"):
        ssim(x, x, use_sample_covariance=None)


def test_metrics_half_precision_computed_in_float32():
    x = jnp.linspace(0, 1, 64).reshape(8, 8, 1)
    y = x * 0.9
    for dt in (jnp.float16, jnp.bfloat16):
        out = psnr(x.astype(dt), y.astype(dt))
        assert out.dtype == dt and np.isfinite(float(out))
        np.testing.assert_allclose(float(out), float(psnr(x.astype(dt).astype(jnp.float32),
                                                        y.astype(dt).astype(jnp.float32))), rtol=1e-2)
        assert ssim(x.astype(dt), y.astype(dt)).dtype == dt


def test_tv_denoiser_refuses_bad_parameters():
    """Reproducer: TVDenoiser(tau=-1) ran; NaN/inf fail too."""
    for bad in (-1.0, 0.0, 0.3, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="tau: expected a number in \\(0, 0.25\\]"):
            TVDenoiser(tau=bad)
    for bad in (-1.0, 0.0, float("nan")):
        with pytest.raises(ValueError, match="weight_per_sigma: expected"):
            TVDenoiser(weight_per_sigma=bad)
    with pytest.raises(ValueError, match="num_steps: expected an int >= 1"):
        TVDenoiser(num_steps=0)
    with pytest.raises(TypeError, match="num_steps: expected an int"):
        TVDenoiser(num_steps=2.5)
    with pytest.raises(TypeError, match="network: expected a denoiser"):
        GradientStepDenoiser(None)
    with pytest.raises(ValueError, match="variance: expected"):
        GaussianMMSEDenoiser(0.5, float("nan"))
    with pytest.raises(ValueError, match="mean: expected finite values"):
        GaussianMMSEDenoiser(jnp.nan, 1.0)


def test_denoisers_refuse_bad_images():
    den = TVDenoiser(num_steps=2)
    for bad, err in ((None, TypeError), (np.zeros((8, 8, 1), np.int32), TypeError), (jnp.zeros((8, 8)), ValueError),
                     (jnp.full((8, 8, 1), jnp.inf), ValueError)):
        with pytest.raises(err, match="x: expected"):
            den(bad, 0.1)
    with pytest.raises(TypeError, match="sigma: expected"):
        den(jnp.zeros((8, 8, 1)), None)


def test_blur_half_precision_computed_in_float32():
    """Reproducer: half precision in Blur gave "RFFT input must be float32 or float64"."""
    op = Blur(uniform_kernel(3), (8, 8))
    x = jax.random.uniform(jax.random.key(0), (8, 8, 1))
    for dt in (jnp.float16, jnp.bfloat16):
        xh = x.astype(dt)
        for out, ref in ((op(xh), op(xh.astype(jnp.float32))), (op.adjoint(xh), op.adjoint(xh.astype(jnp.float32))),
                         (op.data_prox(xh, xh, 0.1, 0.01), op.data_prox(xh.astype(jnp.float32), xh.astype(jnp.float32),
                                                                         0.1, 0.01))):
            assert out.dtype == dt
            np.testing.assert_allclose(np.asarray(out, np.float32), ref, atol=1e-2)
        assert op.data_grad(xh, xh, 0.1).dtype == dt
    assert Blur(uniform_kernel(3).astype(jnp.float16), (8, 8))(x).dtype == jnp.float32
    y = degrade(jax.random.key(1), x.astype(jnp.float16), op, 0.01)
    assert y.dtype == jnp.float16 and bool(jnp.all(jnp.isfinite(y)))


@pytest.mark.parametrize("method", ["snore", "snore_prox", "annealed_snore", "red", "red_prox", "pnp_pgd",
                                    "pnp_hqs"])
def test_every_method_runs_half_precision_in_float32(method):
    """Reproducer: half precision in the restoration solvers gave the RFFT error; now float32 inside, cast back."""
    op = Blur(uniform_kernel(3), (8, 8))
    x = jnp.full((8, 8, 1), 0.5)
    y = degrade(jax.random.key(0), x, op, 0.02)
    sched = None if method == "annealed_snore" else constant_schedule(3, sigma=0.05, step_size=1e-4)
    den = GaussianMMSEDenoiser(0.5, 0.01)
    key = jax.random.key(1) if "snore" in method else None  # RED and PnP are deterministic
    ref = METHODS[method](key, y, op, den, sched, 0.02).x
    for dt in (jnp.float16, jnp.bfloat16):
        out = METHODS[method](key, y.astype(dt), op, den, sched, 0.02).x
        assert out.dtype == dt
        np.testing.assert_allclose(np.asarray(out, np.float32), ref, atol=2e-2)


def test_restore_batch_half_precision():
    op = Identity()
    ys = jnp.full((2, 4, 4, 1), 0.6, jnp.float16)
    out = restore_batch(jax.random.split(jax.random.key(0), 2), ys, op, GaussianMMSEDenoiser(0.5, 0.01),
                        constant_schedule(2, sigma=0.05, step_size=1e-3), 0.05, method="red")
    assert out.x.dtype == jnp.float16 and out.x.shape == (2, 2, 4, 4, 1)


def test_none_wrong_type_and_shape_arguments_name_the_argument():
    """Reproducer: degrade(operator=None) and other None / wrong-type / wrong-shape arguments gave raw errors."""
    key = jax.random.key(0)
    x = jnp.full((8, 8, 1), 0.5)
    op = Blur(uniform_kernel(3), (8, 8))
    den = GaussianMMSEDenoiser(0.5, 0.01)
    sched = constant_schedule(2, sigma=0.05, step_size=1e-3)
    cases = [
        (TypeError, "operator: expected an AbstractOperator", lambda: degrade(key, x, None, 0.1)),
        (TypeError, "x: expected a real float array", lambda: degrade(key, None, op, 0.1)),
        (TypeError, "x: expected a float array", lambda: degrade(key, np.zeros((8, 8, 1), np.uint8), op, 0.1)),
        (ValueError, "x: expected spatial shape", lambda: degrade(key, jnp.zeros((6, 8, 1)), op, 0.1)),
        (ValueError, "sigma_y: expected a scalar", lambda: degrade(key, x, op, jnp.ones(3))),
        (TypeError, "sigma_y: expected", lambda: degrade(key, x, op, None)),
        (TypeError, "x: expected", lambda: op(None)),
        (TypeError, "y: expected", lambda: op.adjoint("image")),
        (ValueError, "sigma_y: expected finite values > 0", lambda: op.data_grad(x, x, 0.0)),
        (ValueError, "sigma_y: expected finite values > 0", lambda: Identity().data_prox(x, x, 0.0, 1.0)),
        (ValueError, "y: expected z's shape", lambda: Identity().data_prox(x, x[:4], 0.1, 1.0)),
        (TypeError, "kernel: expected", lambda: Blur(None, (8, 8))),
        (TypeError, "shape: expected \\(H, W\\)", lambda: Blur(uniform_kernel(3), None)),
        (ValueError, "shape: expected an int >= 1", lambda: Blur(uniform_kernel(3), (8, -8))),
        (TypeError, "mask: expected", lambda: Inpainting(None)),
        (ValueError, "mask: expected finite values", lambda: Inpainting(jnp.full((4, 4), jnp.nan))),
        (TypeError, "shape: expected \\(H, W\\)", lambda: random_mask(key, None)),
        (TypeError, "shape: expected \\(H, W\\)", lambda: make_task(key, "inpainting", None, 0.1)),
        (TypeError, "dtype: expected a float dtype", lambda: standard_normal(key, (2,), jnp.int32)),
        (ValueError, "shape: expected an int >= 0", lambda: standard_normal(key, (-2,))),
        (TypeError, "x: expected a float array", lambda: add_gaussian_noise(key, np.zeros(3, np.int32), 0.1)),
        (TypeError, "y: expected a real float array", lambda: METHODS["snore"](key, None, op, den, sched, 0.1)),
        (TypeError, "x0: expected", lambda: METHODS["red"](None, x, op, den, sched, 0.1, x0="x")),
        (ValueError, "y: expected finite values", lambda: METHODS["pnp_pgd"](None, x.at[0].set(jnp.nan), op, den,
                                                                            sched, 0.1)),
        (TypeError, "schedule.alpha: expected", lambda: METHODS["red"](None, x, op, den, sched._replace(alpha=None),
                                                                      0.1)),
        (ValueError, "schedule: expected sigma, alpha and step_size of one length",
         lambda: METHODS["red"](None, x, op, den, sched._replace(alpha=jnp.ones(3)), 0.1)),
        (ValueError, "sigma_y: expected a scalar", lambda: METHODS["red"](None, x, op, den, sched, jnp.ones(2))),
        (TypeError, "dtype: expected a float dtype", lambda: constant_schedule(2, sigma=0.1, dtype=jnp.int32)),
        (ValueError, "sigma: expected a value finite in float16",
         lambda: constant_schedule(2, sigma=1e5, dtype=jnp.float16)),
        (ValueError, "operator: expected array leaves with a leading num_images axis",
         lambda: restore_batch(jax.random.split(key, 2), x[None], op, den, sched, 0.1, method="red",
                               operator_batched=True)),
        (TypeError, "ys: expected", lambda: restore_batch(jax.random.split(key, 2), None, op, den, sched, 0.1,
                                                          method="red")),
    ]
    for err, msg, fn in cases:
        with pytest.raises(err, match=msg):
            fn()
