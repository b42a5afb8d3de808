"""FOOBAR: tabular FOOBAR reaches the optimum, seeds and budgets share one program, determinism."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.rl import (
    behaviour_cloning,
    collect_offline,
    foobar,
    make_lock,
    online_psdp,
    optimal_values,
    policy_table,
    policy_value,
    reset_psdp,
)

# one small configuration shared by every test (and the doctests): one compiled program per method
KW = dict(num_samples=64, num_eval_episodes=200)


@pytest.fixture(scope="module")
def tabular():
    lock = make_lock(jax.random.key(0), horizon=4, num_actions=4, tabular=True)
    return lock, collect_offline(jax.random.key(1), lock, 256)


@pytest.fixture(scope="module")
def tabular_fit(tabular):
    lock, data = tabular
    return foobar(jax.random.split(jax.random.key(2), 3), lock, data, **KW)


def test_tabular_foobar_reaches_the_optimum(tabular, tabular_fit):
    lock, _ = tabular
    opt = optimal_values(lock)
    for i in range(3):
        pol = jax.tree_util.tree_map(lambda a: a[i], tabular_fit.policy)
        table = policy_table(lock, pol)
        assert float(policy_value(lock, table).value) == float(opt.value) == 1.0  # exact, by DP
        np.testing.assert_array_equal(np.asarray(table[:, :2]), np.asarray(lock.advancing))
    np.testing.assert_array_equal(np.asarray(tabular_fit.success_rate), 1.0)
    np.testing.assert_array_equal(np.asarray(tabular_fit.num_online_episodes), 2 * 4 * 64)
    # forward moment matching: the learned policies close the gap left by the uniform action
    gaps = np.asarray(tabular_fit.moment_gap)
    assert (gaps[..., 1] < 0.5 * gaps[..., 0]).all()  # the rest: the 64-sample split between good states
    assert (np.asarray(tabular_fit.rollin_good) >= 0.8).all()  # soft forward policies from 64 samples
    assert tabular_fit.forward_loss.shape == (3, 4, 200)
    assert (np.asarray(tabular_fit.forward_loss[..., -1]) < np.asarray(tabular_fit.forward_loss[..., 0])).all()


def test_fit_is_deterministic_given_the_key(tabular, tabular_fit):
    lock, data = tabular
    again = foobar(jax.random.split(jax.random.key(2), 3), lock, data, **KW)  # the same compiled program
    for a, b in zip(jax.tree_util.tree_leaves(tabular_fit), jax.tree_util.tree_leaves(again)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.slow
def test_seed_batch_equals_single_runs(tabular, tabular_fit):
    lock, data = tabular
    one = foobar(jax.random.split(jax.random.key(2), 3)[1], lock, data, **KW)
    np.testing.assert_allclose(np.asarray(one.policy.weight), np.asarray(tabular_fit.policy.weight[1]),
                               rtol=1e-5, atol=1e-5)
    again = foobar(jax.random.split(jax.random.key(2), 3)[1], lock, data, **KW)
    np.testing.assert_array_equal(np.asarray(one.policy.weight), np.asarray(again.policy.weight))


def test_budgets_share_one_program(tabular, compiles):
    lock, data = tabular
    keys = jax.random.split(jax.random.key(5), 3)
    foobar(keys, lock, data, budget=8, **KW)
    with compiles() as c:
        small = foobar(keys, lock, data, budget=jnp.int32(2), **KW)
        full = foobar(keys, lock, data, budget=64, **KW)
    assert len(c) == 0
    np.testing.assert_array_equal(np.asarray(small.num_online_episodes), 2 * 4 * 2)
    np.testing.assert_array_equal(np.asarray(full.num_online_episodes), 512)
    assert (np.asarray(small.success_rate) <= np.asarray(full.success_rate)).all()
    np.testing.assert_array_equal(np.asarray(full.success_rate), 1.0)


def test_coverage_knob_limits_what_foobar_can_match():
    lock = make_lock(jax.random.key(0), horizon=4, num_actions=4, tabular=True)
    data = collect_offline(jax.random.key(1), lock, 256, coverage=0.0)  # the data never reaches the goal
    res = foobar(jax.random.split(jax.random.key(2), 3), lock, data, **KW)
    assert (np.asarray(res.success_rate) < 0.5).all()


def test_refusals(tabular):
    lock, data = tabular
    with pytest.raises(TypeError, match="^key: expected"):
        foobar(0, lock, data)
    with pytest.raises(ValueError, match="^policy: expected"):
        foobar(jax.random.key(0), lock, data, policy="cnn")
    with pytest.raises(ValueError, match="^discriminator: expected"):
        foobar(jax.random.key(0), lock, data, discriminator="rbf")
    with pytest.raises(ValueError, match="^budget: expected"):
        foobar(jax.random.key(0), lock, data, num_samples=8, budget=9)
    with pytest.raises(TypeError, match="^budget: expected"):
        foobar(jax.random.key(0), lock, data, budget=2.0)
    with pytest.raises(ValueError, match="^learning_rate: expected"):
        foobar(jax.random.key(0), lock, data, learning_rate=-1.0)
    other = make_lock(jax.random.key(0), horizon=3, num_actions=4, tabular=True)
    with pytest.raises(ValueError, match="^data: expected"):
        foobar(jax.random.key(0), other, data)
    with pytest.raises(TypeError, match="^data: expected"):
        foobar(jax.random.key(0), lock, data.observations)
    with pytest.raises(TypeError, match="^lock: expected"):
        online_psdp(jax.random.key(0), "lock")
    with pytest.raises(ValueError, match="^epsilon: expected"):
        online_psdp(jax.random.key(0), lock, epsilon=2.0)
    with pytest.raises(ValueError, match="^lock: expected"):
        foobar(jax.random.split(jax.random.key(0), 2), jax.vmap(lambda k: make_lock(k, 4, 4, tabular=True))(
            jax.random.split(jax.random.key(0), 3)), data)


@pytest.mark.slow
def test_rich_observation_foobar_beats_online_at_long_horizon():
    lock = make_lock(jax.random.key(0), horizon=15, num_actions=10)
    data = collect_offline(jax.random.key(1), lock, 1024)
    keys = jax.random.split(jax.random.key(2), 2)
    fb = foobar(keys, lock, data, num_samples=512, num_eval_episodes=500)
    on = online_psdp(keys, lock, num_samples=512, num_eval_episodes=500)
    rs = reset_psdp(keys, lock, data, num_samples=512, num_eval_episodes=500)
    bc = behaviour_cloning(keys, lock, data, num_eval_episodes=500)
    np.testing.assert_array_equal(np.asarray(fb.success_rate), 1.0)
    np.testing.assert_array_equal(np.asarray(on.success_rate), 0.0)
    assert (np.asarray(on.mean_return) < 0.1).all()  # online learning collects the anti-shaped reward only
    np.testing.assert_array_equal(np.asarray(rs.success_rate), 1.0)
    np.testing.assert_array_equal(np.asarray(bc.success_rate), 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("policy,discriminator", [
    ("mlp", "linear"),
    pytest.param("linear", "mlp", marks=pytest.mark.xfail(
        reason="the MLP-discriminator game with a linear policy does not converge at these settings (success 0)",
        strict=False)),
    ("mlp", "mlp"),
])
def test_mlp_classes_solve_a_small_lock(policy, discriminator):
    lock = make_lock(jax.random.key(0), horizon=5, num_actions=4)
    data = collect_offline(jax.random.key(1), lock, 512)
    res = foobar(jax.random.key(2), lock, data, num_samples=256, policy=policy, discriminator=discriminator,
                 num_eval_episodes=500)
    assert float(res.success_rate) >= 0.95


@pytest.mark.slow
def test_baselines_on_a_small_lock():
    lock = make_lock(jax.random.key(0), horizon=4, num_actions=4)
    data = collect_offline(jax.random.key(1), lock, 256)
    assert float(reset_psdp(jax.random.key(2), lock, data, **KW).success_rate) == 1.0
    assert float(behaviour_cloning(jax.random.key(2), lock, data, num_eval_episodes=200).success_rate) == 1.0
    on = online_psdp(jax.random.key(2), lock, **KW)
    assert on.q_residual.shape == (2, 4) and int(on.num_online_episodes) == 512
