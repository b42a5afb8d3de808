import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import lm
from jaxcore.alignment import fit_probe, key_activations, mean_hidden, residual_features

from ._shared import model, sequences


def test_probe_recovers_a_planted_direction():
    k1, k2, k3 = jax.random.split(jax.random.key(4), 3)
    d = 16
    w_true = jax.random.normal(k1, (d,))
    w_true = w_true / jnp.linalg.norm(w_true)
    x = jax.random.normal(k2, (600, d)) * 2.0 + 3.0  # offset and scale: the fit standardises
    y = jax.random.bernoulli(k3, jax.nn.sigmoid(4.0 * (x - 3.0) @ w_true + 0.5)).astype(jnp.float32)
    res = fit_probe(x, y, num_steps=400, l2=1e-4)
    assert float(res.direction @ w_true) > 0.95
    assert float(res.accuracy) > 0.8
    assert float(res.loss[-1]) < float(res.loss[0])
    # the returned weight acts on raw features
    p = jax.nn.sigmoid(x @ res.weight + res.bias)
    assert float(jnp.mean((p > 0.5) == (y > 0.5))) == pytest.approx(float(res.accuracy))


def test_probe_soft_labels_and_weights():
    x = jnp.array([[-1.0], [1.0], [-2.0], [2.0]])
    res = fit_probe(x, jnp.array([0.1, 0.9, 0.0, 1.0]), sample_weight=jnp.array([1.0, 1.0, 0.0, 1.0]))
    assert float(res.direction[0]) == pytest.approx(1.0)


def test_mean_hidden_equals_forward_hidden_average_for_any_chunk():
    toks, mask, pos = sequences()  # 7 rows
    out = lm.forward_hidden(model(), toks, mask)
    w = np.asarray(pos, np.float64)
    want = np.einsum("bnld,bl->bnd", np.asarray(out.residual), w) / w.sum(1)[:, None, None]
    assert len(np.unique(want[:, -1, 0])) == len(want)  # rows differ: a mix-up of the row order shows
    # 3 interleaved chunks of 3 rows (rows j, j + 3, j + 6; 2 padding slots), one chunk of all 7
    for chunk in (3, 16):
        h = mean_hidden(model(), toks, mask, position_mask=pos, chunk_size=chunk)
        np.testing.assert_allclose(np.asarray(h.residual), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(residual_features(model(), toks, mask, position_mask=pos)),
                               want[:, -1], rtol=1e-5, atol=1e-5)
    ka = key_activations(model(), toks, mask, layers=jnp.array([1, 0]), indices=jnp.array([3, 90]),
                         position_mask=pos)
    mlp = np.einsum("bnlf,bl->bnf", np.asarray(out.mlp), w) / w.sum(1)[:, None, None]
    np.testing.assert_allclose(np.asarray(ka), mlp[:, [1, 0], [3, 90]], rtol=1e-5, atol=1e-5)


def test_refusals():
    with pytest.raises(ValueError, match="labels: expected values in \\[0, 1\\]"):
        fit_probe(jnp.ones((3, 2)), jnp.array([0.0, 2.0, 1.0]))
    with pytest.raises(ValueError, match="features: expected finite values"):
        fit_probe(jnp.array([[1.0], [jnp.nan]]), jnp.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="features: expected a \\[num_samples, dim\\] array"):
        fit_probe(jnp.ones(3), jnp.ones(3))
    with pytest.raises(ValueError, match="layer: expected an int in"):
        residual_features(model(), jnp.array([[1, 2]]), layer=2)
    with pytest.raises(ValueError, match="indices: expected MLP neuron indices"):
        key_activations(model(), jnp.array([[1, 2]]), layers=jnp.array([0]), indices=jnp.array([96]))
