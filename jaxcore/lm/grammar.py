"""Grammar-constrained decoding: a regular expression compiled to a token-level finite-state mask.

A pattern (or a small grammar written as one: the ``@name[value]`` answer format, JSON with a fixed
flat schema, numbers) becomes a character DFA (``interegular``), unfolded into a DFA over UTF-8
bytes, then a token automaton: every vocabulary token's bytes are walked through the byte DFA from
every state at once (NumPy, one vectorised gather per byte position), states from which no token
sequence reaches acceptance are pruned, and end-of-sequence is allowed exactly in accepting states.
:class:`GrammarConstraint` applies it inside :func:`~jaxcore.lm.generate`'s ``lax.scan``: one row
gather of the transition table and one ``where`` per token, no host round-trip.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Sequence
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from .._util.checks import check_bool, check_int, expected
from .processors import LogitsProcessor
from .tokenizer import Tokenizer

__all__ = [
    "GrammarConstraint",
    "GrammarState",
    "TokenFSM",
    "compile_regex",
    "token_bytes",
]


# ---------------------------------------------------------------------------------------------------------------
# the vocabulary as bytes


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet inverted: each of the 256 printable stand-ins -> its byte.

    Printable Latin-1 bytes stand for themselves; the other 68 bytes (controls, space, ...) are
    shifted to code points 256, 257, ... in byte order ("Ġ" = U+0120 is the space byte 0x20).
    """
    keep = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    kept = set(keep)
    out = {chr(b): b for b in keep}
    shifted = [b for b in range(256) if b not in kept]
    out.update({chr(256 + i): b for i, b in enumerate(shifted)})
    return out


def token_bytes(tokenizer: Tokenizer) -> list[bytes | None]:
    """Each token's text as raw bytes (the byte-level BPE spelling undone), ``None`` for special tokens.

    A byte-level BPE vocabulary spells bytes as printable stand-ins ("Ġ" for the leading space, "Ċ"
    for a newline); this maps them back, so ``b"".join(token_bytes(tok)[i] for i in ids)`` is the
    UTF-8 of ``tok.decode(ids)``. Added tokens that are not special (user-defined) are their literal
    UTF-8; special (control) tokens such as ``<|im_end|>`` are ``None``: they produce no text.

    Args:
        tokenizer: a :class:`Tokenizer`.

    Returns:
        A list of ``tokenizer.vocab_size`` entries, ``bytes`` or ``None``.

    Raises:
        TypeError: ``tokenizer`` is not a :class:`Tokenizer`.

    Examples:
        >>> tok = Tokenizer(["<|end|>", "a", "Ġ", "Ġa", "Ċ"], ["Ġ a"], token_types=[3, 1, 1, 1, 1])
        >>> token_bytes(tok)
        [None, b'a', b' ', b' a', b'\\n']
    """
    if not isinstance(tokenizer, Tokenizer):
        raise TypeError(expected("tokenizer", "a jaxcore.lm.Tokenizer", type(tokenizer).__name__, raw=True))
    tk = tokenizer._tk  # noqa: SLF001 - the same substrate: the rebuilt `tokenizers` object
    added = tk.get_added_tokens_decoder()
    table = _byte_decoder()
    out: list[bytes | None] = [None] * tokenizer.vocab_size
    for text, i in tk.get_vocab(with_added_tokens=True).items():
        if i in added:
            out[i] = None if added[i].special else text.encode("utf-8")
        elif all(c in table for c in text):
            out[i] = bytes(table[c] for c in text)
    return out


class _Prepared(NamedTuple):
    """A vocabulary ready to walk: tokens with bytes sorted by length (longest first), their bytes
    (256 pads), and per position the count of tokens still that long."""

    vocab_size: int
    ids: np.ndarray  # [n] int64 ids of the tokens with bytes
    chars: np.ndarray  # [n, width] int32 bytes (256: padding)
    counts: np.ndarray  # [width] tokens longer than each position
    lengths: np.ndarray  # [n] bytes of each token (descending)


