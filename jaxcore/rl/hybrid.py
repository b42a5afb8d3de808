"""FOOBAR: forward observation matching, backward reinforcement learning (hybrid RL from observations alone).

The learner has offline *observations* D_0, ..., D_H (samples of the admissible state distributions
nu_h of some policy, no actions, no rewards) and online access through the trace model only (episodes
from the initial states). FOOBAR learns in two passes over the levels:

Forward (FAIL, moment matching), h = 0, ..., H-1: roll in with pi^f_0, ..., pi^f_{h-1} to level h,
take a uniform action a, observe x' at level h + 1, and solve the min-max game

    min_{pi in Pi_h} max_{f in F}  E_{x ~ D_{h+1}} f(x) - E_{x ~ d_h, a ~ U(A)} [ w_pi(x, a) f(x') ],

with w_pi the importance weight pi(a | x) / (1 / A), self-normalised over the samples (FAIL's estimate
with the weights divided by their sum: the same limit, a smaller variance). For the linear class
F = {f(x) = theta^T x : ||theta|| <= 1} the inner max is the moment gap ||mu_D - mu_pi||_2, whose square
the policy descends; for the MLP class the discriminator f(x) = v^T tanh(U x + c) ascends the
regularised gap E_D f - E_pi f - (lambda / 2)(E_D f^2 + E_pi f^2) while the policy descends it.

Backward (PSDP on traces), h = H-1, ..., 0: roll in with the forward policies to level h, take a
uniform action a, roll out with the backward policies pi^b_{h+1}, ..., pi^b_{H-1}, and regress the
return from h on (x, a) (per-action ridge regression, or an MLP); pi^b_h is greedy in the fit. The
output is pi^b, which competes with the best policy covered by the offline distributions.

Each pass uses ``num_samples`` episodes per level (``budget`` of them count, see :func:`foobar`):
2 H budget online episodes in all. Everything is one compiled program: ``lax.scan`` over the
levels, ``lax.fori_loop`` over the steps of an episode, ``vmap`` over episodes and over seeds.

References:
    Y. Song, J. A. Bagnell, A. Singh. "Hybrid Reinforcement Learning from Offline Observation
    Alone." ICML 2024, Algorithm 1 (FOOBAR), Algorithm 2 (PSDP-trace), Section 6.
    W. Sun, A. Vemula, B. Boots, J. A. Bagnell. "Provably Efficient Imitation Learning from
    Observation Alone." ICML 2019 (FAIL).
    J. A. Bagnell, S. Kakade, A. Ng, J. Schneider. "Policy Search by Dynamic Programming."
    NeurIPS 2003 (PSDP).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxcore._util import Progress, check_progress

from ._learners import (
    Cfg,
    check_budget,
    check_cfg,
    check_common,
    data_batched,
    empty_policy,
    fit_q,
    level_get,
    level_set,
    lock_batched,
    traces,
    unbatch,
)
from .data import OfflineData
from .lock import CombinationLock
from .policies import Policy, _evaluate, _init, _scores

__all__ = ["FoobarResult", "foobar"]


class FoobarResult(NamedTuple):
    """Result of :func:`foobar` (a leading seed axis on every field when a batch of keys is given).

    Attributes:
        policy: :class:`jaxcore.rl.Policy`, the backward (output) policy pi^b, greedy in its scores.
        forward_policy: :class:`jaxcore.rl.Policy`, the forward softmax policies pi^f.
        forward_loss: ``[H, num_updates]`` the forward objective per level and update (history).
        moment_gap: ``[H, 2]`` ||mu_D - mu_pi||_2 at level h + 1 under the uniform action (column 0)
            and under the learned pi^f_h (column 1), on the roll-in samples.
        q_residual: ``[H]`` root-mean-square residual of the backward return regression.
        rollin_good: ``[H]`` fraction of forward roll-ins in a good latent state at level h
            (a diagnostic from the simulator; the learner never sees latent states).
        num_online_episodes: int scalar, online episodes used (2 H budget).
        success_rate: scalar, the goal rate of the greedy pi^b over ``num_eval_episodes`` (NaN if 0).
        mean_return: scalar, its average return (NaN if ``num_eval_episodes`` is 0).

    Examples:
        >>> FoobarResult._fields[:3]
        ('policy', 'forward_policy', 'forward_loss')
    """

    policy: Policy
    forward_policy: Policy
    forward_loss: Float[Array, "H U"]
    moment_gap: Float[Array, "H 2"]
    q_residual: Float[Array, " H"]
    rollin_good: Float[Array, " H"]
    num_online_episodes: Int[Array, ""]
    success_rate: Float[Array, ""]
    mean_return: Float[Array, ""]


def _is_mean(w, feats, scale):
    """Importance-weighted mean sum_i w_i f_i / scale."""
    return jnp.sum(w[:, None] * feats, axis=0) / scale


def _disc(p, x):
    u, c, v = p
    return jnp.tanh(x @ u.T + c) @ v


def fit_forward(key, tr, valid, expert, num_actions, cfg: Cfg):
    """One FAIL level: the policy whose importance-weighted next observations match the expert's moments."""
    k_p, k_d = jax.random.split(key)
    x, a, xn = tr.obs, tr.action, tr.next_obs
    dt = x.dtype
    p0 = level_get(_init(k_p, 1, num_actions, x.shape[1], cfg.policy, cfg.hidden, 0.0, dt), 0)
    mu_e = jnp.mean(expert, axis=0)

    def weights(p):
        pi = jax.nn.softmax(_scores(p, x))
        return valid * jnp.take_along_axis(pi, a[:, None], axis=1)[:, 0]

    def scale_of(w):  # self-normalised: the weights sum to one (more stable than the 1/N sum)
        return jnp.maximum(jnp.sum(w), 1e-12)

    def gap(p):
        w = weights(p)
        return jnp.linalg.norm(mu_e - _is_mean(w, xn, scale_of(w)))

    if cfg.discriminator == "linear":
        opt = optax.adam(cfg.learning_rate)

        def loss(p):
            w = weights(p)
            d = mu_e - _is_mean(w, xn, scale_of(w))
            return jnp.sum(d * d)

        def body(carry, _):
            p, s = carry
            val, g = jax.value_and_grad(loss)(p)
            upd, s = opt.update(g, s, p)
            return (optax.apply_updates(p, upd), s), val

        (p, _), hist = jax.lax.scan(body, (p0, opt.init(p0)), None, length=cfg.num_updates)
    else:
        hdim = cfg.hidden
        k1, k2 = jax.random.split(k_d)
        q0 = (jax.random.normal(k1, (hdim, x.shape[1]), dt) / jnp.sqrt(jnp.asarray(x.shape[1], dt)),
              jnp.zeros((hdim,), dt), 0.1 * jax.random.normal(k2, (hdim,), dt))
        opt_p, opt_q = optax.adam(cfg.learning_rate), optax.adam(cfg.learning_rate * 0.1)
        lam = cfg.disc_reg

        def game(p, q):
            w = weights(p)
            f_e, f_n = _disc(q, expert), _disc(q, xn)
            wn = w / scale_of(w)
            return (jnp.mean(f_e) - jnp.sum(wn * f_n)
                    - 0.5 * lam * (jnp.mean(f_e ** 2) + jnp.sum(wn * f_n ** 2)))

        def body(carry, _):
            p, q, sp, sq = carry
            val, (gp, gq) = jax.value_and_grad(game, argnums=(0, 1))(p, q)
            up, sp = opt_p.update(gp, sp, p)
            uq, sq = opt_q.update(jax.tree_util.tree_map(jnp.negative, gq), sq, q)
            return (optax.apply_updates(p, up), optax.apply_updates(q, uq), sp, sq), val

        (p, _, _, _), hist = jax.lax.scan(body, (p0, q0, opt_p.init(p0), opt_q.init(q0)), None,
                                          length=cfg.num_updates)
    uniform = jnp.linalg.norm(mu_e - _is_mean(valid, xn, scale_of(valid)))
    return p, hist, jnp.stack([uniform, gap(p)])


