"""The restoration methods as functions: SNORE, SNORE-Prox, Annealed SNORE, RED, RED-Prox, PnP-PGD, PnP-HQS.

Each is a thin wrapper over :func:`~jaxcore.inverse.restore` with its solver class
(:mod:`jaxcore.inverse.solvers`), under the one signature
``method(key, y, operator, denoiser, schedule, sigma_y, **options)``, so :data:`METHODS` holds the functions
themselves; :func:`~jaxcore.inverse.restore_batch` runs any of them (by name) over images and seeds.

- :func:`snore`, :func:`snore_prox`: :class:`~jaxcore.inverse.SNORE`; :func:`annealed_snore`: SNORE along
  an :func:`~jaxcore.inverse.annealed_schedule`.
- :func:`red`, :func:`red_prox`: :class:`~jaxcore.inverse.RED`; :func:`pnp_pgd`, :func:`pnp_hqs`:
  :class:`~jaxcore.inverse.PnPPGD`, :class:`~jaxcore.inverse.PnPHQS`.

The deterministic methods (RED and PnP) take ``key=None``. A key passed to them is unused; passing one is
deprecated (a ``DeprecationWarning``) and becomes a ``TypeError`` in jaxcore 0.2.0, where ``None`` stays the
first argument so that every method keeps the one signature.

References:
    Renaud, Prost, Leclaire & Papadakis, "Plug-and-play image restoration with stochastic denoising
    regularization", ICML 2024, Algorithms 1-2. Romano, Elad & Milanfar, SIAM J. Imaging Sci. 2017 (RED).
    Venkatakrishnan, Bouman & Wohlberg, GlobalSIP 2013 (PnP). Zhang et al., IEEE TPAMI 2021 (HQS).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import ProgressArg, check_key, check_scalar, expected

from .denoisers import AbstractDenoiser
from .operators import AbstractOperator
from .schedules import Schedule, annealed_schedule
from .solvers import PnPHQS, PnPPGD, RED, SNORE, AbstractRestorer, RestorationResult, restore

__all__ = ["snore", "snore_prox", "annealed_snore", "red", "red_prox", "pnp_pgd", "pnp_hqs", "METHODS"]

#: The release in which a key passed to a deterministic method becomes a TypeError.
KEY_REMOVED_IN = "0.2.0"


def _deprecated_key(key, name: str):
    """A deterministic method's key: None passes; a PRNG key is unused and warns; anything else is a TypeError."""
    if key is None:
        return None
    check_key(key)
    warnings.warn(f"{name}: the key is unused ({name} is deterministic) and passing one is deprecated; pass None "
                  f"(a key will be a TypeError from jaxcore {KEY_REMOVED_IN})", DeprecationWarning, stacklevel=3)
    return None


def snore(
    key: PRNGKeyArray,
    y: Float[Array, "H W C"],
    operator: AbstractOperator,
    denoiser: AbstractDenoiser | Callable,
    schedule: Schedule,
    sigma_y,
    *,
    x0: Float[Array, "H W C"] | None = None,
    num_samples: int = 1,
    prox: bool = False,
    antithetic: bool = False,
    clip: bool = True,
    x_true: Float[Array, "H W C"] | None = None,
    track: bool = False,
    progress: ProgressArg = False,
) -> RestorationResult:
    """SNORE: stochastic gradient descent on ``F(x, y) + alpha R_sigma(x)``.

    ``x_{k+1} = x_k - delta_k grad F(x_k) - delta_k alpha_k / sigma_k^2 (x_k - mean_j D_{sigma_k}(x_k + sigma_k z_{k,j}))``,
    ``z_{k,j} ~ N(0, I)``, ``j = 1..num_samples`` (the samples are batched through the
    denoiser). With ``prox=True`` (SNORE-Prox) the data term is handled by its
    proximal operator instead: ``x_{k+1} = prox_{delta_k F}(x_k - delta_k alpha_k grad R)``.

    Args:
        key: PRNG key (the same key gives the same result).
        y: observation ``[H, W, C]``, pixels nominally in [0, 1].
        operator: forward model ``A`` (:mod:`jaxcore.inverse.operators`).
        denoiser: ``D(x, sigma)``.
        schedule: per-step ``sigma``, ``alpha``, ``delta`` (:func:`constant_schedule`,
            :func:`annealed_schedule`).
        sigma_y: observation noise std (pixel units, > 0).
        num_samples, prox, antithetic: the options of :class:`~jaxcore.inverse.SNORE` (static): noise draws
            averaged per step, SNORE-Prox, ``z`` drawn in pairs ``(z, -z)``.
        x0, clip, x_true, track, progress: the loop's options, as in :func:`~jaxcore.inverse.restore` (initial
            iterate, default ``y``; projection on [0, 1]; clean image and per-step PSNR and data-term
            histories; a progress bar or callback).

    Returns:
        :class:`RestorationResult`: ``x [H, W, C]`` in ``y``'s (or ``x0``'s) dtype, and with
        ``track`` the ``[num_steps]`` histories.

    Raises:
        TypeError: ``key`` not a PRNG key; wrong operator/denoiser/schedule type; ``y``, ``x0``,
            ``x_true`` not float arrays (None, integers, complex); a flag not a bool.
        ValueError: ``y`` not ``[H, W, C]`` or with a NaN or inf pixel, ``x0`` or ``x_true`` shape
            mismatch, schedule arrays not 1-d of one length, ``sigma_y`` not a finite scalar
            ``> 0``, a schedule entry not finite, ``schedule.sigma <= 0`` or
            ``schedule.alpha``, ``.step_size < 0`` (in the image's dtype), ``num_samples < 1``;
            operator shape/channel mismatches (from the operator). Under ``jit`` the value checks
            run once before the loop and raise ``equinox``'s runtime error.

    References:
        Renaud, Prost, Leclaire & Papadakis, "Plug-and-play image restoration with stochastic
        denoising regularization", ICML 2024, Algorithm 1 and eq. (6).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.inverse import GaussianMMSEDenoiser, Identity, constant_schedule, snore
        >>> y = jnp.full((4, 4, 1), 0.6)
        >>> out = snore(jax.random.key(0), y, Identity(), GaussianMMSEDenoiser(0.5, 0.01),
        ...             constant_schedule(20, sigma=0.05, alpha=1.0, step_size=1e-3), 0.05)
        >>> out.x.shape, round(float(out.x.mean()), 2)  # about the noiseless fixed point 0.583 (see red)
        ((4, 4, 1), 0.58)
    """
    return restore(key, y, operator, denoiser, schedule, sigma_y,
                   method=SNORE(num_samples=num_samples, prox=prox, antithetic=antithetic), x0=x0, clip=clip,
                   x_true=x_true, track=track, progress=progress)


