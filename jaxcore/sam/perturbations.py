"""SAM-family perturbations as functions: SAM, ASAM, a random direction, and GSAM's update direction.

A SAM-family step has two independent ingredients (Vani et al. 2024, Sec. 4): the
*perturbation geometry*, how the ascent gradient ``h`` becomes the perturbation ``epsilon``
(here as functions; as equinox modules in :mod:`jaxcore.sam.geometries`), and the
*perturbation loss*, which loss ``h`` is the gradient of (:mod:`jaxcore.sam.obf`).

Every public function validates its arguments on the host and runs one module-level compiled
program (``eqx.filter_jit``); the ``_``-prefixed implementations are the traced building blocks
of the geometries. A radius, ``eta`` or ``alpha`` that is negative, NaN or infinite raises
ValueError on the host, and, when traced (a call inside ``jit``), at run time through
``error_if``, once, before the compiled program.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import PRNGKeyArray

from jaxcore._util import check_key, expected

from ._checks import (_as_scalar, _check_finite_tree, _check_radius, _check_tree, _checked_value,
                      _same_structure)
from .tree_math import _acc_dtype, _global_norm, _safe_normalize, _scale_factor, _scaled_tree, _tree_dot

PyTree = Any


def _check_weight_mask(weight_mask: Any, params: PyTree) -> Any:
    """None, a function ``params -> mask`` or a mask pytree of bools with the structure of ``params``."""
    if weight_mask is None:
        return None
    mask = weight_mask(params) if callable(weight_mask) else weight_mask
    sp = jax.tree.structure(params)
    try:
        leaves = sp.flatten_up_to(mask)
    except (ValueError, TypeError) as exc:
        raise ValueError(expected("weight_mask", f"a pytree of bools with the structure of params ({sp})",
                                  mask)) from exc
    for leaf in leaves:
        if not isinstance(leaf, (bool, np.bool_)):
            raise TypeError(expected("weight_mask", "Python bools (one per leaf of params)",
                                     f"a leaf of type {type(leaf).__name__}", raw=True))
    return weight_mask


def _sam_perturbation(grads: PyTree, rho: Any) -> PyTree:
    eps, _ = _safe_normalize(grads, rho)
    return eps


def default_weight_mask(params: PyTree) -> PyTree:
    """ASAM's default choice of adapted leaves: arrays with ``ndim >= 2`` (weights, not biases/scales).

    Args:
        params: the parameter pytree.

    Returns:
        A pytree like ``params`` of Python bools (static: no array is computed).

    Raises:
        TypeError: ``params`` is None or has a leaf that is not a real float array (as
            every function of the family that takes ``params``).

    References:
        Kwon et al., "ASAM: Adaptive Sharpness-Aware Minimization for
        Scale-Invariant Learning of Deep Neural Networks", ICML 2021, Sec. 4
        (weights normalised, biases not).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.sam import default_weight_mask
        >>> default_weight_mask({"w": jnp.ones((2, 3)), "b": jnp.ones(3)})
        {'b': False, 'w': True}
    """
    _check_tree(params, "params")
    return jax.tree.map(lambda p: bool(jnp.ndim(p) >= 2), params)


def _asam_perturbation(grads: PyTree, params: PyTree, rho: Any, eta: Any = 0.01, weight_mask: Any = None) -> PyTree:
    if weight_mask is None:
        weight_mask = default_weight_mask
    mask = weight_mask(params) if callable(weight_mask) else weight_mask

    def t_of(p, m):
        dt = _acc_dtype(p.dtype)
        return jnp.abs(p.astype(dt)) + eta if bool(m) else jnp.ones((), dt)

    t = jax.tree.map(t_of, params, mask)
    tg = jax.tree.map(lambda g, ti: g.astype(ti.dtype) * ti, grads, t)
    unit, _ = _safe_normalize(tg, rho)
    return jax.tree.map(lambda u, ti, g: (u * ti).astype(g.dtype), unit, t, grads)


def _random_perturbation(key: PRNGKeyArray, like: PyTree, rho: Any) -> PyTree:
    leaves, treedef = jax.tree.flatten(like)
    if not leaves:
        return like
    # One draw for the whole tree (a single RNG kernel, not one per leaf), then split.
    sizes = [int(np.prod(jnp.shape(x))) for x in leaves]
    dt = _acc_dtype(jnp.result_type(*leaves))
    flat = jax.random.normal(key, (sum(sizes),), dt)
    offsets = np.cumsum([0] + sizes)
    z = [flat[a:b].reshape(jnp.shape(x)).astype(x.dtype) for a, b, x in zip(offsets[:-1], offsets[1:], leaves)]
    eps, _ = _safe_normalize(jax.tree.unflatten(treedef, z), rho)
    return eps


def _gsam_direction(ascent_grads: PyTree, perturbed_grads: PyTree, alpha: Any) -> PyTree:
    # unit = gp / |gp| is never materialised: the dot <h, gp / |gp|> and the final combination read
    # gp and h directly (one pass fewer over two trees than normalising first; same values).
    inv = _scale_factor(_global_norm(perturbed_grads), 1.0)
    unit = _scaled_tree(perturbed_grads, inv)  # fused into its consumers below
    proj = _tree_dot(ascent_grads, unit)
    c = proj * inv

    def one(h, gp):
        dt = _acc_dtype(gp.dtype)
        g = gp.astype(dt)
        return ((1.0 + alpha * c) * g - alpha * h.astype(dt)).astype(gp.dtype)

    return jax.tree.map(one, ascent_grads, perturbed_grads)


_sam_perturbation_jit = eqx.filter_jit(_sam_perturbation)
_asam_perturbation_jit = eqx.filter_jit(_asam_perturbation)
_random_perturbation_jit = eqx.filter_jit(_random_perturbation)
_gsam_direction_jit = eqx.filter_jit(_gsam_direction)


def sam_perturbation(grads: PyTree, rho: Any) -> PyTree:
    """SAM's first-order worst-case perturbation ``epsilon = rho g / ||g||_2``.

    Args:
        grads: ascent gradient ``g`` (pytree of float arrays, like the parameters).
        rho: perturbation radius (finite, >= 0, scalar; a float or an array).

    Returns:
        ``epsilon``, same structure and dtypes as ``grads``; ``||epsilon|| = rho``,
        and the zero tree when ``g = 0``.

    Raises:
        TypeError: a leaf is not a float array or ``rho`` is not a number.
        ValueError: ``rho`` negative, NaN or infinite; a concrete gradient leaf with NaN/inf.

    References:
        Foret et al., "Sharpness-Aware Minimization for Efficiently Improving
        Generalization", ICLR 2021, Eq. 2.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.sam import sam_perturbation
        >>> sam_perturbation({"w": jnp.array([3.0, 4.0])}, 0.5)["w"].tolist()
        [0.3, 0.4]
    """
    _check_tree(grads, "grads")
    _check_finite_tree(grads, "grads")
    _check_radius(rho, schedule=False)
    rho = _checked_value(rho, "rho")
    return _sam_perturbation_jit(grads, _as_scalar(rho))


def asam_perturbation(
    grads: PyTree,
    params: PyTree,
    rho: Any,
    eta: float = 0.01,
    weight_mask: PyTree | Callable[[PyTree], PyTree] | None = None,
) -> PyTree:
    """ASAM's adaptive perturbation ``epsilon = rho T^2 g / ||T g||_2``.

    ``T = diag(|w| + eta)`` on weight leaves and the identity on the others
    (biases), so that ``||T^{-1} epsilon||_2 = rho``.

    Args:
        grads: ascent gradient ``g``.
        params: parameters ``w`` (same structure).
        rho: radius in the T-scaled norm (finite, >= 0).
        eta: offset of the normalisation operator (the paper's 0.01; finite, >= 0).
        weight_mask: pytree of Python bools (or a function ``params -> mask``)
            marking the adapted leaves; default :func:`default_weight_mask`.

    Returns:
        ``epsilon``, same structure and dtypes as ``grads``.

    Raises:
        TypeError: non-float leaves, non-numeric ``rho``/``eta``.
        ValueError: ``rho`` or ``eta`` negative or not finite; ``params`` not shaped like ``grads``;
            concrete gradients or parameters with NaN/inf.

    References:
        Kwon et al., "ASAM: Adaptive Sharpness-Aware Minimization for
        Scale-Invariant Learning of Deep Neural Networks", ICML 2021, Eq. 9-10.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.sam import asam_perturbation
        >>> eps = asam_perturbation({"w": jnp.ones((1, 2))}, {"w": jnp.array([[1.0, 3.0]])}, 1.0, eta=0.0)
        >>> [round(v, 4) for v in eps["w"].ravel().tolist()]  # rho T^2 g / ||T g||, T = |w|
        [0.3162, 2.8460]
    """
    _check_tree(grads, "grads")
    _check_tree(params, "params")
    _same_structure(grads, params, "grads", "params")
    _check_finite_tree(grads, "grads")
    _check_finite_tree(params, "params")
    _check_radius(rho, schedule=False)
    rho = _checked_value(rho, "rho")
    eta = _checked_value(eta, "eta")
    weight_mask = _check_weight_mask(weight_mask, params)
    return _asam_perturbation_jit(grads, params, _as_scalar(rho), _as_scalar(eta), weight_mask)


def random_perturbation(key: PRNGKeyArray, like: PyTree, rho: Any) -> PyTree:
    """A uniformly random direction of norm ``rho``: ``epsilon = rho z / ||z||``, ``z ~ N(0, I)``.

    The control of Vani et al. (2024, Sec. 5): a perturbation of SAM's size
    that carries no information about the loss.

    Args:
        key: PRNG key (``jax.random.key``).
        like: pytree of float arrays giving the structure, shapes and dtypes.
        rho: radius (finite, >= 0).

    Returns:
        ``epsilon`` with the structure of ``like``.

    Raises:
        TypeError: ``key`` is not a PRNG key; non-float leaves.
        ValueError: ``rho`` negative or not finite.

    References:
        Vani et al., "Forget Sharpness: Perturbed Forgetting of Model Biases
        Within SAM Dynamics", ICML 2024, Sec. 5.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.sam import global_norm, random_perturbation
        >>> eps = random_perturbation(jax.random.key(0), {"w": jnp.zeros((3, 2))}, 0.1)
        >>> round(float(global_norm(eps)), 6)
        0.1
    """
    check_key(key)
    _check_tree(like, "like")
    _check_radius(rho, schedule=False)
    rho = _checked_value(rho, "rho")
    return _random_perturbation_jit(key, like, _as_scalar(rho))


def gsam_direction(ascent_grads: PyTree, perturbed_grads: PyTree, alpha: Any) -> PyTree:
    """GSAM's update direction ``g_p - alpha g_perp``.

    ``g_perp = h - <h, g_p> g_p / ||g_p||^2`` is the part of the ascent
    gradient ``h`` orthogonal to the perturbed gradient ``g_p``. ``alpha = 0``
    gives SAM. Safe when ``g_p = 0`` (then ``g_perp = h``).

    Args:
        ascent_grads: ``h``, the gradient at ``w`` that built the perturbation.
        perturbed_grads: ``g_p``, the training gradient at ``w + epsilon``.
        alpha: GSAM's coefficient (finite, >= 0).

    Returns:
        The update direction, same structure and dtypes as ``perturbed_grads``.

    Raises:
        TypeError: non-float leaves or a non-numeric ``alpha``.
        ValueError: ``alpha`` negative or not finite; mismatched structures.

    References:
        Zhuang et al., "Surrogate Gap Minimization Improves Sharpness-Aware
        Training", ICLR 2022, Algorithm 1 (lines 5-6).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.sam import gsam_direction
        >>> gsam_direction(jnp.array([1.0, 1.0]), jnp.array([2.0, 0.0]), 0.5).tolist()
        [2.0, -0.5]
    """
    _check_tree(ascent_grads, "ascent_grads")
    _check_tree(perturbed_grads, "perturbed_grads")
    _same_structure(ascent_grads, perturbed_grads, "ascent_grads", "perturbed_grads")
    alpha = _checked_value(alpha, "alpha")
    return _gsam_direction_jit(ascent_grads, perturbed_grads, _as_scalar(alpha))
