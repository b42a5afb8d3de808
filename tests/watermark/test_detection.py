import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxcore.watermark import KGW, DiPmark, binomial_sf, detect, green_mask, secret_words, substitution_attack

from . import _oracle

KEY = jax.random.key(9)


def _loop_detect(wm, tokens, upper, thr):
    """Per-token reference: hash the context, look the token up, keep first occurrences of each hash."""
    s0, s1 = (int(w) for w in np.asarray(secret_words(wm.key)))
    k = wm.context_size
    out = []
    for row in np.asarray(tokens).tolist():
        seen, g, n = set(), 0, 0
        for i, t in enumerate(row):
            ctx = [row[j] if j >= 0 else -1 for j in range(i - k, i)]
            h = _oracle.context_hash(s0, s1, ctx)
            if h in seen:
                continue
            seen.add(h)
            p = _oracle.position(t, s0, s1, h, wm.vocab_size)
            g += (p >= thr) if upper else (p < thr)
            n += 1
        out.append((g, n))
    return out


def test_counts_equal_a_per_token_loop_and_p_values_scipy():
    tokens = jax.random.randint(jax.random.key(0), (3, 30), 0, 97)
    tokens = tokens.at[0, 10:20].set(tokens[0, :10])  # repeated contexts
    for wm, upper, thr, g in [(DiPmark(97, key=KEY, context_size=2), True, 48, 49 / 97),
                              (KGW(97, key=KEY, gamma=0.25), False, 24, 24 / 97)]:
        res = detect(wm, tokens)
        want = _loop_detect(wm, tokens, upper, thr)
        assert list(zip(res.num_green.tolist(), res.num_scored.tolist())) == want
        G, n = np.array(want).T
        np.testing.assert_allclose(np.asarray(res.p_value), stats.binom.sf(G - 1, n, g), rtol=1e-4)
        np.testing.assert_allclose(np.asarray(res.z_score), (G - g * n) / np.sqrt(n * g * (1 - g)), rtol=1e-5)
    assert res.num_scored[0] < 30


def test_null_green_count_is_exactly_binomial():
    """Unwatermarked text (independent of the key): G over 24 scored tokens ~ Binomial(24, g), chi-square."""
    tokens = jax.random.randint(jax.random.key(1), (3000, 24), 0, 1000)
    for wm, g in [(DiPmark(1000, key=KEY, context_size=2), 0.5), (KGW(1000, key=KEY, gamma=0.25, context_size=2), 0.25)]:
        res = detect(wm, tokens)
        n = np.asarray(res.num_scored)
        G = np.asarray(res.num_green)[n == 24]
        assert G.size > 2500
        counts = np.bincount(G, minlength=25).astype(float)
        pmf = np.array([_oracle.binom_pmf(k, 24, g) for k in range(25)]) * G.size
        # merge the tails so that every expected count is >= 5
        keep = pmf >= 5
        lo, hi = np.argmax(keep), len(keep) - np.argmax(keep[::-1]) - 1
        obs = np.concatenate([[counts[:lo + 1].sum()], counts[lo + 1:hi], [counts[hi:].sum()]])
        exp = np.concatenate([[pmf[:lo + 1].sum()], pmf[lo + 1:hi], [pmf[hi:].sum()]])
        assert stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > 1e-3
        assert np.mean(np.asarray(res.p_value) < 0.01) < 0.02  # the exact test keeps its level


def test_binomial_sf_edges():
    np.testing.assert_allclose(np.asarray(binomial_sf(jnp.array([0, 1, 3, 4]), 3, 0.5)), [1.0, 0.875, 0.125, 0.0],
                               rtol=1e-6)


def test_padding_and_scored_mask_do_not_change_the_answer():
    wm = DiPmark(200, key=KEY, context_size=2)
    text = jax.random.randint(jax.random.key(2), (1, 20), 0, 200)
    base = detect(wm, text)
    right = detect(wm, jnp.pad(text, ((0, 0), (0, 5))), jnp.pad(jnp.ones((1, 20), bool), ((0, 0), (0, 5))))
    left = detect(wm, jnp.pad(text, ((0, 0), (5, 0)), constant_values=7),
                  jnp.pad(jnp.ones((1, 20), bool), ((0, 0), (5, 0))))
    for r in (right, left):
        assert r.num_green.tolist() == base.num_green.tolist() and r.num_scored.tolist() == base.num_scored.tolist()
    sc = jnp.arange(20)[None] >= 4
    part = detect(wm, text, scored=sc)
    g, s = green_mask(wm, text)
    assert int(part.num_green[0]) == int((g & sc).sum()) and int(part.num_scored[0]) == int((s & sc).sum())


