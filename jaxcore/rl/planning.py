"""Exact tabular dynamic programming on a lock's latent MDP: optimal values and policy values.

Backward induction over the levels with the kernel P and expected reward R of
:func:`jaxcore.rl.transition_matrix` / :func:`jaxcore.rl.reward_matrix`:

    Q_h(s, a) = R_h(s, a) + sum_s' P_h(s, a, s') V_{h+1}(s'),   V_H = 0,
    V*_h(s) = max_a Q*_h(s, a),      V^pi_h(s) = Q^pi_h(s, pi_h(s)).

The value of an episode is the mean of V_0 over the initial (uniform good) states; the optimal
value of every lock is 1 (the goal reward, since anti_reward < 1).

References:
    R. Bellman. "Dynamic Programming." Princeton University Press, 1957.
    Y. Song, J. A. Bagnell, A. Singh. "Hybrid Reinforcement Learning from Offline Observation
    Alone." ICML 2024 (finite-horizon episodic MDP, Section 2).
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxcore._util import check_shape, expected

from .lock import CombinationLock, reward_matrix, transition_matrix

__all__ = ["PlanningResult", "optimal_values", "policy_value"]


class PlanningResult(NamedTuple):
    """Result of :func:`optimal_values` / :func:`policy_value`.

    Attributes:
        values: ``[H + 1, S]`` V_h(s) (row H is 0).
        q_values: ``[H, S, A]`` Q_h(s, a).
        policy: int32 ``[H, S]`` the optimal (greedy, lowest index on ties) or the evaluated actions.
        value: scalar, the expected return of an episode (mean of V_0 over the good states).

    Examples:
        >>> PlanningResult._fields
        ('values', 'q_values', 'policy', 'value')
    """

    values: Float[Array, "H1 S"]
    q_values: Float[Array, "H S A"]
    policy: Int[Array, "H S"]
    value: Float[Array, ""]


@eqx.filter_jit  # one program per lock shape (an eager scan compiled anew at every call)
def _backward(lock: CombinationLock, table):
    P, R = transition_matrix(lock), reward_matrix(lock)
    s_count = lock.num_latent

    def level(v_next, xs):
        p, r, act = xs
        q = r + p @ v_next
        pi = jnp.argmax(q, axis=-1).astype(jnp.int32) if act is None else act
        v = jnp.take_along_axis(q, pi[:, None], axis=-1)[:, 0]
        return v, (v, q, pi)

    v_end = jnp.zeros((s_count,), P.dtype)
    xs = (P, R, table)
    _, (vs, qs, pis) = jax.lax.scan(level, v_end, xs, reverse=True)
    values = jnp.concatenate([vs, v_end[None]], axis=0)
    return PlanningResult(values, qs, pis, jnp.mean(values[0, : lock.num_good]))


def _check_lock(lock):
    if not isinstance(lock, CombinationLock):
        raise TypeError(expected("lock", "a CombinationLock (make_lock)", type(lock).__name__, raw=True))


def optimal_values(lock: CombinationLock) -> PlanningResult:
    """Optimal values V*, Q* and an optimal policy of the lock's latent MDP by backward induction.

    Args:
        lock: :class:`jaxcore.rl.CombinationLock`.

    Returns:
        :class:`PlanningResult`; ``value`` is 1 for every lock (the goal is reached with probability 1).

    Raises:
        TypeError: ``lock`` is not a CombinationLock.

    Examples:
        >>> from jaxcore.rl import make_lock
        >>> lock = make_lock(jax.random.key(0), horizon=4, num_actions=3)
        >>> res = optimal_values(lock)
        >>> float(res.value), bool((res.policy[:, :2] == lock.advancing).all())
        (1.0, True)
    """
    _check_lock(lock)
    return _backward(lock, None)


def policy_value(lock: CombinationLock, actions: Int[Array, "H S"]) -> PlanningResult:
    """Exact value of the deterministic latent policy pi_h(s) = actions[h, s].

    Args:
        lock: :class:`jaxcore.rl.CombinationLock`.
        actions: int ``[H, S]`` action of each latent state at each level (see
            :func:`jaxcore.rl.policy_table` for the table of a learned policy).

    Returns:
        :class:`PlanningResult` of the policy (``policy`` is ``actions``).

    Raises:
        TypeError: ``lock`` is not a CombinationLock or ``actions`` is not integer.
        ValueError: ``actions`` has the wrong shape or an action outside ``[0, A)``.

    Examples:
        >>> from jaxcore.rl import make_lock
        >>> lock = make_lock(jax.random.key(0), horizon=3, num_actions=2)
        >>> wrong = (1 - lock.advancing[0, 0]) * jnp.ones((3, 3), jnp.int32)  # always fall at h = 0 from s = 0
        >>> float(policy_value(lock, wrong).values[0, 0])  # the anti-shaped reward only
        0.05000000074505806
    """
    _check_lock(lock)
    check_shape(actions, "actions", (lock.horizon, lock.num_latent), f"shape ({lock.horizon}, {lock.num_latent})")
    if not isinstance(actions, jax.Array) and np.asarray(actions).dtype.kind not in "biuf":
        raise TypeError(expected("actions", "an integer array", f"dtype {np.asarray(actions).dtype}", raw=True))
    actions = jnp.asarray(actions)
    if not jnp.issubdtype(actions.dtype, jnp.integer):
        raise TypeError(expected("actions", "an integer array", f"dtype {actions.dtype}", raw=True))
    if not isinstance(actions, jax.core.Tracer):
        lo, hi = int(actions.min()), int(actions.max())
        if lo < 0 or hi >= lock.num_actions:
            raise ValueError(expected("actions", f"actions in [0, {lock.num_actions - 1}]", f"range [{lo}, {hi}]",
                                      raw=True))
    return _backward(lock, actions.astype(jnp.int32))
