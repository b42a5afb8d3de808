"""KV-cache decoding: cached logits equal the full forward, samples follow the enumerated law."""

import itertools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxcore import lm

from ._reference import log_softmax

MODEL = lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny())


class Recorder(lm.LogitsProcessor):
    """Stores the logits it sees at every step and the context (a stateful processor)."""

    num_steps: int = eqx.field(static=True)
    vocab_size: int = eqx.field(static=True)
    context_size: int = eqx.field(static=True, default=3)

    def init(self, num_rows):
        return (jnp.zeros((num_rows, self.num_steps, self.vocab_size)),
                jnp.zeros((num_rows, self.num_steps, self.context_size), jnp.int32), jnp.zeros((), jnp.int32))

    def __call__(self, state, logits, context):
        buf, ctx, t = state
        return logits, (buf.at[:, t].set(logits), ctx.at[:, t].set(context), t + 1)


def test_cached_logits_equal_full_forward_at_every_position():
    # row 0 is left-padded: its cached logits must equal the masked full forward's (which
    # test_model checks against the unpadded sequence)
    prompt = np.array([[0, 0, 5, 6], [1, 2, 3, 4]])
    mask = prompt > 0
    n = 6
    rec = Recorder(n, MODEL.config.vocab_size)
    out = lm.generate(jax.random.key(3), MODEL, prompt, mask, max_new_tokens=n, processor=rec)
    seen, ctx, steps = out.processor_state
    assert int(steps) == n
    full = np.concatenate([prompt, np.asarray(out.tokens)], axis=1)
    fmask = np.concatenate([mask, np.ones((2, n), bool)], axis=1)
    logits = np.asarray(lm.forward(MODEL, full, fmask))
    p = prompt.shape[1]
    np.testing.assert_allclose(np.asarray(seen), logits[:, p - 1: p - 1 + n], atol=2e-5)
    # the context: the last 3 tokens, -1 before the prompt start, the newest last
    np.testing.assert_array_equal(ctx[0, 0], [-1, 5, 6])
    np.testing.assert_array_equal(ctx[1, 0], [2, 3, 4])
    np.testing.assert_array_equal(ctx[0, 2], [6, full[0, p], full[0, p + 1]])
    # model log-probabilities are those of the full forward
    lp = log_softmax(logits[:, p - 1: p - 1 + n].astype(np.float64))
    want = np.take_along_axis(lp, np.asarray(out.tokens)[..., None], -1)[..., 0]
    np.testing.assert_allclose(out.model_logprobs, want, atol=2e-5)
    np.testing.assert_allclose(out.logprobs, want, atol=2e-5)  # temperature 1, no truncation


def _enumerated(model, prompt, n, transform):
    """Exact law of n generated tokens (V^n sequences) with a processing of the logits."""
    v = model.config.vocab_size
    seqs = np.array(list(itertools.product(range(v), repeat=n)))
    full = np.concatenate([np.repeat(prompt[None], len(seqs), 0), seqs], axis=1)
    logits = np.asarray(lm.forward(model, full), np.float64)
    p = len(prompt)
    logp = np.zeros(len(seqs))
    for t in range(n):
        logp += np.take_along_axis(log_softmax(transform(logits[:, p - 1 + t])), seqs[:, t:t + 1], 1)[:, 0]
    return seqs, np.exp(logp)