def snore_prox(key: PRNGKeyArray, y, operator, denoiser, schedule: Schedule, sigma_y, **options) -> RestorationResult:
    """SNORE-Prox: :func:`snore` with ``prox=True``, ``x <- prox_{delta F}(x - delta alpha grad R_sigma(x))``.

    Arguments, returns and errors as :func:`snore` (``options`` are its keyword options).

    References:
        Renaud et al., ICML 2024, Algorithm 1 (SNORE-Prox variant).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.inverse import GaussianMMSEDenoiser, Identity, constant_schedule, snore_prox
        >>> out = snore_prox(jax.random.key(0), jnp.full((4, 4, 1), 0.6), Identity(),
        ...                  GaussianMMSEDenoiser(0.5, 0.01), constant_schedule(5, sigma=0.05, step_size=1e-3), 0.05)
        >>> out.x.shape
        (4, 4, 1)
    """
    return snore(key, y, operator, denoiser, schedule, sigma_y, prox=True, **options)


def annealed_snore(key: PRNGKeyArray, y, operator, denoiser, schedule: Schedule | None, sigma_y,
                   **options) -> RestorationResult:
    """Annealed SNORE: :func:`snore` along an :func:`annealed_schedule`.

    ``schedule=None`` gives 16 geometric stages of sigma from ``min(max(3 sigma_y, 30/255), 50/255)``
    down to ``max(1.5 sigma_y, 5/255)`` (10 steps each, then 140 at the end value),
    ``alpha = 0.4`` and step size ``0.5 sigma_y^2`` (the step on ``F = ||Ax - y||^2 / (2 sigma_y^2)``
    is then half the ``1/L`` step). These defaults were tuned on this package's DnCNN and
    crops of a training image; they are not the paper's values. ``options`` go to :func:`snore`.

    Args:
        key, y, operator, denoiser, sigma_y: as in :func:`snore` (``sigma_y`` concrete when
            ``schedule`` is None).
        schedule: an annealed :class:`Schedule`, or None for the default above.

    Returns:
        :class:`RestorationResult`, as :func:`snore`.

    Raises:
        As :func:`snore`; TypeError for a traced ``sigma_y`` with ``schedule=None``.

    References:
        Renaud et al., ICML 2024, Algorithm 2 (Annealed SNORE).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.inverse import GaussianMMSEDenoiser, Identity, annealed_snore
        >>> out = annealed_snore(jax.random.key(0), jnp.full((4, 4, 1), 0.6), Identity(),
        ...                      GaussianMMSEDenoiser(0.5, 0.01), None, 0.05)
        >>> out.x.shape
        (4, 4, 1)
    """
    if schedule is None:
        sy = check_scalar(sigma_y, "sigma_y", positive=True)
        schedule = annealed_schedule(
            sigma_start=min(max(3 * sy, 30 / 255), 50 / 255), sigma_end=max(1.5 * sy, 5 / 255),
            alpha_start=0.4, alpha_end=0.4, step_size=0.5 * sy**2, steps_per_stage=10, final_steps=140,
        )
    return snore(key, y, operator, denoiser, schedule, sigma_y, **options)


