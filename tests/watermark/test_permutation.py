import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxcore.watermark import secret_words, token_positions, vocab_positions

from . import _oracle

KEY = jax.random.key(11)
SEEDS = jnp.arange(4, dtype=jnp.uint32) * jnp.uint32(2654435761)


FAST = [(6, "feistel"), (97, "feistel"), (49152, "feistel"), (6, "shuffle")]
MORE = [(v, m) for v in [2, 3, 5, 6, 7, 16, 97, 1000, 49152] for m in ("feistel", "shuffle") if (v, m) not in FAST]


@pytest.mark.parametrize("v,method", FAST + [pytest.param(*c, marks=pytest.mark.slow) for c in MORE])
def test_bijection_and_o1_lookup_agree(v, method):
    pos = np.asarray(vocab_positions(KEY, SEEDS, v, method=method))
    assert pos.shape == (4, v)
    assert all(sorted(r) == list(range(v)) for r in pos.tolist())
    tok = jnp.asarray(np.random.default_rng(v).integers(0, v, 4))
    got = np.asarray(token_positions(KEY, SEEDS, tok, v, method=method))
    assert got.tolist() == pos[np.arange(4), np.asarray(tok)].tolist()


@pytest.mark.parametrize("v", [6, 97, 1000])
def test_feistel_matches_pure_python_statement(v):
    s0, s1 = (int(w) for w in np.asarray(secret_words(KEY)))
    pos = np.asarray(vocab_positions(KEY, SEEDS[:2], v))
    for r, seed in enumerate(np.asarray(SEEDS[:2]).tolist()):
        assert pos[r].tolist() == [_oracle.position(t, s0, s1, seed, v) for t in range(v)]


def test_distinct_seeds_and_keys_give_distinct_permutations():
    a = np.asarray(vocab_positions(KEY, SEEDS, 1000))
    assert len({tuple(r) for r in a.tolist()}) == 4
    b = np.asarray(vocab_positions(jax.random.key(12), SEEDS, 1000))
    assert np.mean(a == b) < 0.02


def test_position_of_a_token_is_uniform_over_seeds():
    """Token 0's position over 6000 context hashes at V = 6: chi-square against uniform (and all 720 reachable?)."""
    seeds = jax.random.bits(jax.random.key(1), (6000,), jnp.uint32)
    pos = np.asarray(vocab_positions(KEY, seeds, 6))
    for t in (0, 5):
        counts = np.bincount(pos[:, t], minlength=6)
        assert stats.chisquare(counts).pvalue > 1e-3
    # pairs: P(pi(0) < pi(1)) = 1/2
    assert abs(np.mean(pos[:, 0] < pos[:, 1]) - 0.5) < 0.03
    # the family reaches most permutations of 6 elements
    assert len({tuple(r) for r in pos.tolist()}) > 600


def test_bad_arguments():
    with pytest.raises(ValueError, match="method: expected one of 'feistel', 'shuffle'"):
        vocab_positions(KEY, SEEDS, 10, method="sha")
    with pytest.raises(ValueError, match="vocab_size: expected an int in"):
        vocab_positions(KEY, SEEDS, 1)
    with pytest.raises(TypeError, match="seed: expected an integer"):
        vocab_positions(KEY, jnp.zeros(2), 10)
    with pytest.raises(ValueError, match="tokens: expected token ids < vocab_size = 10"):
        token_positions(KEY, SEEDS, jnp.array([1, 2, 3, 10]), 10)
    with pytest.raises(ValueError, match="tokens: expected the shape of seed"):
        token_positions(KEY, SEEDS, jnp.array([1, 2]), 10)
    with pytest.raises(ValueError, match="num_rounds: expected an int in"):
        vocab_positions(KEY, SEEDS, 10, num_rounds=0)


def test_token_positions_refuses_out_of_range_tokens_under_jit():
    # issue 48 item 8: under jit token 99 with V = 16 returned a position.
    k, s = jax.random.key(0), jnp.array([7, 8], jnp.uint32)
    f = jax.jit(lambda t: token_positions(k, s, t, 16))
    t = jnp.array([3, 15])
    np.testing.assert_array_equal(f(t), vocab_positions(k, s, 16)[jnp.arange(2), t])
    for bad in (99, -1):
        with pytest.raises(Exception, match=r"tokens: expected token ids in \[0, vocab_size = 16\)"):
            jax.block_until_ready(f(t.at[1].set(bad)))