def _foobar_one(key, lock: CombinationLock, data: OfflineData, budget, cfg: Cfg, progress: Progress):
    H, A, n = lock.horizon, lock.num_actions, cfg.num_samples
    k_init, k_fwd, k_bwd, k_eval = jax.random.split(key, 4)
    valid = (jnp.arange(n) < budget).astype(lock.noise.dtype)
    fwd0 = empty_policy(k_init, lock, cfg, cfg.policy)

    def forward(pf, h):
        kh = jax.random.fold_in(k_fwd, h)
        k_tr, k_fit = jax.random.split(kh)
        tr = traces(k_tr, lock, n, h, pf, False, 0.0, None)
        p, hist, gaps = fit_forward(k_fit, tr, valid, data.observations[h + 1], A, cfg)
        progress.update(h, {"moment_gap": gaps[1]})
        good = jnp.sum(valid * tr.good) / jnp.sum(valid)
        return level_set(pf, h, p), (hist, gaps, good)

    pf, (f_hist, gaps, good) = jax.lax.scan(forward, fwd0, jnp.arange(H))
    bwd0 = empty_policy(k_init, lock, cfg, cfg.policy)

    def backward(pb, h):
        kh = jax.random.fold_in(k_bwd, h)
        k_tr, k_fit = jax.random.split(kh)
        tr = traces(k_tr, lock, n, h, pf, False, 0.0, pb)
        p, resid = fit_q(k_fit, tr.obs, tr.action, tr.ret, valid, A, cfg, cfg.policy)
        return level_set(pb, h, p), resid

    pb, resid = jax.lax.scan(backward, bwd0, jnp.arange(H), reverse=True)
    if cfg.num_eval_episodes > 0:
        ev = _evaluate(k_eval, lock, pb, cfg.num_eval_episodes, True, jnp.zeros((), lock.noise.dtype))
        succ, ret = ev.success_rate, ev.mean_return
    else:
        succ = ret = jnp.full((), jnp.nan, lock.noise.dtype)
    return FoobarResult(pb, pf, f_hist, gaps, resid, good, (2 * H * budget).astype(jnp.int32), succ, ret)


