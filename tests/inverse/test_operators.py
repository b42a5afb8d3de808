"""Tests of jaxcore.inverse.operators: adjoints, brute-force convolution, data gradients and proxes."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxcore.inverse import (
    Blur,
    Identity,
    Inpainting,
    add_gaussian_noise,
    degrade,
    gaussian_kernel,
    motion_kernel,
    random_mask,
    standard_normal,
    uniform_kernel,
)

H, W = 12, 10


def _ops(key, channels=3):
    return _ops_x64(channels)


@functools.lru_cache(maxsize=None)
def _ops_x64(channels):
    """The operators of the float64 tests, built once per channel count (callers run under ``x64``)."""
    k1, k2 = jax.random.split(jax.random.key(0))
    return {
        "gaussian": Blur(gaussian_kernel(5, 1.2), (H, W)),
        "uniform": Blur(uniform_kernel(3), (H, W)),
        "motion": Blur(motion_kernel(k1, 7), (H, W)),
        "asym": Blur(jnp.asarray(np.random.default_rng(3).random((4, 3, channels))), (H, W)),
        "inpaint": Inpainting(random_mask(k1, (H, W), 0.5)),
        "inpaint_c": Inpainting(random_mask(k2, (H, W), 0.3, channels=channels)),
        "identity": Identity(),
    }


@pytest.mark.parametrize("name", ["gaussian", "uniform", "motion", "asym", "inpaint", "inpaint_c", "identity"])
def test_adjoint_identity(x64, key, name):
    op = _ops(key)[name]
    rng = np.random.default_rng(1)
    x, y = (jnp.asarray(rng.standard_normal((2, H, W, 3))) for _ in range(2))
    lhs = jnp.sum(op(x) * y)
    rhs = jnp.sum(x * op.adjoint(y))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-12)


def test_blur_matches_brute_force_circular_convolution(x64):
    rng = np.random.default_rng(0)
    k = rng.random((3, 5))
    x = rng.standard_normal((6, 7, 2))
    op = Blur(jnp.asarray(k), (6, 7))
    out = np.asarray(op(jnp.asarray(x)))
    ref = np.zeros_like(x)
    for i in range(6):
        for j in range(7):
            for u in range(3):
                for v in range(5):
                    ref[i, j] += k[u, v] * x[(i - u + 1) % 6, (j - v + 2) % 7]
    np.testing.assert_allclose(out, ref, atol=1e-12)


def test_symmetric_kernel_blur_is_self_adjoint_and_preserves_mean(x64, key):
    op = Blur(jnp.asarray(gaussian_kernel(5, 1.0), jnp.float64), (H, W))
    x = jnp.asarray(np.random.default_rng(4).random((H, W, 1)))
    np.testing.assert_allclose(op(x), op.adjoint(x), atol=1e-12)
    np.testing.assert_allclose(jnp.mean(op(x)), jnp.mean(x), atol=1e-12)


@pytest.mark.parametrize("name", ["gaussian", "motion", "asym", "inpaint", "inpaint_c", "identity"])
def test_data_grad_matches_autodiff_and_prox_is_optimal(x64, key, name):
    op = _ops(key)[name]
    rng = np.random.default_rng(2)
    x, y, z = (jnp.asarray(rng.standard_normal((H, W, 3))) for _ in range(3))
    sy, tau = 0.3, 0.7
    g = op.data_grad(x, y, sy)
    g_ad = jax.grad(lambda u: op.data_fidelity(u, y, sy))(x)
    np.testing.assert_allclose(g, g_ad, atol=1e-10)
    p = op.data_prox(z, y, sy, tau)
    # optimality of argmin tau F(x) + |x - z|^2 / 2: tau grad F(p) + p - z = 0
    np.testing.assert_allclose(tau * op.data_grad(p, y, sy) + p - z, 0.0, atol=1e-10)


def test_lipschitz_bounds_normal_operator(x64, key):
    op = _ops(key)["motion"]
    x = jnp.asarray(np.random.default_rng(5).standard_normal((H, W, 1)))
    for _ in range(200):  # power iteration
        x = op.adjoint(op(x))
        x = x / jnp.linalg.norm(x)
    est = jnp.sum(x * op.adjoint(op(x)))
    np.testing.assert_allclose(est, op.lipschitz(), rtol=1e-6)


def test_kernels_are_normalised_and_valid(key):
    for k in (gaussian_kernel(9, 2.0), uniform_kernel(9), motion_kernel(key, 25)):
        assert k.ndim == 2 and k.shape[0] == k.shape[1]
        np.testing.assert_allclose(jnp.sum(k), 1.0, rtol=1e-5)
        assert jnp.all(k >= 0)
    mk = motion_kernel(key, 25)
    assert int(jnp.sum(mk > 0)) > 25  # a trajectory, not a point
    np.testing.assert_array_equal(mk, motion_kernel(key, 25))
    assert not np.allclose(mk, motion_kernel(jax.random.key(9), 25))
    with pytest.raises(ValueError, match="size"):
        gaussian_kernel(4, 1.0)
    with pytest.raises(ValueError, match="std"):
        gaussian_kernel(5, 0.0)
    with pytest.raises(ValueError, match="intensity"):
        motion_kernel(key, 25, intensity=2.0)
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        motion_kernel(0, 25)
    with pytest.raises(ValueError, match="num_steps: expected an int >= 1"):
        motion_kernel(key, 25, num_steps=0)


def test_random_mask_fraction(key):
    m = random_mask(key, (200, 200), 0.5)
    assert m.shape == (200, 200, 1)
    assert abs(float(jnp.mean(m)) - 0.5) < 0.01
    with pytest.raises(ValueError, match="missing"):
        random_mask(key, (4, 4), 1.5)


def test_shape_and_channel_errors(key):
    blur = Blur(jnp.ones((3, 3, 3)) / 9, (H, W))
    with pytest.raises(ValueError, match="channels"):
        blur(jnp.zeros((H, W, 1)))
    with pytest.raises(ValueError, match="spatial shape"):
        blur(jnp.zeros((H + 1, W, 3)))
    with pytest.raises(ValueError, match="fit"):
        Blur(jnp.ones((20, 3)), (H, W))
    inp = Inpainting(jnp.ones((H, W)))
    with pytest.raises(ValueError, match="spatial shape"):
        inp(jnp.zeros((H, W + 2, 3)))
    inp_c = Inpainting(jnp.ones((H, W, 3)))
    with pytest.raises(ValueError, match="3 channels"):
        inp_c(jnp.zeros((H, W, 1)))
    with pytest.raises(ValueError, match="mask"):
        Inpainting(jnp.ones((H,)))


def test_noise_and_degrade(key):
    x = jnp.full((64, 64, 3), 0.5)
    y = add_gaussian_noise(key, x, 0.1)
    np.testing.assert_allclose(jnp.std(y - x), 0.1, rtol=0.05)
    np.testing.assert_array_equal(y, add_gaussian_noise(key, x, 0.1))
    with pytest.raises(ValueError, match="sigma: expected finite values >= 0"):
        add_gaussian_noise(key, x, -0.1)
    op = Blur(uniform_kernel(3), (64, 64))
    np.testing.assert_allclose(degrade(key, x, op, 0.0), x, atol=1e-6)
    bad = x.at[0, 0, 0].set(1.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        degrade(key, bad, op, 0.01)
    y_clip = degrade(key, bad, op, 0.0, clip=True)
    assert float(jnp.max(y_clip)) <= 1.0 + 1e-6
    with pytest.raises(ValueError, match="sigma_y: expected finite values >= 0"):
        degrade(key, x, op, -1.0)
    with pytest.raises(ValueError, match="sigma_y: expected finite values >= 0"):
        degrade(key, x, op, float("nan"))
    # inside jit the range check is a runtime error, not a silent result
    with pytest.raises(Exception, match=r"\[0, 1\]"):
        jax.jit(lambda v: degrade(key, v, op, 0.01))(bad).block_until_ready()


# shapes drawn from a small fixed set, so hypothesis examples reuse compiled programs
_SHAPES = [(4, 5), (6, 6)]


@settings(deadline=None)
@given(hw=st.sampled_from(_SHAPES), channels=st.sampled_from([1, 3]), kind=st.sampled_from(["blur", "inpaint"]),
       seed=st.integers(0, 2**16))
def test_adjoint_identity_property(hw, channels, kind, seed):
    """<A x, y> = <x, A^T y> for random operators and images of shapes from a fixed small set."""
    rng = np.random.default_rng(seed)
    if kind == "blur":
        op = Blur(jnp.asarray(rng.random((3, 3, channels)), jnp.float32), hw, keep_kernel=bool(seed % 2))
    else:
        op = Inpainting(jnp.asarray(rng.random(hw + (channels,)) < 0.5, jnp.float32))
    x, y = (jnp.asarray(rng.standard_normal(hw + (channels,)), jnp.float32) for _ in range(2))
    lhs, rhs = float(jnp.sum(op(x) * y)), float(jnp.sum(x * op.adjoint(y)))
    assert abs(lhs - rhs) <= 1e-4 * (1 + float(jnp.linalg.norm(x) * jnp.linalg.norm(y)))


def test_blur_without_kernel_is_the_same_operator(x64):
    k = jnp.asarray(np.random.default_rng(0).random((5, 3)))
    full, lean = Blur(k, (H, W)), Blur(k, (H, W), keep_kernel=False)
    assert lean.kernel is None and full.kernel.shape == (5, 3, 1)
    x = jnp.asarray(np.random.default_rng(1).standard_normal((H, W, 2)))
    np.testing.assert_array_equal(full(x), lean(x))
    np.testing.assert_array_equal(full.data_prox(x, x, 0.1, 0.2), lean.data_prox(x, x, 0.1, 0.2))
    # kernels of different sizes: one pytree structure and leaf shapes (one compilation of a program)
    other = Blur(jnp.ones((9, 9)) / 81, (H, W), keep_kernel=False)
    assert jax.tree.structure(other) == jax.tree.structure(lean)
    assert [a.shape for a in jax.tree.leaves(other)] == [a.shape for a in jax.tree.leaves(lean)]


def test_public_helpers_compile_once(key, compiles):
    x = jnp.full((16, 16, 3), 0.5)
    op = Blur(uniform_kernel(3), (16, 16))
    calls = [lambda k: degrade(k, x, op, 0.1), lambda k: add_gaussian_noise(k, x, 0.1),
             lambda k: random_mask(k, (16, 16), 0.5), lambda k: standard_normal(k, (3, 4)),
             lambda k: motion_kernel(k, 9)]
    for call in calls:
        first = call(key)
        with compiles() as c:
            second = call(jax.random.key(7))  # a new key, same shapes
            again = call(key)
        assert len(c) == 0, call
        np.testing.assert_array_equal(first, again)
        assert first.shape == second.shape
