"""Character- and word-level perturbations of prompts as one jitted kernel over a padded batch of byte strings.

TrustLLM's natural-noise robustness asks whether a model's answer survives typos and small edits. Texts are
UTF-8 bytes padded into ``[B, L]`` uint8 with lengths ``[B]`` (:func:`encode_texts`); each position that
holds an ASCII letter is edited with probability ``rate`` (letters only, so numbers, punctuation, answer
formats and multi-byte characters are never broken):

- ``"swap"``: the letter and the next one trade places (pairs start at positions of one random parity
  per row, so edits never overlap; both must be letters);
- ``"delete"``: the letter is removed;
- ``"insert"``: the letter is typed twice;
- ``"substitute"``: the letter becomes a random lower-case letter;
- ``"word_drop"``: every word (a run of non-spaces) is removed, with its following space, with
  probability ``rate`` (the first word is kept).

Rows are independent (one key split per row); the output length is capped at L (an insert past the end is
dropped; ``lengths`` says the new length).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int, UInt8

from jaxcore._util import check_int, check_key, check_scalar, expected

__all__ = ["PERTURBATIONS", "PerturbResult", "decode_texts", "encode_texts", "perturb", "perturb_texts"]

#: the perturbation kinds
PERTURBATIONS = ("swap", "delete", "insert", "substitute", "word_drop")


class PerturbResult(NamedTuple):
    """Perturbed byte strings: ``codes`` ``[B, L]`` uint8 (zero-padded) and ``lengths`` ``[B]`` int32."""

    codes: UInt8[Array, "B L"]
    lengths: Int[Array, " B"]


def encode_texts(texts: Sequence[str], max_length: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes of texts, zero-padded to ``[B, L]`` uint8 (L the longest, or ``max_length``), and lengths.

    Raises:
        ValueError: a text longer than ``max_length`` bytes.

    Examples:
        >>> c, n = encode_texts(["ab", "xyz"])
        >>> c.tolist(), n.tolist()
        ([[97, 98, 0], [120, 121, 122]], [2, 3])
    """
    raw = [t.encode("utf-8") for t in texts]
    width = max([len(r) for r in raw] + [1]) if max_length is None else check_int(max_length, "max_length", 1)
    out = np.zeros((len(raw), width), np.uint8)
    for i, r in enumerate(raw):
        if len(r) > width:
            raise ValueError(expected(f"texts[{i}]", f"at most {width} bytes", f"{len(r)} bytes", raw=True))
        out[i, :len(r)] = np.frombuffer(r, np.uint8)
    return out, np.array([len(r) for r in raw], np.int32)


def decode_texts(codes, lengths) -> list[str]:
    """The strings of ``[B, L]`` byte codes with lengths (invalid UTF-8 replaced)."""
    c, n = np.asarray(codes, np.uint8), np.asarray(lengths)
    return [bytes(c[i, :n[i]]).decode("utf-8", errors="replace") for i in range(c.shape[0])]


def _is_letter(c):
    return ((c >= 65) & (c <= 90)) | ((c >= 97) & (c <= 122))


def _compact(c, emit, L):
    # emit[i] in {0, 1, 2}: copies of c[i], written from position cumsum(emit)[i] - emit[i] on (past L: dropped)
    ends = jnp.cumsum(emit)
    first = jnp.where(emit > 0, ends - emit, L)
    second = jnp.where(emit > 1, ends - 1, L)
    out = jnp.zeros(L, jnp.uint8).at[first].set(c, mode="drop").at[second].set(c, mode="drop")
    return out, jnp.minimum(ends[-1], L).astype(jnp.int32)


