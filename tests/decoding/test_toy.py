"""Oracle checks of controlled decoding on the tabular toy model (V = 3, T = 4: 81 sequences)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import lm
from jaxcore.decoding import (
    CDQ,
    CDFudge,
    QHead,
    ValueHead,
    best_of_k_kl,
    best_of_k_law,
    cdq_loss,
    combine,
    fit_cdq,
    fit_fudge,
    fudge_loss,
    select_best,
    toy_logprob,
    toy_rollouts,
    toy_sample,
    toy_tilted_kl,
    toy_tilted_logprob,
    toy_values,
)

from ._oracle import BASE, NUM_SAMPLES, REWARD, SEQS, chi_square_pvalue, q_table_head, toy, value_table_head

TOY = toy()  # float32
POW = 3 ** np.arange(3, -1, -1)


def seq_index(tokens):
    return np.asarray(tokens) @ POW


def test_exact_values_are_conditional_means_by_enumeration(x64):
    TOY = toy()
    ex = toy_values(TOY, REWARD)
    # V*(empty) = E_p[r]; V*(y_1 = a) = E_p[r | y_1 = a] by direct enumeration
    assert float(ex.value[0]) == pytest.approx(float(BASE @ REWARD), rel=1e-12)
    for a in range(3):
        sel = SEQS[:, 0] == a
        want = (BASE[sel] @ REWARD[sel]) / BASE[sel].sum()
        assert float(ex.value[1 + a]) == pytest.approx(want, rel=1e-12)
        assert float(ex.q[0, a]) == pytest.approx(want, rel=1e-12)
    np.testing.assert_allclose(ex.value[-81:], REWARD)


def test_exact_value_is_the_cdq_fixed_point(x64):
    TOY = toy()
    # Q* satisfies Q(y_<t, y_t) = sum_z p(z | y_<=t) Q(y_<=t, z), = r at the end: CD-Q's loss is 0 there
    ex = toy_values(TOY, REWARD)
    data = toy_rollouts(TOY, REWARD)
    head = q_table_head(TOY, ex.q)
    np.testing.assert_allclose(head(TOY.hidden(jnp.arange(40))), ex.q, atol=1e-12)
    assert float(cdq_loss(head, data)) < 1e-20
    # a perturbed table is not a fixed point
    assert float(cdq_loss(q_table_head(TOY, ex.q + 0.01), data)) > 1e-6


def test_least_squares_fudge_recovers_the_conditional_mean(x64):
    TOY = toy()
    ex = toy_values(TOY, REWARD)
    data = toy_rollouts(TOY, REWARD)
    res = fit_fudge(jax.random.key(1), ValueHead(TOY.num_nodes), data, num_steps=300, learning_rate=0.1)
    np.testing.assert_allclose(res.head(TOY.hidden(jnp.arange(TOY.num_nodes))), ex.value, atol=1e-5)
    # the exact V* is the minimiser: its loss is the irreducible variance, below the fit's start
    assert float(fudge_loss(value_table_head(TOY, ex.value), data)) == pytest.approx(float(res.losses[-1]), abs=1e-8)


@pytest.mark.slow
def test_cdq_training_converges_to_exact_q(x64):
    TOY = toy()
    ex = toy_values(TOY, REWARD)
    res = fit_cdq(jax.random.key(1), QHead(TOY.num_nodes, 3), toy_rollouts(TOY, REWARD), num_steps=1000,
                  learning_rate=0.1)
    np.testing.assert_allclose(res.head(TOY.hidden(jnp.arange(40))), ex.q, atol=2e-3)
    assert res.losses.shape == (1000,)


@pytest.mark.parametrize("which", ["cdq", pytest.param("fudge", marks=pytest.mark.slow)])
def test_tokenwise_sampler_matches_tilted_law(which):
    lam = 3.0
    ex = toy_values(TOY, REWARD)
    if which == "cdq":
        proc = CDQ(q_table_head(TOY, ex.q), lam)
    else:  # k = V candidates: CD-FUDGE with exact values is the same tilt
        proc = CDFudge(value_table_head(TOY, ex.value), lam, num_candidates=3)
    want = np.exp(np.asarray(toy_tilted_logprob(TOY, ex.q, lam), np.float64))
    s = toy_sample(jax.random.key(7), TOY, NUM_SAMPLES, processor=proc)
    assert chi_square_pvalue(seq_index(s.tokens), want) > 1e-3
    # the tilt moved mass: the sampled mean reward is above the base mean
    assert REWARD[seq_index(s.tokens)].mean() > BASE @ REWARD + 0.02


@pytest.mark.slow
def test_fudge_keeps_base_logits_outside_its_candidates():
    ex = toy_values(TOY, REWARD)
    p = CDFudge(value_table_head(TOY, ex.value), 2.0, num_candidates=1)
    z = TOY.logits[:1]
    out, _ = p((), z, None, hidden=TOY.hidden(jnp.zeros(1, jnp.int32)),
               extend=lambda c: TOY.hidden(TOY.child(jnp.zeros((1, 1), jnp.int32), 0, c)))
    top = int(jnp.argmax(z[0]))
    np.testing.assert_allclose(out[0, top], z[0, top] + 2.0 * ex.value[1 + top], rtol=1e-6)
    others = [i for i in range(3) if i != top]
    np.testing.assert_array_equal(out[0, others], z[0, others])


def test_lambda_zero_is_base_sampling_bit_for_bit():
    ex = toy_values(TOY, REWARD)
    base = toy_sample(jax.random.key(3), TOY, NUM_SAMPLES)
    for proc in (CDQ(q_table_head(TOY, ex.q), 0.0), CDFudge(value_table_head(TOY, ex.value), 0.0, 2)):
        s = toy_sample(jax.random.key(3), TOY, NUM_SAMPLES, processor=proc)
        np.testing.assert_array_equal(s.tokens, base.tokens)
        np.testing.assert_array_equal(s.logprobs, base.logprobs)


def test_tilted_kl_equals_its_closed_form(x64):
    TOY = toy()
    ex = toy_values(TOY, REWARD)
    for lam in (0.5, 4.0):
        pi = np.exp(np.asarray(toy_tilted_logprob(TOY, ex.q, lam)))
        brute = float(np.sum(pi * (np.log(pi) - np.log(BASE))))
        assert float(toy_tilted_kl(TOY, ex.q, lam)) == pytest.approx(brute, rel=1e-10)
    assert abs(float(toy_tilted_kl(TOY, ex.q, 0.0))) < 1e-15


@pytest.mark.slow
def test_sampled_kl_estimate_is_unbiased():
    # the sum over steps of log pi - log p along samples of pi estimates KL(pi || p)
    ex = toy_values(TOY, REWARD)
    s = toy_sample(jax.random.key(2), TOY, NUM_SAMPLES, processor=CDQ(q_table_head(TOY, ex.q), 3.0))
    est = np.asarray(jnp.sum(s.logprobs - s.model_logprobs, axis=1))
    want = float(toy_tilted_kl(TOY, ex.q, 3.0))
    assert abs(est.mean() - want) < 4 * est.std() / np.sqrt(len(est))


def _best_of_k_draws(key, reward, k):
    num = NUM_SAMPLES // k
    s = toy_sample(key, TOY, NUM_SAMPLES)
    idx = seq_index(s.tokens)[:num * k].reshape(num, k)
    pick = select_best(jnp.asarray(reward)[idx])
    return idx[np.arange(num), np.asarray(pick)]


def test_best_of_k_matches_its_law_with_distinct_rewards(x64):
    k = 4
    law = np.asarray(best_of_k_law(np.log(BASE), REWARD, k))
    order = np.argsort(REWARD)
    cdf = np.cumsum(BASE[order])
    want = np.empty(81)
    want[order] = cdf ** k - np.concatenate([[0.0], cdf[:-1]]) ** k  # F(r)^K - F(r-)^K
    np.testing.assert_allclose(law, want, atol=1e-12)
    assert chi_square_pvalue(_best_of_k_draws(jax.random.key(4), REWARD, k), law) > 1e-3
    assert best_of_k_kl(4) == pytest.approx(np.log(4) - 0.75)
    kl = float(np.sum(law * np.log(law / BASE)))
    assert kl <= best_of_k_kl(4) + 1e-12


def test_best_of_k_tie_rule_first_drawn(x64):
    # three reward levels: ties inside a level go to the first draw, so within a level the kept
    # sequence follows p, and the level follows F(r)^K - F(r-)^K
    tied = np.round(REWARD * 2.0) / 2.0
    k = 3
    law = np.asarray(best_of_k_law(np.log(BASE), tied, k))
    assert law.sum() == pytest.approx(1.0, abs=1e-12)
    for level in np.unique(tied):
        sel = tied == level
        f_le, f_lt = BASE[tied <= level].sum(), BASE[tied < level].sum()
        assert law[sel].sum() == pytest.approx(f_le ** k - f_lt ** k, abs=1e-12)
        np.testing.assert_allclose(law[sel] / law[sel].sum(), BASE[sel] / BASE[sel].sum(), atol=1e-12)
    assert chi_square_pvalue(_best_of_k_draws(jax.random.key(6), tied, k), law) > 1e-3
    assert select_best(jnp.array([[2.0, 5.0, 5.0, 1.0]])).tolist() == [1]


def test_combined_scorers_are_the_value_of_the_weighted_reward(x64):
    TOY = toy()
    r2 = np.asarray(jax.random.normal(jax.random.key(9), (81,)), np.float64)
    e1, e2 = toy_values(TOY, REWARD), toy_values(TOY, r2)
    e12 = toy_values(TOY, 0.3 * REWARD + 2.0 * r2)
    c = combine([value_table_head(TOY, e1.value), value_table_head(TOY, e2.value)], [0.3, 2.0])
    np.testing.assert_allclose(c(TOY.hidden(jnp.arange(121))), e12.value, atol=1e-5)
    cq = combine([q_table_head(TOY, e1.q), q_table_head(TOY, e2.q)], [0.3, 2.0])
    np.testing.assert_allclose(cq(TOY.hidden(jnp.arange(40))), e12.q, atol=1e-5)
    np.testing.assert_allclose(cq.at(TOY.hidden(jnp.arange(40)), jnp.full((40, 1), 2)), e12.q[:, 2:], atol=1e-5)


@pytest.mark.slow
def test_toy_sampler_follows_the_base_law():
    s = toy_sample(jax.random.key(8), TOY, NUM_SAMPLES)
    assert chi_square_pvalue(seq_index(s.tokens), BASE) > 1e-3
    np.testing.assert_allclose(jnp.sum(s.model_logprobs, 1), toy_logprob(TOY, s.tokens), atol=1e-5)
    # processors of jaxcore.lm run on the toy too
    t = toy_sample(jax.random.key(8), TOY, 10, processor=lm.TopK(1))
    np.testing.assert_array_equal(t.tokens, np.broadcast_to(t.tokens[:1], t.tokens.shape))
