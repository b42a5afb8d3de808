"""Bad input to every public entry point of jaxcore.rl is refused in the one dialect, naming the argument."""

import jax
import jax.numpy as jnp
import pytest

from jaxcore import rl
from jaxcore.rl import (
    behaviour_cloning,
    collect_offline,
    evaluate,
    init_policy,
    make_lock,
    optimal_policy,
    policy_table,
    reset_psdp,
)

LOCK = make_lock(jax.random.key(0), horizon=3, num_actions=4)


@pytest.mark.parametrize("call,exc,name", [
    (lambda: evaluate(0, LOCK, init_policy(jax.random.key(0), 3, 4, LOCK.obs_dim)), TypeError, "key"),
    (lambda: evaluate(jax.random.key(0), LOCK, init_policy(jax.random.key(0), 2, 4, LOCK.obs_dim)), ValueError,
     "policy"),
    (lambda: evaluate(jax.random.key(0), LOCK, init_policy(jax.random.key(0), 3, 4, 5)), ValueError, "policy"),
    (lambda: evaluate(jax.random.key(0), LOCK, "policy"), TypeError, "policy"),
    (lambda: evaluate(jax.random.key(0), LOCK, optimal_policy(LOCK), 0), ValueError, "num_episodes"),
    (lambda: evaluate(jax.random.key(0), LOCK, optimal_policy(LOCK), epsilon=1.5), ValueError, "epsilon"),
    (lambda: init_policy(jax.random.key(0), 3, 4, 8, kind="tree"), ValueError, "kind"),
    (lambda: init_policy(jax.random.key(0), 3, 1, 8), ValueError, "num_actions"),
    (lambda: init_policy(jax.random.key(0), 3, 4, 8, scale=-1.0), ValueError, "scale"),
    (lambda: collect_offline(jax.random.key(0), LOCK, 0), ValueError, "num_episodes"),
    (lambda: collect_offline(jax.random.key(0), LOCK, 8, coverage=1.5), ValueError, "coverage"),
    (lambda: collect_offline(jax.random.key(0), LOCK, 8, epsilon=float("nan")), ValueError, "epsilon"),
    (lambda: collect_offline(jax.random.key(0), "lock", 8), TypeError, "lock"),
    (lambda: policy_table(LOCK, None), TypeError, "policy"),
    (lambda: optimal_policy(None), TypeError, "lock"),
    (lambda: reset_psdp(jax.random.key(0), LOCK, None), TypeError, "data"),
    (lambda: behaviour_cloning(jax.random.split(jax.random.key(0), (2, 2)), LOCK, None), TypeError, "key"),
    (lambda: make_lock(jax.random.key(0), 3, dtype=jnp.int32), TypeError, "dtype"),
    (lambda: make_lock(jax.random.key(0), 3, anti_prob=-0.1), ValueError, "anti_prob"),
    (lambda: make_lock(jax.random.key(0), 3, num_good=0), ValueError, "num_good"),
])
def test_refused_in_dialect(call, exc, name):
    with pytest.raises(exc, match=f"^{name}: expected"):
        call()


LT = make_lock(jax.random.key(0), horizon=3, num_actions=4, tabular=True)
POLICY = init_policy(jax.random.key(0), 3, 4, LOCK.obs_dim)


def _state(latent=0, level=0):
    from jaxcore.rl import LockState

    return LockState(jnp.int32(latent), jnp.int32(level))


def _data(**changes):
    from jaxcore.rl import OfflineData

    valid = {"observations": jnp.zeros((4, 8, LOCK.obs_dim)), "latents": jnp.zeros((4, 8), jnp.int32),
             "actions": jnp.zeros((3, 8), jnp.int32)}  # valid shapes and values, no program to compile
    return OfflineData(**{**valid, **changes})


