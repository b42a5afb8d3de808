"""Jump-diffusion SDE solver for log-intensities, with the point-process log-likelihood.

A temporal point process with ``K`` event types is written through its
log-intensity ``eta = log lambda`` (Zhang et al., ICML 2024, eq. 5)::

    d eta(t) = f(t, eta) dt + g(t, eta) * dW(t) + h(t, eta) dN(t)

``f`` (drift, ``[K]``), ``g`` (diagonal diffusion, ``[K]``) and ``h`` (jump,
``[K, K]``; column ``k`` is added to ``eta`` at an event of type ``k``). The
solver integrates ``eta`` together with the compensator
``Lambda(t) = int sum_k exp(eta_k(s)) ds`` between consecutive events, reads
``log lambda_{m_i}(t_i-) = eta_{m_i}(t_i-)`` at each event and then applies the
jump. The log-likelihood is ``sum_i eta_{m_i}(t_i-) - Lambda`` (eq. 3).

Three integrators:

- ``method="scan"`` (default): fixed steps on the augmented state ``(eta, Lambda)``
  with ``num_substeps`` equal steps per inter-event gap, written as two nested
  ``lax.scan`` s. The default ``scheme="exponential"`` is error-controlled: the
  exponential Euler step ``eta' = eta + h phi1(h d) f + g sqrt(h) z`` (``d`` the
  drift Jacobian's diagonal, ``phi1(x) = (e^x - 1)/x``) and the compensator as the
  exact integral of ``exp`` of the linearly interpolated ``eta`` over each step,
  ``h sum_k e^{eta_k} phi1(eta'_k - eta_k)``. It is exact for Poisson and
  self-correcting processes and second order (stable at any step) for Hawkes, where
  the first-order ``scheme="euler"`` (explicit Euler-Maruyama, left-point
  compensator; the reference code's) is 17% off a self-correcting likelihood at
  10 sub-steps (the ``tpp.solver_error`` benchmark tabulates both). Dynamics that bound their drift's
  Lipschitz constant (:meth:`JumpDiffusion.drift_lipschitz`; the NJDTPP does) switch
  a batch with a step ``h * bound > 1`` (a long gap, e.g. 5e5 time units) to the
  drift-implicit Euler step, stable at any step size, where explicit Euler would
  oscillate and overflow (a log-likelihood of -inf). The switch is decided on the
  host from concrete model and batch (under ``jit`` with traced ones, and inside
  ``train``, explicit Euler: a run-time switch cost the ``tpp.njdtpp_grad``
  gradient 2x, since reverse mode keeps both branches' residuals). The ``tpp.solver_scan_vs_diffrax``
  benchmark measures it several times faster than the diffrax path at equal
  steps (the fixed-step overhead of diffrax noted in diffrax issue 517).
- ``method="diffrax"``: ``diffrax.diffeqsolve`` per gap with any solver and
  step-size controller (``diffrax.Euler()`` + constant steps by default;
  e.g. ``diffrax.Tsit5()`` + ``PIDController`` for deterministic dynamics, or
  an SDE solver with a ``VirtualBrownianTree`` spanning the window).
- ``method="exact"``: the dynamics' closed-form drift flow
  (:meth:`JumpDiffusion.flow`), one step per gap, drift only. The classical
  processes have one; it is also the stable choice for them, since Euler on
  ``log lambda`` of a Hawkes process diverges once ``beta * step > 2``.

Both are ``vmap`` ped over the padded batch and differentiable end to end.

Likelihood conventions (``convention``):

- ``"window"``: the state starts at ``t = 0`` from ``initial_state()`` and the
  compensator runs over the whole window ``[0, T]`` (the exact likelihood).
- ``"paper"``: as in the NJDTPP reference code, the sequence is conditioned on
  its first event: the state starts just before ``t_1``, the first event only
  applies its jump, and the compensator runs over ``[t_1, t_L]``.

References:
    S. Zhang, C. Zhou, Y. Liu, P. Zhang, X. Lin, Z.-M. Ma, "Neural
    Jump-Diffusion Temporal Point Processes", ICML 2024, eqs. (3), (5)-(7).
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

import numpy as np

from jaxcore._util import check_finite, check_int, check_key, check_positive, expected, is_concrete

from ._checks import as_param, check_query_times
from .events import EventBatch, _check_batch_values, check_batch, check_marks


class JumpDiffusion(eqx.Module):
    """Abstract log-intensity dynamics ``d eta = f dt + g dW + h dN`` for ``K`` event types.

    Subclasses implement ``initial_state``, ``drift``, ``jump`` and, if
    ``stochastic`` is True, ``diffusion``. All take/return arrays for one
    sequence (the solver vmaps over the batch).

    References:
        Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024, eq. (5).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.tpp import EventBatch, JumpDiffusion, solve
        >>> class Constant(JumpDiffusion):      # a Poisson process of rate e^{-1}
        ...     def initial_state(self):
        ...         return -jnp.ones(1)
        ...     def drift(self, t, eta):
        ...         return jnp.zeros_like(eta)
        ...     def jump(self, t, eta):
        ...         return jnp.zeros((1, 1))
        >>> batch = EventBatch.from_sequences([[1.0]], T=2.0)
        >>> round(float(solve(Constant(), batch).log_likelihood[0]), 5)  # -1 - 2 e^{-1}
        -1.73576
    """

    stochastic: ClassVar[bool] = False

    def initial_state(self) -> Float[Array, " K"]:
        """``eta(0)`` (or ``eta(t_1-)`` under the paper convention), ``[K]``."""
        raise NotImplementedError

    def drift(self, t: Float[Array, ""], eta: Float[Array, " K"]) -> Float[Array, " K"]:
        """``f(t, eta)``, ``[K]`` per unit time."""
        raise NotImplementedError

    def diffusion(self, t: Float[Array, ""], eta: Float[Array, " K"]) -> Float[Array, " K"]:
        """Diagonal ``g(t, eta)``, ``[K]`` per sqrt(unit time). Zero unless overridden."""
        return jnp.zeros_like(eta)

    def drift_and_diffusion(self, t: Float[Array, ""], eta: Float[Array, " K"]) -> tuple[Array, Array]:
        """``(f(t, eta), g(t, eta))``; override to share work between the two (one fused evaluation)."""
        return self.drift(t, eta), self.diffusion(t, eta)

    def jump(self, t: Float[Array, ""], eta: Float[Array, " K"]) -> Float[Array, "K K"]:
        """``h(t, eta)``, ``[K, K]``; column ``k`` is added at an event of type ``k``."""
        raise NotImplementedError

    def drift_and_jacobian_diag(self, t: Float[Array, ""], eta: Float[Array, " K"]) -> tuple[Array, Array]:
        """``(f(t, eta), diag df/deta)``, both ``[K]``: the drift and its Jacobian's diagonal (one
        forward-mode tangent per event type), for the exponential step of ``scheme="exponential"``.
        Override to share work between the two."""
        fn = lambda e: self.drift(t, e)  # noqa: E731
        K = eta.shape[0]
        if K == 1:
            return jax.jvp(fn, (eta,), (jnp.ones_like(eta),))
        f, tangents = jax.vmap(lambda v: jax.jvp(fn, (eta,), (v,)))(jnp.eye(K, dtype=eta.dtype))
        return f[0], jnp.diagonal(tangents)

    def flow(self, t: Float[Array, ""], eta: Float[Array, " K"], h: Float[Array, ""]) -> tuple[Array, Array]:
        """Exact drift-only flow over ``[t, t + h]`` with no event inside.

        Returns ``(eta(t + h), int_t^{t+h} sum_k exp(eta_k(s)) ds)``: ``[K]`` and a
        scalar compensator increment. Implemented by dynamics with a closed form
        (the classical processes); used by ``method="exact"``.

        Raises:
            NotImplementedError: the dynamics has no closed-form flow.
        """
        raise NotImplementedError(f"{type(self).__name__} has no closed-form flow; use method='scan' or 'diffrax'")

    def _checked(self) -> JumpDiffusion:
        """This dynamics after the checks of its parameters: host checks when concrete, ``error_if``
        (once, before the solver's scan) when traced. Subclasses with constrained parameters override."""
        return self

    def drift_lipschitz(self) -> Array | None:
        """An upper bound of the drift's Lipschitz constant (``None``: unknown, the default).

        With a bound, ``solve(method="scan")`` on a concrete model and batch switches to the
        drift-implicit Euler step when some step ``h`` has ``h * bound > 1`` (a long gap, where
        explicit Euler is unstable); without one (or traced), explicit Euler.
        """
        return None

    @classmethod
    def has_flow(cls) -> bool:
        """Whether :meth:`flow` is implemented (``method="exact"`` available)."""
        return cls.flow is not JumpDiffusion.flow

    @property
    def num_marks(self) -> int:
        """``K``."""
        return self.initial_state().shape[0]


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


_CONVENTIONS = ("window", "paper")
_METHODS = ("scan", "diffrax", "exact")


def _phi1(z):
    """``(e^z - 1) / z`` (1 at 0), with a series near 0 so that value and gradient stay finite."""
    small = jnp.abs(z) < 1e-3
    zs = jnp.where(small, jnp.ones_like(z), z)
    return jnp.where(small, 1.0 + z * (0.5 + z * (1.0 / 6.0 + z / 24.0)), jnp.expm1(zs) / zs)


def _euler_segment(dyn, eta, t0, t1, z, n, unroll=True, implicit=False, scheme="exponential"):
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
            return jnp.sum(jnp.exp(eta) * _phi1(eta_new - eta)) * h
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
            eta_new = eta + _phi1(h * d) * f * h
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


def _euler_segment_remat(dyn, eta, t0, t1, z, n, implicit=False, scheme="exponential"):
    """:func:`_euler_segment` under ``jax.checkpoint``: reverse mode keeps only each gap's starting state
    and recomputes the sub-steps, instead of stacking every sub-step's activations over the whole
    sequence (``[L, n, B, width]`` buffers; the ``tpp.njdtpp_grad`` benchmark ran ~4x faster with it)."""
    return jax.checkpoint(lambda e, a, b, zz: _euler_segment(dyn, e, a, b, zz, n, implicit=implicit,
                                                             scheme=scheme))(
        eta, t0, t1, z)


def _diffrax_segment(dyn, eta, t0, t1, bm, n, solver, controller, max_steps):
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


def _solve_one(dyn, times, marks, mask, T, key, *, method, n, convention, solver, controller, max_steps, bm_tol,
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
            return _euler_segment_remat(dyn, eta, t0, t1, z, n, implicit, scheme)
    else:
        import diffrax

        bm = (diffrax.VirtualBrownianTree(jnp.minimum(t_start, 0.0), T + 1.0, tol=bm_tol, shape=(K + 1,), key=key)
              if stochastic else None)

        def segment(eta, t0, t1, idx):
            return _diffrax_segment(dyn, eta, t0, t1, bm, n, solver, controller, max_steps)

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


def solve(
    dynamics: JumpDiffusion,
    batch: EventBatch,
    key: PRNGKeyArray | None = None,
    *,
    method: str = "scan",
    num_substeps: int = 10,
    convention: str = "window",
    solver: Any = None,
    stepsize_controller: Any = None,
    max_steps: int = 4096,
    brownian_tol: float = 1e-3,
    scheme: str = "exponential",
) -> SolveResult:
    """Integrate the log-intensity jump-diffusion over each sequence; return likelihood parts.

    ``log L = sum_i eta_{m_i}(t_i-) - int sum_k exp(eta_k(s)) ds``, with ``eta``
    integrated between events and ``h(eta)[:, m_i]`` added at each event.

    Args:
        dynamics: a :class:`JumpDiffusion` (e.g. ``Hawkes(...).jump_diffusion()`` or an ``NJDTPP``).
        batch: ``B`` padded sequences.
        key: PRNG key for the Brownian motion (one independent path per
            sequence); ``None`` integrates the drift only (``g`` ignored).
        method: ``"scan"`` (fixed-step Euler-Maruyama in ``lax.scan``, default),
            ``"diffrax"``, or ``"exact"`` (closed-form drift flow, one step per gap;
            dynamics with :meth:`JumpDiffusion.flow` only, with ``key=None``).
        num_substeps: steps per inter-event gap (scan; initial/constant step
            ``gap / num_substeps`` for diffrax).
        scheme: the scan's step (``method="scan"`` only): ``"exponential"`` (default; the
            exponential Euler step with the drift Jacobian's diagonal and the exact integral of
            ``exp`` of the linearly interpolated log-intensity: exact for Poisson and
            self-correcting processes, second order for Hawkes, within 0.01% of the exact
            Hawkes likelihood at 10 sub-steps) or ``"euler"`` (explicit Euler-Maruyama with the
            left-point compensator, first order: -17% on a self-correcting process at 10
            sub-steps; the NJDTPP reference code's scheme).
        convention: ``"window"`` (``[0, T]``, default) or ``"paper"`` (``[t_1, t_L]``).
        solver: a diffrax solver (default ``diffrax.Euler()``), diffrax method only.
        stepsize_controller: a diffrax controller (default ``ConstantStepSize()``).
        max_steps: diffrax step budget per gap.
        brownian_tol: tolerance of the ``VirtualBrownianTree`` (diffrax, stochastic only).

    Returns:
        A :class:`SolveResult` of ``[B]``/``[B, L]`` arrays.

    Raises:
        TypeError: ``dynamics`` is not a JumpDiffusion, ``batch`` not an EventBatch, ``key``
            not a PRNG key.
        ValueError: unknown ``method``/``convention``, bad ``num_substeps``,
            ``method="exact"`` for dynamics without a closed-form flow or with a
            ``key``, or the batch's number of marks differs from the dynamics'.

    References:
        Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024, eqs. (3), (5)-(7).

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import NJDTPP, EventBatch, Hawkes, solve
        >>> batch = EventBatch.from_sequences([[0.5, 1.0, 4.0]], T=5.0)
        >>> exact = solve(Hawkes(0.2, 0.8, 1.0).jump_diffusion(), batch, method="exact")
        >>> expo = solve(Hawkes(0.2, 0.8, 1.0).jump_diffusion(), batch)        # default: 10 sub-steps
        >>> euler = solve(Hawkes(0.2, 0.8, 1.0).jump_diffusion(), batch, num_substeps=200, scheme="euler")
        >>> [round(float(r.log_likelihood[0]), 3) for r in (exact, expo)], round(float(euler.log_likelihood[0]), 2)
        ([-6.401, -6.403], -6.41)
    """
    return _solve_batch(*_solve_args(dynamics, batch, key, method, num_substeps, convention, solver,
                                     stepsize_controller, max_steps, brownian_tol, scheme))


_SCHEMES = ("exponential", "euler")


def _solve_args(dynamics, batch, key, method="scan", num_substeps=10, convention="window", solver=None,
                stepsize_controller=None, max_steps=4096, brownian_tol=1e-3, scheme="exponential") -> tuple:
    """Validate :func:`solve`'s arguments on the host; return those of :func:`_solve_batch`."""
    dynamics = as_jump_diffusion(dynamics)
    check_batch(batch)
    check_marks(batch, dynamics.num_marks)
    if method not in _METHODS:
        raise ValueError(expected("method", f"one of {_METHODS}", method))
    if method == "exact":
        if not dynamics.has_flow():
            raise ValueError(expected("method", f"'scan' or 'diffrax' for {type(dynamics).__name__}, which has no "
                                      "closed-form flow for 'exact'", "exact"))
        if key is not None and dynamics.stochastic:
            raise ValueError(expected("key", "None with method='exact' (it integrates the drift only)",
                                      "a PRNG key", raw=True))
    if convention not in _CONVENTIONS:
        raise ValueError(expected("convention", f"one of {_CONVENTIONS}", convention))
    n = check_int(num_substeps, "num_substeps", minimum=1)
    if scheme not in _SCHEMES:
        raise ValueError(expected("scheme", f"one of {_SCHEMES}", scheme))
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
            implicit = bool(float(_max_gap(batch, convention)) / n * float(lip) > 1.0)
    return (dynamics, batch, key, method, n, convention, solver, stepsize_controller, max_steps, brownian_tol,
            implicit, scheme)


@eqx.filter_jit
def _solve_batch(dynamics, batch, key, method, n, convention, solver, controller, max_steps, bm_tol,
                 implicit=False, scheme="exponential"):
    """The validated solve, compiled as one program (arrays traced, settings static); vmapped over sequences."""
    keys = jax.random.split(key, batch.num_sequences) if key is not None else None
    in_key = 0 if keys is not None else None

    def run(implicit):
        fn = lambda t, m, k, T_, kk: _solve_one(  # noqa: E731
            dynamics, t, m, k, T_, kk, method=method, n=n, convention=convention, solver=solver,
            controller=controller, max_steps=max_steps, bm_tol=bm_tol, implicit=implicit, scheme=scheme)
        return jax.vmap(fn, in_axes=(0, 0, 0, 0, in_key))(batch.times, batch.marks, batch.mask, batch.T, keys)

    return run(implicit)


def _max_gap(batch: EventBatch, convention: str) -> Array:
    """The longest stretch without an event that the solver integrates, over the batch."""
    t, k = batch.times, batch.mask
    prev = jnp.concatenate([jnp.zeros_like(t[:, :1]), t[:, :-1]], axis=1)
    gaps = jnp.where(k, t - prev, 0.0)
    if convention == "paper":
        gaps = gaps.at[:, 0].set(0.0)
        return jnp.max(gaps)
    last = jnp.max(jnp.where(k, t, 0.0), axis=1)
    return jnp.maximum(jnp.max(gaps), jnp.max(batch.T - last))


def log_likelihood(dynamics: JumpDiffusion, batch: EventBatch, key: PRNGKeyArray | None = None,
                   **kwargs: Any) -> Float[Array, " batch"]:
    """``[B]`` log-likelihoods (nats) from :func:`solve`; same arguments.

    Args:
        dynamics, batch, key, **kwargs: as :func:`solve`.

    Returns:
        ``[B]`` float log-likelihoods (nats).

    Raises:
        TypeError/ValueError: as :func:`solve`.

    References:
        Zhang et al., ICML 2024, eq. (3).

    Examples:
        >>> from jaxcore.tpp import EventBatch, Poisson, log_likelihood
        >>> batch = EventBatch.from_sequences([[0.5, 1.0]], T=2.0)
        >>> round(float(log_likelihood(Poisson(1.0).jump_diffusion(), batch, method="exact")[0]), 6)
        -2.0
    """
    return solve(dynamics, batch, key, **kwargs).log_likelihood


def intensity_path(
    dynamics: JumpDiffusion,
    times: Float[Array, " L"],
    marks: Any,
    mask: Any,
    grid: Float[Array, " G"],
    *,
    method: str = "scan",
) -> Float[Array, "G K"]:
    """Deterministic (drift-only) intensity ``lambda(s)`` of one sequence on a sorted time grid.

    Integrates with Euler steps between consecutive grid points and events
    (events are applied at the first grid step at or after them), for plots.

    Args:
        dynamics: the jump-diffusion.
        times, marks, mask: one sequence ``[L]``.
        grid: sorted query times ``[G]`` starting at 0.
        method: ``"scan"`` (Euler steps between grid points) or ``"exact"`` (the
            closed-form :meth:`JumpDiffusion.flow`).

    Returns:
        ``[G, K]`` intensities (events per unit time).

    Raises:
        TypeError: ``dynamics`` is not a JumpDiffusion.
        ValueError: unknown ``method`` or ``"exact"`` without a closed-form flow.

    References:
        Zhang et al., ICML 2024, Fig. 2 (learned vs true intensity).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.tpp import EventBatch, Hawkes, intensity_path
        >>> b = EventBatch.from_sequences([[1.0]], T=3.0)
        >>> lam = intensity_path(Hawkes(0.2, 0.8, 1.0).jump_diffusion(), b.times[0], b.marks[0], b.mask[0],
        ...                      jnp.array([0.0, 1.0, 2.0]), method="exact")
        >>> [round(float(x), 4) for x in lam[:, 0]]     # mu, then mu + alpha e^{-beta (t - 1)}
        [0.2, 0.2, 0.4943]
    """
    dynamics = as_jump_diffusion(dynamics)
    if method not in ("scan", "exact"):
        raise ValueError(expected("method", "'scan' or 'exact'", method))
    if method == "exact" and not dynamics.has_flow():
        raise ValueError(expected("method", f"'scan' for {type(dynamics).__name__}, which has no closed-form flow "
                                            "for 'exact'", "exact"))
    for name, x in (("times", times), ("marks", marks), ("mask", mask), ("grid", grid)):
        if x is None or not hasattr(x, "__len__") and not hasattr(x, "shape"):
            raise TypeError(expected(name, "a 1-D array", type(x).__name__, raw=True))
    times = as_param(times, "times")
    grid = as_param(grid, "grid")
    if times.ndim != 1:
        raise ValueError(expected("times", "shape [L] (one sequence)", f"shape {tuple(times.shape)}", raw=True))
    marks = jnp.asarray(marks)
    if not jnp.issubdtype(marks.dtype, jnp.integer):
        raise TypeError(expected("marks", "an integer array of event types", f"dtype {marks.dtype}", raw=True))
    mask = jnp.asarray(mask)
    if mask.dtype != jnp.bool_:
        raise TypeError(expected("mask", "a bool array", f"dtype {mask.dtype}", raw=True))
    for name, x in (("marks", marks), ("mask", mask)):
        if x.shape != times.shape:
            raise ValueError(expected(name, f"shape {tuple(times.shape)} (that of times)", f"shape {tuple(x.shape)}",
                                      raw=True))
    if grid.ndim != 1 or grid.shape[0] < 1:
        raise ValueError(expected("grid", "a non-empty 1-D array of query times", f"shape {tuple(grid.shape)}",
                                  raw=True))
    if is_concrete(times, marks, mask, grid):
        check_finite(times, "times")
        _check_batch_values(times[None], marks[None], mask[None], jnp.max(jnp.where(mask, times, 0.0))[None],
                            dynamics.num_marks)
        g = np.asarray(grid, np.float64)
        check_positive(g, "grid", allow_zero=True)
        if np.any(np.diff(g) < 0):
            raise ValueError(expected("grid", "sorted query times", grid))
    dynamics = dynamics._checked()
    return _intensity_path(dynamics, times.astype(grid.dtype), marks, mask, grid, method)


@eqx.filter_jit
def _intensity_path(dynamics, times, marks, mask, grid, method):
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


def as_jump_diffusion(model: Any, name: str = "dynamics") -> JumpDiffusion:
    """``model`` as a :class:`JumpDiffusion`: itself, or a classical model's ``model.jump_diffusion()``.

    Raises:
        TypeError: ``model`` is neither (a neural TPP has no jump-diffusion form).
    """
    if isinstance(model, JumpDiffusion):
        return model
    if callable(getattr(model, "jump_diffusion", None)):
        return model.jump_diffusion()
    raise TypeError(expected(name, "a jaxcore.tpp.JumpDiffusion or a classical model with jump_diffusion() "
                                   "(Poisson, Hawkes, SharedDecayHawkes, SelfCorrecting)", type(model).__name__,
                             raw=True))


def intensity(model: Any, batch: EventBatch, t: Float[Array, "batch query"], *, method: str | None = None,
              num_substeps: int = 10) -> Float[Array, "batch query K"]:
    """Conditional intensity ``lambda_k(t | H_t)`` of any model of the family, ``[B, Q, K]``: one convention.

    Events strictly before ``t`` count (at an event time, the intensity just before its jump). Classical
    models (``Poisson``, ``Hawkes``, ...) and neural TPPs (``RMTPP``, ``NHP``, ...) evaluate their own
    closed form (``model.intensity(batch, t)``); a :class:`JumpDiffusion` (NJDTPP, or
    ``model.jump_diffusion()``) is integrated drift-only from the last event before each query time:
    ``lambda(t) = exp(eta(t))`` with ``eta`` carried from that event's post-jump state.

    Args:
        model: a classical model, a neural TPP or a :class:`JumpDiffusion`.
        batch: the histories, ``B`` sequences.
        t: query times ``[B, Q]`` (any order; same unit as the batch).
        method: for a :class:`JumpDiffusion`: ``"exact"`` (the closed-form :meth:`JumpDiffusion.flow`;
            the default where it exists) or ``"scan"`` (``num_substeps`` exponential-Euler steps from the
            last event to each query and between events, the default otherwise). Ignored otherwise.
        num_substeps: sub-steps per interval for ``"scan"``.

    Returns:
        ``[B, Q, K]`` intensities (events per unit time).

    Raises:
        TypeError: ``model`` has neither ``intensity`` nor a jump-diffusion form; bad ``batch``.
        ValueError: ``t`` not ``[B, Q]`` non-negative finite times; unknown ``method``, or ``"exact"``
            without a closed-form flow.

    References:
        Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024, Eq. 4-5.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.tpp import EventBatch, Hawkes, intensity
        >>> b = EventBatch.from_sequences([[1.0]], T=3.0)
        >>> h = Hawkes(0.2, 0.8, 1.0)
        >>> t = jnp.array([[0.5, 1.0, 2.0]])
        >>> [round(float(x), 4) for x in intensity(h, b, t)[0, :, 0]]       # closed form
        [0.2, 0.2, 0.4943]
        >>> [round(float(x), 4) for x in intensity(h.jump_diffusion(), b, t)[0, :, 0]]   # its flow
        [0.2, 0.2, 0.4943]
    """
    if not isinstance(model, JumpDiffusion) and callable(getattr(model, "intensity", None)):
        return model.intensity(batch, t)
    dyn = as_jump_diffusion(model, "model")
    check_batch(batch)
    check_marks(batch, dyn.num_marks)
    t = check_query_times(t, batch.num_sequences)
    if method is None:
        method = "exact" if dyn.has_flow() else "scan"
    if method not in ("scan", "exact"):
        raise ValueError(expected("method", "'scan' or 'exact'", method))
    if method == "exact" and not dyn.has_flow():
        raise ValueError(expected("method", f"'scan' for {type(dyn).__name__}, which has no closed-form flow "
                                            "for 'exact'", "exact"))
    n = check_int(num_substeps, "num_substeps", minimum=1)
    return _intensity_batch(dyn._checked(), batch, t.astype(batch.times.dtype), method, n)


@eqx.filter_jit
def _intensity_batch(dyn, batch, t, method, n):
    """Drift-only intensity at query times, vmapped over sequences and queries (one program per shape)."""
    eta0 = dyn.initial_state().astype(batch.times.dtype)

    def segment(eta, t0, t1):
        if method == "exact":
            return dyn.flow(t0, eta, t1 - t0)[0]
        return _euler_segment(dyn, eta, t0, t1, None, n)[0]

    def one(times, marks, mask, T, query):
        res = _solve_one(dyn, times, marks, mask, T, None, method=method, n=n, convention="window", solver=None,
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
