"""Next-event prediction, sampling, generation and evaluation terms of a jump-diffusion TPP (package-internal).

The compiled programs behind :meth:`jaxcore.tpp.JumpDiffusion.predict_next`, ``sample_next``, ``generate``
and ``evaluation_terms`` (and so behind the classical processes' methods and the functions
:func:`jaxcore.tpp.predict_next`, :func:`jaxcore.tpp.sample_next`, :func:`jaxcore.tpp.generate`).

Next-event prediction follows Zhang et al. (ICML 2024, Sec. 4.3): after event ``i`` the intensity is
integrated forward (drift only) and the next time is the mean of the predicted density
``p(s) = lambda(s) exp(-int_{t_i}^s lambda)``, ``E[t_{i+1}] = t_i + int_0^H tau p(t_i + tau) dtau`` (mass
beyond the horizon ``H`` is placed at ``H``); the type is ``argmax_k int lambda_k(s) exp(-int lambda) ds``.
Sampling inverts the same discretised compensator at ``E ~ Exp(1)`` (time rescaling).

References:
    Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024, Sec. 4.3.
    E. N. Brown, R. Barbieri, V. Ventura, R. E. Kass, L. M. Frank, "The time-rescaling theorem and its
    application to neural spike train data analysis", Neural Computation 14(2), 2002.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxcore._util import check_bool, check_int, check_key, check_scalar, expected, is_concrete

from ._integrate import prepare_solve, solve_batch
from .base import EvaluationTerms, GeneratedEvents, NextEventPrediction, NextEventSamples

def grid_path(dynamics, method, eta, t, h, G):
    """The drift path from the post-jump state ``eta`` at ``t`` on ``G`` steps of ``h``: the compensator at each
    step's start and end ``[G]`` and the log-intensities at each step's start ``[G, K]``."""
    def step(carry, k):
        eta, lam_int = carry
        lam = jnp.exp(eta)
        if method == "exact":
            eta_next, d_int = dynamics.flow(t + k * h, eta, h)
        else:
            eta_next, d_int = eta + dynamics.drift(t + k * h, eta) * h, jnp.sum(lam) * h
        return (eta_next, lam_int + d_int), (lam_int, lam_int + d_int, eta)

    return jax.lax.scan(step, (eta, jnp.zeros((), eta.dtype)), jnp.arange(G, dtype=eta.dtype))[1]


def grid_path_sde(dynamics, eta, t, h, z):
    """:func:`grid_path` with the Brownian part: Euler-Maruyama steps ``eta + f h + g sqrt(h) z_k`` (``z``
    ``[G, K]`` standard normals) and the left-point compensator; also each step's end state ``[G, K]``."""
    sqrt_h = jnp.sqrt(h)

    def step(carry, x):
        eta, lam_int = carry
        k, zk = x
        f, g = dynamics.drift_and_diffusion(t + k * h, eta)
        eta_next = eta + f * h + g * sqrt_h * zk
        d_int = jnp.sum(jnp.exp(eta)) * h
        return (eta_next, lam_int + d_int), (lam_int, lam_int + d_int, eta, eta_next)

    G = z.shape[0]
    return jax.lax.scan(step, (eta, jnp.zeros((), eta.dtype)), (jnp.arange(G, dtype=eta.dtype), z))[1]


def predict_impl(args, horizon, G):
    dynamics, batch, method = args[0], args[1], args[3]
    res = solve_batch(*args)
    dtype = batch.times.dtype
    h = jnp.asarray(horizon, dtype) / G
    tau = (jnp.arange(G, dtype=dtype) + 0.5) * h

    def after_event(eta_pre, t, m):
        starts, ends, etas = grid_path(dynamics, method, eta_pre + dynamics.jump(t, eta_pre)[:, m], t, h, G)
        lams = jnp.exp(etas)
        p_step = jnp.exp(-starts) * -jnp.expm1(-(ends - starts))  # P(next event in this step)
        dens = p_step[:, None] * lams / jnp.maximum(jnp.sum(lams, -1, keepdims=True), jnp.finfo(dtype).tiny)
        lam_int = ends[-1]
        total = jnp.sum(dens, axis=1)  # [G] probability of the next event in each step
        tail = jnp.exp(-lam_int)
        mean = jnp.sum(total * tau) + tail * horizon
        probs = jnp.sum(dens, axis=0)
        probs = probs / jnp.maximum(jnp.sum(probs), jnp.finfo(dtype).tiny)
        return t + mean, probs

    f = jax.vmap(jax.vmap(after_event))
    time, probs = f(res.eta_events, batch.times, batch.marks)
    valid = batch.mask & jnp.concatenate([batch.mask[:, 1:], jnp.zeros((batch.num_sequences, 1), bool)], axis=1)
    return NextEventPrediction(time, jnp.argmax(probs, axis=-1).astype(jnp.int32), probs, valid)


