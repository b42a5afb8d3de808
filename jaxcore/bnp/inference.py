"""Variational inference for one task: the SVI step (:func:`make_svi_step`) and the fitting loop (:func:`fit`).

An **optax** optimiser inside one compiled ``lax.scan`` maximises the ELBO of an adaptive network
(:meth:`~jaxcore.bnp.AbstractAdaptiveNetwork.elbo`) over minibatches; :func:`fit` returns a :class:`FitResult`
with the loss history.

References:
    Thapa & Li, "Bayesian Adaptation of Network Depth and Width for Continual Learning", ICML 2024, Sec. 3.3.
"""

from __future__ import annotations

from typing import Any, NamedTuple
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import (Progress, check_int, check_key, check_progress, check_scalar, checked_index, checked_scalar,
                           expected, is_concrete)
from jaxcore._util.minibatch import minibatch_draw

from .model import AbstractAdaptiveNetwork, _check_batch_values, _check_labels, _check_model, _check_task

__all__ = [
    "FitResult",
    "FitState",
    "SVIStepResult",
    "fit",
    "make_svi_step",
]


class FitState(NamedTuple):
    """State of :func:`fit` and of the step of :func:`make_svi_step`.

    Attributes:
        params: the variational posterior, an :class:`~jaxcore.bnp.AbstractAdaptiveNetwork` (AdaptiveMLP, AdaptiveCNN).
        opt_state: the optax state of ``params``.

    Examples:
        >>> FitState._fields
        ('params', 'opt_state')
    """

    params: Any
    opt_state: Any


class SVIStepResult(NamedTuple):
    """Output of one step of :func:`make_svi_step`.

    Attributes:
        state: the updated :class:`FitState`.
        loss: ``-ELBO / N`` at the step's parameters before the update (nats per datum), scalar.
        grads: the gradient of ``loss`` with respect to the parameters (same pytree as the model).

    Examples:
        >>> SVIStepResult._fields
        ('state', 'loss', 'grads')
    """

    state: FitState
    loss: Float[Array, ""]
    grads: Any


class FitResult(NamedTuple):
    """Output of :func:`fit`.

    Attributes:
        params: the fitted variational posterior (same type as the initial model).
        opt_state: the final optax state (continue training with :func:`make_svi_step`).
        losses: ``[num_steps]`` float, the history of ``-ELBO / N`` (nats per datum) at each
            step's minibatch, before that step's update.

    Examples:
        >>> FitResult._fields
        ('params', 'opt_state', 'losses')
    """

    params: Any
    opt_state: Any
    losses: Float[Array, " num_steps"]


def _svi_step(optimizer, num_samples, kl_weight, adapt, key, state, prior, x, y, task, num_data):
    """The SVI step's computation (traced inside :func:`make_svi_step`'s program and :func:`fit`'s scan)."""

    def loss_fn(params):
        elbo, aux = params._elbo(key, prior, x, y, task, num_data, num_samples, kl_weight, adapt)
        return -elbo, aux

    (loss, _), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    return SVIStepResult(FitState(optax.apply_updates(state.params, updates), opt_state), loss, grads)


_svi_step_jit = eqx.filter_jit(_svi_step)


