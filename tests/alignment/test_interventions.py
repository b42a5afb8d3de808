import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import lm
from jaxcore.alignment import key_activations, residual_offset, scale_keys, subtract_direction

from ._shared import model

TOKS = jnp.array([[3, 4, 5, 6, 7], [9, 10, 11, 12, 13], [1, 7, 2, 8, 3]])  # the probe tests' shape


def test_key_scale_one_is_the_identity():
    m = model()
    same = scale_keys(m, jnp.array([0, 1, 1]), jnp.array([3, 4, 50]), 1.0)
    for a, b in zip(jax.tree_util.tree_leaves(m), jax.tree_util.tree_leaves(same)):
        assert np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.slow
def test_key_scale_equals_the_mlp_scale_intervention():
    m = model()
    layers, idx, s = jnp.array([0, 1, 1]), jnp.array([3, 4, 50]), 10.0
    big = scale_keys(m, layers, idx, s)
    mlp_scale = jnp.ones((2, 96)).at[layers, idx].set(s)
    want = lm.forward(m, TOKS, intervention=lm.Intervention(mlp_scale=mlp_scale))
    np.testing.assert_allclose(np.asarray(lm.forward(big, TOKS)), np.asarray(want), rtol=1e-4, atol=1e-4)
    assert not np.allclose(np.asarray(want), np.asarray(lm.forward(m, TOKS)), atol=1e-3)
    # the activation of a scaled neuron of the first block is exactly s times the original
    a0 = key_activations(m, TOKS, layers=jnp.array([0]), indices=jnp.array([3]))
    a1 = key_activations(big, TOKS, layers=jnp.array([0]), indices=jnp.array([3]))
    np.testing.assert_allclose(np.asarray(a1), s * np.asarray(a0), rtol=1e-5)


def test_subtract_direction_shifts_the_last_stream():
    m = model()
    u = jax.random.normal(jax.random.key(5), (32,))
    iv = subtract_direction(m, u, alpha=3.0)
    h0 = lm.forward_hidden(m, TOKS).residual
    h1 = lm.forward_hidden(m, TOKS, intervention=iv).residual
    shift = np.asarray(h1[:, -1] - h0[:, -1])
    np.testing.assert_allclose(shift, np.broadcast_to(-3.0 * np.asarray(u / jnp.linalg.norm(u)), shift.shape),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(h1[:, :-1]), np.asarray(h0[:, :-1]), atol=1e-6)
    # residual_offset sees the same shift (the intervention is a model change here through a zero-layer view)
    assert float(jnp.abs(residual_offset(m, m, TOKS)).max()) == 0.0
    big = scale_keys(m, jnp.array([1]), jnp.array([4]), 5.0)
    off = residual_offset(m, big, TOKS)
    np.testing.assert_allclose(np.asarray(off[:2]), 0.0, atol=1e-6)  # block 1 is the first to differ
    assert float(jnp.linalg.norm(off[2])) > 1e-3


def test_refusals():
    m = model()
    with pytest.raises(ValueError, match="alpha: expected a finite number"):
        subtract_direction(m, jnp.ones(32), alpha=float("nan"))
    with pytest.raises(ValueError, match="layer: expected an int in"):
        subtract_direction(m, jnp.ones(32), alpha=1.0, layer=5)
    with pytest.raises(ValueError, match="layers: expected block indices"):
        scale_keys(m, jnp.array([2]), jnp.array([0]), 2.0)
    with pytest.raises(TypeError, match="indices: expected a 1-d int array"):
        scale_keys(m, jnp.array([0]), jnp.array([0.5]), 2.0)
    with pytest.raises(ValueError, match="scale: expected a finite number"):
        scale_keys(m, jnp.array([0]), jnp.array([0]), float("inf"))