@pytest.mark.parametrize("kwargs, transform", [
    pytest.param({}, lambda z: z, marks=pytest.mark.slow),
    ({"temperature": 0.5, "top_k": 3}, lambda z: np.where(z >= np.sort(z, -1)[:, -3:-2], z / 0.5, -np.inf)),
])
def test_samples_match_enumerated_distribution(kwargs, transform):
    cfg = lm.LlamaConfig.tiny(vocab_size=5, num_layers=1, dim=16)
    model = lm.random_llama(jax.random.key(7), cfg, scale=2.0)
    prompt = np.array([1, 3])
    n, b = 2, 4000
    seqs, probs = _enumerated(model, prompt, n, transform)
    out = lm.generate(jax.random.key(11), model, np.repeat(prompt[None], b, 0), max_new_tokens=n, **kwargs)
    codes = np.asarray(out.tokens) @ (cfg.vocab_size ** np.arange(n)[::-1])
    counts = np.bincount(codes, minlength=len(seqs))
    keep = probs > 0
    assert counts[~keep].sum() == 0
    expected = probs[keep] / probs[keep].sum() * b
    assert stats.chisquare(counts[keep], expected).pvalue > 1e-3
    # the returned log-probabilities are those of the sampled sequences under the sampled law
    np.testing.assert_allclose(np.asarray(out.logprobs).sum(1), np.log(probs[codes]), atol=1e-4)


def test_greedy_and_eos():
    prompt = np.array([[1, 2, 3]])
    g = lm.generate(jax.random.key(0), MODEL, prompt, max_new_tokens=4, temperature=0.0)
    logits = np.asarray(lm.forward(MODEL, np.concatenate([prompt, g.tokens], 1)))
    np.testing.assert_array_equal(g.tokens[0], logits[0, 2:6].argmax(-1))
    eos = int(g.tokens[0, 1])
    e = lm.generate(jax.random.key(0), MODEL, prompt, max_new_tokens=4, temperature=0.0, eos_token_id=eos,
                    pad_token_id=0)
    assert e.mask[0].tolist()[:2] == [True, True] and not e.mask[0, 2:].any()
    assert (np.asarray(e.tokens[0, 2:]) == 0).all() and (np.asarray(e.model_logprobs[0, 2:]) == 0).all()


def test_generate_refuses_bad_input():
    p = np.array([[1, 2]])
    with pytest.raises(TypeError, match="^key: expected"):
        lm.generate(0, MODEL, p, max_new_tokens=2)
    with pytest.raises(ValueError, match="^max_new_tokens: expected"):
        lm.generate(jax.random.key(0), MODEL, p, max_new_tokens=0)
    with pytest.raises(ValueError, match="^prompt_mask: expected left-padded"):
        lm.generate(jax.random.key(0), MODEL, p, np.array([[True, False]]), max_new_tokens=2)
    with pytest.raises(ValueError, match="^temperature: expected"):
        lm.generate(jax.random.key(0), MODEL, p, max_new_tokens=2, temperature=-1.0)
    with pytest.raises(ValueError, match="^top_p: expected"):
        lm.generate(jax.random.key(0), MODEL, p, max_new_tokens=2, top_p=0.0)
    with pytest.raises(TypeError, match="^processor: expected"):
        lm.generate(jax.random.key(0), MODEL, p, max_new_tokens=2, processor=lambda s, z, c: (z, s))
    with pytest.raises(ValueError, match="^max_new_tokens: expected"):
        lm.generate(jax.random.key(0), MODEL, p, max_new_tokens=300)


class HiddenRecorder(lm.LogitsProcessor):
    """A ``uses_hidden`` processor: stores the hidden state and the extended prefixes' hidden states."""

    num_steps: int = eqx.field(static=True)
    dim: int = eqx.field(static=True)
    candidates: tuple = eqx.field(static=True, default=(3, 7))
    uses_hidden = True

    def init(self, num_rows):
        k = len(self.candidates)
        return (jnp.zeros((num_rows, self.num_steps, self.dim)),
                jnp.zeros((num_rows, self.num_steps, k, self.dim)), jnp.zeros((), jnp.int32))

    def __call__(self, state, logits, context, *, hidden, extend):
        h, e, t = state
        cand = jnp.broadcast_to(jnp.array(self.candidates, jnp.int32), (logits.shape[0], len(self.candidates)))
        return logits, (h.at[:, t].set(hidden), e.at[:, t].set(extend(cand)), t + 1)