def test_watermarked_text_from_logits_is_detected_and_substitution_weakens_it():
    """Generate 8 x 120 tokens from fixed random logits with DiPmark (no model), then attack."""
    v = 500
    wm = DiPmark(v, key=KEY, alpha=0.5, context_size=1)
    logits = 2.0 * jax.random.normal(jax.random.key(3), (v,))

    def step(carry, k):
        state, prev = carry
        out, state = wm(state, jnp.broadcast_to(logits, (8, v)), prev[:, None])
        tok = jax.random.categorical(k, out).astype(jnp.int32)
        return (state, tok), tok

    _, toks = jax.lax.scan(step, (wm.init(8), jnp.zeros(8, jnp.int32)), jax.random.split(jax.random.key(4), 120))
    text = jnp.concatenate([jnp.zeros((8, 1), jnp.int32), toks.T], axis=1)
    scored = jnp.arange(121)[None] >= 1
    res = detect(wm, text, scored=jnp.broadcast_to(scored, text.shape))
    assert np.all(np.asarray(res.p_value) < 1e-4)
    zs = [float(jnp.median(res.z_score))]
    for eps in (0.1, 0.3, 1.0):
        att = substitution_attack(jax.random.key(5), text, None, eps, v, scored=jnp.broadcast_to(scored, text.shape))
        assert np.all((np.asarray(att) != np.asarray(text)).sum(1) == round(eps * 120))
        assert np.all(np.asarray(att[:, 0]) == 0)
        zs.append(float(jnp.median(detect(wm, att, scored=jnp.broadcast_to(scored, text.shape)).z_score)))
    assert zs[0] > zs[1] > zs[2] > zs[3] and abs(zs[3]) < 2.5


def test_bad_arguments():
    wm = DiPmark(10, key=KEY)
    with pytest.raises(TypeError, match="watermark: expected a DiPmark or KGW processor"):
        detect("wm", jnp.zeros((1, 3), jnp.int32))
    with pytest.raises(ValueError, match="tokens: expected token ids < vocab_size = 10"):
        detect(wm, jnp.full((1, 3), 10))
    with pytest.raises(ValueError, match="tokens: expected token ids >= 0"):
        detect(wm, jnp.full((1, 3), -1))
    with pytest.raises(ValueError, match="scored: expected shape"):
        detect(wm, jnp.zeros((1, 3), jnp.int32), scored=jnp.ones((1, 2), bool))
    with pytest.raises(ValueError, match="gamma: expected None for KGW"):
        detect(KGW(10, key=KEY), jnp.zeros((1, 3), jnp.int32), gamma=0.5)
    with pytest.raises(ValueError, match="eps: expected a number in"):
        substitution_attack(KEY, jnp.zeros((1, 3), jnp.int32), None, 1.5, 10)
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        substitution_attack(1, jnp.zeros((1, 3), jnp.int32), None, 0.5, 10)


@pytest.mark.parametrize("k, n, p, name", [(2, 3, 1.5, "p"), (0, -1, 0.5, "n"), (1.5, 3, 0.5, "k"), (1, 3, 0.0, "p")])
def test_binomial_sf_refuses_non_integer_counts_negative_n_and_p_outside_the_open_interval(k, n, p, name):
    from jaxcore.watermark import binomial_sf

    with pytest.raises(ValueError, match=f"{name}: expected"):
        binomial_sf(k, n, p)


def test_kgw_refuses_a_gamma_that_leaves_no_green_or_no_red_token():
    from jaxcore.watermark import KGW

    with pytest.raises(ValueError, match=r"gamma: expected a green-list fraction with floor\(gamma V\) in \[1, V - 1\]"):
        KGW(16, key=jax.random.key(0), gamma=0.01)
    assert KGW(16, key=jax.random.key(0), gamma=1 / 16).num_green == 1


def test_detect_refuses_out_of_range_tokens_under_jit():
    # issue 48 item 8: under jit token 99 with V = 16 was scored (z = 1.0); eager refused it.
    wm = DiPmark(16, key=jax.random.key(0), context_size=1)
    good = jnp.array([[1, 2, 3, 4, 5, 6]])
    run = jax.jit(lambda t: detect(wm, t).z_score)
    np.testing.assert_allclose(run(good), detect(wm, good).z_score, rtol=1e-6)
    with pytest.raises(Exception, match=r"tokens: expected token ids in \[0, vocab_size = 16\)"):
        jax.block_until_ready(run(good.at[0, 2].set(99)))
    with pytest.raises(ValueError, match=r"tokens: expected token ids < vocab_size = 16, got 99"):
        detect(wm, good.at[0, 2].set(99))
    # a masked (padding) entry may be anything, as documented
    mask = jnp.array([[True, True, False, True, True, True]])
    jit_masked = jax.jit(lambda t: detect(wm, t, mask).num_scored)
    assert int(jit_masked(good.at[0, 2].set(99))[0]) == int(detect(wm, good.at[0, 2].set(0), mask).num_scored[0])
