"""Bad input to jaxcore.decoding gets a clear error in the one dialect naming the argument."""

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
    best_of_k,
    best_of_k_law,
    blockwise_generate,
    brevity,
    combine,
    fit_cdq,
    fit_fudge,
    keyword_ids,
    keyword_reward,
    non_toxicity,
    random_toy_lm,
    rollouts,
    select_best,
    toy_rollouts,
    toy_sample,
    toy_tilted_kl,
    toy_values,
)

TOY = random_toy_lm(jax.random.key(0))
DATA = toy_rollouts(TOY, jnp.linspace(0, 1, 81))
from ._oracle import MODEL


def _raises(exc, name, fn):
    with pytest.raises(exc, match=rf"^{name}: expected "):
        fn()


def test_heads_and_combine_refuse_bad_input():
    _raises(ValueError, "dim", lambda: ValueHead(0))
    _raises(TypeError, "dim", lambda: QHead(2.5, 3))
    _raises(ValueError, "vocab_size", lambda: QHead(4, 0))
    _raises(TypeError, "key", lambda: ValueHead(4, key=0))
    _raises(TypeError, "scorers", lambda: combine([ValueHead(3), QHead(3, 2)], [1.0, 1.0]))
    _raises(ValueError, "weights", lambda: combine([ValueHead(3), ValueHead(3)], [1.0]))
    _raises(ValueError, "weights", lambda: combine([ValueHead(3), ValueHead(3)], [1.0, float("nan")]))
    _raises(ValueError, "scorers", lambda: combine([ValueHead(3), ValueHead(4)], [1.0, 1.0]))
    _raises(ValueError, "scorers", lambda: combine([], []))


def test_processors_refuse_bad_input():
    _raises(TypeError, "scorer", lambda: CDQ(ValueHead(3), 1.0))
    _raises(TypeError, "scorer", lambda: CDFudge(QHead(3, 3), 1.0))
    _raises(ValueError, "strength", lambda: CDQ(QHead(3, 3), -1.0))
    _raises(ValueError, "strength", lambda: CDQ(QHead(3, 3), float("nan")))
    _raises(ValueError, "num_candidates", lambda: CDFudge(ValueHead(3), 1.0, 0))


def test_training_refuses_bad_input():
    k = jax.random.key(1)
    _raises(TypeError, "key", lambda: fit_fudge(0, ValueHead(TOY.num_nodes), DATA, num_steps=2))
    _raises(TypeError, "head", lambda: fit_fudge(k, QHead(TOY.num_nodes, 3), DATA, num_steps=2))
    _raises(TypeError, "head", lambda: fit_cdq(k, ValueHead(TOY.num_nodes), DATA, num_steps=2))
    _raises(TypeError, "data", lambda: fit_cdq(k, QHead(TOY.num_nodes, 3), {"hidden": 1}, num_steps=2))
    _raises(ValueError, "data.hidden", lambda: fit_fudge(k, ValueHead(7), DATA, num_steps=2))
    _raises(ValueError, "num_steps", lambda: fit_fudge(k, ValueHead(TOY.num_nodes), DATA, num_steps=0))
    _raises(ValueError, "learning_rate", lambda: fit_fudge(k, ValueHead(TOY.num_nodes), DATA, num_steps=2,
                                                          learning_rate=-1.0))
    _raises(TypeError, "progress", lambda: fit_fudge(k, ValueHead(TOY.num_nodes), DATA, num_steps=2, progress=3))
    _raises(TypeError, "optimizer", lambda: fit_fudge(k, ValueHead(TOY.num_nodes), DATA, num_steps=2,
                                                      optimizer="adam"))
    _raises(TypeError, "mesh", lambda: fit_fudge(k, ValueHead(TOY.num_nodes), DATA, num_steps=2, mesh="batch"))
    if len(jax.devices()) >= 2:  # tests/conftest.py fakes 4 CPU devices; 81 samples: 2 does not divide them
        on = jax.sharding.Mesh(np.asarray(jax.devices()[:2]), ("batch",))
        with pytest.raises(ValueError, match=r"^mesh: expected a first axis \('batch'\) whose size divides data"):
            fit_cdq(k, QHead(TOY.num_nodes, 3), DATA, num_steps=2, batch_size=10, mesh=on)


