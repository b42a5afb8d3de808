"""The jump-diffusion integrator behind :func:`jaxcore.tpp.solve` (package-internal; see ``solver.py``).

The numerical core, written against any object with the :class:`jaxcore.tpp.JumpDiffusion` methods
(``initial_state``, ``drift``, ``diffusion``, ``jump``, ``flow``...): the fixed-step segments (exponential or
explicit Euler-Maruyama, drift-implicit Euler), the diffrax segment, the per-sequence solve with its two
likelihood conventions, the host-side validation of the solver's settings and the compiled programs
(the batched solve, the intensity at query times, the intensity path on a grid). ``solver.py`` holds the
public functions and :class:`jaxcore.tpp.JumpDiffusion`; ``_forecast.py`` the prediction programs.

References:
    S. Zhang, C. Zhou, Y. Liu, P. Zhang, X. Lin, Z.-M. Ma, "Neural Jump-Diffusion Temporal Point
    Processes", ICML 2024, eqs. (3), (5)-(7).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from jaxcore._util import check_int, check_key, expected, is_concrete

from .events import EventBatch, check_batch, check_marks

class SolveResult(NamedTuple):
    """Output of :func:`solve` for a batch of ``B`` sequences of padded length ``L``.

    Attributes:
        log_likelihood: ``[B]`` nats, ``log_intensity - compensator``.
        log_intensity: ``[B]`` ``sum_i log lambda_{m_i}(t_i-)`` over counted events.
        compensator: ``[B]`` integral of the total intensity over the likelihood's span.
        interval_compensator: ``[B, L]`` integral of the total intensity from the
            previous event (or the span's start) to event ``i`` (0 at padding and,
            under the paper convention, at the first event): the time-rescaled gaps.
        eta_events: ``[B, L, K]`` log-intensities just before each event.
        eta_final: ``[B, K]`` log-intensity at the end of the span (after the last jump).

    Examples:
        >>> from jaxcore.tpp import EventBatch, Poisson, solve
        >>> res = solve(Poisson(1.0).jump_diffusion(), EventBatch.from_sequences([[0.5]], T=1.0), method="exact")
        >>> res.log_likelihood.shape, res.eta_events.shape
        ((1,), (1, 1, 1))
    """

    log_likelihood: Array
    log_intensity: Array
    compensator: Array
    interval_compensator: Array
    eta_events: Array
    eta_final: Array


CONVENTIONS = ("window", "paper")
METHODS = ("scan", "diffrax", "exact")


def phi1(z):
    """``(e^z - 1) / z`` (1 at 0), with a series near 0 so that value and gradient stay finite."""
    small = jnp.abs(z) < 1e-3
    zs = jnp.where(small, jnp.ones_like(z), z)
    return jnp.where(small, 1.0 + z * (0.5 + z * (1.0 / 6.0 + z / 24.0)), jnp.expm1(zs) / zs)


def euler_segment(dyn, eta, t0, t1, z, n, unroll=True, implicit=False, scheme="exponential"):
    """``n`` steps of ``(eta, Lambda)`` from ``t0`` to ``t1``; ``z`` ``[n, K]`` standard normals or None.

    ``scheme="exponential"`` (default): the exponential (Rosenbrock) Euler step
    ``eta' = eta + h phi1(h d) f(eta)`` with ``d`` the diagonal of the drift's Jacobian and
    ``phi1(x) = (e^x - 1) / x`` (exact for a linear diagonal drift, second order for a diagonal one,
    stable at any step on a contracting one), plus ``g sqrt(h) z``; the compensator integrates
    ``exp`` of the log-intensity interpolated linearly over each step exactly:
    ``h sum_k e^{eta_k} phi1(eta'_k - eta_k)`` (exact for Poisson and self-correcting processes).
    ``scheme="euler"``: explicit Euler-Maruyama with the left-point compensator ``h sum exp(eta)``
    (first order; the NJDTPP reference code's scheme).

    ``implicit=True``: the drift-implicit (linearly implicit, Rosenbrock-Euler) step
    ``eta' = eta + (I - h J)^{-1} h f(eta)`` with ``J`` the drift's Jacobian, and the compensator
    at the step's end, ``Lambda' = Lambda + h sum exp(eta')`` (either scheme): stable at any step
    size on a contracting drift (a long inter-event gap), where explicit Euler oscillates and
    overflows, and right for a step much longer than the drift's relaxation time (the linear
    interpolation would spread the relaxation over the whole step).
    """
    h = (t1 - t0) / n
    sqrt_h = jnp.sqrt(h)
    expo = scheme == "exponential"

    def compensator(eta, eta_new):
        if expo:
            return jnp.sum(jnp.exp(eta) * phi1(eta_new - eta)) * h
        return jnp.sum(jnp.exp(eta)) * h

    def step(carry, zi):
        eta, lam, t = carry
        if implicit:
            f = dyn.drift(t, eta)
            J = jax.jacfwd(lambda e: dyn.drift(t, e))(eta)
            eye = jnp.eye(eta.shape[0], dtype=eta.dtype)
            eta_new = eta + jnp.linalg.solve(eye - h * J, f * h)
            if zi is not None:
                eta_new = eta_new + dyn.diffusion(t, eta) * sqrt_h * zi
            lam = lam + jnp.sum(jnp.exp(eta_new)) * h
            return (eta_new, lam, t + h), None
        if expo:
            f, d = dyn.drift_and_jacobian_diag(t, eta)
            eta_new = eta + phi1(h * d) * f * h
            if zi is not None:
                eta_new = eta_new + dyn.diffusion(t, eta) * sqrt_h * zi
        elif zi is not None:
            f, g = dyn.drift_and_diffusion(t, eta)
            eta_new = eta + f * h + g * sqrt_h * zi
        else:
            eta_new = eta + dyn.drift(t, eta) * h
        lam = lam + compensator(eta, eta_new)
        return (eta_new, lam, t + h), None

    xs = z if z is not None else None
    (eta, lam, _), _ = jax.lax.scan(step, (eta, jnp.zeros((), eta.dtype), t0), xs, length=n,
                                    unroll=unroll and n <= 16)
    return eta, lam


def euler_segment_remat(dyn, eta, t0, t1, z, n, implicit=False, scheme="exponential"):
    """:func:`euler_segment` under ``jax.checkpoint``: reverse mode keeps only each gap's starting state
    and recomputes the sub-steps, instead of stacking every sub-step's activations over the whole
    sequence (``[L, n, B, width]`` buffers; the ``tpp.njdtpp_grad`` benchmark ran ~4x faster with it)."""
    return jax.checkpoint(lambda e, a, b, zz: euler_segment(dyn, e, a, b, zz, n, implicit=implicit,
                                                             scheme=scheme))(
        eta, t0, t1, z)


def diffrax_segment(dyn, eta, t0, t1, bm, n, solver, controller, max_steps):
    import diffrax
    import lineax

    K = eta.shape[0]

    def f(t, y, args):
        e = y[:K]
        return jnp.concatenate([dyn.drift(t, e), jnp.sum(jnp.exp(e))[None]])

    terms: Any = diffrax.ODETerm(f)
    if bm is not None:
        def g(t, y, args):
            return lineax.DiagonalLinearOperator(jnp.concatenate([dyn.diffusion(t, y[:K]), jnp.zeros((1,), y.dtype)]))

        terms = diffrax.MultiTerm(terms, diffrax.ControlTerm(g, bm))
    y0 = jnp.concatenate([eta, jnp.zeros((1,), eta.dtype)])
    dt0 = jnp.maximum((t1 - t0) / n, jnp.finfo(eta.dtype).tiny)
    sol = diffrax.diffeqsolve(terms, solver, t0, t1, dt0, y0, stepsize_controller=controller,
                              max_steps=max_steps, saveat=diffrax.SaveAt(t1=True))
    y1 = sol.ys[0]
    return y1[:K], y1[K]


def solve_one(dyn, times, marks, mask, T, key, *, method, n, convention, solver, controller, max_steps, bm_tol,
               implicit=False, scheme="exponential"):
    K = dyn.initial_state().shape[0]
    L = times.shape[0]
    dtype = times.dtype
    eta0 = dyn.initial_state().astype(dtype)
    stochastic = dyn.stochastic and key is not None
    paper = convention == "paper"
    t_start = times[0] if paper else jnp.zeros((), dtype)
    t_end = jnp.where(jnp.any(mask), times[jnp.maximum(jnp.sum(mask) - 1, 0)], t_start) if paper else T

    if method == "exact":
        def segment(eta, t0, t1, idx):
            return dyn.flow(t0, eta, t1 - t0)
    elif method == "scan":
        z_all = jax.random.normal(key, (L + 1, n, K), dtype) if stochastic else None

        def segment(eta, t0, t1, idx):
            z = z_all[idx] if stochastic else None
            return euler_segment_remat(dyn, eta, t0, t1, z, n, implicit, scheme)
    else:
        import diffrax

        bm = (diffrax.VirtualBrownianTree(jnp.minimum(t_start, 0.0), T + 1.0, tol=bm_tol, shape=(K + 1,), key=key)
              if stochastic else None)

        def segment(eta, t0, t1, idx):
            return diffrax_segment(dyn, eta, t0, t1, bm, n, solver, controller, max_steps)

    def step(carry, x):
        eta, t_prev, log_sum, comp = carry
        t, m, valid, idx = x
        t = jnp.where(valid, t, t_prev)
        eta_new, lam = segment(eta, t_prev, t, idx)
        eta_new = jnp.where(valid, eta_new, eta)
        lam = jnp.where(valid, lam, 0.0)
        counted = valid & ~(paper & (idx == 0))
        log_sum = log_sum + jnp.where(counted, eta_new[m], 0.0)
        eta_jump = eta_new + dyn.jump(t, eta_new)[:, m]
        eta_out = jnp.where(valid, eta_jump, eta)
        return (eta_out, t, log_sum, comp + lam), (lam, eta_new)

    zero = jnp.zeros((), dtype)
    init = (eta0, t_start, zero, zero)
    (eta, t_last, log_sum, comp), (interval, eta_events) = jax.lax.scan(
        step, init, (times, marks, mask, jnp.arange(L)))
    if not paper:
        eta_T, lam_T = segment(eta, t_last, T, L)
        comp = comp + lam_T
        eta = eta_T
    return SolveResult(log_sum - comp, log_sum, comp, interval, eta_events, eta)



SCHEMES = ("exponential", "euler")


def prepare_solve(dynamics, batch, key, method="scan", num_substeps=10, convention="window", solver=None,
                stepsize_controller=None, max_steps=4096, brownian_tol=1e-3, scheme="exponential") -> tuple:
    """Validate :func:`solve`'s arguments on the host (``dynamics`` a JumpDiffusion); return those of
    :func:`solve_batch`."""
    check_batch(batch)
    check_marks(batch, dynamics.num_marks)
    if method not in METHODS:
        raise ValueError(expected("method", f"one of {METHODS}", method))
    if method == "exact":
        if not dynamics.has_flow():
            raise ValueError(expected("method", f"'scan' or 'diffrax' for {type(dynamics).__name__}, which has no "
                                      "closed-form flow for 'exact'", "exact"))
        if key is not None and dynamics.stochastic:
            raise ValueError(expected("key", "None with method='exact' (it integrates the drift only)",
                                      "a PRNG key", raw=True))
    if convention not in CONVENTIONS:
        raise ValueError(expected("convention", f"one of {CONVENTIONS}", convention))
    n = check_int(num_substeps, "num_substeps", minimum=1)
    if scheme not in SCHEMES:
        raise ValueError(expected("scheme", f"one of {SCHEMES}", scheme))
    if key is not None:
        check_key(key)
    if method == "diffrax":
        import diffrax

        solver = diffrax.Euler() if solver is None else solver
        stepsize_controller = diffrax.ConstantStepSize() if stepsize_controller is None else stepsize_controller
    elif solver is not None or stepsize_controller is not None:
        name = "solver" if solver is not None else "stepsize_controller"
        raise ValueError(expected(name, f"None unless method='diffrax' (only used with method='diffrax'; "
                                        f"method={method!r})", type(solver if solver is not None
                                                                   else stepsize_controller).__name__, raw=True))
    dynamics = dynamics._checked()
    # drift-implicit Euler when some step is too long for explicit Euler; decided on the host from
    # concrete values (a static setting: the differentiated program holds one branch only). The
    # compensator of the implicit step is right-point: over a step much longer than the drift's
    # relaxation time, the log-intensity sits at its equilibrium for nearly all of it, where the
    # linear interpolation of the exponential scheme would spread the relaxation over the step.
    implicit = False
    if method == "scan" and is_concrete(dynamics, batch):
        lip = dynamics.drift_lipschitz()
        if lip is not None:
            implicit = bool(float(max_gap(batch, convention)) / n * float(lip) > 1.0)
    return (dynamics, batch, key, method, n, convention, solver, stepsize_controller, max_steps, brownian_tol,
            implicit, scheme)


@eqx.filter_jit
def solve_batch(dynamics, batch, key, method, n, convention, solver, controller, max_steps, bm_tol,
                 implicit=False, scheme="exponential"):
    """The validated solve, compiled as one program (arrays traced, settings static); vmapped over sequences."""
    keys = jax.random.split(key, batch.num_sequences) if key is not None else None
    in_key = 0 if keys is not None else None

    def run(implicit):
        fn = lambda t, m, k, T_, kk: solve_one(  # noqa: E731
            dynamics, t, m, k, T_, kk, method=method, n=n, convention=convention, solver=solver,
            controller=controller, max_steps=max_steps, bm_tol=bm_tol, implicit=implicit, scheme=scheme)
        return jax.vmap(fn, in_axes=(0, 0, 0, 0, in_key))(batch.times, batch.marks, batch.mask, batch.T, keys)

    return run(implicit)


def max_gap(batch: EventBatch, convention: str) -> Array:
    """The longest stretch without an event that the solver integrates, over the batch."""
    t, k = batch.times, batch.mask
    prev = jnp.concatenate([jnp.zeros_like(t[:, :1]), t[:, :-1]], axis=1)
    gaps = jnp.where(k, t - prev, 0.0)
    if convention == "paper":
        gaps = gaps.at[:, 0].set(0.0)
        return jnp.max(gaps)
    last = jnp.max(jnp.where(k, t, 0.0), axis=1)
    return jnp.maximum(jnp.max(gaps), jnp.max(batch.T - last))


@eqx.filter_jit
def intensity_path_program(dynamics, times, marks, mask, grid, method):
    """The drift-only intensity path of one sequence, one program per shape and method."""
    eta0 = dynamics.initial_state().astype(grid.dtype)

    def step(carry, t):
        eta, t_prev, i = carry
        if method == "exact":
            eta = dynamics.flow(t_prev, eta, t - t_prev)[0]
        else:
            eta = eta + dynamics.drift(t_prev, eta) * (t - t_prev)
        lam = jnp.exp(eta)

        def apply(state):
            eta, i = state
            hit = (i < times.shape[0]) & mask[jnp.minimum(i, times.shape[0] - 1)] & (
                times[jnp.minimum(i, times.shape[0] - 1)] <= t)
            m = marks[jnp.minimum(i, times.shape[0] - 1)]
            eta = jnp.where(hit, eta + dynamics.jump(t, eta)[:, m], eta)
            return eta, i + hit.astype(i.dtype)

        def more(state):
            eta, i = state
            j = jnp.minimum(i, times.shape[0] - 1)
            return (i < times.shape[0]) & mask[j] & (times[j] <= t)

        eta, i = jax.lax.while_loop(more, apply, (eta, i))
        return (eta, t, i), lam

    _, lam = jax.lax.scan(step, (eta0, grid[0], jnp.zeros((), jnp.int32)), grid)
    return lam


@eqx.filter_jit
def intensity_program(dyn, batch, t, method, n):
    """Drift-only intensity at query times, vmapped over sequences and queries (one program per shape)."""
    eta0 = dyn.initial_state().astype(batch.times.dtype)

    def segment(eta, t0, t1):
        if method == "exact":
            return dyn.flow(t0, eta, t1 - t0)[0]
        return euler_segment(dyn, eta, t0, t1, None, n)[0]

    def one(times, marks, mask, T, query):
        res = solve_one(dyn, times, marks, mask, T, None, method=method, n=n, convention="window", solver=None,
                         controller=None, max_steps=0, bm_tol=0.0)
        post = res.eta_events + jax.vmap(lambda ti, e, m: dyn.jump(ti, e)[:, m])(times, res.eta_events, marks)

        def at(q):
            j = jnp.sum(mask & (times < q))  # events strictly before q (real events come first)
            i = jnp.maximum(j - 1, 0)
            start_t = jnp.where(j > 0, times[i], jnp.zeros((), times.dtype))
            start = jnp.where(j > 0, post[i], eta0)
            return jnp.exp(segment(start, start_t, q))

        return jax.vmap(at)(query)

    return jax.vmap(one)(batch.times, batch.marks, batch.mask, batch.T, t)
