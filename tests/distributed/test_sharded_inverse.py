"""inverse's images x seeds on 4 faked devices: ``restore_batch`` with either axis split over the devices.

What shards: the observations ``ys`` (images) and the keys (seeds), and with them the restorations
``[num_images, num_seeds, H, W, C]``; each device runs its restorations. Replicated: the operator (one
blur for all images), the denoiser's parameters, the schedule. Two ways: ``restore_batch(...,
mesh=mesh)`` (``shard_map``: the first mesh axis splits the images, a second the seeds), and plain
``NamedSharding`` inputs, which work for the operators without an FFT: XLA's partitioner gathers the
batch around every FFT (even one along unsharded axes), so ``Blur`` needs ``mesh=``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import inverse

from . import _sharding as S

H = 12


def _problem(num_images, operator="blur"):
    rng = np.random.default_rng(0)
    xs = jnp.asarray(rng.uniform(size=(num_images, H, H, 1)), jnp.float32)
    sigma_y = 0.02
    op = (inverse.Blur(inverse.gaussian_kernel(3, 1.0), (H, H)) if operator == "blur"
          else inverse.Inpainting(jnp.asarray(rng.uniform(size=(H, H, 1)) < 0.7)))
    ys = jax.vmap(lambda x, k: inverse.degrade(k, x, op, sigma_y))(xs, jax.random.split(jax.random.key(0), num_images))
    sched = inverse.constant_schedule(3, sigma=10 / 255, alpha=0.5, step_size=0.5 * sigma_y**2)

    def run(k, y, mesh=None):
        return inverse.restore_batch(k, y, op, inverse.TVDenoiser(num_steps=3), sched, sigma_y, method="snore",
                                     mesh=mesh).x
    return run, ys


def test_restore_batch_with_a_mesh_shards_images():
    run, ys = _problem(8)
    keys = jax.random.split(jax.random.key(1), 2)
    out = S.check_sharded(lambda mesh, k, y: run(k, y, mesh), (keys, ys), 8, (False, True), max_memory_ratio=0.6,
                          atol=1e-5, pass_mesh=True).many
    np.testing.assert_allclose(np.asarray(out), np.asarray(run(keys, ys)), atol=1e-5)  # the program without a mesh
    assert out.shape == (8, 2, H, H, 1)
    assert not np.allclose(np.asarray(out[0]), np.asarray(out[1]))  # different images, different restorations


@pytest.mark.slow
def test_restore_batch_with_a_two_axis_mesh_shards_images_and_seeds():
    run, ys = _problem(4)
    keys = jax.random.split(jax.random.key(1), 4)
    mesh = jax.make_mesh((2, 2), ("images", "seeds"), devices=jax.devices()[:4])
    out = jax.jit(lambda k, y: run(k, y, mesh))(keys, ys)
    assert out.sharding.shard_shape(out.shape)[:2] == (2, 2)  # each device: 2 images x 2 seeds
    out = np.asarray(out)
    np.testing.assert_allclose(out, np.asarray(run(keys, ys)), atol=1e-5)
    assert not np.allclose(out[:, 0], out[:, 1])  # SNORE's noise differs per seed
    with pytest.raises(ValueError, match="mesh: expected axis 'images' of a size that divides num_images"):
        run(keys, ys[:3], mesh)
    with pytest.raises(TypeError, match="mesh: expected a jax.sharding.Mesh or None, got str"):
        run(keys, ys, "images")


@pytest.mark.slow
def test_restore_batch_shards_images_and_seeds_by_input_sharding():
    run, ys = _problem(8, "inpainting")
    S.check_sharded(run, (jax.random.split(jax.random.key(1), 2), ys), 8, (False, True), max_memory_ratio=0.6,
                    atol=1e-5)
    run, ys = _problem(2, "inpainting")
    S.check_sharded(run, (jax.random.split(jax.random.key(1), 8), ys), 8, (True, False), out_axis=1,
                    max_memory_ratio=0.6, atol=1e-5)