def test_toy_functions_refuse_bad_input():
    _raises(ValueError, "vocab_size", lambda: random_toy_lm(jax.random.key(0), 1))
    _raises(TypeError, "key", lambda: random_toy_lm(3))
    _raises(ValueError, "reward", lambda: toy_values(TOY, jnp.ones(80)))
    _raises(TypeError, "toy", lambda: toy_values("toy", jnp.ones(81)))
    _raises(ValueError, "num_samples", lambda: toy_sample(jax.random.key(0), TOY, 0))
    _raises(TypeError, "processor", lambda: toy_sample(jax.random.key(0), TOY, 2, processor=3))
    _raises(ValueError, "strength", lambda: toy_tilted_kl(TOY, jnp.zeros((40, 3)), -1.0))
    _raises(ValueError, "q", lambda: toy_tilted_kl(TOY, jnp.zeros((40, 2)), 1.0))


def test_best_of_k_and_rewards_refuse_bad_input():
    _raises(ValueError, "rewards", lambda: select_best(jnp.array([1.0, jnp.nan])))
    _raises(ValueError, "num_candidates", lambda: best_of_k_law(jnp.zeros(2), jnp.zeros(2), 0))
    _raises(ValueError, "reward", lambda: best_of_k_law(jnp.zeros(2), jnp.zeros(3), 2))
    _raises(TypeError, "tokens", lambda: brevity(jnp.zeros((2, 3)), 0))
    _raises(ValueError, "eos_token_id", lambda: brevity(jnp.zeros((2, 3), jnp.int32), -1))
    _raises(TypeError, "tokens", lambda: keyword_reward(jnp.zeros(3, jnp.int32), jnp.array([1])))
    _raises(TypeError, "words", lambda: keyword_ids(None, "word"))
    _raises(TypeError, "texts", lambda: non_toxicity("text", lambda t: [0.0]))
    _raises(ValueError, r"scorer\(texts\)", lambda: non_toxicity(["a"], lambda t: [1.5]))


def test_lm_entry_points_refuse_bad_input():
    prompt = jnp.array([[1, 2, 3]])
    k = jax.random.key(0)
    z = jnp.zeros((1, 2))
    out = lm.GenerateResult(jnp.array([[4, 5]]), jnp.ones((1, 2), bool), z, z, None)
    _raises(TypeError, "result", lambda: rollouts(MODEL, prompt, None, out.tokens, jnp.zeros(1)))
    _raises(ValueError, "reward", lambda: rollouts(MODEL, prompt, None, out, jnp.zeros(2)))
    _raises(ValueError, "reward", lambda: rollouts(MODEL, prompt, None, out, jnp.array([jnp.inf])))
    _raises(ValueError, "top_k", lambda: rollouts(MODEL, prompt, None, out, jnp.zeros(1), top_k=0))
    _raises(TypeError, "model", lambda: rollouts("m", prompt, None, out, jnp.zeros(1)))
    _raises(TypeError, "prompt_tokens", lambda: rollouts(MODEL, jnp.ones((1, 3)), None, out, jnp.zeros(1)))
    bw = dict(scorer=ValueHead(32), num_candidates=2, block_size=2, max_new_tokens=4)
    _raises(ValueError, "block_size", lambda: blockwise_generate(k, MODEL, prompt, **{**bw, "block_size": 3}))
    _raises(ValueError, "num_candidates", lambda: blockwise_generate(k, MODEL, prompt, **{**bw, "num_candidates": 0}))
    _raises(TypeError, "scorer", lambda: blockwise_generate(k, MODEL, prompt, **{**bw, "scorer": QHead(32, 64)}))
    _raises(ValueError, "scorer", lambda: blockwise_generate(k, MODEL, prompt, **{**bw, "scorer": ValueHead(8)}))
    _raises(ValueError, "prompt_mask", lambda: blockwise_generate(k, MODEL, prompt, np.array([[1, 1, 0]], bool), **bw))
    _raises(TypeError, "key", lambda: blockwise_generate(1, MODEL, prompt, **bw))
    _raises(TypeError, "reward_fn", lambda: best_of_k(k, MODEL, prompt, reward_fn=3, num_candidates=2,
                                                      max_new_tokens=2))
    # rewards of the wrong shape: tests/decoding/test_lm.py::test_best_of_k_keeps_the_highest_reward (slow)


def test_tilted_kl_does_not_cancel_at_large_strength_and_refuses_infinite_values():
    from jaxcore.decoding import tilted_kl

    z = jnp.log(jnp.array([0.5, 0.3, 0.2]))
    q = jnp.array([1.0, 0.0, -1.0])
    zd, qd = np.log([0.5, 0.3, 0.2]), np.array([1.0, 0.0, -1.0])
    for lam in (0.0, 1e-3, 1.0, 30.0, 1e2, 1e6, 1e10):
        w = zd + lam * qd
        lpi = w - (w.max() + np.log(np.exp(w - w.max()).sum()))
        ref = float(np.sum(np.where(np.exp(lpi) > 0, np.exp(lpi) * (lpi - zd), 0.0)))
        assert abs(float(tilted_kl(z, q, lam)) - ref) < 2e-6 * max(1.0, ref), lam
    assert abs(float(tilted_kl(z, q, 1e10)) - np.log(2.0)) < 1e-6  # the limit -log p(argmax q)
    _raises(ValueError, "q", lambda: tilted_kl(z, jnp.array([jnp.inf, 0.0, 0.0]), 1.0))