def make_svi_step(optimizer: optax.GradientTransformation, num_samples: int, kl_weight=1.0, adapt=True):
    """One stochastic variational step: ELBO gradient with ``S`` vmapped samples + optax update.

    ``loss = -ELBO / N`` (:meth:`~jaxcore.bnp.AbstractAdaptiveNetwork.elbo`), its gradient by ``jax.value_and_grad``,
    then ``optimizer.update`` and ``optax.apply_updates``. The returned step runs one
    compiled program (compiled once per step function and argument shapes; Python
    ``task`` / ``num_data`` values are compile-time constants, arrays are traced).

    Args:
        optimizer: an optax gradient transformation (e.g. ``optax.adam(1e-3)``).
        num_samples: ``S``, Monte Carlo samples per ELBO estimate (static int >= 1).
        kl_weight: KL multiplier (1 = the ELBO); float or traced scalar.
        adapt: structure adaptation switch (see :meth:`~jaxcore.bnp.AbstractAdaptiveNetwork.elbo`); bool or traced.

    Returns:
        ``step(key, state, prior, x, y, task, num_data) -> SVIStepResult`` with ``state`` a
        :class:`FitState` (``FitState(model, optimizer.init(model))`` to start), ``prior`` a model,
        ``x`` ``[B, D]``, ``y`` ``[B]`` int, ``task`` the head index and ``num_data`` the task's
        training-set size ``N``.

    Raises:
        TypeError / ValueError: ``num_samples`` not an int >= 1, ``optimizer`` not an optax
            transformation, a concrete ``kl_weight`` not finite and >= 0; the step raises for a bad
            key or shapes, an empty batch, and for concrete labels outside ``[0, num_classes)``, a
            concrete ``task`` outside ``[0, num_heads)``, concrete ``x`` with NaN/inf or a concrete
            ``num_data`` not finite and > 0 (host checks only: the compiled step has no run-time
            checks).

    References:
        Thapa & Li, ICML 2024, Sec. 3.3 (training); Kingma & Ba, "Adam", ICLR 2015.

    Examples:
        >>> import jax, optax
        >>> from jaxcore.bnp import AdaptiveMLP
        >>> model = AdaptiveMLP(3, 4, 2, 1, 2, key=jax.random.key(0), adapt_structure=False)
        >>> opt = optax.adam(1e-2)
        >>> step = make_svi_step(opt, num_samples=2)
        >>> x, y = jax.numpy.ones((6, 3)), jax.numpy.array([0, 1, 0, 1, 0, 1])
        >>> out = step(jax.random.key(1), FitState(model, opt.init(model)), model.init_prior(), x, y, 0, 6.0)
        >>> out.loss.shape, type(out.state.params).__name__
        ((), 'AdaptiveMLP')
    """
    num_samples = check_int(num_samples, "num_samples", 1)
    if not isinstance(optimizer, optax.GradientTransformation):
        raise TypeError(expected("optimizer", "an optax.GradientTransformation", type(optimizer).__name__, raw=True))
    if is_concrete(kl_weight):
        check_scalar(kl_weight, "kl_weight", nonnegative=True)

    def step(key, state, prior, x, y, task, num_data):
        check_key(key)
        _check_model(state.params, "state.params")
        _check_model(prior, "prior")
        state.params._check_xy(x, y)
        _check_task(state.params, task)  # host checks of concrete values only: the step's program is unchanged
        _check_labels(state.params, y)
        _check_batch_values(x, num_data, 1.0)
        return _svi_step_jit(optimizer, num_samples, kl_weight, adapt, key, state, prior, x, y, task, num_data)

    step.__doc__ = (f"One SVI step (S = {num_samples}): ``step(key, state, prior, x, y, task, num_data) -> "
                    "SVIStepResult``; see :func:`jaxcore.bnp.make_svi_step`.")
    return step


def _fit(key, params, prior, x, y, num_valid, task, learning_rate, kl_weight, adapt, num_steps, batch_size,
         num_samples, progress):
    optimizer = optax.flatten(optax.adam(learning_rate))  # one flat moment vector: ~1 s less compile per fit
    state = FitState(params, optimizer.init(params))
    num_valid_f = jnp.asarray(num_valid, jnp.float32)
    prog = Progress(progress, num_steps, "bnp.fit")

    def body(state, inp):
        i, k = inp if prog.enabled else (None, inp)
        kb, ks = jax.random.split(k)
        idx = minibatch_draw(kb, num_valid, batch_size)
        out = _svi_step(optimizer, num_samples, kl_weight, adapt, ks, state, prior, x[idx], y[idx], task,
                        num_valid_f)
        prog.update(i, {"loss": out.loss})
        return out.state, out.loss

    keys = jax.random.split(key, num_steps)
    # the step index is a scan input only when it is reported (without progress the program is unchanged)
    state, losses = jax.lax.scan(body, state, (jnp.arange(num_steps), keys) if prog.enabled else keys)
    return FitResult(state.params, state.opt_state, losses)


_fit_jit = eqx.filter_jit(_fit)


def _scalar_arg(x, name, *, positive):
    """A float32 scalar > 0 (>= 0): a host check when concrete, ``equinox.error_if`` once when traced."""
    if isinstance(x, jax.Array) and x.ndim != 0:
        raise ValueError(expected(name, "a scalar", f"shape {x.shape}", raw=True))
    x = checked_scalar(x, name, positive=positive, nonnegative=not positive)
    return jnp.asarray(x, jnp.float32) if is_concrete(x) else x


