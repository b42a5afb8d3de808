import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.watermark import context_hash, context_windows, secret_words

from . import _oracle

KEY = jax.random.key(3)


def test_hash_matches_pure_python_statement():
    s0, s1 = (int(w) for w in np.asarray(secret_words(KEY)))
    ctx = np.array([[1, 2, 3], [-1, -1, 7], [49151, 0, 5], [3, 2, 1]])
    got = np.asarray(context_hash(KEY, jnp.asarray(ctx)))
    want = [_oracle.context_hash(s0, s1, row.tolist()) for row in ctx]
    assert got.tolist() == want


def test_hash_is_keyed_order_sensitive_and_collision_free_on_many_contexts():
    ctx = jax.random.randint(jax.random.key(0), (20000, 2), 0, 49152)
    h = np.asarray(context_hash(KEY, ctx))
    # distinct contexts -> distinct hashes (birthday bound: 20000^2 / 2^33 ~ 0.05 expected collisions)
    n_ctx = len({tuple(r) for r in np.asarray(ctx).tolist()})
    assert len(set(h.tolist())) >= n_ctx - 1
    assert not np.array_equal(h, np.asarray(context_hash(jax.random.key(4), ctx)))
    swapped = np.asarray(context_hash(KEY, ctx[:, ::-1]))
    assert np.mean(swapped == h) < 0.01
    bits = np.unpackbits(h.view(np.uint8)).reshape(-1, 32).mean(0)  # every output bit balanced
    assert np.all(np.abs(bits - 0.5) < 0.02)


def test_windows_equal_a_loop_with_minus_one_fill():
    t = np.array([[5, 6, 7, 8], [0, 9, 10, 11]])
    m = np.array([[True] * 4, [False, True, True, True]])
    got = np.asarray(context_windows(jnp.asarray(t), jnp.asarray(m), 3))
    tt = np.where(m, t, -1)
    for b in range(2):
        for i in range(4):
            want = [tt[b, j] if j >= 0 else -1 for j in range(i - 3, i)]
            assert got[b, i].tolist() == want


def test_secret_words_of_other_key_implementations():
    w = secret_words(jax.random.key(0, impl="rbg"))
    assert w.shape == (2,) and w.dtype == jnp.uint32
    assert secret_words(jax.random.PRNGKey(5)).tolist() == np.asarray(jax.random.PRNGKey(5)).tolist()


def test_bad_inputs():
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        context_hash(3, jnp.zeros((1, 2), jnp.int32))
    with pytest.raises(TypeError, match="context: expected an integer array"):
        context_hash(KEY, jnp.zeros((1, 2)))
    with pytest.raises(ValueError, match="context: expected token ids >= -1"):
        context_hash(KEY, jnp.array([[-2, 1]]))
    with pytest.raises(ValueError, match="context_size: expected an int >= 1"):
        context_windows(jnp.zeros((1, 3), jnp.int32), None, 0)
    with pytest.raises(ValueError, match="mask: expected shape"):
        context_windows(jnp.zeros((1, 3), jnp.int32), jnp.ones((1, 2), bool), 1)
