"""GGUF files: metadata and tensors through the ``gguf`` package, vectorised dequantisation,
conversion to a :class:`Llama` (llama.cpp's Q/K row permutation undone) and a cached copy."""

from __future__ import annotations

import os
from typing import Any

import jax.numpy as jnp
import numpy as np

from .._util.checks import check_choice, expected
from .model import Llama, LlamaBlock, LlamaConfig

__all__ = [
    "GGUF_TYPES",
    "dequantize",
    "gguf_arrays",
    "gguf_metadata",
    "llama_config_from_gguf",
    "llama_from_arrays",
    "llama_from_gguf",
    "metadata_of",
]

#: The GGML tensor types :func:`dequantize` reads: name -> (elements per block, bytes per block).
GGUF_TYPES = {"F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q8_0": (32, 34)}


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """[n, 16] packed bytes -> [n, 32] values 0..15: low nibbles are elements 0-15, high ones 16-31."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1)


def dequantize(data: np.ndarray, qtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Dequantise a GGML tensor's raw bytes to float32 (the ``ggml`` block formats).

    Per block of 32 weights: Q4_0 ``x = d (q - 8)`` (f16 ``d``, 4-bit ``q``); Q4_1 ``x = d q + m``;
    Q8_0 ``x = d q`` (int8 ``q``); F16/BF16/F32 are widened. Vectorised over all blocks at once
    (bit-exact with ``gguf.quants.dequantize``, which computes the same float32 products).

    Args:
        data: the tensor's bytes (any shape; uint8 for block types, or its own dtype for floats).
        qtype: one of :data:`GGUF_TYPES`.
        shape: the NumPy shape of the result (rows, ..., elements per row), its size a multiple of
            the block size.

    Returns:
        float32 array of ``shape``.

    Raises:
        ValueError: unknown ``qtype``, or a byte count that does not match ``shape``.

    Examples:
        >>> import numpy as np
        >>> block = np.concatenate([np.float16(0.5).reshape(1).view(np.uint8), np.full(32, 3, np.uint8)])
        >>> dequantize(block, "Q8_0", (32,))[:3].tolist()
        [1.5, 1.5, 1.5]
    """
    check_choice(qtype, "qtype", GGUF_TYPES)
    per_block, nbytes = GGUF_TYPES[qtype]
    count = int(np.prod(shape))
    raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    if count % per_block or raw.size != count // per_block * nbytes:
        raise ValueError(expected("data", f"{count // per_block * nbytes} bytes for {qtype} of shape {tuple(shape)}",
                                  f"{raw.size} bytes", raw=True))
    if qtype == "F32":
        return raw.view(np.float32).reshape(shape).copy()
    if qtype == "F16":
        return raw.view(np.float16).astype(np.float32).reshape(shape)
    if qtype == "BF16":
        return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(shape)
    blocks = raw.reshape(-1, nbytes)
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    if qtype == "Q8_0":
        q = blocks[:, 2:].view(np.int8).astype(np.float32)
        out = q * d
    elif qtype == "Q4_0":
        q = (_nibbles(blocks[:, 2:]).astype(np.int8) - np.int8(8)).astype(np.float32)
        out = d * q
    else:  # Q4_1
        m = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
        out = d * _nibbles(blocks[:, 4:]).astype(np.float32) + m
    return out.reshape(shape)


def _reader(path):
    try:
        import gguf
    except ImportError as exc:  # pragma: no cover - gguf is a dependency
        raise ImportError("reading GGUF files needs the gguf package; run: pip install gguf") from exc
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(expected("path", "a str or os.PathLike path of a GGUF file", type(path).__name__, raw=True))
    if not os.path.exists(path):
        raise FileNotFoundError(expected("path", "an existing GGUF file", str(path)))
    if os.path.isdir(path):
        raise ValueError(expected("path", "a GGUF file", f"the directory {str(path)!r}", raw=True))
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ValueError(expected("path", "a GGUF file (starting with b'GGUF')",
                                  f"{str(path)!r} starting with {magic!r}", raw=True))
    try:
        return gguf.GGUFReader(str(path))
    except Exception as exc:  # noqa: BLE001 - a truncated or corrupt file fails anywhere inside the reader
        raise ValueError(expected("path", "a readable GGUF file", f"{str(path)!r} ({type(exc).__name__}: {exc})",
                                  raw=True)) from exc


def _field_value(field) -> Any:
    try:
        return field.contents()
    except Exception:  # noqa: BLE001 - fields gguf cannot decode are skipped
        return None


