"""The Llama forward on a tiny random model: vs a NumPy float64 reference, padding, internals."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import lm

from ._reference import log_softmax, reference_logits

MODEL = lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny())


def test_forward_matches_float64_reference():
    toks = np.array([[3, 17, 5, 60, 2, 9, 41]])
    got = np.asarray(lm.forward(MODEL, toks))[0]
    want = reference_logits(MODEL, toks[0])
    np.testing.assert_allclose(got, want, atol=2e-5, rtol=1e-4)


def test_forward_float64_is_exact(x64):
    model = MODEL.astype(jnp.float64)
    toks = np.array([[1, 2, 3, 4, 5]])
    got = np.asarray(lm.forward(model, toks))[0]
    np.testing.assert_allclose(got, reference_logits(model, toks[0]), rtol=1e-10, atol=1e-10)


def test_left_padding_does_not_change_logits():
    seq = np.array([7, 8, 9, 10])
    padded = np.array([[0, 0, 7, 8, 9, 10], [1, 7, 8, 9, 10, 11]])
    mask = np.array([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]], bool)
    got = np.asarray(lm.forward(MODEL, padded, mask))
    want = np.asarray(lm.forward(MODEL, seq[None]))[0]
    np.testing.assert_allclose(got[0, 2:], want, atol=1e-5)


def test_forward_hidden_internals_and_interventions():
    toks = np.array([[3, 4, 5, 6]])
    c = MODEL.config
    res = lm.forward_hidden(MODEL, toks)
    np.testing.assert_allclose(res.logits, lm.forward(MODEL, toks), atol=1e-6)
    assert res.residual.shape == (1, c.num_layers + 1, 4, c.dim) and res.mlp.shape == (1, c.num_layers, 4, c.hidden_dim)
    np.testing.assert_allclose(res.residual[0, 0], np.asarray(MODEL.embed)[toks[0]], atol=1e-7)
    # the MLP output of the last block equals the residual difference minus the attention part:
    # check instead that zero MLP scales equal a model with zero down-projection
    zero = lm.Intervention(mlp_scale=jnp.zeros((c.num_layers, c.hidden_dim)))
    ablated = lm.Llama(c, MODEL.embed, tuple(lm.LlamaBlock(b.attn_norm, b.wqkv, b.wo, b.mlp_norm, b.w_gate_up,
                                                           jnp.zeros_like(b.w_down)) for b in MODEL.layers),
                       MODEL.final_norm)
    np.testing.assert_allclose(lm.forward(MODEL, toks, intervention=zero), lm.forward(ablated, toks), atol=1e-5)
    # an added residual vector at the last block shifts the final stream by exactly that vector
    vec = jnp.zeros((c.num_layers, c.dim)).at[-1].set(jnp.arange(c.dim) / c.dim)
    shifted = lm.forward_hidden(MODEL, toks, intervention=lm.Intervention(residual=vec))
    np.testing.assert_allclose(shifted.residual[0, -1] - res.residual[0, -1], np.broadcast_to(vec[-1], (4, c.dim)),
                               atol=1e-5)


def test_bfloat16_storage_close_to_float32():
    toks = np.array([[3, 17, 5, 60, 2]])
    lp32 = log_softmax(np.asarray(lm.forward(MODEL, toks), np.float64))
    lp16 = log_softmax(np.asarray(lm.forward(MODEL.astype(jnp.bfloat16), toks), np.float64))
    assert np.abs(np.exp(lp32) - np.exp(lp16)).sum(-1).max() < 0.05


@pytest.mark.parametrize("bad, err, name", [
    (np.array([[1.0, 2.0]]), TypeError, "tokens"),
    (np.array([1, 2]), ValueError, "tokens"),
    (np.array([[1, 64]]), ValueError, "tokens"),
    (np.array([[-1, 2]]), ValueError, "tokens"),
])
def test_forward_refuses_bad_tokens(bad, err, name):
    with pytest.raises(err, match=f"^{name}: expected"):
        lm.forward(MODEL, bad)


def test_forward_refuses_bad_mask_and_model():
    with pytest.raises(ValueError, match="^mask: expected"):
        lm.forward(MODEL, np.array([[1, 2]]), np.array([[True]]))
    with pytest.raises(TypeError, match="^model: expected"):
        lm.forward("llama", np.array([[1, 2]]))
    with pytest.raises(ValueError, match="^intervention.residual: expected"):
        lm.forward(MODEL, np.array([[1, 2]]), intervention=lm.Intervention(residual=jnp.zeros((3, 3))))
    with pytest.raises(TypeError, match="^key: expected"):
        lm.random_llama(0)
    with pytest.raises(ValueError, match="^num_kv_heads: expected"):
        lm.LlamaConfig(vocab_size=8, dim=8, hidden_dim=8, num_layers=1, num_heads=4, num_kv_heads=3)
