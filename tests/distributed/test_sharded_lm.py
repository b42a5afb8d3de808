"""lm's prompts on 4 faked devices: sequence scores and KV-cache decoding with the prompt batch split.

What shards: the ``[B, P]`` prompts and everything per prompt (logits, the KV cache, the new tokens);
replicated: the model's weights (which, in this tiny random Llama, are most of the memory: the
per-device saving is bounded by them). ``generate(..., top_k=k)`` gathers the batch's logits
around ``lax.top_k`` (XLA's partitioner replicates the top-k), so top-k sampling does not shard yet;
plain temperature sampling does.
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
