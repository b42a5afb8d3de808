"""Grammar-constrained decoding: the token automaton against brute force, samples against ``re.fullmatch``."""

import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from jaxcore import lm

# a toy vocabulary: single characters, merges, an empty token and a text-less one (never allowed), then EOS
TOY = ["a", "b", "c", "ab", "bc", "abc", "ca", "1", "2", "12", "-", ".", "@", "[", "]", "x", " ", "", None, "<eos>"]
EOS = len(TOY) - 1
TOY_MODEL = lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny(vocab_size=len(TOY)))
PROMPTS = np.array([[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]], np.int32)


def _text(ids):
    return "".join(TOY[i] for i in ids if i != EOS)


def _walk(fsm, ids):
    s = fsm.initial_state
    for t in ids:
        s = int(fsm.transitions[s, t])
    return s


# ------------------------------------------------------------------------------------------------ the table


BOUNDED = [r"a(b|cd)?c", r"[ab]{1,3}", r"(ab|c)+", r"-?[12]{1,2}(\.[12])?", r"(@|x)[ab]?\]", r"abc|ca"]


@pytest.mark.parametrize("pattern", BOUNDED)
def test_transition_table_equals_brute_force(pattern):
    # oracle: token t may follow prefix p iff some continuation q of at most 3 tokens makes
    # text(p t q) a full match (every pattern here finishes within 3 more tokens from any live prefix);
    # EOS may follow iff text(p) is itself a full match
    fsm = lm.compile_regex(pattern, TOY, eos_token_id=EOS)
    trans = np.asarray(fsm.transitions)
    words = [i for i, t in enumerate(TOY) if t and i != EOS]  # tokens with text

    def completable(text, depth):
        if re.fullmatch(pattern, text):
            return True
        return depth > 0 and any(completable(text + TOY[q], depth - 1) for q in words)

    rng = np.random.default_rng(len(pattern))
    prefixes = [()] + [(t,) for t in words] + [tuple(rng.choice(words, 2)) for _ in range(20)]
    for p in prefixes:
        text = _text(p)
        s = _walk(fsm, p)
        live = completable(text, 3)
        assert (s != fsm.dead_state) == live, (p, text)
        if not live:
            continue
        for t in range(len(TOY)):
            if t == EOS:
                want = re.fullmatch(pattern, text) is not None
            elif not TOY[t]:
                want = False
            else:
                want = completable(text + TOY[t], 3)
            assert (trans[s, t] != fsm.dead_state) == want, (p, text, TOY[t])


def _outlines_index(pattern, texts, eos):
    """outlines-core's index of ``pattern`` over the tokens with text (its own byte-level DFA: the peer)."""
    oc = pytest.importorskip("outlines_core")
    table = {}
    for i, t in enumerate(texts):
        if t and i != eos:
            table.setdefault(t.encode("utf-8") if isinstance(t, str) else t, []).append(i)
    return oc.Index(pattern, oc.Vocabulary(eos, table))


def _agree_with_outlines(fsm, index, texts, eos, rng, num_walks, length):
    """Along random walks (tokens both allow), on tokens with bytes, every token outlines-core allows is
    allowed here; returns the count of (state, token) pairs allowed here only: outlines-core 0.2.14
    drops some continuations (e.g. "a" after "c" in ``(ab|c)+``, which "cab" needs; "." after "1" in
    ``-?[12]{1,2}(\\.[12])?``), which the brute-force test shows are right here."""
    extra = 0
    textual = np.array([bool(t) and i != eos for i, t in enumerate(texts)])
    for _ in range(num_walks):
        s, o = fsm.initial_state, index.get_initial_state()
        for _ in range(length):
            ours = np.asarray(fsm.allowed(s))
            theirs = np.zeros(len(texts), bool)
            theirs[index.get_allowed_tokens(o)] = True
            assert not np.any(theirs & textual & ~ours), np.flatnonzero(theirs & textual & ~ours)
            extra += int(np.sum(ours & textual & ~theirs))
            assert bool(ours[eos]) == index.is_final_state(o)
            choices = np.flatnonzero(ours & theirs & textual)
            if choices.size == 0:
                break
            t = int(rng.choice(choices))
            s, o = int(fsm.transitions[s, t]), index.get_next_state(o, t)
    return extra


