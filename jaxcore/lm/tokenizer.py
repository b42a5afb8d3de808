"""The byte-level BPE tokenizer of a GGUF file, rebuilt with ``tokenizers``; chat templates."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._util.checks import check_bool, check_int, expected

__all__ = ["Tokenizer"]

_CONTROL, _USER_DEFINED = 3, 4  # GGUF token types of special and added tokens


class Tokenizer:
    """A GPT-2-style byte-level BPE tokenizer with special tokens and a chat template.

    Built from a GGUF file's metadata (:meth:`from_gguf`, :meth:`from_metadata`) with the
    ``tokenizers`` library. Pre-tokenizer ``smollm`` (SmolLM2): digits split one by one, then the
    GPT-2 split (as llama.cpp and the original ``tokenizer.json``); other values use the GPT-2 split.

    Attributes:
        vocab_size: number of token ids.
        bos_token_id, eos_token_id, pad_token_id: special ids (``None`` when the file gives none).
        chat_template: the Jinja chat template, or ``None``.

    Raises:
        TypeError: tokens or merges that are not sequences of str.
        ValueError: no tokens; a merge that is not ``"left right"`` or names a token (or makes a
            token) outside the vocabulary; a special id outside ``[0, vocab_size)``; ``token_types``
            whose length is not the vocabulary's.

    Examples:
        >>> from jaxcore.datasets import smollm2_gguf
        >>> tok = Tokenizer.from_gguf(smollm2_gguf())  # doctest: +SKIP
        >>> tok.decode(tok.encode("The capital of France is"))  # doctest: +SKIP
        'The capital of France is'
    """

    def __init__(self, tokens: Sequence[str], merges: Sequence[str], *, token_types: Sequence[int] | None = None,
                 pre_tokenizer: str = "gpt2", bos_token_id: int | None = None, eos_token_id: int | None = None,
                 pad_token_id: int | None = None, chat_template: str | None = None):
        from tokenizers import AddedToken, decoders, models, pre_tokenizers
        from tokenizers import Tokenizer as _HFTokenizer

        if isinstance(tokens, str) or not isinstance(tokens, Sequence) or not all(isinstance(t, str) for t in tokens):
            raise TypeError(expected("tokens", "a sequence of str", type(tokens).__name__, raw=True))
        if not tokens:
            raise ValueError(expected("tokens", "at least one token", "an empty sequence", raw=True))
        if isinstance(merges, str) or not isinstance(merges, Sequence):
            raise TypeError(expected("merges", "a sequence of 'left right' str", type(merges).__name__, raw=True))
        bad = next((m for m in merges if not isinstance(m, str) or len(m.split(" ")) != 2), None)
        if bad is not None or any(not isinstance(m, str) for m in merges):
            raise ValueError(expected("merges", "entries 'left right' (two tokens, one space)", bad))
        tokens = list(tokens)
        self.vocab_size = len(tokens)
        for name, i in (("bos_token_id", bos_token_id), ("eos_token_id", eos_token_id), ("pad_token_id", pad_token_id)):
            if i is not None:
                check_int(i, name, minimum=0, maximum=self.vocab_size - 1)
        if token_types is not None and len(token_types) != self.vocab_size:
            raise ValueError(expected("token_types", f"one type per token ({self.vocab_size})",
                                      f"{len(token_types)} types", raw=True))
        vocab = {t: i for i, t in enumerate(tokens)}
        pairs = [tuple(m.split(" ", 1)) for m in merges]
        missing = next(((m, t) for m in merges for t in m.split(" ") if t not in vocab), None)
        if missing is not None:
            raise ValueError(expected("merges", "merges of tokens in the vocabulary",
                                      f"{missing[0]!r} ({missing[1]!r} is not a token)", raw=True))
        try:
            bpe = models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False)
        except Exception as exc:  # noqa: BLE001 - tokenizers raises a bare Exception for a bad merge table
            raise ValueError(expected("merges", "a BPE merge table of the vocabulary", str(exc), raw=True)) from exc
        tk = _HFTokenizer(bpe)
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        if pre_tokenizer == "smollm":
            tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        else:
            tk.pre_tokenizer = byte_level
        tk.decoder = decoders.ByteLevel()
        if token_types is not None:
            types = list(token_types)
            tk.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                   for t, ty in zip(tokens, types) if ty == _CONTROL])
            tk.add_tokens([AddedToken(t, special=False, normalized=False)
                           for t, ty in zip(tokens, types) if ty == _USER_DEFINED])
        self._tk = tk
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        self.pad_token_id = pad_token_id
        self.chat_template = chat_template
        self.pre_tokenizer = pre_tokenizer

    @classmethod
    def from_metadata(cls, meta: dict[str, Any]) -> Tokenizer:
        """From GGUF metadata (``tokenizer.ggml.*`` keys, as :func:`gguf_metadata` returns).

        Raises:
            ValueError: the model is not ``gpt2`` (byte-level BPE) or tokens/merges are missing.
        """
        if not isinstance(meta, dict):
            raise TypeError(expected("meta", "a dict of GGUF metadata", type(meta).__name__, raw=True))
        model = meta.get("tokenizer.ggml.model")
        if model != "gpt2":
            raise ValueError(expected("tokenizer.ggml.model", "'gpt2' (byte-level BPE)", model))
        if "tokenizer.ggml.tokens" not in meta or "tokenizer.ggml.merges" not in meta:
            raise ValueError(expected("metadata", "tokenizer.ggml.tokens and tokenizer.ggml.merges", sorted(meta)))

        def opt(key):
            v = meta.get(key)
            return None if v is None else int(v)

        return cls(meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.merges"],
                   token_types=meta.get("tokenizer.ggml.token_type"), pre_tokenizer=meta.get("tokenizer.ggml.pre", "gpt2"),
                   bos_token_id=opt("tokenizer.ggml.bos_token_id"), eos_token_id=opt("tokenizer.ggml.eos_token_id"),
                   pad_token_id=opt("tokenizer.ggml.padding_token_id"), chat_template=meta.get("tokenizer.chat_template"))

    @classmethod
    def from_gguf(cls, path: str | os.PathLike) -> Tokenizer:
        """From a GGUF file's metadata.

        Raises:
            FileNotFoundError: no such file. ValueError: a directory or a non-GGUF file, not a
                byte-level BPE tokenizer, or bad tokenizer metadata (as the constructor).
        """
        from .weights import gguf_metadata

        return cls.from_metadata(gguf_metadata(path))

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special-token strings such as ``<|im_start|>`` become their ids; no BOS added).

        Raises:
            TypeError: ``text`` is not a str.
        """
        if not isinstance(text, str):
            raise TypeError(expected("text", "a str", type(text).__name__, raw=True))
        return self._tk.encode(text, add_special_tokens=False).ids

    def decode(self, ids, *, skip_special_tokens: bool = False) -> str:
        """The text of token ids (a sequence or 1-d array of ints in ``[0, vocab_size)``).

        Raises:
            TypeError: ids that are not integers. ValueError: an id out of range or not 1-d.
        """
        a = np.asarray(ids)
        if a.size and a.dtype.kind not in "iu":
            raise TypeError(expected("ids", "int token ids", f"dtype {a.dtype}", raw=True))
        if a.ndim != 1:
            raise ValueError(expected("ids", "a 1-d sequence of int token ids", f"shape {a.shape}, dtype {a.dtype}",
                                      raw=True))
        if a.size and (a.min() < 0 or a.max() >= self.vocab_size):
            raise ValueError(expected("ids", f"token ids in [0, {self.vocab_size})", a))
        return self._tk.decode(a.astype(np.int64).tolist(), skip_special_tokens=check_bool(
            skip_special_tokens, "skip_special_tokens"))

    def encode_batch(self, texts: Sequence[str], *, max_length: int | None = None,
                     pad_token_id: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Left-padded ``(tokens [B, L] int32, mask [B, L] bool)`` for :func:`generate` / :func:`perplexity`.

        Args:
            texts: the strings.
            max_length: keep only each text's last ``max_length`` tokens (default: the longest).
            pad_token_id: the filler id (default the tokenizer's pad id, else 0).

        Raises:
            TypeError: ``texts`` is not a sequence of str. ValueError: an empty text or no texts, a
                ``pad_token_id`` outside ``[0, vocab_size)``.
        """
        if isinstance(texts, str) or not isinstance(texts, Sequence) or not all(isinstance(t, str) for t in texts):
            raise TypeError(expected("texts", "a sequence of str", type(texts).__name__, raw=True))
        ids = [self.encode(t) for t in texts]
        if not ids or any(len(i) == 0 for i in ids):
            raise ValueError(expected("texts", "at least one non-empty text", list(texts)[:3]))
        if max_length is not None:
            check_int(max_length, "max_length", minimum=1)
            ids = [i[-max_length:] for i in ids]
        length = max(len(i) for i in ids)
        pad = pad_token_id if pad_token_id is not None else (self.pad_token_id or 0)
        pad = check_int(pad, "pad_token_id", minimum=0, maximum=self.vocab_size - 1)
        tokens = np.full((len(ids), length), pad, np.int32)
        mask = np.zeros((len(ids), length), bool)
        for row, i in enumerate(ids):
            tokens[row, length - len(i):] = i
            mask[row, length - len(i):] = True
        return tokens, mask

    def apply_chat_template(self, messages: Sequence[dict[str, str]], *, add_generation_prompt: bool = True) -> str:
        """The prompt text of a conversation under the file's Jinja chat template.

        Args:
            messages: ``[{"role": "user", "content": "..."}, ...]``.
            add_generation_prompt: end with the assistant turn's opening.

        Raises:
            ValueError: the tokenizer has no chat template; malformed messages.
        """
        if self.chat_template is None:
            raise ValueError(expected("chat_template", "a template in the GGUF metadata", None))
        if not all(isinstance(m, dict) and "role" in m and "content" in m for m in messages):
            raise ValueError(expected("messages", "a list of {'role': ..., 'content': ...} dicts", messages))
        import jinja2

        env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
        template = env.from_string(self.chat_template)
        return template.render(messages=list(messages), add_generation_prompt=bool(add_generation_prompt),
                               bos_token=self._token(self.bos_token_id), eos_token=self._token(self.eos_token_id))

    def _token(self, i):
        return "" if i is None else self._tk.id_to_token(i)

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size}, pre_tokenizer={self.pre_tokenizer!r})"
