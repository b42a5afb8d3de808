"""jaxcore.rl: hybrid RL from observation-only offline data (FOOBAR) on combination locks.

Combination locks (:func:`make_lock`, gymnax-style :func:`reset` / :func:`step`) are pure JAX, so
thousands of environments run under ``vmap`` and the horizon under ``lax.scan``; :func:`collect_offline`
records the observations a data policy visits; :func:`foobar` learns from those observations and
online episodes (forward moment matching, backward PSDP on traces), beside the baselines
:func:`online_psdp` (online only), :func:`reset_psdp` (reset model) and :func:`behaviour_cloning`
(with actions). :func:`optimal_values` / :func:`policy_value` solve the latent MDP exactly.

>>> import jax
>>> from jaxcore.rl import collect_offline, foobar, make_lock, online_psdp, optimal_values
>>> lock = make_lock(jax.random.key(0), horizon=4, num_actions=4)        # rich observations, d = 8
>>> float(optimal_values(lock).value)                                    # the goal is worth 1
1.0
>>> data = collect_offline(jax.random.key(1), lock, 256)                 # observations only are used
>>> res = foobar(jax.random.key(2), lock, data, num_samples=64, num_eval_episodes=200)
>>> float(res.success_rate), int(res.num_online_episodes)
(1.0, 512)
>>> online = online_psdp(jax.random.key(2), lock, num_samples=64, num_eval_episodes=200)
>>> float(online.success_rate) < 0.5                                     # the same budget, no offline data
True

References:
    Y. Song, J. A. Bagnell, A. Singh. "Hybrid Reinforcement Learning from Offline Observation
    Alone." ICML 2024.
"""

from .baselines import BCResult, PSDPResult, behaviour_cloning, online_psdp, reset_psdp
from .data import OfflineData, collect_offline
from .hybrid import FoobarResult, foobar
from .lock import (
    CombinationLock,
    LockState,
    hadamard,
    make_lock,
    observe,
    reset,
    reward_matrix,
    step,
    transition_matrix,
)
from .planning import PlanningResult, optimal_values, policy_value
from .policies import EvaluationResult, Policy, evaluate, init_policy, optimal_policy, policy_logits, policy_table

__all__ = [
    "BCResult",
    "CombinationLock",
    "EvaluationResult",
    "FoobarResult",
    "LockState",
    "OfflineData",
    "PSDPResult",
    "PlanningResult",
    "Policy",
    "behaviour_cloning",
    "collect_offline",
    "evaluate",
    "foobar",
    "hadamard",
    "init_policy",
    "make_lock",
    "observe",
    "online_psdp",
    "optimal_policy",
    "optimal_values",
    "policy_logits",
    "policy_table",
    "policy_value",
    "reset",
    "reset_psdp",
    "reward_matrix",
    "step",
    "transition_matrix",
]