def red(
    key: PRNGKeyArray | None,
    y: Float[Array, "H W C"],
    operator: AbstractOperator,
    denoiser: AbstractDenoiser | Callable,
    schedule: Schedule,
    sigma_y,
    *,
    x0: Float[Array, "H W C"] | None = None,
    prox: bool = False,
    clip: bool = True,
    x_true: Float[Array, "H W C"] | None = None,
    track: bool = False,
    progress: ProgressArg = False,
) -> RestorationResult:
    """RED: gradient descent ``x <- x - delta (grad F(x) + alpha/sigma^2 (x - D_sigma(x)))``.

    ``prox=True`` gives RED-Prox ``x <- prox_{delta F}(x - delta alpha/sigma^2 (x - D_sigma(x)))``.

    Args:
        key: None (RED is deterministic; the argument keeps the one signature of :data:`METHODS`).
            Deprecated: a PRNG key is still accepted, unused, with a ``DeprecationWarning``; from jaxcore
            0.2.0 it is a TypeError.
        y, operator, denoiser, schedule, sigma_y, x0, clip, x_true, track, progress: as in :func:`snore`.
        prox: RED-Prox (static).

    Returns:
        :class:`RestorationResult`, as :func:`snore`.

    Raises:
        As :func:`snore` (``key`` neither None nor a PRNG key is a TypeError).

    Warns:
        DeprecationWarning: ``key`` is a PRNG key (unused; pass None).

    References:
        Romano, Elad & Milanfar, "The little engine that could: regularization by denoising (RED)",
        SIAM J. Imaging Sci. 2017, eq. (38).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import GaussianMMSEDenoiser, Identity, constant_schedule, red
        >>> out = red(None, jnp.full((4, 4, 1), 0.6), Identity(), GaussianMMSEDenoiser(0.5, 0.01),
        ...           constant_schedule(20, sigma=0.05, step_size=1e-3), 0.05)
        >>> bool(jnp.all((out.x > 0.5) & (out.x < 0.6)))
        True
    """
    key = _deprecated_key(key, "red")
    return restore(key, y, operator, denoiser, schedule, sigma_y, method=RED(prox=prox), x0=x0, clip=clip,
                   x_true=x_true, track=track, progress=progress)


def red_prox(key: PRNGKeyArray | None, y, operator, denoiser, schedule: Schedule, sigma_y,
             **options) -> RestorationResult:
    """RED-Prox: :func:`red` with ``prox=True``, ``x <- prox_{delta F}(x - delta alpha/sigma^2 (x - D_sigma(x)))``.

    Arguments, returns, errors and the deprecated key as :func:`red`.

    References:
        Romano, Elad & Milanfar, SIAM J. Imaging Sci. 2017 (proximal variant, Section 5).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import GaussianMMSEDenoiser, Identity, constant_schedule, red_prox
        >>> out = red_prox(None, jnp.full((4, 4, 1), 0.6), Identity(), GaussianMMSEDenoiser(0.5, 0.01),
        ...                constant_schedule(5, sigma=0.05, step_size=1e-3), 0.05)
        >>> out.x.shape
        (4, 4, 1)
    """
    key = _deprecated_key(key, "red_prox")
    with warnings.catch_warnings():  # warned once, as red_prox
        warnings.simplefilter("ignore", DeprecationWarning)
        return red(key, y, operator, denoiser, schedule, sigma_y, prox=True, **options)


def pnp_pgd(
    key: PRNGKeyArray | None,
    y: Float[Array, "H W C"],
    operator: AbstractOperator,
    denoiser: AbstractDenoiser | Callable,
    schedule: Schedule,
    sigma_y,
    *,
    x0: Float[Array, "H W C"] | None = None,
    clip: bool = True,
    x_true: Float[Array, "H W C"] | None = None,
    track: bool = False,
    progress: ProgressArg = False,
) -> RestorationResult:
    """Plug-and-play proximal gradient descent ``x <- D_sigma(x - tau grad F(x))``.

    ``tau`` is ``schedule.step_size`` (``alpha`` is unused); ``schedule.sigma = 0`` is allowed.

    Args:
        key: None (PnP-PGD is deterministic); a PRNG key is deprecated, as in :func:`red`.
        y, operator, denoiser, schedule, sigma_y, x0, clip, x_true, track, progress: as in :func:`snore`.

    Returns:
        :class:`RestorationResult`, as :func:`snore`.

    Raises:
        As :func:`red` (``schedule.sigma >= 0`` instead of ``> 0``).

    References:
        Venkatakrishnan, Bouman & Wohlberg, "Plug-and-play priors for model based reconstruction",
        GlobalSIP 2013; Hurault, Leclaire & Papadakis, ICLR 2022, eq. (5).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import GaussianMMSEDenoiser, Identity, constant_schedule, pnp_pgd
        >>> out = pnp_pgd(None, jnp.full((4, 4, 1), 0.6), Identity(), GaussianMMSEDenoiser(0.5, 0.01),
        ...               constant_schedule(5, sigma=0.05, step_size=1e-3), 0.05)
        >>> bool(jnp.all(out.x < 0.6))
        True
    """
    key = _deprecated_key(key, "pnp_pgd")
    return restore(key, y, operator, denoiser, schedule, sigma_y, method=PnPPGD(), x0=x0, clip=clip, x_true=x_true,
                   track=track, progress=progress)


