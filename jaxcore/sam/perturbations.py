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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

PyTree = Any
Schedule = Callable[[jax.Array], jax.Array]


# ----------------------------------------------------------------------------
# Safe tree arithmetic
# ----------------------------------------------------------------------------


def _acc_dtype(dtype: Any) -> Any:
    """Accumulation dtype: at least float32 (bf16/f16 -> f32, f64 stays f64)."""
    return jnp.promote_types(dtype, jnp.float32)


def tree_dot(a: PyTree, b: PyTree) -> Float[Array, ""]:
    """Inner product ``sum_i <a_i, b_i>`` of two pytrees, accumulated in >= float32.

    Args:
        a, b: pytrees of the same structure and leaf shapes (any float dtype).

    Returns:
        A scalar of dtype ``promote(leaf dtype, float32)``.
    """
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    if not la:
        return jnp.zeros((), jnp.float32)
    dt = _acc_dtype(jnp.result_type(*la))
    return sum(jnp.vdot(x.astype(dt).ravel(), y.astype(dt).ravel()) for x, y in zip(la, lb))


def global_norm(tree: PyTree) -> Float[Array, ""]:
    """Euclidean norm ``sqrt(sum_i ||x_i||^2)`` of a pytree, accumulated in >= float32.

    Safe at zero: the value is 0 and its gradient is 0 (not NaN as with a bare
    ``sqrt``).

    Args:
        tree: pytree of float arrays (bf16, f16, f32 or f64).

    Returns:
        A non-negative scalar of dtype ``promote(leaf dtype, float32)``.
    """
    sq = tree_dot(tree, tree)
    pos = sq > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, sq, 1.0)), 0.0)


def safe_normalize(tree: PyTree, scale: Any = 1.0) -> tuple[PyTree, Float[Array, ""]]:
    """``scale * x / ||x||``, with the zero tree mapped to the zero tree (no NaN).

    Args:
        tree: pytree of float arrays.
        scale: scalar multiplier (e.g. the radius ``rho``).

    Returns:
        ``(normalized, norm)``: the rescaled tree in each leaf's own dtype
        (computed in >= float32), and the global norm of ``tree``.
    """
    norm = global_norm(tree)
    factor = jnp.where(norm > 0, scale / jnp.where(norm > 0, norm, 1.0), 0.0)
    out = jax.tree.map(lambda x: (factor * x.astype(_acc_dtype(x.dtype))).astype(x.dtype), tree)
    return out, norm


def _check_rho(rho: Any, name: str = "rho") -> None:
    if callable(rho):
        return
    try:
        value = float(rho)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a non-negative float or a schedule count -> rho, got {rho!r}") from None
    if not value >= 0.0:  # also rejects NaN
        raise ValueError(f"{name} must be >= 0 (perturbation radius), got {rho!r}")