def test_best_of_k_law_gives_zero_for_zero_mass_and_refuses_unnormalised_input():
    from jaxcore.decoding import best_of_k_law

    got = np.asarray(best_of_k_law(jnp.log(jnp.array([0.5, 0.5, 0.0, 0.0])), jnp.array([0.0, 1.0, 2.0, 2.0]), 2))
    np.testing.assert_allclose(got, [0.25, 0.75, 0.0, 0.0], atol=1e-7)
    _raises(ValueError, "logprob", lambda: best_of_k_law(jnp.zeros(4), jnp.arange(4.0), 2))  # sums to 4
    _raises(ValueError, "logprob", lambda: best_of_k_law(jnp.array([jnp.nan, 0.0]), jnp.arange(2.0), 2))
    _raises(ValueError, "reward", lambda: best_of_k_law(jnp.log(jnp.array([0.5, 0.5])), jnp.array([0.0, jnp.nan]), 2))


def test_toy_logprob_and_qhead_at_refuse_ids_outside_the_vocabulary():
    # issue 48 item 9: toy_logprob wrapped -1 and gave NaN for V; QHead.at with an id >= V gave NaN.
    from jaxcore.decoding import toy_logprob

    good = jnp.array([[0, 1, 2, 2]])
    np.testing.assert_allclose(toy_logprob(TOY, good), jax.jit(lambda t: toy_logprob(TOY, t))(good), rtol=1e-6)
    for bad in (-1, 3):
        _raises(ValueError, "tokens", lambda: toy_logprob(TOY, good.at[0, 3].set(bad)))
    with pytest.raises(Exception, match=r"tokens: expected token ids in \[0, 3\)"):
        jax.block_until_ready(jax.jit(lambda t: toy_logprob(TOY, t))(good.at[0, 3].set(3)))
    head = QHead(4, 3, key=jax.random.key(0))
    h = jnp.ones((2, 4))
    np.testing.assert_allclose(head.at(h, jnp.array([[2], [0]]))[:, 0], head(h)[jnp.arange(2), jnp.array([2, 0])], rtol=1e-6)
    _raises(ValueError, "ids", lambda: head.at(h, jnp.array([[3], [0]])))
    _raises(TypeError, "ids", lambda: head.at(h, jnp.array([[1.0], [0.0]])))
    with pytest.raises(Exception, match=r"ids: expected token ids in \[0, 3\)"):
        jax.block_until_ready(jax.jit(lambda i: head.at(h, i))(jnp.array([[3], [0]])))


def test_cdq_and_rollouts_refuse_a_mismatched_head_and_bad_fields():
    # issue 48 item 15: fit_cdq trained a 5-token head on 3-token data; Rollouts took a reward of the
    # wrong length and a negative weight; cdq_loss with a mismatched head raised inside opt_einsum.
    from jaxcore.decoding import Rollouts, cdq_loss

    assert DATA.vocab_size == 3
    k, d = jax.random.key(0), TOY.num_nodes
    _raises(ValueError, "head", lambda: fit_cdq(k, QHead(d, 5), DATA, num_steps=2))
    _raises(ValueError, "head", lambda: cdq_loss(QHead(d, 2), DATA))
    _raises(ValueError, "data.hidden", lambda: cdq_loss(QHead(d + 1, 3), DATA))
    _raises(TypeError, "head", lambda: cdq_loss(ValueHead(d), DATA))
    unknown = Rollouts(*(getattr(DATA, f) for f in ("hidden", "tokens", "mask", "reward", "next_ids", "next_probs", "weight")))
    _raises(ValueError, "head", lambda: cdq_loss(QHead(d, 2), unknown))  # ids up to 2 need 3 columns
    assert float(cdq_loss(QHead(d, 3), DATA)) == pytest.approx(float(cdq_loss(QHead(d, 3), unknown)))
    fields = dict(hidden=DATA.hidden, tokens=DATA.tokens, mask=DATA.mask, reward=DATA.reward,
                  next_ids=DATA.next_ids, next_probs=DATA.next_probs, weight=DATA.weight)
    _raises(ValueError, "reward", lambda: Rollouts(**{**fields, "reward": DATA.reward[:3]}))
    _raises(ValueError, "reward", lambda: Rollouts(**{**fields, "reward": DATA.reward.at[0].set(jnp.nan)}))
    _raises(ValueError, "weight", lambda: Rollouts(**{**fields, "weight": DATA.weight.at[0].set(-1.0)}))
    _raises(ValueError, "hidden", lambda: Rollouts(**{**fields, "hidden": DATA.hidden[:, 1:]}))
    _raises(ValueError, "tokens", lambda: Rollouts(**fields, vocab_size=2))


