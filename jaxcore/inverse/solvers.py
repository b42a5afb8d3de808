"""Restoration solvers: one class per algorithm under :class:`AbstractRestorer`, and the loop that drives them.

Problem: ``min_x F(x, y) + alpha R_sigma(x)`` with ``F(x, y) = ||A x - y||^2 / (2 sigma_y^2)``
(:mod:`jaxcore.inverse.operators`) and a denoiser ``D_sigma`` as the prior (:mod:`jaxcore.inverse.denoisers`).
A solver says how one iterate follows the last (:meth:`AbstractRestorer.step`, given the step's row of the
:class:`~jaxcore.inverse.Schedule`); :func:`restore` validates the problem once and runs the loop, written
once here for every solver: a ``lax.scan`` along the schedule that clips to [0, 1], tracks PSNR and the data
term, and reports progress. :func:`~jaxcore.inverse.restore_batch` drives the same loop over images and seeds.

The solvers (concrete classes are final: subclass :class:`AbstractRestorer`, never a solver):

- :class:`SNORE`: ``x <- x - delta grad F(x) - delta alpha/sigma^2 (x - mean_j D_sigma(x + sigma z_j))``,
  ``z_j ~ N(0, I)``; ``prox=True``: ``x <- prox_{delta F}(x - delta alpha/sigma^2 (x - D_sigma(x + sigma z)))``.
- :class:`RED`: ``x <- x - delta (grad F(x) + alpha/sigma^2 (x - D_sigma(x)))`` (``prox=True``: RED-Prox).
- :class:`PnPPGD`: ``x <- D_sigma(x - tau grad F(x))``; :class:`PnPHQS`: ``x <- D_sigma(prox_{tau F}(x))``.

This is diffrax's solver pattern: a solver is an ``eqx.Module`` with ``init`` (its state before the first
step) and ``step``; its options are static fields, so one compiled program serves a solver class, its
options, the operator type and the shapes. There is no ``terminate``: the schedule fixes the number of steps.

Dtypes: images are float arrays (integer images are refused: convert explicitly, e.g. ``y / 255``); a
solver runs in the dtype of ``x0`` (default ``y``), except half precision (float16, bfloat16), which runs in
float32 internally (the schedule must still be finite in the half dtype) and returns ``x`` cast back to the
half dtype (the histories stay float32). Every check runs before the loop: the loop body holds none.

References:
    Renaud, Prost, Leclaire & Papadakis, "Plug-and-play image restoration with stochastic denoising
    regularization", ICML 2024, Algorithms 1-2 (SNORE, Annealed SNORE). Romano, Elad & Milanfar, "The little
    engine that could: regularization by denoising (RED)", SIAM J. Imaging Sci. 2017. Venkatakrishnan, Bouman
    & Wohlberg, "Plug-and-play priors for model based reconstruction", GlobalSIP 2013. Zhang et al.,
    "Plug-and-play image restoration with deep denoiser prior", IEEE TPAMI 2021 (HQS).
"""

import abc
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import (
    Progress,
    ProgressArg,
    check_bool,
    check_int,
    check_key,
    check_ndim,
    check_progress,
    expected,
    trusted_values,
)

from ._checks import as_array, compute_dtype
from .denoisers import AbstractDenoiser
from .metrics import _psnr
from .operators import AbstractOperator, _normal
from .schedules import Schedule, _check_schedule, _checked_values

__all__ = ["RestorationResult", "RestorationProblem", "AbstractRestorer", "SNORE", "RED", "PnPPGD", "PnPHQS",
           "restore"]


class RestorationResult(NamedTuple):
    """Output of a restoration loop.

    Attributes:
        x: the final iterate ``[..., H, W, C]``.
        psnr: ``[..., num_steps]`` PSNR (dB) of each iterate against ``x_true`` (``track=True``
            with ``x_true``), else None.
        fidelity: ``[..., num_steps]`` data term ``F(x_k, y) sigma_y^2 = ||A x_k - y||^2 / 2`` of
            each iterate (``track=True``), else None.
    """

    x: Array
    psnr: Array | None = None
    fidelity: Array | None = None


class RestorationProblem(NamedTuple):
    """What a solver step sees of the problem: ``y = A x + sigma_y n`` and the prior ``D(x, sigma)``.

    Attributes:
        y: the observation ``[H, W, C]``, in the dtype the loop runs in.
        operator: the forward model ``A``.
        denoiser: ``D(x, sigma)``.
        sigma_y: the observation noise std (pixel units), a scalar.
    """

    y: Array
    operator: AbstractOperator
    denoiser: AbstractDenoiser | Callable
    sigma_y: Array