@pytest.mark.parametrize("call,exc,name", [
    (lambda: rl.reset(0, LOCK), TypeError, "key"),
    (lambda: rl.reset(jax.random.key(0), "lock"), TypeError, "lock"),
    (lambda: rl.step(0, _state(), 0, LOCK), TypeError, "key"),
    (lambda: rl.step(jax.random.key(0), _state(), 0, None), TypeError, "lock"),
    (lambda: rl.step(jax.random.key(0), (0, 0), 0, LOCK), TypeError, "state"),
    (lambda: rl.step(jax.random.key(0), _state(), 0.5, LOCK), TypeError, "action"),
    (lambda: rl.step(jax.random.key(0), _state(), True, LOCK), TypeError, "action"),
    (lambda: rl.step(jax.random.key(0), _state(level=4), 0, LOCK), ValueError, "state.level"),
    (lambda: rl.step(jax.random.key(0), _state(latent=-1), 0, LOCK), ValueError, "state.latent"),
    (lambda: rl.observe(0, _state(), LOCK), TypeError, "key"),
    (lambda: rl.observe(jax.random.key(0), _state(latent=3), LOCK), ValueError, "state.latent"),
    (lambda: rl.observe(jax.random.key(0), _state(level=9), LT), ValueError, "state.level"),
    (lambda: rl.observe(jax.random.key(0), rl.LockState(jnp.float32(0), jnp.int32(0)), LOCK), TypeError,
     "state.latent"),
    (lambda: rl.observe(jax.random.key(0), _state(), "lock"), TypeError, "lock"),
    (lambda: rl.transition_matrix("lock"), TypeError, "lock"),
    (lambda: rl.reward_matrix(None), TypeError, "lock"),
    (lambda: rl.optimal_values("lock"), TypeError, "lock"),
    (lambda: rl.policy_value(LOCK, jnp.zeros((3, 3))), TypeError, "actions"),
    (lambda: rl.policy_value(LOCK, jnp.zeros((3, 2), jnp.int32)), ValueError, "actions"),
    (lambda: rl.policy_value(LOCK, jnp.full((3, 3), 4)), ValueError, "actions"),
    (lambda: rl.policy_value(LOCK, jnp.full((3, 3), -1)), ValueError, "actions"),
    (lambda: rl.policy_value(LOCK, [["a"] * 3] * 3), TypeError, "actions"),
    (lambda: rl.make_lock(jax.random.key(0), 3, dtype="foo"), TypeError, "dtype"),
    (lambda: rl.make_lock(jax.random.key(0), 3, noise=1e39), ValueError, "noise"),
    (lambda: rl.make_lock(jax.random.key(0), 3, noise=float("nan")), ValueError, "noise"),
    (lambda: rl.make_lock(jax.random.key(0), 3.0), TypeError, "horizon"),
    (lambda: rl.make_lock(jax.random.key(0), 3, anti_reward=1.0), ValueError, "anti_reward"),
    (lambda: rl.make_lock(jax.random.key(0), 3, tabular="yes"), TypeError, "tabular"),
    (lambda: rl.hadamard(3), ValueError, "d"),
    (lambda: rl.hadamard(4.0), TypeError, "d"),
    (lambda: init_policy(jax.random.key(0), 3, 4, 8, dtype=jnp.int32), TypeError, "dtype"),
    (lambda: init_policy(jax.random.key(0), 3, 4, 8, dtype="foo"), TypeError, "dtype"),
    (lambda: init_policy(0, 3, 4, 8), TypeError, "key"),
    (lambda: init_policy(jax.random.key(0), 3, 4, 0), ValueError, "obs_dim"),
    (lambda: init_policy(jax.random.key(0), 3, 4, 8, kind="mlp", hidden=0), ValueError, "hidden"),
    (lambda: rl.policy_logits(POLICY, 3, jnp.ones(LOCK.obs_dim)), ValueError, "level"),
    (lambda: rl.policy_logits(POLICY, -1, jnp.ones(LOCK.obs_dim)), ValueError, "level"),
    (lambda: rl.policy_logits(POLICY, jnp.int32(7), jnp.ones(LOCK.obs_dim)), ValueError, "level"),
    (lambda: rl.policy_logits(POLICY, 0.5, jnp.ones(LOCK.obs_dim)), TypeError, "level"),
    (lambda: rl.policy_logits(POLICY, 0, jnp.ones(3)), ValueError, "obs"),
    (lambda: rl.policy_logits(POLICY, 0, jnp.full(LOCK.obs_dim, jnp.nan)), ValueError, "obs"),
    (lambda: rl.policy_logits("policy", 0, jnp.ones(LOCK.obs_dim)), TypeError, "policy"),
    (lambda: rl.policy_logits(rl.Policy(POLICY.weight, POLICY.bias.at[0, 0].set(jnp.inf)), 0,
                              jnp.ones(LOCK.obs_dim)), ValueError, "policy.bias"),
    (lambda: evaluate(jax.random.key(0), LOCK, rl.Policy(jnp.full_like(POLICY.weight, jnp.nan), POLICY.bias)),
     ValueError, "policy.weight"),
    (lambda: evaluate(jax.random.key(0), LOCK, POLICY, greedy="yes"), TypeError, "greedy"),
    (lambda: policy_table(LOCK, rl.Policy(jnp.full_like(POLICY.weight, jnp.nan), POLICY.bias)), ValueError,
     "policy.weight"),
    (lambda: collect_offline(jax.random.key(0), LOCK, 8.0), TypeError, "num_episodes"),
    (lambda: collect_offline(jax.random.key(0), LOCK, 8, policy=init_policy(jax.random.key(0), 2, 4, 8)),
     ValueError, "policy"),
])
def test_env_planning_and_policy_refusals(call, exc, name):
    with pytest.raises(exc, match=f"^{name}: expected"):
        call()