def _prepare(raw: list[bytes | None]) -> _Prepared:
    lengths = np.array([0 if t is None else len(t) for t in raw], np.int64)
    order = np.argsort(-lengths, kind="stable")
    n = int(np.count_nonzero(lengths))
    ids, ls = order[:n], lengths[order[:n]]
    codes = np.frombuffer(b"".join(raw[i] for i in ids), np.uint8)
    width = int(ls[0]) if n else 0
    chars = np.full((n, width), 256, np.int32)
    starts = np.cumsum(ls) - ls
    chars[np.repeat(np.arange(n), ls), np.arange(codes.size) - np.repeat(starts, ls)] = codes
    counts = np.searchsorted(-ls, -np.arange(width), side="left")  # ls descending: tokens longer than pos
    return _Prepared(len(raw), ids, chars, counts, ls)


_PREPARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Tokenizer -> _Prepared (built once)


def _vocabulary(vocabulary) -> tuple[_Prepared, int | None]:
    """The prepared vocabulary (tokens never allowed by a pattern have no bytes) and the tokenizer's EOS id."""
    if isinstance(vocabulary, Tokenizer):
        prepared = _PREPARED.get(vocabulary)
        if prepared is None:
            prepared = _PREPARED[vocabulary] = _prepare(token_bytes(vocabulary))
        return prepared, vocabulary.eos_token_id
    if isinstance(vocabulary, Sequence) and not isinstance(vocabulary, (str, bytes)):
        raw = list(vocabulary)
        bad = next((i for i, t in enumerate(raw) if not isinstance(t, (str, bytes, type(None)))), None)
        if bad is not None:
            raise TypeError(expected(f"vocabulary[{bad}]", "a str, bytes or None", type(raw[bad]).__name__, raw=True))
    else:
        raise TypeError(expected("vocabulary", "a Tokenizer or a sequence of token texts (str, bytes or None)",
                                 type(vocabulary).__name__, raw=True))
    if not raw:
        raise ValueError(expected("vocabulary", "at least one token", "an empty sequence", raw=True))
    return _prepare([t.encode("utf-8") if isinstance(t, str) else t for t in raw]), None


# ---------------------------------------------------------------------------------------------------------------
# regex -> character DFA -> byte DFA -> token automaton

_LEADS = {2: range(0xC2, 0xE0), 3: range(0xE0, 0xF0), 4: range(0xF0, 0xF5)}  # UTF-8 lead bytes by length


def _byte_dfa(pattern: str):
    """``(table [N + 1, 257] int32, accepting [N] bool, initial)``: the pattern's DFA over UTF-8 bytes.

    The character DFA (``interegular``) is unfolded into bytes: ASCII characters are one byte; a
    multi-byte character passes through states "k continuation bytes still to come, then state t"
    (shared by every character of a catch-all class) or, for characters the pattern names, a trie of
    their encodings. Row ``N`` is the dead state; column 256 the padding symbol (stays in place).
    Accepting states are character states only, so a match ends on a whole character.
    """
    import interegular
    from interegular.fsm import anything_else

    if not isinstance(pattern, str):
        raise TypeError(expected("pattern", "a str (a regular expression)", type(pattern).__name__, raw=True))
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(expected("pattern", "a valid regular expression", f"{pattern!r} ({exc})", raw=True)) from exc
    body = pattern[1:] if pattern.startswith("^") else pattern  # anchors at the ends: no-ops for a full match
    if body.endswith("$") and (len(body) - 1 - len(body[:-1].rstrip("\\"))) % 2 == 0:  # not an escaped "\\$"
        body = body[:-1]
    try:
        fsm = interegular.parse_pattern(body).to_fsm()
    except Exception as exc:  # noqa: BLE001 - interegular raises its own classes for unsupported syntax
        raise ValueError(expected("pattern", "a regular expression without backreferences, lookarounds, \\b or "
                                  "anchors other than a leading ^ and a trailing $",
                                  f"{pattern!r} ({type(exc).__name__}: {exc})", raw=True)) from exc
    states = sorted(fsm.states)
    index = {s: i for i, s in enumerate(states)}
    mapping = fsm.alphabet._symbol_mapping  # noqa: SLF001 - interegular exposes no public iterator of pairs
    else_key = mapping.get(anything_else)
    encoded = []
    for c, k in mapping.items():
        if c is not anything_else:
            try:
                encoded.append((c.encode("utf-8"), k))
            except UnicodeEncodeError:  # a lone surrogate: no UTF-8 text holds it
                pass
    rows = [np.full(256, -1, np.int64) for _ in states]
    pending: dict[tuple[int, int], int] = {}

    def new_row() -> int:
        rows.append(np.full(256, -1, np.int64))
        return len(rows) - 1

    def then(t: int, k: int) -> int:  # k continuation bytes to come, then state t
        if k == 0 or t < 0:
            return t
        if (t, k) not in pending:
            pending[(t, k)] = g = new_row()
            rows[g][0x80:0xC0] = then(t, k - 1)
        return pending[(t, k)]

    def node(sub: dict, need: int, t_else: int) -> int:  # inside a named character, `need` bytes to come
        n = new_row()
        rows[n][0x80:0xC0] = then(t_else, need - 1)
        for b, v in sub.items():
            rows[n][b] = v if need == 1 else node(v, need - 1, t_else)
        return n

    for s in states:
        i = index[s]
        trans = fsm.map.get(s, {})
        t_else = index[trans[else_key]] if else_key is not None and else_key in trans else -1
        row = rows[i]
        if t_else >= 0:
            row[:0x80] = t_else
            for length, leads in _LEADS.items():
                row[leads.start:leads.stop] = then(t_else, length - 1)
        trie: dict = {}
        for b, k in encoded:
            target = index[trans[k]] if k in trans else -1
            if len(b) == 1:
                row[b[0]] = target
                continue
            at = trie
            for x in b[:-1]:
                at = at.setdefault(x, {})
            at[b[-1]] = target
        for b0, sub in trie.items():
            length = next(n for n, r in _LEADS.items() if b0 in r)
            row[b0] = node(sub, length - 1, t_else)
    num = len(rows)
    table = np.full((num + 1, 257), num, np.int32)
    stacked = np.stack(rows)
    table[:num, :256] = np.where(stacked < 0, num, stacked)
    table[:, 256] = np.arange(num + 1)
    accepting = np.zeros(num, bool)
    accepting[[index[s] for s in fsm.finals]] = True
    return table, accepting, index[fsm.initial]


