"""One training step of the SAM family, in the manner of optax.

A step computes, on each micro-batch of ``m`` examples (m-sharpness, vmapped):

1. the clean pass at ``w``: the loss, the auxiliary outputs (BatchNorm
   statistics, logits, metrics: these come from this pass only) and the
   ascent gradient ``h`` (of the training loss, or OBF's cotangent pulled back
   through the logits);
2. the perturbation ``epsilon = perturbation.perturb(h, w)``;
3. the training gradient ``g_p`` at ``w + epsilon`` (its auxiliary outputs are
   discarded, so running statistics are not updated twice);
4. the direction ``d = perturbation.direction(h, g_p)`` (GSAM's decomposition);

then averages ``d`` over micro-batches (and devices, with ``axis_name``) and
hands it to any optax optimizer, applied at ``w``.

The loss function's contract::

    loss_fn(params, model_state, batch) -> (loss, aux)

``loss`` is a scalar mean over the batch; ``aux`` is any pytree; when it is a
mapping, ``aux["model_state"]`` (if present) is the new model state (e.g.
BatchNorm running statistics) and ``aux["logits"]`` (``[batch, classes]``) is
required by :class:`~jaxcore.sam.perturbations.OBF`. ``batch`` is a pytree
whose leaves share a leading batch axis.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from .perturbations import OBF, Perturbation, global_norm, rho_at

PyTree = Any
LossFn = Callable[[PyTree, PyTree, PyTree], tuple[jax.Array, Any]]


class SAMState(NamedTuple):
    """State of a SAM-family training loop.

    Attributes:
        count: number of steps taken (int32 scalar); drives ``rho`` schedules.
        opt_state: the base optax optimizer's state.
        model_state: non-trainable model state (BatchNorm statistics) or None.
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
    """

    loss: jax.Array
    aux: Any
    perturbed_loss: jax.Array
    ascent_norm: jax.Array
    rho: jax.Array


def init(params: PyTree, optimizer: optax.GradientTransformation, model_state: PyTree = None) -> SAMState:
    """The initial :class:`SAMState` for ``params`` and an optax ``optimizer``.

    Args:
        params: trainable parameters (pytree of float arrays).
        optimizer: any optax ``GradientTransformation`` (the base optimizer).
        model_state: optional non-trainable state (BatchNorm statistics).

    Returns:
        ``SAMState(count=0, opt_state=optimizer.init(params), model_state)``.
    """
    return SAMState(jnp.zeros((), jnp.int32), optimizer.init(params), model_state)


def _split_aux(aux: Any) -> tuple[Any, Any, bool]:
    """(aux without model_state, new model_state, has_model_state)."""
    if isinstance(aux, Mapping) and "model_state" in aux:
        rest = {k: v for k, v in aux.items() if k != "model_state"}
        return rest, aux["model_state"], True
    return aux, None, False


def _logits_of(aux: Any) -> jax.Array:
    if not (isinstance(aux, Mapping) and "logits" in aux):
        raise ValueError(
            "perturbation_loss=OBF(...) needs the logits: loss_fn must return (loss, aux) with aux a "
            f"mapping holding aux['logits'] of shape [batch, classes]; got aux of type {type(aux).__name__}"
        )
    return aux["logits"]


def _is_inexact(x: Any) -> bool:
    return eqx.is_array(x) and jnp.issubdtype(x.dtype, jnp.inexact)


def _reduce_state(tree: PyTree, axis_name: str | None) -> PyTree:
    """Mean of float leaves over the leading micro-batch axis (and devices); first entry of others."""

    def red(x):
        if _is_inexact(x):
            x = jnp.mean(x, axis=0)
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
        except (ValueError, TypeError, NameError):
            return x

    return jax.tree.map(one, tree)


def _batch_size(batch: PyTree) -> int:
    leaves = jax.tree.leaves(batch)
    if not leaves:
        raise ValueError("batch: expected a pytree of arrays with a leading batch axis, got no arrays")
    sizes = {jnp.shape(x)[0] if jnp.ndim(x) else None for x in leaves}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(f"batch: all leaves need the same leading batch axis, got leading sizes {sorted(map(str, sizes))}")
    return sizes.pop()


def step(
    loss_fn: LossFn,
    params: PyTree,
    state: SAMState,
    batch: PyTree,
    key: jax.Array | None = None,
    *,
    optimizer: optax.GradientTransformation,
    perturbation: Perturbation | None,
    perturbation_loss: OBF | None = None,
    micro_batch_size: int | None = None,
    axis_name: str | None = None,
    sync_perturbation: bool = False,
) -> tuple[PyTree, SAMState, StepInfo]:
    """One SAM-family step: clean pass, perturbation, perturbed gradient, optax update.

    ``w <- w + optax_update(d)``, ``d = direction(h, grad L(w + epsilon(h)))``
    averaged over micro-batches of size ``m`` (m-sharpness) and devices.

    Args:
        loss_fn: ``loss_fn(params, model_state, batch) -> (loss, aux)`` (see the
            module docstring); pure and jit-compatible.
        params: parameters ``w`` (any float dtype, bfloat16 included).
        state: :class:`SAMState` from :func:`init`.
        batch: pytree with a leading batch axis ``[B, ...]``; with ``OBF`` a
            mapping holding integer labels ``[B]`` (or one-hot ``[B, C]``)
            under ``perturbation_loss.labels_key``.
        key: PRNG key; needed by :class:`RandomDirection` (else unused).
        optimizer: any optax ``GradientTransformation`` (applied at ``w``).
        perturbation: a :class:`~jaxcore.sam.perturbations.Perturbation`
            (SAM, ASAM, GSAM, RandomDirection), or ``None`` for the plain base
            optimizer (one gradient evaluation).
        perturbation_loss: ``None`` (ascend the training loss) or
            :class:`~jaxcore.sam.perturbations.OBF`.
        micro_batch_size: ``m`` of m-sharpness: each perturbation is computed on
            ``B / m`` disjoint micro-batches (vmapped); ``None`` means ``m = B``.
            Model-state float leaves are averaged over micro-batches.
        axis_name: named axis of ``shard_map``/``pmap`` over devices; the final
            directions, losses and float model-state leaves are ``pmean``-ed.
        sync_perturbation: with ``axis_name``, average the ascent gradient (and
            the perturbed gradient, before GSAM's decomposition) over devices,
            so every device uses the same perturbation, as on one device with
            the concatenated batch. Default ``False``: per-device perturbations
            as in the original SAM.

    Returns:
        ``(new_params, new_state, info)`` with :class:`StepInfo` ``info``.

    Raises:
        ValueError: ``micro_batch_size`` not a positive divisor of the batch
            size; OBF without labels in the batch or without ``aux["logits"]``;
            OBF with ``perturbation=None``.
        TypeError: ``optimizer``, ``perturbation`` or ``perturbation_loss`` of a wrong type;
            ``RandomDirection`` without ``key``.

    References:
        Foret et al., "Sharpness-Aware Minimization for Efficiently Improving
        Generalization", ICLR 2021, Algorithm 1 and Sec. 4.1 (m-sharpness).
        Vani et al., "Forget Sharpness: Perturbed Forgetting of Model Biases
        Within SAM Dynamics", ICML 2024, Sec. 4.
    """
    if perturbation is not None and not isinstance(perturbation, Perturbation):
        raise TypeError(f"perturbation: expected a Perturbation (SAM, ASAM, GSAM, RandomDirection) or None, got {type(perturbation).__name__}")
    if perturbation_loss is not None and not isinstance(perturbation_loss, OBF):
        raise TypeError(f"perturbation_loss: expected None or OBF, got {type(perturbation_loss).__name__}")
    if perturbation is None and perturbation_loss is not None:
        raise ValueError("perturbation_loss: OBF sets the loss of a perturbation, but perturbation=None (plain base "
                         "optimizer); pass a perturbation such as SAM(rho) or drop perturbation_loss")
    if not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
        raise TypeError(f"optimizer: expected an optax GradientTransformation, got {type(optimizer).__name__}")
    b = _batch_size(batch)
    if micro_batch_size is None:
        m = b
    else:
        if isinstance(micro_batch_size, bool) or not isinstance(micro_batch_size, int):
            raise TypeError(f"micro_batch_size: expected a positive int or None, got {micro_batch_size!r}")
        if micro_batch_size <= 0 or b % micro_batch_size:
            raise ValueError(f"micro_batch_size: expected a positive divisor of the batch size {b}, got {micro_batch_size}")
        m = micro_batch_size
    k = b // m
    obf = perturbation_loss
    if obf is not None and perturbation is not None:
        if not (isinstance(batch, Mapping) and obf.labels_key in batch):
            keys = list(batch.keys()) if isinstance(batch, Mapping) else type(batch).__name__
            raise ValueError(f"OBF needs labels: batch must be a mapping with key {obf.labels_key!r}, got {keys}")
    if perturbation is not None and perturbation.needs_key and key is None:
        raise TypeError(f"{type(perturbation).__name__} needs a PRNG key: pass key=jax.random.key(...)")
    model_state = state.model_state
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
        new_params = optax.apply_updates(params, updates)
        zero = jnp.zeros((), jnp.float32)
        info = StepInfo(loss, aux, loss, zero, zero)
        return new_params, SAMState(state.count + 1, opt_state, new_ms if has_ms else model_state), info

    # --- micro-batches --------------------------------------------------------
    def over_micro(fn, *trees):
        """vmap ``fn`` over the leading micro-batch axis (outputs get a leading [k])."""
        if k == 1:
            out = fn(*[jax.tree.map(lambda x: x[0], t) for t in trees])
            return jax.tree.map(lambda x: x[None] if eqx.is_array(x) else x, out)
        return jax.vmap(fn)(*trees)

    micro = jax.tree.map(lambda x: x.reshape((k, m) + x.shape[1:]), batch)

    def ascent_pass(mb):
        if obf is None:
            (loss, aux), h = jax.value_and_grad(loss_fn, has_aux=True)(params_v, model_state, mb)
            return loss, aux, h

        def logits_fn(p):
            loss, aux = loss_fn(p, model_state, mb)
            return _logits_of(aux), (loss, aux)

        logits, vjp, (loss, aux) = jax.vjp(logits_fn, params_v, has_aux=True)
        (h,) = vjp(obf.cotangent(logits, mb[obf.labels_key]))
        return loss, aux, h

    losses, auxes, hs = over_micro(ascent_pass, micro)
    if axis_name is not None and sync_perturbation:
        hs = jax.lax.pmean(hs, axis_name)

    rho = rho_at(perturbation.rho, state.count)
    if callable(perturbation.rho):  # constants were validated at construction
        rho = eqx.error_if(rho, ~(rho >= 0), "perturbation radius rho must be >= 0 (schedule returned a negative or NaN value)")
    if key is None:
        keys = jnp.zeros((k, 2), jnp.uint32)  # unused by deterministic perturbations
    else:
        if axis_name is not None and not sync_perturbation:
            key = jax.random.fold_in(key, jax.lax.axis_index(axis_name))
        keys = jax.random.split(key, k)

    def perturbed_pass(h, mb, kk):
        eps = perturbation.perturb(h, params_v, kk, rho)
        w_eps = jax.tree.map(lambda p, e: p + e.astype(p.dtype), params_v, eps)
        (loss_p, _), gp = jax.value_and_grad(loss_fn, has_aux=True)(w_eps, model_state, mb)
        return loss_p, gp

    losses_p, gps = over_micro(perturbed_pass, hs, micro, keys)
    if axis_name is not None and sync_perturbation:
        gps = jax.lax.pmean(gps, axis_name)
    ds = over_micro(perturbation.direction, hs, gps)
    if k == 1:
        d = jax.tree.map(lambda x: x[0], ds)
    else:
        d = jax.tree.map(lambda x: jnp.mean(x.astype(jnp.promote_types(x.dtype, jnp.float32)), axis=0).astype(x.dtype), ds)
    loss, loss_p = jnp.mean(losses), jnp.mean(losses_p)
    if k == 1:
        # Same expression as inside the perturbation's normalisation, so XLA shares it (no extra pass over h).
        ascent_norm = global_norm(jax.tree.map(lambda x: x[0], hs))
    else:
        ascent_norm = jnp.mean(jax.vmap(global_norm)(hs))
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
    new_params = optax.apply_updates(params, updates)
    info = StepInfo(loss, aux, loss_p, ascent_norm, jnp.asarray(rho, jnp.float32))
    return new_params, SAMState(state.count + 1, opt_state, new_ms), info


class SharpnessAware(NamedTuple):
    """A bound SAM-family trainer: ``init(params, model_state=None)`` and ``step(params, state, batch, key)``.

    Built by :func:`sharpness_aware`; ``step`` is a plain function, ready for
    ``jax.jit``, ``shard_map`` or ``lax.scan``.
    """

    init: Callable[..., SAMState]
    step: Callable[..., tuple[PyTree, SAMState, StepInfo]]


def sharpness_aware(
    loss_fn: LossFn,
    optimizer: optax.GradientTransformation,
    perturbation: Perturbation | None,
    perturbation_loss: OBF | None = None,
    *,
    micro_batch_size: int | None = None,
    axis_name: str | None = None,
    sync_perturbation: bool = False,
) -> SharpnessAware:
    """Bind :func:`step`'s configuration once (optax style).

    Example:
        >>> import jax, jax.numpy as jnp, optax
        >>> from jaxcore.sam import SAM, sharpness_aware
        >>> def loss_fn(w, _, batch):
        ...     return jnp.mean((batch["x"] @ w - batch["y"]) ** 2), {}
        >>> trainer = sharpness_aware(loss_fn, optax.sgd(0.1), SAM(rho=0.05))
        >>> w = jnp.zeros(3)
        >>> state = trainer.init(w)
        >>> batch = {"x": jnp.eye(3), "y": jnp.ones(3)}
        >>> w, state, info = jax.jit(trainer.step)(w, state, batch, None)

    Args and Raises: as :func:`step`.

    Returns:
        :class:`SharpnessAware` with ``init`` and ``step``.
    """
    if perturbation is not None and not isinstance(perturbation, Perturbation):
        raise TypeError(f"perturbation: expected a Perturbation or None, got {type(perturbation).__name__}")

    def init_fn(params, model_state=None):
        return init(params, optimizer, model_state)

    def step_fn(params, state, batch, key=None):
        return step(
            loss_fn, params, state, batch, key, optimizer=optimizer, perturbation=perturbation,
            perturbation_loss=perturbation_loss, micro_batch_size=micro_batch_size,
            axis_name=axis_name, sync_perturbation=sync_perturbation,
        )

    return SharpnessAware(init_fn, step_fn)
