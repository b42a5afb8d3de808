"""Hypothesis properties of jaxcore.lm on a tiny random Llama, one fixed shape per kernel (one compilation each).

Light profile (default): few examples on ``[2, 6]`` token batches (scoring), ``[2, 4]`` prompts with 3
new tokens (decoding) and ``[2, 16]`` logits (processors); the ``*_deep`` tests (slow) run the same
properties on 40 examples. Properties that can fail: finite outputs of the stated shapes and dtypes,
log-probabilities <= 0 that add up, invariance to the ids under the padding, the eos/pad contract of
``generate``, top-k/top-p keeping exactly the set their definition names, refusals in the one dialect.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from jaxcore import lm

V, B, L = 64, 2, 6
MODEL = lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny(V), scale=3.0)  # peaky logits
_DIALECT = re.compile(r"^(?P<name>[\w.\[\]]+): expected ")

ids = arrays(np.int32, (B, L), elements=st.integers(0, V - 1))
pads = st.lists(st.integers(0, L - 1), min_size=B, max_size=B)


def _log_softmax(z):
    z = np.asarray(z, np.float64)
    m = z.max(-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))


def _left_mask(pad, length):
    return np.arange(length)[None, :] >= np.asarray(pad)[:, None]


# --- scoring ------------------------------------------------------------------------------------------------


def _check_scoring(tokens, pad, noise, targets):
    mask = _left_mask(pad, L)
    target = mask & targets
    logits = lm.forward(MODEL, tokens, mask)
    assert logits.shape == (B, L, V) and logits.dtype == jnp.float32
    z = np.asarray(logits)
    assert np.isfinite(z).all()
    lp = np.asarray(lm.token_logprobs(MODEL, tokens, mask, target_mask=target))
    assert lp.shape == (B, L) and np.isfinite(lp).all() and (lp <= 0).all()
    scored = target & (np.cumsum(mask, axis=1) > 1)  # a real token before it
    assert (lp[~scored] == 0).all()
    # log p(x_i | x_<i) is the log-softmax of the previous position's logits
    ref = np.take_along_axis(_log_softmax(z[:, :-1]), tokens[:, 1:, None], -1)[..., 0]
    np.testing.assert_allclose(lp[:, 1:][scored[:, 1:]], ref[scored[:, 1:]], rtol=1e-4, atol=1e-4)
    seq = np.asarray(lm.sequence_logprob(MODEL, tokens, mask, target_mask=target))
    np.testing.assert_allclose(seq, lp.sum(1), rtol=1e-5, atol=1e-5)
    ppl = np.asarray(lm.perplexity(MODEL, tokens, mask, target_mask=target))
    n = scored.sum(1)
    assert (np.isnan(ppl) == (n == 0)).all()  # NaN exactly where nothing is scored (documented)
    np.testing.assert_allclose(ppl[n > 0], np.exp(-lp.sum(1)[n > 0] / n[n > 0]), rtol=1e-4)
    assert (ppl[n > 0] >= 1 - 1e-6).all()
    # the ids under the padding are not read: other ids there change no real position's output
    other = np.where(mask, tokens, noise)
    lp2 = np.asarray(lm.token_logprobs(MODEL, other, mask, target_mask=target))
    np.testing.assert_allclose(lp2, lp, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(lm.forward(MODEL, other, mask))[mask], z[mask], rtol=1e-4, atol=1e-4)


@given(ids, pads, ids, arrays(bool, (B, L)))
def test_fuzz_scoring(tokens, pad, noise, targets):
    _check_scoring(tokens, pad, noise, targets)


@pytest.mark.slow
@settings(max_examples=40)
@given(ids, pads, ids, arrays(bool, (B, L)))
def test_fuzz_scoring_deep(tokens, pad, noise, targets):
    _check_scoring(tokens, pad, noise, targets)
    mask = _left_mask(pad, L)
    out = lm.forward_hidden(MODEL, tokens, mask)  # the internals: shapes, finiteness, the same logits
    c = MODEL.config
    assert out.residual.shape == (B, c.num_layers + 1, L, c.dim) and out.mlp.shape == (B, c.num_layers, L, c.hidden_dim)
    assert all(np.isfinite(np.asarray(a)).all() for a in out)
    np.testing.assert_allclose(np.asarray(out.logits), np.asarray(lm.forward(MODEL, tokens, mask)), rtol=1e-5,
                               atol=1e-5)
    emb = np.asarray(MODEL.embed)[tokens]
    np.testing.assert_allclose(np.asarray(out.residual)[:, 0], emb, rtol=1e-6)   # layer 0: the embeddings


# --- refusals of token arrays -----------------------------------------------------------------------------

DTYPES = [np.int32, np.int64, np.uint8, np.float32, np.bool_]


def _outcome(fn, name):
    try:
        out = fn()
    except (ValueError, TypeError) as exc:
        m = _DIALECT.match(str(exc))
        assert m is not None, f"not in the dialect: {type(exc).__name__}: {exc}"
        assert m.group("name") == name, f"names {m.group('name')}, expected {name}: {exc}"
        return "refused"
    for leaf in jax.tree_util.tree_leaves(out):
        a = np.asarray(leaf)
        if a.dtype.kind == "f":
            assert np.isfinite(a).all(), "non-finite output from valid input"
    return "ok"


def _check_token_refusal(values, dtype, fn):
    a = np.asarray(values).astype(dtype) if dtype is not np.uint8 else np.asarray(np.clip(values, 0, 255), dtype)
    valid = a.dtype.kind in "iu" and a.min() >= 0 and a.max() < V
    got = _outcome(lambda: fn(MODEL, a), "tokens")
    assert got == ("ok" if valid else "refused"), (a, got)


@given(arrays(np.int64, (B, L), elements=st.integers(-3, V + 3)), st.sampled_from(DTYPES),
       st.sampled_from([lm.forward, lm.token_logprobs]))
def test_fuzz_token_refusals(values, dtype, fn):
    _check_token_refusal(values, dtype, fn)


# --- decoding -----------------------------------------------------------------------------------------------

P, N = 4, 3
temperatures = st.floats(-30, 1).map(lambda e: float(10.0 ** e))


def _check_generate(seed, prompt, pad, temperature, eos, top_p=None):
    mask = _left_mask(pad, P)
    out = lm.generate(jax.random.key(seed), MODEL, prompt, mask, max_new_tokens=N, processor=lm.TopK(8),
                      temperature=temperature, top_p=top_p, eos_token_id=eos, pad_token_id=0)
    tok, live = np.asarray(out.tokens), np.asarray(out.mask)
    lp, mlp = np.asarray(out.logprobs), np.asarray(out.model_logprobs)
    assert tok.shape == live.shape == lp.shape == mlp.shape == (B, N)
    assert tok.dtype == np.int32 and live.dtype == bool and lp.dtype == mlp.dtype == np.float32
    assert ((tok >= 0) & (tok < V)).all()
    assert np.isfinite(lp).all() and np.isfinite(mlp).all() and (lp <= 1e-6).all() and (mlp <= 1e-6).all()
    assert (lp[~live] == 0).all() and (mlp[~live] == 0).all() and (tok[~live] == 0).all()
    for row in range(B):  # live until and including the first eos, then padding
        hit = np.flatnonzero(tok[row] == eos)
        first = hit[0] if hit.size and live[row, hit[0]] else N
        np.testing.assert_array_equal(live[row], np.arange(N) <= first)
    # the first token: the model's log-probability is the forward pass's; it is among the top 8
    z = np.asarray(lm.forward(MODEL, prompt, mask))[:, -1].astype(np.float64)
    np.testing.assert_allclose(mlp[:, 0], _log_softmax(z)[np.arange(B), tok[:, 0]], rtol=1e-4, atol=1e-4)
    kth = np.sort(z, axis=-1)[:, -8]
    assert (z[np.arange(B), tok[:, 0]] >= kth - 1e-6).all()
    if temperature < 1e-10:  # a vanishing temperature (or greedy, 0) samples the argmax with probability 1
        np.testing.assert_array_equal(tok[:, 0], z.argmax(-1))
        np.testing.assert_allclose(lp[:, 0], 0.0, atol=1e-6)


@given(st.integers(0, 2**31 - 1), arrays(np.int32, (B, P), elements=st.integers(0, V - 1)),
       st.lists(st.integers(0, P - 1), min_size=B, max_size=B), temperatures, st.integers(0, V - 1))
def test_fuzz_generate(seed, prompt, pad, temperature, eos):
    _check_generate(seed, prompt, pad, temperature, eos)


@pytest.mark.slow
@settings(max_examples=40)
@given(st.integers(0, 2**31 - 1), arrays(np.int32, (B, P), elements=st.integers(0, V - 1)),
       st.lists(st.integers(0, P - 1), min_size=B, max_size=B), temperatures | st.just(0.0), st.integers(0, V - 1),
       st.none() | st.floats(0.05, 0.99))
def test_fuzz_generate_deep(seed, prompt, pad, temperature, eos, top_p):
    _check_generate(seed, prompt, pad, temperature, eos, top_p)


# --- processors on random logits -----------------------------------------------------------------------------

W = 16
logits = arrays(np.float32, (2, W), elements=st.floats(-50, 50, width=32)) | \
    arrays(np.float32, (2, W), elements=st.sampled_from([-np.inf, 0.0, 1.0, 1.0, 2.5, -3.0]))


def _check_processors(z, k, p, t):
    z = z.copy()
    z[:, 0] = np.maximum(z[:, 0], -10.0)  # at least one finite logit per row
    zj = jnp.asarray(z)
    top, _ = lm.TopK(k)((), zj, None)
    top = np.asarray(top)
    kth = np.sort(z, axis=-1)[:, -min(k, W)][:, None]
    np.testing.assert_array_equal(top, np.where(z >= kth, z, -np.inf))   # kept exactly the top k (and ties)
    nuc, _ = lm.TopP(p)((), zj, None)
    nuc = np.asarray(nuc)
    kept = np.isfinite(nuc)
    assert kept.any(-1).all()
    np.testing.assert_array_equal(nuc[kept], z[kept])
    prob = np.exp(z.astype(np.float64) - z.max(-1, keepdims=True))
    prob /= prob.sum(-1, keepdims=True)
    for r in range(2):
        mass = prob[r, kept[r]].sum()
        assert mass >= min(p, 1.0) - 1e-5 or kept[r].all(), (mass, p)
        lowest = z[r, kept[r]].min()   # minimal: without the least likely kept tokens the mass is below p
        assert prob[r, kept[r] & (z[r] > lowest)].sum() < p + 1e-5
        assert (z[r, ~kept[r]] < lowest).all()
    scaled, _ = lm.Temperature(t)((), zj, None)
    np.testing.assert_allclose(np.asarray(scaled), z / np.float32(t), rtol=1e-6, atol=1e-37)  # XLA flushes subnormals
    c = lm.chain(lm.Temperature(t), lm.TopK(k))
    both, state = c(c.init(2), zj, jnp.zeros((2, 1), jnp.int32))
    np.testing.assert_array_equal(np.asarray(both), np.asarray(lm.TopK(k)((), scaled, None)[0]))
    assert state == ((), ())


@given(logits, st.sampled_from([1, 3, 16, 40]), st.floats(0.01, 1.0), st.floats(0.05, 20.0))
def test_fuzz_processors(z, k, p, t):
    _check_processors(z, k, p, t)


@pytest.mark.slow
@settings(max_examples=40)
@given(logits, st.sampled_from([1, 2, 3, 7, 16, 40]), st.floats(0.01, 1.0), st.floats(0.05, 20.0))
def test_fuzz_processors_deep(z, k, p, t):
    _check_processors(z, k, p, t)


# --- refusals of scalar arguments ----------------------------------------------------------------------------

BAD_SCALARS = [("temperature", v) for v in (float("nan"), float("inf"), -1.0, 1e-45, "a", None)] + \
    [("top_p", v) for v in (float("nan"), float("inf"), -1.0, 0.0, 2.0, "a")] + \
    [("top_k", v) for v in (0, -1, 2.0, "a", 1.5)] + \
    [("max_new_tokens", v) for v in (0, -1, 2.0, "a", None, 300)] + \
    [("eos_token_id", v) for v in (-1, V, 2.0, "a")] + [("pad_token_id", v) for v in (-1, V, 1.5)]


@settings(max_examples=20)
@given(st.sampled_from(BAD_SCALARS))
def test_fuzz_generate_refuses_bad_scalars(case):
    name, value = case
    kw = {"max_new_tokens": 1, name: value}
    got = _outcome(lambda: lm.generate(jax.random.key(0), MODEL, np.ones((1, 2), np.int32), **kw), name)
    assert got == "refused"