@pytest.mark.parametrize("pattern,equal", [(BOUNDED[0], True), (BOUNDED[1], True), (BOUNDED[2], False),
                                           (BOUNDED[3], False)])
def test_allowed_sets_contain_outlines_core(pattern, equal):
    # not equal: continuations outlines-core drops ("a" after "c" in (ab|c)+, "." after "1" in the number)
    fsm = lm.compile_regex(pattern, TOY, eos_token_id=EOS)
    index = _outlines_index(pattern, TOY, EOS)
    extra = _agree_with_outlines(fsm, index, TOY, EOS, np.random.default_rng(0), num_walks=10, length=6)
    assert (extra == 0) == equal


def test_minimal_states_dead_end_and_forced_eos():
    fsm = lm.compile_regex(r"ab|b", ["a", "b", "ab", "<eos>"], eos_token_id=3)
    # start, after "a", dead, end ("ab" / "b" complete: only EOS, the same state as after EOS)
    assert fsm.num_states == 4 and (fsm.dead_state, fsm.end_state) == (2, 3)
    assert np.asarray(fsm.transitions).tolist() == [[1, 3, 3, 2], [2, 3, 2, 2], [2, 2, 2, 2], [2, 2, 2, 3]]
    assert np.asarray(fsm.accepting).tolist() == [False, False, False, True]
    assert fsm.accepts([[0, 1, 3], [2, 3, 3], [1, 1, 3]], [[1, 1, 1], [1, 1, 0], [1, 1, 1]]).tolist() == [
        True, True, False]
    anchored = lm.compile_regex(r"^ab|b$", ["a", "b", "ab", "<eos>"], eos_token_id=3)  # ends' anchors: implied
    np.testing.assert_array_equal(anchored.transitions, fsm.transitions)


def test_bytes_vocabulary_and_the_tokenizer_spelling():
    # raw bytes: "é" may be spelled whole or as its two UTF-8 bytes; a lone continuation byte cannot start;
    # three-byte characters split anywhere, named ones and a catch-all class alike; "Ġ" is a space
    fsm = lm.compile_regex("é ?a", [b"\xc3", b"\xa9", "é".encode(), b" a", b"a", b"</s>"], eos_token_id=5)
    assert np.flatnonzero(np.asarray(fsm.allowed(fsm.initial_state))).tolist() == [0, 2]
    assert fsm.accepts([[0, 1, 3, 5], [2, 4, 5, 5], [1, 0, 3, 5], [0, 3, 5, 5]]).tolist() == [True, True, False, False]
    zh, wen = "中".encode(), "文".encode()
    cjk = [zh[:1], zh[1:], "中文".encode(), wen[:2], wen[2:], "x", "<e>"]
    for pattern in ["[\u4e00-\u9fff]{2}", "中文|文中", "[^x]{2}"]:
        fsm = lm.compile_regex(pattern, cjk, eos_token_id=6)
        assert fsm.accepts([[0, 1, 3, 4, 6], [2, 6, 6, 6, 6], [0, 1, 5, 6, 6]]).tolist() == [True, True, False]
    tok = lm.Tokenizer(["<|end|>", "a", "Ġ", "Ġa", "Ċ", "Ã", "©", "Ã©"], ["Ġ a", "Ã ©"],
                       token_types=[3, 1, 1, 1, 1, 1, 1, 1], eos_token_id=0)
    assert lm.token_bytes(tok) == [None, b"a", b" ", b" a", b"\n", b"\xc3", b"\xa9", "é".encode()]
    fsm = lm.compile_regex(r"a( a)*\né", tok)
    assert fsm.eos_token_id == 0
    assert fsm.accepts([[1, 3, 1 + 1, 1, 4, 7, 0]]).tolist() == [True]  # "a a a\né" with " a" as " " + "a"


# ------------------------------------------------------------------------------------------------ sampling


CONSTRAINED = [lm.answer_regex(["x"], lm.number_regex("decimal")), r"(ab|c)+ [12]{1,3}"]


