"""watermark's texts on 4 faked devices: ``detect`` over a ``[B, L]`` batch of texts split over the devices.

What shards: the texts and every per-text statistic (green counts, scores, z-scores, p-values);
replicated: the watermark's key and vocabulary permutation parameters. No collective but scalar ones.
The substitution attack and watermarked generation (DiPmark's and KGW's reweighting inside
``lm.generate``, with its per-row state of seen contexts) shard the same way.
"""

import jax
import numpy as np
import pytest

from jaxcore import lm

from jaxcore import watermark

from . import _sharding as S


def test_detect_shards_texts():
    wm = watermark.DiPmark(1000, key=jax.random.key(42), alpha=0.5, context_size=2)
    text = jax.random.randint(jax.random.key(0), (8, 64), 0, 1000)
    run = S.check_sharded(lambda w, t: watermark.detect(w, t), (wm, text), 8, (False, True), max_memory_ratio=0.5,
                          collectives_allowed=False)
    assert np.all(np.asarray(run.many.p_value) > 1e-3)  # random text: not watermarked


def test_substitution_attack_shards_texts():
    text = jax.random.randint(jax.random.key(0), (8, 64), 0, 1000)
    run = S.check_sharded(lambda k, t: watermark.substitution_attack(k, t, None, 0.25, 1000),
                          (jax.random.key(1), text), 8, (False, True), max_memory_ratio=0.5, collectives_allowed=False)
    changed = np.sum(np.asarray(run.many) != np.asarray(text), axis=1)
    assert np.all(changed == 16)  # round(0.25 * 64) tokens per text, each replaced by a different token


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["dipmark", "kgw"])
def test_watermarked_generate_shards_prompts(kind):
    model = lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny())
    v = model.config.vocab_size
    wm = (watermark.DiPmark(v, key=jax.random.key(42), alpha=0.5, context_size=2) if kind == "dipmark"
          else watermark.KGW(v, key=jax.random.key(42), delta=4.0, context_size=1))
    prompt = jax.random.randint(jax.random.key(1), (8, 5), 1, 50)
    run = S.check_sharded(lambda m, p, k: lm.generate(k, m, p, max_new_tokens=4, processor=wm),
                          (model, prompt, jax.random.key(2)), 8, (False, True, False),
                          select=lambda out: (out.tokens, out.logprobs), max_memory_ratio=0.9, rtol=1e-5, atol=1e-5)
    # the processor acted: the sampled distribution is the reweighted one, not the model's
    assert not np.allclose(np.asarray(run.many.logprobs), np.asarray(run.many.model_logprobs), atol=1e-4)
