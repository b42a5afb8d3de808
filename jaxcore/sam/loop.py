"""The scanned training loop of the SAM family: :func:`train`, :func:`step` over ``num_steps`` minibatches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxcore._util import Progress, check_progress, checked_index, expected

from ._checks import _batch_size, _check_tree, _checked_fields
from ._loss import LossFn, _checked_loss_fn, _logits_of
from .geometries import Perturbation
from .obf import OBF, _checked_obf_labels, _labels_name
from .trainer import SAMState, _step, _validate_step, init

PyTree = Any


class TrainResult(NamedTuple):
    """Result of :func:`train`.

    Attributes:
        params: the final parameters.
        state: the final :class:`SAMState`.
        losses: ``[num_steps]`` clean training loss at each step (before its update).
        perturbed_losses: ``[num_steps]`` loss at ``w + epsilon``.
        ascent_norms: ``[num_steps]`` norm of the ascent gradient.
        rhos: ``[num_steps]`` radius used at each step.

    References:
        Foret et al., ICLR 2021, Algorithm 1.

    Examples:
        >>> from jaxcore.sam import TrainResult
        >>> TrainResult._fields
        ('params', 'state', 'losses', 'perturbed_losses', 'ascent_norms', 'rhos')
    """

    params: PyTree
    state: SAMState
    losses: Float[Array, " num_steps"]
    perturbed_losses: Float[Array, " num_steps"]
    ascent_norms: Float[Array, " num_steps"]
    rhos: Float[Array, " num_steps"]


def _train(loss_fn, params, data, indices, key, model_state, optimizer, perturbation, obf, k, progress):
    num_steps = indices.shape[0]
    state = init(params, optimizer, model_state)
    if obf is not None:  # OBF labels checked once, over the whole data set, before the loop
        first = jax.tree.map(lambda x: x[indices[0]], data)
        _, aux_spec = jax.eval_shape(_checked_loss_fn(loss_fn), params, model_state, first)
        logits_spec = _logits_of(aux_spec)
        if len(logits_spec.shape) == 2:  # the check is threaded through the indices the loop reads
            indices = _checked_obf_labels(data[obf.labels_key], logits_spec.shape[-1], _labels_name(obf, "data"),
                                          carrier=indices)
    prog = Progress(progress, num_steps, "sam.train")
    keys = None if key is None else jax.random.split(key, num_steps)

    def body(carry, inp):
        params, state = carry
        t, idx, kk = inp
        batch = jax.tree.map(lambda x: x[idx], data)
        params, state, info = _step(loss_fn, params, state, batch, kk, optimizer, perturbation, obf, k, None, False,
                                    False)
        prog.update(t, {"loss": info.loss})
        return (params, state), (info.loss, info.perturbed_loss, info.ascent_norm, info.rho)

    (params, state), hist = jax.lax.scan(body, (params, state), (jnp.arange(num_steps), indices, keys))
    return TrainResult(params, state, *hist)


_train_jit = eqx.filter_jit(_train)


def train(
    loss_fn: LossFn,
    params: PyTree,
    data: PyTree,
    indices: Int[Array, "num_steps batch_size"],
    *,
    optimizer: optax.GradientTransformation,
    perturbation: Perturbation | None,
    perturbation_loss: OBF | None = None,
    key: PRNGKeyArray | None = None,
    model_state: PyTree = None,
    num_micro_batches: int | None = None,
    progress: bool | Callable = False,
) -> TrainResult:
    """Train with :func:`step` for ``num_steps`` steps in one compiled ``lax.scan``.

    Step ``t`` uses the minibatch ``data[indices[t]]`` (rows of every leaf), so the
    data stay on the device once and only indices are scanned.

    Args:
        loss_fn: ``loss_fn(params, model_state, batch) -> (loss, aux)``.
        params: initial parameters.
        data: pytree of arrays with a leading example axis ``[N, ...]``; with OBF a
            mapping holding the labels under ``perturbation_loss.labels_key``.
        indices: int ``[num_steps, batch_size]``, example indices of each minibatch.
        optimizer, perturbation, perturbation_loss, num_micro_batches: as :func:`step`.
        key: PRNG key split into one key per step, or ``None`` (deterministic
            perturbations; RandomDirection requires a key).
        model_state: initial non-trainable state (BatchNorm statistics) or None.
        progress: ``False``, ``True`` (a progress bar) or ``fn(step, metrics)``.

    Returns:
        :class:`TrainResult` with the final parameters, state and per-step history.

    Raises:
        TypeError, ValueError: as :func:`step`; ``indices`` not an int ``[num_steps, batch_size]`` array.
        EquinoxRuntimeError: OBF labels of ``data`` out of range, checked once before the loop.

    References:
        Foret et al., ICLR 2021, Algorithm 1; Vani et al., ICML 2024, Sec. 4.

    Examples:
        >>> import jax.numpy as jnp, optax
        >>> from jaxcore.sam import SAM, train
        >>> loss_fn = lambda w, _, b: (jnp.mean((b["x"] @ w - b["y"]) ** 2), {})
        >>> data = {"x": jnp.eye(4)[:, :2], "y": jnp.ones(4)}
        >>> res = train(loss_fn, jnp.zeros(2), data, jnp.array([[0, 1], [2, 3], [0, 1]]),
        ...             optimizer=optax.sgd(0.5), perturbation=SAM(0.05))
        >>> res.losses.shape, bool(res.losses[-1] < res.losses[0])
        ((3,), True)
    """
    _check_tree(params, "params")
    if indices is None or not eqx.is_array_like(indices):
        raise TypeError(expected("indices", "an int array [num_steps, batch_size]", type(indices).__name__, raw=True))
    indices = jnp.asarray(indices) if not isinstance(indices, jax.Array) else indices
    if indices.ndim != 2 or not jnp.issubdtype(indices.dtype, jnp.integer):
        raise ValueError(expected("indices", "an int array [num_steps, batch_size]",
                                  f"{indices.dtype} shape {tuple(indices.shape)}", raw=True))
    n = _batch_size(data)
    if indices.shape[0] < 1:
        raise ValueError(expected("indices", "at least one step", f"shape {tuple(indices.shape)}", raw=True))
    # Out-of-range rows would be clamped silently by the gather: refused (host, or once before the loop).
    indices = checked_index(indices, "indices", n, f"example indices in [0, {n}) (the rows of data)")
    batch_spec = jax.tree.map(lambda x: jax.ShapeDtypeStruct((indices.shape[1],) + x.shape[1:], x.dtype), data)
    k = _validate_step(loss_fn, batch_spec, key, optimizer, perturbation, perturbation_loss, num_micro_batches,
                       None, False)
    perturbation, perturbation_loss = _checked_fields(perturbation), _checked_fields(perturbation_loss)
    progress = check_progress(progress)
    return _train_jit(loss_fn, params, data, indices, key, model_state, optimizer, perturbation, perturbation_loss,
                      k, progress)