def test_toy_values_refuses_a_nan_reward():
    # issue 48 item 16: a NaN reward propagated into every value.
    r = jnp.linspace(0.0, 1.0, 81)
    assert bool(jnp.all(jnp.isfinite(toy_values(TOY, r).q)))
    _raises(ValueError, "reward", lambda: toy_values(TOY, r.at[5].set(jnp.nan)))
    _raises(ValueError, "reward", lambda: toy_rollouts(TOY, r.at[5].set(jnp.inf)))


def test_none_wrong_shapes_and_types_get_the_house_error():
    # issue 48 item 18: raw JAX / AttributeError / IndexError from deep inside.
    from jaxcore.decoding import tilted_kl

    assert select_best(jnp.array([[1.0, 3.0, 3.0]])).tolist() == [1]
    _raises(ValueError, "rewards", lambda: select_best(jnp.float32(1.0)))
    _raises(ValueError, "rewards", lambda: select_best(jnp.zeros((2, 0))))
    _raises(TypeError, "rewards", lambda: select_best(None))
    assert brevity(jnp.array([[5, 0, 0, 0]]), 0).tolist() == [0.5]
    _raises(TypeError, "tokens", lambda: brevity(None, 0))
    assert keyword_reward(jnp.array([[1, 2, 3, 1]]), jnp.array([1])).tolist() == [0.5]
    _raises(TypeError, "tokens", lambda: keyword_reward(None, jnp.array([1])))
    _raises(TypeError, "ids", lambda: keyword_reward(jnp.array([[1, 2]]), None))
    _raises(TypeError, "ids", lambda: keyword_reward(jnp.array([[1, 2]]), jnp.array([1.5])))
    _raises(TypeError, "words", lambda: keyword_ids(None, None))
    _raises(TypeError, "tokenizer", lambda: keyword_ids(None, ["a"]))
    _raises(TypeError, "texts", lambda: non_toxicity(None, None))
    _raises(TypeError, "scorer", lambda: non_toxicity(["a"], None))
    _raises(TypeError, "scorers", lambda: combine(None, [1.0]))
    _raises(TypeError, "scorers", lambda: combine(jnp.float32(1.0), [1.0]))
    _raises(TypeError, "weights", lambda: combine([ValueHead(3)], None))
    assert combine([ValueHead(3)], np.array([2.0]))(jnp.ones(3)).shape == ()
    assert float(tilted_kl(jnp.zeros(2), jnp.array([0.0, 1.0]), 0.0)) == 0.0
    _raises(ValueError, "logits", lambda: tilted_kl(jnp.float32(1.0), jnp.float32(1.0), 1.0))
    _raises(ValueError, "q", lambda: tilted_kl(jnp.zeros(3), jnp.zeros(2), 1.0))
    _raises(TypeError, "logits", lambda: tilted_kl(None, jnp.zeros(2), 1.0))


def test_a_cdq_head_of_another_vocabulary_or_width_is_refused_inside_generate():
    # issue 48 item 18: a CD-Q head of vocabulary 10 on a 64-token model failed inside lm.generate.
    prompt = jnp.array([[1, 2, 3]])
    v, d = MODEL.config.vocab_size, MODEL.config.dim
    out = lm.generate(jax.random.key(0), MODEL, prompt, max_new_tokens=2, processor=CDQ(QHead(d, v), 1.0))
    assert out.tokens.shape == (1, 2)
    with pytest.raises(ValueError, match=f"^scorer: expected a Q head over the model's vocabulary of {v} tokens, "
                                         "got a head over 10 tokens"):
        lm.generate(jax.random.key(0), MODEL, prompt, max_new_tokens=2, processor=CDQ(QHead(d, 10), 1.0))
    with pytest.raises(ValueError, match=f"^hidden: expected hidden states of size {d + 1}"):
        lm.generate(jax.random.key(0), MODEL, prompt, max_new_tokens=2, processor=CDQ(QHead(d + 1, v), 1.0))
    with pytest.raises(ValueError, match=f"^hidden: expected hidden states of size {d + 1}"):
        lm.generate(jax.random.key(0), MODEL, prompt, max_new_tokens=2, processor=CDFudge(ValueHead(d + 1), 1.0, 2))
