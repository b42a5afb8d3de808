"""SmolLM2-135M from its GGUF against HF transformers loading the same file (slow: real model)."""

import numpy as np
import pytest

pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch", reason="HF transformers comparison needs torch (the test extra)")
transformers = pytest.importorskip("transformers", reason="HF transformers comparison needs transformers")
pytest.importorskip("accelerate", reason="transformers loads a GGUF only with accelerate installed")

import gguf  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from gguf.quants import dequantize as gguf_dequantize  # noqa: E402

from jaxcore import lm  # noqa: E402
from jaxcore.datasets import english_prose, smollm2_gguf  # noqa: E402


@pytest.fixture(scope="module")
def ours():
    return lm.load_smollm2()


@pytest.fixture(scope="module")
def theirs():
    path = smollm2_gguf()
    tok = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                              dtype=torch.float32)
    model.eval()
    return model, tok


def _paragraph(tok):
    text = next(p for p in english_prose() if len(tok.encode(p)) >= 91)
    return np.array([tok.encode(text)[:91]])


def test_real_tensors_dequantize_bit_exact():
    reader = gguf.GGUFReader(str(smollm2_gguf()))
    seen = set()
    for t in reader.tensors:
        if t.tensor_type.name in seen:
            continue
        seen.add(t.tensor_type.name)
        shape = tuple(int(s) for s in reversed(t.shape))
        got = lm.dequantize(t.data, t.tensor_type.name, shape)
        want = gguf_dequantize(t.data, t.tensor_type).reshape(shape)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert seen == {"Q8_0", "Q4_1", "F32"}


def test_config_and_tokenizer_match_hf(ours, theirs):
    model, tok = ours
    hf, htok = theirs
    c = model.config
    assert (c.num_layers, c.dim, c.hidden_dim, c.num_heads, c.num_kv_heads, c.vocab_size) == (30, 576, 1536, 9, 3,
                                                                                               49152)
    assert (tok.bos_token_id, tok.eos_token_id) == (1, 2)
    texts = english_prose()[:10] + ["Hello world! It's 2024; call 555-1234.", "<|im_start|>user\nHi<|im_end|>\n",
                                    "  two  spaces\n\n\ttab", "naïve café — “quotes” 東京"]
    for text in texts:
        ids = tok.encode(text)
        assert ids == htok.encode(text, add_special_tokens=False), text
        assert tok.decode(ids) == text
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    assert tok.apply_chat_template(msgs) == htok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)


def test_perplexity_and_logits_match_hf(ours, theirs):
    model, tok = ours
    hf, _ = theirs
    ids = _paragraph(tok)
    with torch.no_grad():
        logits = hf(torch.tensor(ids)).logits.double().numpy()
    lp = logits[0, :-1] - np.log(np.exp(logits[0, :-1] - logits[0, :-1].max(-1, keepdims=True)).sum(-1,
                                 keepdims=True)) - logits[0, :-1].max(-1, keepdims=True)
    hf_ppl = np.exp(-lp[np.arange(ids.shape[1] - 1), ids[0, 1:]].mean())
    ppl = float(lm.perplexity(model, ids)[0])
    assert abs(ppl - hf_ppl) / hf_ppl < 1e-4, (ppl, hf_ppl)
    np.testing.assert_allclose(np.asarray(lm.forward(model, ids))[0], logits[0], atol=1e-3)


def test_greedy_continuation_matches_hf(ours, theirs):
    model, tok = ours
    hf, htok = theirs
    ids = tok.encode("The capital of France is")
    with torch.no_grad():
        want = hf.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False)[0, len(ids):].tolist()
    got = lm.generate(jax.random.key(0), model, jnp.array([ids]), max_new_tokens=8, temperature=0.0)
    assert np.asarray(got.tokens[0]).tolist() == want
    assert tok.decode(got.tokens[0, :2]) == " Paris."


def test_to_transformers_holds_the_same_weights(ours):
    model, tok = ours
    ids = _paragraph(tok)
    hf = lm.to_transformers(model)
    with torch.no_grad():
        logits = hf(torch.tensor(ids)).logits.numpy()
    np.testing.assert_allclose(np.asarray(lm.forward(model, ids)), logits, atol=1e-3)
