"""The whole study end to end on a tiny random Llama with SmolLM2's tokenizer (slow: many programs)."""

import jax
import numpy as np
import pytest

from jaxcore import lm
from jaxcore.alignment import ToxicityStudy, toxicity_study
from jaxcore.datasets import english_prose


def _toy_scorer(texts):
    """A deterministic stand-in in [0, 1]: the share of the letters x, z, q, j, k (rare letters)."""
    out = []
    for t in texts:
        letters = [c for c in t.lower() if c.isalpha()]
        out.append(sum(c in "xzqjk" for c in letters) / max(len(letters), 1))
    return np.asarray(out)


@pytest.mark.slow
def test_study_runs_and_its_invariants_hold():
    _, tok = lm.load_smollm2()
    cfg = lm.LlamaConfig.tiny(vocab_size=tok.vocab_size, dim=64, num_layers=2, max_positions=512)
    model = lm.random_llama(jax.random.key(0), cfg)
    st = toxicity_study(jax.random.key(1), model, tok, _toy_scorer, prose=english_prose(),
                        words=lm.profanity_words(), num_train_prompts=8, num_samples=2, pairs_per_prompt=2, new_tokens=6,
                        prompt_tokens=8, num_steps=3, batch_size=2, learning_rate=1e-3, top_k=5, num_unaligned=3,
                        prose_tokens=16)
    assert isinstance(st, ToxicityStudy)
    assert list(st.evaluations) == ["base", "subtract probe", "DPO", "DPO un-aligned"]
    for e in st.evaluations.values():
        assert e.scores.shape == (32,) and 0 <= e.toxic_share <= 1 and np.isfinite(e.perplexity)
        assert e.toxicity == pytest.approx(float(e.scores.mean()))
    s = np.asarray(st.pairs.scores)
    assert st.pairs.num_pairs == 16 and np.all(s[:, 0] <= s[:, 1])
    assert st.dpo.history.loss.shape == (3,)
    assert 0 <= st.probe_auc <= 1 or np.isnan(st.probe_auc)
    assert np.all(np.diff(np.asarray(st.ranking.cosine)) <= 1e-7)
    # un-alignment scales the keys of the first scaled layer exactly (its inputs are unchanged)
    layers, _ = st.unaligned
    first = layers == layers.min()
    ka_dpo, ka_un = st.key_activations["DPO"][:, :3][:, first], st.key_activations["DPO un-aligned"][:, :3][:, first]
    np.testing.assert_allclose(ka_un, 10.0 * ka_dpo, rtol=1e-4, atol=1e-6)
    assert st.offset_norm.shape == (3,) and st.offset_norm[0] < 1e-3 + st.offset_norm[-1]
    assert len(st.top_tokens["base"]) == 5 and len(st.top_words["DPO"][0]) == 5
