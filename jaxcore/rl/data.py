"""Offline observation-only data sets from a lock: the states a data policy visits, level by level.

``collect_offline`` runs ``num_episodes`` episodes of a data policy and keeps the observations at
every level h = 0, ..., H: samples of the admissible distributions nu_h = d_h^{pi_data}. The data
policy acts, in each episode, as the given policy (the lock's optimal policy by default) with
probability ``coverage``, else uniformly at random (a mixture of two policies, hence admissible
for the mixture class); within a covered episode it takes a uniform random action with
probability ``epsilon`` at each step. ``coverage`` therefore scales the share of the data that
reaches the deep good states (with A actions a random episode stays good for about log_A steps).

Hybrid RL from observations alone uses ``observations`` only. The latent states (for the
reset-model baseline, which may reset the simulator to an offline state) and the actions (for
behaviour cloning, an upper reference with more information) are kept beside them.

References:
    Y. Song, J. A. Bagnell, A. Singh. "Hybrid Reinforcement Learning from Offline Observation
    Alone." ICML 2024 (offline data D_h ~ nu_h, admissibility: Definition 3.1 and Section 4).
"""

from __future__ import annotations

from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxcore._util import check_int, check_key, check_scalar, expected

from .lock import CombinationLock, reset
from .policies import Policy, _check_pair, choose, draws, env_step, policy_logits, step_keys

__all__ = ["OfflineData", "collect_offline"]


class OfflineData(eqx.Module):
    """Offline episodes of a data policy, stored level by level.

    Attributes:
        observations: ``[H + 1, N, d]`` the observation at every level (what the learner may use).
        latents: int32 ``[H + 1, N]`` the latent states (for the reset-model baseline only).
        actions: int32 ``[H, N]`` the actions taken (for behaviour cloning only).

    Raises:
        TypeError: a field that is not an array.

    Examples:
        >>> from jaxcore.rl import make_lock
        >>> lock = make_lock(jax.random.key(0), horizon=4, num_actions=4)
        >>> data = collect_offline(jax.random.key(1), lock, 256)
        >>> data.observations.shape, data.num_episodes
        ((5, 256, 8), 256)
    """

    observations: Float[Array, "H1 N d"]
    latents: Int[Array, "H1 N"]
    actions: Int[Array, "H N"]

    def __check_init__(self):
        """Built directly, the fields must be arrays (their shapes are checked where the data is used)."""
        for name in ("observations", "latents", "actions"):
            x = getattr(self, name)
            if not hasattr(x, "shape") or not hasattr(x, "dtype"):
                raise TypeError(expected(name, "an array", type(x).__name__, raw=True))

    @property
    def num_episodes(self) -> int:
        """N, episodes (samples per level)."""
        return self.observations.shape[1]


def _data_action(u, lock, policy, state, obs, epsilon, covered):
    h = jnp.minimum(state.level, lock.horizon - 1)
    if policy is None:
        z = jax.nn.one_hot(lock.advancing[h, jnp.minimum(state.latent, lock.num_good - 1)], lock.num_actions)
        greedy = True
    else:
        z, greedy = policy_logits(policy, h, obs, check_level=False), False
    return choose(u, z, greedy, jnp.where(covered, epsilon, 1.0), lock.num_actions)


@partial(jax.jit, static_argnames=("num_episodes",))
def _collect(key, lock, policy, num_episodes, epsilon, coverage):
    def episode(k):
        k0, kc, k = jax.random.split(k, 3)
        obs, state = reset(k0, lock)
        covered = jax.random.uniform(kc, ()) < coverage

        def body(carry, kt):
            obs, state = carry
            u, eps = draws(kt, lock)
            a = _data_action(u, lock, policy, state, obs, epsilon, covered)
            nobs, nxt, _, _ = env_step(u, eps, state, a, lock)
            return (nobs, nxt), (obs, state.latent, a)

        (obs_end, state_end), (o, s, a) = jax.lax.scan(body, (obs, state), step_keys(k, lock.horizon))
        return (jnp.concatenate([o, obs_end[None]]), jnp.concatenate([s, state_end.latent[None]]), a)

    o, s, a = jax.vmap(episode)(jax.random.split(key, num_episodes))
    return OfflineData(jnp.swapaxes(o, 0, 1), jnp.swapaxes(s, 0, 1), jnp.swapaxes(a, 0, 1))


def collect_offline(
    key: PRNGKeyArray, lock: CombinationLock, num_episodes: int, *, policy: Policy | None = None,
    epsilon: float = 0.0, coverage: float = 1.0,
) -> OfflineData:
    """Observation-only offline data: ``num_episodes`` episodes of a data policy, kept per level.

    Args:
        key: PRNG key.
        lock: :class:`jaxcore.rl.CombinationLock`.
        num_episodes: N >= 1 episodes (one sample of each nu_h per episode).
        policy: the data policy, sampled as a softmax (:class:`jaxcore.rl.Policy`); None: the lock's
            optimal policy (the advancing action of the latent state).
        epsilon: per-step probability in [0, 1] of a uniform random action (covered episodes).
        coverage: probability in [0, 1] that an episode follows the data policy, else uniform random.

    Returns:
        :class:`OfflineData`.

    Raises:
        TypeError / ValueError: a bad argument (named in the message).

    References:
        Song, Bagnell & Singh, ICML 2024, Section 6 (offline data of a near-optimal policy).

    Examples:
        >>> from jaxcore.rl import make_lock
        >>> lock = make_lock(jax.random.key(0), horizon=4, num_actions=4)
        >>> data = collect_offline(jax.random.key(1), lock, 256)
        >>> bool((data.latents[-1] < lock.num_good).all())  # the optimal policy stays on the good states
        True
        >>> poor = collect_offline(jax.random.key(1), lock, 256, coverage=0.0)
        >>> float((poor.latents[-1] < lock.num_good).mean()) < 0.05  # random episodes die (4^-4)
        True
    """
    check_key(key)
    if not isinstance(lock, CombinationLock):
        raise TypeError(expected("lock", "a CombinationLock (make_lock)", type(lock).__name__, raw=True))
    num_episodes = check_int(num_episodes, "num_episodes", minimum=1)
    if policy is not None:
        _check_pair(lock, policy)
    epsilon = check_scalar(epsilon, "epsilon", low=0.0, high=1.0)
    coverage = check_scalar(coverage, "coverage", low=0.0, high=1.0)
    dt = lock.noise.dtype
    return _collect(key, lock, policy, num_episodes, jnp.asarray(epsilon, dt), jnp.asarray(coverage, dt))
