"""Training of the learned models (the NJDTPP and the neural TPPs) by minibatch maximum likelihood with optax.

:func:`train` fits an :class:`~jaxcore.tpp.NJDTPP` on its jump-diffusion likelihood (:func:`jaxcore.tpp.solve`,
one Brownian path per step) or a neural TPP on its exact-or-quadrature likelihood, every step in one
``lax.scan``. The classical processes are fitted by :func:`jaxcore.tpp.fit_mle` (``fit.py``).

References:
    Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024, Sec. 4.4 (training by
    maximum likelihood with Adam).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import (Progress, ProgressArg, check_bool, check_choice, check_int, check_key, check_progress,
                           expected)
from jaxcore._util.minibatch import batch_mesh, minibatch_schedule, take_local

from ._integrate import solve_batch
from .events import EventBatch, check_batch, check_marks
from .neural import NeuralTPP, log_likelihood_program
from .njdtpp import NJDTPP

class TrainResult(NamedTuple):
    """Output of :func:`train`.

    Attributes:
        model: the trained :class:`NJDTPP` (with a validation batch: the one with the best
            validation NLL among the evaluations).
        losses: ``[num_steps]`` minibatch train NLL per event (nats) at each step.
        valid_losses: ``[num_evals]`` validation NLL per event (nats) at each evaluation
            (every ``eval_every`` steps and at the last); empty without a validation batch.

    Examples:
        >>> from jaxcore.tpp import TrainResult
        >>> TrainResult._fields
        ('model', 'losses', 'valid_losses')
    """

    model: NJDTPP
    losses: Float[Array, " num_steps"]
    valid_losses: Float[Array, " num_evals"]


def train(
    key: PRNGKeyArray,
    model: NJDTPP,
    batch: EventBatch,
    *,
    num_steps: int = 500,
    batch_size: int = 32,
    optimizer: optax.GradientTransformation | None = None,
    num_substeps: int = 10,
    convention: str = "window",
    valid_batch: EventBatch | None = None,
    eval_every: int = 50,
    stochastic: bool = True,
    progress: ProgressArg = False,
    num_quadrature: int = 16,
    mesh: Mesh | None = None,
) -> TrainResult:
    """Fit an NJDTPP (or a neural TPP) by minibatch maximum likelihood with optax, all steps in one ``lax.scan``.

    Each step draws ``batch_size`` sequences uniformly (with replacement) and a
    fresh Brownian key, and takes one optimizer step on
    ``-sum log L / sum N`` (nats per event). With the sequences split over devices (``mesh=``, or
    ``batch`` placed on a ``NamedSharding`` of its sequence axis) each device instead draws its
    ``batch_size / D`` sequences of a step from its own ``N / D`` (a stratified minibatch, each
    sequence of a block once per block epoch; schedule key ``fold_in(key of the validation, 1)``),
    so no sequence moves between devices and only the parameter gradient is all-reduced; the
    estimate of the gradient stays unbiased, but the draws differ from the one-device ones. With a validation batch the model
    with the best validation NLL (evaluated every ``eval_every`` steps and at the last,
    with one fixed noise key derived from ``key``) is returned. The step keys are
    ``jax.random.split(key, num_steps + 1)[:num_steps]``, the validation key the last one.

    Args:
        key: PRNG key (minibatches, Brownian noise, validation noise).
        model: the initial :class:`NJDTPP`, or a neural TPP (:class:`jaxcore.tpp.RMTPP`, ``NHP``,
            ``THP``, ``SAHP``, ``IFTPP``; trained on its exact-or-quadrature likelihood).
        batch: training sequences.
        num_steps: optimizer steps.
        batch_size: sequences per minibatch.
        optimizer: optax transformation (default ``adam(1e-2)`` after global-norm clipping at 10).
            The clipping is what makes the default safe: a long inter-event gap gives a
            gradient spike, and plain ``optax.adam(1e-2)`` trained the NJDTPP to an NLL of
            14.5 nats per event where the clipped default reached 1.73 (issue 15). Pass the
            same instance again to reuse the compiled program.
        num_substeps, convention: passed to :func:`solve`.
        valid_batch: optional validation sequences for model selection.
        eval_every: validation period in steps.
        stochastic: include the diffusion term during training (False: drift only).
        num_quadrature: Gauss-Legendre nodes per interval of a neural TPP's compensator
            (:meth:`jaxcore.tpp.NeuralTPP.log_likelihood`; ignored for the NJDTPP).
        progress: ``False`` (default), ``True`` (a progress bar) or ``fn(step, {"loss": ...})``
            called on the host from inside the loop.
        mesh: a ``jax.sharding.Mesh`` whose first axis splits the sequences (its size must divide
            ``batch.num_sequences`` and ``batch_size``); None: read the split from ``batch``'s
            placement (one-device sampling when it is not split).

    Returns:
        A :class:`TrainResult` ``(model, losses [num_steps], valid_losses [num_evals])``.

    Raises:
        TypeError: ``key`` is not a PRNG key; bad model, batch or ``progress``.
        ValueError: non-positive sizes; unknown ``convention``; a batch's number of marks
            differs from the model's; a ``mesh`` whose first axis does not divide the sequences
            or ``batch_size`` (``TypeError`` for a ``mesh`` that is not a Mesh).

    References:
        Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024, Sec. 4.4
        (training by maximum likelihood with Adam).

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import NJDTPP, EventBatch, train
        >>> batch = EventBatch.from_sequences([[0.5, 1.0], [0.2, 1.5]], T=2.0)
        >>> model = NJDTPP(1, key=jax.random.key(0), width=2, depth=0)
        >>> res = train(jax.random.key(1), model, batch, num_steps=3, batch_size=2, num_substeps=1)
        >>> res.losses.shape, res.valid_losses.shape
        ((3,), (0,))
    """
    check_key(key)
    if not isinstance(model, (NJDTPP, NeuralTPP)):
        raise TypeError(expected("model", "an NJDTPP or a neural TPP (RMTPP, NHP, THP, SAHP, IFTPP)",
                                 type(model).__name__, raw=True))
    check_batch(batch)
    check_marks(batch, model.num_marks)
    if valid_batch is not None:
        check_batch(valid_batch, "valid_batch")
        check_marks(valid_batch, model.num_marks, "valid_batch")
    num_steps = check_int(num_steps, "num_steps", minimum=1)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    eval_every = check_int(eval_every, "eval_every", minimum=1)
    num_substeps = check_int(num_substeps, "num_substeps", minimum=1)
    num_quadrature = check_int(num_quadrature, "num_quadrature", minimum=1)
    check_choice(convention, "convention", ("window", "paper"))
    if isinstance(model, NeuralTPP):
        if convention != "window":
            raise ValueError(expected("convention", "'window' for a neural TPP", convention))
        num_substeps = -num_quadrature  # the neural likelihood's static setting (negative: quadrature nodes)
    stochastic = check_bool(stochastic, "stochastic")
    progress = check_progress(progress)
    if optimizer is not None and not isinstance(optimizer, optax.GradientTransformation):
        raise TypeError(expected("optimizer", "an optax.GradientTransformation (or None for the clipped Adam "
                                              "default)", type(optimizer).__name__, raw=True))
    where = batch_mesh(mesh, batch.times, batch.num_sequences, batch_size, data_name="batch.num_sequences")
    model = model._checked()  # finite weights, checked once before the training loop
    optimizer = _default_optimizer() if optimizer is None else optimizer
    params, static = eqx.partition(model, eqx.is_inexact_array)
    keys = jax.random.split(key, num_steps + 1)  # the first num_steps as in a plain split, the last for validation
    if valid_batch is None:
        eval_every = 0  # unused: one program for every eval_every
    final, losses, valid_losses = _train_run(params, static, batch, valid_batch, keys, optimizer, batch_size,
                                             num_substeps, convention, stochastic, eval_every, num_steps, progress,
                                             where)
    return TrainResult(eqx.combine(final, static), losses, valid_losses)


@functools.cache
def _default_optimizer() -> optax.GradientTransformation:
    # one instance, so that repeated calls of train hit the compilation cache (the optimizer is static)
    return optax.chain(optax.clip_by_global_norm(10.0), optax.adam(1e-2))


def training_loss(params, static, batch, key, num_substeps, convention, stochastic):
    """``-sum log L / sum N`` (nats per event; the paper convention does not count first events)."""
    m = eqx.combine(params, static)
    if num_substeps < 0:  # a neural TPP (train passes minus its number of quadrature nodes)
        ll = log_likelihood_program(m, batch, -num_substeps)
        return -jnp.sum(ll.log_likelihood) / jnp.maximum(jnp.sum(batch.mask), 1)
    ll = solve_batch(m, batch, key if stochastic else None, "scan", num_substeps, convention, None, None, 4096, 1e-3)
    n = jnp.sum(batch.mask) - (batch.num_sequences if convention == "paper" else 0)
    return -jnp.sum(ll.log_likelihood) / jnp.maximum(n, 1)


def _train_step(params, static, opt_state, batch, key, optimizer, batch_size, num_substeps, convention, stochastic,
                where=None, rows=None):
    """One optimizer step on a minibatch of ``batch_size`` sequences: drawn with replacement, or
    (``where`` a :class:`~jaxcore._util.minibatch.BatchMesh`) the schedule's ``rows``, each device
    taking its share from its own block."""
    k_idx, k_noise = jax.random.split(key)
    if where is None:
        idx = jax.random.randint(k_idx, (batch_size,), 0, batch.num_sequences)
        sub = EventBatch(batch.times[idx], batch.marks[idx], batch.mask[idx], batch.T[idx], batch.num_marks)
    else:
        t, mk, ms, tt = take_local(where, (batch.times, batch.marks, batch.mask, batch.T), rows, batch.num_sequences)
        sub = EventBatch(t, mk, ms, tt, batch.num_marks)
    loss, g = jax.value_and_grad(training_loss)(params, static, sub, k_noise, num_substeps, convention, stochastic)
    updates, opt_state = optimizer.update(g, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


@eqx.filter_jit
def _train_run(params, static, batch, valid_batch, keys, optimizer, batch_size, num_substeps, convention,
               stochastic, eval_every, num_steps, progress, where=None):
    """All ``num_steps`` steps (and the validations) in one ``lax.scan``; compiled once per model
    structure, data shapes and setting, and reused across calls of :func:`train`."""
    prog = Progress(progress, num_steps, "train NJDTPP")
    step_keys, eval_key = keys[:num_steps], keys[num_steps]
    has_valid = valid_batch is not None
    opt_state = optimizer.init(params)
    if where is None:
        schedule = jnp.zeros((num_steps, 0), jnp.int32)
    else:
        schedule = minibatch_schedule(jax.random.fold_in(eval_key, 1), batch.num_sequences, batch_size, num_steps,
                                      where.num_shards)

    def body(carry, xs):
        params, opt_state, best, best_params = carry
        i, k, rows = xs
        params, opt_state, loss = _train_step(params, static, opt_state, batch, k, optimizer, batch_size,
                                              num_substeps, convention, stochastic, where, rows)
        v = jnp.full((), jnp.nan, loss.dtype)
        if has_valid:
            due = ((i + 1) % eval_every == 0) | (i == num_steps - 1)
            v = jax.lax.cond(
                due, lambda p: training_loss(p, static, valid_batch, eval_key, num_substeps, convention,
                                           stochastic).astype(loss.dtype),
                lambda p: jnp.full((), jnp.nan, loss.dtype), params)
            better = due & jnp.isfinite(v) & (v < best)
            best = jnp.where(better, v, best)
            best_params = jax.tree.map(lambda a, b: jnp.where(better, a, b), params, best_params)
        prog.update(i, {"loss": loss})
        return (params, opt_state, best, best_params), (loss, v)

    init = (params, opt_state, jnp.full((), jnp.inf, batch.times.dtype), params if has_valid else None)
    (params, _, _, best_params), (losses, valid_all) = jax.lax.scan(
        body, init, (jnp.arange(num_steps), step_keys, schedule))
    if not has_valid:
        return params, losses, jnp.zeros((0,), losses.dtype)
    evals = np.asarray([s for s in range(num_steps) if (s + 1) % eval_every == 0 or s == num_steps - 1])
    return best_params, losses, valid_all[evals]
