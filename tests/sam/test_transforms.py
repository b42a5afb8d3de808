"""Tests of jaxcore.sam.transforms: optax interop and the two-call transformation."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.flatten_util import ravel_pytree

from jaxcore.sam import ASAM, GSAM, SAM, asam_adversary, normalize, sam_adversary, sharpness_aware, sharpness_aware_transform


def _params(key):
    k1, k2 = jax.random.split(key)
    return {"w": jax.random.normal(k1, (4, 3), jnp.float64), "b": 0.1 * jax.random.normal(k2, (3,), jnp.float64)}


def _batch(key):
    kx, ky = jax.random.split(key)
    return {"x": jax.random.normal(kx, (10, 4), jnp.float64), "label": jax.random.randint(ky, (10,), 0, 3)}


def _loss(p, batch):
    z = jnp.tanh(batch["x"] @ p["w"] + p["b"])
    return optax.softmax_cross_entropy_with_integer_labels(z, batch["label"]).mean()


def _step_loss(p, s, batch):
    return _loss(p, batch), {}


def _flat(t):
    return np.asarray(ravel_pytree(t)[0])


def _two_calls(tx, params, batch, steps):
    state = tx.init(params)
    grad = jax.grad(_loss)

    @jax.jit
    def one(params, state):
        for _ in range(2):  # ascent call at w, descent call at w + epsilon
            u, state = tx.update(grad(params, batch), state, params)
            params = optax.apply_updates(params, u)
        return params, state

    for _ in range(steps):
        params, state = one(params, state)
    return params


def _reference(pert, params, batch, opt, steps):
    tr = sharpness_aware(_step_loss, opt, pert)
    st = tr.init(params)
    f = jax.jit(tr.step)
    for _ in range(steps):
        params, st, _ = f(params, st, batch)
    return params


@pytest.mark.parametrize("adv", ["sam", "asam"])
def test_optax_contrib_sam_with_our_adversary_equals_step(x64, adv):
    params, batch = _params(jax.random.key(0)), _batch(jax.random.key(1))
    opt = optax.sgd(0.1, momentum=0.9)
    adversary, pert = (sam_adversary(0.2), SAM(0.2)) if adv == "sam" else (asam_adversary(0.5), ASAM(0.5))
    tx = optax.contrib.sam(opt, adversary, sync_period=2)
    out = _two_calls(tx, params, batch, steps=3)
    np.testing.assert_allclose(_flat(out), _flat(_reference(pert, params, batch, opt, 3)), rtol=1e-12)


@pytest.mark.parametrize("pert", [SAM(0.2), GSAM(0.2, alpha=0.5), ASAM(0.5)])
def test_sharpness_aware_transform_equals_step(x64, pert):
    params, batch = _params(jax.random.key(0)), _batch(jax.random.key(1))
    opt = optax.adam(1e-2)
    out = _two_calls(sharpness_aware_transform(opt, pert), params, batch, steps=3)
    np.testing.assert_allclose(_flat(out), _flat(_reference(pert, params, batch, opt, 3)), rtol=1e-12)


def test_transform_with_rho_zero_is_base_optimizer(x64):
    params, batch = _params(jax.random.key(0)), _batch(jax.random.key(1))
    opt = optax.sgd(0.1, momentum=0.5)
    out = _two_calls(sharpness_aware_transform(opt, SAM(0.0)), params, batch, steps=2)
    ref = params
    st = opt.init(params)
    for _ in range(2):
        u, st = opt.update(jax.grad(_loss)(ref, batch), st, ref)
        ref = optax.apply_updates(ref, u)
    np.testing.assert_allclose(_flat(out), _flat(ref), rtol=1e-14)


def test_normalize_is_nan_free_and_unit_norm():
    tx = normalize()
    z = {"a": jnp.zeros(3), "b": jnp.zeros((2, 2))}
    out, _ = tx.update(z, tx.init(z))
    assert np.all(_flat(out) == 0)
    g = {"a": jnp.array([3.0, 0.0, 0.0]), "b": jnp.array([[0.0, 4.0], [0.0, 0.0]])}
    out, _ = tx.update(g, tx.init(g))
    np.testing.assert_allclose(_flat(out), _flat(g) / 5.0, rtol=1e-6)
    # Through optax.contrib.sam, a zero gradient leaves the parameters finite.
    sam_tx = optax.contrib.sam(optax.sgd(0.1), sam_adversary(0.1))
    u, _ = sam_tx.update(z, sam_tx.init(z), z)
    assert np.all(np.isfinite(_flat(u)))


def test_adversary_errors():
    with pytest.raises(ValueError, match="rho"):
        sam_adversary(-0.1)
    with pytest.raises(ValueError, match="eta"):
        asam_adversary(0.1, eta=-1.0)
    with pytest.raises(TypeError, match="perturbation"):
        sharpness_aware_transform(optax.sgd(0.1), "gsam")
    tx = asam_adversary(0.1)
    with pytest.raises(ValueError, match="params"):
        tx.update({"a": jnp.ones(2)}, tx.init(None))


def _step_loss_logits(p, s, batch):
    z = jnp.tanh(batch["x"] @ p["w"] + p["b"])
    return optax.softmax_cross_entropy_with_integer_labels(z, batch["label"]).mean(), {"logits": z}


@pytest.mark.parametrize("pert", [SAM(0.2), GSAM(0.2, alpha=0.5)])
def test_obf_through_the_transform_equals_step_with_obf(x64, pert):
    from jaxcore.sam import OBF, ascent_gradient

    params, batch = _params(jax.random.key(0)), _batch(jax.random.key(1))
    opt, obf = optax.sgd(0.1, momentum=0.9), OBF(sigmoid=False)
    tx = sharpness_aware_transform(opt, pert)
    state = tx.init(params)
    p = params
    for _ in range(2):
        u, state = tx.update(ascent_gradient(_step_loss_logits, p, batch, obf), state, p)  # ascent: OBF gradient
        p = optax.apply_updates(p, u)
        u, state = tx.update(jax.grad(_loss)(p, batch), state, p)  # descent: training gradient at w + eps
        p = optax.apply_updates(p, u)
    tr = sharpness_aware(_step_loss_logits, opt, pert, obf)
    ref, st = params, tr.init(params)
    for _ in range(2):
        ref, st, _ = tr.step(ref, st, batch)
    np.testing.assert_allclose(_flat(p), _flat(ref), rtol=1e-12)


def test_random_direction_transform_takes_its_key_at_construction(x64):
    from jaxcore.sam import RandomDirection

    with pytest.raises(TypeError, match="key: expected"):
        sharpness_aware_transform(optax.sgd(0.1), RandomDirection(0.1))
    with pytest.raises(TypeError, match=r"key: expected a jax.random.key\(...\) array, got int"):
        sharpness_aware_transform(optax.sgd(0.1), RandomDirection(0.1), key=3)
    params = _params(jax.random.key(0))
    g = jax.tree.map(jnp.ones_like, params)
    outs = []
    for seed in (1, 1, 2):
        tx = sharpness_aware_transform(optax.sgd(0.1), RandomDirection(0.3), key=jax.random.key(seed))
        u, s = tx.update(g, tx.init(params), params)
        np.testing.assert_allclose(np.linalg.norm(_flat(u)), 0.3, rtol=1e-12)
        outs.append(_flat(u))
    np.testing.assert_array_equal(outs[0], outs[1])  # same key, same direction
    assert not np.allclose(outs[0], outs[2])
    # SAM needs no key: the deterministic path holds key=None in the state.
    assert sharpness_aware_transform(optax.sgd(0.1), SAM(0.1)).init(params).key is None