class AbstractRestorer(eqx.Module):
    """An iterative restoration algorithm: ``state = init(problem, x0)``, then ``step`` once per schedule row.

    Subclasses set the class variables (annotated ``ClassVar[bool]``) ``random`` (``step`` draws noise and needs
    a key) and ``sigma_positive`` (``step`` divides by ``sigma^2``, so ``schedule.sigma > 0``), hold their options as
    static fields and implement :meth:`init` and :meth:`step`. The loop (:func:`restore`) clips and tracks;
    ``step`` holds no checks (the schedule and ``sigma_y`` were checked before the loop).

    Examples:
        >>> from typing import ClassVar
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import AbstractRestorer, GaussianMMSEDenoiser, Identity, constant_schedule, restore
        >>> class Landweber(AbstractRestorer):  # gradient descent on the data term alone
        ...     random: ClassVar[bool] = False
        ...     sigma_positive: ClassVar[bool] = False
        ...     def init(self, problem, x0):
        ...         return None
        ...     def step(self, problem, x, state, sigma, alpha, step_size, key):
        ...         return x - step_size * problem.operator.data_grad(x, problem.y, problem.sigma_y), state
        >>> out = restore(None, jnp.full((4, 4, 1), 0.6), Identity(), GaussianMMSEDenoiser(0.5, 0.01),
        ...               constant_schedule(3, sigma=0.0, step_size=1e-3), 0.05, method=Landweber())
        >>> round(float(out.x[0, 0, 0]), 3)
        0.6
    """

    # evaluated annotations (no ``from __future__ import annotations`` here): equinox reads them to know
    # these are abstract class variables, which every solver must set
    random: eqx.AbstractClassVar[bool]
    sigma_positive: eqx.AbstractClassVar[bool]

    @abc.abstractmethod
    def init(self, problem: RestorationProblem, x0: Float[Array, "H W C"]) -> Any:
        """The solver's state before the first step (a pytree; None for a memoryless solver)."""

    @abc.abstractmethod
    def step(self, problem: RestorationProblem, x: Float[Array, "H W C"], state: Any, sigma: Array, alpha: Array,
             step_size: Array, key: PRNGKeyArray | None) -> tuple[Float[Array, "H W C"], Any]:
        """One iteration: ``(x_{k+1}, state_{k+1})`` from ``x_k`` and the schedule's row ``k``.

        ``key`` is the step's own key for a ``random`` solver, else None.
        """


def _data_step(problem: RestorationProblem, x, g, step_size, prox: bool):
    """``x - delta (grad F(x) + g)``, or ``prox_{delta F}(x - delta g)`` with ``prox``."""
    if prox:
        return problem.operator.data_prox(x - step_size * g, problem.y, problem.sigma_y, step_size)
    return x - step_size * (problem.operator.data_grad(x, problem.y, problem.sigma_y) + g)