KW = dict(num_samples=8, num_updates=2, num_eval_episodes=0)


@pytest.mark.parametrize("call,exc,name", [
    (lambda: rl.foobar(0, LOCK, _data(), **KW), TypeError, "key"),
    (lambda: rl.foobar(jax.random.key(0), LOCK, "data", **KW), TypeError, "data"),
    (lambda: rl.foobar(jax.random.key(0), LOCK, _data(observations=jnp.zeros((3, 8, 8))), **KW), ValueError, "data"),
    (lambda: rl.foobar(jax.random.key(0), LOCK, _data(observations=jnp.full((4, 8, 8), jnp.nan)), **KW), ValueError,
     "data.observations"),
    (lambda: rl.foobar(jax.random.key(0), LOCK, _data(observations=jnp.ones((4, 8, 8), jnp.int32)), **KW),
     TypeError, "data.observations"),
    (lambda: rl.foobar(jax.random.key(0), LOCK, _data(), budget=0, **KW), ValueError, "budget"),
    (lambda: rl.foobar(jax.random.key(0), LOCK, _data(), budget=9, **KW), ValueError, "budget"),
    (lambda: rl.foobar(jax.random.key(0), LOCK, _data(), budget=2.0, **KW), TypeError, "budget"),
    (lambda: rl.foobar(jax.random.key(0), LOCK, _data(), learning_rate=0.0, **KW), ValueError, "learning_rate"),
    (lambda: rl.foobar(jax.random.key(0), LOCK, _data(), learning_rate=float("inf"), **KW), ValueError,
     "learning_rate"),
    (lambda: rl.foobar(jax.random.key(0), LOCK, _data(), ridge=-1.0, **KW), ValueError, "ridge"),
    (lambda: rl.foobar(jax.random.key(0), LOCK, _data(), disc_reg=0.0, **KW), ValueError, "disc_reg"),
    (lambda: rl.foobar(jax.random.key(0), LOCK, _data(), discriminator="svm", **KW), ValueError, "discriminator"),
    (lambda: rl.foobar(jax.random.key(0), LOCK, _data(), progress="yes", **KW), TypeError, "progress"),
    (lambda: rl.foobar(jax.random.split(jax.random.key(0), (2, 2)), LOCK, _data(), **KW), TypeError, "key"),
    (lambda: rl.foobar(jax.random.key(0), LOCK, _data(), num_samples=0, num_updates=2), ValueError, "num_samples"),
    (lambda: rl.online_psdp(jax.random.key(0), LOCK, num_iterations=0, **KW), ValueError, "num_iterations"),
    (lambda: rl.online_psdp(jax.random.key(0), LOCK, epsilon=2.0, **KW), ValueError, "epsilon"),
    (lambda: rl.online_psdp(1, LOCK, **KW), TypeError, "key"),
    (lambda: rl.online_psdp(jax.random.key(0), "lock", **KW), TypeError, "lock"),
    (lambda: reset_psdp(jax.random.key(0), LOCK, _data(latents=jnp.full((4, 8), 99, jnp.int32)), **KW), ValueError,
     "data.latents"),
    (lambda: reset_psdp(jax.random.key(0), LOCK, _data(latents=jnp.zeros((4, 8))), **KW), TypeError, "data.latents"),
    (lambda: reset_psdp(jax.random.key(0), LOCK, _data(observations=jnp.full((4, 8, 8), jnp.inf)), **KW),
     ValueError, "data.observations"),
    (lambda: behaviour_cloning(jax.random.key(0), LOCK, _data(actions=jnp.full((3, 8), 4, jnp.int32)),
                               num_updates=2, num_eval_episodes=0), ValueError, "data.actions"),
    (lambda: behaviour_cloning(jax.random.key(0), LOCK, _data(actions=-jnp.ones((3, 8), jnp.int32)),
                               num_updates=2, num_eval_episodes=0), ValueError, "data.actions"),
    (lambda: behaviour_cloning(jax.random.key(0), LOCK, _data(observations=jnp.full((4, 8, 8), jnp.nan)),
                               num_updates=2, num_eval_episodes=0), ValueError, "data.observations"),
])
def test_learner_refusals_come_before_any_training(call, exc, name):
    with pytest.raises(exc, match=f"^{name}: expected"):
        call()


