"""Dequantisation of GGML blocks, bit-exact against gguf.quants.dequantize."""

import gguf
import numpy as np
import pytest
from gguf.quants import dequantize as gguf_dequantize

from jaxcore import lm

RNG = np.random.default_rng(0)


def _blocks(qtype, rows, cols):
    """Random valid raw bytes of a ``[rows, cols]`` tensor of ``qtype`` (finite f16 scales)."""
    per, nbytes = lm.GGUF_TYPES[qtype]
    if per == 1:
        vals = RNG.normal(size=(rows, cols)).astype({"F16": np.float16, "F32": np.float32}[qtype])
        return vals.view(np.uint8).reshape(rows, -1)
    raw = RNG.integers(0, 256, size=(rows * cols // per, nbytes), dtype=np.uint8)
    scales = 2 if qtype != "Q4_1" else 4
    f16 = RNG.normal(scale=0.05, size=(raw.shape[0], scales // 2)).astype(np.float16)
    raw[:, :scales] = f16.view(np.uint8)
    return raw.reshape(rows, -1)


@pytest.mark.parametrize("qtype", ["Q4_0", "Q4_1", "Q8_0", "F16", "F32"])
def test_dequantize_bit_exact_against_gguf(qtype):
    rows, cols = 6, 64
    raw = _blocks(qtype, rows, cols)
    got = lm.dequantize(raw, qtype, (rows, cols))
    want = gguf_dequantize(raw, gguf.GGMLQuantizationType[qtype]).reshape(rows, cols)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_dequantize_known_q4_1_block():
    d, m = np.float16(0.25), np.float16(-1.0)
    qs = np.arange(16, dtype=np.uint8) | (np.uint8(15) - np.arange(16, dtype=np.uint8)) << 4
    raw = np.concatenate([np.array([d]).view(np.uint8), np.array([m]).view(np.uint8), qs])
    out = lm.dequantize(raw, "Q4_1", (32,))
    np.testing.assert_array_equal(out, np.concatenate([0.25 * np.arange(16), 0.25 * (15 - np.arange(16))]) - 1.0)


def test_dequantize_refusals():
    with pytest.raises(ValueError, match="^qtype: expected"):
        lm.dequantize(np.zeros(18, np.uint8), "Q5_K", (32,))
    with pytest.raises(ValueError, match="^data: expected 18 bytes"):
        lm.dequantize(np.zeros(17, np.uint8), "Q4_0", (32,))


def test_llama_config_from_gguf_refuses_other_architectures():
    with pytest.raises(ValueError, match="^general.architecture: expected"):
        lm.llama_config_from_gguf({"general.architecture": "gpt2"})


def test_gguf_loaders_refuse_directories_empty_and_garbage_files(tmp_path):
    # issue 48 item 17: a 15-byte garbage GGUF failed inside NumPy, an empty file with "cannot mmap an
    # empty file", a directory with an IsADirectoryError not naming path.
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"\x01" * 15)
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 7)
    magic = r"a GGUF file \(starting with b'GGUF'\), got .*"
    for path, match in ((tmp_path, "a GGUF file, got the directory"), (empty, magic + "starting with b''"),
                        (garbage, magic + r"starting with b'\\x01"), (truncated, "a readable GGUF file")):
        for load in (lm.gguf_metadata, lm.gguf_arrays, lm.llama_from_gguf, lm.Tokenizer.from_gguf):
            with pytest.raises(ValueError, match=f"^path: expected {match}"):
                load(path)
    with pytest.raises(TypeError, match="^path: expected a str or os.PathLike"):
        lm.gguf_metadata(3)
    # a valid GGUF still reads
    good = tmp_path / "good.gguf"
    w = gguf.GGUFWriter(str(good), "llama")
    w.add_uint32("answer", 42)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    assert lm.gguf_metadata(good)["answer"] == 42
