import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import lm
from jaxcore.alignment import sequence_log_probs

from ._shared import L, N, brute_log_probs, model, pairs


def test_equals_summed_log_softmax_of_forward():
    p = pairs()
    t, m, c = (a.reshape(2 * N, L) for a in (p.tokens, p.mask, p.loss_mask))
    got = np.asarray(sequence_log_probs(model(), t, m, c))
    np.testing.assert_allclose(got, brute_log_probs(model(), t, m, c), rtol=1e-5, atol=1e-4)
    assert np.all(got < 0)


@pytest.mark.slow
def test_matches_lm_token_logprobs_with_target_mask():
    p = pairs()
    t, m, c = (a.reshape(2 * N, L) for a in (p.tokens, p.mask, p.loss_mask))
    ref = np.asarray(lm.token_logprobs(model(), t, m, target_mask=c)).sum(1)
    np.testing.assert_allclose(np.asarray(sequence_log_probs(model(), t, m, c)), ref, rtol=1e-5, atol=1e-5)


def test_padding_on_both_sides_is_scored_like_left_padding_and_empty_loss_is_zero():
    toks = jnp.array([[0, 5, 6, 7, 8, 9, 0, 0], [0, 0, 0, 5, 6, 7, 8, 9], [0, 0, 0, 5, 6, 7, 8, 9]])
    mask = jnp.array([[0, 1, 1, 1, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1, 1]], bool)
    loss = jnp.array([[0, 0, 0, 1, 1, 1, 1, 1],  # loss_mask on padding is ignored
                      [0, 0, 0, 0, 0, 1, 1, 1],
                      [0, 0, 0, 0, 0, 0, 0, 0]], bool)
    lp = np.asarray(sequence_log_probs(model(), toks, mask, loss))
    assert lp[0] == pytest.approx(lp[1], abs=1e-5) and lp[0] < 0
    assert lp[2] == 0.0


def test_refuses_gaps_and_bad_masks():
    toks = jnp.array([[5, 6, 7, 8]])
    with pytest.raises(ValueError, match="mask: expected one contiguous run"):
        sequence_log_probs(model(), toks, jnp.array([[1, 0, 1, 1]], bool))
    with pytest.raises(TypeError, match="loss_mask: expected a bool"):
        sequence_log_probs(model(), toks, None, jnp.array([[0.5, 1, 1, 1]]))
    with pytest.raises(ValueError, match="loss_mask: expected shape"):
        sequence_log_probs(model(), toks, None, jnp.ones((1, 3), bool))
    with pytest.raises(ValueError, match="tokens: expected token ids"):
        sequence_log_probs(model(), jnp.array([[5, 64]]))
