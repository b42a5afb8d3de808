"""decoding's prompts on 4 faked devices: controlled decoding with the prompt batch split.

What shards: the ``[B, P]`` prompts and everything per prompt (the KV cache, hidden states, the scorer's
values, the tilted logits, the new tokens, blockwise's K candidates per prompt); replicated: the model
and the scorer heads. CD-Q adds ``lambda Q(h)`` row by row; CD-FUDGE picks its k candidates with a sort
along the vocabulary (row-local, unlike ``lax.top_k``) and adds their values with a scatter that has a
batch dimension; blockwise CD keeps each prompt's best block with a batched gather; ``rollouts`` (the
scorers' training data) runs its chunks of rows interleaved, so each chunk spans every device (with
``chunk_size`` a multiple of the device count dividing N). The same key gives the same tokens on 1 and on
4 devices.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import decoding, lm

from . import _sharding as S

B = 8


def _problem():
    model = lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny())
    return model, jax.random.randint(jax.random.key(1), (B, 5), 1, 50)


def _tokens_and_logprobs(out):
    return out.tokens, out.logprobs


def _cdq(model):
    return decoding.CDQ(decoding.QHead(model.config.dim, model.config.vocab_size, key=jax.random.key(3)), 4.0)


def _cdfudge(model):
    return decoding.CDFudge(decoding.ValueHead(model.config.dim, key=jax.random.key(3)), 4.0, 4)


@pytest.mark.slow
@pytest.mark.parametrize("make", [_cdq, _cdfudge], ids=["cdq", "cdfudge"])
def test_tokenwise_generate_shards_prompts(make):
    model, prompt = _problem()
    processor = make(model)
    run = S.check_sharded(lambda m, p, k: lm.generate(k, m, p, max_new_tokens=3, processor=processor),
                          (model, prompt, jax.random.key(2)), B, (False, True, False), select=_tokens_and_logprobs,
                          max_memory_ratio=0.9, rtol=1e-5, atol=1e-5)
    # the tilt is strong (lambda = 4, values ~ 1): the sampled distribution is not the base model's
    assert not np.allclose(np.asarray(run.many.logprobs), np.asarray(run.many.model_logprobs), atol=1e-3)


@pytest.mark.slow
def test_blockwise_generate_shards_prompts():
    model, prompt = _problem()
    head = decoding.ValueHead(model.config.dim, key=jax.random.key(3))
    run = S.check_sharded(
        lambda m, p, k: decoding.blockwise_generate(k, m, p, scorer=head, num_candidates=2, block_size=2,
                                                    max_new_tokens=4),
        (model, prompt, jax.random.key(2)), B, (False, True, False), max_memory_ratio=0.9, rtol=1e-5, atol=1e-5)
    assert run.many.tokens.shape == (B, 4) and run.many.scores.shape == (B, 2)


@pytest.mark.slow
def test_rollouts_shards_samples(chunk_size=4):  # two chunks of 4 rows, each spanning the 4 devices
    model, prompt = _problem()
    tokens = jax.random.randint(jax.random.key(4), (B, 4), 0, 64)
    mask = np.ones((B, 4), bool)

    def prepare(m, p, t, c, r):
        zero = jnp.zeros(t.shape, jnp.float32)
        return decoding.rollouts(m, p, None, lm.GenerateResult(t, c, zero, zero, None), r, top_k=8,
                                 chunk_size=chunk_size)

    run = S.check_sharded(prepare, (model, prompt, tokens, mask, jnp.arange(B, dtype=jnp.float32)), B,
                          (False, True, True, True, True), max_memory_ratio=0.9, rtol=1e-5, atol=1e-5,
                          select=lambda r: (r.hidden, r.tokens, r.mask, r.reward, r.next_ids, r.next_probs))
    # (weight, unit weights, is a constant of the program: replicated)
    # the kept next-token ids are the 8 most likely under the model, their probabilities renormalised
    assert run.many.hidden.shape == (B, 5, model.config.dim)
    logits = np.asarray(lm.forward(model, np.concatenate([np.asarray(prompt), np.asarray(tokens)], axis=1)))
    np.testing.assert_array_equal(np.asarray(run.many.next_ids), np.argsort(-logits[:, 4:], axis=-1)[..., :8])
    np.testing.assert_allclose(np.asarray(run.many.next_probs).sum(-1), 1.0, rtol=1e-5)
    assert np.all(np.diff(np.asarray(run.many.next_probs), axis=-1) <= 1e-7)  # descending, as lax.top_k orders them


@pytest.mark.slow
def test_fit_cdq_full_batch_is_data_parallel():
    # the head's training on rollouts split over the devices: each device's gradient of its own samples,
    # all-reduced (weight-shaped); a minibatch (batch_size < N) is drawn across devices and assembled on
    # each, so only full-batch training keeps the samples where they are
    n = 20  # no dimension of the head or the tiny Llama (64, 32, 96, 8) is a multiple of it
    model = lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny())
    prompt = jax.random.randint(jax.random.key(1), (n, 5), 1, 50)
    tokens = jax.random.randint(jax.random.key(4), (n, 4), 0, 64)
    zero = jnp.zeros((n, 4))
    data = decoding.rollouts(model, prompt, None, lm.GenerateResult(tokens, np.ones((n, 4), bool), zero, zero, None),
                             jnp.linspace(0.0, 1.0, n), top_k=8, chunk_size=4)
    head = decoding.QHead(model.config.dim, model.config.vocab_size)
    fit = lambda d: decoding.fit_cdq(jax.random.key(3), head, d, num_steps=5)  # noqa: E731
    compiled_one, args_one = S.compile_on(fit, (data,), S.mesh(1), n, (True,))
    compiled_many, args_many = S.compile_on(fit, (data,), S.mesh(), n, (True,))
    one, many = compiled_one(*args_one), compiled_many(*args_many)
    np.testing.assert_allclose(np.asarray(many.losses), np.asarray(one.losses), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(many.head.weight), np.asarray(one.head.weight), rtol=1e-4, atol=1e-6)
    assert np.asarray(many.losses)[-1] < np.asarray(many.losses)[0]  # it trained
    S.assert_no_batch_gather(compiled_many.as_text(), n)
    S.assert_memory_shrinks(compiled_one, compiled_many, max_ratio=0.9)
