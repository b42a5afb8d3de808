import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.alignment import PreferencePairs, preference_pairs


def _inputs():
    prompt = np.array([[0, 0, 11, 12], [21, 22, 23, 24]], np.int32)
    pmask = prompt > 0
    cont = np.arange(2 * 3 * 3, dtype=np.int32).reshape(2, 3, 3) + 30
    cmask = np.ones((2, 3, 3), bool)
    cmask[0, 2, 1:] = False  # an end-of-sequence cut: padding inside the row before re-packing
    scores = np.array([[0.2, 0.1, 0.7], [0.9, 0.3, 0.3]])
    return prompt, pmask, cont, cmask, scores


def test_chosen_is_least_and_rejected_most_toxic_left_packed():
    prompt, pmask, cont, cmask, scores = _inputs()
    p = preference_pairs(prompt, pmask, cont, cmask, scores)
    assert isinstance(p, PreferencePairs) and p.tokens.shape == (2, 2, 7)
    np.testing.assert_allclose(np.asarray(p.scores), [[0.1, 0.7], [0.3, 0.9]], rtol=1e-6)
    t, m, c = np.asarray(p.tokens), np.asarray(p.mask), np.asarray(p.loss_mask)
    # pair 0: chosen = sample 1, rejected = sample 2 cut after one token
    assert t[0, 0][m[0, 0]].tolist() == [11, 12, 33, 34, 35]
    assert t[0, 1][m[0, 1]].tolist() == [11, 12, 36]
    assert m[0, 1].tolist() == [False] * 4 + [True] * 3  # all padding on the left
    assert t[0, 1][c[0, 1]].tolist() == [36]
    # pair 1: ties on the lowest score pick the first (sample 1); rejected = sample 0
    assert t[1, 0].tolist() == [21, 22, 23, 24, 42, 43, 44]
    assert t[1, 1][c[1, 1]].tolist() == [39, 40, 41]
    assert not (c & ~m).any()


def test_refusals():
    prompt, pmask, cont, cmask, scores = _inputs()
    with pytest.raises(ValueError, match="continuations: expected at least 2 samples"):
        preference_pairs(prompt, pmask, cont[:, :1], cmask[:, :1], scores[:, :1])
    with pytest.raises(ValueError, match="scores: expected finite values"):
        preference_pairs(prompt, pmask, cont, cmask, np.where(scores > 0.8, np.nan, scores))
    with pytest.raises(ValueError, match="scores: expected shape"):
        preference_pairs(prompt, pmask, cont, cmask, scores[:, :2])
    with pytest.raises(TypeError, match="continuations: expected an integer array"):
        preference_pairs(prompt, pmask, cont.astype(float), cmask, scores)
    with pytest.raises(ValueError, match="tokens: expected a \\[num_pairs, 2, length\\] array"):
        PreferencePairs(jnp.zeros((2, 3, 4), jnp.int32), jnp.ones((2, 3, 4), bool), jnp.ones((2, 3, 4), bool),
                        jnp.zeros((2, 3)))