def pnp_hqs(
    key: PRNGKeyArray | None,
    y: Float[Array, "H W C"],
    operator: AbstractOperator,
    denoiser: AbstractDenoiser | Callable,
    schedule: Schedule,
    sigma_y,
    *,
    x0: Float[Array, "H W C"] | None = None,
    clip: bool = True,
    x_true: Float[Array, "H W C"] | None = None,
    track: bool = False,
    progress: ProgressArg = False,
) -> RestorationResult:
    """Plug-and-play half-quadratic splitting ``x <- D_sigma(prox_{tau F}(x))``.

    ``tau`` is ``schedule.step_size``; ``schedule.sigma = 0`` is allowed.

    Args:
        key: None (PnP-HQS is deterministic); a PRNG key is deprecated, as in :func:`red`.
        y, operator, denoiser, schedule, sigma_y, x0, clip, x_true, track, progress: as in :func:`snore`.

    Returns:
        :class:`RestorationResult`, as :func:`snore`.

    Raises:
        As :func:`pnp_pgd`.

    References:
        Zhang, Li, Zuo, Zhang, Van Gool & Timofte, "Plug-and-play image restoration with
        deep denoiser prior", IEEE TPAMI 2021, eqs. (6)-(7).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import GaussianMMSEDenoiser, Identity, constant_schedule, pnp_hqs
        >>> out = pnp_hqs(None, jnp.full((4, 4, 1), 0.6), Identity(), GaussianMMSEDenoiser(0.5, 0.01),
        ...               constant_schedule(5, sigma=0.05, step_size=1e-3), 0.05)
        >>> out.x.shape
        (4, 4, 1)
    """
    key = _deprecated_key(key, "pnp_hqs")
    return restore(key, y, operator, denoiser, schedule, sigma_y, method=PnPHQS(), x0=x0, clip=clip, x_true=x_true,
                   track=track, progress=progress)


#: Every restoration method by name, all called as ``METHODS[name](key, y, operator, denoiser, schedule,
#: sigma_y, **options)`` (the names :func:`~jaxcore.inverse.restore_batch` accepts).
METHODS: dict[str, Callable[..., RestorationResult]] = {
    "snore": snore,
    "snore_prox": snore_prox,
    "annealed_snore": annealed_snore,
    "red": red,
    "red_prox": red_prox,
    "pnp_pgd": pnp_pgd,
    "pnp_hqs": pnp_hqs,
}

#: The solver options each method name accepts (its other options are the loop's: clip, track, progress).
_SOLVER_OPTIONS = {"snore": ("num_samples", "prox", "antithetic"), "snore_prox": ("num_samples", "antithetic"),
                   "annealed_snore": ("num_samples", "prox", "antithetic"), "red": ("prox",), "red_prox": (),
                   "pnp_pgd": (), "pnp_hqs": ()}
_LOOP_OPTIONS = ("clip", "track", "progress")


def _method_restorer(method: str, options: dict) -> tuple[AbstractRestorer, dict]:
    """The solver of the method named ``method`` built from its ``options``, and the loop's options."""
    solver_opts = {k: v for k, v in options.items() if k in _SOLVER_OPTIONS[method]}
    loop_opts = {k: v for k, v in options.items() if k in _LOOP_OPTIONS}
    unknown = sorted(set(options) - set(solver_opts) - set(loop_opts))
    if unknown:
        raise TypeError(expected("options", f"keyword options of {method} "
                                 f"({', '.join(_SOLVER_OPTIONS[method] + _LOOP_OPTIONS)})", unknown, raw=True))
    if method in ("snore", "snore_prox", "annealed_snore"):
        return SNORE(**solver_opts, **({"prox": True} if method == "snore_prox" else {})), loop_opts
    if method in ("red", "red_prox"):
        return RED(**solver_opts, **({"prox": True} if method == "red_prox" else {})), loop_opts
    return (PnPPGD() if method == "pnp_pgd" else PnPHQS()), loop_opts
