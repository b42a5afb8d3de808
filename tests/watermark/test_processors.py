import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import lm
from jaxcore.watermark import KGW, DiPmark, context_hash, dip_reweight, vocab_positions

KEY = jax.random.key(5)


def test_dipmark_step_equals_the_reweight_of_its_permutation():
    wm = DiPmark(50, key=KEY, alpha=0.3, context_size=3)
    logits = jax.random.normal(jax.random.key(0), (3, 50))
    ctx = jnp.array([[-1, 4, 9], [1, 2, 3], [7, 7, 7]])
    out, state = wm(wm.init(3), logits, ctx)
    pos = vocab_positions(KEY, context_hash(KEY, ctx), 50)
    want = dip_reweight(jax.nn.softmax(logits), pos, 0.3)
    np.testing.assert_allclose(np.asarray(jax.nn.softmax(out)), np.asarray(want), atol=1e-6)
    assert state.num_watermarked.tolist() == [1, 1, 1]


def test_repeated_context_is_left_unchanged_and_the_hash_set_is_exact():
    """A small table (8 slots) under many inserts: membership equals a Python set's."""
    wm = DiPmark(20, key=KEY, context_size=1, capacity=8)
    state = wm.init(2)
    logits = jax.random.normal(jax.random.key(1), (2, 20))
    step = jax.jit(lambda s, c: wm(s, logits, c))
    seen = [set(), set()]
    rng = np.random.default_rng(0)
    for _ in range(12):
        c = rng.integers(0, 6, 2)  # 6 distinct contexts per row: the table never fills
        out, state = step(state, jnp.asarray(c[:, None]))
        for b in range(2):
            unchanged = np.allclose(np.asarray(out[b]), np.asarray(logits[b]))
            assert unchanged == (int(c[b]) in seen[b])
            seen[b].add(int(c[b]))
    assert state.num_watermarked.tolist() == [len(s) for s in seen]
    assert state.num_steps.tolist() == [12, 12]


def test_full_table_keeps_watermarking():
    wm = DiPmark(20, key=KEY, context_size=1, capacity=2)
    state = wm.init(1)
    for c in range(4):
        _, state = wm(state, jnp.zeros((1, 20)), jnp.array([[c]]))
    assert int(state.num_watermarked[0]) == 4


def test_kgw_adds_delta_to_exactly_gamma_v_tokens():
    wm = KGW(100, key=KEY, gamma=0.25, delta=1.5)
    out, _ = wm(wm.init(2), jnp.zeros((2, 100)), jnp.array([[3], [4]]))
    out = np.asarray(out)
    assert (out == 1.5).sum(1).tolist() == [25, 25]
    pos = np.asarray(vocab_positions(KEY, context_hash(KEY, jnp.array([[3], [4]])), 100))
    np.testing.assert_array_equal(out == 1.5, pos < 25)


def test_alpha_and_delta_are_traced(compiles):
    f = jax.jit(lambda wm, s, l, c: wm(s, l, c))
    logits, ctx = jnp.zeros((1, 30)), jnp.zeros((1, 5), jnp.int32)
    wms = [DiPmark(30, key=KEY, alpha=a) for a in (0.1, 0.2, 0.5)]
    f(wms[0], wms[0].init(1), logits, ctx)
    with compiles() as c:
        for wm in wms[1:]:
            f(wm, wm.init(1), logits, ctx)
    assert len(c) == 0


def test_two_step_sequence_distribution_is_preserved_on_a_tiny_model(x64):
    """Enumerate all 25 two-token continuations of a V = 5 random Llama and all 120 x 120 pairs of
    permutations (one per distinct context, context_size = 1): the averaged watermarked sequence
    distribution equals the model's to 1e-12 with the already-seen rule, and differs without it."""
    v = 5
    model = lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny(vocab_size=v), scale=3.0)
    prompt = jnp.array([[1, 3, 2]])
    c0 = 2
    seqs = jnp.array([[1, 3, 2, a] for a in range(v)])
    logits = lm.forward(model, seqs, jnp.ones(seqs.shape, bool))
    logits = getattr(logits, "logits", logits)
    p1 = np.asarray(jax.nn.softmax(logits[0, 2].astype(jnp.float64)))
    p2 = np.asarray(jax.nn.softmax(logits[:, 3].astype(jnp.float64)))  # [x1, x2]
    assert lm.forward(model, prompt, jnp.ones((1, 3), bool)) is not None
    pos = jnp.asarray(np.argsort(np.array(list(itertools.permutations(range(v)))), axis=1))  # [120, V]
    r1 = np.asarray(dip_reweight(jnp.broadcast_to(jnp.asarray(p1), (120, v)), pos, 0.5))  # [perm, x1]
    r2 = np.asarray(dip_reweight(jnp.broadcast_to(jnp.asarray(p2)[None], (120, v, v)),
                                 jnp.broadcast_to(pos[:, None], (120, v, v)), 0.5))  # [perm, x1, x2]
    truth = p1[:, None] * p2
    # independent permutations for distinct contexts; the rule leaves step 2 unweighted when x1 == c0
    with_rule = np.einsum("ia,jab->ab", r1, r2) / 120**2
    with_rule[c0] = (r1[:, c0].mean()) * p2[c0]
    np.testing.assert_allclose(with_rule, truth, rtol=0, atol=1e-12)
    without = with_rule.copy()
    without[c0] = np.einsum("i,ib->b", r1[:, c0], r2[:, c0]) / 120  # the same permutation reused
    assert np.abs(without - truth).max() > 1e-4


@pytest.mark.slow
def test_generate_with_dipmark_counts_distinct_contexts():
    v = 64
    model = lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny(vocab_size=v))
    wm = DiPmark(v, key=KEY, context_size=1)
    prompt = jnp.array([[0, 5, 6], [1, 2, 3]])
    mask = jnp.array([[False, True, True], [True, True, True]])
    out = lm.generate(jax.random.key(1), model, prompt, mask, max_new_tokens=24, processor=wm)
    toks = np.asarray(out.tokens)
    for b in range(2):
        ctxs = [int(prompt[b, -1])] + toks[b, :-1].tolist()
        assert int(out.processor_state.num_watermarked[b]) == len(set(ctxs))


def test_bad_settings():
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        DiPmark(10, key=0)
    with pytest.raises(ValueError, match="alpha: expected"):
        DiPmark(10, key=KEY, alpha=0.7)
    with pytest.raises(ValueError, match="capacity: expected a power of two"):
        DiPmark(10, key=KEY, capacity=6)
    with pytest.raises(ValueError, match="gamma: expected"):
        KGW(10, key=KEY, gamma=1.0)
    wm = DiPmark(10, key=KEY)
    with pytest.raises(ValueError, match="logits: expected a \\[batch, 10\\] array"):
        wm(wm.init(1), jnp.zeros((1, 11)), jnp.zeros((1, 5), jnp.int32))
    with pytest.raises(ValueError, match="context: expected"):
        wm(wm.init(1), jnp.zeros((1, 10)), jnp.zeros((1, 2), jnp.int32))
