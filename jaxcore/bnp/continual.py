"""Continual learning over a task sequence: the structure-adaptive method and its baselines.

Methods (all on the same residual network, same optimiser and step budget):

- ``"adaptive"``: :class:`~jaxcore.bnp.AdaptiveMLP` with beta-process
  depth and Bernoulli-process masks; prior <- posterior after each task; the
  hard masks of each task are stored and used to evaluate it later.
- ``"vcl"``: variational continual learning without structure adaptation
  (Gaussian weights, all ``K`` layers on).
- ``"finetune"``: maximum likelihood, no regularisation (the forgetting baseline).
- ``"ewc"``: maximum likelihood + ``(lambda / 2) sum_i F_i (theta_i - theta*_i)^2``
  with the diagonal empirical Fisher ``F`` accumulated over past tasks.

Runs are ``vmap``-ed over seeds; the loop over the (few) tasks is a Python loop
around one compiled training function (its shapes do not change with the task).
Two compiled training functions serve the four methods: adaptive and VCL share
one (structure adaptation is a traced switch), fine-tuning and EWC the other
(the EWC strength is traced); they are cached across calls with equal shapes.

Metrics: the accuracy matrix ``R[t, j]`` (accuracy on task ``j`` after training
task ``t``), :func:`average_accuracy`, :func:`backward_transfer`,
:func:`active_depth`, :func:`active_fraction`, :func:`mask_union`.

References:
    Thapa & Li, "Bayesian Adaptation of Network Depth and Width for Continual
    Learning", ICML 2024; Nguyen et al., "Variational Continual Learning", ICLR
    2018; Kirkpatrick et al., "Overcoming catastrophic forgetting in neural
    networks", PNAS 2017; Lopez-Paz & Ranzato, "Gradient Episodic Memory for
    Continual Learning", NeurIPS 2017 (average accuracy, backward transfer).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxcore._util import Progress, ProgressArg, check_choice, check_int, check_progress, check_scalar, expected
from jaxcore._util.keys import is_key
from jaxcore._util.minibatch import minibatch_draw

from .inference import fit
from .model import _WEIGHTS, AbstractAdaptiveNetwork, _check_labels, _check_model, _rebuild, _template
from .networks import AdaptiveMLP

__all__ = [
    "METHODS",
    "ContinualConfig",
    "ContinualResult",
    "active_depth",
    "active_fraction",
    "average_accuracy",
    "backward_transfer",
    "mask_union",
    "run_continual",
]

METHODS = ("adaptive", "vcl", "finetune", "ewc")


# ----------------------------------------------------------------- metrics


def average_accuracy(acc):
    """Average accuracy after each task: ``A_t = mean_{j<=t} R[t, j]``.

    Args:
        acc: ``[..., T, T]`` accuracy matrix (entries above the diagonal ignored).

    Returns:
        ``[..., T]`` float.

    Raises:
        ValueError: ``acc`` not square in its last two axes.

    References:
        Lopez-Paz & Ranzato, "Gradient Episodic Memory for Continual Learning",
        NeurIPS 2017, Sec. 2 (ACC).

    Examples:
        >>> import jax.numpy as jnp
        >>> average_accuracy(jnp.array([[0.9, jnp.nan], [0.7, 0.8]]))
        Array([0.9 , 0.75], dtype=float32)
    """
    acc = _check_accuracy(acc)
    return _average_accuracy_jit(acc)


def _array(x, name):
    """``x`` as a JAX array; TypeError naming ``name`` for None and non-numeric data."""
    if x is None:
        raise TypeError(expected(name, "an array", "None", raw=True))
    a = np.asarray(x) if not isinstance(x, jax.Array) else x
    if a.dtype.kind not in "biuf" and a.dtype.name != "bfloat16":
        raise TypeError(expected(name, "a real or bool array", f"dtype {a.dtype}", raw=True))
    return jnp.asarray(a)


def _check_accuracy(acc, min_tasks=1):
    acc = _array(acc, "acc")
    if jnp.issubdtype(acc.dtype, jnp.floating) and jnp.finfo(acc.dtype).bits < 32:
        acc = acc.astype(jnp.float32)  # half precision averaged in float32
    elif not jnp.issubdtype(acc.dtype, jnp.floating):
        acc = acc.astype(jnp.result_type(float))  # integer / bool accuracies become the default float
    if acc.ndim < 2 or acc.shape[-1] != acc.shape[-2] or acc.shape[-1] < min_tasks:
        what = f"an accuracy matrix [..., T, T] with at least {min_tasks} task{'s' if min_tasks > 1 else ''}"
        raise ValueError(expected("acc", what, f"shape {acc.shape}", raw=True))
    return acc


@jax.jit
def _average_accuracy_jit(acc):
    t = acc.shape[-1]
    seen = jnp.tril(jnp.ones((t, t), bool))
    return jnp.sum(jnp.where(seen, acc, 0.0), -1) / jnp.arange(1, t + 1)


def backward_transfer(acc):
    """Backward transfer ``BWT = mean_{j<T} (R[T-1, j] - R[j, j])`` (negative = forgetting).

    Args:
        acc: ``[..., T, T]`` accuracy matrix, ``T >= 2``.

    Returns:
        ``[...]``.

    Raises:
        ValueError: fewer than two tasks.

    References:
        Lopez-Paz & Ranzato, "Gradient Episodic Memory for Continual Learning",
        NeurIPS 2017, Sec. 2.

    Examples:
        >>> import jax.numpy as jnp
        >>> backward_transfer(jnp.array([[0.9, jnp.nan], [0.7, 0.8]]))
        Array(-0.2, dtype=float32)
    """
    return _backward_transfer_jit(_check_accuracy(acc, 2))


@jax.jit
def _backward_transfer_jit(acc):
    last = acc[..., -1, :-1]
    diag = jnp.diagonal(acc, axis1=-2, axis2=-1)[..., :-1]
    return jnp.mean(last - diag, axis=-1)


def active_depth(masks, layer_ndim: int = 2):
    """Active depth: index (1-based) of the deepest hidden layer with any active mask entry; 0 if none.

    Residual layers with an all-zero mask are the identity, so layers past the
    deepest active one do not change the output.

    Args:
        masks: ``[..., K, *layer_shape]`` bool.
        layer_ndim: number of trailing axes per layer (2 for the MLP's
            ``[W + 1, W]`` masks, 1 for the CNN's per-channel ``[C]`` masks).

    Returns:
        ``[...]`` int32.

    Raises:
        ValueError: ``masks`` with fewer than ``layer_ndim + 1`` axes.

    References:
        Thapa & Li, "Bayesian Adaptation of Network Depth and Width for Continual
        Learning", ICML 2024, Sec. 3 (the active depth of the truncated beta process).

    Examples:
        >>> import numpy as np
        >>> masks = np.zeros((3, 2, 2), bool); masks[1, 0, 0] = True
        >>> int(active_depth(masks))
        2
    """
    return _active_depth_jit(_check_masks(masks, layer_ndim), layer_ndim)


def _check_masks(masks, layer_ndim):
    layer_ndim = check_int(layer_ndim, "layer_ndim", 0)
    masks = _array(masks, "masks")
    if masks.ndim < layer_ndim + 1:
        raise ValueError(expected("masks", f"an array with at least {layer_ndim + 1} axes [..., K, *layer_shape]",
                                  f"shape {masks.shape}", raw=True))
    return masks


@functools.partial(jax.jit, static_argnames="layer_ndim")
def _active_depth_jit(masks, layer_ndim):
    k = masks.ndim - layer_ndim - 1
    active = jnp.any(masks.reshape(masks.shape[: k + 1] + (-1,)), axis=-1)  # [..., K]
    idx = jnp.arange(1, masks.shape[k] + 1)
    return jnp.max(jnp.where(active, idx, 0), axis=-1).astype(jnp.int32)


def active_fraction(masks, layer_ndim: int = 2):
    """Fraction of active mask entries (hidden weights in use) over ``[K, *layer_shape]``.

    Args:
        masks: ``[..., K, *layer_shape]`` bool.
        layer_ndim: trailing axes per layer (2 for the MLP, 1 for the CNN).

    Returns:
        ``[...]`` float32, in ``[0, 1]``.

    Raises:
        ValueError: ``masks`` with fewer than ``layer_ndim + 1`` axes.

    References:
        Thapa & Li, ICML 2024, Sec. 5 (fraction of active weights).

    Examples:
        >>> import numpy as np
        >>> masks = np.zeros((2, 2, 2), bool); masks[0, 0, 0] = True
        >>> float(active_fraction(masks))
        0.125
    """
    return _active_fraction_jit(_check_masks(masks, layer_ndim), layer_ndim)


@functools.partial(jax.jit, static_argnames="layer_ndim")
def _active_fraction_jit(masks, layer_ndim):
    k = masks.ndim - layer_ndim - 1
    return jnp.mean(masks.reshape(masks.shape[:k] + (-1,)).astype(jnp.float32), axis=-1)


def mask_union(masks, num_tasks=None):
    """Union over tasks of the stored masks: the weights used by at least one task.

    Args:
        masks: ``[T, K, ...]`` bool, the hard masks stored after each task.
        num_tasks: if given (int or traced scalar), only the first ``num_tasks``
            masks count (the others are padding).

    Returns:
        ``[K, ...]`` bool.

    Raises:
        ValueError: ``masks`` without a task axis.

    References:
        Thapa & Li, ICML 2024, Sec. 5 (weights used by the tasks so far).

    Examples:
        >>> import numpy as np
        >>> masks = np.array([[True, False], [False, False], [False, True]])
        >>> mask_union(masks, 2)
        Array([ True, False], dtype=bool)
    """
    masks = _array(masks, "masks")
    if masks.ndim < 1:
        raise ValueError(expected("masks", "an array [T, K, ...]", f"shape {masks.shape}", raw=True))
    if num_tasks is not None and not isinstance(num_tasks, jax.core.Tracer):
        num_tasks = check_int(num_tasks, "num_tasks", 0)
    return _mask_union_jit(masks, num_tasks)


@jax.jit
def _mask_union_jit(masks, num_tasks):
    if num_tasks is None:
        return jnp.any(masks, axis=0)
    valid = jnp.arange(masks.shape[0]) < num_tasks
    return jnp.any(masks & valid.reshape((-1,) + (1,) * (masks.ndim - 1)), axis=0)


# ----------------------------------------------------------------- driver


class _ContinualConfigFields(NamedTuple):
    num_steps: int = 150
    batch_size: int = 64
    num_samples: int = 2
    learning_rate: float = 5e-3
    kl_weight: float = 1.0
    ewc_lambda: float = 1000.0
    num_fisher_samples: int = 256
    eval_chunk_size: int = 256


class ContinualConfig(_ContinualConfigFields):
    """Training budget shared by all methods (checked when constructed).

    The defaults are the settings of the benchmark's Split-Digits comparison (``bnp.continual`` in the
    default configuration: 150 Adam steps per task at 5e-3, batch 64, S = 2, EWC lambda = 1000); the full
    configuration (``configs/full.yaml``) trains 1,000 steps with S = 4 on Split-Digits and 2,000 on MNIST.

    Attributes:
        num_steps: optimiser steps per task.
        batch_size: minibatch size.
        num_samples: Monte Carlo samples ``S`` per ELBO estimate (Bayesian methods).
        learning_rate: Adam step size.
        kl_weight: KL multiplier for the Bayesian methods (1 = the ELBO).
        ewc_lambda: EWC penalty strength.
        num_fisher_samples: examples used for the EWC Fisher of each task.
        eval_chunk_size: test images per forward pass when the accuracies are measured (a ``lax.map``
            over blocks of this many images per seed; the counts, hence the accuracies, do not depend on
            it). It bounds the evaluation's memory: the CNN's 3x3 patches are ``72 * 4`` bytes per pixel
            per image at width 8, 2.7 GB a pass for 3 seeds x 5 tasks x 2,000 MNIST test images at once.

    Raises:
        ValueError / TypeError (messages name ``config.<field>``): a count that is not an int >= 1, a ``learning_rate`` that is not finite
            and > 0, a ``kl_weight`` or ``ewc_lambda`` that is not finite and >= 0.

    Examples:
        >>> ContinualConfig(num_steps=10).batch_size
        64
    """

    __slots__ = ()

    def __new__(cls, num_steps: int = 150, batch_size: int = 64, num_samples: int = 2, learning_rate: float = 5e-3,
                kl_weight: float = 1.0, ewc_lambda: float = 1000.0, num_fisher_samples: int = 256,
                eval_chunk_size: int = 256):
        self = super().__new__(cls, num_steps, batch_size, num_samples, learning_rate, kl_weight, ewc_lambda,
                               num_fisher_samples, eval_chunk_size)
        for name in ("num_steps", "batch_size", "num_samples", "num_fisher_samples", "eval_chunk_size"):
            check_int(getattr(self, name), f"config.{name}", 1)
        check_scalar(self.learning_rate, "config.learning_rate", positive=True)
        check_scalar(self.kl_weight, "config.kl_weight", nonnegative=True)
        check_scalar(self.ewc_lambda, "config.ewc_lambda", nonnegative=True)
        return self


class ContinualResult(NamedTuple):
    """Results of one method over a task sequence (leading ``[seeds]`` axis when vmapped).

    Attributes:
        accuracy: ``[T, T]``: ``R[t, j]`` test accuracy on task ``j`` after task ``t``
            (``NaN`` for ``j > t``).
        masks: ``[T, *mask_shape]`` bool, the hard masks stored after each task
            (all True for the baselines).
        active_depth: ``[T]`` int32, active depth of each task's masks.
        active_fraction: ``[T]`` float, fraction of hidden weights active per task.
        union_fraction: ``[T]`` float, fraction active in the union of masks so far.

    Examples:
        >>> ContinualResult._fields
        ('accuracy', 'masks', 'active_depth', 'active_fraction', 'union_fraction')
    """

    accuracy: Any
    masks: Any
    active_depth: Any
    active_fraction: Any
    union_fraction: Any


def _det_forward(model: AbstractAdaptiveNetwork, weights, x, task):
    return model._forward(weights, jnp.ones(model.mask_shape(), x.dtype), x, task)


def run_continual(keys, method: str, model: AbstractAdaptiveNetwork, tasks, config: ContinualConfig = ContinualConfig(), *,
                  progress: ProgressArg = False):
    """Train ``method`` on the task sequence, once per key (``vmap`` over seeds).

    Compiled functions are shared: ``"adaptive"`` and ``"vcl"`` run the same
    compiled training step (structure adaptation is a traced switch), as do
    ``"finetune"`` and ``"ewc"`` (the EWC strength is traced; fine-tuning is
    ``lambda = 0``); learning rate, KL weight and EWC strength are traced too,
    and the tasks of a sequence share one compilation. Only the shapes (model,
    data, number of seeds) and the static budget (``num_steps``, ``batch_size``,
    ``num_samples``, ``num_fisher_samples``) select a compilation.

    Args:
        keys: ``[seeds]`` PRNG keys; seed ``i``'s network is initialised from
            ``fold_in(keys[i], 0)`` and task ``t`` trained with ``fold_in(keys[i], t + 1)``.
        method: one of ``METHODS``.
        model: the architecture: an :class:`~jaxcore.bnp.AdaptiveMLP` / ``AdaptiveCNN`` or its
            shape template (``eqx.filter_eval_shape``); its arrays are not used (each seed's
            network is initialised from its key). For ``"vcl"``, ``"finetune"`` and ``"ewc"`` its
            structure adaptation is switched off (all layers and weights on).
        tasks: a :class:`~jaxcore.datasets.continual.TaskSequence` (or any object
            with ``x_train [T, N, D]``, ``y_train``, ``n_train [T]``, ``x_test``, ``y_test``, ``n_test``).
        config: the training budget.
        progress: ``False`` (default), ``True`` (a progress bar) or ``fn(step, metrics)``: one report per
            task (each task's training of all seeds is one compiled call), ``step`` the tasks done and
            ``metrics`` ``{"task": t, "accuracy": ...}``, the mean test accuracy over seeds on tasks ``0..t``
            after task ``t``. Reporting adds no callback to the compiled programs.

    Returns:
        :class:`ContinualResult` with a leading ``[seeds]`` axis.

    Raises:
        ValueError: unknown method, an invalid budget, data whose width does not match the model, more
            tasks than ``model.num_heads`` when it is above 1 (a model of one head shares it among every
            task, e.g. Permuted MNIST), or labels outside ``[0, num_classes)``.
        TypeError: ``keys`` not a 1-d batch of PRNG keys (a single key included: use
            ``jax.random.split(key, seeds)``), ``model`` not an AbstractAdaptiveNetwork, ``config`` not a ContinualConfig,
            ``progress`` neither a bool nor a callable.

    References:
        Thapa & Li, "Bayesian Adaptation of Network Depth and Width for Continual
        Learning", ICML 2024, Sec. 5 (protocol); Nguyen et al., ICLR 2018 (VCL);
        Kirkpatrick et al., PNAS 2017 (EWC).

    Examples:
        >>> import jax, numpy as np, equinox as eqx
        >>> from types import SimpleNamespace
        >>> rng = np.random.default_rng(0)
        >>> x = rng.normal(size=(2, 16, 3)).astype(np.float32); y = (x[..., 0] > 0).astype(np.int32)
        >>> n = np.array([16, 16], np.int32)
        >>> tasks = SimpleNamespace(x_train=x, y_train=y, n_train=n, x_test=x, y_test=y, n_test=n)
        >>> model = eqx.filter_eval_shape(AdaptiveMLP, 3, 4, 2, 2, 2, key=jax.random.key(0))
        >>> keys = jax.random.split(jax.random.key(1), 2)
        >>> r = run_continual(keys, "finetune", model, tasks, ContinualConfig(num_steps=3, batch_size=4,
        ...                   num_fisher_samples=4))
        >>> r.accuracy.shape
        (2, 2, 2)
    """
    if not is_key(keys):
        raise TypeError(expected("keys", "a 1-d batch of PRNG keys [seeds] (jax.random.split(key, seeds))",
                                 f"{type(keys).__name__}" + (f" of dtype {keys.dtype}" if hasattr(keys, "dtype") else ""),
                                 raw=True))
    typed = jnp.issubdtype(keys.dtype, jax.dtypes.prng_key)
    if keys.ndim != (1 if typed else 2):
        what = "a single key" if keys.ndim == (0 if typed else 1) else f"keys of shape {keys.shape}"
        raise TypeError(expected("keys", "a 1-d batch of PRNG keys [seeds] (jax.random.split(key, seeds))",
                                 what, raw=True))
    if not typed:
        keys = jax.random.wrap_key_data(keys)
    method = check_choice(method, "method", METHODS)
    progress = check_progress(progress)
    _check_model(model)
    if not isinstance(config, ContinualConfig):
        raise TypeError(expected("config", "a ContinualConfig", type(config).__name__, raw=True))
    check_int(config.num_steps, "config.num_steps", 1)
    check_int(config.batch_size, "config.batch_size", 1)
    check_int(config.num_samples, "config.num_samples", 1)
    check_int(config.num_fisher_samples, "config.num_fisher_samples", 1)
    check_int(config.eval_chunk_size, "config.eval_chunk_size", 1)
    check_scalar(config.learning_rate, "config.learning_rate", positive=True)
    check_scalar(config.kl_weight, "config.kl_weight", nonnegative=True)
    check_scalar(config.ewc_lambda, "config.ewc_lambda", nonnegative=True)
    x_train = jnp.asarray(tasks.x_train)
    x_test = jnp.asarray(tasks.x_test)
    if type(model) is AdaptiveMLP and x_train.shape[-1] != model.in_features:
        raise ValueError(expected("tasks.x_train", f"{model.in_features} features (model.in_features)",
                                  f"{x_train.shape[-1]} features", raw=True))
    num_tasks = x_train.shape[0]
    if model.num_heads > 1 and num_tasks > model.num_heads:  # one head: shared by every task (domain-incremental)
        raise ValueError(expected("tasks", f"at most model.num_heads = {model.num_heads} tasks (one head each; "
                                  "or a model of one head, which every task shares)", f"{num_tasks} tasks", raw=True))
    for name in ("y_train", "y_test"):
        n = getattr(tasks, "n_" + name[2:])
        for t in range(num_tasks):
            _check_labels(model, getattr(tasks, name)[t], int(n[t]), f"tasks.{name}[{t}]")
    data = (x_train, jnp.asarray(tasks.y_train), jnp.asarray(tasks.n_train),
            x_test, jnp.asarray(tasks.y_test), jnp.asarray(tasks.n_test))
    # the same compiled functions for either flag: the switch is traced
    template = _template(model if model.adapt_structure else
                         eqx.filter_eval_shape(lambda k: _rebuild(model, k, adapt_structure=True), keys[0]))
    prog = Progress(progress, num_tasks, f"bnp.run_continual ({method})", every=1)
    if method in ("adaptive", "vcl"):
        return _bayes_run(template, data, keys, config, num_tasks, method == "adaptive", prog)
    return _det_run(template, data, keys, config, num_tasks, method == "ewc", prog)


def _report(prog, rows, t):
    """After task ``t``: the mean over seeds of the test accuracy on tasks ``0..t``."""
    if prog.enabled:
        prog.report(t + 1, {"task": t, "accuracy": float(jnp.mean(rows[-1][:, :t + 1]))})


def _head_of(task, heads):  # run_continual refuses more tasks than heads above 1: the clamp serves one shared head
    return jnp.minimum(task, heads - 1)


def _evaluate(predict, data, masks_all, params, num_tasks, heads, chunk):
    """Test accuracy on each task ``[T]``: tasks one after another, each task's images in blocks of ``chunk``.

    Only one block's activations are live at a time (``lax.map``, not ``vmap``): evaluating every task's
    test set at once through the CNN held 3 seeds x 5 tasks x 2,115 padded images of 3x3 patches, the
    split-cnn reproduction cell's out-of-memory kill at 12 GB. Correct predictions are counted per block
    (integers), so the accuracy does not depend on ``chunk``."""
    _, _, _, x_test, y_test, n_test = data
    n_max = x_test.shape[1]
    chunk = min(chunk, n_max)
    blocks = -(-n_max // chunk)
    pad = blocks * chunk - n_max
    xs = jnp.pad(x_test, [(0, 0), (0, pad)] + [(0, 0)] * (x_test.ndim - 2))
    xs = xs.reshape((x_test.shape[0], blocks, chunk) + x_test.shape[2:])
    ys = jnp.pad(y_test, [(0, 0), (0, pad)]).reshape(y_test.shape[0], blocks, chunk)

    def on(j):
        def block(i):
            logits = predict(params, masks_all[j], xs[j, i], _head_of(j, heads))
            valid = i * chunk + jnp.arange(chunk) < n_test[j]
            return jnp.sum((jnp.argmax(logits, -1) == ys[j, i]) & valid)

        return jnp.sum(jax.lax.map(block, jnp.arange(blocks))) / n_test[j]

    return jax.lax.map(on, jnp.arange(num_tasks))


@functools.lru_cache(maxsize=16)
def _bayes_fns(model, num_steps, batch_size, num_samples, num_tasks, eval_chunk_size):
    """Compiled (seed-vmapped) training, prior update, hard masks and evaluation, shared by adaptive and VCL.

    ``model`` is a shape template (hashable); the trained networks are arguments."""
    heads = model.num_heads

    def train(params, prior, key, t, adapt, lr, kl_weight, x_train, y_train, n_train):
        params = fit(
            key, params, prior, x_train[t], y_train[t], n_train[t], _head_of(t, heads),
            num_steps=num_steps, batch_size=batch_size, num_samples=num_samples,
            learning_rate=lr, kl_weight=kl_weight, adapt=adapt,
        ).params
        new_prior = params.posterior_to_prior(prior, _head_of(t, heads))
        return params, new_prior, params.hard_masks(adapt)

    train = jax.jit(jax.vmap(train, in_axes=(0, 0, 0) + (None,) * 7))
    predict = lambda p, m, x, h: p.predict_logits(m, x, h)  # noqa: E731
    evaluate = jax.jit(jax.vmap(
        lambda p, m, d: _evaluate(predict, d, m, p, num_tasks, heads, eval_chunk_size), in_axes=(0, 0, None)))
    return train, evaluate


def _bayes_run(model, data, keys, config, num_tasks, adapt, prog):
    # the data and the hyper-parameters are arguments of the compiled functions (never closed-over constants)
    train, evaluate = _bayes_fns(model, config.num_steps, config.batch_size, config.num_samples, num_tasks,
                                 config.eval_chunk_size)
    init_keys = jax.vmap(lambda k: jax.random.fold_in(k, 0))(keys)
    params = jax.vmap(lambda k: _rebuild(model, k))(init_keys)
    prior = jax.vmap(lambda k: _rebuild(model, k).init_prior())(keys)
    seeds = keys.shape[0]
    stored = jnp.zeros((seeds, num_tasks) + model.mask_shape(), bool)
    hyper = (jnp.asarray(adapt), jnp.float32(config.learning_rate), jnp.float32(config.kl_weight))
    rows = []
    for t in range(num_tasks):
        tk = jax.vmap(lambda k: jax.random.fold_in(k, t + 1))(keys)
        params, prior, masks = train(params, prior, tk, jnp.int32(t), *hyper, *data[:3])
        stored = stored.at[:, t].set(masks)
        rows.append(evaluate(params, stored, data))
        _report(prog, rows, t)
    return _finish(rows, stored, num_tasks, len(model.mask_shape()) - 1)


def _finish(rows, stored, num_tasks, layer_ndim):
    acc = jnp.stack(rows, axis=1)  # [seeds, T(after), T(task)]
    upper = jnp.triu(jnp.ones((num_tasks, num_tasks), bool), 1)
    acc = jnp.where(upper, jnp.nan, acc)
    depth = active_depth(stored, layer_ndim)
    frac = active_fraction(stored, layer_ndim)
    by_task = jnp.moveaxis(stored, 1, 0)
    union = jnp.stack([active_fraction(mask_union(by_task, t + 1), layer_ndim) for t in range(num_tasks)], 1)
    return ContinualResult(acc, stored, depth, frac, union)


@functools.lru_cache(maxsize=16)
def _det_fns(model, num_steps, batch_size, num_fisher_samples, num_tasks, eval_chunk_size):
    """Compiled (seed-vmapped) training and evaluation shared by fine-tuning and EWC (``lambda`` traced)."""
    heads = model.num_heads

    def nll(w, x, y, head):
        logp = jax.nn.log_softmax(_det_forward(model, w, x, head))
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=-1))

    def train(w, anchor, fisher, key, t, ewc_lambda, lr, x_train, y_train, n_train):
        head = _head_of(t, heads)
        optimizer = optax.flatten(optax.adam(lr))  # one flat moment vector (fewer fusions to compile)

        def loss(w, x, y):
            pen = jax.tree.map(lambda f, a, b: jnp.sum(f * jnp.square(a - b)), fisher, w, anchor)
            return nll(w, x, y, head) + 0.5 * ewc_lambda * sum(jax.tree.leaves(pen))

        def body(carry, k):
            w, opt = carry
            idx = minibatch_draw(k, n_train[t], batch_size)
            g = jax.grad(loss)(w, x_train[t][idx], y_train[t][idx])
            upd, opt = optimizer.update(g, opt, w)
            return (optax.apply_updates(w, upd), opt), None

        (w, _), _ = jax.lax.scan(body, (w, optimizer.init(w)), jax.random.split(key, num_steps))
        # diagonal empirical Fisher of this task (used by EWC; fine-tuning has lambda = 0)
        kf = jax.random.fold_in(key, 7)
        idx = minibatch_draw(kf, n_train[t], num_fisher_samples)

        def per_example(x, y):
            g = jax.grad(nll)(w, x[None], y[None], head)
            return jax.tree.map(jnp.square, g)

        f_t = jax.tree.map(lambda g: jnp.mean(g, 0), jax.vmap(per_example)(x_train[t][idx], y_train[t][idx]))
        return w, w, jax.tree.map(jnp.add, fisher, f_t)

    train = jax.jit(jax.vmap(train, in_axes=(0, 0, 0, 0) + (None,) * 6))
    all_on = jnp.ones((num_tasks,) + tuple(model.mask_shape()), bool)
    evaluate = jax.jit(jax.vmap(lambda w, d: _evaluate(
        lambda p, m, x, h: _det_forward(model, p, x, h), d, all_on, w, num_tasks, heads, eval_chunk_size),
        in_axes=(0, None)))

    return train, evaluate


def _det_run(model, data, keys, config, num_tasks, ewc, prog):
    train, evaluate = _det_fns(model, config.num_steps, config.batch_size, config.num_fisher_samples, num_tasks,
                               config.eval_chunk_size)

    def init(k):
        p = _rebuild(model, jax.random.fold_in(k, 0))
        return {n: getattr(p, n).loc for n in _WEIGHTS}

    w = jax.vmap(init)(keys)
    anchor = w
    fisher = jax.tree.map(jnp.zeros_like, w)
    hyper = (jnp.float32(config.ewc_lambda if ewc else 0.0), jnp.float32(config.learning_rate))
    rows = []
    for t in range(num_tasks):
        tk = jax.vmap(lambda k: jax.random.fold_in(k, t + 1))(keys)
        w, anchor, fisher = train(w, anchor, fisher, tk, jnp.int32(t), *hyper, *data[:3])
        rows.append(evaluate(w, data))
        _report(prog, rows, t)
    stored = jnp.ones((keys.shape[0], num_tasks) + model.mask_shape(), bool)
    return _finish(rows, stored, num_tasks, len(model.mask_shape()) - 1)
