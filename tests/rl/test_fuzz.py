"""Hypothesis properties of jaxcore.rl's combination locks and planners on tiny fixed sizes.

Every lock has H = 3 levels, A = 4 actions and 2 good states (rich observations d = 8, or tabular
d = 12), so examples share their compiled programs. Oracles: the lock's definition (advance on the
combination, fall to the absorbing bad state otherwise, the goal paid at the last level), the closed
form of a deterministic latent policy's value, ``transition_matrix`` / ``reward_matrix`` as the
support of sampled steps, and Monte Carlo returns of :func:`evaluate`. The ``*_deep`` tests (slow) run
40 examples and add FOOBAR on random seeds, budgets and data coverage.
"""

from __future__ import annotations

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from jaxcore import rl

H, A, G = 3, 4, 2
S = G + 1
seeds = st.integers(0, 2**31 - 1)
anti = st.tuples(st.sampled_from([0.0, 0.1, 0.5]), st.sampled_from([0.0, 0.5, 1.0]))  # anti_reward, anti_prob
_DIALECT = re.compile(r"^(?P<name>[\w.]+): expected ")
STEP = eqx.filter_jit(rl.step)  # as a user runs it (inside jit / scan): one program, not one per primitive


def _lock(seed, tabular, anti_pair, noise=0.1):
    r, p = anti_pair
    return rl.make_lock(jax.random.key(seed), H, A, num_good=G, noise=noise, anti_reward=r, anti_prob=p,
                        tabular=tabular)


def _closed_form_value(lock, table):
    """V_h(s) of the deterministic latent policy ``table`` [H, S] from the lock's definition."""
    adv = np.asarray(lock.advancing)
    pay = float(lock.anti_reward) * float(lock.anti_prob)
    v = np.zeros((H + 1, S))
    for h in reversed(range(H)):
        for s in range(G):
            if table[h, s] == adv[h, s]:
                v[h, s] = 1.0 if h == H - 1 else v[h + 1, :G].mean()
            else:
                v[h, s] = pay
    return v


# --- the environment ----------------------------------------------------------------------------------------


def _check_step(seed, tabular, anti_pair, latent, level, action):
    lock = _lock(seed, tabular, anti_pair, noise=0.0)
    state = rl.LockState(jnp.int32(latent), jnp.int32(level))
    obs, nxt, reward, done, info = STEP(jax.random.key(seed + 1), state, jnp.int32(action), lock)
    adv = int(lock.advancing[min(level, H - 1), min(latent, G - 1)])
    live, good = level < H, latent < G
    advances = live and good and action == adv
    assert obs.shape == (lock.obs_dim,) and np.isfinite(np.asarray(obs)).all()
    assert int(nxt.level) == (level + 1 if live else level) and bool(done) == (int(nxt.level) >= H)
    if advances:
        assert 0 <= int(nxt.latent) < G
    else:
        assert int(nxt.latent) == (G if live else latent)    # a fall, or the absorbing last level
    success = advances and level == H - 1
    assert bool(info["success"]) == success
    r = float(reward)
    if success:
        assert r == 1.0
    elif live and good and not advances:
        assert r in (0.0, float(lock.anti_reward))
        if float(lock.anti_prob) == 0.0:
            assert r == 0.0
        if float(lock.anti_prob) == 1.0:
            assert r == float(lock.anti_reward)
    else:
        assert r == 0.0
    if live:  # the step is in the support of the latent kernel, its expected reward in reward_matrix's
        p = np.asarray(rl.transition_matrix(lock))[level, latent, action]
        assert p[int(nxt.latent)] > 0 and abs(p.sum() - 1) < 1e-6
        er = float(rl.reward_matrix(lock)[level, latent, action])
        assert (r == 0.0) or abs(r - er) < 1e-6 or (r == float(lock.anti_reward) and er > 0)
    # the observation: one-hot (h, s) for a tabular lock; R (e_s + e_{S+h}) without noise for a rich one
    o = np.asarray(obs, np.float64)
    want = np.zeros(lock.obs_dim)
    if tabular:
        want[int(nxt.level) * S + int(nxt.latent)] = 1.0
        np.testing.assert_array_equal(o, want)
    else:
        want[int(nxt.latent)] = want[S + int(nxt.level)] = 1.0
        np.testing.assert_allclose(np.asarray(lock.rotation, np.float64).T @ o, want, atol=1e-5)


state_draws = (st.integers(0, S - 1), st.integers(0, H), st.integers(0, A - 1))


@given(seeds, st.booleans(), anti, *state_draws)
def test_fuzz_step(seed, tabular, anti_pair, latent, level, action):
    _check_step(seed, tabular, anti_pair, latent, level, action)


@pytest.mark.slow
@settings(max_examples=40)
@given(seeds, st.booleans(), anti, *state_draws)
def test_fuzz_step_deep(seed, tabular, anti_pair, latent, level, action):
    _check_step(seed, tabular, anti_pair, latent, level, action)


# --- planning and evaluation ---------------------------------------------------------------------------------

tables = arrays(np.int32, (H, S), elements=st.integers(0, A - 1))