def gguf_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """A GGUF file's key-value metadata as plain Python values (strings, numbers, lists).

    Args:
        path: the ``.gguf`` file.

    Returns:
        ``{key: value}`` (for example ``"llama.block_count": 30``, ``"tokenizer.ggml.tokens": [...]``).

    Raises:
        FileNotFoundError: no such file. ValueError: a directory, an empty, truncated or non-GGUF file.

    Examples:
        >>> from jaxcore.datasets import smollm2_gguf
        >>> gguf_metadata(smollm2_gguf())["general.architecture"]  # doctest: +SKIP
        'llama'
    """
    reader = _reader(path)
    return {k: _field_value(f) for k, f in reader.fields.items()}


def llama_config_from_gguf(meta: dict[str, Any]) -> LlamaConfig:
    """The :class:`LlamaConfig` stated by a llama-architecture GGUF's metadata.

    Raises:
        ValueError: the architecture is not ``llama`` or a key is missing.
    """
    arch = meta.get("general.architecture")
    if arch != "llama":
        raise ValueError(expected("general.architecture", "'llama'", arch))
    try:
        vocab = meta.get("llama.vocab_size") or len(meta["tokenizer.ggml.tokens"])
        return LlamaConfig(
            vocab_size=int(vocab), dim=int(meta["llama.embedding_length"]),
            hidden_dim=int(meta["llama.feed_forward_length"]), num_layers=int(meta["llama.block_count"]),
            num_heads=int(meta["llama.attention.head_count"]),
            num_kv_heads=int(meta.get("llama.attention.head_count_kv", meta["llama.attention.head_count"])),
            rope_base=float(meta.get("llama.rope.freq_base", 10000.0)),
            norm_eps=float(meta["llama.attention.layer_norm_rms_epsilon"]),
            max_positions=int(meta.get("llama.context_length", 8192)),
        )
    except KeyError as exc:
        raise ValueError(expected("metadata", f"the key {exc.args[0]!r}", "a file without it", raw=True)) from exc


