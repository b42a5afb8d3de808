"""Perturbations of sharpness-aware minimization: SAM, ASAM, GSAM, random, and the OBF cotangent.

A SAM-family step has two independent ingredients (Vani et al. 2024, Sec. 4):

- the *perturbation geometry*: how the ascent gradient ``h`` becomes the
  perturbation ``epsilon`` (:class:`SAM`, :class:`ASAM`, :class:`GSAM`,
  :class:`RandomDirection`), and how the gradient at ``w + epsilon`` becomes
  the final update direction (GSAM's decomposition);
- the *perturbation loss*: which loss ``h`` is the gradient of. By default the
  training loss ("maximize" in the authors' code); :class:`OBF` replaces it by
  output-bias forgetting, given in gradient form as a cotangent on the logits.

All normalisations here are safe: a zero gradient gives a zero perturbation
(never NaN, unlike ``optax.contrib.normalize``), and norms are accumulated in
at least float32 so that bfloat16 parameters work.

Every public function validates its arguments on the host and runs one
module-level compiled program (``eqx.filter_jit``); the ``_``-prefixed
implementations are the traced building blocks the trainer composes.
The functional API checks what the classes check: a radius, ``eta``, ``alpha`` or
``gamma`` that is negative, NaN or infinite raises ValueError on the host, and, when
it is traced (a call inside ``jit``), at run time through ``error_if``, once, before
the compiled program (never inside a training loop's body).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxcore._util import (check_bool, check_finite, check_int, check_key, check_range, check_scalar, describe, error_if,
                            expected, is_concrete)

PyTree = Any
#: A radius: a float ``>= 0`` or an optax schedule ``count -> rho`` (``optax.Schedule``).
Radius = float | optax.Schedule


# ----------------------------------------------------------------------------
# Argument checks (the one dialect of jaxcore._util)
# ----------------------------------------------------------------------------


def _check_radius(rho: Any, name: str = "rho", *, schedule: bool = True) -> None:
    """A concrete radius is a finite float >= 0; a callable is a schedule (checked at run time)."""
    if callable(rho) and not eqx.is_array(rho):
        if schedule:
            return
        raise TypeError(expected(name, "a number >= 0 (not a schedule)", type(rho).__name__, raw=True))
    if is_concrete(rho):
        check_scalar(rho, name, nonnegative=True)


def _check_real(x: Any, name: str, **bounds: Any) -> None:
    """check_scalar for concrete values; traced values pass (checked by the caller's program)."""
    if is_concrete(x):
        check_scalar(x, name, **bounds)


def _check_tree(tree: PyTree, name: str) -> None:
    if tree is None:
        raise TypeError(expected(name, "a pytree of float arrays", "None", raw=True))
    for leaf in jax.tree.leaves(tree):
        if not (eqx.is_array_like(leaf) and jnp.issubdtype(jnp.result_type(leaf), jnp.inexact)):
            raise TypeError(expected(name, "a pytree of float arrays", f"a leaf of type {type(leaf).__name__}",
                                     raw=True))
        if jnp.issubdtype(jnp.result_type(leaf), jnp.complexfloating):
            raise TypeError(expected(name, "a pytree of real float arrays", f"dtype {jnp.result_type(leaf)}",
                                     raw=True))


def _check_finite_tree(tree: PyTree, name: str) -> None:
    """ValueError if a concrete leaf holds NaN/inf (traced leaves are not checked)."""
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        if is_concrete(leaf) and not bool(np.all(np.isfinite(np.asarray(leaf, np.float64)))):
            raise ValueError(expected(f"{name}{jax.tree_util.keystr(path)}", "finite values", "NaN or inf", raw=True))


_WHAT = {"nonneg": "a finite number >= 0", "finite": "a finite number", "unit": "a number in [0, 1]"}


def _checked_value(x: Any, name: str, kind: str = "nonneg") -> Any:
    """Check a scalar hyperparameter: on the host when concrete, with ``error_if`` when traced.

    Returns the value to use (a traced value threaded through its run-time check). Called by the
    public entry points only, before their compiled program, never inside a loop body.
    """
    if is_concrete(x):
        if kind == "nonneg":
            check_scalar(x, name, nonnegative=True)
        elif kind == "unit":
            check_scalar(x, name, low=0.0, high=1.0)
        else:
            check_scalar(x, name)
        return x
    if jnp.ndim(x) != 0:
        raise TypeError(expected(name, "a scalar", f"an array of shape {jnp.shape(x)}", raw=True))
    if not jnp.issubdtype(x.dtype, jnp.floating) and not jnp.issubdtype(x.dtype, jnp.integer):
        raise TypeError(expected(name, "a real number", f"dtype {x.dtype}", raw=True))
    ok = jnp.isfinite(x)
    if kind == "nonneg":
        ok = ok & (x >= 0)
    elif kind == "unit":
        ok = (x >= 0) & (x <= 1)
    return error_if(x, ~ok, name, f"{_WHAT[kind]} (checked at run time), got a value outside")


def _same_structure(a: PyTree, b: PyTree, name_a: str, name_b: str) -> None:
    sa, sb = jax.tree.structure(a), jax.tree.structure(b)
    if sa != sb:
        raise ValueError(expected(name_b, f"a pytree with the structure of {name_a} ({sa})", str(sb), raw=True))
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        if jnp.shape(x) != jnp.shape(y):
            raise ValueError(expected(name_b, f"leaves with the shapes of {name_a}",
                                      f"shape {jnp.shape(y)} against {jnp.shape(x)}", raw=True))


def _as_scalar(x: Any) -> Any:
    """A Python number as a weakly typed array (a traced argument, so new values do not recompile)."""
    return jnp.asarray(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else x


# ----------------------------------------------------------------------------
# Safe tree arithmetic
# ----------------------------------------------------------------------------


def _acc_dtype(dtype: Any) -> Any:
    """Accumulation dtype: at least float32 (bf16/f16 -> f32, f64 stays f64)."""
    return jnp.promote_types(dtype, jnp.float32)


def _tree_dot(a: PyTree, b: PyTree) -> Array:
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    if not la:
        return jnp.zeros((), jnp.float32)
    dt = _acc_dtype(jnp.result_type(*la))
    return sum(jnp.vdot(x.astype(dt).ravel(), y.astype(dt).ravel()) for x, y in zip(la, lb))


def _scaled_norm(leaves: list, dt: Any) -> Array:
    """``m sqrt(sum (x / m)^2)`` with ``m = max |x|``: no underflow or overflow of the squares."""
    # The scaled form is the norm for any m > 0, so m carries no gradient (its own would overflow).
    m = jax.lax.stop_gradient(
        jnp.max(jnp.stack([jnp.max(jnp.abs(x.astype(dt))) if x.size else jnp.zeros((), dt) for x in leaves])))
    ok = (m > 0) & jnp.isfinite(m)
    inv = 1.0 / jnp.where(ok, m, 1.0)
    sq = sum(jnp.sum(jnp.square(x.astype(dt) * inv)) for x in leaves)
    return jnp.where(ok, m * jnp.sqrt(jnp.where(ok, sq, 1.0)), m)  # m = 0 (zero tree), inf or NaN as it is


def _global_norm(tree: PyTree) -> Array:
    """The Euclidean norm, stable in float32.

    The common path is the plain sum of squares; only where it underflows (below ``tiny / eps``,
    where the squares of small entries lose their precision or vanish, zero tree included) or
    overflows to inf does a ``lax.cond`` take the max-abs-scaled form (one more pass, at run time
    only in that case).
    """
    sq = _tree_dot(tree, tree)
    leaves = jax.tree.leaves(tree)
    if not leaves:
        return sq
    dt = sq.dtype
    fi = jnp.finfo(dt)
    small = float(fi.tiny) / float(fi.eps)
    rare = (sq < small) | (sq == jnp.inf)

    def plain(args):
        s, _ = args
        return jnp.sqrt(jnp.where(s < small, 1.0, s))  # s >= small here (NaN stays NaN)

    def scaled(args):
        _, ls = args
        return _scaled_norm(ls, dt)

    return jax.lax.cond(rare, scaled, plain, (sq, leaves))


def _global_norms(tree: PyTree) -> Array:
    """``[k]`` norms of the ``k`` trees stacked on the leading axis of every leaf, stable in float32.

    :func:`_global_norm` of each slice, with one unbatched ``lax.cond`` for all of them: under ``vmap``
    the per-slice ``cond`` becomes a ``select`` that always runs the scaled fallback (measured: 11-20%
    of an m-sharpness step at k = 8). Here the scaled form runs, for every slice, only when some slice
    underflows or overflows (the scaled form is the norm for any slice, so this changes no value).
    """
    leaves = jax.tree.leaves(tree)
    k = leaves[0].shape[0]
    dt = _acc_dtype(jnp.result_type(*leaves))
    sq = sum(jnp.sum(jnp.square(x.astype(dt)).reshape(k, -1), axis=1) for x in leaves)
    fi = jnp.finfo(dt)
    small = float(fi.tiny) / float(fi.eps)
    rare = jnp.any((sq < small) | (sq == jnp.inf))

    def plain(args):
        s, _ = args
        return jnp.sqrt(jnp.where(s < small, 1.0, s))

    def scaled(args):
        _, ls = args
        return jax.vmap(lambda *xs: _scaled_norm(list(xs), dt))(*ls)

    return jax.lax.cond(rare, scaled, plain, (sq, leaves))


def _scale_factor(norm: Array, scale: Any) -> Array:
    """``scale / norm``, and 0 where the norm is 0 (the zero tree stays zero)."""
    return jnp.where(norm > 0, scale / jnp.where(norm > 0, norm, 1.0), 0.0)


def _scaled_tree(tree: PyTree, factor: Array) -> PyTree:
    return jax.tree.map(lambda x: (factor * x.astype(_acc_dtype(x.dtype))).astype(x.dtype), tree)


def _safe_normalize(tree: PyTree, scale: Any = 1.0) -> tuple[PyTree, Array]:
    norm = _global_norm(tree)
    return _scaled_tree(tree, _scale_factor(norm, scale)), norm


_tree_dot_jit = eqx.filter_jit(_tree_dot)
_global_norm_jit = eqx.filter_jit(_global_norm)
_safe_normalize_jit = eqx.filter_jit(_safe_normalize)


def tree_dot(a: PyTree, b: PyTree) -> Float[Array, ""]:
    """Inner product ``sum_i <a_i, b_i>`` of two pytrees, accumulated in >= float32.

    Args:
        a, b: pytrees of the same structure and leaf shapes (any float dtype).

    Returns:
        A scalar of dtype ``promote(leaf dtype, float32)``.

    Raises:
        TypeError: a leaf is not a float array.
        ValueError: the structures or leaf shapes differ.

    References:
        Foret et al., "Sharpness-Aware Minimization for Efficiently Improving
        Generalization", ICLR 2021, Eq. 2 (the global norm of SAM's perturbation).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.sam import tree_dot
        >>> float(tree_dot({"a": jnp.ones(2)}, {"a": jnp.array([1.0, 2.0])}))
        3.0
    """
    _check_tree(a, "a")
    _check_tree(b, "b")
    _same_structure(a, b, "a", "b")
    return _tree_dot_jit(a, b)


def global_norm(tree: PyTree) -> Float[Array, ""]:
    """Euclidean norm ``sqrt(sum_i ||x_i||^2)`` of a pytree, accumulated in >= float32.

    Safe at zero: the value is 0 and its gradient is 0 (not NaN as with a bare
    ``sqrt``). Stable in float32: where the plain sum of squares underflows (entries
    near 1e-19 and below) or overflows (near 1e19 and above), the max-abs-scaled form
    ``m sqrt(sum (x / m)^2)`` is used instead (a ``lax.cond``; the common path is unchanged).

    Args:
        tree: pytree of float arrays (bf16, f16, f32 or f64).

    Returns:
        A non-negative scalar of dtype ``promote(leaf dtype, float32)``.

    Raises:
        TypeError: a leaf is not a float array.

    References:
        Foret et al., "Sharpness-Aware Minimization for Efficiently Improving
        Generalization", ICLR 2021, Eq. 2 (the global norm of SAM's perturbation).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.sam import global_norm
        >>> float(global_norm({"a": jnp.array([3.0]), "b": jnp.array([[4.0]])}))
        5.0
    """
    _check_tree(tree, "tree")
    return _global_norm_jit(tree)


def safe_normalize(tree: PyTree, scale: Any = 1.0) -> tuple[PyTree, Float[Array, ""]]:
    """``scale * x / ||x||``, with the zero tree mapped to the zero tree (no NaN).

    Args:
        tree: pytree of float arrays.
        scale: scalar multiplier (e.g. the radius ``rho``), finite.

    Returns:
        ``(normalized, norm)``: the rescaled tree in each leaf's own dtype
        (computed in >= float32), and the global norm of ``tree``.

    Raises:
        TypeError: a leaf is not a float array, or ``scale`` is not a number.
        ValueError: ``scale`` is NaN or infinite.

    References:
        Foret et al., "Sharpness-Aware Minimization for Efficiently Improving
        Generalization", ICLR 2021, Eq. 2 (the global norm of SAM's perturbation).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.sam import safe_normalize
        >>> out, norm = safe_normalize(jnp.array([3.0, 4.0]), 2.0)
        >>> out.tolist(), float(norm)
        ([1.2, 1.6], 5.0)
        >>> safe_normalize(jnp.zeros(2))[0].tolist()
        [0.0, 0.0]
    """
    _check_tree(tree, "tree")
    scale = _checked_value(scale, "scale", "finite")
    return _safe_normalize_jit(tree, _as_scalar(scale))


# ----------------------------------------------------------------------------
# Radius schedules
# ----------------------------------------------------------------------------


def _rho_at(rho: Radius, count: Any) -> Array:
    return jnp.asarray(rho(count) if callable(rho) else rho)


_rho_at_jit = eqx.filter_jit(_rho_at)


def rho_at(rho: Radius, count: Int[Array, ""] | int) -> Float[Array, ""]:
    """The perturbation radius at step ``count``: ``rho`` itself, or ``rho(count)`` for a schedule.

    Args:
        rho: a float ``>= 0`` or an ``optax.Schedule`` ``count -> rho``.
        count: the step count (int scalar).

    Returns:
        The radius (scalar array).

    Raises:
        TypeError, ValueError: ``rho`` is neither a schedule nor a finite number ``>= 0`` (a
            schedule's value and a traced ``rho`` are checked too, at run time under ``jit``);
            ``count`` not an int scalar, or negative.

    References:
        Zhuang et al., "Surrogate Gap Minimization Improves Sharpness-Aware
        Training", ICLR 2022, Sec. 5.1 (scheduled radii).

    Examples:
        >>> import optax
        >>> from jaxcore.sam import rho_at
        >>> float(rho_at(0.05, 3)), float(rho_at(optax.linear_schedule(0.1, 0.0, 10), 5))
        (0.05, 0.05)
    """
    _check_radius(rho)
    if not callable(rho):
        rho = _checked_value(rho, "rho")
    if not eqx.is_array_like(count) or not jnp.issubdtype(jnp.result_type(count), jnp.integer) \
            or isinstance(count, bool) or jnp.ndim(count) != 0:
        raise TypeError(expected("count", "an int scalar (the step count)", count))
    if is_concrete(count):
        check_int(count, "count", minimum=0)
    out = _rho_at_jit(rho if callable(rho) else _as_scalar(rho), _as_scalar(count))
    if callable(rho):  # a schedule's value: the radius it gives must be >= 0 too
        if jnp.ndim(out) != 0:
            raise TypeError(expected("rho", "a schedule returning a scalar", f"shape {jnp.shape(out)}", raw=True))
        out = _checked_value(out, "rho")
    return out


def lr_proportional_rho(
    lr_schedule: optax.Schedule, lr_max: float, lr_min: float, rho_max: float, rho_min: float = 0.0
) -> optax.Schedule:
    """GSAM's radius schedule that follows the learning rate.

    ``rho_t = rho_min + (rho_max - rho_min) (lr_t - lr_min) / (lr_max - lr_min)``,
    clipped at 0.

    Args:
        lr_schedule: optax schedule ``count -> lr``.
        lr_max, lr_min: the schedule's largest and smallest learning rates.
        rho_max, rho_min: radii at ``lr_max`` and ``lr_min`` (>= 0).

    Returns:
        An ``optax.Schedule`` ``count -> rho`` (float32 scalar).

    Raises:
        ValueError: ``lr_max <= lr_min`` or a negative radius.

    References:
        Zhuang et al., "Surrogate Gap Minimization Improves Sharpness-Aware
        Training", ICLR 2022, Sec. 5.1 ("rho_t proportional to lr_t").

    Examples:
        >>> import optax
        >>> from jaxcore.sam import lr_proportional_rho
        >>> sched = lr_proportional_rho(optax.linear_schedule(1.0, 0.1, 10), 1.0, 0.1, rho_max=0.05)
        >>> round(float(sched(0)), 6), round(float(sched(10)), 6)
        (0.05, 0.0)
    """
    if not callable(lr_schedule):
        raise TypeError(expected("lr_schedule", "an optax schedule count -> lr", type(lr_schedule).__name__,
                                 raw=True))
    lr_min = check_scalar(lr_min, "lr_min")
    check_scalar(lr_max, "lr_max", low=lr_min, low_open=True)
    _check_radius(rho_max, "rho_max", schedule=False)
    _check_radius(rho_min, "rho_min", schedule=False)

    def schedule(count: jax.Array) -> jax.Array:
        lr = lr_schedule(count)
        rho = rho_min + (rho_max - rho_min) * (lr - lr_min) / (lr_max - lr_min)
        return jnp.maximum(rho, 0.0)

    return schedule


# ----------------------------------------------------------------------------
# Perturbation functions
# ----------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------
# Perturbation geometries (equinox modules)
# ----------------------------------------------------------------------------


class Perturbation(eqx.Module):
    """Abstract base of a perturbation geometry (an equinox module; hashable, usable as a static argument).

    Concrete geometries: :class:`SAM`, :class:`ASAM`, :class:`GSAM`,
    :class:`RandomDirection`. They implement :meth:`perturb` and optionally
    :meth:`direction`; both are traced building blocks (called inside the
    compiled step), not host-validated entry points.

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

    rho: Radius = 0.05
    needs_key: ClassVar[bool] = False

    def __check_init__(self) -> None:
        _check_radius(self.rho)

    @abc.abstractmethod
    def perturb(self, grads: PyTree, params: PyTree, rho: Any, *, key: PRNGKeyArray | None = None) -> PyTree:
        """The perturbation ``epsilon`` from the ascent gradient (``rho`` already evaluated).

        ``key`` is used only where ``needs_key`` (keyword, ``None`` for the deterministic geometries).
        """

    def direction(self, ascent_grads: PyTree, perturbed_grads: PyTree) -> PyTree:
        """The final update direction from the ascent and perturbed gradients (SAM: ``g_p``)."""
        del ascent_grads
        return perturbed_grads


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

    def perturb(self, grads, params, rho, *, key=None):
        del params, key
        return _sam_perturbation(grads, rho)


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

    eta: float = 0.01
    weight_mask: Any = eqx.field(default=None, static=True)

    def __check_init__(self) -> None:
        _check_real(self.eta, "eta", nonnegative=True)

    def perturb(self, grads, params, rho, *, key=None):
        del key
        return _asam_perturbation(grads, params, rho, self.eta, self.weight_mask)


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

    alpha: float = 0.01

    def __check_init__(self) -> None:
        _check_real(self.alpha, "alpha", nonnegative=True)

    def perturb(self, grads, params, rho, *, key=None):
        del params, key
        return _sam_perturbation(grads, rho)

    def direction(self, ascent_grads, perturbed_grads):
        return _gsam_direction(ascent_grads, perturbed_grads, self.alpha)


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

    needs_key: ClassVar[bool] = True

    def perturb(self, grads, params, rho, *, key=None):
        del params
        if key is None:
            raise TypeError(expected("key", "a jax.random.key(...) array (RandomDirection draws a random direction)",
                                     "None", raw=True))
        return _random_perturbation(key, grads, rho)


# ----------------------------------------------------------------------------
# Output-bias forgetting (the perturbation loss of Vani et al. 2024)
# ----------------------------------------------------------------------------


def _one_hot(labels: Array, num_classes: int, dtype: Any) -> Array:
    if jnp.ndim(labels) == 1:
        if not jnp.issubdtype(labels.dtype, jnp.integer):
            raise TypeError(expected("labels", "int class indices [batch] or one-hot [batch, classes]",
                                     f"dtype {labels.dtype}", raw=True))
        return jax.nn.one_hot(labels, num_classes, dtype=dtype)
    if jnp.ndim(labels) == 2 and labels.shape[-1] == num_classes:
        return labels.astype(dtype)
    raise ValueError(expected("labels", f"shape [batch] or [batch, {num_classes}]", f"shape {jnp.shape(labels)}",
                              raw=True))


def _check_logits_labels(logits: Array, labels: Array) -> None:
    if jnp.ndim(logits) != 2:
        raise ValueError(expected("logits", "shape [batch, classes]", f"shape {jnp.shape(logits)}", raw=True))
    if jnp.ndim(labels) < 1 or jnp.shape(labels)[0] != logits.shape[0]:
        raise ValueError(expected("labels", f"a leading batch axis of {logits.shape[0]} (the logits' batch size)",
                                  f"shape {jnp.shape(labels)}", raw=True))
    if logits.shape[-1] < 2:
        raise ValueError(expected("logits", "at least 2 classes", f"{logits.shape[-1]} classes", raw=True))


def _check_obf_inputs(logits: Any, labels: Any) -> tuple[Array, Array]:
    """Host-side checks of the public OBF functions: types, shapes and label values.

    Integer labels must lie in ``[0, classes)`` (never a silent all-zero one-hot row); one-hot or
    soft labels must be finite, >= 0 and sum to 1 per row (within 1e-3). Traced integer labels are
    range-checked at run time (``error_if``).
    """
    for name, x in (("logits", logits), ("labels", labels)):
        if x is None or not eqx.is_array_like(x):
            raise TypeError(expected(name, "an array", type(x).__name__, raw=True))
    logits, labels = jnp.asarray(logits), jnp.asarray(labels)
    if not jnp.issubdtype(logits.dtype, jnp.floating):
        raise TypeError(expected("logits", "a float array [batch, classes]", f"dtype {logits.dtype}", raw=True))
    check_finite(logits, "logits")  # concrete only: a NaN logit gave a NaN weight
    if labels.dtype == jnp.bool_ or jnp.issubdtype(labels.dtype, jnp.complexfloating):
        raise TypeError(expected("labels", "int class indices [batch] or one-hot [batch, classes]",
                                 f"dtype {labels.dtype}", raw=True))
    _check_logits_labels(logits, labels)
    c = logits.shape[-1]
    if labels.ndim == 1:
        if not jnp.issubdtype(labels.dtype, jnp.integer):
            raise TypeError(expected("labels", "int class indices [batch] or one-hot [batch, classes]",
                                     f"dtype {labels.dtype}", raw=True))
        if is_concrete(labels):
            a = np.asarray(labels)
            bad = (a < 0) | (a >= c)
            if bad.any():
                i = int(np.argmax(bad))
                raise ValueError(expected("labels", f"class indices in [0, {c})", f"{int(a[i])} at index {i}",
                                          raw=True))
        else:
            labels = error_if(labels, jnp.any((labels < 0) | (labels >= c)), "labels",
                              f"class indices in [0, {c}) (checked at run time), got one outside")
    elif labels.ndim == 2:
        _check_ndim_labels = labels.shape[-1] == c
        if _check_ndim_labels and is_concrete(labels):
            a = np.asarray(labels, np.float64)
            if not np.isfinite(a).all() or (a < 0).any():
                raise ValueError(expected("labels", "one-hot or soft labels: finite values >= 0",
                                          describe(labels), raw=True))
            rows = a.sum(-1)
            if (np.abs(rows - 1.0) > 1e-3).any():
                i = int(np.argmax(np.abs(rows - 1.0)))
                raise ValueError(expected("labels", "rows summing to 1 (within 1e-3; one-hot or soft labels)",
                                          f"row {i} summing to {rows[i]!r}", raw=True))
    return logits, labels


def _check_obf_config(gamma: Any, lam: Any, sigmoid: Any) -> None:
    _check_real(gamma, "gamma", low=0.0, high=1.0)
    if lam is not None:
        check_scalar(lam, "lam", low=0.0, high=1.0, high_open=True)
    check_bool(sigmoid, "sigmoid")


def _obf_alpha(logits, labels, gamma=1.0, lam=None, sigmoid=True):
    _check_logits_labels(logits, labels)
    c = logits.shape[-1]
    lam = 1.0 / c if lam is None else float(lam)
    dt = _acc_dtype(logits.dtype)
    x = jax.lax.stop_gradient(logits).astype(dt)
    p = jax.nn.sigmoid(x) if sigmoid else jax.nn.softmax(x, axis=-1)
    y = _one_hot(labels, c, dt)
    p_t = jnp.sum(p * y, axis=-1)
    if lam == 0.0:
        return jnp.full(p_t.shape, gamma, dt)
    a = (1.0 - lam / jnp.maximum(p_t, lam)) / (1.0 - lam)
    return gamma * jnp.maximum(a, 0.0)


def _obf_cotangent(logits, labels, gamma=1.0, lam=None, sigmoid=True):
    a = _obf_alpha(logits, labels, gamma, lam, sigmoid)[:, None]
    b, c = logits.shape
    dt = a.dtype
    x = jax.lax.stop_gradient(logits).astype(dt)
    p = jax.nn.sigmoid(x) if sigmoid else jax.nn.softmax(x, axis=-1)
    y = _one_hot(labels, c, dt)
    u = jnp.full_like(p, 1.0 / c)
    return ((u - a * p - (1.0 - a) * y) / b).astype(logits.dtype)


def _obf_loss(logits, labels, alpha, sigmoid=True):
    _check_logits_labels(logits, labels)
    c = logits.shape[-1]
    dt = _acc_dtype(logits.dtype)
    x = logits.astype(dt)
    y = _one_hot(labels, c, dt)
    u = jnp.full_like(x, 1.0 / c)
    a = jax.lax.stop_gradient(jnp.asarray(alpha, dt))
    if sigmoid:
        ls, l1s = jax.nn.log_sigmoid(x), jax.nn.log_sigmoid(-x)

        def ce(t):
            return -jnp.sum(t * ls + (1 - t) * l1s, axis=-1)
    else:
        lsm = jax.nn.log_softmax(x, axis=-1)

        def ce(t):
            return -jnp.sum(t * lsm, axis=-1)

    return jnp.mean((1.0 - a) * ce(y) - ce(u))


_obf_alpha_jit = eqx.filter_jit(_obf_alpha)
_obf_cotangent_jit = eqx.filter_jit(_obf_cotangent)
_obf_loss_jit = eqx.filter_jit(_obf_loss)


def obf_alpha(
    logits: Float[Array, "batch classes"],
    labels: Int[Array, " batch"] | Float[Array, "batch classes"],
    gamma: float = 1.0,
    lam: float | None = None,
    sigmoid: bool = True,
) -> Float[Array, " batch"]:
    """OBF's per-example weight ``a = gamma max(0, (1 - lambda / p_t) / (1 - lambda))``.

    ``p_t`` is the predicted probability of the target class (sigmoid of the
    target logit by default, as in the authors' code; softmax otherwise).
    For one-hot/soft labels ``p_t = <p, y>``.

    Args:
        logits: ``[batch, classes]``.
        labels: int ``[batch]`` or one-hot ``[batch, classes]``.
        gamma: scale of ``a`` in [0, 1].
        lam: the threshold ``lambda`` in [0, 1); default ``1 / classes``.
            ``lam = 0`` gives ``a = gamma`` everywhere.
        sigmoid: sigmoid (True) or softmax (False) predictions.

    Returns:
        ``a``, ``[batch]`` in [0, gamma], float (>= float32).

    Raises:
        ValueError: bad shapes, ``gamma`` outside [0, 1], ``lam`` outside [0, 1); int labels
            outside ``[0, classes)`` (checked at run time when traced); one-hot/soft labels
            negative, not finite or with rows not summing to 1 (within 1e-3); concrete logits
            with NaN/inf.
        TypeError: float labels of shape ``[batch]``; a non-bool ``sigmoid``; None.

    References:
        Vani et al., "Forget Sharpness: Perturbed Forgetting of Model Biases
        Within SAM Dynamics", ICML 2024, Sec. 4.2.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.sam import obf_alpha
        >>> logits = jnp.log(jnp.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1]]))
        >>> [round(v, 4) for v in obf_alpha(logits, jnp.array([0, 0]), sigmoid=False).tolist()]
        [0.8571, 0.0]
    """
    logits, labels = _check_obf_inputs(logits, labels)
    _check_obf_config(gamma, lam, sigmoid)
    gamma = _checked_value(gamma, "gamma", "unit")
    return _obf_alpha_jit(logits, labels, _as_scalar(gamma), None if lam is None else float(lam), bool(sigmoid))


def obf_cotangent(
    logits: Float[Array, "batch classes"],
    labels: Int[Array, " batch"] | Float[Array, "batch classes"],
    gamma: float = 1.0,
    lam: float | None = None,
    sigmoid: bool = True,
) -> Float[Array, "batch classes"]:
    """OBF's cotangent on the logits: ``(u - a p - (1 - a) y) / B``.

    It is the gradient, with ``a`` held fixed, of the ascent objective
    ``mean_b [(1 - a_b) CE(p_b, y_b) - CE(p_b, u)]`` (see :func:`obf_loss`),
    ``u`` uniform over classes; pulling it back through the network
    (``vjp``) gives OBF's ascent gradient (:func:`jaxcore.sam.ascent_gradient`).

    Args:
        logits: ``[batch, classes]``.
        labels: int ``[batch]`` or one-hot ``[batch, classes]``.
        gamma, lam, sigmoid: see :func:`obf_alpha`.

    Returns:
        ``[batch, classes]`` in the logits' dtype (computed in >= float32).

    Raises:
        ValueError, TypeError: as :func:`obf_alpha`.

    References:
        Vani et al., "Forget Sharpness: Perturbed Forgetting of Model Biases
        Within SAM Dynamics", ICML 2024, Eq. 8 (gradient form).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.sam import obf_cotangent
        >>> obf_cotangent(jnp.zeros((1, 2)), jnp.array([0]), lam=0.0).tolist()  # a = 1: (u - p) / B
        [[0.0, 0.0]]
    """
    logits, labels = _check_obf_inputs(logits, labels)
    _check_obf_config(gamma, lam, sigmoid)
    gamma = _checked_value(gamma, "gamma", "unit")
    return _obf_cotangent_jit(logits, labels, _as_scalar(gamma), None if lam is None else float(lam), bool(sigmoid))


def obf_loss(
    logits: Float[Array, "batch classes"],
    labels: Int[Array, " batch"] | Float[Array, "batch classes"],
    alpha: Float[Array, " batch"],
    sigmoid: bool = True,
) -> Float[Array, ""]:
    """OBF's ascent objective ``mean_b [(1 - a_b) CE(p_b, y_b) - CE(p_b, u)]`` for given ``a``.

    With ``sigmoid=True`` CE is the binary cross-entropy summed over classes
    (the authors' sigmoid outputs); otherwise the softmax cross-entropy. Its
    gradient in ``logits`` (``a`` fixed) is :func:`obf_cotangent`.

    Args:
        logits: ``[batch, classes]``.
        labels: int ``[batch]`` or one-hot ``[batch, classes]``.
        alpha: ``a``, ``[batch]`` or a scalar in [0, 1] (OBF's weight, e.g. from
            :func:`obf_alpha`; treated as a constant).
        sigmoid: binary (True) or softmax (False) cross-entropy.

    Returns:
        Scalar loss in nats.

    Raises:
        ValueError, TypeError: as :func:`obf_alpha`; ``alpha`` outside [0, 1], NaN, or not of
            shape ``[batch]`` or ``()`` (checked at run time when traced).

    References:
        Vani et al., "Forget Sharpness: Perturbed Forgetting of Model Biases
        Within SAM Dynamics", ICML 2024, Eq. 8.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.sam import obf_loss
        >>> round(float(obf_loss(jnp.zeros((1, 2)), jnp.array([0]), jnp.ones(1), sigmoid=False)), 4)  # -CE(p, u)
        -0.6931
    """
    logits, labels = _check_obf_inputs(logits, labels)
    check_bool(sigmoid, "sigmoid")
    if alpha is None or not eqx.is_array_like(alpha):
        raise TypeError(expected("alpha", f"a float array [batch] (batch {logits.shape[0]})", type(alpha).__name__,
                                 raw=True))
    alpha = jnp.asarray(alpha)
    if not (jnp.issubdtype(alpha.dtype, jnp.floating) or jnp.issubdtype(alpha.dtype, jnp.integer)):
        raise TypeError(expected("alpha", "a real float array [batch]", f"dtype {alpha.dtype}", raw=True))
    if alpha.shape not in ((), (logits.shape[0],)):
        raise ValueError(expected("alpha", f"shape [batch] = ({logits.shape[0]},) or a scalar",
                                  f"shape {alpha.shape}", raw=True))
    if is_concrete(alpha):
        check_finite(alpha, "alpha")
        check_range(alpha, "alpha", 0.0, 1.0)
    else:
        alpha = error_if(alpha, ~((alpha >= 0) & (alpha <= 1)), "alpha",
                         "OBF weights a in [0, 1] (checked at run time), got a value outside")
    return _obf_loss_jit(logits, labels, alpha, bool(sigmoid))


class OBF(eqx.Module):
    """Output-bias forgetting as the perturbation loss (combine with any geometry).

    With ``SAM`` this is the paper's SAM-OBF (often just "OBF"); with ``GSAM``
    or ``ASAM``, GSAM-OBF and ASAM-OBF. The ascent gradient is the vjp of the
    logits with :func:`obf_cotangent` (:func:`jaxcore.sam.ascent_gradient`).

    Attributes:
        gamma: scale of ``a`` in [0, 1] (the authors use 1, or 1e-12 with SGD).
        lam: threshold ``lambda`` in [0, 1); default ``1 / classes`` (static).
        sigmoid: predictions by sigmoid (authors' default) or softmax (static).
        labels_key: key of the labels in the batch mapping (static).

    Raises:
        TypeError: non-numeric ``gamma``/``lam``, non-bool ``sigmoid``, non-str ``labels_key``.
        ValueError: ``gamma`` outside [0, 1], ``lam`` outside [0, 1).

    References:
        Vani et al., "Forget Sharpness: Perturbed Forgetting of Model Biases
        Within SAM Dynamics", ICML 2024, Sec. 4.2.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.sam import OBF
        >>> OBF(lam=0.0).cotangent(jnp.zeros((1, 2)), jnp.array([0])).tolist()
        [[0.0, 0.0]]
    """

    gamma: float = 1.0
    lam: float | None = eqx.field(default=None, static=True)
    sigmoid: bool = eqx.field(default=True, static=True)
    labels_key: str = eqx.field(default="label", static=True)

    def __check_init__(self) -> None:
        _check_obf_config(self.gamma, self.lam, self.sigmoid)
        if not isinstance(self.labels_key, str):
            raise TypeError(expected("labels_key", "a str", type(self.labels_key).__name__, raw=True))

    def cotangent(self, logits: Array, labels: Array) -> Array:
        """:func:`obf_cotangent` with this configuration (traced building block)."""
        return _obf_cotangent(logits, labels, self.gamma, self.lam, self.sigmoid)