def _walk_tokens(table: np.ndarray, vocab: _Prepared) -> np.ndarray:
    """``[S, V]`` the byte-DFA state after each token's bytes from each state (``S`` = dead).

    The kernel: the first byte of every token from every state is one ``[S, n]`` gather
    ``table[state, byte]``; after it only the (state, token) pairs still alive and still that long
    are carried, one gather per byte position (work ``S n`` plus the surviving pairs' bytes).
    """
    num = table.shape[0] - 1
    out = np.full((num, vocab.vocab_size), num, np.int32)
    n_live = vocab.ids.size
    if n_live == 0:
        return out
    cls = vocab.chars  # [n, width] bytes
    first = table[np.arange(num)[:, None], cls[None, :, 0]]  # [S, n]
    walked = np.full((num, n_live), num, np.int32)
    src, tk = np.nonzero(first != num)
    cur = first[src, tk]
    lengths = vocab.lengths
    for pos in range(1, len(vocab.counts)):
        done = lengths[tk] <= pos
        walked[src[done], tk[done]] = cur[done]
        src, tk, cur = src[~done], tk[~done], cur[~done]
        cur = table[cur, cls[tk, pos]]
        alive = cur != num
        src, tk, cur = src[alive], tk[alive], cur[alive]
        if cur.size == 0:
            break
    walked[src, tk] = cur
    out[:, vocab.ids] = walked
    return out


def _closure(edges_from: np.ndarray, edges_to: np.ndarray, seeds: np.ndarray, num: int) -> np.ndarray:
    """States reachable from ``seeds`` along the edges (bool ``[num]``)."""
    seen = np.zeros(num, bool)
    seen[seeds] = True
    frontier = seen.copy()
    while frontier.any():
        nxt = np.zeros(num, bool)
        nxt[edges_to[frontier[edges_from]]] = True
        frontier = nxt & ~seen
        seen |= nxt
    return seen


