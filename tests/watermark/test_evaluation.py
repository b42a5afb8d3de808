import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.watermark import (
    KGW,
    DiPmark,
    detect,
    detection_rates,
    green_mask,
    secret_words,
)

from . import _oracle

KEY = jax.random.key(5)


def test_each_length_is_detect_on_the_prefix():
    """rates[i] == detect with ``scored`` the first n scored positions (repeated contexts included)."""
    tokens = jax.random.randint(jax.random.key(0), (6, 40), 0, 97)
    tokens = tokens.at[0, 20:30].set(tokens[0, 5:15])  # repeated contexts inside a prefix
    mask = jnp.arange(40)[None] < jnp.array([40, 40, 33, 40, 12, 40])[:, None]  # short texts
    scored = jnp.broadcast_to(jnp.arange(40)[None] >= 4, (6, 40))  # a 4-token "prompt"
    lengths = [1, 5, 16, 36]
    for wm in (DiPmark(97, key=KEY, context_size=2),):  # KGW: the false-positive test below
        res = detection_rates(wm, tokens, mask, lengths=lengths, scored=scored, level=0.2)
        assert res.rate.shape == (4,) and res.p_value.shape == (4, 6)
        for i, n in enumerate(lengths):
            first_n = scored & (jnp.arange(40)[None] < 4 + n)
            want = detect(wm, tokens, mask, scored=first_n)
            np.testing.assert_array_equal(np.asarray(res.num_scored[i]), np.asarray(want.num_scored))
            np.testing.assert_allclose(np.asarray(res.p_value[i]), np.asarray(want.p_value), rtol=1e-5)  # betainc batched: ulps
            np.testing.assert_allclose(np.asarray(res.z_score[i]), np.asarray(want.z_score), rtol=1e-6)
            assert float(res.rate[i]) == pytest.approx(np.mean(np.asarray(want.p_value) < 0.2), rel=1e-6)
        assert res.num_scored[1, 4] == 5 and res.num_scored[3, 4] == 8  # 12 real tokens, 4 of them prompt


def _all_green(wm, rows, length, seed):
    """Texts whose every token lies in DiPmark's green half of its context's permutation (Python oracle)."""
    s0, s1 = (int(w) for w in np.asarray(secret_words(wm.key)))
    v, thr = wm.vocab_size, wm.vocab_size // 2
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(rows):
        row = []
        for i in range(length):
            h = _oracle.context_hash(s0, s1, [row[j] if j >= 0 else -1 for j in range(i - wm.context_size, i)])
            while True:
                t = int(rng.integers(v))
                if _oracle.position(t, s0, s1, h, v) >= thr:
                    break
            row.append(t)
        out.append(row)
    return jnp.asarray(out)


def test_an_all_green_text_is_detected_from_the_length_where_half_to_the_n_drops_below_the_level():
    """Every token green, repeats scored: p(n) = P(Bin(n, 1/2) >= n) = 2^-n, below 0.01 from n = 7 on."""
    wm = DiPmark(100, key=KEY, context_size=1)
    tokens = _all_green(wm, 3, 12, seed=0)
    g, _ = green_mask(wm, tokens, ignore_repeated=False)
    assert bool(jnp.all(g))
    res = detection_rates(wm, tokens, lengths=[4, 6, 7, 12], level=0.01, ignore_repeated=False)
    np.testing.assert_allclose(np.asarray(res.p_value[:, 0]), 0.5 ** np.array([4, 6, 7, 12]), rtol=1e-5)
    assert res.rate.tolist() == [0.0, 0.0, 1.0, 1.0]


def test_false_positive_rate_on_unwatermarked_text_is_at_most_the_level():
    """Text independent of the key: the exact (conservative) test rejects at most `level` of them on average."""
    tokens = jax.random.randint(jax.random.key(3), (1000, 32), 0, 1000)
    res = detection_rates(KGW(1000, key=KEY, gamma=0.5, context_size=2), tokens, lengths=[8, 32], level=0.05)
    se = np.sqrt(0.05 * 0.95 / 1000)
    assert bool(jnp.all(res.rate <= 0.05 + 3 * se)) and bool(jnp.all(res.rate > 0.0))


@pytest.mark.parametrize("lengths, exc, msg", [
    ([], ValueError, "lengths"),
    ([0, 4], ValueError, "lengths[0]"),
    ([[4]], ValueError, "lengths"),
    (4, TypeError, "lengths: expected a sequence of positive ints"),
    ("8", TypeError, "lengths"),
    ([2.5], TypeError, "lengths[0]"),
])
def test_bad_lengths(lengths, exc, msg):
    wm = DiPmark(50, key=KEY)
    with pytest.raises(exc, match=msg.replace("[", r"\[").replace("]", r"\]")):
        detection_rates(wm, jnp.zeros((2, 8), jnp.int32), lengths=lengths)


def test_bad_level_and_watermark():
    tokens = jnp.zeros((2, 8), jnp.int32)
    for level in (0.0, 1.0, float("nan")):
        with pytest.raises(ValueError, match="level: expected"):
            detection_rates(DiPmark(50, key=KEY), tokens, lengths=[4], level=level)
    with pytest.raises(TypeError, match="watermark: expected a DiPmark or KGW processor"):
        detection_rates(object(), tokens, lengths=[4])
