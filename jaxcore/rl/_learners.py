"""Shared pieces of FOOBAR and its baselines: trace collection, per-level fits, seed batching."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxcore._util import check_choice, check_finite, check_int, check_key, check_scalar, expected, \
    is_concrete

from .data import OfflineData
from .lock import CombinationLock, LockState, observe, reset
from .policies import POLICY_KINDS, Policy, _init, _scores, choose, draws, env_step, step_keys

DISCRIMINATOR_KINDS = ("linear", "mlp")


class Cfg(NamedTuple):
    """Static hyperparameters shared by the fits (hashable: part of the compiled program's key)."""

    num_samples: int
    policy: str = "linear"
    discriminator: str = "linear"
    hidden: int = 32
    num_updates: int = 100
    learning_rate: float = 0.1
    ridge: float = 1e-3
    disc_reg: float = 1.0
    num_iterations: int = 2
    epsilon: float = 0.1
    num_eval_episodes: int = 1000


def level_set(policy: Policy, h, p: Policy) -> Policy:
    """``policy`` with level h replaced by the one-level parameters ``p``."""
    return jax.tree_util.tree_map(lambda a, b: a.at[h].set(b), policy, p)


def level_get(policy: Policy, h) -> Policy:
    return jax.tree_util.tree_map(lambda a: a[h], policy)


def empty_policy(key, lock: CombinationLock, cfg: Cfg, kind: str) -> Policy:
    return _init(key, lock.horizon, lock.num_actions, lock.obs_dim, kind, cfg.hidden, 0.0, lock.noise.dtype)


# ------------------------------------------------------------------------------------- traces


class Traces(NamedTuple):
    obs: Any        # [N, d] observation at level h
    action: Any     # [N] action taken at level h (uniform)
    next_obs: Any   # [N, d] observation at level h + 1
    ret: Any        # [N] return from level h on (rewards of levels h, ..., H-1 along the trace)
    good: Any       # [N] bool, latent state at h is good (diagnostic only; never used by a learner)


def traces(key, lock: CombinationLock, num: int, h, rollin: Policy | None, rollin_greedy: bool, rollin_eps,
           rollout: Policy | None, start_latents=None) -> Traces:
    """``num`` episodes: roll in with ``rollin`` to level h (or reset to ``start_latents`` at level h: the
    reset model), a uniform action at h, then roll out greedily with ``rollout`` to the end (or stop at h + 1
    when ``rollout`` is None). ``rollin`` None means uniform roll-in actions."""
    end = lock.horizon if rollout is not None else h + 1
    a_count = lock.num_actions

    def episode(k, s0):
        k0, k_u, k = jax.random.split(k, 3)
        if start_latents is None:
            obs, state = reset(k0, lock)
            lo = 0
        else:
            state = LockState(s0.astype(jnp.int32), jnp.asarray(h, jnp.int32))
            obs = observe(k0, state, lock)
            lo = h
        a_u = jax.random.randint(k_u, (), 0, a_count, dtype=jnp.int32)
        keys = step_keys(k, lock.horizon)
        z_obs = jnp.zeros_like(obs)
        init = (obs, state, jnp.zeros((), obs.dtype), z_obs, z_obs, jnp.zeros((), bool))

        def body(t, carry):
            obs, state, ret, o_h, o_n, good = carry
            u, eps = draws(keys[t], lock)
            if rollin is None:
                a_in = jnp.minimum((u[3] * a_count).astype(jnp.int32), a_count - 1)
            else:
                a_in = choose(u, _scores(level_get(rollin, t), obs), rollin_greedy, rollin_eps, a_count)
            if rollout is None:
                a_out = a_u
            else:
                a_out = jnp.argmax(_scores(level_get(rollout, jnp.minimum(t, lock.horizon - 1)), obs)).astype(jnp.int32)
            a = jnp.where(t < h, a_in, jnp.where(t == h, a_u, a_out))
            o2, nxt, r, _ = env_step(u, eps, state, a, lock)
            at_h = t == h
            o_h = jnp.where(at_h, obs, o_h)
            o_n = jnp.where(at_h, o2, o_n)
            good = jnp.where(at_h, state.latent < lock.num_good, good)
            ret = ret + jnp.where(t >= h, r, 0)
            return (o2, nxt, ret, o_h, o_n, good)

        _, _, ret, o_h, o_n, good = jax.lax.fori_loop(lo, end, body, init)
        return o_h, o_n, ret, good, a_u

    keys = jax.random.split(key, num)
    s0 = jnp.zeros((num,), jnp.int32) if start_latents is None else start_latents
    o_h, o_n, ret, good, a = jax.vmap(episode)(keys, s0)
    return Traces(o_h, a, o_n, ret, good)


# ------------------------------------------------------------------------------------- fits


def fit_q_linear(x, a, g, w, num_actions: int, ridge: float):
    """Per-action weighted ridge regression of returns on [x, 1]: one linear Q-head per action."""
    n, d = x.shape
    xb = jnp.concatenate([x, jnp.ones((n, 1), x.dtype)], axis=1)
    m = jax.nn.one_hot(a, num_actions, dtype=x.dtype) * w[:, None]  # [N, A]
    gram = jnp.einsum("na,ni,nj->aij", m, xb, xb) + ridge * jnp.eye(d + 1, dtype=x.dtype)
    rhs = jnp.einsum("na,ni,n->ai", m, xb, g)
    theta = jnp.linalg.solve(gram, rhs[..., None])[..., 0]  # [A, d + 1]
    pred = jnp.sum(xb * theta[a], axis=1)
    resid = jnp.sqrt(jnp.sum(w * (pred - g) ** 2) / jnp.maximum(jnp.sum(w), 1))
    return Policy(theta[:, :d], theta[:, d]), resid


def _adam_fit(loss, params, steps: int, lr: float):
    opt = optax.adam(lr)

    def body(carry, _):
        p, s = carry
        val, grad = jax.value_and_grad(loss)(p)
        upd, s = opt.update(grad, s, p)
        return (optax.apply_updates(p, upd), s), val

    (params, _), hist = jax.lax.scan(body, (params, opt.init(params)), None, length=steps)
    return params, hist


def fit_q_mlp(key, x, a, g, w, num_actions, cfg: Cfg):
    """Weighted least squares of returns on the chosen action's output of a one-hidden-layer MLP (adam)."""
    p0 = _init(key, 1, num_actions, x.shape[1], "mlp", cfg.hidden, 0.0, x.dtype)
    p0 = level_get(p0, 0)
    wsum = jnp.maximum(jnp.sum(w), 1)

    def loss(p):
        q = jnp.take_along_axis(_scores(p, x), a[:, None], axis=1)[:, 0]
        return jnp.sum(w * (q - g) ** 2) / wsum

    p, hist = _adam_fit(loss, p0, cfg.num_updates, cfg.learning_rate * 0.1)
    return p, jnp.sqrt(hist[-1])


def fit_q(key, x, a, g, w, num_actions, cfg: Cfg, kind: str):
    if kind == "linear":
        return fit_q_linear(x, a, g, w, num_actions, cfg.ridge)
    return fit_q_mlp(key, x, a, g, w, num_actions, cfg)


def fit_classifier(key, x, a, w, num_actions, cfg: Cfg, kind: str):
    """Softmax classification of actions from observations (behaviour cloning), adam on cross-entropy."""
    p0 = level_get(_init(key, 1, num_actions, x.shape[1], kind, cfg.hidden, 0.0, x.dtype), 0)
    wsum = jnp.maximum(jnp.sum(w), 1)

    def loss(p):
        logp = jax.nn.log_softmax(_scores(p, x))
        return -jnp.sum(w * jnp.take_along_axis(logp, a[:, None], axis=1)[:, 0]) / wsum

    return _adam_fit(loss, p0, cfg.num_updates, cfg.learning_rate)


# ------------------------------------------------------------------------------------- boundary


def check_common(key, lock, cfg_kwargs: dict) -> tuple[jax.Array, bool]:
    """Validate the key (one key or a batch [S] of seeds) and the lock; returns (keys [S], batched)."""
    check_key(key, batch=True)
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    nd = key.ndim if typed else key.ndim - 1
    if nd > 1:
        raise TypeError(expected("key", "one jax.random.key(...) or a 1-d batch of seeds",
                                 f"keys of shape {tuple(key.shape)}", raw=True))
    if not isinstance(lock, CombinationLock):
        raise TypeError(expected("lock", "a CombinationLock (make_lock)", type(lock).__name__, raw=True))
    batched = nd == 1
    return (key if batched else key[None]), batched


def lock_batched(lock: CombinationLock, num_seeds: int) -> bool:
    """Whether ``lock`` carries a leading seed axis (one lock per seed, ``jax.vmap(make_lock)``-style)."""
    if lock.advancing.ndim == 2:
        return False
    if lock.advancing.ndim == 3 and lock.advancing.shape[0] == num_seeds:
        return True
    raise ValueError(expected("lock", f"one lock or a batch of {num_seeds} locks (one per seed)",
                              f"advancing of shape {tuple(lock.advancing.shape)}", raw=True))


def check_data_values(data: OfflineData, lock: CombinationLock, fields: tuple[str, ...]) -> None:
    """The fields a learner reads: float finite observations, latents in [0, S), actions in [0, A) (concrete)."""
    obs = data.observations
    if not jnp.issubdtype(obs.dtype, jnp.floating):  # integer observations gave NaN fits
        raise TypeError(expected("data.observations", "a float array", f"dtype {obs.dtype}", raw=True))
    check_finite(obs, "data.observations")
    for name, top in (("latents", lock.num_latent), ("actions", lock.num_actions)):
        if name not in fields:
            continue
        x = getattr(data, name)
        if not jnp.issubdtype(jnp.result_type(x), jnp.integer):
            raise TypeError(expected(f"data.{name}", "an integer array", f"dtype {jnp.result_type(x)}", raw=True))
        if is_concrete(x):
            a = np.asarray(x)
            if a.size and (a.min() < 0 or a.max() >= top):
                raise ValueError(expected(f"data.{name}", f"values in [0, {top - 1}]",
                                          int(a.min() if a.min() < 0 else a.max())))


def data_batched(data: OfflineData, lock: CombinationLock, num_seeds: int, lb: bool,
                 fields: tuple[str, ...] = ("observations",)) -> bool:
    if not isinstance(data, OfflineData):
        raise TypeError(expected("data", "an OfflineData (collect_offline)", type(data).__name__, raw=True))
    check_data_values(data, lock, fields)
    shape = data.observations.shape
    want = (lock.horizon + 1, lock.obs_dim)
    if len(shape) == 3 and (shape[0], shape[2]) == want:
        return False
    if len(shape) == 4 and shape[0] == num_seeds and (shape[1], shape[3]) == want:
        return True
    raise ValueError(expected("data", f"observations [H + 1 = {want[0]}, N, d = {want[1]}] (or with a leading "
                                      f"seed axis of {num_seeds})", f"shape {shape}", raw=True))


def check_cfg(num_samples, policy, discriminator, hidden, num_updates, learning_rate, ridge, num_eval_episodes,
              **extra) -> Cfg:
    kw = dict(
        num_samples=check_int(num_samples, "num_samples", minimum=1),
        policy=check_choice(policy, "policy", POLICY_KINDS),
        discriminator=check_choice(discriminator, "discriminator", DISCRIMINATOR_KINDS),
        hidden=check_int(hidden, "hidden", minimum=1),
        num_updates=check_int(num_updates, "num_updates", minimum=1),
        learning_rate=check_scalar(learning_rate, "learning_rate", positive=True),
        ridge=check_scalar(ridge, "ridge", positive=True),
        num_eval_episodes=check_int(num_eval_episodes, "num_eval_episodes", minimum=0),
    )
    if "num_iterations" in extra:
        kw["num_iterations"] = check_int(extra["num_iterations"], "num_iterations", minimum=1)
    if "epsilon" in extra:
        kw["epsilon"] = check_scalar(extra["epsilon"], "epsilon", low=0.0, high=1.0)
    if "disc_reg" in extra:
        kw["disc_reg"] = check_scalar(extra["disc_reg"], "disc_reg", positive=True)
    return Cfg(**kw)


def check_budget(budget, num_samples: int):
    """``budget``: episodes per level actually used (<= num_samples); None means all. Traced ints allowed."""
    if budget is None:
        return jnp.asarray(num_samples, jnp.int32)
    if isinstance(budget, jax.core.Tracer):
        return budget.astype(jnp.int32)
    b = jnp.asarray(budget)
    if b.ndim != 0 or not jnp.issubdtype(b.dtype, jnp.integer):
        raise TypeError(expected("budget", "an integer scalar", f"{b.dtype} array of shape {b.shape}", raw=True))
    check_int(int(b), "budget", minimum=1, maximum=num_samples)
    return b.astype(jnp.int32)


def unbatch(result, batched: bool):
    return result if batched else jax.tree_util.tree_map(lambda a: a[0], result)
