"""The training step of the SAM family, in the manner of optax, and a scanned training loop.

A step computes, on each of ``k`` micro-batches (m-sharpness with ``m = B / k``, vmapped):

1. the clean pass at ``w``: the loss, the auxiliary outputs (BatchNorm
   statistics, logits, metrics: these come from this pass only) and the
   ascent gradient ``h`` (of the training loss, or OBF's cotangent pulled back
   through the logits: :func:`ascent_gradient`);
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

:func:`step`, :func:`ascent_gradient` and :func:`train` validate on the host and
run one module-level compiled program each (``eqx.filter_jit``; ``loss_fn``, the
optimizer and the perturbation objects are static, hashed by identity/value), so
a second call with the same configuration and shapes does not recompile. They can
still be called inside ``jax.jit``, ``lax.scan``, ``vmap`` and ``shard_map``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxcore._util import Progress, check_auto_mesh, check_bool, check_int, check_key, check_progress, error_if, expected, is_concrete

from .perturbations import (GSAM, OBF, SAM, Perturbation, _check_tree, _checked_value, _global_norm, _global_norms,
                            _rho_at, _scale_factor, _scaled_tree)
from .sharpness import _check_loss_fn, _checked_loss_fn

PyTree = Any
LossFn = Callable[[PyTree, PyTree, PyTree], tuple[jax.Array, Any]]


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


# ----------------------------------------------------------------------------- helpers


def _check_optimizer(optimizer: Any) -> None:
    if not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
        raise TypeError(expected("optimizer", "an optax GradientTransformation", type(optimizer).__name__, raw=True))


def _check_perturbations(perturbation: Any, perturbation_loss: Any) -> None:
    if perturbation is not None and not isinstance(perturbation, Perturbation):
        raise TypeError(expected("perturbation", "a Perturbation (SAM, ASAM, GSAM, RandomDirection) or None",
                                 type(perturbation).__name__, raw=True))
    if perturbation_loss is not None and not isinstance(perturbation_loss, OBF):
        raise TypeError(expected("perturbation_loss", "None or OBF", type(perturbation_loss).__name__, raw=True))
    if perturbation is None and perturbation_loss is not None:
        raise ValueError(expected("perturbation_loss", "None when perturbation=None (the plain base optimizer; OBF "
                                  "sets the loss of a perturbation such as SAM(rho))", perturbation_loss))


def _check_labels(batch: PyTree, obf: OBF) -> None:
    if not (isinstance(batch, Mapping) and obf.labels_key in batch):
        keys = sorted(batch.keys()) if isinstance(batch, Mapping) else type(batch).__name__
        raise ValueError(expected("batch", f"a mapping holding the labels under {obf.labels_key!r} "
                                  "(perturbation_loss=OBF)", f"keys {keys}" if isinstance(keys, list) else keys,
                                  raw=True))


def _check_key_for(perturbation: Perturbation | None, key: Any) -> None:
    if key is not None:
        check_key(key)
    elif perturbation is not None and perturbation.needs_key:
        raise TypeError(expected("key", f"a jax.random.key(...) array ({type(perturbation).__name__} draws a "
                                 "random direction)", "None", raw=True))


def _split_aux(aux: Any) -> tuple[Any, Any, bool]:
    """(aux without model_state, new model_state, has_model_state)."""
    if isinstance(aux, Mapping) and "model_state" in aux:
        rest = {k: v for k, v in aux.items() if k != "model_state"}
        return rest, aux["model_state"], True
    return aux, None, False


def _logits_of(aux: Any) -> jax.Array:
    if not (isinstance(aux, Mapping) and "logits" in aux):
        raise ValueError(expected("aux", "a mapping holding aux['logits'] of shape [batch, classes] "
                                  "(perturbation_loss=OBF needs the logits)", f"aux of type {type(aux).__name__}",
                                  raw=True))
    return aux["logits"]


def _is_inexact(x: Any) -> bool:
    return eqx.is_array(x) and jnp.issubdtype(x.dtype, jnp.inexact)


def _mean_leading(x: Array) -> Array:
    """Mean over the leading (micro-batch) axis, summed pairwise over contiguous halves, in >= float32.

    ``jnp.mean(x, axis=0)`` is lowered by XLA:CPU to a reduction over the major dimension that runs
    20-120x slower than this (measured: [8, 256, 256] float32, 4.8 ms vs 0.16 ms); halving keeps
    every step a contiguous elementwise add that fuses, and sums pairwise (no worse rounding).
    """
    n = x.shape[0]
    x = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    while x.shape[0] > 1:
        h = x.shape[0] // 2
        y = x[:h] + x[h:2 * h]
        x = jnp.concatenate([y, x[2 * h:]], axis=0) if x.shape[0] % 2 else y
    return x[0] / n


def _reduce_state(tree: PyTree, axis_name: str | None) -> PyTree:
    """Mean of float leaves over the leading micro-batch axis (and devices); first entry of others."""

    def red(x):
        if _is_inexact(x):
            x = _mean_leading(x).astype(x.dtype)
            return jax.lax.pmean(x, axis_name) if axis_name is not None else x
        return x[0] if eqx.is_array(x) else x

    return jax.tree.map(red, tree)


def _as_device_varying(tree: PyTree, axis_name: str) -> PyTree:
    """Mark replicated leaves as device-varying so that gradients stay per device.

    Under ``shard_map`` (with its default ``check_vma=True``) the gradient of a
    replicated input is summed over devices automatically; marking ``params``
    varying first keeps per-device gradients, which this module then averages
    explicitly (``pmean``). A no-op where varying-ness is not tracked (``pmap``,
    ``check_vma=False``).
    """

    def one(x):
        try:
            varying = jax.typeof(x).manual_axis_type.varying
        except AttributeError:
            varying = getattr(jax.typeof(x), "vma", frozenset())
        if axis_name in varying:
            return x
        try:
            return jax.lax.pcast(x, axis_name, to="varying")
        except (ValueError, TypeError, NameError, AssertionError):
            # not a manual (shard_map) axis: a named vmap axis (jax 0.10 asserts inside pcast there), pmap,
            # or check_vma=False; gradients there are per axis element already
            return x

    return jax.tree.map(one, tree)


def _batch_size(batch: PyTree) -> int:
    leaves = jax.tree.leaves(batch)
    if not leaves:
        raise ValueError(expected("batch", "a pytree of arrays with a leading batch axis", "no arrays", raw=True))
    shapes = [tuple(x.shape) if hasattr(x, "shape") else np.shape(x) for x in leaves]
    sizes = {s[0] if s else None for s in shapes}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(expected("batch", "leaves sharing one leading batch axis",
                                  f"leading sizes {sorted(map(str, sizes))}", raw=True))
    return sizes.pop()


def _num_micro(num_micro_batches: Any, b: int) -> int:
    if num_micro_batches is None:
        return 1
    k = check_int(num_micro_batches, "num_micro_batches", minimum=1)
    if b % k:
        raise ValueError(expected("num_micro_batches", f"a positive divisor of the batch size {b}", k))
    return k


def _checked_obf_labels(labels: Any, num_classes: int, name: str, carrier: Any = None) -> Any:
    """A run-time check (``error_if``) of OBF labels: int class indices in ``[0, classes)``, or
    one-hot/soft rows (finite, >= 0, summing to 1 within 1e-3); shape and dtype errors are raised
    at trace time by the OBF building blocks. Returns ``carrier`` (default: the labels) threaded
    through the check."""
    labels = jnp.asarray(labels)
    if carrier is None:
        carrier = labels
    if labels.ndim == 1 and jnp.issubdtype(labels.dtype, jnp.integer):
        bad = jnp.any((labels < 0) | (labels >= num_classes))
        what = f"OBF class indices in [0, {num_classes}) (checked at run time), got one outside"
    elif labels.ndim == 2 and labels.shape[-1] == num_classes and jnp.issubdtype(labels.dtype, jnp.floating):
        a = labels.astype(jnp.promote_types(labels.dtype, jnp.float32))
        bad = jnp.any(~jnp.isfinite(a) | (a < 0)) | jnp.any(jnp.abs(jnp.sum(a, -1) - 1.0) > 1e-3)
        what = "OBF one-hot or soft labels: finite, >= 0, rows summing to 1 (checked at run time)"
    else:
        return carrier
    return error_if(carrier, bad, name, what)


_CLASS_COUNTS: dict = {}  # (loss_fn, argument shapes) -> the logits' class count, for host label checks


def _class_count(loss_fn, params, model_state, batch) -> int | None:
    """The class count of ``aux["logits"]`` (``jax.eval_shape``, once per loss function and shapes)."""
    leaves, tree = jax.tree.flatten((params, model_state, batch))
    sig = (tree, tuple((np.shape(x), getattr(x, "dtype", type(x))) for x in leaves))
    try:
        key = (loss_fn, sig)
        hash(key)
    except TypeError:
        return None
    if key not in _CLASS_COUNTS:
        out = jax.eval_shape(lambda p, ms, b: _logits_of(_checked_loss_fn(loss_fn)(p, ms, b)[1]),
                             params, model_state, batch)
        if len(_CLASS_COUNTS) > 256:
            _CLASS_COUNTS.clear()
        _CLASS_COUNTS[key] = int(out.shape[-1]) if len(out.shape) == 2 else None
    return _CLASS_COUNTS[key]


def _host_checked_obf_labels(loss_fn, params, model_state, batch, obf: OBF) -> bool:
    """Check concrete OBF labels on the host, with the run-time check's rules and message.

    Returns True when the labels were checked (the compiled step is then built without the run-time
    check: a host callback in a program makes JAX dispatch every call through its Python path,
    hundreds of microseconds per call; the SAM-OBF step at width 256 took 2.9 ms with it and 2.2 ms
    without, 2 cores under load). Raises ``ValueError`` for bad labels.
    """
    labels = batch[obf.labels_key]
    if not is_concrete(labels) or not hasattr(labels, "dtype"):
        return False
    c = _class_count(loss_fn, params, model_state, batch)
    if c is None:
        return False
    a = np.asarray(labels)
    name = _labels_name(obf)
    if a.ndim == 1 and a.dtype.kind in "iu":
        bad = (a < 0) | (a >= c)
        if bad.any():
            raise ValueError(expected(name, f"OBF class indices in [0, {c})", int(a[bad][0])))
        return True
    if a.ndim == 2 and a.shape[-1] == c and a.dtype.kind == "f":
        a = a.astype(np.float64)
        if not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(np.abs(a.sum(-1) - 1.0) > 1e-3):
            raise ValueError(expected(name, "OBF one-hot or soft labels: finite, >= 0, rows summing to 1",
                                      "a row that is not", raw=True))
        return True
    return False


def _labels_name(obf: OBF, where: str = "batch") -> str:
    return f"{where}[{obf.labels_key}]"


def _ascent(loss_fn, params, model_state, batch, obf, check_labels=True):
    """(loss, aux, h) of the clean pass: h the training-loss gradient, or OBF's pulled-back cotangent.

    With OBF and ``check_labels``, the labels are range-checked at run time (``error_if``);
    :func:`train` checks its data once before the loop instead.
    """
    loss_fn = _checked_loss_fn(loss_fn)
    if obf is None:
        (loss, aux), h = jax.value_and_grad(loss_fn, has_aux=True)(params, model_state, batch)
        return loss, aux, h

    def logits_fn(p):
        loss, aux = loss_fn(p, model_state, batch)
        return _logits_of(aux), (loss, aux)

    logits, vjp, (loss, aux) = jax.vjp(logits_fn, params, has_aux=True)
    labels = batch[obf.labels_key]
    if check_labels and jnp.ndim(logits) == 2:
        labels = _checked_obf_labels(labels, logits.shape[-1], _labels_name(obf))
    (h,) = vjp(obf.cotangent(logits, labels))
    return loss, aux, h


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
        """vmap ``fn`` over the leading micro-batch axis (outputs get a leading [k])."""
        if k == 1:
            out = fn(*[jax.tree.map(lambda x: x[0], t) for t in trees])
            return jax.tree.map(lambda x: x[None] if eqx.is_array(x) else x, out)
        return jax.vmap(fn)(*trees)

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
    batched_sam = k > 1 and type(perturbation).perturb in (SAM.perturb, GSAM.perturb)
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


def _checked_finite(new_params, loss, check):
    """``new_params`` carrying a run-time check (``error_if``) that the step's loss was finite.

    A NaN or inf in the parameters or the batch (or a loss that overflows) makes the loss non-finite;
    the check turns the silent NaN update into an error naming both inputs.
    """
    if not check:
        return new_params
    return error_if(new_params, ~jnp.isfinite(loss), "params / batch",
                    "finite values giving a finite loss (checked at run time), got a non-finite loss: NaN or inf "
                    "in params or batch, or a loss that overflowed")


def _checked_fields(module: Any) -> Any:
    """A perturbation (or OBF) whose traced hyperparameters (rho, eta, alpha, gamma) carry a run-time check.

    Concrete values were checked at construction; a traced one (a module built inside ``jit``) is
    checked here once, before the compiled step or the training loop, never inside its body.
    """
    if module is None:
        return None
    for field, kind in (("rho", "nonneg"), ("eta", "nonneg"), ("alpha", "nonneg"), ("gamma", "unit")):
        value = getattr(module, field, None)
        if value is None or callable(value) and not eqx.is_array(value) or is_concrete(value):
            continue
        checked = _checked_value(value, field, kind)
        module = eqx.tree_at(lambda m, f=field: getattr(m, f), module, checked)
    return module


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
        check_labels: with OBF, check the labels (default ``True``: on the host when they are
            concrete, at run time when traced). ``False`` skips both, for a caller that validated
            the labels once and calls ``step`` inside its own compiled loop: the run-time check is a
            host callback, whose per-call dispatch cost (about 0.7 ms of a 2.9 ms step at width 256
            on a CPU) the step then does not pay. Out-of-range labels are then the caller's to
            refuse (an out-of-range index becomes an all-zero one-hot row, ``jax.nn.one_hot``'s rule).
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
    # concrete OBF labels are checked here, so the compiled step holds no host callback
    host_checked = check_labels and perturbation_loss is not None and axis_name is None and (
        _host_checked_obf_labels(loss_fn, params, state.model_state, batch, perturbation_loss))
    return _step_jit(loss_fn, params, state, batch, key, optimizer, perturbation, perturbation_loss, k, axis_name,
                     bool(sync_perturbation), check_labels=check_labels and not host_checked,
                     check_finite=check_finite)


# ----------------------------------------------------------------------------- the ascent gradient


def _ascent_gradient(loss_fn, params, batch, model_state, obf):
    return _ascent(loss_fn, params, model_state, batch, obf)[2]


_ascent_gradient_jit = eqx.filter_jit(_ascent_gradient)


def ascent_gradient(
    loss_fn: LossFn,
    params: PyTree,
    batch: PyTree,
    perturbation_loss: OBF | None = None,
    *,
    model_state: PyTree = None,
) -> PyTree:
    """The ascent gradient ``h`` that builds a SAM-family perturbation.

    ``h = grad_w loss`` for ``perturbation_loss=None``; for :class:`~jaxcore.sam.OBF`,
    the OBF cotangent on the logits (:func:`~jaxcore.sam.obf_cotangent`) pulled back
    through the network, ``h = (d logits / d w)^T c``. This is the gradient to give
    :func:`~jaxcore.sam.sharpness_aware_transform` at its ascent call to run SAM-OBF,
    GSAM-OBF or ASAM-OBF as an optax transformation.

    Args:
        loss_fn: ``loss_fn(params, model_state, batch) -> (loss, aux)``; with OBF
            ``aux["logits"]`` ``[batch, classes]`` is required.
        params: parameters ``w``.
        batch: pytree with a leading batch axis; with OBF a mapping holding the labels
            under ``perturbation_loss.labels_key``.
        perturbation_loss: ``None`` (training loss) or ``OBF``.
        model_state: passed to ``loss_fn`` (default None).

    Returns:
        ``h``, a pytree like ``params``.

    Raises:
        TypeError: bad ``loss_fn`` or ``perturbation_loss``.
        ValueError: OBF without labels in the batch or without ``aux["logits"]``.
        EquinoxRuntimeError: OBF labels out of range (checked at run time, as in :func:`step`).

    References:
        Vani et al., "Forget Sharpness: Perturbed Forgetting of Model Biases
        Within SAM Dynamics", ICML 2024, Sec. 4.2 and Eq. 8.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.sam import OBF, ascent_gradient
        >>> loss_fn = lambda w, _, b: (jnp.mean((b["x"] * w).sum(-1)), {"logits": b["x"] * w})
        >>> batch = {"x": jnp.ones((2, 3)), "label": jnp.array([0, 1])}
        >>> ascent_gradient(loss_fn, jnp.ones(3), batch).tolist()
        [1.0, 1.0, 1.0]
        >>> ascent_gradient(loss_fn, jnp.ones(3), batch, OBF()).shape
        (3,)
    """
    _check_loss_fn(loss_fn)
    _check_tree(params, "params")
    if perturbation_loss is not None:
        if not isinstance(perturbation_loss, OBF):
            raise TypeError(expected("perturbation_loss", "None or OBF", type(perturbation_loss).__name__, raw=True))
        _check_labels(batch, perturbation_loss)
    return _ascent_gradient_jit(loss_fn, params, batch, model_state, perturbation_loss)


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


# ----------------------------------------------------------------------------- training loop


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
    if is_concrete(indices):
        a = np.asarray(indices)
        bad = (a < 0) | (a >= n)
        if bad.any():
            i = tuple(int(j) for j in np.argwhere(bad)[0])
            raise ValueError(expected("indices", f"example indices in [0, {n}) (the rows of data)",
                                      f"{int(a[i])} at index {i}", raw=True))
    else:
        indices = error_if(indices, jnp.any((indices < 0) | (indices >= n)), "indices",
                           f"example indices in [0, {n}) (checked at run time), got one outside")
    batch_spec = jax.tree.map(lambda x: jax.ShapeDtypeStruct((indices.shape[1],) + x.shape[1:], x.dtype), data)
    k = _validate_step(loss_fn, batch_spec, key, optimizer, perturbation, perturbation_loss, num_micro_batches,
                       None, False)
    perturbation, perturbation_loss = _checked_fields(perturbation), _checked_fields(perturbation_loss)
    progress = check_progress(progress)
    return _train_jit(loss_fn, params, data, indices, key, model_state, optimizer, perturbation, perturbation_loss,
                      k, progress)