def test_hidden_and_extended_prefixes_equal_full_forward():
    # uses_hidden processors see the final residual stream of the prefix and of each prefix extended
    # by one candidate token, as forward_hidden computes them; the sampled tokens do not change
    prompt = np.array([[0, 0, 5, 6], [1, 2, 3, 4]])
    mask = prompt > 0
    n = 5
    rec = HiddenRecorder(n, MODEL.config.dim)
    out = lm.generate(jax.random.key(3), MODEL, prompt, mask, max_new_tokens=n, processor=rec)
    plain = lm.generate(jax.random.key(3), MODEL, prompt, mask, max_new_tokens=n)
    np.testing.assert_array_equal(out.tokens, plain.tokens)
    hid, ext, _ = out.processor_state
    seq = np.concatenate([prompt, np.asarray(out.tokens)], axis=1)
    smask = np.concatenate([mask, np.ones_like(out.tokens, bool)], axis=1)
    full = lm.forward_hidden(MODEL, seq, smask).residual[:, -1]
    np.testing.assert_allclose(hid, full[:, 3:3 + n], atol=2e-5)
    # every (step, candidate) extension left-padded to one length: one forward_hidden program
    width = 4 + n
    rows, masks, index = [], [], []
    for t in range(n):
        for j, c in enumerate(rec.candidates):
            s2 = np.concatenate([seq[:, :4 + t], np.full((2, 1), c)], axis=1)
            m2 = np.concatenate([smask[:, :4 + t], np.ones((2, 1), bool)], axis=1)
            pad = width - s2.shape[1]
            rows.append(np.pad(s2, ((0, 0), (pad, 0))))
            masks.append(np.pad(m2, ((0, 0), (pad, 0))))
            index.append((t, j))
    ref = np.asarray(lm.forward_hidden(MODEL, np.concatenate(rows), np.concatenate(masks)).residual[:, -1, -1])
    for r, (t, j) in enumerate(index):
        np.testing.assert_allclose(ext[:, t, j], ref[2 * r:2 * r + 2], atol=2e-5)


class _Spoil(lm.LogitsProcessor):
    """Sets row 1's logits to ``value`` (all of them, or only token 3) from generated token 2 on."""

    value: float = eqx.field(static=True)
    whole_row: bool = eqx.field(static=True)

    def init(self, num_rows):
        return jnp.zeros((), jnp.int32)

    def __call__(self, state, logits, context):
        hit = (jnp.arange(logits.shape[0])[:, None] == 1) & (state >= 2)
        if self.whole_row:
            hit = hit & jnp.ones_like(logits, bool)
        else:
            hit = hit & (jnp.arange(logits.shape[1])[None] == 3)
        return jnp.where(hit, self.value, logits), state + 1


@pytest.mark.parametrize("value, whole_row", [(-np.inf, True), (np.nan, False)])
def test_a_processor_leaving_no_drawable_token_is_refused_not_sampled(value, whole_row):
    prompt = np.array([[1, 2, 3], [4, 5, 6]])
    spoil = _Spoil(value, whole_row)
    with pytest.raises(ValueError, match=r"processor: expected logits after the processor .* got row 1 at generated "
                                         r"token 2"):
        lm.generate(jax.random.key(0), MODEL, prompt, max_new_tokens=4, processor=spoil)
    out = lm.generate(jax.random.key(0), MODEL, prompt, max_new_tokens=4, processor=spoil, check_logits=False)
    assert np.isnan(np.asarray(out.logprobs)[1, 2:]).all()  # what the switch lets through, documented
    f = jax.jit(lambda p: lm.generate(jax.random.key(0), MODEL, p, max_new_tokens=4, processor=spoil).tokens)
    with pytest.raises(Exception, match="processor: expected logits after the processor"):
        jax.block_until_ready(f(jnp.asarray(prompt)))
