"""Oracle tests of the combination lock: the kernel against its definition, sampling, observations."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.rl import LockState, hadamard, make_lock, observe, reset, reward_matrix, step, transition_matrix


def _definition(advancing, num_actions, num_good):
    """P[h, s, a, s'] and R[h, s, a] written from the definition, entry by entry."""
    H = advancing.shape[0]
    S = num_good + 1
    P = np.zeros((H, S, num_actions, S))
    R = np.zeros((H, S, num_actions))
    for h, s, a in itertools.product(range(H), range(S), range(num_actions)):
        if s < num_good and a == advancing[h, s]:
            P[h, s, a, :num_good] = 1.0 / num_good
            R[h, s, a] = 1.0 if h == H - 1 else 0.0
        elif s < num_good:
            P[h, s, a, num_good] = 1.0
            R[h, s, a] = 0.5 * 0.1
        else:
            P[h, s, a, num_good] = 1.0
    return P, R


@pytest.mark.parametrize("num_good", [1, 2, 3])
def test_transition_matrix_equals_definition(x64, num_good):
    lock = make_lock(jax.random.key(3), horizon=5, num_actions=4, num_good=num_good)
    P, R = _definition(np.asarray(lock.advancing), 4, num_good)
    np.testing.assert_array_equal(np.asarray(transition_matrix(lock)), P)
    np.testing.assert_array_equal(np.asarray(reward_matrix(lock)), R)


def test_step_samples_the_transition_matrix():
    lock = make_lock(jax.random.key(0), horizon=3, num_actions=3)
    P = np.asarray(transition_matrix(lock))
    n = 4000
    keys = jax.random.split(jax.random.key(1), n)
    grid = np.asarray(list(itertools.product(range(3), range(3), range(3))), np.int32)

    def one(hsa):
        state = LockState(hsa[1], hsa[0])
        return jax.vmap(lambda k: step(k, state, hsa[2], lock))(keys)

    _, nxt, r, done, _ = jax.jit(jax.vmap(one))(jnp.asarray(grid))
    for i, (h, s, a) in enumerate(grid):
        freq = np.bincount(np.asarray(nxt.latent[i]), minlength=3) / n
        np.testing.assert_allclose(freq, P[h, s, a], atol=0.04)
        assert (np.asarray(nxt.level[i]) == h + 1).all()
        assert bool(done[i].all()) == (h == 2)
        if s < 2 and a != int(lock.advancing[h, s]):
            assert abs(float(r[i].mean()) - 0.05) < 0.015  # anti-shaped reward 0.1 with probability 1/2


def test_final_level_pays_goal_and_absorbs():
    lock = make_lock(jax.random.key(0), horizon=2, num_actions=5)
    s = LockState(jnp.int32(1), jnp.int32(1))
    obs, nxt, r, done, info = step(jax.random.key(0), s, lock.advancing[1, 1], lock)
    assert float(r) == 1.0 and bool(done) and bool(info["success"])
    obs2, nxt2, r2, done2, _ = step(jax.random.key(1), nxt, jnp.int32(0), lock)
    assert int(nxt2.level) == 2 and int(nxt2.latent) == int(nxt.latent) and float(r2) == 0.0 and bool(done2)


def test_steps_deterministic_given_key():
    lock = make_lock(jax.random.key(0), horizon=6)
    obs, s = reset(jax.random.key(5), lock)
    out1 = step(jax.random.key(7), s, jnp.int32(3), lock)
    out2 = step(jax.random.key(7), s, jnp.int32(3), lock)
    for a, b in zip(jax.tree_util.tree_leaves(out1), jax.tree_util.tree_leaves(out2)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    o3 = step(jax.random.key(8), s, jnp.int32(3), lock)[0]
    assert not np.allclose(np.asarray(out1[0]), np.asarray(o3))


def test_hadamard_orthonormal_and_observation_decodes():
    for d in (1, 2, 8, 64):
        R = hadamard(d)
        np.testing.assert_allclose(R @ R.T, np.eye(d), atol=1e-12)
    lock = make_lock(jax.random.key(0), horizon=5, noise=0.0)
    x = observe(jax.random.key(1), LockState(jnp.int32(2), jnp.int32(4)), lock)
    z = np.asarray(lock.rotation).T @ np.asarray(x)
    want = np.zeros(lock.obs_dim)
    want[2] = want[3 + 4] = 1.0
    np.testing.assert_allclose(z, want, atol=1e-6)
    noisy = make_lock(jax.random.key(0), horizon=5, noise=0.5)
    zs = jax.vmap(lambda k: noisy.rotation.T @ observe(k, LockState(jnp.int32(0), jnp.int32(0)), noisy))(
        jax.random.split(jax.random.key(2), 4000))
    live = 3 + 5 + 1
    np.testing.assert_allclose(np.asarray(zs[:, :live].std(0)), 0.5, atol=0.03)
    np.testing.assert_allclose(np.asarray(zs[:, live:]), 0.0, atol=1e-5)  # padding carries no noise


def test_rich_observation_equals_its_definition_on_the_same_normals():
    """x = R (e_s + e_{S+h} + noise * eps) in float64 NumPy, eps the observation's own normals (key split as observe)."""
    lock = make_lock(jax.random.key(3), horizon=12, noise=0.3)
    S, live = lock.num_latent, lock.num_latent + 12 + 1
    R = np.asarray(lock.rotation, np.float64)
    for i, (s, h) in enumerate([(0, 0), (1, 5), (2, 12), (2, 0), (0, 11)]):
        key = jax.random.key(10 + i)
        x = np.asarray(observe(key, LockState(jnp.int32(s), jnp.int32(h)), lock), np.float64)
        eps = np.asarray(jax.random.normal(key, (live,), lock.noise.dtype), np.float64)
        z = np.zeros(lock.obs_dim)
        z[s] += 1.0
        z[S + h] += 1.0
        z[:live] += 0.3 * eps
        np.testing.assert_allclose(x, R @ z, rtol=0, atol=2e-6)
    # the vmapped observation (as in a rollout) is the same function
    st = LockState(jnp.array([0, 1, 2], jnp.int32), jnp.array([3, 0, 12], jnp.int32))
    keys = jax.random.split(jax.random.key(4), 3)
    xs = jax.vmap(lambda k, a, b: observe(k, LockState(a, b), lock))(keys, st.latent, st.level)
    for j in range(3):
        one = observe(keys[j], LockState(st.latent[j], st.level[j]), lock)
        np.testing.assert_allclose(np.asarray(xs[j]), np.asarray(one), rtol=0, atol=1e-6)


def test_tabular_observation_one_hot():
    lock = make_lock(jax.random.key(0), horizon=3, num_actions=2, tabular=True)
    xs = [np.asarray(observe(jax.random.key(0), LockState(jnp.int32(s), jnp.int32(h)), lock))
          for h in range(4) for s in range(3)]
    np.testing.assert_array_equal(np.stack(xs), np.eye(12))


def test_vmapped_scan_over_thousands_of_environments():
    lock = make_lock(jax.random.key(0), horizon=20)

    def run(k):
        k0, k = jax.random.split(k)
        obs, s = reset(k0, lock)

        def body(s, kt):
            a = lock.advancing[s.level, jnp.minimum(s.latent, 1)]
            _, s, r, _, _ = step(kt, s, a, lock)
            return s, r

        s, r = jax.lax.scan(body, s, jax.random.split(k, 20))
        return r.sum()

    ret = jax.jit(jax.vmap(run))(jax.random.split(jax.random.key(1), 4096))
    np.testing.assert_array_equal(np.asarray(ret), 1.0)  # the optimal policy always reaches the goal


def test_make_lock_refusals():
    with pytest.raises(TypeError, match="^key: expected"):
        make_lock(0, horizon=3)
    with pytest.raises(ValueError, match="^horizon: expected"):
        make_lock(jax.random.key(0), horizon=0)
    with pytest.raises(ValueError, match="^num_actions: expected"):
        make_lock(jax.random.key(0), horizon=3, num_actions=1)
    with pytest.raises(ValueError, match="^anti_reward: expected"):
        make_lock(jax.random.key(0), horizon=3, anti_reward=1.0)
    with pytest.raises(ValueError, match="^noise: expected"):
        make_lock(jax.random.key(0), horizon=3, noise=float("nan"))
    with pytest.raises(TypeError, match="^horizon: expected"):
        make_lock(jax.random.key(0), horizon=3.0)
    with pytest.raises(ValueError, match="^d: expected a power of two"):
        hadamard(12)