def _unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row permutation (interleaved RoPE pairs -> rotate-half halves).

    ``w`` is ``[heads * h, d_in]``; llama.cpp stores the rows of each head as pairs ``(i, i + h/2)``
    interleaved.
    """
    out, d_in = w.shape
    h = out // heads
    return w.reshape(heads, h // 2, 2, d_in).swapaxes(1, 2).reshape(out, d_in)


_META_KEYS = ("general.architecture", "llama.vocab_size", "llama.embedding_length", "llama.feed_forward_length",
              "llama.block_count", "llama.attention.head_count", "llama.attention.head_count_kv",
              "llama.rope.freq_base", "llama.attention.layer_norm_rms_epsilon", "llama.context_length",
              "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
              "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
              "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id", "tokenizer.ggml.add_bos_token",
              "tokenizer.chat_template")


def gguf_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """A llama GGUF converted to the arrays of a :class:`Llama` plus its metadata, as NumPy.

    Weights (float32): ``embed [V, d]``, ``final_norm [d]``, ``attn_norm, mlp_norm [n, d]``,
    ``wqkv [n, d, (H + 2K) h]`` (Q and K rows un-permuted from llama.cpp's interleaved-pair RoPE
    layout to rotate-half), ``wo [n, H h, d]``, ``w_gate_up [n, d, 2f]``, ``w_down [n, f, d]``,
    ``head [d, V]`` when the head is not tied. Metadata: ``"meta:<key>"`` entries (0-d or 1-d
    arrays) for the model and tokenizer keys, so a cached copy needs no second read of the file.

    Args:
        path: the ``.gguf`` file.

    Returns:
        ``{name: array}``.

    Raises:
        FileNotFoundError: no such file. ValueError: a directory, an empty, truncated or non-GGUF
            file, not a llama GGUF or an unsupported tensor type.

    Examples:
        >>> from jaxcore.datasets import smollm2_gguf
        >>> gguf_arrays(smollm2_gguf())["wqkv"].shape  # doctest: +SKIP
        (30, 576, 960)
    """
    reader = _reader(path)
    meta = {k: _field_value(reader.fields[k]) for k in _META_KEYS if k in reader.fields}
    c = llama_config_from_gguf(meta)
    tensors = {}
    for t in reader.tensors:
        qtype = t.tensor_type.name
        if qtype not in GGUF_TYPES:
            raise ValueError(expected(f"tensor {t.name!r}", "one of the types " + ", ".join(GGUF_TYPES), qtype))
        shape = tuple(int(s) for s in reversed(t.shape))  # GGUF lists ne0 (the row length) first
        tensors[t.name] = dequantize(t.data, qtype, shape)
    n = c.num_layers

    def stack(name):
        return np.stack([tensors[f"blk.{i}.{name}.weight"] for i in range(n)])

    q = np.stack([_unpermute(tensors[f"blk.{i}.attn_q.weight"], c.num_heads) for i in range(n)])
    k = np.stack([_unpermute(tensors[f"blk.{i}.attn_k.weight"], c.num_kv_heads) for i in range(n)])
    v = stack("attn_v")
    arrays = {
        "embed": tensors["token_embd.weight"],
        "final_norm": tensors["output_norm.weight"],
        "attn_norm": stack("attn_norm"),
        "mlp_norm": stack("ffn_norm"),
        "wqkv": np.concatenate([q, k, v], axis=1).transpose(0, 2, 1).copy(),
        "wo": stack("attn_output").transpose(0, 2, 1).copy(),
        "w_gate_up": np.concatenate([stack("ffn_gate"), stack("ffn_up")], axis=1).transpose(0, 2, 1).copy(),
        "w_down": stack("ffn_down").transpose(0, 2, 1).copy(),
    }
    if "output.weight" in tensors:
        arrays["head"] = tensors["output.weight"].T.copy()
    for key, value in meta.items():
        if value is not None:
            arrays[f"meta:{key}"] = np.asarray(value)
    return arrays


def metadata_of(arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """The ``"meta:<key>"`` entries of :func:`gguf_arrays` back as Python values.

    Raises:
        TypeError: ``arrays`` is not a dict.
    """
    if not isinstance(arrays, dict):
        raise TypeError(expected("arrays", "a dict of arrays (gguf_arrays)", type(arrays).__name__, raw=True))
    out = {}
    for name, a in arrays.items():
        if name.startswith("meta:"):
            out[name[5:]] = a.tolist() if a.ndim else a.item()
    return out


def llama_from_arrays(arrays: dict[str, np.ndarray], dtype: str = "float32") -> Llama:
    """The :class:`Llama` of :func:`gguf_arrays`' output (weights stored as ``dtype``).

    Raises:
        TypeError: ``arrays`` is not a dict.
        ValueError: unknown ``dtype``; metadata or weights missing.
    """
    check_choice(dtype, "dtype", ("float32", "bfloat16"))
    config = llama_config_from_gguf(metadata_of(arrays))
    missing = [n for n in ("embed", "final_norm", "attn_norm", "wqkv", "wo", "mlp_norm", "w_gate_up", "w_down")
               if n not in arrays]
    if missing:
        raise ValueError(expected("arrays", "the weights of gguf_arrays", f"no {', '.join(missing)}", raw=True))
    if "head" in arrays:
        config = LlamaConfig(**{**{f: getattr(config, f) for f in config.__dataclass_fields__}, "tie_embeddings": False})
    j = lambda a: jnp.asarray(a)  # noqa: E731
    names = ("attn_norm", "wqkv", "wo", "mlp_norm", "w_gate_up", "w_down")
    layers = tuple(LlamaBlock(*(j(arrays[name][i]) for name in names)) for i in range(config.num_layers))
    model = Llama(config, j(arrays["embed"]), layers, j(arrays["final_norm"]),
                  j(arrays["head"]) if "head" in arrays else None)
    return model if dtype == "float32" else model.astype(jnp.bfloat16)


def llama_from_gguf(path: str | os.PathLike, dtype: str = "float32") -> Llama:
    """A :class:`Llama` from a llama-architecture GGUF file (weights dequantised to float32).

    Q and K rows are un-permuted from llama.cpp's interleaved-pair layout to the rotate-half layout;
    the per-layer matrices are transposed, fused (Q|K|V, gate|up) and stacked (see
    :func:`gguf_arrays`; :func:`load_smollm2` caches this conversion).

    Args:
        path: the ``.gguf`` file.
        dtype: ``"float32"`` or ``"bfloat16"`` storage of the weight matrices.

    Returns:
        The model.

    Raises:
        FileNotFoundError: no such file. ValueError: a directory, an empty, truncated or non-GGUF
            file, not a llama GGUF, an unsupported tensor type, or an unknown ``dtype``.

    Examples:
        >>> from jaxcore.datasets import smollm2_gguf
        >>> llama_from_gguf(smollm2_gguf()).config.num_layers  # doctest: +SKIP
        30
    """
    check_choice(dtype, "dtype", ("float32", "bfloat16"))
    return llama_from_arrays(gguf_arrays(path), dtype)