def _tabular_policy(lock, table):
    """A linear policy on one-hot (h, s) observations that plays ``table`` [H, S]."""
    w = np.zeros((H, A, lock.obs_dim), np.float32)
    for h in range(H):
        for s in range(S):
            w[h, table[h, s], h * S + s] = 1.0
    return rl.Policy(jnp.asarray(w), jnp.zeros((H, A)))


def _check_planning(seed, anti_pair, table, monte_carlo=False):
    lock = _lock(seed, True, anti_pair)
    opt = rl.optimal_values(lock)
    np.testing.assert_allclose(float(opt.value), 1.0, rtol=1e-6)             # the goal is reachable from every start
    np.testing.assert_array_equal(np.asarray(opt.policy)[:, :G], np.asarray(lock.advancing))
    got = rl.policy_value(lock, table)
    v = _closed_form_value(lock, table)
    np.testing.assert_allclose(np.asarray(got.values), v, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(got.value), v[0, :G].mean(), rtol=1e-5, atol=1e-6)
    assert (np.asarray(got.values) <= np.asarray(opt.values) + 1e-6).all()
    np.testing.assert_array_equal(np.asarray(got.policy), table)
    # the greedy table of the lock's own optimal policy is optimal; so is evaluating it
    np.testing.assert_array_equal(np.asarray(rl.policy_table(lock, rl.optimal_policy(lock)))[:, :G],
                                  np.asarray(lock.advancing))
    if not monte_carlo:  # the light profile skips evaluate's program (compiled once, seconds)
        return
    # Monte Carlo returns of the policy that plays the table agree with its exact value
    ev = rl.evaluate(jax.random.key(seed), lock, _tabular_policy(lock, table), 512)
    rets = np.asarray(ev.returns)
    assert rets.shape == (512,) and np.isfinite(rets).all() and 0 <= float(ev.success_rate) <= 1
    np.testing.assert_allclose(float(ev.mean_return), rets.mean(), rtol=1e-5)
    assert abs(rets.mean() - v[0, :G].mean()) <= 5 * 0.5 / np.sqrt(512) + 1e-6
    assert float(ev.success_rate) <= (rets >= 1.0 - 1e-6).mean() + 1e-6


@given(seeds, anti, tables)
def test_fuzz_planning(seed, anti_pair, table):
    _check_planning(seed, anti_pair, table)


@pytest.mark.slow
@settings(max_examples=40)
@given(seeds, anti, tables)
def test_fuzz_planning_deep(seed, anti_pair, table):
    _check_planning(seed, anti_pair, table, monte_carlo=True)


# --- refusals -----------------------------------------------------------------------------------------------

LOCK = rl.make_lock(jax.random.key(0), H, A, num_good=G)
POLICY = rl.init_policy(jax.random.key(0), H, A, LOCK.obs_dim)


def _named(fn, name):
    try:
        fn()
    except (TypeError, ValueError) as exc:
        m = _DIALECT.match(str(exc))
        assert m is not None and m.group("name") == name, f"{type(exc).__name__}: {exc}"
        return "refused"
    return "ok"


@given(st.integers(-3, H + 3), st.sampled_from([np.int32, np.int64, np.float32, np.bool_]))
def test_fuzz_policy_level_refusals(level, dtype):
    lv = np.asarray(level).astype(dtype)
    valid = lv.dtype.kind in "iu" and 0 <= int(lv) < H
    got = _named(lambda: rl.policy_logits(POLICY, lv, jnp.ones(LOCK.obs_dim)), "level")
    assert got == ("ok" if valid else "refused")


@given(st.integers(-2, S + 2), st.integers(-2, H + 2), st.sampled_from([np.int32, np.float32]))
def test_fuzz_state_refusals(latent, level, dtype):
    state = rl.LockState(jnp.asarray(latent, dtype), jnp.asarray(level, jnp.int32))
    got = _named(lambda: rl.observe(jax.random.key(0), state, LOCK), "state.latent" if dtype is np.float32
                 or not 0 <= latent < S else "state.level")
    valid = dtype is np.int32 and 0 <= latent < S and 0 <= level <= H
    assert got == ("ok" if valid else "refused")


# --- FOOBAR (deep only: it compiles its whole program; the baselines have their own tests) ------------------


@pytest.mark.slow
@settings(max_examples=40)
@given(seeds, st.integers(1, 16), st.sampled_from([0.0, 0.5, 1.0]))
def test_fuzz_foobar_deep(seed, budget, coverage):
    lock = _lock(seed, False, (0.1, 0.5))
    data = rl.collect_offline(jax.random.key(seed + 1), lock, 16, coverage=coverage)
    res = rl.foobar(jax.random.key(seed + 2), lock, data, num_samples=16, budget=budget, num_updates=5,
                    num_eval_episodes=64)
    for leaf in jax.tree_util.tree_leaves(res):
        a = np.asarray(leaf)
        if a.dtype.kind == "f":
            assert np.isfinite(a).all()
    assert 0.0 <= float(res.success_rate) <= 1.0
    assert int(res.num_online_episodes) == 2 * H * budget              # budget episodes per level, two passes
    table = np.asarray(rl.policy_table(lock, res.policy))
    assert table.shape == (H, S) and ((table >= 0) & (table < A)).all()
    v = float(rl.policy_value(lock, table).value)
    np.testing.assert_allclose(v, _closed_form_value(lock, table)[0, :G].mean(), rtol=1e-5, atol=1e-6)
