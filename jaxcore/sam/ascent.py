"""The ascent gradient that builds a SAM-family perturbation: the training loss's, or OBF's.

``h = grad_w loss`` by default; with :class:`~jaxcore.sam.OBF` the OBF cotangent on the logits
pulled back through the network (one ``vjp``). Used by the trainer's clean pass and, as
:func:`ascent_gradient`, by callers of :func:`jaxcore.sam.sharpness_aware_transform`.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxcore._util import expected

from ._checks import _check_tree
from ._loss import LossFn, _check_loss_fn, _checked_loss_fn, _logits_of
from .obf import OBF, _check_labels, _checked_obf_labels, _labels_name

PyTree = Any


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
