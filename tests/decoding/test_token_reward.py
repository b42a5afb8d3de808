"""CD-Q's per-position target for additive rewards (``Rollouts.token_reward``): oracle checks on the toy model."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import lm
from jaxcore.decoding import QHead, Rollouts, cdq_loss, fit_cdq, rollouts, toy_rollouts, toy_values

from ._oracle import MODEL, SEQS, q_table_head, toy

# an additive reward on the toy's 81 sequences: r(y) = sum_t TR[t, y_t]
TR = np.asarray(jax.random.uniform(jax.random.key(11), (4, 3)), np.float64)
TOKEN_R = TR[np.arange(4)[None], SEQS]  # [81, 4]


def _with_tokens(data, tr):
    return Rollouts(data.hidden, data.tokens, data.mask, data.reward, data.next_ids, data.next_probs, data.weight,
                    vocab_size=data.vocab_size, token_reward=None if tr is None else jnp.asarray(tr, data.reward.dtype))


def _to_go_table(t, q_seq):
    """Q of the reward still to come: the sequence Q* minus the reward collected before each node (enumerated)."""
    q = np.array(q_seq, np.float64)
    row = 0
    for length in range(4):
        for prefix in np.ndindex(*(3,) * length):
            q[row] -= sum(TR[s, y] for s, y in enumerate(prefix))
            row += 1
    return q


def test_reward_to_go_is_the_per_position_fixed_point(x64):
    t = toy()
    data = _with_tokens(toy_rollouts(t, TOKEN_R.sum(1)), TOKEN_R)
    q_seq = toy_values(t, TOKEN_R.sum(1)).q
    q_go = _to_go_table(t, q_seq)
    # its loss is 0 with per-position targets; the sequence-reward Q* is not their fixed point (it counts the past)
    assert float(cdq_loss(q_table_head(t, q_go), data)) < 1e-20
    assert float(cdq_loss(q_table_head(t, q_seq), data)) > 1e-3
    # the two differ by the collected reward only, which is the same for every candidate next token: same tilt
    np.testing.assert_allclose(q_seq - q_seq.mean(1, keepdims=True), q_go - q_go.mean(1, keepdims=True), atol=1e-12)


@pytest.mark.slow
def test_reward_at_the_last_token_only_is_the_sequence_target(x64):
    t = toy()
    r = TOKEN_R.sum(1)
    last = np.zeros_like(TOKEN_R)
    last[:, -1] = r
    seq, per = toy_rollouts(t, r), _with_tokens(toy_rollouts(t, r), last)
    head = QHead(t.num_nodes, 3, key=jax.random.key(2))
    assert float(cdq_loss(head, per)) == pytest.approx(float(cdq_loss(head, seq)), rel=1e-12)
    # Q = 0: every live token's target is its own reward
    zero = QHead(t.num_nodes, 3)
    w = np.asarray(per.weight)
    want = (w[:, None] * TOKEN_R ** 2).sum() / (w.sum() * 4)
    assert float(cdq_loss(zero, _with_tokens(seq, TOKEN_R))) == pytest.approx(want, rel=1e-12)


@pytest.mark.slow
def test_fit_with_per_position_targets_reaches_the_reward_to_go():
    t = toy()
    data = _with_tokens(toy_rollouts(t, jnp.asarray(TOKEN_R.sum(1), jnp.float32)), TOKEN_R)
    res = fit_cdq(jax.random.key(1), QHead(t.num_nodes, 3), data, num_steps=400, learning_rate=0.1)
    want = _to_go_table(t, np.asarray(toy_values(t, jnp.asarray(TOKEN_R.sum(1), jnp.float32)).q, np.float64))
    np.testing.assert_allclose(res.head(t.hidden(jnp.arange(40))), want, atol=0.05)
    assert float(res.losses[-1]) < 0.05 * float(res.losses[0])


@pytest.mark.slow
def test_rollouts_take_token_rewards_masked_and_checked():
    prompt = jnp.array([[1, 2, 3], [4, 5, 6]])
    mask = jnp.array([[True, True, False], [True, True, True]])
    out = lm.GenerateResult(jnp.array([[4, 5, 0], [6, 7, 8]]), mask, jnp.zeros((2, 3)), jnp.zeros((2, 3)), None)
    tr = jnp.ones((2, 3))
    data = rollouts(MODEL, prompt, None, out, jnp.array([2.0, 3.0]), top_k=4, token_reward=tr)
    np.testing.assert_array_equal(data.token_reward, [[1, 1, 0], [1, 1, 1]])  # zero past the mask
    assert rollouts(MODEL, prompt, None, out, jnp.zeros(2), top_k=4).token_reward is None
    with pytest.raises(ValueError, match="token_reward"):
        rollouts(MODEL, prompt, None, out, jnp.zeros(2), top_k=4, token_reward=jnp.ones((2, 2)))
    with pytest.raises(ValueError, match="token_reward"):
        rollouts(MODEL, prompt, None, out, jnp.zeros(2), top_k=4, token_reward=tr.at[0, 0].set(jnp.nan))
    with pytest.raises(ValueError, match="token_reward"):
        Rollouts(data.hidden, data.tokens, data.mask, data.reward, data.next_ids, data.next_probs, data.weight,
                 token_reward=jnp.ones((2, 4)))
