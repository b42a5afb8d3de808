"""Tests of jaxcore.inverse.tasks: the paper's degradations, built once for computation and display."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.inverse import (
    TASKS,
    Blur,
    Inpainting,
    degrade,
    gaussian_kernel,
    make_task,
    motion_kernel,
    random_mask,
    uniform_kernel,
)


def test_each_task_is_its_operator(key):
    x = jnp.asarray(np.random.default_rng(0).random((32, 32, 3)), jnp.float32)
    refs = {"gaussian_blur": Blur(gaussian_kernel(9, 1.6), (32, 32)), "uniform_blur": Blur(uniform_kernel(9), (32, 32)),
            "motion_blur": Blur(motion_kernel(key, 25), (32, 32)),
            "inpainting": Inpainting(random_mask(key, (32, 32), 0.5))}
    assert set(TASKS) == set(refs)
    for name, ref in refs.items():
        task = make_task(key, name, (32, 32), 10 / 255)
        assert task.name == name and task.description == TASKS[name] and task.sigma_y == pytest.approx(10 / 255)
        np.testing.assert_allclose(task.operator(x), ref(x), atol=1e-6)
        if name == "inpainting":
            assert task.kernel is None
            assert abs(float(jnp.mean(task.operator.mask)) - 0.5) < 0.1
        else:
            assert task.operator.kernel is None  # the computation needs the FFT only
            np.testing.assert_array_equal(task.kernel, ref.kernel[..., 0])
            np.testing.assert_allclose(jnp.sum(task.kernel), 1.0, rtol=1e-5)
    # the blurs share one pytree structure and leaf shapes: one compilation serves all three
    blurs = [make_task(key, n, (32, 32), 0.0).operator for n in ("gaussian_blur", "uniform_blur", "motion_blur")]
    chex.assert_trees_all_equal_shapes_and_dtypes(*blurs)
    # the random tasks depend on the key
    a, b = (make_task(k, "motion_blur", (32, 32), 0.0).kernel for k in (key, jax.random.key(1)))
    assert not np.allclose(a, b)
    y = degrade(key, x, make_task(key, "gaussian_blur", (32, 32), 0.0).operator, 0.0)
    np.testing.assert_allclose(y, refs["gaussian_blur"](x), atol=1e-6)


def test_task_errors(key):
    with pytest.raises(ValueError, match="name: expected one of"):
        make_task(key, "denoise", (32, 32), 0.1)
    with pytest.raises(ValueError, match="sigma_y: expected a finite number >= 0"):
        make_task(key, "gaussian_blur", (32, 32), -0.1)
    with pytest.raises(ValueError, match="shape: expected sides >= 25"):
        make_task(key, "motion_blur", (16, 16), 0.1)
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        make_task(0, "gaussian_blur", (32, 32), 0.1)
