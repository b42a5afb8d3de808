"""The family's one loss convention and the helpers that read it.

Every function of :mod:`jaxcore.sam` that takes a loss takes::

    loss_fn(params, model_state, batch) -> (loss, aux)

``loss`` a scalar float mean over the batch; ``aux`` any pytree, where a mapping may carry
``"model_state"`` (the new BatchNorm statistics) and ``"logits"`` (needed by OBF). The checks run
at trace time (no run-time cost). A leaf of the family: it imports no other module of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxcore._util import expected

PyTree = Any
LossFn = Callable[[PyTree, PyTree, PyTree], tuple[jax.Array, Any]]


def _check_loss_fn(loss_fn: Any) -> None:
    if not callable(loss_fn):
        raise TypeError(expected("loss_fn", "a function loss_fn(params, model_state, batch) -> (loss, aux)",
                                 type(loss_fn).__name__, raw=True))


def _loss_pair(out: Any) -> tuple[jax.Array, Any]:
    """``(loss, aux)`` checked at trace time: a tuple of two with a scalar float ``loss``."""
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TypeError(expected("loss_fn", "a function returning (loss, aux) (the jaxcore.sam loss convention)",
                                 f"a {type(out).__name__}", raw=True))
    loss = out[0]
    if not eqx.is_array_like(loss):
        raise TypeError(expected("loss_fn", "a scalar float loss as the first element of (loss, aux)",
                                 type(loss).__name__, raw=True))
    if jnp.ndim(loss) != 0:
        raise ValueError(expected("loss_fn", "a scalar loss (mean over the batch)", f"shape {jnp.shape(loss)}",
                                  raw=True))
    if not jnp.issubdtype(jnp.result_type(loss), jnp.floating):
        raise TypeError(expected("loss_fn", "a float loss", f"dtype {jnp.result_type(loss)}", raw=True))
    return out


def _checked_loss_fn(loss_fn: Any) -> Any:
    """``loss_fn`` whose output is checked (at trace time, no run-time cost) by :func:`_loss_pair`."""
    return lambda *args: _loss_pair(loss_fn(*args))


def _loss_value(out: Any) -> jax.Array:
    """``loss`` of ``(loss, aux)``; refuses a bare scalar (the family's one loss convention)."""
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TypeError(expected("loss_fn", "a function returning (loss, aux) (the jaxcore.sam loss convention)",
                                 f"a {type(out).__name__}", raw=True))
    return _loss_pair(out)[0]


def _scalar_loss(loss_fn: LossFn, model_state: PyTree) -> Callable[[PyTree, PyTree], jax.Array]:
    return lambda p, b: _loss_value(loss_fn(p, model_state, b))


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
