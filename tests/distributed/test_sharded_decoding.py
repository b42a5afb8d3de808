"""decoding's prompts on 4 faked devices: controlled decoding with the prompt batch split.

What shards: the ``[B, P]`` prompts and everything per prompt (the KV cache, hidden states, the scorer's
values, the tilted logits, the new tokens, blockwise's K candidates per prompt); replicated: the model
and the scorer heads. CD-Q adds ``lambda Q(h)`` row by row; CD-FUDGE picks its k candidates with a sort
along the vocabulary (row-local, unlike ``lax.top_k``) and adds their values with a scatter that has a
batch dimension; blockwise CD keeps each prompt's best block with a batched gather. The same key gives
the same tokens on 1 and on 4 devices.
"""

import jax
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
