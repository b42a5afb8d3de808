"""SAM-family perturbations as optax ``GradientTransformation`` s.

Two ways to use them with optax:

- as the *adversarial optimizer* of ``optax.contrib.sam`` (which alternates
  ascent and descent calls): :func:`normalize` (a NaN-free drop-in for
  ``optax.contrib.normalize``), :func:`sam_adversary`, :func:`asam_adversary`;
- as a self-contained two-call transformation, :func:`sharpness_aware_transform`,
  which also covers GSAM and the random control (their update needs the
  stored ascent gradient or a key, which ``optax.contrib.sam`` cannot hold),
  and OBF: a transformation only sees gradients, so for SAM-OBF / GSAM-OBF /
  ASAM-OBF give its ascent call the OBF ascent gradient
  (:func:`jaxcore.sam.ascent_gradient` with ``OBF()``) instead of the training
  gradient; the descent call takes the training gradient as always.

m-sharpness needs per-micro-batch gradients at once: use :func:`jaxcore.sam.step`
(``num_micro_batches``).

Keys: a transformation whose perturbation is random (:class:`~jaxcore.sam.RandomDirection`)
takes its PRNG key at construction and carries it in its state, split at each
ascent call. This is optax's own way for noise (``optax.add_noise(eta, gamma, seed)``
takes its seed at construction), and the only one that keeps the
``init(params)`` / ``update(updates, state, params)`` protocol that
``optax.chain``, ``optax.MultiSteps`` and ``inject_hyperparams`` call.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxtyping import PRNGKeyArray

from jaxcore._util import check_key, expected

from ._checks import _check_radius, _check_tree, _checked_value, _same_structure
from .geometries import Perturbation
from .perturbations import _asam_perturbation, _sam_perturbation
from .schedules import _rho_at
from .tree_math import _safe_normalize

PyTree = Any


def normalize() -> optax.GradientTransformation:
    """Scale updates to unit global norm, ``g / ||g||``; the zero tree stays zero (no NaN).

    A drop-in replacement for ``optax.contrib.normalize``, whose ``g / ||g||``
    is NaN at a zero gradient.

    Returns:
        A stateless ``optax.GradientTransformation``.

    Raises:
        Nothing at construction; ``update`` needs a pytree of float arrays.

    References:
        Foret et al., "Sharpness-Aware Minimization for Efficiently Improving
        Generalization", ICLR 2021, Eq. 2 (the normalised ascent direction).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.sam import normalize
        >>> tx = normalize()
        >>> tx.update(jnp.array([3.0, 4.0]), tx.init(None))[0].tolist()
        [0.6, 0.8]
    """

    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None):
        del params
        _check_tree(updates, "updates")  # trace-time check: no run-time cost
        out, _ = _safe_normalize(updates)
        return out, state

    return optax.GradientTransformation(init_fn, update_fn)


def sam_adversary(rho: float) -> optax.GradientTransformation:
    """Adversarial optimizer for ``optax.contrib.sam`` giving SAM's ``epsilon = rho g / ||g||``.

    ``optax.contrib.sam`` negates the adversarial updates, so this returns
    ``-epsilon`` (like ``chain(normalize(), sgd(rho))``, without its NaN).

    Args:
        rho: perturbation radius (finite, >= 0; a constant: ``optax.contrib.sam``
            keeps no step count for a schedule).

    Returns:
        A stateless ``optax.GradientTransformation``.

    Raises:
        ValueError: ``rho`` negative or not finite.
        TypeError: ``rho`` not a number.

    References:
        Foret et al., "Sharpness-Aware Minimization for Efficiently Improving
        Generalization", ICLR 2021, Eq. 2.

    Examples:
        >>> import optax
        >>> from jaxcore.sam import sam_adversary
        >>> opt = optax.contrib.sam(optax.sgd(0.1), sam_adversary(0.05), sync_period=2)
    """
    _check_radius(rho, schedule=False)
    rho = _checked_value(rho, "rho")  # a traced radius is checked once, here

    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None):
        del params
        _check_tree(updates, "updates")
        eps = _sam_perturbation(updates, rho)
        return jax.tree.map(jnp.negative, eps), state

    return optax.GradientTransformation(init_fn, update_fn)


def asam_adversary(rho: float, eta: float = 0.01, weight_mask: Any = None) -> optax.GradientTransformation:
    """Adversarial optimizer for ``optax.contrib.sam`` giving ASAM's ``rho T^2 g / ||T g||``.

    Needs ``params`` in ``update`` (``optax.contrib.sam`` passes them).

    Args:
        rho: radius in the T-scaled norm (finite, >= 0).
        eta: offset of ``T = |w| + eta`` (finite, >= 0).
        weight_mask: adapted leaves (see :func:`jaxcore.sam.asam_perturbation`).

    Returns:
        A stateless ``optax.GradientTransformation`` returning ``-epsilon``.

    Raises:
        ValueError: ``rho`` or ``eta`` negative or not finite; ``update`` without ``params``.
        TypeError: ``rho`` or ``eta`` not a number.

    References:
        Kwon et al., "ASAM: Adaptive Sharpness-Aware Minimization for
        Scale-Invariant Learning of Deep Neural Networks", ICML 2021, Eq. 9-10.

    Examples:
        >>> import optax
        >>> from jaxcore.sam import asam_adversary
        >>> opt = optax.contrib.sam(optax.sgd(0.1), asam_adversary(0.5), sync_period=2)
    """
    _check_radius(rho, schedule=False)
    rho = _checked_value(rho, "rho")
    eta = _checked_value(eta, "eta")

    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError(expected("params", "the parameters (asam_adversary's update needs T = |w| + eta)",
                                      None))
        _check_tree(updates, "updates")
        _check_tree(params, "params")
        _same_structure(updates, params, "updates", "params")
        eps = _asam_perturbation(updates, params, rho, eta, weight_mask)
        return jax.tree.map(jnp.negative, eps), state

    return optax.GradientTransformation(init_fn, update_fn)


class SharpnessAwareTransformState(NamedTuple):
    """State of :func:`sharpness_aware_transform`.

    Attributes:
        count: number of completed (descent) steps, int32; drives ``rho`` schedules.
        phase: 0 before an ascent call, 1 before a descent call (int32).
        opt_state: the base optimizer's state.
        cache: parameters ``w`` saved at the ascent call.
        ascent: ascent gradient ``h`` saved at the ascent call.
        key: PRNG key given at construction, split at each ascent call (used by
            ``RandomDirection``), or None (deterministic perturbations).

    References:
        Foret et al., ICLR 2021, Algorithm 1 (the two gradient calls of a step).

    Examples:
        >>> import jax.numpy as jnp, optax
        >>> from jaxcore.sam import SAM, sharpness_aware_transform
        >>> s = sharpness_aware_transform(optax.sgd(0.1), SAM(0.05)).init(jnp.zeros(2))
        >>> int(s.phase), s.key is None
        (0, True)
    """

    count: jax.Array
    phase: jax.Array
    opt_state: optax.OptState
    cache: PyTree
    ascent: PyTree
    key: jax.Array | None


def sharpness_aware_transform(
    optimizer: optax.GradientTransformation,
    perturbation: Perturbation,
    *,
    key: PRNGKeyArray | None = None,
) -> optax.GradientTransformation:
    """A SAM-family method as one optax transformation called twice per step.

    Call 1 (ascent), with the gradient ``h`` at ``w``: returns ``epsilon`` as
    the update, so that ``apply_updates`` moves to ``w + epsilon``. Call 2
    (descent), with the gradient ``g_p`` at ``w + epsilon``: returns
    ``w - (w + epsilon) + optimizer_update(direction(h, g_p))``, i.e. the base
    optimizer's step taken from ``w``. Same alternation as
    ``optax.contrib.sam(sync_period=2)``, with SAM, ASAM, GSAM or
    RandomDirection.

    OBF: give the ascent call the OBF ascent gradient
    ``jaxcore.sam.ascent_gradient(loss_fn, w, batch, OBF())`` in place of the
    training gradient (the transformation never sees the loss or the logits, so
    it cannot form OBF's gradient itself); with GSAM its ``g_perp`` then comes
    from the OBF gradient, exactly as in :func:`jaxcore.sam.step` with
    ``perturbation_loss=OBF()``.

    Args:
        optimizer: base optax optimizer.
        perturbation: SAM, ASAM, GSAM or RandomDirection.
        key: PRNG key carried in the state and split at each ascent call; required
            by RandomDirection; ``None`` (deterministic path) for SAM, ASAM, GSAM,
            whose updates do not use a key.

    Returns:
        An ``optax.GradientTransformation``; ``update`` needs ``params``. Its updates have
        the parameters' dtypes; gradients of another float dtype are cast to them first
        (explicitly: float16 gradients of float32 parameters are computed on in float32).

    Raises:
        TypeError: ``perturbation`` is not a ``Perturbation`` (``None`` included: the plain
            base optimizer is ``optimizer`` itself); RandomDirection without a key; a ``key``
            that is not a PRNG key; ``updates`` with a non-float leaf.
        ValueError: ``update`` without ``params``; ``updates`` not shaped like ``params``.

    Examples:
        >>> import jax, jax.numpy as jnp, optax
        >>> from jaxcore.sam import GSAM, sharpness_aware_transform
        >>> tx = sharpness_aware_transform(optax.sgd(0.1), GSAM(rho=0.05, alpha=0.1))
        >>> loss = lambda w: jnp.sum(w ** 4)
        >>> w = jnp.ones(2); s = tx.init(w)
        >>> for _ in range(2):  # ascent, then descent
        ...     u, s = tx.update(jax.grad(loss)(w), s, w); w = optax.apply_updates(w, u)
        >>> int(s.count)
        1

    References:
        Foret et al., ICLR 2021 (SAM); Kwon et al., ICML 2021 (ASAM);
        Zhuang et al., ICLR 2022 (GSAM).
    """
    if not isinstance(perturbation, Perturbation):
        raise TypeError(expected("perturbation", "a Perturbation (SAM, ASAM, GSAM, RandomDirection)",
                                 type(perturbation).__name__, raw=True))
    if not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
        raise TypeError(expected("optimizer", "an optax GradientTransformation", type(optimizer).__name__, raw=True))
    if key is not None:
        check_key(key)
    elif perturbation.needs_key:
        raise TypeError(expected("key", f"a jax.random.key(...) array ({type(perturbation).__name__} draws a "
                                 "random direction at each ascent call)", "None", raw=True))

    def init_fn(params):
        zeros = jax.tree.map(jnp.zeros_like, params)
        return SharpnessAwareTransformState(
            jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32), optimizer.init(params), params, zeros, key
        )

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError(expected("params", "the parameters (sharpness_aware_transform's update needs them)",
                                      None))
        _check_tree(updates, "updates")
        _same_structure(params, updates, "params", "updates")
        # Gradients of another float dtype (float16 gradients of float32 parameters) are cast explicitly to
        # the parameters' dtypes, in which the state (the stored h) and the updates live.
        updates = jax.tree.map(lambda u, p: u.astype(p.dtype), updates, params)

        def ascent(_):
            if state.key is None:
                k_next = k_eps = None
            else:
                k_next, k_eps = jax.random.split(state.key)
            rho = _rho_at(perturbation.rho, state.count)
            eps = perturbation.perturb(updates, params, rho, key=k_eps)
            eps = jax.tree.map(lambda e, p: e.astype(p.dtype), eps, params)
            new_state = state._replace(phase=jnp.ones((), jnp.int32), cache=params, ascent=updates, key=k_next)
            return eps, new_state

        def descent(_):
            d = perturbation.direction(state.ascent, updates)
            upd, opt_state = optimizer.update(d, state.opt_state, state.cache)
            out = jax.tree.map(lambda c, p, u: (c - p + u).astype(p.dtype), state.cache, params, upd)
            new_state = state._replace(
                count=state.count + 1, phase=jnp.zeros((), jnp.int32), opt_state=opt_state
            )
            return out, new_state

        return jax.lax.cond(state.phase == 0, ascent, descent, None)

    return optax.GradientTransformation(init_fn, update_fn)
