"""Perturbation geometries as equinox modules: an abstract base and four final classes.

:class:`Perturbation` is abstract (equinox's abstract/final pattern): its radius is an
``eqx.AbstractVar``, :meth:`~Perturbation.perturb` and :meth:`~Perturbation.direction` are abstract
methods, and :class:`SAM`, :class:`ASAM`, :class:`GSAM` and :class:`RandomDirection` are final
(``typing.final``: subclass :class:`Perturbation` for a new geometry, never a concrete class).
Their methods are traced building blocks (called inside the compiled step), not host-validated
entry points; the functional forms are in :mod:`jaxcore.sam.perturbations`.

(No ``from __future__ import annotations`` here: equinox reads ``AbstractVar`` from evaluated annotations.)
"""

import abc
from typing import Any, ClassVar, final

import equinox as eqx
from jaxtyping import PRNGKeyArray

from jaxcore._util import expected

from ._checks import _check_radius, _check_real
from .perturbations import _asam_perturbation, _gsam_direction, _random_perturbation, _sam_perturbation
from .schedules import Radius

PyTree = Any


class Perturbation(eqx.Module):
    """Abstract base of a perturbation geometry (an equinox module; hashable, usable as a static argument).

    Concrete geometries: :class:`SAM`, :class:`ASAM`, :class:`GSAM`,
    :class:`RandomDirection`, each final. A geometry declares the field ``rho`` and the class
    constant ``needs_key`` (abstract here: ``eqx.AbstractVar`` and ``eqx.AbstractClassVar``)
    and implements the two abstract methods :meth:`perturb` and :meth:`direction`; both are
    traced building blocks (called inside the compiled step), not host-validated entry points.

    Attributes:
        rho: perturbation radius, a float ``>= 0`` or an ``optax.Schedule``
            ``count -> rho`` (a schedule's values are checked at run time).
        needs_key: class constant, True where :meth:`perturb` draws random numbers.

    Raises:
        TypeError: instantiating the abstract base itself; a non-numeric ``rho``.
        ValueError: ``rho`` negative, NaN or infinite.

    References:
        Vani et al., "Forget Sharpness: Perturbed Forgetting of Model Biases
        Within SAM Dynamics", ICML 2024, Sec. 4 (geometry and loss as two ingredients).

    Examples:
        >>> from jaxcore.sam import GSAM, SAM, Perturbation, RandomDirection
        >>> [isinstance(p, Perturbation) for p in (SAM(0.05), GSAM(0.05), RandomDirection(0.05))]
        [True, True, True]
        >>> RandomDirection.needs_key, SAM.needs_key
        (True, False)
    """

    rho: eqx.AbstractVar[Radius]
    needs_key: eqx.AbstractClassVar[bool]

    def __check_init__(self) -> None:
        _check_radius(self.rho)

    @abc.abstractmethod
    def perturb(self, grads: PyTree, params: PyTree, rho: Any, *, key: PRNGKeyArray | None = None) -> PyTree:
        """The perturbation ``epsilon`` from the ascent gradient (``rho`` already evaluated).

        ``key`` is used only where ``needs_key`` (keyword, ``None`` for the deterministic geometries).
        """

    @abc.abstractmethod
    def direction(self, ascent_grads: PyTree, perturbed_grads: PyTree) -> PyTree:
        """The final update direction from the ascent and perturbed gradients (SAM: ``g_p``)."""


def _perturbed_direction(ascent_grads: PyTree, perturbed_grads: PyTree) -> PyTree:
    """SAM's update direction: the gradient at ``w + epsilon`` as it is."""
    del ascent_grads
    return perturbed_grads


@final
class SAM(Perturbation):
    """Sharpness-aware minimization: ``epsilon = rho h / ||h||``, update with ``g(w + epsilon)``.

    Attributes:
        rho: radius (float >= 0) or ``optax.Schedule``.

    Raises:
        TypeError, ValueError: ``rho`` neither a schedule nor a finite number >= 0.

    References:
        Foret et al., "Sharpness-Aware Minimization for Efficiently Improving
        Generalization", ICLR 2021, Eq. 2-3.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.sam import SAM
        >>> SAM(rho=0.5).perturb(jnp.array([3.0, 4.0]), None, 0.5).tolist()
        [0.3, 0.4]
    """

    rho: Radius = 0.05
    needs_key: ClassVar[bool] = False

    def perturb(self, grads, params, rho, *, key=None):
        del params, key
        return _sam_perturbation(grads, rho)

    def direction(self, ascent_grads, perturbed_grads):
        return _perturbed_direction(ascent_grads, perturbed_grads)


