"""Baselines of FOOBAR: online-only PSDP, PSDP with a reset model, and behaviour cloning with actions.

- :func:`online_psdp`: online RL alone, with the same budget. ``num_iterations`` rounds of PSDP
  (backward over the levels, per-action return regression, greedy policies); the roll-in policy
  of a round is the previous round's policy, epsilon-greedy (uniform in the first round). Without
  offline data, the roll-ins reach the deep good states of a lock with probability about A^-h.
- :func:`reset_psdp`: the reset-model algorithm that FOOBAR's trace-model guarantee matches: PSDP
  whose level-h episodes start from a latent state of the offline data at level h (the simulator is
  reset to it), then a uniform action and the greedy roll-out. H budget episodes in all.
- :func:`behaviour_cloning`: per-level softmax classification of the offline *actions* (information
  the observation-only setting does not have): an upper reference that uses no online episode.

References:
    Y. Song, J. A. Bagnell, A. Singh. "Hybrid Reinforcement Learning from Offline Observation
    Alone." ICML 2024 (reset model vs trace model, Sections 3-4; baselines of Section 6).
    J. A. Bagnell, S. Kakade, A. Ng, J. Schneider. "Policy Search by Dynamic Programming."
    NeurIPS 2003.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

from ._learners import (
    Cfg,
    check_budget,
    check_cfg,
    check_common,
    data_batched,
    empty_policy,
    fit_classifier,
    fit_q,
    level_set,
    lock_batched,
    traces,
    unbatch,
)
from .data import OfflineData
from .lock import CombinationLock
from .policies import Policy, _evaluate

__all__ = ["BCResult", "PSDPResult", "behaviour_cloning", "online_psdp", "reset_psdp"]


class PSDPResult(NamedTuple):
    """Result of :func:`online_psdp` / :func:`reset_psdp` (leading seed axis for a batch of keys).

    Attributes:
        policy: :class:`jaxcore.rl.Policy`, greedy in its scores (per-level return regressions).
        q_residual: ``[num_iterations, H]`` RMS residual of the return regressions (history).
        rollin_good: ``[num_iterations, H]`` fraction of level-h starts in a good latent state
            (diagnostic from the simulator).
        num_online_episodes: int scalar, online episodes used.
        success_rate: scalar, goal rate of the greedy policy over ``num_eval_episodes`` (NaN if 0).
        mean_return: scalar, its average return.

    Examples:
        >>> PSDPResult._fields[:2]
        ('policy', 'q_residual')
    """

    policy: Policy
    q_residual: Float[Array, "I H"]
    rollin_good: Float[Array, "I H"]
    num_online_episodes: Int[Array, ""]
    success_rate: Float[Array, ""]
    mean_return: Float[Array, ""]


class BCResult(NamedTuple):
    """Result of :func:`behaviour_cloning`.

    Attributes:
        policy: :class:`jaxcore.rl.Policy`, softmax classifiers (act greedily).
        loss: ``[H, num_updates]`` cross-entropy per level and update (history).
        success_rate: scalar, goal rate of the greedy policy (NaN if ``num_eval_episodes`` is 0).
        mean_return: scalar.

    Examples:
        >>> BCResult._fields
        ('policy', 'loss', 'success_rate', 'mean_return')
    """

    policy: Policy
    loss: Float[Array, "H U"]
    success_rate: Float[Array, ""]
    mean_return: Float[Array, ""]


def _eval(key, lock, policy, cfg):
    if cfg.num_eval_episodes > 0:
        ev = _evaluate(key, lock, policy, cfg.num_eval_episodes, True, jnp.zeros((), lock.noise.dtype))
        return ev.success_rate, ev.mean_return
    nan = jnp.full((), jnp.nan, lock.noise.dtype)
    return nan, nan


def _psdp_round(key, lock, cfg, valid, pb_init, rollin, rollin_eps, start_latents_fn):
    n = cfg.num_samples

    def backward(pb, h):
        k_tr, k_fit, k_s = jax.random.split(jax.random.fold_in(key, h), 3)
        starts = None if start_latents_fn is None else start_latents_fn(k_s, h)
        tr = traces(k_tr, lock, n, h, rollin, True, rollin_eps, pb, start_latents=starts)
        p, resid = fit_q(k_fit, tr.obs, tr.action, tr.ret, valid, lock.num_actions, cfg, cfg.policy)
        good = jnp.sum(valid * tr.good) / jnp.sum(valid)
        return level_set(pb, h, p), (resid, good)

    return jax.lax.scan(backward, pb_init, jnp.arange(lock.horizon), reverse=True)


def _online_one(key, lock, budget, cfg: Cfg):
    k_init, k_run, k_eval = jax.random.split(key, 3)
    valid = (jnp.arange(cfg.num_samples) < budget).astype(lock.noise.dtype)
    pb = empty_policy(k_init, lock, cfg, cfg.policy)
    eps_sched = jnp.where(jnp.arange(cfg.num_iterations) == 0, 1.0, cfg.epsilon).astype(lock.noise.dtype)

    def round_(pb, xs):
        i, eps = xs
        pb_new, (resid, good) = _psdp_round(jax.random.fold_in(k_run, i), lock, cfg, valid, pb, pb, eps, None)
        return pb_new, (resid, good)

    pb, (resid, good) = jax.lax.scan(round_, pb, (jnp.arange(cfg.num_iterations), eps_sched))
    succ, ret = _eval(k_eval, lock, pb, cfg)
    used = (cfg.num_iterations * lock.horizon * budget).astype(jnp.int32)
    return PSDPResult(pb, resid, good, used, succ, ret)


def _reset_one(key, lock, data, budget, cfg: Cfg):
    k_init, k_run, k_eval = jax.random.split(key, 3)
    valid = (jnp.arange(cfg.num_samples) < budget).astype(lock.noise.dtype)
    pb = empty_policy(k_init, lock, cfg, cfg.policy)
    m = data.latents.shape[1]

    def starts(k, h):
        idx = jax.random.randint(k, (cfg.num_samples,), 0, m)
        return data.latents[h][idx]

    pb, (resid, good) = _psdp_round(k_run, lock, cfg, valid, pb, None, 0.0, starts)
    succ, ret = _eval(k_eval, lock, pb, cfg)
    return PSDPResult(pb, resid[None], good[None], (lock.horizon * budget).astype(jnp.int32), succ, ret)


def _bc_one(key, lock, data, cfg: Cfg):
    k_fit, k_eval = jax.random.split(key)
    pol = empty_policy(k_fit, lock, cfg, cfg.policy)
    w = jnp.ones((data.observations.shape[1],), lock.noise.dtype)

    def level(p, h):
        q, hist = fit_classifier(jax.random.fold_in(k_fit, h), data.observations[h], data.actions[h], w,
                                 lock.num_actions, cfg, cfg.policy)
        return level_set(p, h, q), hist

    pol, hist = jax.lax.scan(level, pol, jnp.arange(lock.horizon))
    succ, ret = _eval(k_eval, lock, pol, cfg)
    return BCResult(pol, hist, succ, ret)


@partial(jax.jit, static_argnames=("cfg", "lb"))
def _online_program(keys, lock, budget, cfg, lb):
    return jax.vmap(partial(_online_one, cfg=cfg), in_axes=(0, 0 if lb else None, None))(keys, lock, budget)


@partial(jax.jit, static_argnames=("cfg", "lb", "db"))
def _reset_program(keys, lock, data, budget, cfg, lb, db):
    return jax.vmap(partial(_reset_one, cfg=cfg), in_axes=(0, 0 if lb else None, 0 if db else None, None))(
        keys, lock, data, budget)


@partial(jax.jit, static_argnames=("cfg", "lb", "db"))
def _bc_program(keys, lock, data, cfg, lb, db):
    return jax.vmap(partial(_bc_one, cfg=cfg), in_axes=(0, 0 if lb else None, 0 if db else None))(keys, lock, data)


def online_psdp(
    key: PRNGKeyArray, lock: CombinationLock, *, num_samples: int = 256, budget: int | Int[Array, ""] | None = None,
    num_iterations: int = 2, epsilon: float = 0.1, policy: str = "linear", hidden: int = 32,
    num_updates: int = 200, learning_rate: float = 0.5, ridge: float = 1e-3, num_eval_episodes: int = 1000,
) -> PSDPResult:
    """Online-only PSDP with epsilon-greedy roll-ins (no offline data): num_iterations H budget episodes.

    Args:
        key: one PRNG key or a 1-d batch of seeds (``lock`` shared or with the same leading axis).
        lock: :class:`jaxcore.rl.CombinationLock`.
        num_samples: episodes per level and round (compiled batch size).
        budget: episodes per level that count (<= num_samples; traced ints allowed); None: all.
        num_iterations: PSDP rounds; the default 2 spends FOOBAR's 2 H budget episodes.
        epsilon: exploration of the roll-ins after the first (uniform) round, in [0, 1].
        policy: ``"linear"`` or ``"mlp"`` return regressions.
        hidden, num_updates, learning_rate: the MLP regression (hidden units, adam steps, step size / 10).
        ridge: ridge penalty of the linear regressions.
        num_eval_episodes: greedy evaluation episodes run in the same program (0: none).

    Returns:
        :class:`PSDPResult`.

    Raises:
        TypeError / ValueError: a bad argument (named in the message).

    References:
        Bagnell et al., NeurIPS 2003 (PSDP); Song, Bagnell & Singh, ICML 2024, Section 6 (online baselines).

    Examples:
        >>> from jaxcore.rl import make_lock
        >>> lock = make_lock(jax.random.key(0), horizon=4, num_actions=4)
        >>> res = online_psdp(jax.random.key(2), lock, num_samples=64, num_eval_episodes=200)
        >>> float(res.success_rate) < 0.5   # random roll-ins rarely reach the deep levels (4^-h)
        True
    """
    keys, batched = check_common(key, lock, {})
    cfg = check_cfg(num_samples, policy, "linear", hidden, num_updates, learning_rate, ridge, num_eval_episodes,
                    num_iterations=num_iterations, epsilon=epsilon)
    lb = lock_batched(lock, keys.shape[0])
    b = check_budget(budget, cfg.num_samples)
    return unbatch(_online_program(keys, lock, b, cfg, lb), batched)


def reset_psdp(
    key: PRNGKeyArray, lock: CombinationLock, data: OfflineData, *, num_samples: int = 256,
    budget: int | Int[Array, ""] | None = None, policy: str = "linear", hidden: int = 32, num_updates: int = 200,
    learning_rate: float = 0.5, ridge: float = 1e-3, num_eval_episodes: int = 1000,
) -> PSDPResult:
    """PSDP with a reset model: level-h episodes reset to offline latent states at level h (H budget episodes).

    Args:
        key: one PRNG key or a 1-d batch of seeds (``lock``/``data`` shared or with the leading axis).
        lock: :class:`jaxcore.rl.CombinationLock`.
        data: :class:`jaxcore.rl.OfflineData`; ``data.latents`` are the states the simulator is reset to.
        num_samples, budget, policy, hidden, num_updates, learning_rate, ridge, num_eval_episodes: as in
            :func:`online_psdp`.

    Returns:
        :class:`PSDPResult` (one round).

    Raises:
        TypeError / ValueError: a bad argument (named in the message).

    References:
        Bagnell et al., NeurIPS 2003; Song, Bagnell & Singh, ICML 2024, Section 3 (reset model).

    Examples:
        >>> from jaxcore.rl import collect_offline, make_lock
        >>> lock = make_lock(jax.random.key(0), horizon=4, num_actions=4)
        >>> data = collect_offline(jax.random.key(1), lock, 256)
        >>> float(reset_psdp(jax.random.key(2), lock, data, num_samples=64, num_eval_episodes=200).success_rate)
        1.0
    """
    keys, batched = check_common(key, lock, {})
    cfg = check_cfg(num_samples, policy, "linear", hidden, num_updates, learning_rate, ridge, num_eval_episodes)
    s = keys.shape[0]
    lb = lock_batched(lock, s)
    db = data_batched(data, lock, s, lb, ("observations", "latents"))
    b = check_budget(budget, cfg.num_samples)
    return unbatch(_reset_program(keys, lock, data, b, cfg, lb, db), batched)


def behaviour_cloning(
    key: PRNGKeyArray, lock: CombinationLock, data: OfflineData, *, policy: str = "linear", hidden: int = 32,
    num_updates: int = 200, learning_rate: float = 0.5, num_eval_episodes: int = 1000,
) -> BCResult:
    """Behaviour cloning with the offline actions (an upper reference): per-level softmax classifiers.

    Args:
        key: one PRNG key or a 1-d batch of seeds.
        lock: :class:`jaxcore.rl.CombinationLock` (for the evaluation only).
        data: :class:`jaxcore.rl.OfflineData` with its ``actions``.
        policy: ``"linear"`` or ``"mlp"``.
        hidden: MLP hidden units.
        num_updates: adam steps per level.
        learning_rate: adam step size.
        num_eval_episodes: greedy evaluation episodes (0: none).

    Returns:
        :class:`BCResult`.

    Raises:
        TypeError / ValueError: a bad argument (named in the message).

    References:
        D. Pomerleau. "ALVINN." NeurIPS 1988; Song, Bagnell & Singh, ICML 2024, Section 6.

    Examples:
        >>> from jaxcore.rl import collect_offline, make_lock
        >>> lock = make_lock(jax.random.key(0), horizon=4, num_actions=4)
        >>> data = collect_offline(jax.random.key(1), lock, 256)
        >>> float(behaviour_cloning(jax.random.key(2), lock, data, num_eval_episodes=200).success_rate)
        1.0
    """
    keys, batched = check_common(key, lock, {})
    cfg = check_cfg(1, policy, "linear", hidden, num_updates, learning_rate, 1e-3, num_eval_episodes)
    s = keys.shape[0]
    lb = lock_batched(lock, s)
    db = data_batched(data, lock, s, lb, ("observations", "actions"))
    return unbatch(_bc_program(keys, lock, data, cfg, lb, db), batched)