predict_program = eqx.filter_jit(predict_impl)


def noisy_flag(args, stochastic, method) -> bool:
    """Whether a draw includes the Brownian part (``stochastic`` checked; the model must have a diffusion)."""
    stochastic = check_bool(stochastic, "stochastic")
    if stochastic and method == "exact":
        raise ValueError(expected("method", "'scan' with stochastic=True (the exact flow is the drift's)", method))
    return stochastic and bool(args[0].stochastic)


def with_history_noise(args, key, noisy):
    """``(args, key)``: with ``noisy`` the history's solve gets its own Brownian key split from ``key``."""
    if not noisy:
        return args, key
    key, k_hist = jax.random.split(key)
    return (args[0], args[1], k_hist) + tuple(args[3:]), key


def prepare_draws(key, dynamics, batch, horizon, num_grid, num_substeps, convention, method, stochastic):
    """The checks shared by sampling and generation: ``(solver arguments, num_grid, noisy)``."""
    check_key(key)
    if method not in ("scan", "exact"):
        raise ValueError(expected("method", "'scan' or 'exact'", method))
    if is_concrete(horizon):
        check_scalar(horizon, "horizon", positive=True)
    G = check_int(num_grid, "num_grid", minimum=1)
    args = prepare_solve(dynamics, batch, None, method, num_substeps, convention)
    return args, G, noisy_flag(args, stochastic, method)


def draw_setup(args, horizon, G):
    dynamics, batch, method = args[0], args[1], args[3]
    dtype = batch.times.dtype
    return dynamics, batch, method, solve_batch(*args), dtype, jnp.asarray(horizon, dtype) / G, jnp.finfo(dtype).tiny


def sample_impl(args, key, horizon, G, S, noisy=False):
    args, key = with_history_noise(args, key, noisy)
    dynamics, batch, method, res, dtype, h, tiny = draw_setup(args, horizon, G)
    K = dynamics.initial_state().shape[0]

    def invert(starts, ends, lams, E):
        j = jnp.minimum(jnp.searchsorted(ends, E), G - 1)  # the step whose end first reaches E
        frac = jnp.clip((E - starts[j]) / jnp.maximum(ends[j] - starts[j], tiny), 0.0, 1.0)
        return j, frac, lams[j]

    def after_event(eta_pre, t, m, k):
        eta = eta_pre + dynamics.jump(t, eta_pre)[:, m]
        k_e, k_m = jax.random.split(k)
        E = jax.random.exponential(k_e, (S,), dtype)
        if noisy:  # one Brownian grid path per draw
            k_m, k_z = jax.random.split(k_m)
            z = jax.random.normal(k_z, (S, G, K), dtype)
            starts, ends, etas, _ = jax.vmap(lambda zz: grid_path_sde(dynamics, eta, t, h, zz))(z)
            j, frac, lam_j = jax.vmap(invert)(starts, ends, jnp.exp(etas), E)
            accepted = E <= ends[:, -1]
        else:
            starts, ends, etas = grid_path(dynamics, method, eta, t, h, G)
            j, frac, lam_j = invert(starts, ends, jnp.exp(etas), E)
            accepted = E <= ends[-1]
        dt = jnp.where(accepted, (j + frac) * h, horizon)
        probs = lam_j / jnp.maximum(jnp.sum(lam_j, -1, keepdims=True), tiny)
        typ = jax.random.categorical(k_m, jnp.log(jnp.maximum(probs, tiny)))
        return t + dt, typ.astype(jnp.int32), probs, accepted

    B, L = batch.times.shape
    keys = jax.random.split(key, (B, L))
    out = jax.vmap(jax.vmap(after_event))(res.eta_events, batch.times, batch.marks, keys)
    return NextEventSamples(*out)