def _as_float(value: Any, name: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {value!r}") from None


def rho_at(rho: float | Schedule, count: Any) -> jax.Array:
    """The perturbation radius at step ``count``: ``rho`` or ``rho(count)`` for a schedule."""
    return jnp.asarray(rho(count) if callable(rho) else rho)


def lr_proportional_rho(
    lr_schedule: Schedule, lr_max: float, lr_min: float, rho_max: float, rho_min: float = 0.0
) -> Schedule:
    """GSAM's radius schedule that follows the learning rate.

    ``rho_t = rho_min + (rho_max - rho_min) (lr_t - lr_min) / (lr_max - lr_min)``,
    clipped at 0.

    Args:
        lr_schedule: optax schedule ``count -> lr``.
        lr_max, lr_min: the schedule's largest and smallest learning rates.
        rho_max, rho_min: radii at ``lr_max`` and ``lr_min``.

    Returns:
        A schedule ``count -> rho`` (float32 scalar).

    Raises:
        ValueError: ``lr_max <= lr_min`` or a negative radius.

    References:
        Zhuang et al., "Surrogate Gap Minimization Improves Sharpness-Aware
        Training", ICLR 2022, Sec. 5.1 ("rho_t proportional to lr_t").
    """
    if not lr_max > lr_min:
        raise ValueError(f"lr_max must exceed lr_min, got lr_max={lr_max}, lr_min={lr_min}")
    _check_rho(rho_max, "rho_max")
    _check_rho(rho_min, "rho_min")

    def schedule(count: jax.Array) -> jax.Array:
        lr = lr_schedule(count)
        rho = rho_min + (rho_max - rho_min) * (lr - lr_min) / (lr_max - lr_min)
        return jnp.maximum(rho, 0.0)

    return schedule


# ----------------------------------------------------------------------------
# Perturbation functions
# ----------------------------------------------------------------------------


def sam_perturbation(grads: PyTree, rho: Any) -> PyTree:
    """SAM's first-order worst-case perturbation ``epsilon = rho g / ||g||_2``.

    Args:
        grads: ascent gradient ``g`` (pytree like the parameters).
        rho: perturbation radius (>= 0, scalar).

    Returns:
        ``epsilon``, same structure and dtypes as ``grads``; ``||epsilon|| = rho``,
        and the zero tree when ``g = 0``.

    References:
        Foret et al., "Sharpness-Aware Minimization for Efficiently Improving
        Generalization", ICLR 2021, Eq. 2.
    """
    eps, _ = safe_normalize(grads, rho)
    return eps


def default_weight_mask(params: PyTree) -> PyTree:
    """ASAM's default choice of adapted leaves: arrays with ``ndim >= 2`` (weights, not biases/scales)."""
    return jax.tree.map(lambda p: jnp.ndim(p) >= 2, params)


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
        rho: radius in the T-scaled norm (>= 0).
        eta: offset of the normalisation operator (the paper's 0.01).
        weight_mask: pytree of Python bools (or a function ``params -> mask``)
            marking the adapted leaves; default :func:`default_weight_mask`.

    Returns:
        ``epsilon``, same structure and dtypes as ``grads``.

    References:
        Kwon et al., "ASAM: Adaptive Sharpness-Aware Minimization for
        Scale-Invariant Learning of Deep Neural Networks", ICML 2021, Eq. 9-10.
    """
    if weight_mask is None:
        weight_mask = default_weight_mask
    mask = weight_mask(params) if callable(weight_mask) else weight_mask

    def t_of(p, m):
        dt = _acc_dtype(p.dtype)
        return jnp.abs(p.astype(dt)) + eta if bool(m) else jnp.ones((), dt)

    t = jax.tree.map(t_of, params, mask)
    tg = jax.tree.map(lambda g, ti: g.astype(ti.dtype) * ti, grads, t)
    unit, _ = safe_normalize(tg, rho)
    return jax.tree.map(lambda u, ti, g: (u * ti).astype(g.dtype), unit, t, grads)


def random_perturbation(key: PRNGKeyArray, like: PyTree, rho: Any) -> PyTree:
    """A uniformly random direction of norm ``rho``: ``epsilon = rho z / ||z||``, ``z ~ N(0, I)``.

    The control of Vani et al. (2024, Sec. 5): a perturbation of SAM's size
    that carries no information about the loss.

    Args:
        key: PRNG key.
        like: pytree giving the structure, shapes and dtypes.
        rho: radius (>= 0).

    Returns:
        ``epsilon`` with the structure of ``like``.
    """
    leaves, treedef = jax.tree.flatten(like)
    if not leaves:
        return like
    # One draw for the whole tree (a single RNG kernel, not one per leaf), then split.
    sizes = [int(np.prod(jnp.shape(x))) for x in leaves]
    dt = _acc_dtype(jnp.result_type(*leaves))
    flat = jax.random.normal(key, (sum(sizes),), dt)
    offsets = np.cumsum([0] + sizes)
    z = [flat[a:b].reshape(jnp.shape(x)).astype(x.dtype) for a, b, x in zip(offsets[:-1], offsets[1:], leaves)]
    eps, _ = safe_normalize(jax.tree.unflatten(treedef, z), rho)
    return eps


def gsam_direction(ascent_grads: PyTree, perturbed_grads: PyTree, alpha: Any) -> PyTree:
    """GSAM's update direction ``g_p - alpha g_perp``.

    ``g_perp = h - <h, g_p> g_p / ||g_p||^2`` is the part of the ascent
    gradient ``h`` orthogonal to the perturbed gradient ``g_p``. ``alpha = 0``
    gives SAM. Safe when ``g_p = 0`` (then ``g_perp = h``).

    Args:
        ascent_grads: ``h``, the gradient at ``w`` that built the perturbation.
        perturbed_grads: ``g_p``, the training gradient at ``w + epsilon``.
        alpha: GSAM's coefficient (>= 0).

    Returns:
        The update direction, same structure and dtypes as ``perturbed_grads``.

    References:
        Zhuang et al., "Surrogate Gap Minimization Improves Sharpness-Aware
        Training", ICLR 2022, Algorithm 1 (lines 5-6).
    """
    unit, _ = safe_normalize(perturbed_grads)
    proj = tree_dot(ascent_grads, unit)

    def one(h, u, gp):
        dt = _acc_dtype(gp.dtype)
        perp = h.astype(dt) - proj * u.astype(dt)
        return (gp.astype(dt) - alpha * perp).astype(gp.dtype)

    return jax.tree.map(one, ascent_grads, unit, perturbed_grads)


# ----------------------------------------------------------------------------
# Perturbation geometries (static configuration objects)
# ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Perturbation:
    """Base class of a perturbation geometry (hashable, usable as a static jit argument).

    Subclasses implement :meth:`perturb` and optionally :meth:`direction`.

    Attributes:
        rho: perturbation radius, a float ``>= 0`` or an optax-style schedule
            ``count -> rho``.
    """

    rho: float | Schedule = 0.05
    needs_key: ClassVar[bool] = False

    def __post_init__(self) -> None:
        _check_rho(self.rho)

    def perturb(self, grads: PyTree, params: PyTree, key: PRNGKeyArray, rho: Any) -> PyTree:
        """The perturbation ``epsilon`` from the ascent gradient (``rho`` already evaluated)."""
        raise NotImplementedError

    def direction(self, ascent_grads: PyTree, perturbed_grads: PyTree) -> PyTree:
        """The final update direction from the ascent and perturbed gradients (SAM: ``g_p``)."""
        del ascent_grads
        return perturbed_grads


@dataclasses.dataclass(frozen=True)
class SAM(Perturbation):
    """Sharpness-aware minimization: ``epsilon = rho h / ||h||``, update with ``g(w + epsilon)``.

    References:
        Foret et al., "Sharpness-Aware Minimization for Efficiently Improving
        Generalization", ICLR 2021, Eq. 2-3.
    """

    def perturb(self, grads, params, key, rho):
        del params, key
        return sam_perturbation(grads, rho)


@dataclasses.dataclass(frozen=True)
class ASAM(Perturbation):
    """Adaptive SAM: ``epsilon = rho T^2 h / ||T h||``, ``T = |w| + eta`` on weights only.

    Attributes:
        rho: radius in the T-scaled norm (the paper uses larger values than SAM, e.g. 0.5-2).
        eta: offset of the normalisation operator (0.01).
        weight_mask: ``params -> pytree of bool`` (or the pytree) of adapted
            leaves; default: leaves with ``ndim >= 2``.

    References:
        Kwon et al., "ASAM: Adaptive Sharpness-Aware Minimization for
        Scale-Invariant Learning of Deep Neural Networks", ICML 2021, Eq. 9-10.
    """

    eta: float = 0.01
    weight_mask: Any = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not _as_float(self.eta, "eta") >= 0.0:
            raise ValueError(f"eta must be >= 0, got {self.eta!r}")

    def perturb(self, grads, params, key, rho):
        del key
        return asam_perturbation(grads, params, rho, self.eta, self.weight_mask)


@dataclasses.dataclass(frozen=True)
class GSAM(Perturbation):
    """Surrogate-gap guided SAM: SAM's perturbation, update ``g_p - alpha g_perp``.

    With :class:`OBF` as the perturbation loss (GSAM-OBF), ``g_perp`` is
    taken from the OBF ascent gradient, the gradient that built the
    perturbation, as in the authors' code (Vani et al. 2024); with the
    default loss it is the clean training gradient of Zhuang et al.

    Attributes:
        rho: radius or schedule; GSAM makes it follow the learning rate, see
            :func:`lr_proportional_rho`.
        alpha: weight of the orthogonal component (``alpha = 0`` is SAM).

    References:
        Zhuang et al., "Surrogate Gap Minimization Improves Sharpness-Aware
        Training", ICLR 2022, Algorithm 1.
    """

    alpha: float = 0.01

    def __post_init__(self) -> None:
        super().__post_init__()
        if not _as_float(self.alpha, "alpha") >= 0.0:
            raise ValueError(f"alpha must be >= 0, got {self.alpha!r}")

    def perturb(self, grads, params, key, rho):
        del params, key
        return sam_perturbation(grads, rho)

    def direction(self, ascent_grads, perturbed_grads):
        return gsam_direction(ascent_grads, perturbed_grads, self.alpha)


@dataclasses.dataclass(frozen=True)
class RandomDirection(Perturbation):
    """Control: a random direction of norm ``rho`` (ignores the gradient; needs ``key``).

    References:
        Vani et al., "Forget Sharpness: Perturbed Forgetting of Model Biases
        Within SAM Dynamics", ICML 2024, Sec. 5 (random perturbations).
    """

    needs_key: ClassVar[bool] = True

    def perturb(self, grads, params, key, rho):
        del params
        return random_perturbation(key, grads, rho)


# ----------------------------------------------------------------------------
# Output-bias forgetting (the perturbation loss of Vani et al. 2024)
# ----------------------------------------------------------------------------


def _one_hot(labels: Array, num_classes: int, dtype: Any) -> Array:
    if jnp.ndim(labels) == 1:
        if not jnp.issubdtype(labels.dtype, jnp.integer):
            raise TypeError(f"labels: expected int class indices [batch] or one-hot [batch, classes], got dtype {labels.dtype}")
        return jax.nn.one_hot(labels, num_classes, dtype=dtype)
    if jnp.ndim(labels) == 2 and labels.shape[-1] == num_classes:
        return labels.astype(dtype)
    raise ValueError(f"labels: expected shape [batch] or [batch, {num_classes}], got {jnp.shape(labels)}")


def _check_logits_labels(logits: Array, labels: Array) -> None:
    if jnp.ndim(logits) != 2:
        raise ValueError(f"logits: expected shape [batch, classes], got {jnp.shape(logits)}")
    if jnp.shape(labels)[0] != logits.shape[0]:
        raise ValueError(f"labels: batch size {jnp.shape(labels)[0]} does not match logits batch size {logits.shape[0]}")
    if logits.shape[-1] < 2:
        raise ValueError(f"logits: need at least 2 classes, got {logits.shape[-1]}")


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

    References:
        Vani et al., "Forget Sharpness: Perturbed Forgetting of Model Biases
        Within SAM Dynamics", ICML 2024, Sec. 4.2.
    """
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
    (``vjp``) gives OBF's ascent gradient.

    Args:
        logits: ``[batch, classes]``.
        labels: int ``[batch]`` or one-hot ``[batch, classes]``.
        gamma, lam, sigmoid: see :func:`obf_alpha`.

    Returns:
        ``[batch, classes]`` in the logits' dtype (computed in >= float32).

    References:
        Vani et al., "Forget Sharpness: Perturbed Forgetting of Model Biases
        Within SAM Dynamics", ICML 2024, Eq. 8 (gradient form).
    """
    a = obf_alpha(logits, labels, gamma, lam, sigmoid)[:, None]
    b, c = logits.shape
    dt = a.dtype
    x = jax.lax.stop_gradient(logits).astype(dt)
    p = jax.nn.sigmoid(x) if sigmoid else jax.nn.softmax(x, axis=-1)
    y = _one_hot(labels, c, dt)
    u = jnp.full_like(p, 1.0 / c)
    return ((u - a * p - (1.0 - a) * y) / b).astype(logits.dtype)


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
        alpha: ``a``, ``[batch]`` (treated as a constant).
        sigmoid: binary (True) or softmax (False) cross-entropy.

    Returns:
        Scalar loss in nats.
    """
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


@dataclasses.dataclass(frozen=True)
class OBF:
    """Output-bias forgetting as the perturbation loss (combine with any geometry).

    With ``SAM`` this is the paper's SAM-OBF (often just "OBF"); with ``GSAM``
    or ``ASAM``, GSAM-OBF and ASAM-OBF. The ascent gradient is the vjp of the
    logits with :func:`obf_cotangent`.

    Attributes:
        gamma: scale of ``a`` in [0, 1] (the authors use 1, or 1e-12 with SGD).
        lam: threshold ``lambda``; default ``1 / classes``.
        sigmoid: predictions by sigmoid (authors' default) or softmax.
        labels_key: key of the labels in the batch mapping.

    References:
        Vani et al., "Forget Sharpness: Perturbed Forgetting of Model Biases
        Within SAM Dynamics", ICML 2024, Sec. 4.2.
    """

    gamma: float = 1.0
    lam: float | None = None
    sigmoid: bool = True
    labels_key: str = "label"

    def __post_init__(self) -> None:
        if not 0.0 <= _as_float(self.gamma, "gamma") <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma!r}")
        if self.lam is not None and not 0.0 <= _as_float(self.lam, "lam") < 1.0:
            raise ValueError(f"lam must be in [0, 1) or None (1/classes), got {self.lam!r}")

    def cotangent(self, logits: Array, labels: Array) -> Array:
        """:func:`obf_cotangent` with this configuration."""
        return obf_cotangent(logits, labels, self.gamma, self.lam, self.sigmoid)
