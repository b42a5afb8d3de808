"""Controlled decoding on a tiny random Llama: processors, rollouts, blockwise CD and best-of-K."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import lm
from jaxcore.decoding import (
    CDQ,
    CDFudge,
    QHead,
    ValueHead,
    best_of_k,
    blockwise_generate,
    fit_cdq,
    fit_fudge,
    keyword_reward,
    rollouts,
)

from ._oracle import MODEL

PROMPT = np.array([[0, 0, 5, 6], [1, 2, 3, 4]], np.int32)
MASK = PROMPT > 0
N = 4
QH = QHead(32, 64, key=jax.random.key(1))
VH = ValueHead(32, key=jax.random.key(2))


def _hidden_logits(seq, smask):
    out = lm.forward_hidden(MODEL, seq, smask)
    return np.asarray(out.residual[:, -1]), np.asarray(out.logits, np.float64)


def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


@pytest.mark.slow
def test_lambda_zero_reproduces_plain_generate_bit_for_bit():
    plain = lm.generate(jax.random.key(3), MODEL, PROMPT, MASK, max_new_tokens=N, top_k=20)
    for proc in (CDQ(QH, 0.0),):
        out = lm.generate(jax.random.key(3), MODEL, PROMPT, MASK, max_new_tokens=N, top_k=20, processor=proc)
        np.testing.assert_array_equal(out.tokens, plain.tokens)
        np.testing.assert_array_equal(out.logprobs, plain.logprobs)


@pytest.mark.slow
def test_cdq_samples_from_logits_plus_lambda_q():
    lam = 1.5
    out = lm.generate(jax.random.key(4), MODEL, PROMPT, MASK, max_new_tokens=N, processor=CDQ(QH, lam))
    seq = np.concatenate([PROMPT, np.asarray(out.tokens)], 1)
    smask = np.concatenate([MASK, np.ones((2, N), bool)], 1)
    hid, logits = _hidden_logits(seq, smask)
    p = PROMPT.shape[1]
    z = logits[:, p - 1:p - 1 + N] + lam * np.asarray(QH(jnp.asarray(hid[:, p - 1:p - 1 + N])), np.float64)
    want = np.take_along_axis(_log_softmax(z), np.asarray(out.tokens)[..., None], -1)[..., 0]
    np.testing.assert_allclose(out.logprobs, want, atol=1e-4)


@pytest.mark.slow
def test_fudge_tilts_the_top_k_by_the_extended_prefix_values():
    lam, k = 2.0, 5
    out = lm.generate(jax.random.key(5), MODEL, PROMPT, MASK, max_new_tokens=N, processor=CDFudge(VH, lam, k))
    seq = np.concatenate([PROMPT, np.asarray(out.tokens)], 1)
    smask = np.concatenate([MASK, np.ones((2, N), bool)], 1)
    _, logits = _hidden_logits(seq, smask)
    p = PROMPT.shape[1]
    for t in range(N):
        z = logits[:, p - 1 + t].copy()
        cand = np.argsort(-z, axis=1)[:, :k]
        ext = np.concatenate([np.repeat(seq[:, None, :p + t], k, 1), cand[..., None]], 2).reshape(2 * k, -1)
        emask = np.concatenate([np.repeat(smask[:, None, :p + t], k, 1), np.ones((2, k, 1), bool)], 2)
        h, _ = _hidden_logits(ext, emask.reshape(2 * k, -1))
        v = np.asarray(VH(jnp.asarray(h[:, -1]))).reshape(2, k)
        np.put_along_axis(z, cand, np.take_along_axis(z, cand, 1) + lam * v, 1)  # the rest keep base logits
        want = _log_softmax(z)[np.arange(2), np.asarray(out.tokens)[:, t]]
        np.testing.assert_allclose(out.logprobs[:, t], want, atol=1e-4)


@pytest.mark.slow
def test_rollouts_hold_the_frozen_models_hidden_states_and_next_token_law():
    base = lm.generate(jax.random.key(6), MODEL, PROMPT, MASK, max_new_tokens=N)
    data = rollouts(MODEL, PROMPT, MASK, base, jnp.array([0.5, 1.0]), top_k=64, chunk_size=1)
    seq = np.concatenate([PROMPT, np.asarray(base.tokens)], 1)
    hid, logits = _hidden_logits(seq, np.concatenate([MASK, np.ones((2, N), bool)], 1))
    np.testing.assert_allclose(data.hidden, hid[:, 3:], atol=2e-5)
    probs = np.exp(_log_softmax(logits[:, 3:]))
    got = np.zeros_like(probs)
    np.put_along_axis(got, np.asarray(data.next_ids), np.asarray(data.next_probs), -1)
    np.testing.assert_allclose(got, probs, atol=2e-5)  # k = V: exact


@pytest.mark.slow
def test_lambda_zero_fudge_reproduces_plain_generate_bit_for_bit():
    plain = lm.generate(jax.random.key(3), MODEL, PROMPT, MASK, max_new_tokens=N, top_k=20)
    out = lm.generate(jax.random.key(3), MODEL, PROMPT, MASK, max_new_tokens=N, top_k=20,
                      processor=CDFudge(VH, 0.0, num_candidates=4))
    np.testing.assert_array_equal(out.tokens, plain.tokens)
    np.testing.assert_array_equal(out.logprobs, plain.logprobs)


@pytest.mark.slow
def test_blockwise_one_candidate_whole_answer_is_plain_generate():
    key = jax.random.key(8)
    out = blockwise_generate(key, MODEL, PROMPT, MASK, scorer=VH, num_candidates=1, block_size=N, max_new_tokens=N)
    plain = lm.generate(jax.random.split(key, 1)[0], MODEL, PROMPT, MASK, max_new_tokens=N)
    np.testing.assert_array_equal(out.tokens, plain.tokens)
    np.testing.assert_allclose(out.model_logprobs, plain.model_logprobs, atol=1e-6)


@pytest.mark.slow
def test_blockwise_keeps_the_best_scored_block():
    key, k, m = jax.random.key(9), 3, 2
    out = blockwise_generate(key, MODEL, PROMPT, MASK, scorer=VH, num_candidates=k, block_size=m, max_new_tokens=N)
    # block 1 by hand: K copies of each prompt, one generate call, scores of the extended prefixes
    k1 = jax.random.split(key, N // m)[0]
    pad = np.concatenate([np.zeros((2, N - m), np.int32), PROMPT], 1)
    pmask = np.concatenate([np.zeros((2, N - m), bool), MASK], 1)
    cand = lm.generate(k1, MODEL, np.repeat(pad, k, 0), np.repeat(pmask, k, 0), max_new_tokens=m).tokens
    seq = np.concatenate([np.repeat(PROMPT, k, 0), np.asarray(cand)], 1)
    hid, _ = _hidden_logits(seq, np.concatenate([np.repeat(MASK, k, 0), np.ones((2 * k, m), bool)], 1))
    scores = np.asarray(VH(jnp.asarray(hid[:, -1]))).reshape(2, k)
    best = scores.argmax(1)
    np.testing.assert_array_equal(out.tokens[:, :m], np.asarray(cand).reshape(2, k, m)[np.arange(2), best])
    np.testing.assert_allclose(out.scores[:, 0], scores.max(1), atol=1e-5)
    # every kept block's score is the value of its whole prefix
    seq = np.concatenate([PROMPT, np.asarray(out.tokens)], 1)
    hid, _ = _hidden_logits(seq, np.concatenate([MASK, np.ones((2, N), bool)], 1))
    np.testing.assert_allclose(out.scores[:, 1], np.asarray(VH(jnp.asarray(hid[:, -1]))), atol=1e-5)


@pytest.mark.slow
def test_best_of_k_keeps_the_highest_reward():
    # one prompt x K = 2: the [2, 4] shapes of the other non-slow tests (one compiled sampler)
    key, k = jax.random.key(10), 2
    ids = jnp.arange(0, 64, 3)
    prompt, mask = PROMPT[1:], MASK[1:]
    out = best_of_k(key, MODEL, prompt, mask, reward_fn=lambda t, m: keyword_reward(t, ids, m), num_candidates=k,
                    max_new_tokens=N, top_k=20)
    cand = lm.generate(key, MODEL, np.repeat(prompt, k, 0), np.repeat(mask, k, 0), max_new_tokens=N,
                       top_k=20).tokens
    np.testing.assert_array_equal(out.candidates.reshape(k, N), cand)
    r = np.asarray(keyword_reward(cand, ids)).reshape(1, k)
    np.testing.assert_array_equal(out.index, r.argmax(1))
    np.testing.assert_allclose(out.reward, r.max(1))
    np.testing.assert_array_equal(out.tokens, np.asarray(cand).reshape(1, k, N)[np.arange(1), r.argmax(1)])
    with pytest.raises(ValueError, match=r"^reward_fn\(tokens, mask\): expected "):
        best_of_k(key, MODEL, prompt, mask, reward_fn=lambda t, m: jnp.zeros(3), num_candidates=k, max_new_tokens=N,
                  top_k=20)


@pytest.mark.slow
def test_trained_heads_raise_the_reward_on_a_tiny_llama():
    # train both heads on 256 base samples of a keyword reward, then decode with lambda = 16: the
    # reward must rise clearly above the base model's (measured: 0.225 -> 0.40 CD-Q, 0.29 CD-FUDGE)
    ids = jnp.arange(0, 64, 4)
    prompt = np.repeat(PROMPT, 128, 0)
    mask = np.repeat(MASK, 128, 0)
    base = lm.generate(jax.random.key(11), MODEL, prompt, mask, max_new_tokens=8)
    r = keyword_reward(base.tokens, ids)
    data = rollouts(MODEL, prompt, mask, base, r, top_k=64)
    q = fit_cdq(jax.random.key(12), QHead(32, 64), data, num_steps=300, learning_rate=0.03).head
    v = fit_fudge(jax.random.key(13), ValueHead(32), data, num_steps=300, learning_rate=0.03).head
    for proc in (CDQ(q, 16.0), CDFudge(v, 16.0, 16)):
        out = lm.generate(jax.random.key(14), MODEL, prompt, mask, max_new_tokens=8, processor=proc)
        assert float(keyword_reward(out.tokens, ids).mean()) > float(r.mean()) + 0.04
