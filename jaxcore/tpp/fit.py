"""Maximum-likelihood fitting of the classical point processes with optax."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array

from ._common import check_int
from .events import EventBatch, check_batch


class FitResult(NamedTuple):
    """Output of :func:`fit_mle`.

    Attributes:
        model: the fitted model (same class as the initial one).
        losses: ``[steps]`` negative log-likelihood per event (nats) along the optimisation.
    """

    model: Any
    losses: Array


def fit_mle(model: Any, batch: EventBatch, *, steps: int = 100, optimizer: optax.GradientTransformation | None = None,
            **loglik_kwargs: Any) -> FitResult:
    """Fit a classical model (``Poisson``, ``Hawkes``, ``SelfCorrecting``) by maximum likelihood.

    Minimises ``-sum_b log L_b / sum_b N_b`` over the model's unconstrained
    parameters (``model.to_unconstrained()``; softplus/exp maps back) with an
    optax optimizer (L-BFGS by default), full batch, the ``steps`` iterations run in one ``lax.scan``.

    Args:
        model: initial model; provides ``to_unconstrained``, ``from_unconstrained``
            and ``log_likelihood``.
        batch: the training sequences.
        steps: optimisation steps.
        optimizer: an optax transformation (default ``optax.lbfgs()``, whose
            zoom line search copes with the self-correcting likelihood's narrow
            valley; any optax optimizer, e.g. ``optax.adam(0.05)``, works).
        **loglik_kwargs: passed to ``model.log_likelihood``.

    Returns:
        A :class:`FitResult` ``(model, losses)``.

    Raises:
        TypeError: the model has no unconstrained parametrisation or batch is no EventBatch.
        ValueError: ``steps < 1``.
    """
    check_batch(batch)
    steps = check_int(steps, "steps")
    if not hasattr(model, "to_unconstrained") or not hasattr(model, "log_likelihood"):
        raise TypeError(f"model: expected a jaxcore.tpp classical model (Poisson, Hawkes, SelfCorrecting), "
                        f"got {type(model).__name__}")
    optimizer = _default_optimizer() if optimizer is None else optimizer
    u, losses = _fit_run(model, model.to_unconstrained(), batch, optimizer, steps, loglik_kwargs)
    return FitResult(model.from_unconstrained(u), losses)


@functools.cache
def _default_optimizer() -> optax.GradientTransformation:
    # one instance, so that repeated fits hit the compilation cache (optimizers are static arguments)
    return optax.lbfgs()


@eqx.filter_jit
def _fit_run(model, u0, batch, optimizer, steps, loglik_kwargs):
    """All ``steps`` optimizer iterations in one ``lax.scan``; compiled once per model structure,
    data shape, optimizer and step count (the model's arrays and the data are traced)."""
    n_events = jnp.maximum(jnp.sum(batch.mask), 1)

    def loss_fn(u):
        m = model.from_unconstrained(u)
        return -jnp.sum(m.log_likelihood(batch, **loglik_kwargs)) / n_events

    def step(carry, _):
        u, state = carry
        loss, g = jax.value_and_grad(loss_fn)(u)
        # value/value_fn let line-search optimizers (optax.lbfgs) work too; others ignore them
        updates, state = optimizer.update(g, state, u, value=loss, grad=g, value_fn=loss_fn)
        return (optax.apply_updates(u, updates), state), loss

    (u, _), losses = jax.lax.scan(step, (u0, optimizer.init(u0)), None, length=steps)
    return u, losses
