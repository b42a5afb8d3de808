"""Tests of jaxcore.inverse.training: the scanned training loop against a step-by-step loop, history, progress."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxcore.inverse import DnCNN, heldout_crops, train_denoiser


def _images():
    rng = np.random.default_rng(0)
    return [rng.random((12, 14, 3)).astype(np.float32), rng.random((10, 10, 1)).astype(np.float32)]


def _reference(key, model, images, *, num_steps, batch_size, patch_size, lr, sigma_max, crop_seed):
    """The recipe step by step (one jitted Adam step per Python iteration), as the shipped weights were made."""
    rng = np.random.default_rng(crop_seed)
    images = [np.repeat(im, 3, -1) if im.shape[-1] == 1 else im for im in images]
    probs = np.full(len(images), 1.0 / len(images))
    opt = optax.adam(optax.cosine_decay_schedule(lr, num_steps, alpha=0.01))
    params, static = eqx.partition(model, eqx.is_inexact_array)
    state = opt.init(params)

    @jax.jit
    def step(params, state, x, key):
        k1, k2 = jax.random.split(key)
        sig = jax.random.uniform(k1, (x.shape[0],), maxval=sigma_max)
        noisy = x + sig[:, None, None, None] * jax.random.normal(k2, x.shape)
        loss, g = jax.value_and_grad(lambda p: jnp.mean((eqx.combine(p, static)(noisy, sig) - x) ** 2))(params)
        upd, state = opt.update(g, state, params)
        return optax.apply_updates(params, upd), state, loss

    losses = []
    for _ in range(num_steps):
        idx = rng.choice(len(images), size=batch_size, p=probs)
        out = np.empty((batch_size, patch_size, patch_size, 3), np.float32)
        for j, i in enumerate(idx):
            im = images[i]
            t = rng.integers(0, im.shape[0] - patch_size + 1)
            l = rng.integers(0, im.shape[1] - patch_size + 1)
            crop = np.rot90(im[t : t + patch_size, l : l + patch_size], k=rng.integers(4))
            out[j] = crop[:, ::-1] if rng.random() < 0.5 else crop
        key, sub = jax.random.split(key)
        params, state, loss = step(params, state, jnp.asarray(out), sub)
        losses.append(float(loss))
    return eqx.combine(params, static), np.array(losses)


def test_scanned_training_equals_the_step_by_step_recipe():
    net = DnCNN(key=jax.random.key(0), channels=3, features=4, depth=2)
    kw = dict(num_steps=4, batch_size=2, patch_size=6)
    reports = []
    out = train_denoiser(jax.random.key(1), net, _images(), learning_rate=1e-2, sigma_max=0.2, crop_seed=3,
                         chunk_size=2, progress=lambda step, m: reports.append((step, m["loss"])), **kw)
    ref_model, ref_losses = _reference(jax.random.key(1), net, _images(), lr=1e-2, sigma_max=0.2, crop_seed=3,
                                       **kw)
    assert out.losses.shape == (4,)
    np.testing.assert_allclose(out.losses, ref_losses, rtol=1e-4)
    for a, b in zip(jax.tree.leaves(eqx.filter(out.model, eqx.is_array)),
                    jax.tree.leaves(eqx.filter(ref_model, eqx.is_array))):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert [s for s, _ in reports] == [1, 2, 3, 4]  # every step reported (4 steps: every = 1), over two chunks
    np.testing.assert_allclose([v for _, v in reports], ref_losses, rtol=1e-4)


def test_second_training_call_does_not_recompile(compiles):
    net = DnCNN(key=jax.random.key(0), channels=3, features=4, depth=2)
    kw = dict(num_steps=4, batch_size=2, patch_size=6, chunk_size=2)
    k0, k1 = jax.random.key(0), jax.random.key(1)
    first = train_denoiser(k0, net, _images(), learning_rate=1e-2, **kw)
    with compiles() as c:
        second = train_denoiser(k1, net, _images(), learning_rate=2e-2, sigma_max=0.1, **kw)
    assert len(c) == 0
    assert not np.allclose(first.losses, second.losses)


def test_training_errors():
    net = DnCNN(key=jax.random.key(0), channels=3, features=4, depth=2)
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        train_denoiser(0, net, _images(), num_steps=1)
    with pytest.raises(ValueError, match="images\\[1\\]: expected an image"):
        train_denoiser(jax.random.key(0), net, _images(), num_steps=1, patch_size=11)
    with pytest.raises(ValueError, match="sampling: expected one of"):
        train_denoiser(jax.random.key(0), net, _images(), num_steps=1, sampling="pixel")
    with pytest.raises(ValueError, match="num_steps: expected an int >= 1, got 0"):
        train_denoiser(jax.random.key(0), net, _images(), num_steps=0)
    with pytest.raises(TypeError, match="progress: expected a bool or a callable"):
        train_denoiser(jax.random.key(0), net, _images(), num_steps=1, progress="yes")
    with pytest.raises(ValueError, match="size: expected at most 300"):
        heldout_crops(400)