class TokenFSM(eqx.Module):
    """A token-level finite-state machine: which tokens may follow, state by state.

    ``transitions[s, t]`` is the state after token ``t`` in state ``s``, or ``dead_state`` when ``t``
    may not follow (its text leaves the pattern, or every continuation after it does). States
    ``0 .. num_states - 3`` are the pattern's; ``dead_state = num_states - 2`` (every token dead) and
    ``end_state = num_states - 1`` (after end-of-sequence: only ``eos_token_id`` again). The EOS
    column leads to ``end_state`` from accepting states and is dead elsewhere, so a finished match
    with no other continuation forces EOS.

    Build it with :func:`compile_regex`; apply it with :class:`GrammarConstraint`.

    Attributes:
        transitions: ``[num_states, V]`` int32.
        accepting: ``[num_states]`` bool (the pattern's accepting states and ``end_state``).
        initial_state: int32 scalar (an array, so that two patterns with tables of one shape share
            the compiled :func:`~jaxcore.lm.generate`).
        dead_state, end_state, eos_token_id: static ints (``dead_state`` and ``end_state`` follow
            from the table's shape).

    Examples:
        >>> fsm = compile_regex("ab|b", ["a", "b", "ab", "<eos>"], eos_token_id=3)
        >>> fsm.num_states, fsm.vocab_size
        (4, 4)
        >>> fsm.allowed(fsm.initial_state).tolist()
        [True, True, True, False]
    """

    transitions: Int[Array, "S V"]
    accepting: Bool[Array, " S"]
    initial_state: Int[Array, ""]
    dead_state: int = eqx.field(static=True)
    end_state: int = eqx.field(static=True)
    eos_token_id: int = eqx.field(static=True)

    @property
    def num_states(self) -> int:
        """States including the dead and the end state."""
        return int(self.transitions.shape[0])

    @property
    def vocab_size(self) -> int:
        """V, the number of token ids."""
        return int(self.transitions.shape[1])

    def allowed(self, state: int) -> Bool[Array, " V"]:
        """``[V]`` bool: the tokens that may follow in ``state``."""
        s = check_int(state, "state", minimum=0, maximum=self.num_states - 1)
        return self.transitions[s] != self.dead_state

    def accepts(self, tokens: Int[Array, "B N"], mask: Bool[Array, "B N"] | None = None) -> Bool[Array, " B"]:
        """Whether each row of tokens (those where ``mask`` is True) is a complete match.

        A row is complete when it ends in an accepting state or after end-of-sequence, having never
        taken a dead transition. ``generate(...).tokens`` and ``.mask`` can be passed as they are.

        Args:
            tokens: ``[B, N]`` int token ids in ``[0, V)``.
            mask: ``[B, N]`` bool, True at the tokens to walk (default all).

        Returns:
            ``[B]`` bool.

        Raises:
            ValueError: tokens not 2-d, ids out of range, a mask of another shape.
        """
        try:
            tok = np.asarray(tokens) if not isinstance(tokens, jax.core.Tracer) else tokens
        except ValueError as exc:  # ragged rows
            raise ValueError(expected("tokens", "a [B, N] array of token ids", f"ragged rows ({exc})",
                                      raw=True)) from exc
        if tok.ndim != 2:
            raise ValueError(expected("tokens", "a [B, N] array of token ids", f"shape {tuple(tok.shape)}", raw=True))
        if isinstance(tok, np.ndarray):
            if tok.dtype.kind not in "iu":
                raise ValueError(expected("tokens", "integer token ids", f"dtype {tok.dtype}", raw=True))
            if tok.size and (tok.min() < 0 or tok.max() >= self.vocab_size):
                raise ValueError(expected("tokens", f"ids in [0, {self.vocab_size})", tok))
        m = jnp.ones(tok.shape, bool) if mask is None else jnp.asarray(mask, bool)
        if m.shape != tok.shape:
            raise ValueError(expected("mask", f"shape {tuple(tok.shape)}", f"shape {tuple(m.shape)}", raw=True))
        return _accepts_jit(self, jnp.asarray(tok, jnp.int32), m)


@jax.jit
def _accepts_jit(fsm: TokenFSM, tokens, mask):
    def step(s, xs):
        t, m = xs
        return jnp.where(m, fsm.transitions[s, t], s), None

    s0 = jnp.full(tokens.shape[:1], fsm.initial_state, jnp.int32)
    s, _ = jax.lax.scan(step, s0, (tokens.T, mask.T))
    return fsm.accepting[s] & (s != fsm.dead_state)


