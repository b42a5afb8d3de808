"""lm's prompts on 4 faked devices: sequence scores and KV-cache decoding with the prompt batch split.

What shards: the ``[B, P]`` prompts and everything per prompt (logits, the KV cache, the new tokens);
replicated: the model's weights (which, in this tiny random Llama, are most of the memory: the
per-device saving is bounded by them). Every sampler shards: temperature, top-k (its threshold is a
row-local bitwise bisection, not ``lax.top_k``, around which XLA's partitioner gathers the batch), top-p
(a sort along the vocabulary, row-local) and greedy decoding; the same key gives the same tokens on 1 and
on 4 devices.
"""

import jax
import numpy as np
import pytest

from jaxcore import lm

from . import _sharding as S

B = 8


def _problem():
    model = lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny())
    return model, jax.random.randint(jax.random.key(1), (B, 5), 1, 50)


@S.xfail_while_checks_gather
def test_perplexity_shards_prompts():
    model, prompt = _problem()
    run = S.check_sharded(lambda m, p: lm.perplexity(m, p), (model, prompt), B, (False, True),
                          max_memory_ratio=0.85, rtol=1e-5)
    assert len(np.unique(np.asarray(run.many))) == B


@pytest.mark.slow
@S.xfail_while_checks_gather
def test_generate_shards_prompts():
    model, prompt = _problem()
    run = S.check_sharded(lambda m, p, k: lm.generate(k, m, p, max_new_tokens=3), (model, prompt, jax.random.key(2)),
                          B, (False, True, False), select=lambda out: (out.tokens, out.logprobs),
                          max_memory_ratio=0.9, rtol=1e-5, atol=1e-5)
    assert run.many.tokens.shape == (B, 3)


def _sampled(**kw):
    return lambda m, p, k: lm.generate(k, m, p, max_new_tokens=3, **kw)


def test_generate_top_k_shards_prompts():
    model, prompt = _problem()
    run = S.check_sharded(_sampled(top_k=5), (model, prompt, jax.random.key(2)), B, (False, True, False),
                          select=lambda out: (out.tokens, out.logprobs), max_memory_ratio=0.9, rtol=1e-5, atol=1e-5)
    tokens = np.asarray(run.many.tokens)
    assert len({tuple(t) for t in tokens}) > 1  # sampled, not one constant row
    # each drawn token is among the 5 most likely under the model at its step (a full forward of prompt + tokens)
    logits = np.asarray(lm.forward(model, np.concatenate([np.asarray(prompt), tokens], axis=1)))[:, 4:7]
    chosen = np.take_along_axis(logits, tokens[..., None], axis=-1)
    assert np.all(np.sum(logits > chosen + 1e-4, axis=-1) < 5)


@pytest.mark.slow
@pytest.mark.parametrize("kw", [{"top_p": 0.8}, {"temperature": 0.0}], ids=["top_p", "greedy"])
def test_generate_samplers_shard_prompts(kw):
    model, prompt = _problem()
    S.check_sharded(_sampled(**kw), (model, prompt, jax.random.key(2)), B, (False, True, False),
                    select=lambda out: (out.tokens, out.logprobs), max_memory_ratio=0.9, rtol=1e-5, atol=1e-5)