def test_foobar_ignores_latents_and_actions_it_does_not_read():
    from jaxcore.rl import foobar

    d = _data(latents=jnp.full((4, 8), 99, jnp.int32), actions=jnp.full((3, 8), -5, jnp.int32))
    with pytest.raises(ValueError, match="^budget: expected"):  # data passed; the next check refuses
        foobar(jax.random.key(0), LOCK, d, budget=0, **KW)


def test_step_refuses_actions_outside_the_range_eagerly_and_under_jit():
    for bad in (4, -1):
        with pytest.raises(ValueError, match=rf"action: expected an action in \[0, 4\), got {bad}"):
            rl.step(jax.random.key(0), _state(), bad, LOCK)
    with pytest.raises(ValueError, match="action: expected a scalar action"):
        rl.step(jax.random.key(0), _state(), jnp.array([0, 1]), LOCK)
    f = jax.jit(lambda a: rl.step(jax.random.key(0), _state(), a, LOCK)[2])
    assert float(f(jnp.int32(LOCK.advancing[0, 0]))) >= 0.0
    with pytest.raises(Exception, match=r"action: expected an action in \[0, 4\)"):
        jax.block_until_ready(f(jnp.int32(99)))
    g = jax.jit(lambda a: rl.step(jax.random.key(0), _state(), a, LOCK, check_action=False)[1].level)
    assert int(g(jnp.int32(99))) == 1  # switched off: an out-of-range action is a wrong action, as documented


def test_policy_and_offline_data_built_directly_refuse_none_fields():
    # issue 48 item 18: Policy(None, None) and OfflineData(None, None, None) were accepted and failed later.
    with pytest.raises(TypeError, match="^weight: expected an array, got NoneType"):
        rl.Policy(None, None)
    with pytest.raises(TypeError, match="^hidden_bias: expected an array, got str"):
        rl.Policy(jnp.zeros((2, 3, 4)), jnp.zeros((2, 3)), jnp.zeros((2, 5, 4)), "b")
    with pytest.raises(TypeError, match="^observations: expected an array, got NoneType"):
        rl.OfflineData(None, None, None)
    p = rl.Policy(jnp.zeros((2, 3, 4)), jnp.zeros((2, 3)))
    assert p.kind == "linear" and rl.policy_logits(p, 0, jnp.ones(4)).tolist() == [0.0, 0.0, 0.0]


def test_policy_logits_refuses_an_out_of_range_level_under_jit():
    # issue 48 item 6: policy_logits(policy, level=10) under jit returned the last level's scores.
    p = rl.init_policy(jax.random.key(0), 3, 4, 8, scale=1.0)
    obs = jnp.ones(8)
    f = jax.jit(lambda lv: rl.policy_logits(p, lv, obs))
    for lv in range(3):
        assert jnp.allclose(f(lv), rl.policy_logits(p, lv, obs))
    for bad in (10, -1):
        with pytest.raises(Exception, match=r"level: expected an int in \[0, 2\]"):
            jax.block_until_ready(f(bad))
    g = jax.jit(lambda lv: rl.policy_logits(p, lv, obs, check_level=False))
    assert jnp.allclose(g(10), rl.policy_logits(p, 2, obs))  # switched off: documented clamp to the last level