def compile_regex(pattern: str, vocabulary, *, eos_token_id: int | None = None,
                  num_states: int | None = None) -> TokenFSM:
    """Compile a regular expression into a :class:`TokenFSM` over a vocabulary.

    A generated text ``x = tok_1 ... tok_n EOS`` is allowed iff ``re.fullmatch(pattern, x)``: the
    pattern becomes a character DFA (``interegular``), unfolded into a DFA ``delta`` over UTF-8 bytes;
    token ``t`` moves state ``s`` to ``delta*(s, bytes(t))`` (so a multi-byte character may be split
    over tokens, as byte-level BPE does); states from which no token sequence reaches an accepting
    state, and states not reachable from the start, are removed (so a constrained sampler never gets
    stuck); EOS is allowed exactly in accepting states, which lie between whole characters. Empty
    tokens and special tokens are never allowed.

    Args:
        pattern: a Python regular expression (the subset ``interegular`` parses: no backreferences,
            lookarounds or ``\\b``; a leading ``^`` and a trailing ``$`` are dropped, being implied),
            matched against the whole generated text. ``\\w``, ``\\d`` and ``\\s`` are ASCII classes
            here (Python's are Unicode): a subset, so every text allowed still matches in Python.
        vocabulary: a :class:`Tokenizer` (token bytes from :func:`token_bytes`, the leading-space
            marker decoded), or a sequence of token texts (``str``, ``bytes`` of UTF-8 text or a piece
            of it, ``None`` for a token never allowed), one per id.
        eos_token_id: the end-of-sequence id (default: the tokenizer's; required with a sequence).
        num_states: pad the table with unreachable dead rows to exactly this many states (default:
            as many as the pattern needs). Tables of one shape share one compiled decoder: compiling
            many patterns (one answer format per question, say) to a common ``num_states`` avoids a
            recompilation of :func:`~jaxcore.lm.generate` per pattern.

    Returns:
        A :class:`TokenFSM` (arrays on the default device).

    Raises:
        TypeError: a pattern that is not a str, a bad vocabulary.
        ValueError: an invalid or unsupported pattern; a pattern that no token sequence of the
            vocabulary can match (no token can start it, or none can finish it); a missing or
            out-of-range ``eos_token_id``; a ``num_states`` below what the pattern needs.

    References:
        Willard and Louf, "Efficient Guided Generation for Large Language Models", arXiv:2307.09702,
        2023 (the token-level index of a regular expression's automaton).

    Examples:
        >>> fsm = compile_regex(r"-?[0-9]+", ["-", "1", "2", "12", "x", "</s>"], eos_token_id=5)
        >>> [i for i in range(6) if fsm.allowed(fsm.initial_state)[i]]
        [0, 1, 2, 3]
        >>> bool(fsm.accepts([[0, 3, 5]])[0]), bool(fsm.accepts([[0, 5]])[0])
        (True, False)
    """
    vocab, tok_eos = _vocabulary(vocabulary)
    v = vocab.vocab_size
    eos = tok_eos if eos_token_id is None else eos_token_id
    if eos is None:
        raise ValueError(expected("eos_token_id", f"an int in [0, {v}) (the vocabulary has no EOS of its own)", None))
    eos = check_int(eos, "eos_token_id", minimum=0, maximum=v - 1)
    table, accepting, initial = _byte_dfa(pattern)
    num = table.shape[0] - 1
    walked = _walk_tokens(table, vocab)  # [num, V], num = dead
    walked[:, eos] = num  # EOS is no text: its column is set below
    # prune: states reachable from the start whose continuations can reach acceptance
    adj = np.zeros((num + 1, num + 1), bool)
    adj[np.repeat(np.arange(num), v), walked.ravel()] = True
    adj[:, num] = False
    e_from, e_to = np.nonzero(adj)
    reach = _closure(e_from, e_to, np.array([initial]), num + 1)[:num]
    live = _closure(e_to, e_from, np.flatnonzero(accepting), num + 1)[:num]
    keep = reach & live
    if not keep[initial]:
        raise ValueError(expected("pattern", "a pattern that some sequence of the vocabulary's tokens matches",
                                  f"{pattern!r} (no token sequence from the start reaches a match)", raw=True))
    kept = np.flatnonzero(keep)
    n = kept.size
    dead, end = n, n + 1
    remap = np.full(num + 1, dead, np.int32)
    remap[kept] = np.arange(n, dtype=np.int32)
    trans = np.full((n + 2, v), dead, np.int32)
    trans[:n] = remap[walked[kept]]
    acc = np.zeros(n + 2, bool)
    acc[:n] = accepting[kept]
    acc[end] = True
    trans[:n, eos] = np.where(acc[:n], end, dead)
    trans[end, eos] = end
    trans, acc, start = _minimize(trans, acc, int(remap[initial]))
    n = trans.shape[0]
    if num_states is not None:
        total = check_int(num_states, "num_states", minimum=n)
        # unreachable rows (all dead) between the pattern's states and the dead and end states
        rows = np.full((total - n, v), total - 2, np.int32)
        shift = np.arange(n, dtype=np.int32)
        shift[n - 2:] += total - n
        trans = np.concatenate([shift[trans[:n - 2]], rows, shift[trans[n - 2:]]])
        acc = np.concatenate([acc[:n - 2], np.zeros(total - n, bool), acc[n - 2:]])
        n = total
    return TokenFSM(jnp.asarray(trans), jnp.asarray(acc), jnp.asarray(start, jnp.int32), n - 2, n - 1, eos)


