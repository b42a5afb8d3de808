"""Maximum-likelihood fitting of the classical point processes with optax."""

from __future__ import annotations

import functools
import warnings
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float

from jaxcore._util import Progress, ProgressArg, check_int, check_progress, expected
from jaxcore._util.checks import trusted_values

from .events import EventBatch, check_batch


class FitResult(NamedTuple):
    """Output of :func:`fit_mle`.

    Attributes:
        model: the fitted model (same class as the initial one).
        losses: ``[num_steps]`` negative log-likelihood per event (nats) along the optimisation
            (the loss at the parameters each step started from).

    Examples:
        >>> from jaxcore.tpp import FitResult
        >>> FitResult._fields
        ('model', 'losses')
    """

    model: Any
    losses: Float[Array, " num_steps"]


def fit_mle(model: Any, batch: EventBatch, *, num_steps: int = 100,
            optimizer: optax.GradientTransformation | None = None, progress: ProgressArg = False,
            **loglik_kwargs: Any) -> FitResult:
    """Fit a classical model (``Poisson``, ``Hawkes``, ``SharedDecayHawkes``, ``SelfCorrecting``) by maximum likelihood.

    Minimises ``-sum_b log L_b / sum_b N_b`` (nats per event) over the model's unconstrained
    parameters (``model.to_unconstrained()``; softplus/exp maps back) with an
    optax optimizer (L-BFGS by default), full batch, the ``num_steps`` iterations run in one
    ``lax.scan`` inside one compiled program (reused by later fits of the same shapes).

    Args:
        model: initial model; provides ``to_unconstrained``, ``from_unconstrained``
            and ``log_likelihood``.
        batch: the training sequences.
        num_steps: optimisation steps.
        optimizer: an optax transformation (default ``optax.lbfgs()``, whose
            zoom line search copes with the self-correcting likelihood's narrow
            valley; any optax optimizer, e.g. ``optax.adam(0.05)``, works). Pass the same
            instance again to reuse the compiled program.
        progress: ``False`` (default), ``True`` (a progress bar) or ``fn(step, {"loss": ...})``
            called on the host from inside the loop.
        **loglik_kwargs: passed to ``model.log_likelihood``.

    Returns:
        A :class:`FitResult` ``(model, losses)``, ``losses`` of shape ``[num_steps]``.

    Raises:
        TypeError: the model has no unconstrained parametrisation, batch is no EventBatch, or
            ``progress`` is neither a bool nor a callable.
        ValueError: ``num_steps < 1``.

    Warns:
        RuntimeWarning: the optimisation diverged (a non-finite loss or parameter); the result is returned
            with its history. The loop itself carries no run-time checks (its iterates are valid by
            construction), so its compiled program can be stored by JAX's persistent compilation cache.

    References:
        Ozaki (1979) (Hawkes MLE); D. C. Liu, J. Nocedal, "On the limited memory BFGS method
        for large scale optimization", Math. Programming 45, 1989.

    Examples:
        >>> from jaxcore.tpp import SharedDecayHawkes, event_batches, fit_mle
        >>> train = event_batches("coal").train       # 24 four-year windows of coal-mining disasters
        >>> res = fit_mle(SharedDecayHawkes(0.5, 0.5, 1.0), train, num_steps=20)
        >>> res.losses.shape, bool(res.losses[-1] < res.losses[0])
        ((20,), True)
    """
    check_batch(batch)
    num_steps = check_int(num_steps, "num_steps", minimum=1)
    progress = check_progress(progress)
    if not hasattr(model, "to_unconstrained") or not hasattr(model, "log_likelihood"):
        raise TypeError(expected("model", "a jaxcore.tpp classical model (Poisson, Hawkes, SharedDecayHawkes, "
                                          "SelfCorrecting)", type(model).__name__, raw=True))
    optimizer = _default_optimizer() if optimizer is None else optimizer
    u, losses = _fit_run(model, model.to_unconstrained(), batch, optimizer, num_steps, progress, loglik_kwargs)
    fitted = model.from_unconstrained(u)
    bad = ~np.isfinite(np.asarray(losses))
    if bad.any() or not all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree_util.tree_leaves(u)):
        step = int(np.argmax(bad)) if bad.any() else num_steps - 1
        warnings.warn(f"fit_mle: the optimisation diverged (non-finite loss or parameters from step {step}); "
                      "the result holds them: use a smaller step size or another optimizer", RuntimeWarning,
                      stacklevel=2)
    return FitResult(fitted, losses)


@functools.cache
def _default_optimizer() -> optax.GradientTransformation:
    # one instance, so that repeated fits hit the compilation cache (optimizers are static arguments)
    return optax.lbfgs()


@eqx.filter_jit
def _fit_run(model, u0, batch, optimizer, num_steps, progress, loglik_kwargs):
    """All ``num_steps`` optimizer iterations in one ``lax.scan``; compiled once per model structure,
    data shape, optimizer, step count and progress sink (the model's arrays and the data are traced)."""
    n_events = jnp.maximum(jnp.sum(batch.mask), 1)
    prog = Progress(progress, num_steps, "fit_mle")

    def loss_fn(u):
        m = model.from_unconstrained(u)
        # valid by construction (positive transforms of real numbers): no run-time checks in the loop, so
        # the program holds no host callback and JAX's persistent cache can store it (checked after the run)
        with trusted_values(m, batch):
            return -jnp.sum(m.log_likelihood(batch, **loglik_kwargs)) / n_events

    def step(carry, i):
        u, state = carry
        loss, g = jax.value_and_grad(loss_fn)(u)
        # value/value_fn let line-search optimizers (optax.lbfgs) work too; others ignore them
        updates, state = optimizer.update(g, state, u, value=loss, grad=g, value_fn=loss_fn)
        prog.update(i, {"loss": loss})
        return (optax.apply_updates(u, updates), state), loss

    (u, _), losses = jax.lax.scan(step, (u0, optimizer.init(u0)), jnp.arange(num_steps))
    return u, losses