sample_program = eqx.filter_jit(sample_impl)


def generate_impl(args, key, horizon, G, n_new, noisy=False):
    args, key = with_history_noise(args, key, noisy)
    dynamics, batch, method, res, dtype, h, tiny = draw_setup(args, horizon, G)
    K = dynamics.initial_state().shape[0]

    def one(eta_events, times, marks, mask, k):
        count = jnp.sum(mask)
        i = jnp.maximum(count - 1, 0)
        after = eta_events[i] + dynamics.jump(times[i], eta_events[i])[:, marks[i]]
        eta0 = jnp.where(count > 0, after, dynamics.initial_state().astype(dtype))
        t0 = jnp.where(count > 0, times[i], 0.0)

        def draw(carry, kk):
            eta, t, alive = carry
            if noisy:
                kk, k_z, k_b = jax.random.split(kk, 3)
                z = jax.random.normal(k_z, (G, K), dtype)
                starts, ends, etas, nexts = grid_path_sde(dynamics, eta, t, h, z)
            else:
                starts, ends, etas = grid_path(dynamics, method, eta, t, h, G)
            k_e, k_m = jax.random.split(kk)
            E = jax.random.exponential(k_e, (), dtype)
            j = jnp.minimum(jnp.searchsorted(ends, E), G - 1)
            frac = jnp.clip((E - starts[j]) / jnp.maximum(ends[j] - starts[j], tiny), 0.0, 1.0)
            t_j = t + j.astype(dtype) * h
            if noisy:  # the Brownian bridge between the step's ends
                bridge = jnp.sqrt(frac * (1.0 - frac) * h) * jax.random.normal(k_b, (K,), dtype)
                eta_t = etas[j] + frac * (nexts[j] - etas[j]) + dynamics.diffusion(t_j, etas[j]) * bridge
            elif method == "exact":
                eta_t = dynamics.flow(t_j, etas[j], frac * h)[0]
            else:
                eta_t = etas[j] + dynamics.drift(t_j, etas[j]) * frac * h
            ok = alive & (E <= ends[-1])
            t_new = t_j + frac * h
            m = jax.random.categorical(k_m, eta_t).astype(jnp.int32)  # probabilities lambda_k / sum lambda
            eta_new = eta_t + dynamics.jump(t_new, eta_t)[:, m]
            carry = (jnp.where(ok, eta_new, eta), jnp.where(ok, t_new, t), ok)
            return carry, (jnp.where(ok, t_new, t + horizon), m, ok)

        return jax.lax.scan(draw, (eta0, t0, jnp.ones((), bool)), jax.random.split(k, n_new))[1]

    keys = jax.random.split(key, batch.num_sequences)
    out = jax.vmap(one)(res.eta_events, batch.times, batch.marks, batch.mask, keys)
    return GeneratedEvents(*out)


generate_program = eqx.filter_jit(generate_impl)


def evaluation_terms_impl(dyn, batch, key, horizon, num_substeps, num_samples, method, num_grid):
    """The likelihoods (averaged over ``num_samples`` Brownian paths with a ``key``, else drift-only), the
    drift-only predictions and the rescaled gaps of a jump-diffusion, in one program."""
    args = prepare_solve(dyn, batch, None, method, num_substeps)
    res = solve_batch(*args)
    if key is None:
        lls = res.log_likelihood
    else:
        def one(k):
            return solve_batch(args[0], batch, k, *args[3:]).log_likelihood

        lls = jnp.mean(jax.vmap(one)(jax.random.split(key, num_samples)), 0)
    pred = predict_impl(args, horizon, num_grid)
    return EvaluationTerms(lls, pred, res.interval_compensator)


evaluation_terms_program = eqx.filter_jit(evaluation_terms_impl)
