"""Tabular dynamic programming: exact optimal values, brute force over policies, Monte Carlo agreement."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.rl import Policy, evaluate, make_lock, optimal_values, policy_value


@pytest.mark.parametrize("horizon,num_actions", [(1, 2), (3, 4), (7, 10)])
def test_optimal_value_is_one(x64, horizon, num_actions):
    lock = make_lock(jax.random.key(horizon), horizon=horizon, num_actions=num_actions)
    res = optimal_values(lock)
    assert float(res.value) == 1.0
    np.testing.assert_array_equal(np.asarray(res.policy[:, :2]), np.asarray(lock.advancing))
    np.testing.assert_array_equal(np.asarray(res.values[:-1, :2]), 1.0)
    np.testing.assert_array_equal(np.asarray(res.values[:, 2]), 0.0)  # the dead state is worth nothing


def test_dp_equals_brute_force_over_all_policies(x64):
    lock = make_lock(jax.random.key(4), horizon=2, num_actions=2)
    tables = jnp.asarray(list(itertools.product(range(2), repeat=2 * 3)), jnp.int32).reshape(-1, 2, 3)
    values = np.asarray(jax.jit(jax.vmap(lambda t: policy_value(lock, t).value))(tables))
    assert values.max() == float(optimal_values(lock).value) == 1.0
    # a policy that falls (at once or later) earns the anti-shaped reward only: 0.1 with probability 1/2
    assert values.min() == pytest.approx(0.05, abs=1e-12)


def _table_policy(lock, table):
    """A linear policy on tabular observations that plays ``table[h, s]`` (scores 1 on that action)."""
    H, S, A = lock.horizon, lock.num_latent, lock.num_actions
    w = np.zeros((H, A, lock.obs_dim), np.float32)
    for h, s in itertools.product(range(H), range(S)):
        w[h, table[h, s], h * S + s] = 1.0
    return Policy(jnp.asarray(w), jnp.zeros((H, A), jnp.float32))


def test_policy_value_agrees_with_monte_carlo():
    lock = make_lock(jax.random.key(1), horizon=3, num_actions=3, tabular=True)
    rng = np.random.default_rng(0)
    table = np.asarray(lock.advancing)
    table = np.concatenate([table, np.zeros((3, 1), int)], axis=1)
    table[1, 0] = (table[1, 0] + 1) % 3  # a policy that fails from good state 0 at level 1
    exact = float(policy_value(lock, jnp.asarray(table, jnp.int32)).value)
    mc = evaluate(jax.random.key(2), lock, _table_policy(lock, table), 20000)
    assert abs(float(mc.mean_return) - exact) < 0.01
    assert exact == pytest.approx(0.5 + 0.5 * 0.05, abs=1e-6)  # in state 0 at h = 1 w.p. 1/2: fall, else the goal
    del rng


def test_policy_value_refusals():
    lock = make_lock(jax.random.key(0), horizon=2, num_actions=2)
    with pytest.raises(ValueError, match="^actions: expected"):
        policy_value(lock, jnp.zeros((3, 3), jnp.int32))
    with pytest.raises(ValueError, match="^actions: expected"):
        policy_value(lock, jnp.full((2, 3), 2, jnp.int32))
    with pytest.raises(TypeError, match="^actions: expected"):
        policy_value(lock, jnp.zeros((2, 3)))
    with pytest.raises(TypeError, match="^lock: expected"):
        optimal_values("lock")
