"""Non-stationary policy classes (one linear or small-MLP score function per level) and their evaluation.

A policy holds, for every level h, a score function of the observation x:

    linear:  z_h(x) = W_h x + b_h,
    mlp:     z_h(x) = W_h tanh(U_h x + c_h) + b_h          (one hidden layer of ``hidden`` units),

with ``z_h(x)`` in R^A. The same functions serve as softmax policies pi_h(a | x) = softmax(z_h(x))_a
(FOOBAR's forward policies, behaviour cloning) and as Q-value heads whose greedy action
argmax_a z_h(x)_a is the policy (PSDP's backward policies).

References:
    Y. Song, J. A. Bagnell, A. Singh. "Hybrid Reinforcement Learning from Offline Observation
    Alone." ICML 2024 (non-stationary policy class Pi = Pi_0 x ... x Pi_{H-1}, Section 2).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxcore._util import check_bool, check_choice, check_finite, check_int, check_key, check_scalar, checked_index, \
    expected, is_concrete

from .lock import CombinationLock, LockState, _advance, _clean, _emit, _noise, reset

__all__ = ["EvaluationResult", "Policy", "evaluate", "init_policy", "optimal_policy", "policy_logits", "policy_table"]

POLICY_KINDS = ("linear", "mlp")


class Policy(eqx.Module):
    """Per-level score functions z_h(x) (linear or one-hidden-layer MLP); see the module docstring.

    Attributes:
        weight: ``[H, A, k]`` output weights W_h (k = d for linear, ``hidden`` for mlp).
        bias: ``[H, A]`` output biases b_h.
        hidden_weight: ``[H, hidden, d]`` U_h (mlp) or None (linear).
        hidden_bias: ``[H, hidden]`` c_h (mlp) or None (linear).

    Raises:
        TypeError: a field that is not an array (None where an array is required).

    Examples:
        >>> p = init_policy(jax.random.key(0), horizon=3, num_actions=4, obs_dim=8)
        >>> p.kind, p.weight.shape
        ('linear', (3, 4, 8))
    """

    weight: Float[Array, "H A k"]
    bias: Float[Array, "H A"]
    hidden_weight: Float[Array, "H k d"] | None = None
    hidden_bias: Float[Array, "H k"] | None = None

    def __check_init__(self):
        """Built directly, the fields must be arrays (hidden ones may be None: a linear policy)."""
        for name in ("weight", "bias", "hidden_weight", "hidden_bias"):
            x = getattr(self, name)
            if x is None and name.startswith("hidden"):
                continue
            if not hasattr(x, "shape") or not hasattr(x, "dtype"):
                raise TypeError(expected(name, "an array", type(x).__name__, raw=True))

    @property
    def kind(self) -> str:
        """``"linear"`` or ``"mlp"``."""
        return "linear" if self.hidden_weight is None else "mlp"

    @property
    def horizon(self) -> int:
        """H, the number of levels."""
        return self.weight.shape[0]


def init_policy(
    key: PRNGKeyArray, horizon: int, num_actions: int, obs_dim: int, *, kind: str = "linear",
    hidden: int = 32, scale: float = 0.0, dtype=jnp.float32,
) -> Policy:
    """A policy with per-level parameters; linear ones start at zero (uniform softmax) unless ``scale`` > 0.

    MLP hidden layers are drawn N(0, 1/d) (LeCun normal); the output layer N(0, scale^2).

    Args:
        key: PRNG key.
        horizon: H >= 1.
        num_actions: A >= 2.
        obs_dim: d >= 1.
        kind: ``"linear"`` or ``"mlp"``.
        hidden: hidden units of the mlp.
        scale: standard deviation of the output weights at initialisation (>= 0).
        dtype: float dtype.

    Returns:
        :class:`Policy`.

    Raises:
        TypeError / ValueError: a bad argument (named in the message).

    Examples:
        >>> p = init_policy(jax.random.key(0), 2, 3, 8, kind="mlp", hidden=5)
        >>> p.hidden_weight.shape, p.weight.shape
        ((2, 5, 8), (2, 3, 5))
    """
    check_key(key)
    horizon = check_int(horizon, "horizon", minimum=1)
    num_actions = check_int(num_actions, "num_actions", minimum=2)
    obs_dim = check_int(obs_dim, "obs_dim", minimum=1)
    kind = check_choice(kind, "kind", POLICY_KINDS)
    hidden = check_int(hidden, "hidden", minimum=1)
    scale = check_scalar(scale, "scale", nonnegative=True)
    try:
        dtype = jnp.dtype(dtype)
    except TypeError as exc:
        raise TypeError(expected("dtype", "a float dtype", repr(dtype), raw=True)) from exc
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(expected("dtype", "a float dtype", str(dtype), raw=True))
    return _init(key, horizon, num_actions, obs_dim, kind, hidden, scale, dtype)


def _init(key, horizon, num_actions, obs_dim, kind, hidden, scale, dtype):
    k1, k2 = jax.random.split(key)
    if kind == "linear":
        w = scale * jax.random.normal(k1, (horizon, num_actions, obs_dim), dtype)
        return Policy(w, jnp.zeros((horizon, num_actions), dtype))
    u = jax.random.normal(k1, (horizon, hidden, obs_dim), dtype) / jnp.sqrt(jnp.asarray(obs_dim, dtype))
    w = scale * jax.random.normal(k2, (horizon, num_actions, hidden), dtype)
    return Policy(w, jnp.zeros((horizon, num_actions), dtype), u, jnp.zeros((horizon, hidden), dtype))


def _level(policy: Policy, h) -> Policy:
    """The level-h slice of every parameter (leading axis dropped)."""
    return jax.tree_util.tree_map(lambda a: a[h], policy)


def _scores(p: Policy, x):
    """Scores of one level's parameters ``p`` (no leading H axis) at observations ``x [..., d]``."""
    if p.hidden_weight is not None:
        x = jnp.tanh(x @ p.hidden_weight.T + p.hidden_bias)
    return x @ p.weight.T + p.bias