def _minimize(trans: np.ndarray, acc: np.ndarray, initial: int):
    """Merge equivalent states (Moore's partition refinement on the token table).

    The last two rows of ``trans`` are the dead and the end state; they stay last (a pattern state
    whose only continuation is EOS is equivalent to the end state and merges into it).
    """
    full = trans
    trans = _distinct_columns(trans)  # tokens with equal columns do not change which rows are equal
    n = trans.shape[0]
    dead, end = n - 2, n - 1
    cls = acc.astype(np.int64) + 2 * (np.arange(n) == dead)
    _, cls = np.unique(cls, return_inverse=True)
    # a row's signature hashed to 64 bits (random odd weights, wrapping arithmetic), checked exactly after
    weights = np.random.default_rng(0).integers(1, 2**63, size=trans.shape[1], dtype=np.uint64) | np.uint64(1)
    while True:
        with np.errstate(over="ignore"):
            h = ((cls[trans].astype(np.uint64) + np.uint64(1)) * weights).sum(axis=1, dtype=np.uint64)
        _, new = np.unique(np.stack([cls.astype(np.uint64), h], 1), axis=0, return_inverse=True)
        new = new.ravel()
        if new.max() == cls.max():
            break
        cls = new
    first = np.zeros(int(cls.max()) + 1, np.int64)
    first[cls[::-1]] = np.arange(n)[::-1]
    if not np.array_equal(cls[trans], cls[trans[first[cls]]]):  # a hash collision merged two classes
        _, cls = np.unique(np.concatenate([cls[:, None], cls[trans]], axis=1), axis=0, return_inverse=True)
        cls = cls.ravel()
        while True:
            _, new = np.unique(np.concatenate([cls[:, None], cls[trans]], axis=1), axis=0, return_inverse=True)
            new = new.ravel()
            if new.max() == cls.max():
                break
            cls = new
    num = int(cls.max()) + 1
    # renumber: the pattern's classes in order of first appearance, then dead's, then end's
    d, e = cls[dead], cls[end]
    others = [c for c in dict.fromkeys(cls.tolist()) if c not in (d, e)]
    order = np.empty(num, np.int64)
    order[others] = np.arange(len(others))
    order[d], order[e] = num - 2, num - 1
    rep = np.zeros(num, np.int64)
    rep[order[cls[::-1]]] = np.arange(n)[::-1]  # the first state of each class
    out = order[cls[full[rep]]].astype(np.int32)
    return out, acc[rep], int(order[cls[initial]])


def _distinct_columns(trans: np.ndarray) -> np.ndarray:
    """The distinct columns of a table (hashed, then checked exactly; the table itself on a collision)."""
    weights = np.random.default_rng(1).integers(1, 2**63, size=trans.shape[0], dtype=np.uint64) | np.uint64(1)
    with np.errstate(over="ignore"):
        h = ((trans.astype(np.uint64) + np.uint64(1)) * weights[:, None]).sum(axis=0, dtype=np.uint64)
    _, first, inv = np.unique(h, return_index=True, return_inverse=True)
    cols = trans[:, first]
    return cols if np.array_equal(cols[:, inv.ravel()], trans) else trans


# ---------------------------------------------------------------------------------------------------------------
# the processor


class GrammarState(NamedTuple):
    """The state of :class:`GrammarConstraint`.

    Attributes:
        state: ``[B]`` int32, each row's :class:`TokenFSM` state before the token being drawn.
        started: bool scalar, True once a token has been drawn (the first call sees the prompt's
            last token in ``context``, which the grammar does not read).
    """

    state: Int[Array, " B"]
    started: Bool[Array, ""]


