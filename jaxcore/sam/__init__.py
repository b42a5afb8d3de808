"""jaxcore.sam: sharpness-aware minimization (SAM, ASAM, GSAM, OBF) for optax.

One loss convention for the whole family: the trainer (:func:`step`,
:func:`sharpness_aware`, :func:`train`), the ascent gradient
(:func:`ascent_gradient`) and the sharpness measures
(:func:`hessian_max_eigenvalue`, :func:`hessian_vector_product`,
:func:`m_sharpness`) all take::

    loss_fn(params, model_state, batch) -> (loss, aux)

with ``loss`` a scalar mean over the batch; ``aux`` a pytree (a mapping may
carry ``"model_state"``, the new BatchNorm statistics, and ``"logits"``, needed by
:class:`OBF`). The measures use ``loss`` only and take ``model_state=`` (default None).

Keys: a function that always draws random numbers takes ``key`` first
(:func:`random_perturbation`, :func:`hessian_max_eigenvalue`); where only some
perturbations are random, ``key=None`` (keyword) is the deterministic path and
:class:`RandomDirection` requires a key (:func:`step`, :func:`train`, and
:func:`sharpness_aware_transform`, which takes it at construction as optax's noise
transforms do).

The main workflow, on scikit-learn's digits (a linear softmax model):

>>> import jax, jax.numpy as jnp, optax
>>> from jaxcore.datasets import load_digits
>>> from jaxcore.sam import OBF, SAM, hessian_max_eigenvalue, train
>>> x, y = load_digits()
>>> data = {"x": jnp.asarray(x[:512].reshape(512, -1)), "label": jnp.asarray(y[:512], jnp.int32)}
>>> def loss_fn(w, _, b):
...     logits = b["x"] @ w
...     return optax.softmax_cross_entropy_with_integer_labels(logits, b["label"]).mean(), {"logits": logits}
>>> indices = jnp.arange(512).reshape(8, 64)  # 8 steps of 64 examples
>>> res = train(loss_fn, jnp.zeros((64, 10)), data, indices, optimizer=optax.sgd(0.5),
...             perturbation=SAM(0.05), perturbation_loss=OBF())
>>> bool(res.losses[-1] < res.losses[0])
True
>>> eig = hessian_max_eigenvalue(jax.random.key(0), loss_fn, res.params, data, num_iters=10).eigenvalue
>>> bool(eig > 0)
True

Modules, by concept (each imports only those above it; none imports the package):
:mod:`~jaxcore.sam.tree_math` (norms, inner products), :mod:`~jaxcore.sam.schedules` (radii),
:mod:`~jaxcore.sam.perturbations` (SAM, ASAM, GSAM, random, as functions),
:mod:`~jaxcore.sam.geometries` (the same as equinox modules under an abstract base),
:mod:`~jaxcore.sam.obf` (output-bias forgetting and its label checks),
:mod:`~jaxcore.sam.ascent` (the ascent gradient), :mod:`~jaxcore.sam.micro_batches` (m-sharpness in the step),
:mod:`~jaxcore.sam.trainer` (state, step, the bound trainer), :mod:`~jaxcore.sam.loop` (the scanned loop),
:mod:`~jaxcore.sam.transforms` (optax transformations), :mod:`~jaxcore.sam.sharpness` (measures);
``_checks`` and ``_loss`` hold the argument checks and the loss convention.
"""

from .ascent import ascent_gradient
from .geometries import ASAM, GSAM, SAM, Perturbation, RandomDirection
from .loop import TrainResult, train
from .obf import OBF, obf_alpha, obf_cotangent, obf_loss
from .perturbations import (asam_perturbation, default_weight_mask, gsam_direction, random_perturbation,
                            sam_perturbation)
from .schedules import lr_proportional_rho, rho_at
from .sharpness import (MSharpnessResult, PowerIterationResult, hessian_max_eigenvalue, hessian_vector_product,
                        m_sharpness)
from .trainer import SAMState, SharpnessAware, StepInfo, StepResult, init, sharpness_aware, step
from .transforms import (SharpnessAwareTransformState, asam_adversary, normalize, sam_adversary,
                         sharpness_aware_transform)
from .tree_math import global_norm, safe_normalize, tree_dot

__all__ = [
    "ASAM", "GSAM", "OBF", "SAM", "Perturbation", "RandomDirection",
    "asam_perturbation", "default_weight_mask", "global_norm", "gsam_direction", "lr_proportional_rho",
    "obf_alpha", "obf_cotangent", "obf_loss", "random_perturbation", "rho_at", "safe_normalize",
    "sam_perturbation", "tree_dot",
    "MSharpnessResult", "PowerIterationResult", "hessian_max_eigenvalue", "hessian_vector_product", "m_sharpness",
    "SAMState", "SharpnessAware", "StepInfo", "StepResult", "TrainResult", "ascent_gradient", "init",
    "sharpness_aware", "step", "train",
    "SharpnessAwareTransformState", "asam_adversary", "normalize", "sam_adversary", "sharpness_aware_transform",
]
