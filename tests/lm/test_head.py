"""The vocabulary-chunked head (jaxcore/lm/head.py) against the plain log_softmax gather."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import lm
from jaxcore.lm import head as head_module
from jaxcore.lm.head import model_logprobs, next_token_logprobs

N, D, V = 6, 5, 23  # V is prime: no chunk size below it divides it


def _data(dtype, lead=(N,)):
    k = jax.random.split(jax.random.key(3), 3)
    h = 2.0 * jax.random.normal(k[0], (*lead, D), dtype)
    w = jax.random.normal(k[1], (V, D), dtype)
    t = jax.random.randint(k[2], lead, 0, V)
    return h, w, t


def _plain(h, w, t):
    lp = jax.nn.log_softmax(h @ w.T, axis=-1)
    return jnp.take_along_axis(lp, t[..., None], axis=-1)[..., 0]


@pytest.fixture(params=["saved", "chunked"])
def backward(request, monkeypatch):
    """Both backward passes: the logits kept by the forward pass, or recomputed chunk by chunk."""
    monkeypatch.setattr(head_module, "SAVE_LOGITS_MAX", 1 << 30 if request.param == "saved" else 0)
    return request.param


@pytest.mark.parametrize("chunk", [1, 4, 7, 23, 64])
@pytest.mark.parametrize("vocab_first", [True, False])
def test_matches_log_softmax_float32(chunk, vocab_first):
    h, w, t = _data(jnp.float32)
    lp = next_token_logprobs(h, w if vocab_first else w.T, t, chunk_size=chunk, vocab_first=vocab_first)
    np.testing.assert_allclose(lp, _plain(h, w, t), rtol=1e-5, atol=1e-5)
    assert lp.dtype == jnp.float32 and lp.shape == (N,)


@pytest.mark.parametrize("vocab_first", [True, False])
def test_value_and_gradient_float64(vocab_first, backward):
    with jax.enable_x64(True):
        h, w, t = _data(jnp.float64)
        t = t.at[1].set(t[0])  # a repeated target: the weight gradient's scatter must accumulate
        g = jnp.linspace(-1.5, 2.0, N)
        ww = w if vocab_first else w.T

        def ours(h, ww):
            return jnp.sum(g * next_token_logprobs(h, ww, t, chunk_size=4, vocab_first=vocab_first))

        def plain(h, w):
            return jnp.sum(g * _plain(h, w, t))

        np.testing.assert_allclose(ours(h, ww), plain(h, w), rtol=1e-12)
        dh, dw = jax.grad(ours, (0, 1))(h, ww)
        rh, rw = jax.grad(plain, (0, 1))(h, w)
        np.testing.assert_allclose(dh, rh, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(dw if vocab_first else dw.T, rw, rtol=1e-10, atol=1e-12)
        assert dh.dtype == dw.dtype == jnp.float64


def test_gradient_against_finite_differences():
    with jax.enable_x64(True):
        h, w, t = _data(jnp.float64)
        f = lambda w: jnp.sum(next_token_logprobs(h, w, t, chunk_size=5))  # noqa: E731
        e = jax.random.normal(jax.random.key(9), w.shape, jnp.float64)
        eps = 1e-6
        fd = (f(w + eps * e) - f(w - eps * e)) / (2 * eps)
        np.testing.assert_allclose(jnp.vdot(jax.grad(f)(w), e), fd, rtol=1e-7)


def test_batch_axes_and_bfloat16_weights():
    h, w, t = _data(jnp.float32, lead=(2, 3))
    np.testing.assert_allclose(next_token_logprobs(h, w, t, chunk_size=8), _plain(h, w, t), rtol=1e-5, atol=1e-5)
    wb = w.astype(jnp.bfloat16)
    ref = _plain(h.astype(jnp.bfloat16).astype(jnp.float32), wb.astype(jnp.float32), t)
    lp = next_token_logprobs(h, wb, t, chunk_size=8)
    assert lp.dtype == jnp.float32
    np.testing.assert_allclose(lp, ref, rtol=1e-4, atol=1e-4)
    dw = jax.grad(lambda w: jnp.sum(next_token_logprobs(h, w, t, chunk_size=8)))(wb)
    assert dw.dtype == jnp.bfloat16 and bool(jnp.all(jnp.isfinite(dw.astype(jnp.float32))))


def test_extreme_logits_stay_finite():
    h, w, t = _data(jnp.float32)
    lp = next_token_logprobs(300.0 * h, w, t, chunk_size=4)  # logits in the thousands: exp would overflow
    np.testing.assert_allclose(lp, _plain(300.0 * h, w, t), rtol=1e-5, atol=1e-2)
    assert bool(jnp.all(lp <= 0))


def test_bad_inputs():
    h, w, t = _data(jnp.float32)
    with pytest.raises(ValueError, match="chunk_size: expected"):
        next_token_logprobs(h, w, t, chunk_size=0)
    with pytest.raises(TypeError, match="targets: expected an integer array"):
        next_token_logprobs(h, w, t.astype(jnp.float32))
    with pytest.raises(TypeError, match="hidden: expected a float array"):
        next_token_logprobs(t, w, t)
    with pytest.raises(ValueError, match="weight: expected"):
        next_token_logprobs(h, w[:, :3], t)
    with pytest.raises(ValueError, match="targets: expected shape"):
        next_token_logprobs(h, w, t[:3])


# --- through the model --------------------------------------------------------------------

CFG = lm.LlamaConfig.tiny(vocab_size=61)  # 61 columns: chunks of 16 leave a remainder of 13


def _reference(model, tokens, mask, intervention=None):
    logits = lm.forward(model, tokens, mask, intervention=intervention)[:, :-1]
    return jnp.take_along_axis(jax.nn.log_softmax(logits, -1), tokens[:, 1:, None], -1)[..., 0]


def _batch():
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, CFG.vocab_size, (3, 7)), jnp.int32)
    mask = jnp.ones(tokens.shape, bool).at[0, :3].set(False).at[2, 5:].set(False)  # left- and right-padded rows
    return tokens, mask


@pytest.mark.parametrize("tied", [True, False])
def test_model_logprobs_match_forward(tied):
    import dataclasses

    cfg = CFG if tied else dataclasses.replace(CFG, tie_embeddings=False)
    model = lm.random_llama(jax.random.key(1), cfg)
    tokens, mask = _batch()
    inter = lm.Intervention(residual=jnp.full((cfg.num_layers, cfg.dim), 0.05)) if tied else None
    lp = model_logprobs(model, tokens, mask, intervention=inter, chunk_size=16)
    np.testing.assert_allclose(lp, _reference(model, tokens, mask, inter), rtol=1e-5, atol=1e-5)
    assert lp.shape == (3, 6)


def test_model_logprobs_gradient_matches_plain(monkeypatch):
    monkeypatch.setattr(head_module, "SAVE_LOGITS_MAX", 0)  # the recomputing backward (the kept one: above)
    model = lm.random_llama(jax.random.key(2), CFG)
    tokens, mask = _batch()
    keep = (mask[:, 1:] & mask[:, :-1]).astype(jnp.float32)

    def grads(f):
        def loss(embed):
            m = lm.Llama(model.config, embed, model.layers, model.final_norm, model.head)
            return jnp.sum(keep * f(m))
        return jax.jit(jax.grad(loss))(model.embed)

    ours = grads(lambda m: head_module._model_logprobs(m, tokens, mask, None, 16))
    plain = grads(lambda m: _reference(m, tokens, mask))
    np.testing.assert_allclose(ours, plain, rtol=2e-4, atol=2e-5)


def test_model_logprobs_errors():
    model = lm.random_llama(jax.random.key(1), CFG)
    with pytest.raises(ValueError, match="tokens: expected sequences of at least 2 tokens"):
        model_logprobs(model, jnp.array([[1], [2]]))
    with pytest.raises(ValueError, match="tokens: expected token ids"):
        model_logprobs(model, jnp.array([[1, 61]]))
    with pytest.raises(ValueError, match="chunk_size: expected"):
        model_logprobs(model, jnp.array([[1, 2]]), chunk_size=0)


def test_target_ids_outside_the_vocabulary_are_refused_eagerly_and_under_jit():
    h = jax.random.normal(jax.random.key(0), (3, 8))
    w = jax.random.normal(jax.random.key(1), (64, 8))
    for bad in (64, -1):
        with pytest.raises(ValueError, match=r"targets: expected token ids in \[0, 64\), got " + str(bad)):
            next_token_logprobs(h, w, jnp.array([0, bad, 5]))
    f = jax.jit(lambda t: next_token_logprobs(h, w, t))
    with pytest.raises(Exception, match=r"targets"):
        jax.block_until_ready(f(jnp.array([0, 64, 5])))
    g = jax.jit(lambda t: next_token_logprobs(h, w, t, check_ids=False))
    assert np.allclose(g(jnp.array([0, 3, 5])), f(jnp.array([0, 3, 5])))


@pytest.mark.parametrize("chunk_size", [7, 64])
def test_exact_at_float32_extremes_where_one_rounding_step_exceeds_the_log_probability(chunk_size):
    h = jax.random.normal(jax.random.key(0), (3, 32)) * 1e30
    w = jax.random.normal(jax.random.key(0), (64, 32))
    t = jnp.array([0, 5, 63])
    z = np.asarray(h, np.float64) @ np.asarray(w, np.float64).T
    ref = z[np.arange(3), np.asarray(t)] - (z.max(1) + np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)))
    lp = np.asarray(next_token_logprobs(h, w, t, chunk_size=chunk_size), np.float64)
    assert lp[0] == 0.0 and ref[0] == 0.0  # the target is the arg-max row: log p = 0, not 1e24
    # the other rows are -1e30-scale: agree to float32's relative precision
    np.testing.assert_allclose(lp[1:], ref[1:], rtol=1e-5)