@settings(max_examples=4)
@given(pattern=st.sampled_from(CONSTRAINED), seed=st.integers(0, 2**31 - 1), t=st.sampled_from([1.0, 3.0]))
def test_every_constrained_sample_matches(pattern, seed, t):
    fsm = lm.compile_regex(pattern, TOY, eos_token_id=EOS, num_states=16)  # one compiled decoder for both
    out = lm.generate(jax.random.key(seed), TOY_MODEL, PROMPTS, max_new_tokens=8, temperature=t,
                      processor=lm.GrammarConstraint(fsm), eos_token_id=EOS)
    tokens, mask = np.asarray(out.tokens), np.asarray(out.mask)
    done = np.asarray(fsm.accepts(tokens, mask))
    for row, m, ok in zip(tokens, mask, done):
        ids = row[m].tolist()
        if ids[-1] == EOS:  # finished: the whole text matches
            assert ok and re.fullmatch(pattern, _text(ids)), _text(ids)
        else:  # cut by max_new_tokens: a live prefix
            assert _walk(fsm, ids) != fsm.dead_state
    assert np.all(np.isfinite(np.asarray(out.logprobs)))


def _regexes():
    leaf = st.sampled_from(["a", "b", "c", "1", "2", "x", " ", "[ab]", "[^a]", r"\d", "."])
    return st.recursive(leaf, lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda p: p[0] + p[1]),
        st.tuples(inner, inner).map(lambda p: f"({p[0]}|{p[1]})"),
        st.tuples(inner, st.sampled_from(["?", "*", "+", "{1,2}"])).map(lambda p: f"({p[0]}){p[1]}"),
    ), max_leaves=6)


def _random_pattern_samples_match(pattern, seed):
    try:
        fsm = lm.compile_regex(pattern, TOY, eos_token_id=EOS, num_states=16)  # the sampling tests' decoder
    except ValueError:  # more than 16 states, or nothing in TOY can spell a match
        assume(False)
    out = lm.generate(jax.random.key(seed), TOY_MODEL, PROMPTS, max_new_tokens=8,
                      processor=lm.GrammarConstraint(fsm), eos_token_id=EOS)
    for row, m in zip(np.asarray(out.tokens), np.asarray(out.mask)):
        ids = row[m].tolist()
        if ids[-1] == EOS:
            assert re.fullmatch(pattern, _text(ids)), (pattern, _text(ids))
        else:
            assert _walk(fsm, ids) != fsm.dead_state


@settings(max_examples=6)
@given(pattern=_regexes(), seed=st.integers(0, 2**31 - 1))
def test_random_patterns_samples_match(pattern, seed):
    _random_pattern_samples_match(pattern, seed)


@pytest.mark.slow
@settings(max_examples=100)
@given(pattern=_regexes(), seed=st.integers(0, 2**31 - 1))
def test_random_patterns_samples_match_deep(pattern, seed):
    _random_pattern_samples_match(pattern, seed)


def test_allow_everything_is_unconstrained_sampling():
    vocab = TOY[:17] + ["z", "y", "<eos>"]  # every token has text
    fsm = lm.compile_regex(r"[\s\S]*", vocab, eos_token_id=EOS, num_states=16)  # the sampling tests' decoder
    assert bool(fsm.allowed(fsm.initial_state).all())
    key = jax.random.key(7)
    kw = dict(max_new_tokens=8, eos_token_id=EOS)
    free = lm.generate(key, TOY_MODEL, PROMPTS, **kw)
    held = lm.generate(key, TOY_MODEL, PROMPTS, processor=lm.GrammarConstraint(fsm), **kw)
    np.testing.assert_array_equal(held.tokens, free.tokens)
    np.testing.assert_array_equal(held.mask, free.mask)
    np.testing.assert_array_equal(held.logprobs, free.logprobs)


