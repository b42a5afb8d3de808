"""SAM-family perturbations as optax ``GradientTransformation`` s.

Two ways to use them with optax:

- as the *adversarial optimizer* of ``optax.contrib.sam`` (which alternates
  ascent and descent calls): :func:`normalize` (a NaN-free drop-in for
  ``optax.contrib.normalize``), :func:`sam_adversary`, :func:`asam_adversary`;
- as a self-contained two-call transformation, :func:`sharpness_aware_transform`,
  which also covers GSAM and the random control (their update needs the
  stored ascent gradient or a key, which ``optax.contrib.sam`` cannot hold).

For OBF (its ascent gradient needs the logits) and m-sharpness use
:func:`jaxcore.sam.step`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from .perturbations import Perturbation, asam_perturbation, rho_at, safe_normalize, sam_perturbation

PyTree = Any


def normalize() -> optax.GradientTransformation:
    """Scale updates to unit global norm, ``g / ||g||``; the zero tree stays zero (no NaN).

    A drop-in replacement for ``optax.contrib.normalize``, whose ``g / ||g||``
    is NaN at a zero gradient.

    Returns:
        A stateless ``optax.GradientTransformation``.
    """

    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None):
        del params
        out, _ = safe_normalize(updates)
        return out, state

    return optax.GradientTransformation(init_fn, update_fn)


def sam_adversary(rho: float) -> optax.GradientTransformation:
    """Adversarial optimizer for ``optax.contrib.sam`` giving SAM's ``epsilon = rho g / ||g||``.

    ``optax.contrib.sam`` negates the adversarial updates, so this returns
    ``-epsilon`` (like ``chain(normalize(), sgd(rho))``, without its NaN).

    Example:
        >>> import optax
        >>> from jaxcore.sam import sam_adversary
        >>> opt = optax.contrib.sam(optax.sgd(0.1), sam_adversary(0.05), sync_period=2)

    Args:
        rho: perturbation radius (>= 0).

    Returns:
        A stateless ``optax.GradientTransformation``.

    Raises:
        ValueError: ``rho < 0``.

    References:
        Foret et al., "Sharpness-Aware Minimization for Efficiently Improving
        Generalization", ICLR 2021, Eq. 2.
    """
    Perturbation(rho)  # validates rho

    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None):
        del params
        eps = sam_perturbation(updates, rho)
        return jax.tree.map(jnp.negative, eps), state

    return optax.GradientTransformation(init_fn, update_fn)


def asam_adversary(rho: float, eta: float = 0.01, weight_mask: Any = None) -> optax.GradientTransformation:
    """Adversarial optimizer for ``optax.contrib.sam`` giving ASAM's ``rho T^2 g / ||T g||``.

    Needs ``params`` in ``update`` (``optax.contrib.sam`` passes them).

    Args:
        rho: radius in the T-scaled norm (>= 0).
        eta: offset of ``T = |w| + eta``.
        weight_mask: adapted leaves (see :func:`jaxcore.sam.asam_perturbation`).

    Returns:
        A stateless ``optax.GradientTransformation`` returning ``-epsilon``.

    Raises:
        ValueError: ``rho < 0`` or ``eta < 0``.

    References:
        Kwon et al., "ASAM: Adaptive Sharpness-Aware Minimization for
        Scale-Invariant Learning of Deep Neural Networks", ICML 2021, Eq. 9-10.
    """
    Perturbation(rho)  # validates rho
    if not float(eta) >= 0:
        raise ValueError(f"eta must be >= 0, got {eta!r}")

    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError("asam_adversary: update needs params (T = |w| + eta), got params=None")
        eps = asam_perturbation(updates, params, rho, eta, weight_mask)
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
        key: PRNG key (used by ``RandomDirection``).
    """

    count: jax.Array
    phase: jax.Array
    opt_state: optax.OptState
    cache: PyTree
    ascent: PyTree
    key: jax.Array


def sharpness_aware_transform(
    optimizer: optax.GradientTransformation,
    perturbation: Perturbation,
    key: jax.Array | None = None,
) -> optax.GradientTransformation:
    """A SAM-family method as one optax transformation called twice per step.

    Call 1 (ascent), with the gradient ``h`` at ``w``: returns ``epsilon`` as
    the update, so that ``apply_updates`` moves to ``w + epsilon``. Call 2
    (descent), with the gradient ``g_p`` at ``w + epsilon``: returns
    ``w - (w + epsilon) + optimizer_update(direction(h, g_p))``, i.e. the base
    optimizer's step taken from ``w``. Same alternation as
    ``optax.contrib.sam(sync_period=2)``, with SAM, ASAM, GSAM or
    RandomDirection.

    Example:
        >>> import jax, jax.numpy as jnp, optax
        >>> from jaxcore.sam import GSAM, sharpness_aware_transform
        >>> tx = sharpness_aware_transform(optax.sgd(0.1), GSAM(rho=0.05, alpha=0.1))
        >>> loss = lambda w: jnp.sum(w ** 4)
        >>> w = jnp.ones(2); s = tx.init(w)
        >>> for _ in range(2):  # ascent, then descent
        ...     u, s = tx.update(jax.grad(loss)(w), s, w); w = optax.apply_updates(w, u)

    Args:
        optimizer: base optax optimizer.
        perturbation: SAM, ASAM, GSAM or RandomDirection.
        key: PRNG key for RandomDirection (default ``jax.random.key(0)``).

    Returns:
        An ``optax.GradientTransformation``; ``update`` needs ``params``.

    Raises:
        TypeError: ``perturbation`` is not a ``Perturbation``.

    References:
        Foret et al., ICLR 2021 (SAM); Kwon et al., ICML 2021 (ASAM);
        Zhuang et al., ICLR 2022 (GSAM).
    """
    if not isinstance(perturbation, Perturbation):
        raise TypeError(f"perturbation: expected a Perturbation, got {type(perturbation).__name__}")

    def init_fn(params):
        zeros = jax.tree.map(jnp.zeros_like, params)
        k = jax.random.key(0) if key is None else key
        return SharpnessAwareTransformState(
            jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32), optimizer.init(params), params, zeros, k
        )

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError("sharpness_aware_transform: update needs params, got params=None")

        def ascent(_):
            k_next, k_eps = jax.random.split(state.key)
            rho = rho_at(perturbation.rho, state.count)
            eps = perturbation.perturb(updates, params, k_eps, rho)
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
