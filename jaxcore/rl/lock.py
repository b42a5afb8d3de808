"""Combination locks: the hard-exploration block MDPs of the hybrid-RL experiments, as pure JAX functions.

A lock of horizon H has, at every level h = 0, ..., H-1, ``num_good`` good latent states and one
bad (dead) state, index ``num_good``. In good state g at level h exactly one of the A actions,
``lock.advancing[h, g]``, advances: the next latent state is a good state drawn uniformly (with two
good states: stay or switch with probability 1/2). Every other action, and every action in the bad
state, leads to the bad state, which absorbs. Rewards:

    r = 1                      advancing from a good state at the last level h = H - 1 (the goal),
    r = anti_reward  w.p. anti_prob   falling from a good state into the bad state (anti-shaped),
    r = 0                      otherwise.

The anti-shaped reward lures a myopic learner into the dead state; only H correct actions in a
row reach the goal (a random policy succeeds with probability A^-H). Levels >= H absorb (done).

Observations of latent state s at level h (``tabular=False``, the rich-observation variant):

    x = R (e_s + e_{S + h} + noise * eps),   eps ~ N(0, I) on the first S + H + 1 coordinates,

with S = num_good + 1, e_i the one-hot vectors in dimension d = 2^ceil(log2(S + H + 1)) and R the
orthonormal Hadamard matrix (Sylvester's construction divided by sqrt(d)). ``tabular=True`` observes
the one-hot vector of the pair (h, s) in dimension S (H + 1), without noise.

The functions follow gymnax's conventions: ``reset(key, lock) -> (obs, state)`` and
``step(key, state, action, lock) -> (obs, state, reward, done, info)``, the environment
parameters (:class:`CombinationLock`) passed explicitly, so that ``jax.vmap`` runs thousands of
environments and ``lax.scan`` runs the horizon.

References:
    D. Misra, M. Henaff, A. Krishnamurthy, J. Langford. "Kinematic State Abstraction and Provably
    Efficient Rich-Observation Reinforcement Learning." ICML 2020 (the diabolical combination lock).
    Y. Song, Y. Zhou, A. Sekhari, J. A. Bagnell, A. Krishnamurthy, W. Sun. "Hybrid RL: Using Both
    Offline and Online Data Can Make RL Efficient." ICLR 2023 (the lock with Hadamard-rotated noisy
    observations used here).
    Y. Song, J. A. Bagnell, A. Singh. "Hybrid Reinforcement Learning from Offline Observation Alone."
    ICML 2024, Section 6 (combination lock experiments).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from jaxcore._util import (check_auto_mesh, check_bool, check_float_dtype, check_int, check_key, check_scalar,
                           checked_index, default_float, expected, is_concrete)

__all__ = [
    "CombinationLock",
    "LockState",
    "hadamard",
    "make_lock",
    "observe",
    "reset",
    "reward_matrix",
    "step",
    "transition_matrix",
]


class LockState(NamedTuple):
    """The environment state of one lock (gymnax's ``EnvState``).

    Attributes:
        latent: int32 scalar, the latent state in ``[0, num_good]`` (``num_good`` is the bad state).
        level: int32 scalar, the level h in ``[0, H]`` (H: the episode is over).

    Examples:
        >>> LockState._fields
        ('latent', 'level')
    """

    latent: Int[Array, ""]
    level: Int[Array, ""]


def hadamard(d: int) -> np.ndarray:
    """The orthonormal Hadamard matrix of order d (a power of two), Sylvester's construction / sqrt(d).

    H_1 = [1], H_{2n} = [[H_n, H_n], [H_n, -H_n]]; the result R = H_d / sqrt(d) has R R^T = I.

    Args:
        d: the order, a power of two >= 1.

    Returns:
        float64 NumPy array ``[d, d]``, symmetric and orthogonal.

    Raises:
        ValueError: ``d`` is not a power of two.

    Examples:
        >>> hadamard(2) * np.sqrt(2)
        array([[ 1.,  1.],
               [ 1., -1.]])
    """
    d = check_int(d, "d", minimum=1)
    if d & (d - 1):
        raise ValueError(expected("d", "a power of two", d))
    h = np.ones((1, 1))
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    return h / np.sqrt(d)


class CombinationLock(eqx.Module):
    """Parameters of a combination lock (gymnax's ``EnvParams``); build one with :func:`make_lock`.

    Attributes:
        advancing: int32 ``[H, num_good]``, the one advancing action of each good state per level.
        rotation: ``[d, d]`` orthonormal Hadamard matrix (rich observations), or None (tabular).
        noise: float scalar, standard deviation of the observation noise (before the rotation).
        anti_reward: float scalar, the anti-shaped reward for falling into the bad state.
        anti_prob: float scalar, the probability that the fall pays ``anti_reward``.
        horizon: H (static).
        num_actions: A (static).
        num_good: good latent states per level (static); S = num_good + 1 latent states per level.
        tabular: whether observations are one-hot (h, s) vectors (static).

    Examples:
        >>> lock = make_lock(jax.random.key(0), horizon=5, num_actions=4)
        >>> lock.num_latent, lock.obs_dim, lock.advancing.shape
        (3, 16, (5, 2))
    """

    advancing: Int[Array, "H G"]
    rotation: Float[Array, "d d"] | None
    noise: Float[Array, ""]
    anti_reward: Float[Array, ""]
    anti_prob: Float[Array, ""]
    horizon: int = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    num_good: int = eqx.field(static=True)
    tabular: bool = eqx.field(static=True)

    @property
    def num_latent(self) -> int:
        """S = num_good + 1 latent states per level (the last one is the bad state)."""
        return self.num_good + 1

    @property
    def obs_dim(self) -> int:
        """Observation length: S (H + 1) (tabular) or 2^ceil(log2(S + H + 1)) (rich)."""
        if self.tabular:
            return self.num_latent * (self.horizon + 1)
        return _rich_dim(self.num_latent, self.horizon)


def _rich_dim(num_latent: int, horizon: int) -> int:
    return 1 << int(np.ceil(np.log2(num_latent + horizon + 1)))


def make_lock(
    key: PRNGKeyArray,
    horizon: int,
    num_actions: int = 10,
    *,
    num_good: int = 2,
    noise: float = 0.1,
    anti_reward: float = 0.1,
    anti_prob: float = 0.5,
    tabular: bool = False,
    dtype: Any = None,
) -> CombinationLock:
    """Draw a combination lock: the advancing action of every good state at every level, uniformly.

    The defaults are the lock of Song et al. (2023, 2024): 10 actions, 2 good states and 1 bad
    state per level, observation noise 0.1, anti-shaped reward 0.1 with probability 1/2.

    Args:
        key: PRNG key (the lock's combination).
        horizon: H >= 1 levels.
        num_actions: A >= 2 actions.
        num_good: good latent states per level, >= 1.
        noise: observation noise standard deviation >= 0 (ignored when ``tabular``).
        anti_reward: the anti-shaped reward, in [0, 1) so that the goal stays the optimum.
        anti_prob: probability in [0, 1] that a fall pays ``anti_reward``.
        tabular: one-hot (h, s) observations instead of the rotated noisy ones.
        dtype: float dtype of the parameters (default float32, float64 under ``jax_enable_x64``).

    Returns:
        :class:`CombinationLock`.

    Raises:
        TypeError: ``key`` is not a PRNG key; an integer argument is not an int.
        ValueError: an argument is out of its range.

    References:
        Song, Bagnell & Singh, ICML 2024, Section 6; Misra et al., ICML 2020.

    Examples:
        >>> lock = make_lock(jax.random.key(1), horizon=3, num_actions=2, tabular=True)
        >>> lock.obs_dim
        12
    """
    check_key(key)
    horizon = check_int(horizon, "horizon", minimum=1)
    num_actions = check_int(num_actions, "num_actions", minimum=2)
    num_good = check_int(num_good, "num_good", minimum=1)
    noise = check_scalar(noise, "noise", nonnegative=True)
    anti_reward = check_scalar(anti_reward, "anti_reward", low=0.0, high=1.0, high_open=True)
    anti_prob = check_scalar(anti_prob, "anti_prob", low=0.0, high=1.0)
    tabular = check_bool(tabular, "tabular")
    dtype = check_float_dtype(dtype) if dtype is not None else default_float()
    with np.errstate(over="ignore"):
        cast = np.asarray(noise, dtype)
    if not np.isfinite(cast):  # finite as a Python float, inf in float32 (1e39)
        raise ValueError(expected("noise", f"a number >= 0 that is finite in {dtype}", noise))
    advancing = jax.random.randint(key, (horizon, num_good), 0, num_actions, dtype=jnp.int32)
    rotation = None if tabular else jnp.asarray(hadamard(_rich_dim(num_good + 1, horizon)), dtype)
    return CombinationLock(advancing, rotation, jnp.asarray(noise, dtype), jnp.asarray(anti_reward, dtype),
                           jnp.asarray(anti_prob, dtype), horizon, num_actions, num_good, tabular)


def _check_lock(lock) -> None:
    if not isinstance(lock, CombinationLock):
        raise TypeError(expected("lock", "a CombinationLock (make_lock)", type(lock).__name__, raw=True))


def _check_state(state, lock: CombinationLock) -> None:
    """A LockState of integer latent and level; concrete values in range (traced ones under the caller's vmap)."""
    if not isinstance(state, LockState):
        raise TypeError(expected("state", "a LockState (reset or step)", type(state).__name__, raw=True))
    for name, x, top in (("state.latent", state.latent, lock.num_latent - 1), ("state.level", state.level,
                                                                                lock.horizon)):
        dtype = jnp.result_type(x)
        if not jnp.issubdtype(dtype, jnp.integer):
            raise TypeError(expected(name, "an integer array", f"dtype {dtype}", raw=True))
        if is_concrete(x):
            a = np.asarray(x)
            if a.size and (a.min() < 0 or a.max() > top):
                raise ValueError(expected(name, f"values in [0, {top}]", int(a.min() if a.min() < 0 else a.max())))


def _float(lock: CombinationLock):
    return lock.noise.dtype


def observe(key: PRNGKeyArray, state: LockState, lock: CombinationLock) -> Float[Array, " d"]:
    """The observation of ``state`` (noisy and rotated, or one-hot for a tabular lock).

    x = R (e_s + e_{S + h} + noise * eps) (rich) or x = e_{h S + s} (tabular); see the module docstring.

    Args:
        key: PRNG key of the observation noise (unused by a tabular lock).
        state: :class:`LockState` (scalars; ``jax.vmap`` for a batch).
        lock: :class:`CombinationLock`.

    Returns:
        ``[lock.obs_dim]`` float observation.

    Raises:
        TypeError: a key that is not a PRNG key, a lock that is not a CombinationLock, a state that is
            not a LockState of integers.
        ValueError: a concrete latent state outside ``[0, S)`` or level outside ``[0, H]``.

    Examples:
        >>> lock = make_lock(jax.random.key(0), horizon=2, num_actions=2, tabular=True)
        >>> observe(jax.random.key(1), LockState(jnp.int32(1), jnp.int32(2)), lock).tolist()
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    """
    check_key(key)
    _check_lock(lock)
    _check_state(state, lock)
    return _emit(_noise(key, lock), state, lock)


def _noise(key, lock: CombinationLock):
    """The standard normal noise of one observation (None for a tabular lock)."""
    if lock.tabular:
        return None
    return jax.random.normal(key, (lock.num_latent + lock.horizon + 1,), _float(lock))


def _clean(state: LockState, lock: CombinationLock):
    """The noise-free observation of ``state`` (no key: the noise term is zero)."""
    return _emit(None, state, lock)


def _emit(eps, state: LockState, lock: CombinationLock):
    """The observation of ``state`` given its standard normal noise ``eps`` (None: noise-free; see :func:`observe`).

    R (e_s + e_{S+h} + noise * eps) is computed as two columns of R plus R[:, :live] (noise * eps), the
    same sum in another order: writing the noise into a d-vector first (``z.at[:live].add``) made XLA:CPU
    fuse the normals' erf^-1 into an in-place update that it does not vectorise (about half of a vmapped
    rollout's time, measured by a profile of ``rl.env_steps``); as the operand of a matrix product the
    noise is built by a plain elementwise fusion.
    """
    dt = _float(lock)
    s_count, d = lock.num_latent, lock.obs_dim
    if lock.tabular:
        return jax.nn.one_hot(state.level * s_count + state.latent, d, dtype=dt)
    live = s_count + lock.horizon + 1
    x = lock.rotation[:, state.latent] + lock.rotation[:, s_count + state.level]
    if eps is None:
        return x
    return x + lock.rotation[:, :live] @ (lock.noise * eps)


def reset(key: PRNGKeyArray, lock: CombinationLock) -> tuple[Float[Array, " d"], LockState]:
    """Start an episode: a good latent state drawn uniformly at level 0 (gymnax ``reset``).

    Args:
        key: PRNG key.
        lock: :class:`CombinationLock`.

    Returns:
        ``(obs, state)``: the ``[d]`` observation and the :class:`LockState`.

    Raises:
        TypeError: a key that is not a PRNG key, a lock that is not a CombinationLock.

    Examples:
        >>> lock = make_lock(jax.random.key(0), horizon=4)
        >>> obs, state = reset(jax.random.key(1), lock)
        >>> obs.shape, int(state.level)
        ((8,), 0)
    """
    check_key(key)
    check_auto_mesh(key, "key")
    _check_lock(lock)
    k_s, k_o = jax.random.split(key)
    state = LockState(jax.random.randint(k_s, (), 0, lock.num_good, dtype=jnp.int32), jnp.int32(0))
    return observe(k_o, state, lock), state


def _transition(key, state: LockState, action, lock: CombinationLock):
    """Next latent state, level, reward and goal flag (no observation)."""
    u = jax.random.uniform(key, (2,), _float(lock))
    return _advance(u[0], u[1], state, action, lock)


def _advance(u_next, u_anti, state: LockState, action, lock: CombinationLock):
    """The transition given two uniforms in [0, 1): the next good state and the anti-shaped reward coin."""
    dt = _float(lock)
    h, s = state.level, state.latent
    live = h < lock.horizon
    bad = lock.num_good
    good = s < bad
    adv = lock.advancing[jnp.minimum(h, lock.horizon - 1), jnp.minimum(s, bad - 1)]
    advances = live & good & (action == adv)
    falls = live & good & (action != adv)
    nxt_good = jnp.minimum((u_next * lock.num_good).astype(jnp.int32), lock.num_good - 1)
    latent = jnp.where(advances, nxt_good, jnp.where(live, jnp.int32(bad), s)).astype(jnp.int32)
    paid = u_anti < lock.anti_prob
    success = advances & (h == lock.horizon - 1)
    reward = jnp.where(success, jnp.asarray(1, dt), jnp.where(falls & paid, lock.anti_reward, jnp.asarray(0, dt)))
    level = jnp.where(live, h + 1, h).astype(jnp.int32)
    return LockState(latent, level), reward, success


def step(
    key: PRNGKeyArray, state: LockState, action: Int[Array, ""], lock: CombinationLock, *, check_action: bool = True
) -> tuple[Float[Array, " d"], LockState, Float[Array, ""], Bool[Array, ""], dict]:
    """One environment step (gymnax ``step``): transition, reward and the next observation.

    Args:
        key: PRNG key (next good state, anti-shaped reward coin, observation noise).
        state: :class:`LockState`.
        action: int scalar in ``[0, A)``.
        lock: :class:`CombinationLock`.
        check_action: check a traced action (``step`` inside the caller's ``jit``) at run time with an
            ``error_if`` (a host callback in the compiled program); ``False`` for a caller whose actions are in
            range by construction (an out-of-range action then counts as a wrong action). A concrete action
            is always checked on the host.

    Returns:
        ``(obs, state, reward, done, info)``: next ``[d]`` observation, next state, float reward,
        ``done`` (the next level is H), ``info = {"success": the goal reward was paid}``.
        At level H the state absorbs with reward 0.

    Raises:
        TypeError: a bad key, lock or state (as :func:`observe`), an action that is not an integer.
        ValueError: a concrete state out of range (as :func:`observe`); an action that is not a scalar or
            is outside ``[0, A)`` (at run time under ``jit`` when ``check_action``).

    Examples:
        >>> lock = make_lock(jax.random.key(0), horizon=1, num_actions=2)
        >>> obs, s = reset(jax.random.key(1), lock)
        >>> a = lock.advancing[0, s.latent]
        >>> _, s2, r, done, info = step(jax.random.key(2), s, a, lock)
        >>> float(r), bool(done), bool(info["success"])
        (1.0, True, True)
    """
    check_key(key)
    check_auto_mesh((key, state), "key, state")
    _check_lock(lock)
    _check_state(state, lock)
    if not jnp.issubdtype(jnp.result_type(action), jnp.integer):  # 0.5 would be truncated to action 0
        raise TypeError(expected("action", "an integer action", f"dtype {jnp.result_type(action)}", raw=True))
    a = jnp.asarray(action)
    if a.ndim != 0:
        raise ValueError(expected("action", "a scalar action", f"shape {a.shape}", raw=True))
    what = f"an action in [0, {lock.num_actions})"
    a = checked_index(a, "action", lock.num_actions, what,
                      check=is_concrete(action) or check_bool(check_action, "check_action"))
    k_t, k_o = jax.random.split(key)
    nxt, reward, success = _transition(k_t, state, a.astype(jnp.int32), lock)
    obs = observe(k_o, nxt, lock)
    return obs, nxt, reward, nxt.level >= lock.horizon, {"success": success}


def transition_matrix(lock: CombinationLock) -> Float[Array, "H S A S"]:
    """The latent transition kernel P[h, s, a, s'] of the lock (levels h = 0, ..., H-1).

    P[h, g, a, g'] = 1/num_good for a = advancing[h, g] and good g, g'; P[h, g, a, bad] = 1 for
    any other action; P[h, bad, a, bad] = 1.

    Args:
        lock: :class:`CombinationLock`.

    Returns:
        ``[H, S, A, S]`` float array, each ``P[h, s, a]`` a probability vector.

    Raises:
        TypeError: ``lock`` is not a CombinationLock.

    Examples:
        >>> lock = make_lock(jax.random.key(0), horizon=1, num_actions=2)
        >>> P = transition_matrix(lock)
        >>> P.shape, P.sum(-1).min().item()
        ((1, 3, 2, 3), 1.0)
    """
    _check_lock(lock)
    dt = _float(lock)
    g, a_count, s_count = lock.num_good, lock.num_actions, lock.num_latent
    hit = jax.nn.one_hot(lock.advancing, a_count, dtype=dt)  # [H, G, A]
    to_good = hit[..., None] * jnp.full((g,), 1.0 / g, dt)  # [H, G, A, G]
    to_bad = (1 - hit)[..., None]
    rows_good = jnp.concatenate([to_good, to_bad], axis=-1)  # [H, G, A, S]
    row_bad = jnp.broadcast_to(jax.nn.one_hot(g, s_count, dtype=dt), (lock.horizon, 1, a_count, s_count))
    return jnp.concatenate([rows_good, row_bad], axis=1)


def reward_matrix(lock: CombinationLock) -> Float[Array, "H S A"]:
    """The expected reward R[h, s, a] (1 at the goal, anti_prob * anti_reward for a fall, else 0).

    Args:
        lock: :class:`CombinationLock`.

    Returns:
        ``[H, S, A]`` float array.

    Raises:
        TypeError: ``lock`` is not a CombinationLock.

    Examples:
        >>> lock = make_lock(jax.random.key(0), horizon=2, num_actions=2)
        >>> R = reward_matrix(lock)
        >>> float(R[1].max()), float(R[0].max())
        (1.0, 0.05000000074505806)
    """
    _check_lock(lock)
    dt = _float(lock)
    g = lock.num_good
    hit = jax.nn.one_hot(lock.advancing, lock.num_actions, dtype=dt)  # [H, G, A]
    last = (jnp.arange(lock.horizon) == lock.horizon - 1).astype(dt)[:, None, None]
    good = hit * last + (1 - hit) * lock.anti_prob * lock.anti_reward
    return jnp.concatenate([good, jnp.zeros((lock.horizon, 1, lock.num_actions), dt)], axis=1)