def test_processor_steps_by_hand():
    fsm = lm.compile_regex(r"ab|b", ["a", "b", "ab", "<eos>"], eos_token_id=3)
    proc = lm.GrammarConstraint(fsm)
    z = jnp.zeros((2, 4))
    st = proc.init(2)
    out, st = proc(st, z, jnp.array([[0], [1]]))  # the prompt's last tokens are not read
    assert np.isinf(np.asarray(out)).tolist() == [[False, False, False, True]] * 2 and bool(st.started)
    out, st = proc(st, z, jnp.array([[0], [2]]))  # row 0 drew "a", row 1 drew "ab": only EOS is left
    assert np.isinf(np.asarray(out)).tolist() == [[True, False, True, True], [True, True, True, False]]
    out, st = proc(st, z, jnp.array([[1], [3]]))  # row 1 ended; it stays in the end state after padding
    out, st = proc(st, z, jnp.array([[3], [0]]))
    assert np.asarray(st.state).tolist() == [fsm.end_state, fsm.end_state]
    chained = lm.chain(lm.Temperature(1.0), proc)  # in a chain: the same masks, the state kept in the tuple
    out2, st2 = chained(chained.init(2), z, jnp.array([[0], [1]]))
    out2, st2 = chained(st2, z, jnp.array([[0], [2]]))
    assert np.isinf(np.asarray(out2)).tolist() == [[True, False, True, True], [True, True, True, False]]
    bad = proc(proc.init(1)._replace(started=jnp.ones((), bool)), z[:1], jnp.array([[3]]))[0]  # EOS at start
    assert np.isinf(np.asarray(bad)).all()  # no drawable token: generate's check_logits reports the step
    with pytest.raises(Exception, match="context: expected tokens the grammar allows"):
        lm.GrammarConstraint(fsm, check_state=True)(proc.init(1)._replace(started=jnp.ones((), bool)), z[:1],
                                                     jnp.array([[3]]))


def test_padded_tables_sample_the_same_and_share_one_compile(compiles):
    patterns = [r"(ab|c)+ [12]{1,3}", lm.answer_regex(["x"], lm.number_regex("decimal"))]
    plain = lm.compile_regex(patterns[0], TOY, eos_token_id=EOS)
    padded = [lm.compile_regex(p, TOY, eos_token_id=EOS, num_states=16) for p in patterns]
    assert padded[0].num_states == 16 and (padded[0].dead_state, padded[0].end_state) == (14, 15)
    assert jax.tree_util.tree_structure(padded[0]) == jax.tree_util.tree_structure(padded[1])
    rng = np.random.default_rng(0)
    for _ in range(10):  # the padded table allows what the plain one does along random walks
        s, q = plain.initial_state, padded[0].initial_state
        for _ in range(6):
            allowed = np.asarray(plain.allowed(s))
            np.testing.assert_array_equal(allowed, np.asarray(padded[0].allowed(q)))
            t = int(rng.choice(np.flatnonzero(allowed)))
            if t == EOS:
                break
            s, q = plain.transitions[s, t], padded[0].transitions[q, t]
    kw = dict(max_new_tokens=8, eos_token_id=EOS)
    lm.generate(jax.random.key(3), TOY_MODEL, PROMPTS, processor=lm.GrammarConstraint(padded[0]), **kw)
    with compiles() as c:
        lm.generate(jax.random.key(4), TOY_MODEL, PROMPTS, processor=lm.GrammarConstraint(padded[1]), **kw)
    assert len(c) == 0
    with pytest.raises(ValueError, match=r"^num_states: expected an int >= "):
        lm.compile_regex(patterns[0], TOY, eos_token_id=EOS, num_states=3)


# ------------------------------------------------------------------------------------------------ helpers


@settings(max_examples=25)
@given(name=st.text("abc_", min_size=1, max_size=5), n=st.integers(0, 99999), flag=st.booleans(),
       s=st.text(st.characters(codec="utf-8"), max_size=6), x=st.floats(allow_nan=False, allow_infinity=False))
def test_json_regex_matches_json_dumps(name, n, flag, s, x):
    pattern = lm.json_regex({"name": "string", "n": "integer", "x": "number", "ok": "boolean", "k": ["u", "v"]})
    doc = {"name": s, "n": -n, "x": x, "ok": flag, "k": "v"}
    for text in (json.dumps(doc), json.dumps(doc, separators=(",", ":")), json.dumps(doc, ensure_ascii=False)):
        assert re.fullmatch(pattern, text), text
    assert not re.fullmatch(pattern, json.dumps({**doc, "n": x + 0.5}))
    answers = lm.answer_regex([name, "b"], [lm.number_regex("integer"), r"[^\]\n]+"])
    text = f"@{name}[{-n}], @b[{s or 'v'}]"
    got = re.findall(r"@(\w+)\[(.*?)\]", text)  # the official parser reads the values back
    assert bool(re.fullmatch(answers, text)) == ("]" not in s and "\n" not in s)
    if "]" not in s and "\n" not in s:
        assert got == [(name, str(-n)), ("b", s or "v")]