class GrammarConstraint(LogitsProcessor):
    """A logits processor that masks every token the grammar does not allow next (logit ``-inf``).

    Each call advances each row's state by the token drawn last (``context[:, -1]``; not on the
    first call, which sees the prompt), then keeps the logits of tokens with a live transition:
    ``z'_t = z_t`` if ``transitions[s, t] != dead`` else ``-inf``. Usable alone as
    ``generate(..., processor=GrammarConstraint(fsm), eos_token_id=fsm.eos_token_id)`` or first in a
    :func:`~jaxcore.lm.chain`. Pass the same ``eos_token_id`` to :func:`~jaxcore.lm.generate` so that
    rows stop at the end of the match.

    Args:
        fsm: a :class:`TokenFSM` whose vocabulary is the model's (``fsm.vocab_size == V``).
        check_state: if True (default False), refuse at run time (``eqx.error_if``) a row that has
            reached the dead state (a token the grammar forbids was fed back, e.g. by a processor
            before this one that changed the draw); off, such a row's logits are all ``-inf`` and
            :func:`~jaxcore.lm.generate`'s ``check_logits`` reports the step.

    Raises:
        TypeError: ``fsm`` is not a :class:`TokenFSM`.
        ValueError: (when called) logits whose last axis is not ``fsm.vocab_size``.

    References:
        Willard and Louf, "Efficient Guided Generation for Large Language Models", arXiv:2307.09702, 2023.

    Examples:
        >>> import re, jax, jax.numpy as jnp
        >>> from jaxcore import lm
        >>> vocab = ["a", "b", "@", "[", "]", "x", "1", "<eos>"]
        >>> fsm = compile_regex(r"@x\\[[0-9]{1,2}\\]", vocab, eos_token_id=7)
        >>> model = lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny(vocab_size=8))
        >>> out = lm.generate(jax.random.key(1), model, jnp.array([[0, 1], [1, 5]]), max_new_tokens=8,
        ...                   processor=GrammarConstraint(fsm), eos_token_id=7)
        >>> texts = ["".join(vocab[t] for t in row[m].tolist()) for row, m in zip(out.tokens, out.mask)]
        >>> [re.fullmatch(r"@x\\[1{1,2}\\]<eos>", t) is not None for t in texts]
        [True, True]
        >>> fsm.accepts(out.tokens, out.mask).tolist()
        [True, True]
    """

    fsm: TokenFSM
    check_state: bool = eqx.field(static=True)

    def __init__(self, fsm: TokenFSM, *, check_state: bool = False):
        if not isinstance(fsm, TokenFSM):
            raise TypeError(expected("fsm", "a TokenFSM (compile_regex(...))", type(fsm).__name__, raw=True))
        self.fsm = fsm
        self.check_state = check_bool(check_state, "check_state")

    def init(self, num_rows: int) -> GrammarState:
        """Every row in the start state, nothing drawn yet."""
        b = check_int(num_rows, "num_rows", minimum=1)
        return GrammarState(jnp.full((b,), self.fsm.initial_state, jnp.int32), jnp.zeros((), bool))

    def __call__(self, state: GrammarState, logits: Float[Array, "B V"], context: Int[Array, "B W"]):
        fsm = self.fsm
        if logits.shape[-1] != fsm.vocab_size:
            raise ValueError(expected("logits", f"{fsm.vocab_size} token columns (the grammar's vocabulary)",
                                      f"shape {tuple(logits.shape)}", raw=True))
        s = state.state
        last = context[:, -1]
        moved = fsm.transitions[s, jnp.where(last >= 0, last, 0)]
        moved = jnp.where(s == fsm.end_state, fsm.end_state, moved)  # after EOS the row is finished
        s = jnp.where(state.started, moved, s)
        if self.check_state:
            s = eqx.error_if(s, s == fsm.dead_state,
                             expected("context", "tokens the grammar allows", "a forbidden token", raw=True))
        row = jnp.take(fsm.transitions, s, axis=0)  # [B, V]
        out = jnp.where(row != fsm.dead_state, logits, -jnp.inf)
        return out, GrammarState(s, jnp.ones((), bool))