def _row(key, c, n, rate, kind):
    L = c.shape[0]
    pos = jnp.arange(L)
    valid = pos < n
    letter = _is_letter(c) & valid
    k1, k2, k3 = jax.random.split(key, 3)
    hit = jax.random.uniform(k1, (L,)) < rate
    if kind == "swap":
        parity = jax.random.bernoulli(k3).astype(jnp.int32)
        nxt = jnp.roll(c, -1)
        start = hit & (pos % 2 == parity) & letter & jnp.roll(letter, -1) & (pos + 1 < n)
        second = jnp.roll(start, 1) & (pos > 0)
        out = jnp.where(start, nxt, jnp.where(second, jnp.roll(c, 1), c)).astype(jnp.uint8)
        return out, n.astype(jnp.int32)
    if kind == "substitute":
        new = (97 + jax.random.randint(k2, (L,), 0, 26)).astype(jnp.uint8)
        return jnp.where(hit & letter, new, c).astype(jnp.uint8), n.astype(jnp.int32)
    if kind == "delete":
        return _compact(c, jnp.where(valid & ~(hit & letter), 1, 0), L)
    if kind == "insert":
        return _compact(c, jnp.where(valid, 1 + (hit & letter), 0), L)
    # word_drop: word index per byte; a dropped word takes its trailing spaces with it
    space = (c == 32) & valid
    starts = valid & ~space & ((pos == 0) | jnp.roll(space, 1))
    word = jnp.cumsum(starts) - 1  # -1 before the first word
    drop_word = jax.random.uniform(k2, (L,)) < rate
    drop = jnp.where(word > 0, drop_word[jnp.clip(word, 0, L - 1)], False) & valid
    return _compact(c, jnp.where(valid & ~drop, 1, 0), L)


def _perturb(key, codes, lengths, rate, kind):
    keys = jax.random.split(key, codes.shape[0])
    return PerturbResult(*jax.vmap(lambda k, c, n: _row(k, c, n, rate, kind))(keys, codes, lengths))


_perturb_jit = jax.jit(_perturb, static_argnames="kind")


def perturb(key, codes: UInt8[Array, "B L"], lengths: Int[Array, " B"], *,
            kind: Literal["swap", "delete", "insert", "substitute", "word_drop"], rate: float) -> PerturbResult:
    """Perturb a padded batch of byte strings (see the module docstring) in one jitted program.

    Args:
        key: a ``jax.random.key``.
        codes: ``[B, L]`` uint8 bytes, zero after each row's length.
        lengths: ``[B]`` int lengths in [0, L].
        kind: one of :data:`PERTURBATIONS`.
        rate: the probability in [0, 1] that an eligible letter (or word) is edited.

    Returns:
        A :class:`PerturbResult`.

    Raises:
        TypeError: a bad key or a codes array that is not uint8.
        ValueError: an unknown kind, a rate outside [0, 1], shapes that differ or lengths outside [0, L].

    References:
        Y. Huang, L. Sun, H. Wang, et al. "Position: TrustLLM: Trustworthiness in Large Language Models."
        ICML 2024 (robustness to natural noise).

    Examples:
        >>> import jax
        >>> c, n = encode_texts(["hello world"])
        >>> r = perturb(jax.random.key(0), c, n, kind="delete", rate=0.0)
        >>> decode_texts(r.codes, r.lengths)
        ['hello world']
    """
    check_key(key)
    if kind not in PERTURBATIONS:
        raise ValueError(expected("kind", f"one of {PERTURBATIONS}", kind))
    rate = check_scalar(rate, "rate", low=0.0, high=1.0)
    c = np.asarray(codes)
    if c.dtype != np.uint8 or c.ndim != 2:
        raise TypeError(expected("codes", "a [B, L] uint8 array", f"{c.dtype} array of shape {c.shape}", raw=True))
    n = np.asarray(lengths)
    if n.shape != (c.shape[0],) or n.dtype.kind not in "iu" or (n < 0).any() or (n > c.shape[1]).any():
        raise ValueError(expected("lengths", f"[{c.shape[0]}] ints in [0, {c.shape[1]}]", n))
    return _perturb_jit(key, jnp.asarray(c), jnp.asarray(n, jnp.int32), jnp.float32(rate), kind)


def perturb_texts(key, texts: Sequence[str], *, kind: str, rate: float) -> list[str]:
    """:func:`perturb` on strings: encode, perturb, decode.

    Examples:
        >>> import jax
        >>> perturb_texts(jax.random.key(0), ["Is 7 a prime number?"], kind="insert", rate=1.0)
        ['IIss 7 aa pprriimmee nnuummbbeerr?']
    """
    longest = max([len(t.encode("utf-8")) for t in texts] + [1])
    c, n = encode_texts(texts, max_length=2 * longest if kind == "insert" else longest)
    r = perturb(key, c, n, kind=kind, rate=rate)
    return decode_texts(r.codes, r.lengths)