@partial(jax.jit, static_argnames=("cfg", "lb", "db", "progress"))
def _foobar_program(keys, lock, data, budget, cfg, lb, db, progress):
    prog = Progress(progress, lock.horizon, "FOOBAR forward")
    fn = partial(_foobar_one, cfg=cfg, progress=prog)
    return jax.vmap(fn, in_axes=(0, 0 if lb else None, 0 if db else None, None))(keys, lock, data, budget)


def foobar(
    key: PRNGKeyArray,
    lock: CombinationLock,
    data: OfflineData,
    *,
    num_samples: int = 256,
    budget: int | Int[Array, ""] | None = None,
    policy: str = "linear",
    discriminator: str = "linear",
    hidden: int = 32,
    num_updates: int = 200,
    learning_rate: float = 0.5,
    ridge: float = 1e-3,
    disc_reg: float = 1.0,
    num_eval_episodes: int = 1000,
    progress=False,
) -> FoobarResult:
    """FOOBAR on a combination lock from observation-only offline data (forward FAIL, backward PSDP-trace).

    Args:
        key: one PRNG key, or a 1-d batch of S keys: S seeds run in parallel (``vmap``), every result
            field then has a leading S axis. ``lock`` and ``data`` may carry the same leading S axis
            (one lock and data set per seed) or be shared.
        lock: :class:`jaxcore.rl.CombinationLock` (the trace model: only ``reset`` and ``step`` are used).
        data: :class:`jaxcore.rl.OfflineData`; only ``data.observations`` is used.
        num_samples: episodes collected per level and pass (the compiled batch size).
        budget: episodes per level that count (<= ``num_samples``; the rest are masked out), an int or a
            traced int scalar, so that one compiled program serves a sweep over budgets. None: all.
        policy: policy class, ``"linear"`` or ``"mlp"`` (one hidden tanh layer of ``hidden`` units).
        discriminator: ``"linear"`` (closed-form inner max: the moment gap) or ``"mlp"``.
        hidden: hidden units of the MLP classes.
        num_updates: adam steps per level (forward game; MLP regression).
        learning_rate: adam step size of the forward policy (the discriminator and the MLP regression
            use a tenth of it).
        ridge: ridge penalty of the linear return regression.
        disc_reg: lambda, the L2 regulariser of the MLP discriminator.
        num_eval_episodes: episodes of the greedy output policy evaluated in the same program (0: none).
        progress: False, True (a progress bar over the forward levels) or ``fn(step, metrics)``.

    Returns:
        :class:`FoobarResult`.

    Raises:
        TypeError / ValueError: a bad argument (named in the message).

    References:
        Song, Bagnell & Singh, ICML 2024, Algorithms 1-2; Sun et al., ICML 2019 (FAIL).

    Examples:
        >>> from jaxcore.rl import collect_offline, make_lock
        >>> lock = make_lock(jax.random.key(0), horizon=4, num_actions=4)
        >>> data = collect_offline(jax.random.key(1), lock, 256)
        >>> res = foobar(jax.random.key(2), lock, data, num_samples=64, num_eval_episodes=200)
        >>> float(res.success_rate), int(res.num_online_episodes)
        (1.0, 512)
    """
    keys, batched = check_common(key, lock, {})
    cfg = check_cfg(num_samples, policy, discriminator, hidden, num_updates, learning_rate, ridge,
                    num_eval_episodes, disc_reg=disc_reg)
    s = keys.shape[0]
    lb = lock_batched(lock, s)
    db = data_batched(data, lock, s, lb)
    b = check_budget(budget, cfg.num_samples)
    progress = check_progress(progress)
    return unbatch(_foobar_program(keys, lock, data, b, cfg, lb, db, progress), batched)
