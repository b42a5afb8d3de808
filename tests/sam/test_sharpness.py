"""Oracle tests of jaxcore.sam.sharpness: power iteration and m-sharpness."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from jaxcore.sam import hessian_max_eigenvalue, hessian_vector_product, m_sharpness


def _quadratic(key, n=6):
    q, _ = jnp.linalg.qr(jax.random.normal(key, (n, n), jnp.float64))
    eig = jnp.array([5.0, 2.0, 1.0, 0.5, 0.1, 0.01])
    return (q * eig) @ q.T, eig


def test_power_iteration_on_quadratic_matches_top_eigenvalue(x64, key):
    a, eig = _quadratic(key)
    loss = lambda p, s, b: (0.5 * p["w"] @ a @ p["w"] + b * 0.0, {})  # noqa: E731
    res = hessian_max_eigenvalue(jax.random.key(1), loss, {"w": jnp.ones(6)}, jnp.zeros(()), num_iters=100)
    np.testing.assert_allclose(res.eigenvalue, 5.0, rtol=1e-10)
    assert float(res.residual) < 1e-6
    v = np.asarray(res.eigenvector["w"])
    np.testing.assert_allclose(np.abs(v @ np.linalg.eigh(np.asarray(a))[1][:, -1]), 1.0, rtol=1e-8)


def _mlp_loss(p, model_state, batch):
    del model_state
    z = jnp.tanh(batch["x"] @ p["w1"]) @ p["w2"]
    return jnp.mean(jnp.sum((z - batch["y"]) ** 2, axis=-1)), {"z": z}


def _mlp(key):
    k1, k2, k3, k4 = jax.random.split(key, 4)
    p = {"w1": jax.random.normal(k1, (3, 4), jnp.float64), "w2": jax.random.normal(k2, (4, 2), jnp.float64)}
    b = {"x": jax.random.normal(k3, (12, 3), jnp.float64), "y": jax.random.normal(k4, (12, 2), jnp.float64)}
    return p, b


@pytest.mark.slow  # CPU budget of the default run; still run by .ci/run (pytest -m slow)
def test_hvp_and_power_iteration_match_dense_hessian_on_mlp(x64, key):
    p, b = _mlp(key)
    flat, unravel = ravel_pytree(p)
    h = np.asarray(jax.jit(jax.hessian(lambda v: _mlp_loss(unravel(v), None, b)[0]))(flat))
    v = jax.random.normal(jax.random.key(3), flat.shape, jnp.float64)
    hv = ravel_pytree(hessian_vector_product(_mlp_loss, p, b, unravel(v)))[0]
    np.testing.assert_allclose(hv, h @ np.asarray(v), rtol=1e-10, atol=1e-12)
    evals = np.linalg.eigvalsh(h)
    top = evals[np.argmax(np.abs(evals))]
    res = hessian_max_eigenvalue(jax.random.key(2), _mlp_loss, p, b, num_iters=300)
    np.testing.assert_allclose(res.eigenvalue, top, rtol=1e-6)


def test_m_sharpness_closed_form_and_micro_batches(x64, key):
    # Quadratic per-example loss 0.5 (w - x_i)^2 sum: gradient known in closed form.
    x = jax.random.normal(key, (8, 3), jnp.float64)
    w = jnp.array([0.3, -0.2, 0.5])
    loss = lambda w, s, b: (0.5 * jnp.mean(jnp.sum((w - b) ** 2, axis=-1)), {})  # noqa: E731
    rho = 0.1
    mean, per = m_sharpness(loss, w, x, num_micro_batches=4, rho=rho)  # m = 2
    expect = []
    for i in range(4):
        xb = np.asarray(x[2 * i : 2 * i + 2])
        g = np.asarray(w) - xb.mean(0)
        # L(w + eps) - L(w) = rho ||g|| + rho^2 / 2 with eps = rho g / ||g|| (Hessian = I).
        expect.append(rho * np.linalg.norm(g) + rho**2 / 2)
    np.testing.assert_allclose(per, expect, rtol=1e-12)
    np.testing.assert_allclose(mean, np.mean(expect), rtol=1e-12)
    # m = B: one value; exact maximiser on the ball is the one-step one here, more steps agree.
    full, per1 = m_sharpness(loss, w, x, num_micro_batches=1, rho=rho)
    assert per1.shape == (1,)
    multi, _ = m_sharpness(loss, w, x, num_micro_batches=1, rho=rho, num_steps=5)
    np.testing.assert_allclose(multi, full, rtol=1e-10)


def test_sharpness_errors():
    loss = lambda w, s, b: (jnp.sum(w * b.mean()), {})  # noqa: E731
    with pytest.raises(ValueError, match="num_iters"):
        hessian_max_eigenvalue(jax.random.key(0), loss, jnp.ones(2), jnp.ones(4), num_iters=0)
    for k, err in ((0, ValueError), (3, ValueError), (2.0, TypeError)):  # a float count is a type error
        with pytest.raises(err, match="num_micro_batches"):
            m_sharpness(loss, jnp.ones(2), jnp.ones(4), num_micro_batches=k, rho=0.1)
    with pytest.raises(ValueError, match="rho"):
        m_sharpness(loss, jnp.ones(2), jnp.ones(4), num_micro_batches=2, rho=-0.1)
    with pytest.raises(ValueError, match="num_steps"):
        m_sharpness(loss, jnp.ones(2), jnp.ones(4), num_micro_batches=2, rho=0.1, num_steps=0)


def test_model_state_is_passed_through_and_bare_scalar_losses_are_refused(x64):
    # loss = 0.5 * s * ||w||^2: the Hessian is s I, s from the model state.
    loss = lambda w, s, b: (0.5 * s * jnp.sum(w**2) + 0.0 * jnp.sum(b), {})  # noqa: E731
    res = hessian_max_eigenvalue(jax.random.key(0), loss, jnp.ones(3), jnp.ones(2), model_state=jnp.asarray(3.0),
                                 num_iters=5)
    np.testing.assert_allclose(res.eigenvalue, 3.0, rtol=1e-12)
    np.testing.assert_allclose(hessian_vector_product(loss, jnp.ones(3), jnp.ones(2), jnp.ones(3),
                                                      model_state=jnp.asarray(2.0)), 2.0 * np.ones(3))
    with pytest.raises(TypeError, match="loss_fn: expected a function returning \\(loss, aux\\)"):
        hessian_max_eigenvalue(jax.random.key(0), lambda w, s, b: jnp.sum(w**2), jnp.ones(3), jnp.ones(2))
    with pytest.raises(TypeError, match=r"key: expected a jax.random.key\(...\) array, got int"):
        hessian_max_eigenvalue(0, loss, jnp.ones(3), jnp.ones(2))


def test_sharpness_measures_do_not_recompile_on_a_second_call(compiles):
    a = jnp.diag(jnp.array([3.0, 1.0, 0.5]))
    loss = lambda w, s, x: (0.5 * w @ a @ w + jnp.mean(x @ w), {})  # noqa: E731
    w, x = jnp.ones(3), jnp.ones((4, 3))
    calls = [
        lambda i: hessian_max_eigenvalue(jax.random.key(i), loss, w + i, x, num_iters=3),
        lambda i: hessian_vector_product(loss, w + i, x, w),
        lambda i: m_sharpness(loss, w + i, x, num_micro_batches=2, rho=0.1 * (i + 1)),
    ]
    for call in calls:
        jax.block_until_ready(call(0))
        with compiles() as n:
            jax.block_until_ready(call(1))  # new values, same shapes (and a new rho): no new program
        assert n() == 0