class SNORE(AbstractRestorer):
    """SNORE: stochastic gradient steps on ``F(x, y) + alpha R_sigma(x)``, ``R_sigma(x) = -E log p_sigma(x + sigma z)``.

    ``x_{k+1} = x_k - delta_k grad F(x_k) - delta_k alpha_k / sigma_k^2 (x_k - mean_j D_{sigma_k}(x_k + sigma_k
    z_{k,j}))``, ``z_{k,j} ~ N(0, I)`` (Tweedie: the mean residual estimates ``sigma^2 grad R_sigma``); with
    ``prox`` (SNORE-Prox) the data term is taken by its proximal map instead.

    Attributes:
        num_samples: noise draws averaged per step (batched through the denoiser), >= 1.
        prox: SNORE-Prox.
        antithetic: draw ``z`` in pairs ``(z, -z)`` (variance reduction).

    Raises:
        TypeError: ``num_samples`` not an int; a flag not a bool.
        ValueError: ``num_samples < 1``.

    References:
        Renaud, Prost, Leclaire & Papadakis, "Plug-and-play image restoration with stochastic denoising
        regularization", ICML 2024, Algorithm 1 and eq. (6).

    Examples:
        >>> from jaxcore.inverse import SNORE
        >>> SNORE(num_samples=2, prox=True)
        SNORE(num_samples=2, prox=True, antithetic=False)
    """

    num_samples: int = eqx.field(static=True)
    prox: bool = eqx.field(static=True)
    antithetic: bool = eqx.field(static=True)
    random: ClassVar[bool] = True
    sigma_positive: ClassVar[bool] = True

    def __init__(self, num_samples: int = 1, prox: bool = False, antithetic: bool = False):
        self.num_samples = check_int(num_samples, "num_samples", minimum=1)
        self.prox = check_bool(prox, "prox")
        self.antithetic = check_bool(antithetic, "antithetic")

    def init(self, problem, x0):
        return None

    def step(self, problem, x, state, sigma, alpha, step_size, key):
        if self.antithetic:
            half = _normal(key, ((self.num_samples + 1) // 2,) + x.shape, x.dtype)
            z = jnp.concatenate([half, -half])[:self.num_samples]
        else:
            z = _normal(key, (self.num_samples,) + x.shape, x.dtype)
        den = problem.denoiser(x[None] + sigma * z, sigma)
        g = alpha * ((x - jnp.mean(den, axis=0)) / sigma**2)
        return _data_step(problem, x, g, step_size, self.prox), state


class RED(AbstractRestorer):
    """RED: gradient steps ``x <- x - delta (grad F(x) + alpha/sigma^2 (x - D_sigma(x)))``.

    ``prox=True`` gives RED-Prox ``x <- prox_{delta F}(x - delta alpha/sigma^2 (x - D_sigma(x)))``.

    Attributes:
        prox: RED-Prox.

    Raises:
        TypeError: ``prox`` not a bool.

    References:
        Romano, Elad & Milanfar, "The little engine that could: regularization by denoising (RED)",
        SIAM J. Imaging Sci. 2017, eq. (38) and Section 5 (the proximal variant).

    Examples:
        >>> from jaxcore.inverse import RED
        >>> RED(prox=True).prox
        True
    """

    prox: bool = eqx.field(static=True)
    random: ClassVar[bool] = False
    sigma_positive: ClassVar[bool] = True

    def __init__(self, prox: bool = False):
        self.prox = check_bool(prox, "prox")

    def init(self, problem, x0):
        return None

    def step(self, problem, x, state, sigma, alpha, step_size, key):
        g = alpha * (x - problem.denoiser(x, sigma)) / sigma**2
        return _data_step(problem, x, g, step_size, self.prox), state


class PnPPGD(AbstractRestorer):
    """Plug-and-play proximal gradient descent ``x <- D_sigma(x - tau grad F(x))``.

    ``tau`` is the schedule's ``step_size`` (``alpha`` is unused); ``sigma = 0`` is allowed.

    References:
        Venkatakrishnan, Bouman & Wohlberg, "Plug-and-play priors for model based reconstruction",
        GlobalSIP 2013; Hurault, Leclaire & Papadakis, ICLR 2022, eq. (5).

    Examples:
        >>> from jaxcore.inverse import PnPPGD
        >>> PnPPGD().random
        False
    """

    random: ClassVar[bool] = False
    sigma_positive: ClassVar[bool] = False

    def init(self, problem, x0):
        return None

    def step(self, problem, x, state, sigma, alpha, step_size, key):
        return problem.denoiser(x - step_size * problem.operator.data_grad(x, problem.y, problem.sigma_y), sigma), state


class PnPHQS(AbstractRestorer):
    """Plug-and-play half-quadratic splitting ``x <- D_sigma(prox_{tau F}(x))``.

    ``tau`` is the schedule's ``step_size`` (``alpha`` is unused); ``sigma = 0`` is allowed.

    References:
        Zhang, Li, Zuo, Zhang, Van Gool & Timofte, "Plug-and-play image restoration with deep denoiser
        prior", IEEE TPAMI 2021, eqs. (6)-(7).

    Examples:
        >>> from jaxcore.inverse import PnPHQS
        >>> PnPHQS().sigma_positive
        False
    """

    random: ClassVar[bool] = False
    sigma_positive: ClassVar[bool] = False

    def init(self, problem, x0):
        return None

    def step(self, problem, x, state, sigma, alpha, step_size, key):
        return problem.denoiser(problem.operator.data_prox(x, problem.y, problem.sigma_y, step_size), sigma), state


def _check_restorer(method) -> AbstractRestorer:
    if not isinstance(method, AbstractRestorer):
        raise TypeError(expected("method", "an AbstractRestorer (SNORE(), RED(), PnPPGD(), PnPHQS(), ...)",
                                 type(method).__name__, raw=True))
    return method


def _check_problem_types(operator, denoiser, schedule) -> None:
    if not isinstance(operator, AbstractOperator):
        raise TypeError(expected("operator", "an AbstractOperator", type(operator).__name__, raw=True))
    if not (isinstance(denoiser, AbstractDenoiser) or callable(denoiser)):
        raise TypeError(expected("denoiser", "a denoiser callable as D(x, sigma)", type(denoiser).__name__, raw=True))
    _check_schedule(schedule)


def _check_images(y, x0, x_true, *, batch: bool):
    """``y`` and, of its shape, ``x0`` and ``x_true`` as float arrays: one image ``[H, W, C]``, or with
    ``batch`` a batch ``[num_images, H, W, C]`` (then named ``ys``, ``x0s``)."""
    ny, n0 = ("ys", "x0s") if batch else ("y", "x0")
    y = as_array(y, ny)
    if batch:
        check_ndim(y, ny, 4, "shape [num_images, H, W, C]")
    else:
        check_ndim(y, ny, 3, "one image [H, W, C] (use restore_batch for a batch)")
    x0 = None if x0 is None else as_array(x0, n0)
    x_true = None if x_true is None else as_array(x_true, "x_true")
    for name, arr in ((n0, x0), ("x_true", x_true)):
        if arr is not None and tuple(arr.shape) != tuple(y.shape):
            raise ValueError(expected(name, f"{ny}'s shape {tuple(y.shape)}", f"shape {tuple(arr.shape)}", raw=True))
    return y, x0, x_true


def _check_options(clip, track, progress) -> dict:
    return {"clip": check_bool(clip, "clip"), "track": check_bool(track, "track"),
            "progress": check_progress(progress)}


def _loop(restorer: AbstractRestorer, problem: RestorationProblem, x0, schedule: Schedule, key, x_true,
          clip: bool, track: bool, progress: ProgressArg, description: str) -> RestorationResult:
    """Scan ``restorer.step`` along the schedule (``key_k`` None for a deterministic solver).

    ``schedule`` and ``problem.sigma_y`` were checked by the caller (the schedule already in ``x0``'s
    dtype): the loop body trusts them (:func:`jaxcore._util.trusted_values`), so it holds no run-time
    checks; on a GPU a check in the body is a conditional whose predicate the host reads at every iteration.
    """
    xs = (schedule.sigma, schedule.alpha, schedule.step_size, jnp.arange(schedule.num_steps))
    if key is not None:
        xs = xs + (jax.random.split(key, schedule.num_steps),)
    prog = Progress(progress, schedule.num_steps, description)

    def body(carry, inp):
        x, state = carry
        sig, alp, dlt, index = inp[:4]
        k = inp[4] if key is not None else None
        with trusted_values(sig, dlt, problem.sigma_y):
            x, state = restorer.step(problem, x, state, sig, alp, dlt, k)
        if clip:
            x = jnp.clip(x, 0.0, 1.0)
        out = ()
        if track:
            fid = problem.operator.data_fidelity(x, problem.y, 1.0)
            out = (_psnr(x, x_true, 1.0) if x_true is not None else jnp.zeros((), x.dtype), fid)
        prog.update(index)  # the step index only: under restore_batch's vmap, one report for the batch
        return (x, state), out

    (x, _), out = jax.lax.scan(body, (x0, restorer.init(problem, x0)), xs)
    if track:
        return RestorationResult(x, out[0] if x_true is not None else None, out[1])
    return RestorationResult(x)


def _solve(restorer: AbstractRestorer, key, y, x0, operator, denoiser, schedule, sigma_y, x_true, *,
           clip: bool = True, track: bool = False, progress: ProgressArg = False) -> RestorationResult:
    """One restoration of ``y`` on checked arguments (traced code, no checks).

    Runs in ``x0``'s (default ``y``'s) dtype, half precision in float32; ``x`` is cast back."""
    out_dtype = (y if x0 is None else x0).dtype
    work = compute_dtype(out_dtype)
    cast = lambda a: None if a is None else a.astype(work)  # noqa: E731
    y, x0, x_true, sigma_y = cast(y), cast(x0), cast(x_true), cast(sigma_y)
    schedule = Schedule(*(a.astype(work) for a in schedule))
    problem = RestorationProblem(y, operator, denoiser, sigma_y)
    res = _loop(restorer, problem, y if x0 is None else x0, schedule, key if restorer.random else None, x_true,
                clip, track, progress, type(restorer).__name__)
    return res._replace(x=res.x.astype(out_dtype))


#: The compiled program of every solver (one compilation per solver and options, operator type and shapes).
_solve_program = eqx.filter_jit(_solve)


def _validate(restorer, key, y, operator, denoiser, schedule, sigma_y, x0, x_true):
    """Check one image's problem; return ``(key, y, x0, x_true, sigma_y, schedule)`` as the loop uses them."""
    if restorer.random or key is not None:
        key = check_key(key)
    _check_problem_types(operator, denoiser, schedule)
    y, x0, x_true = _check_images(y, x0, x_true, batch=False)
    dtype = (y if x0 is None else x0).dtype
    sigma_y, schedule = _checked_values(schedule, sigma_y, dtype, sigma_positive=restorer.sigma_positive)
    return key, y, x0, x_true, sigma_y, schedule


def restore(
    key: PRNGKeyArray | None,
    y: Float[Array, "H W C"],
    operator: AbstractOperator,
    denoiser: AbstractDenoiser | Callable,
    schedule: Schedule,
    sigma_y,
    *,
    method: AbstractRestorer,
    x0: Float[Array, "H W C"] | None = None,
    clip: bool = True,
    x_true: Float[Array, "H W C"] | None = None,
    track: bool = False,
    progress: ProgressArg = False,
) -> RestorationResult:
    """Restore one image ``y = A x + sigma_y n`` with the solver ``method``, one compiled ``lax.scan``.

    Validates on the host, then runs one module-level compiled program: a second call with the same
    solver, operator type and shapes does not recompile.

    Args:
        key: PRNG key for a random solver (:class:`SNORE`; the same key gives the same result); None
            (or a key, unused) for a deterministic one.
        y: observation ``[H, W, C]``, pixels nominally in [0, 1].
        operator: forward model ``A`` (:mod:`jaxcore.inverse.operators`).
        denoiser: ``D(x, sigma)``.
        schedule: per-step ``sigma``, ``alpha``, step size (:mod:`jaxcore.inverse.schedules`).
        sigma_y: observation noise std (pixel units, > 0).
        method: the solver, an :class:`AbstractRestorer` (:class:`SNORE`, :class:`RED`, :class:`PnPPGD`,
            :class:`PnPHQS` or one of your own).
        x0: initial iterate (default ``y``).
        clip: project each iterate on [0, 1] (static).
        x_true: clean image for PSNR tracking.
        track: also return per-step PSNR and ``F(x_k, y) sigma_y^2`` (static).
        progress: ``False`` (default), ``True`` (a progress bar over the steps) or
            ``fn(steps_done, {})``, called on the host about 100 times per run.

    Returns:
        :class:`RestorationResult`: ``x [H, W, C]`` in ``y``'s (or ``x0``'s) dtype, and with ``track`` the
        ``[num_steps]`` histories.

    Raises:
        TypeError: ``method`` not an AbstractRestorer; ``key`` not a PRNG key (a random solver) or neither
            None nor a key; wrong operator/denoiser/schedule type; ``y``, ``x0``, ``x_true`` not float arrays;
            a flag not a bool.
        ValueError: ``y`` not ``[H, W, C]`` or with a NaN or inf pixel, ``x0`` or ``x_true`` shape mismatch,
            schedule arrays not 1-d of one length, ``sigma_y`` not a finite scalar ``> 0``, a schedule entry
            not finite, ``schedule.sigma <= 0`` (``< 0`` for a solver that does not divide by it) or
            ``schedule.alpha``, ``.step_size < 0`` (in the image's dtype); operator shape/channel mismatches.
            Under ``jit`` the value checks run once before the loop and raise ``equinox``'s runtime error.

    References:
        Renaud et al., ICML 2024 (SNORE); the solvers' own references.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.inverse import SNORE, GaussianMMSEDenoiser, Identity, constant_schedule, restore
        >>> out = restore(jax.random.key(0), jnp.full((4, 4, 1), 0.6), Identity(), GaussianMMSEDenoiser(0.5, 0.01),
        ...               constant_schedule(20, sigma=0.05, step_size=1e-3), 0.05, method=SNORE(num_samples=2))
        >>> out.x.shape
        (4, 4, 1)
    """
    restorer = _check_restorer(method)
    key, y, x0, x_true, sigma_y, schedule = _validate(restorer, key, y, operator, denoiser, schedule, sigma_y, x0,
                                                      x_true)
    opts = _check_options(clip, track, progress)
    return _solve_program(restorer, key if restorer.random else None, y, x0, operator, denoiser, schedule, sigma_y,
                          x_true, **opts)