def policy_logits(policy: Policy, level: Int[Array, ""], obs: Float[Array, "*batch d"], *,
                  check_level: bool = True) -> Float[Array, "*batch A"]:
    """Scores z_h(x) at level h for observations ``obs`` (softmax logits or Q-values).

    Args:
        policy: :class:`Policy`.
        level: int scalar h in ``[0, H)``.
        obs: ``[..., d]`` observations.
        check_level: check a traced level at run time (default ``True``: an ``EqxRuntimeError`` naming
            ``level``; a host callback in the compiled program). ``False`` for a caller whose levels are
            in range by construction (an out-of-range level then reads the last level's scores).

    Returns:
        ``[..., A]`` scores.

    Raises:
        TypeError: not a Policy, a level that is not an integer.
        ValueError: NaN/inf parameters, a level outside ``[0, H)`` (on the host when concrete, at run
            time under ``jit`` unless ``check_level=False``), observations not of length d.

    Examples:
        >>> p = init_policy(jax.random.key(0), 2, 3, 4)
        >>> policy_logits(p, 1, jnp.ones((5, 4))).shape
        (5, 3)
    """
    _check_policy(policy)
    if not jnp.issubdtype(jnp.result_type(level), jnp.integer):
        raise TypeError(expected("level", "an integer level", f"dtype {jnp.result_type(level)}", raw=True))
    if is_concrete(level):  # a[h] would clamp an out-of-range level to the last one
        check_int(level, "level", minimum=0, maximum=policy.horizon - 1)
    elif check_bool(check_level, "check_level"):
        level = checked_index(level, "level", policy.horizon,
                              f"an int in [0, {policy.horizon - 1}] (checked at run time)")
    d_in = policy.weight.shape[2] if policy.hidden_weight is None else policy.hidden_weight.shape[2]
    if jnp.ndim(obs) < 1 or jnp.shape(obs)[-1] != d_in:
        raise ValueError(expected("obs", f"observations [..., {d_in}]", f"shape {tuple(jnp.shape(obs))}", raw=True))
    check_finite(obs, "obs")
    return _scores(_level(policy, level), obs)


def policy_table(lock: CombinationLock, policy: Policy) -> Int[Array, "H S"]:
    """The greedy action of ``policy`` at each latent state and level, on noise-free observations.

    Args:
        lock: :class:`jaxcore.rl.CombinationLock`.
        policy: :class:`Policy` with H levels matching the lock.

    Returns:
        int32 ``[H, S]`` table for :func:`jaxcore.rl.policy_value`.

    Examples:
        >>> from jaxcore.rl import make_lock
        >>> lock = make_lock(jax.random.key(0), horizon=2, num_actions=3)
        >>> policy_table(lock, init_policy(jax.random.key(1), 2, 3, lock.obs_dim)).tolist()
        [[0, 0, 0], [0, 0, 0]]
    """
    _check_pair(lock, policy)
    return _policy_table(lock, policy)


