"""The training step of the SAM family, in the manner of optax: its state, :func:`step` and the bound trainer.

A step computes, on each of ``k`` micro-batches (m-sharpness with ``m = B / k``, vmapped):

1. the clean pass at ``w``: the loss, the auxiliary outputs (BatchNorm
   statistics, logits, metrics: these come from this pass only) and the
   ascent gradient ``h`` (of the training loss, or OBF's cotangent pulled back
   through the logits: :func:`jaxcore.sam.ascent_gradient`);
2. the perturbation ``epsilon = perturbation.perturb(h, w, rho)``;
3. the training gradient ``g_p`` at ``w + epsilon`` (its auxiliary outputs are
   discarded, so running statistics are not updated twice);
4. the direction ``d = perturbation.direction(h, g_p)`` (GSAM's decomposition);

then averages ``d`` over micro-batches (and devices, with ``axis_name``) and
hands it to any optax optimizer, applied at ``w``.

The loss function's contract, the one of the whole family (:mod:`jaxcore.sam`)::

    loss_fn(params, model_state, batch) -> (loss, aux)

``loss`` is a scalar mean over the batch; ``aux`` is any pytree; when it is a
mapping, ``aux["model_state"]`` (if present) is the new model state (e.g.
BatchNorm running statistics) and ``aux["logits"]`` (``[batch, classes]``) is
required by :class:`~jaxcore.sam.OBF`. ``batch`` is a pytree whose leaves share
a leading batch axis.

:func:`step` (like :func:`jaxcore.sam.ascent_gradient` and the scanned loop
:func:`jaxcore.sam.train`) validates on the host and runs one module-level compiled
program (``eqx.filter_jit``; ``loss_fn``, the optimizer and the perturbation objects
are static, hashed by identity/value), so a second call with the same configuration
and shapes does not recompile. It can still be called inside ``jax.jit``,
``lax.scan``, ``vmap`` and ``shard_map``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import PRNGKeyArray

from jaxcore._util import check_auto_mesh, check_bool, check_int, error_if, expected

from ._checks import _batch_size, _check_key_for, _check_optimizer, _check_tree, _checked_fields, _checked_finite
from ._loss import LossFn, _check_loss_fn, _checked_loss_fn, _split_aux
from .ascent import _ascent
from .geometries import GSAM, SAM, Perturbation
from .micro_batches import _as_device_varying, _is_inexact, _mean_leading, _num_micro, _over_micro, _reduce_state
from .obf import OBF, _check_labels, _host_checked_labels
from .schedules import _rho_at
from .tree_math import _global_norm, _global_norms, _scale_factor, _scaled_tree

PyTree = Any


class SAMState(NamedTuple):
    """State of a SAM-family training loop.

    Attributes:
        count: number of steps taken (int32 scalar); drives ``rho`` schedules.
        opt_state: the base optax optimizer's state.
        model_state: non-trainable model state (BatchNorm statistics) or None.

    References:
        Foret et al., ICLR 2021, Algorithm 1 (the state of the SAM loop).

    Examples:
        >>> import jax.numpy as jnp, optax
        >>> from jaxcore.sam import init
        >>> init(jnp.zeros(2), optax.sgd(0.1))._fields
        ('count', 'opt_state', 'model_state')
    """

    count: jax.Array
    opt_state: optax.OptState
    model_state: PyTree


class StepInfo(NamedTuple):
    """Diagnostics of one step (all from the clean pass unless stated).

    Attributes:
        loss: clean training loss at ``w`` (mean over micro-batches and devices).
        aux: the clean pass's ``aux`` without ``"model_state"``; with
            ``k > 1`` micro-batches its leaves carry a leading ``[k]`` axis.
        perturbed_loss: training loss at ``w + epsilon`` (mean).
        ascent_norm: norm of the ascent gradient ``h`` (mean over micro-batches).
        rho: radius used at this step.

    References:
        Foret et al., ICLR 2021, Eq. 2-3 (loss at ``w`` and at ``w + epsilon``).

    Examples:
        >>> from jaxcore.sam import StepInfo
        >>> StepInfo._fields
        ('loss', 'aux', 'perturbed_loss', 'ascent_norm', 'rho')
    """

    loss: jax.Array
    aux: Any
    perturbed_loss: jax.Array
    ascent_norm: jax.Array
    rho: jax.Array


class StepResult(NamedTuple):
    """Result of :func:`step`; unpacks as ``params, state, info``.

    Attributes:
        params: the updated parameters ``w + optax_update(d)``.
        state: the new :class:`SAMState`.
        info: :class:`StepInfo` diagnostics.

    References:
        Foret et al., ICLR 2021, Algorithm 1.

    Examples:
        >>> from jaxcore.sam import StepResult
        >>> StepResult._fields
        ('params', 'state', 'info')
    """

    params: PyTree
    state: SAMState
    info: StepInfo


def init(params: PyTree, optimizer: optax.GradientTransformation, model_state: PyTree = None) -> SAMState:
    """The initial :class:`SAMState` for ``params`` and an optax ``optimizer``.

    Args:
        params: trainable parameters (pytree of float arrays).
        optimizer: any optax ``GradientTransformation`` (the base optimizer).
        model_state: optional non-trainable state (BatchNorm statistics).

    Returns:
        ``SAMState(count=0, opt_state=optimizer.init(params), model_state)``.

    Raises:
        TypeError: ``optimizer`` is not an optax ``GradientTransformation``.

    References:
        Foret et al., ICLR 2021, Algorithm 1 (initialisation).

    Examples:
        >>> import jax.numpy as jnp, optax
        >>> from jaxcore.sam import init
        >>> int(init(jnp.zeros(3), optax.sgd(0.1)).count)
        0
    """
    _check_optimizer(optimizer)
    _check_tree(params, "params")
    return SAMState(jnp.zeros((), jnp.int32), optimizer.init(params), model_state)


def _check_perturbations(perturbation: Any, perturbation_loss: Any) -> None:
    if perturbation is not None and not isinstance(perturbation, Perturbation):
        raise TypeError(expected("perturbation", "a Perturbation (SAM, ASAM, GSAM, RandomDirection) or None",
                                 type(perturbation).__name__, raw=True))
    if perturbation_loss is not None and not isinstance(perturbation_loss, OBF):
        raise TypeError(expected("perturbation_loss", "None or OBF", type(perturbation_loss).__name__, raw=True))
    if perturbation is None and perturbation_loss is not None:
        raise ValueError(expected("perturbation_loss", "None when perturbation=None (the plain base optimizer; OBF "
                                  "sets the loss of a perturbation such as SAM(rho))", perturbation_loss))


# ----------------------------------------------------------------------------- the step


def _step(loss_fn, params, state, batch, key, optimizer, perturbation, obf, k, axis_name, sync_perturbation,
          check_labels=True, check_finite=False):
    b = _batch_size(batch)
    m = b // k
    model_state = state.model_state
    loss_fn = _checked_loss_fn(loss_fn)  # (loss, aux) checked at trace time
    # Differentiate at per-device copies; update the (replicated) params.
    params_v = _as_device_varying(params, axis_name) if axis_name is not None else params

    # --- plain base optimizer -------------------------------------------------
    if perturbation is None:
        (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params_v, model_state, batch)
        aux, new_ms, has_ms = _split_aux(aux)
        if axis_name is not None:
            grads = jax.lax.pmean(grads, axis_name)
            loss = jax.lax.pmean(loss, axis_name)
            if has_ms:
                new_ms = jax.tree.map(lambda x: jax.lax.pmean(x, axis_name) if _is_inexact(x) else x, new_ms)
        updates, opt_state = optimizer.update(grads, state.opt_state, params)
        new_params = _checked_finite(optax.apply_updates(params, updates), loss, check_finite and axis_name is None)
        zero = jnp.zeros((), jnp.float32)
        info = StepInfo(loss, aux, loss, zero, zero)
        return StepResult(new_params, SAMState(state.count + 1, opt_state, new_ms if has_ms else model_state), info)

    # --- micro-batches --------------------------------------------------------
    def over_micro(fn, *trees):
        return _over_micro(fn, k, *trees)

    micro = jax.tree.map(lambda x: x.reshape((k, m) + x.shape[1:]), batch)

    def ascent_pass(mb):
        # (Under shard_map, equinox's error_if cannot carry device-varying labels: checked off devices only.)
        return _ascent(loss_fn, params_v, model_state, mb, obf, check_labels and axis_name is None)

    losses, auxes, hs = over_micro(ascent_pass, micro)
    if axis_name is not None and sync_perturbation:
        hs = jax.lax.pmean(hs, axis_name)

    rho = _rho_at(perturbation.rho, state.count)
    if callable(perturbation.rho):  # constants were validated at construction
        rho = error_if(rho, ~(rho >= 0), "rho", "a schedule value >= 0 (the perturbation radius), got a negative "
                       "or NaN value")
    if key is None:
        keys = None  # the deterministic path: perturb(..., key=None) on every micro-batch (None maps to None)
    else:
        if axis_name is not None and not sync_perturbation:
            key = jax.random.fold_in(key, jax.lax.axis_index(axis_name))
        keys = jax.random.split(key, k)

    # SAM's geometry over k > 1 micro-batches: the k norms with one unbatched cond (the vmapped per-slice
    # cond of perturb() would always run the scaled fallback), eps_i = (rho / |h_i|) h_i as in perturb().
    batched_sam = k > 1 and isinstance(perturbation, (SAM, GSAM))  # final classes: no subclass differs
    norms = _global_norms(hs) if batched_sam else None

    def perturbed_pass(h, mb, kk, norm):
        if norm is None:
            eps = perturbation.perturb(h, params_v, rho, key=kk)
        else:
            eps = _scaled_tree(h, _scale_factor(norm, rho))
        w_eps = jax.tree.map(lambda p, e: p + e.astype(p.dtype), params_v, eps)
        (loss_p, _), gp = jax.value_and_grad(loss_fn, has_aux=True)(w_eps, model_state, mb)
        return loss_p, gp

    if batched_sam:
        losses_p, gps = over_micro(perturbed_pass, hs, micro, keys, norms)
    else:
        losses_p, gps = over_micro(lambda h, mb, kk: perturbed_pass(h, mb, kk, None), hs, micro, keys)
    if axis_name is not None and sync_perturbation:
        gps = jax.lax.pmean(gps, axis_name)
    ds = over_micro(perturbation.direction, hs, gps)
    if k == 1:
        d = jax.tree.map(lambda x: x[0], ds)
    else:
        d = jax.tree.map(lambda x: _mean_leading(x).astype(x.dtype), ds)
    loss, loss_p = jnp.mean(losses), jnp.mean(losses_p)
    if k == 1:
        # Same expression as inside the perturbation's normalisation, so XLA shares it (no extra pass over h).
        ascent_norm = _global_norm(jax.tree.map(lambda x: x[0], hs))
    else:
        ascent_norm = jnp.mean(norms if batched_sam else _global_norms(hs))
    if axis_name is not None:
        if not sync_perturbation:
            d = jax.lax.pmean(d, axis_name)
        loss, loss_p = jax.lax.pmean(loss, axis_name), jax.lax.pmean(loss_p, axis_name)
        ascent_norm = jax.lax.pmean(ascent_norm, axis_name)

    aux, new_ms, has_ms = _split_aux(auxes)
    if k == 1:
        aux = jax.tree.map(lambda x: x[0] if eqx.is_array(x) else x, aux)
    new_ms = _reduce_state(new_ms, axis_name) if has_ms else model_state

    updates, opt_state = optimizer.update(d, state.opt_state, params)
    new_params = _checked_finite(optax.apply_updates(params, updates), loss + loss_p,
                                 check_finite and axis_name is None)
    info = StepInfo(loss, aux, loss_p, ascent_norm, jnp.asarray(rho, jnp.float32))
    return StepResult(new_params, SAMState(state.count + 1, opt_state, new_ms), info)


_step_jit = eqx.filter_jit(_step)


def _validate_step(loss_fn, batch, key, optimizer, perturbation, perturbation_loss, num_micro_batches, axis_name,
                   sync_perturbation) -> int:
    _check_loss_fn(loss_fn)
    _check_perturbations(perturbation, perturbation_loss)
    _check_optimizer(optimizer)
    k = _num_micro(num_micro_batches, _batch_size(batch))
    if perturbation_loss is not None:
        _check_labels(batch, perturbation_loss)
    _check_key_for(perturbation, key)
    if axis_name is not None and not isinstance(axis_name, str):
        raise TypeError(expected("axis_name", "a str or None", type(axis_name).__name__, raw=True))
    check_bool(sync_perturbation, "sync_perturbation")
    return k


def step(
    loss_fn: LossFn,
    params: PyTree,
    state: SAMState,
    batch: PyTree,
    *,
    key: PRNGKeyArray | None = None,
    optimizer: optax.GradientTransformation,
    perturbation: Perturbation | None,
    perturbation_loss: OBF | None = None,
    num_micro_batches: int | None = None,
    axis_name: str | None = None,
    sync_perturbation: bool = False,
    check_labels: bool = True,
    check_finite: bool = True,
) -> StepResult:
    """One SAM-family step: clean pass, perturbation, perturbed gradient, optax update.

    ``w <- w + optax_update(d)``, ``d = direction(h, grad L(w + epsilon(h)))``
    averaged over ``k`` micro-batches of ``m = B / k`` examples (m-sharpness) and devices.

    Args:
        loss_fn: ``loss_fn(params, model_state, batch) -> (loss, aux)`` (see the
            module docstring); pure and jit-compatible (static: pass the same function object
            to reuse the compiled step).
        params: parameters ``w`` (any float dtype, bfloat16 included).
        state: :class:`SAMState` from :func:`init`.
        batch: pytree with a leading batch axis ``[B, ...]``; with ``OBF`` a
            mapping holding integer labels ``[B]`` (or one-hot ``[B, C]``)
            under ``perturbation_loss.labels_key``.
        key: PRNG key, or ``None``, the deterministic path: required by
            :class:`~jaxcore.sam.RandomDirection` (TypeError without it), unused
            by SAM, ASAM and GSAM (their steps do not depend on it).
        optimizer: any optax ``GradientTransformation`` (applied at ``w``).
        perturbation: a :class:`~jaxcore.sam.Perturbation`
            (SAM, ASAM, GSAM, RandomDirection), or ``None`` for the plain base
            optimizer (one gradient evaluation).
        perturbation_loss: ``None`` (ascend the training loss) or :class:`~jaxcore.sam.OBF`.
        num_micro_batches: ``k`` of m-sharpness: each perturbation is computed on
            ``k`` disjoint micro-batches of ``B / k`` examples (vmapped); ``None``
            means ``k = 1`` (one perturbation for the batch). Model-state float
            leaves are averaged over micro-batches.
        axis_name: named axis of ``shard_map``/``pmap`` over devices, or of a named
            ``jax.vmap`` (the same step, vectorised); the final directions, losses and float
            model-state leaves are ``pmean``-ed.
        sync_perturbation: with ``axis_name``, average the ascent gradient (and
            the perturbed gradient, before GSAM's decomposition) over devices,
            so every device uses the same perturbation, as on one device with
            the concatenated batch. Default ``False``: per-device perturbations
            as in the original SAM.
        check_labels: with OBF, check the labels (default ``True``): on the host when they are
            concrete, against the class count of ``aux["logits"]`` read from the loss function's
            trace (cached by ``jax.jit`` as the step is: tens of microseconds once traced; jaxcore
            keeps nothing), at run time when traced. ``False`` skips both, for a caller that
            validated the labels once and calls ``step`` inside its own compiled loop: the run-time
            check is a host callback, whose per-call dispatch cost (about 0.7 ms of a 2.9 ms step at
            width 256 on a CPU) the step then does not pay. Out-of-range labels are then the
            caller's to refuse (an out-of-range index becomes an all-zero one-hot row,
            ``jax.nn.one_hot``'s rule).
        check_finite: check at run time that the step's clean and perturbed losses are finite
            (default ``True``): a NaN or inf in ``params`` or ``batch`` raises instead of silently
            turning the parameters into NaN. The check is a host callback (the same per-call dispatch
            cost as ``check_labels``); ``False`` skips it, for a caller that checks the returned
            ``info.loss`` itself or runs :func:`train` (whose loss history shows a divergence). Not
            checked under ``shard_map`` with ``axis_name``.

    Returns:
        :class:`StepResult` ``(params, state, info)``.

    Raises:
        ValueError: ``num_micro_batches`` not a positive divisor of the batch
            size; OBF without labels in the batch or without ``aux["logits"]``;
            OBF with ``perturbation=None``.
        ValueError: concrete OBF labels out of range (int labels outside ``[0, classes)``, or
            one-hot/soft rows not finite, negative or not summing to 1; the class count is the
            logits'), checked on the host before the compiled step.
        EquinoxRuntimeError: with ``check_finite``, a non-finite loss (NaN/inf in ``params`` or
            ``batch``), naming both.
        EquinoxRuntimeError: the same for traced labels (``step`` inside ``jax.jit``), checked at run
            time (not inside ``shard_map`` with ``axis_name``). The run-time check is a host callback,
            which makes JAX dispatch each call of the enclosing program through its Python path
            (hundreds of microseconds per call on CPU); check the labels once outside and call
            :func:`train`, or call ``step`` with concrete labels, to avoid it.
        TypeError: ``optimizer``, ``perturbation`` or ``perturbation_loss`` of a wrong type;
            ``RandomDirection`` without ``key``; a ``key`` that is not a PRNG key.

    References:
        Foret et al., "Sharpness-Aware Minimization for Efficiently Improving
        Generalization", ICLR 2021, Algorithm 1 and Sec. 4.1 (m-sharpness).
        Vani et al., "Forget Sharpness: Perturbed Forgetting of Model Biases
        Within SAM Dynamics", ICML 2024, Sec. 4.

    Examples:
        >>> import jax.numpy as jnp, optax
        >>> from jaxcore.sam import SAM, init, step
        >>> loss_fn = lambda w, _, b: (jnp.mean((b["x"] @ w - b["y"]) ** 2), {})
        >>> batch = {"x": jnp.eye(2), "y": jnp.ones(2)}
        >>> w, state, info = step(loss_fn, jnp.zeros(2), init(jnp.zeros(2), optax.sgd(0.1)), batch,
        ...                       optimizer=optax.sgd(0.1), perturbation=SAM(0.05))
        >>> round(float(info.loss), 4), int(state.count)
        (1.0, 1)
    """
    _check_tree(params, "params")
    check_auto_mesh((params, batch), "batch")
    if not isinstance(state, SAMState):
        raise TypeError(expected("state", "a SAMState (from jaxcore.sam.init)", type(state).__name__, raw=True))
    k = _validate_step(loss_fn, batch, key, optimizer, perturbation, perturbation_loss, num_micro_batches,
                       axis_name, sync_perturbation)
    perturbation, perturbation_loss = _checked_fields(perturbation), _checked_fields(perturbation_loss)
    check_labels = check_bool(check_labels, "check_labels")
    check_finite = check_bool(check_finite, "check_finite")
    # Concrete OBF labels are checked here, on the host, so that the compiled step holds no host callback.
    on_host = axis_name is None and _host_checked_labels(loss_fn, params, state.model_state, batch,
                                                         perturbation_loss, check_labels)
    return _step_jit(loss_fn, params, state, batch, key, optimizer, perturbation, perturbation_loss, k, axis_name,
                     bool(sync_perturbation), check_labels=check_labels and not on_host, check_finite=check_finite)


# ----------------------------------------------------------------------------- the bound trainer


class SharpnessAware(NamedTuple):
    """A bound SAM-family trainer: ``init(params, model_state=None)`` and ``step(params, state, batch, *, key=None)``.

    Built by :func:`sharpness_aware` (like an optax ``GradientTransformation``, a
    NamedTuple of two functions); ``step`` returns a :class:`StepResult` and runs
    the compiled step, also inside ``jax.jit``, ``shard_map`` or ``lax.scan``.

    Attributes:
        init: ``init(params, model_state=None) -> SAMState``.
        step: ``step(params, state, batch, *, key=None) -> StepResult``.

    References:
        Foret et al., ICLR 2021, Algorithm 1.

    Examples:
        >>> import jax.numpy as jnp, optax
        >>> from jaxcore.sam import SAM, sharpness_aware
        >>> tr = sharpness_aware(lambda w, _, b: (jnp.sum((w - b) ** 2), {}), optax.sgd(0.1), SAM(0.05))
        >>> tr._fields
        ('init', 'step')
    """

    init: Callable[..., SAMState]
    step: Callable[..., StepResult]


def sharpness_aware(
    loss_fn: LossFn,
    optimizer: optax.GradientTransformation,
    perturbation: Perturbation | None,
    perturbation_loss: OBF | None = None,
    *,
    num_micro_batches: int | None = None,
    axis_name: str | None = None,
    sync_perturbation: bool = False,
) -> SharpnessAware:
    """Bind :func:`step`'s configuration once (optax style).

    Args:
        loss_fn, optimizer, perturbation, perturbation_loss, num_micro_batches,
        axis_name, sync_perturbation: as :func:`step`.

    Returns:
        :class:`SharpnessAware` with ``init`` and ``step``.

    Raises:
        TypeError, ValueError: as :func:`step` (configuration errors at once, batch errors at ``step``).

    References:
        Foret et al., ICLR 2021 (SAM); Vani et al., ICML 2024 (OBF).

    Examples:
        >>> import jax.numpy as jnp, optax
        >>> from jaxcore.sam import SAM, sharpness_aware
        >>> def loss_fn(w, _, batch):
        ...     return jnp.mean((batch["x"] @ w - batch["y"]) ** 2), {}
        >>> trainer = sharpness_aware(loss_fn, optax.sgd(0.1), SAM(rho=0.05))
        >>> w = jnp.zeros(3)
        >>> state = trainer.init(w)
        >>> batch = {"x": jnp.eye(3), "y": jnp.ones(3)}
        >>> w, state, info = trainer.step(w, state, batch)
        >>> int(state.count)
        1
    """
    _check_loss_fn(loss_fn)
    _check_perturbations(perturbation, perturbation_loss)
    _check_optimizer(optimizer)
    if num_micro_batches is not None:
        check_int(num_micro_batches, "num_micro_batches", minimum=1)

    def init_fn(params, model_state=None):
        return init(params, optimizer, model_state)

    def step_fn(params, state, batch, *, key=None):
        return step(
            loss_fn, params, state, batch, key=key, optimizer=optimizer, perturbation=perturbation,
            perturbation_loss=perturbation_loss, num_micro_batches=num_micro_batches,
            axis_name=axis_name, sync_perturbation=sync_perturbation,
        )

    return SharpnessAware(init_fn, step_fn)