@pytest.mark.parametrize("kind,good,bad", [
    ("integer", ["0", "-7", "120"], ["01", "1.5", "-", ""]),
    ("decimal", ["0.25", "-3", "10.0"], ["1.", ".5", "1e3"]),
    ("number", ["1e3", "-0.5E-2", "7"], ["1e", "+1", "0x1"]),
])
def test_number_regex(kind, good, bad):
    p = lm.number_regex(kind)
    assert all(re.fullmatch(p, g) for g in good) and not any(re.fullmatch(p, b) for b in bad)


# ------------------------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize("call,exc,match", [
    (lambda: lm.compile_regex("(a", TOY, eos_token_id=EOS), ValueError, r"^pattern: expected a valid regular"),
    (lambda: lm.compile_regex(r"(a)\1", TOY, eos_token_id=EOS), ValueError, r"^pattern: expected a regular expr"),
    (lambda: lm.compile_regex(r"\bab", TOY, eos_token_id=EOS), ValueError, r"^pattern: expected a regular expr"),
    (lambda: lm.compile_regex("a$b", TOY, eos_token_id=EOS), ValueError, r"^pattern: expected a regular expr"),
    (lambda: lm.compile_regex("é+", TOY, eos_token_id=EOS), ValueError, r"^pattern: expected a pattern that some"),
    (lambda: lm.compile_regex("a{2}q", TOY, eos_token_id=EOS), ValueError, r"^pattern: expected a pattern that"),
    (lambda: lm.compile_regex(3, TOY, eos_token_id=EOS), TypeError, r"^pattern: expected a str"),
    (lambda: lm.compile_regex("a", TOY), ValueError, r"^eos_token_id: expected an int in \[0, 20\)"),
    (lambda: lm.compile_regex("a", TOY, eos_token_id=20), ValueError, r"^eos_token_id: expected an int in"),
    (lambda: lm.compile_regex("a", "abc", eos_token_id=0), TypeError, r"^vocabulary: expected a Tokenizer"),
    (lambda: lm.compile_regex("a", ["a", 3], eos_token_id=0), TypeError, r"^vocabulary\[1\]: expected a str"),
    (lambda: lm.compile_regex("a", [], eos_token_id=0), ValueError, r"^vocabulary: expected at least one"),
    (lambda: lm.GrammarConstraint("a"), TypeError, r"^fsm: expected a TokenFSM"),
    (lambda: lm.token_bytes(TOY), TypeError, r"^tokenizer: expected a jaxcore.lm.Tokenizer"),
    (lambda: lm.answer_regex([]), ValueError, r"^names: expected at least one"),
    (lambda: lm.answer_regex(["a b"]), ValueError, r"^names: expected names matching"),
    (lambda: lm.answer_regex(["a", "b"], ["x"]), ValueError, r"^value: expected one pattern per name \(2\)"),
    (lambda: lm.answer_regex(["a"], "(x"), ValueError, r"^value: expected a valid regular"),
    (lambda: lm.json_regex({"a": "object"}), ValueError, r"^schema\['a'\]: expected one of"),
    (lambda: lm.json_regex([]), TypeError, r"^schema: expected a mapping"),
    (lambda: lm.json_regex({}), ValueError, r"^schema: expected at least one key"),
    (lambda: lm.number_regex("float"), ValueError, r"^kind: expected"),
])
def test_refusals(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_mismatched_vocabulary_is_refused():
    fsm = lm.compile_regex("ab", ["a", "b", "<eos>"], eos_token_id=2)  # 3 tokens; the model has 20
    with pytest.raises(ValueError, match=r"^logits: expected 3 token columns"):
        lm.generate(jax.random.key(0), TOY_MODEL, PROMPTS, max_new_tokens=2, processor=lm.GrammarConstraint(fsm))
    with pytest.raises(ValueError, match=r"^tokens: expected ids in \[0, 3\)"):
        fsm.accepts([[0, 5]])
    with pytest.raises(ValueError, match=r"^tokens: expected a \[B, N\] array of token ids, got ragged"):
        fsm.accepts([[0, 1], [0]])
    with pytest.raises(ValueError, match=r"^mask: expected shape \(1, 2\)"):
        fsm.accepts([[0, 1]], [[True]])


# ------------------------------------------------------------------------------------------------ the real tokenizer


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    from jaxcore.datasets import smollm2_gguf

    return lm.Tokenizer.from_gguf(smollm2_gguf())


@pytest.mark.slow
@pytest.mark.parametrize("pattern", [
    lm.answer_regex(["mean_fare", "count"], [lm.number_regex("decimal"), lm.number_regex("integer")]),
    lm.json_regex({"name": "string", "age": "integer", "ok": "boolean"}),
    r" ?(yes|no)\.",
    r"The answer is [0-9]{1,3}",
])
def test_real_tokenizer_samples_match(smollm2_tokenizer, pattern):
    tok = smollm2_tokenizer
    fsm = lm.compile_regex(pattern, tok)
    model = lm.random_llama(jax.random.key(1), lm.LlamaConfig.tiny(vocab_size=tok.vocab_size))
    prompt, mask = tok.encode_batch(["Answer:", "The result", "{", "Say it"])
    finished = 0
    for seed in range(3):
        out = lm.generate(jax.random.key(seed), model, prompt, mask, max_new_tokens=40,
                          processor=lm.GrammarConstraint(fsm), eos_token_id=tok.eos_token_id)
        done = np.asarray(fsm.accepts(out.tokens, out.mask))
        for row, m, ok in zip(np.asarray(out.tokens), np.asarray(out.mask), done):
            ids = row[m].tolist()
            if ids[-1] == tok.eos_token_id:
                text = tok.decode(ids[:-1])
                assert ok and re.fullmatch(pattern, text), text
                finished += 1
                if pattern.startswith(r"\{"):
                    assert list(json.loads(text)) == ["name", "age", "ok"]
            else:
                assert _walk(fsm, ids) != fsm.dead_state
    print(f"{finished} of 12 rows finished")
    assert finished >= 1


@pytest.mark.slow
@pytest.mark.parametrize("pattern", [
    lm.answer_regex(["mean_fare"], lm.number_regex("decimal")),
    lm.json_regex({"name": "string", "age": "integer"}),
    r"(yes|no|maybe), because [a-z ]{1,20}\.",
    r"(café|naïve|日本語)+",
])
def test_real_tokenizer_allowed_sets_equal_outlines_core(smollm2_tokenizer, pattern):
    tok = smollm2_tokenizer
    texts = lm.token_bytes(tok)  # byte pieces of multi-byte characters included: both work on bytes
    fsm = lm.compile_regex(pattern, tok)
    index = _outlines_index(pattern, texts, tok.eos_token_id)
    extra = _agree_with_outlines(fsm, index, texts, tok.eos_token_id, np.random.default_rng(1), num_walks=3,
                                 length=25)
    print(f"{extra} (state, token) pairs allowed here and not by outlines-core")
    assert extra >= 0


@pytest.mark.slow
def test_constrained_generate_shards_prompts():
    # the [B] grammar states and the [B, V] masks stay split with the prompts; the table is replicated
    from ..distributed import _sharding as S

    fsm = lm.compile_regex(CONSTRAINED[1], TOY, eos_token_id=EOS, num_states=16)
    proc = lm.GrammarConstraint(fsm)
    prompts = np.tile(PROMPTS, (2, 1))  # B = 8
    run = S.check_sharded(
        lambda m, p, k: lm.generate(k, m, p, max_new_tokens=6, processor=proc, eos_token_id=EOS, check_ids=False,
                                    check_logits=False),
        (TOY_MODEL, prompts, jax.random.key(2)), 8, (False, True, False),
        select=lambda out: (out.tokens, out.logprobs), max_memory_ratio=0.95, rtol=1e-5, atol=1e-5)
    for row, m in zip(np.asarray(run.many.tokens), np.asarray(run.many.mask)):
        assert _walk(fsm, row[m].tolist()) != fsm.dead_state