@eqx.filter_jit  # one program (eagerly, each primitive of the vmapped table compiled on its own)
def _policy_table(lock: CombinationLock, policy: Policy):
    hs, ss = jnp.meshgrid(jnp.arange(lock.horizon), jnp.arange(lock.num_latent), indexing="ij")

    def one(h, s):
        x = _clean(LockState(s.astype(jnp.int32), h.astype(jnp.int32)), lock)
        return jnp.argmax(policy_logits(policy, h, x, check_level=False)).astype(jnp.int32)

    return jax.vmap(jax.vmap(one))(hs, ss)


def _check_policy(policy):
    if not isinstance(policy, Policy):
        raise TypeError(expected("policy", "a Policy (init_policy or a fit's result)", type(policy).__name__,
                                 raw=True))
    for name in ("weight", "bias", "hidden_weight", "hidden_bias"):  # NaN scores would act as action 0
        x = getattr(policy, name)
        if x is not None:
            check_finite(x, f"policy.{name}")


def _check_pair(lock, policy):
    if not isinstance(lock, CombinationLock):
        raise TypeError(expected("lock", "a CombinationLock (make_lock)", type(lock).__name__, raw=True))
    _check_policy(policy)
    if policy.weight.shape[0] != lock.horizon or policy.weight.shape[1] != lock.num_actions:
        raise ValueError(expected("policy", f"H = {lock.horizon} levels and A = {lock.num_actions} actions",
                                  f"weights of shape {policy.weight.shape}", raw=True))
    d_in = policy.weight.shape[2] if policy.hidden_weight is None else policy.hidden_weight.shape[2]
    if d_in != lock.obs_dim:
        raise ValueError(expected("policy", f"observations of length {lock.obs_dim}", f"length {d_in}", raw=True))


def optimal_policy(lock: CombinationLock) -> Policy:
    """The lock's optimal policy as a linear policy on observations (it decodes the latent state).

    z_h(x)_a = sum_{good s} 1[a = advancing[h, s]] (R^T x)_s for rich observations (R the rotation), and the
    same on the one-hot (h, s) coordinates of a tabular lock; the greedy action is optimal whenever the
    noise leaves the latent coordinate of the state the largest (noise 0.1: always, in practice).

    Args:
        lock: :class:`jaxcore.rl.CombinationLock`.

    Returns:
        :class:`Policy` (linear), greedy-optimal.

    Examples:
        >>> from jaxcore.rl import make_lock
        >>> lock = make_lock(jax.random.key(0), horizon=4, num_actions=4)
        >>> float(evaluate(jax.random.key(1), lock, optimal_policy(lock), 200).success_rate)
        1.0
    """
    if not isinstance(lock, CombinationLock):
        raise TypeError(expected("lock", "a CombinationLock (make_lock)", type(lock).__name__, raw=True))
    return _optimal_policy(lock)


@eqx.filter_jit
def _optimal_policy(lock: CombinationLock) -> Policy:
    dt = lock.noise.dtype
    H, S, A, G = lock.horizon, lock.num_latent, lock.num_actions, lock.num_good
    pick = jax.nn.one_hot(lock.advancing, A, dtype=dt)  # [H, G, A]
    if lock.tabular:
        sel = jnp.zeros((H, A, lock.obs_dim), dt)
        cols = jnp.arange(H)[:, None] * S + jnp.arange(G)[None, :]  # [H, G]
        sel = sel.at[jnp.arange(H)[:, None, None], jnp.arange(A)[None, None, :], cols[:, :, None]].add(pick)
        return Policy(sel, jnp.zeros((H, A), dt))
    w = jnp.einsum("hga,dg->had", pick, lock.rotation[:, :G])
    return Policy(w, jnp.zeros((H, A), dt))


class EvaluationResult(NamedTuple):
    """Result of :func:`evaluate`.

    Attributes:
        mean_return: scalar, the average undiscounted return.
        success_rate: scalar in [0, 1], the fraction of episodes that reached the goal.
        returns: ``[num_episodes]`` returns.

    Examples:
        >>> EvaluationResult._fields
        ('mean_return', 'success_rate', 'returns')
    """

    mean_return: Float[Array, ""]
    success_rate: Float[Array, ""]
    returns: Float[Array, " N"]