def fit(
    key: PRNGKeyArray,
    params: AbstractAdaptiveNetwork,
    prior: AbstractAdaptiveNetwork,
    x,
    y,
    num_valid,
    task,
    *,
    num_steps: int,
    batch_size: int,
    num_samples: int = 4,
    learning_rate=1e-3,
    kl_weight=1.0,
    adapt=True,
    progress: bool | Any = False,
) -> FitResult:
    """Maximise the ELBO of one task with Adam over random minibatches (one compiled ``lax.scan``).

    Each step draws ``batch_size`` rows uniformly from the first ``num_valid`` rows and takes
    one SVI step (:func:`make_svi_step`) on ``-ELBO / N`` with ``N = num_valid``.

    Args:
        key: PRNG key (minibatches and Monte Carlo draws).
        params: the initial variational posterior (a new model, or the previous posterior).
        prior: the prior (the previous posterior, or :meth:`~jaxcore.bnp.AbstractAdaptiveNetwork.init_prior`).
        x: padded training inputs ``[N_max, ...]`` float; y: labels ``[N_max]`` int.
        num_valid: number of real rows ``N <= N_max`` (rows past it are padding); int or traced.
        task: head index; int or traced int32.
        num_steps: optimiser steps (static int >= 1).
        batch_size: examples per minibatch (static int >= 1).
        num_samples: Monte Carlo samples ``S`` per ELBO estimate (static int >= 1).
        learning_rate: Adam step size; may be traced.
        kl_weight: KL multiplier (1 = ELBO); may be traced.
        adapt: structure adaptation switch (see :meth:`~jaxcore.bnp.AbstractAdaptiveNetwork.elbo`); may be traced.
        progress: ``False`` (default), ``True`` (a progress bar) or ``fn(step, {"loss": ...})``.

    Returns:
        :class:`FitResult` ``(params, opt_state, losses)``; ``losses`` ``[num_steps]`` is the
        history of ``-ELBO / N`` (nats per datum).

    Raises:
        ValueError / TypeError: ``num_steps``, ``batch_size`` or ``num_samples`` not a positive int,
            ``y`` not one label per row of ``x``, a concrete ``num_valid`` outside ``[1, N_max]``,
            labels (of the first ``num_valid`` rows) that are not integers in ``[0, num_classes)``,
            a ``task`` outside ``[0, num_heads)`` (never clamped), a ``learning_rate`` that is not
            finite and > 0 or a ``kl_weight`` not finite and >= 0, a bad key or progress. Traced
            ``learning_rate``, ``kl_weight`` and ``task`` are checked once at run time
            (``equinox.error_if``) before the training scan, never inside it.

    References:
        Thapa & Li, ICML 2024, Sec. 3.3; Kingma & Ba, "Adam", ICLR 2015.

    Examples:
        >>> import jax
        >>> from jaxcore.bnp import AdaptiveMLP
        >>> from jaxcore.datasets import split_digits
        >>> tasks = split_digits()
        >>> model = AdaptiveMLP(64, 16, 2, tasks.num_tasks, tasks.num_classes, key=jax.random.key(0))
        >>> res = fit(jax.random.key(1), model, model.init_prior(), tasks.x_train[1], tasks.y_train[1],
        ...           tasks.n_train[1], 1, num_steps=20, batch_size=32, num_samples=1, learning_rate=1e-2)
        >>> res.losses.shape, type(res.params).__name__
        ((20,), 'AdaptiveMLP')
    """
    check_key(key)
    _check_model(params, "params")
    _check_model(prior, "prior")
    num_steps = check_int(num_steps, "num_steps", 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    num_samples = check_int(num_samples, "num_samples", 1)
    progress = check_progress(progress)
    if jnp.ndim(x) < 1 or jnp.shape(y) != jnp.shape(x)[:1]:
        raise ValueError(expected("y", f"shape [N_max] (one label per row of x {jnp.shape(x)})",
                                  f"shape {jnp.shape(y)}", raw=True))
    if is_concrete(num_valid):
        if np.ndim(num_valid) != 0:
            raise ValueError(expected("num_valid", "a scalar", f"shape {np.shape(num_valid)}", raw=True))
        check_int(int(np.asarray(num_valid)), "num_valid", 1, jnp.shape(x)[0])
    params._check_x(x)
    _check_task(params, task)
    _check_labels(params, y, num_valid if is_concrete(num_valid) else None)
    learning_rate = _scalar_arg(learning_rate, "learning_rate", positive=True)
    kl_weight = _scalar_arg(kl_weight, "kl_weight", positive=False)
    num_valid = jnp.asarray(num_valid, jnp.int32)
    task = jnp.asarray(task, jnp.int32)
    # a traced task is checked once here, before the scan (never inside the training loop)
    task = checked_index(task, "task", params.num_heads, f"an int in [0, {params.num_heads - 1}] (a head index)",
                         check=not is_concrete(task))
    return _fit_jit(key, params, prior, x, y, num_valid, task, learning_rate, kl_weight, adapt, num_steps,
                    batch_size, num_samples, progress)