@final
class ASAM(Perturbation):
    """Adaptive SAM: ``epsilon = rho T^2 h / ||T h||``, ``T = |w| + eta`` on weights only.

    Attributes:
        rho: radius in the T-scaled norm (the paper uses larger values than SAM, e.g. 0.5-2).
        eta: offset of the normalisation operator (0.01; finite, >= 0).
        weight_mask: ``params -> pytree of bool`` (or the pytree) of adapted
            leaves; default: leaves with ``ndim >= 2`` (static field).

    Raises:
        TypeError, ValueError: bad ``rho`` or ``eta``.

    References:
        Kwon et al., "ASAM: Adaptive Sharpness-Aware Minimization for
        Scale-Invariant Learning of Deep Neural Networks", ICML 2021, Eq. 9-10.

    Examples:
        >>> from jaxcore.sam import ASAM
        >>> ASAM(rho=0.5).eta
        0.01
    """

    rho: Radius = 0.05
    eta: float = 0.01
    weight_mask: Any = eqx.field(default=None, static=True)
    needs_key: ClassVar[bool] = False

    def __check_init__(self) -> None:
        _check_real(self.eta, "eta", nonnegative=True)

    def perturb(self, grads, params, rho, *, key=None):
        del key
        return _asam_perturbation(grads, params, rho, self.eta, self.weight_mask)

    def direction(self, ascent_grads, perturbed_grads):
        return _perturbed_direction(ascent_grads, perturbed_grads)


@final
class GSAM(Perturbation):
    """Surrogate-gap guided SAM: SAM's perturbation, update ``g_p - alpha g_perp``.

    With :class:`OBF` as the perturbation loss (GSAM-OBF), ``g_perp`` is
    taken from the OBF ascent gradient, the gradient that built the
    perturbation, as in the authors' code (Vani et al. 2024); with the
    default loss it is the clean training gradient of Zhuang et al.

    Attributes:
        rho: radius or schedule; GSAM makes it follow the learning rate, see
            :func:`lr_proportional_rho`.
        alpha: weight of the orthogonal component (``alpha = 0`` is SAM; finite, >= 0).

    Raises:
        TypeError, ValueError: bad ``rho`` or ``alpha``.

    References:
        Zhuang et al., "Surrogate Gap Minimization Improves Sharpness-Aware
        Training", ICLR 2022, Algorithm 1.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.sam import GSAM
        >>> GSAM(0.05, alpha=0.5).direction(jnp.array([1.0, 1.0]), jnp.array([2.0, 0.0])).tolist()
        [2.0, -0.5]
    """

    rho: Radius = 0.05
    alpha: float = 0.01
    needs_key: ClassVar[bool] = False

    def __check_init__(self) -> None:
        _check_real(self.alpha, "alpha", nonnegative=True)

    def perturb(self, grads, params, rho, *, key=None):
        del params, key
        return _sam_perturbation(grads, rho)

    def direction(self, ascent_grads, perturbed_grads):
        return _gsam_direction(ascent_grads, perturbed_grads, self.alpha)


@final
class RandomDirection(Perturbation):
    """Control: a random direction of norm ``rho`` (ignores the gradient; needs a PRNG key).

    Attributes:
        rho: radius (float >= 0) or ``optax.Schedule``.

    Raises:
        TypeError, ValueError: bad ``rho``.

    References:
        Vani et al., "Forget Sharpness: Perturbed Forgetting of Model Biases
        Within SAM Dynamics", ICML 2024, Sec. 5 (random perturbations).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.sam import RandomDirection
        >>> eps = RandomDirection(0.1).perturb(jnp.zeros(4), None, 0.1, key=jax.random.key(0))
        >>> round(float(jnp.linalg.norm(eps)), 6)
        0.1
    """

    rho: Radius = 0.05
    needs_key: ClassVar[bool] = True

    def perturb(self, grads, params, rho, *, key=None):
        del params
        if key is None:
            raise TypeError(expected("key", "a jax.random.key(...) array (RandomDirection draws a random direction)",
                                     "None", raw=True))
        return _random_perturbation(key, grads, rho)

    def direction(self, ascent_grads, perturbed_grads):
        return _perturbed_direction(ascent_grads, perturbed_grads)