def step_keys(key, num_steps: int):
    """``[num_steps, 2]`` keys, split once outside a loop (two random draws per step inside it)."""
    return jax.random.split(key, (num_steps, 2))


def draws(keys_t, lock: CombinationLock):
    """The randomness of one step: 4 + A uniforms and the observation noise (two draws in all).

    u[0], u[1]: the transition (next good state, anti-shaped coin); u[2]: the epsilon coin;
    u[3]: the uniform random action; u[4:]: Gumbel noise of a softmax action.
    """
    u = jax.random.uniform(keys_t[0], (4 + lock.num_actions,), lock.noise.dtype)
    return u, _noise(keys_t[1], lock)


def choose(u, z, greedy: bool, epsilon, num_actions: int):
    """Greedy or softmax (Gumbel-max) action of scores ``z``, uniform with probability ``epsilon``."""
    if greedy:
        a = jnp.argmax(z)
    else:
        g = jnp.clip(u[4:], 1e-12, 1.0 - 1e-7)
        a = jnp.argmax(z - jnp.log(-jnp.log(g)))
    rnd = jnp.minimum((u[3] * num_actions).astype(jnp.int32), num_actions - 1)
    return jnp.where(u[2] < epsilon, rnd, a.astype(jnp.int32)).astype(jnp.int32)


def env_step(u, eps, state, action, lock):
    """Transition and next observation from one step's draws."""
    nxt, r, success = _advance(u[0], u[1], state, action, lock)
    return _emit(eps, nxt, lock), nxt, r, success


def _episode(key, lock, policy, greedy, epsilon):
    k0, key = jax.random.split(key)
    obs, state = reset(k0, lock)

    def body(carry, kt):
        obs, state, ret, succ = carry
        u, eps = draws(kt, lock)
        a = choose(u, policy_logits(policy, state.level, obs, check_level=False), greedy, epsilon, lock.num_actions)
        obs, nxt, r, s = env_step(u, eps, state, a, lock)
        return (obs, nxt, ret + r, succ | s), None

    init = (obs, state, jnp.zeros((), obs.dtype), jnp.zeros((), bool))
    (_, _, ret, succ), _ = jax.lax.scan(body, init, step_keys(key, lock.horizon))
    return ret, succ


@partial(jax.jit, static_argnames=("num_episodes", "greedy"))
def _evaluate(key, lock, policy, num_episodes, greedy, epsilon):
    rets, succ = jax.vmap(lambda k: _episode(k, lock, policy, greedy, epsilon))(jax.random.split(key, num_episodes))
    return EvaluationResult(jnp.mean(rets), jnp.mean(succ.astype(rets.dtype)), rets)


def evaluate(
    key: PRNGKeyArray, lock: CombinationLock, policy: Policy, num_episodes: int = 1000, *,
    greedy: bool = True, epsilon: float = 0.0,
) -> EvaluationResult:
    """Average return and success rate of ``policy`` over ``num_episodes`` vmapped episodes.

    Args:
        key: PRNG key.
        lock: :class:`jaxcore.rl.CombinationLock`.
        policy: :class:`Policy` with the lock's H, A and d.
        num_episodes: episodes (>= 1), run in parallel.
        greedy: act by argmax of the scores (True) or sample the softmax policy (False).
        epsilon: probability in [0, 1] of a uniform random action at each step.

    Returns:
        :class:`EvaluationResult`.

    Raises:
        TypeError / ValueError: a bad argument (named in the message).

    Examples:
        >>> from jaxcore.rl import make_lock
        >>> lock = make_lock(jax.random.key(0), horizon=4, num_actions=4)
        >>> res = evaluate(jax.random.key(1), lock, init_policy(jax.random.key(2), 4, 4, lock.obs_dim), 200)
        >>> float(res.success_rate)   # the zero policy always plays action 0
        0.0
    """
    check_key(key)
    _check_pair(lock, policy)
    num_episodes = check_int(num_episodes, "num_episodes", minimum=1)
    greedy = check_bool(greedy, "greedy")
    epsilon = check_scalar(epsilon, "epsilon", low=0.0, high=1.0)
    return _evaluate(key, lock, policy, num_episodes, greedy, jnp.asarray(epsilon, lock.noise.dtype))
