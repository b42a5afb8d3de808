"""The Neural Jump-Diffusion Temporal Point Process (NJDTPP).

The log-intensity ``eta = log lambda`` of ``K`` event types follows
``d eta = f(eta) dt + g(eta) * dW + h(eta) dN`` where the drift ``f``
(``R^K -> R^K``), the diagonal diffusion ``g`` (``R^K -> R^K``) and the jump
``h`` (``R^K -> R^{K x K}``, column ``k`` added at an event of type ``k``) are
MLPs (paper defaults: 2 hidden layers of 32 units, tanh) and ``eta(0)`` is a
learned vector. The likelihood is computed by :func:`jaxcore.tpp.solve`.

References:
    S. Zhang, C. Zhou, Y. Liu, P. Zhang, X. Lin, Z.-M. Ma, "Neural
    Jump-Diffusion Temporal Point Processes", ICML 2024, eqs. (5)-(9).
"""

from __future__ import annotations

import functools
import json
import pathlib
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import (Progress, ProgressArg, check_bool, check_choice, check_int, check_key, check_progress,
                           check_scalar, default_float, expected, is_concrete)
from jaxcore._util.minibatch import batch_mesh, minibatch_schedule, take_local

from ._checks import checked, float_dtype
from .events import EventBatch, check_batch, check_marks
from .solver import JumpDiffusion, _solve_batch, solve

_ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "tanh": jnp.tanh, "relu": jax.nn.relu, "softplus": jax.nn.softplus, "gelu": jax.nn.gelu,
    "sigmoid": jax.nn.sigmoid, "silu": jax.nn.silu,
}

_ACT_LIPSCHITZ = 1.2  # >= the Lipschitz constant of every activation above (gelu 1.13, silu 1.1, tanh 1)


class NJDTPP(JumpDiffusion):
    """Neural jump-diffusion TPP with drift, diffusion and jump MLPs (an equinox module).

    Attributes:
        drift_net: MLP ``K -> K``, ``f(eta)``.
        diffusion_net: MLP ``K -> K``, diagonal ``g(eta)``.
        jump_net: MLP ``K -> K*K``, ``h(eta)`` reshaped ``[K, K]``.
        eta0: learned initial log-intensity ``[K]``.
        width, depth, activation: the MLP configuration (static, for checkpoints).

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import NJDTPP, EventBatch, solve
        >>> model = NJDTPP(num_marks=2, key=jax.random.key(0), width=4, depth=1)
        >>> batch = EventBatch.from_sequences([[0.3, 1.2]], [[0, 1]], T=2.0, num_marks=2)
        >>> solve(model, batch, jax.random.key(1), num_substeps=1).log_likelihood.shape
        (1,)

    References:
        Zhang et al., ICML 2024, Sec. 4 (eqs. 5-9).
    """

    drift_net: eqx.nn.MLP
    diffusion_net: eqx.nn.MLP
    jump_net: eqx.nn.MLP
    eta0: Float[Array, " K"]
    width: int = eqx.field(static=True)
    depth: int = eqx.field(static=True)
    activation: str = eqx.field(static=True)

    stochastic: ClassVar[bool] = True

    def __init__(self, num_marks: int, *, key: PRNGKeyArray, width: int = 32, depth: int = 2,
                 activation: str = "tanh", init_log_rate: float = 0.0, dtype: Any = None):
        """Build the networks.

        Args:
            num_marks: number of event types ``K``.
            key: PRNG key for the weights.
            width, depth: hidden width and number of hidden layers (paper: 32, 2).
            activation: one of ``"tanh"`` (paper), ``"relu"``, ``"softplus"``, ``"gelu"``,
                ``"sigmoid"``, ``"silu"``.
            init_log_rate: initial value of every entry of ``eta0`` (a finite number; the
                log of the initial intensity).
            dtype: parameter dtype (default float32, float64 under x64); half precision and
                integer dtypes are refused (the log-intensity integral needs float32 at least).

        Raises:
            ValueError: bad sizes, unknown activation, NaN/inf ``init_log_rate``.
            TypeError: ``key`` is not a PRNG key; a non-float ``dtype``; a non-numeric
                ``init_log_rate``.
        """
        K = check_int(num_marks, "num_marks", minimum=1)
        check_int(width, "width", minimum=1)
        check_int(depth, "depth", minimum=0)
        check_choice(activation, "activation", sorted(_ACTIVATIONS))
        check_key(key)
        if is_concrete(init_log_rate):
            if init_log_rate is None:
                raise TypeError(expected("init_log_rate", "a finite number", "None", raw=True))
            init_log_rate = check_scalar(init_log_rate, "init_log_rate")
        dtype = float_dtype(default_float() if dtype is None else dtype)
        act = _ACTIVATIONS[activation]
        k1, k2, k3 = jax.random.split(key, 3)
        mk = lambda out, k: eqx.nn.MLP(K, out, width, depth, activation=act, key=k, dtype=dtype)  # noqa: E731
        # small output layers: an untrained model is close to a Poisson process of rate exp(eta0)
        shrink = lambda net, s: eqx.tree_at(  # noqa: E731
            lambda n: (n.layers[-1].weight, n.layers[-1].bias), net,
            (net.layers[-1].weight * s, jnp.zeros_like(net.layers[-1].bias)))
        self.drift_net = shrink(mk(K, k1), 0.01)
        self.diffusion_net = shrink(mk(K, k2), 0.01)
        self.jump_net = shrink(mk(K * K, k3), 0.1)
        self.eta0 = jnp.full((K,), init_log_rate, dtype)
        self.width, self.depth, self.activation = int(width), int(depth), activation

    @property
    def num_marks(self) -> int:
        return self.eta0.shape[0]

    def drift_lipschitz(self) -> Array:
        """Upper bound of the drift MLP's Lipschitz constant: the product of its layers' Frobenius
        norms times the activation's Lipschitz constant (at most 1.2 for the activations offered)."""
        layers = self.drift_net.layers
        bound = jnp.ones((), self.eta0.dtype)
        for i, layer in enumerate(layers):
            bound = bound * jnp.sqrt(jnp.sum(layer.weight.astype(self.eta0.dtype) ** 2))
            if i < len(layers) - 1:
                bound = bound * _ACT_LIPSCHITZ
        return bound

    def _checked(self) -> NJDTPP:
        """Every weight and ``eta0`` finite (host check when concrete, one ``error_if`` per leaf when traced)."""
        leaves, tree = jax.tree_util.tree_flatten(self)
        out = [checked(x, "model", "finite") if eqx.is_inexact_array(x) else x for x in leaves]
        return jax.tree_util.tree_unflatten(tree, out)

    def initial_state(self) -> Array:
        return self.eta0

    def drift(self, t, eta):
        return self.drift_net(eta)

    def diffusion(self, t, eta):
        return self.diffusion_net(eta)

    def drift_and_diffusion(self, t, eta):
        """Drift and diffusion in one pass: the two MLPs' layers stacked (``[2, out, in]`` weights) and
        applied as one batched contraction per layer, halving the number of small kernels per Euler step."""
        act = _ACTIVATIONS[self.activation]
        a, b = self.drift_net.layers, self.diffusion_net.layers
        x = jnp.stack([eta, eta])
        for i, (la, lb) in enumerate(zip(a, b)):
            x = jnp.einsum("goi,gi->go", jnp.stack([la.weight, lb.weight]), x) + jnp.stack([la.bias, lb.bias])
            if i < len(a) - 1:
                x = act(x)
        return x[0], x[1]

    def drift_and_jacobian_diag(self, t, eta):
        """The drift MLP and its Jacobian's diagonal in one pass: the primal once and ``K`` forward
        tangents (``[K, width]``) carried through the layers (the activation's derivative elementwise)."""
        act = _ACTIVATIONS[self.activation]
        layers = self.drift_net.layers
        x, tan = eta, jnp.eye(eta.shape[0], dtype=eta.dtype)
        for i, layer in enumerate(layers):
            x = layer.weight @ x + layer.bias
            tan = tan @ layer.weight.T
            if i < len(layers) - 1:
                x, slope = jax.jvp(act, (x,), (jnp.ones_like(x),))
                tan = tan * slope[None]
        return x, jnp.diagonal(tan)

    def jump(self, t, eta):
        K = eta.shape[0]
        return self.jump_net(eta).reshape(K, K)

    def log_likelihood(self, batch: EventBatch, key: PRNGKeyArray | None = None, **kwargs: Any) -> Array:
        """``[B]`` log-likelihoods (nats) via :func:`jaxcore.tpp.solve`.

        Which one to report: ``key=None`` (drift only) is deterministic, the likelihood of the intensity
        path the model predicts, and what :func:`jaxcore.tpp.evaluate` reports without a key. With a
        ``key``, it is the likelihood along one Brownian path (the training objective of :func:`train`);
        averaging it over paths (``evaluate(..., key=k, num_samples=S)``) estimates ``E[log L]``, a lower
        bound (Jensen) on the marginal ``log E[L]`` of the doubly stochastic process. The benchmark's
        ``tpp.synthetic`` and ``tpp.real`` tables report the path average, its ``tpp.recovery`` row the
        drift-only value; a table should say which one it holds.
        """
        return solve(self, batch, key, **kwargs).log_likelihood


def save_checkpoint(path: str | pathlib.Path, model: NJDTPP) -> None:
    """Write an NJDTPP's configuration (JSON header line) and weights (equinox serialisation) to ``path``.

    Args:
        path: file to write.
        model: the :class:`NJDTPP`.

    Returns:
        None.

    Raises:
        TypeError: ``model`` is not an NJDTPP.

    Examples:
        >>> import jax, tempfile, pathlib
        >>> from jaxcore.tpp import NJDTPP, load_checkpoint, save_checkpoint
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "model.eqx"
        >>> save_checkpoint(path, NJDTPP(2, key=jax.random.key(0), width=4))
        >>> load_checkpoint(path).width
        4
    """
    if not isinstance(model, NJDTPP):
        raise TypeError(expected("model", "an NJDTPP", type(model).__name__, raw=True))
    header = {"num_marks": model.num_marks, "width": model.width, "depth": model.depth,
              "activation": model.activation, "dtype": str(model.eta0.dtype)}
    with open(path, "wb") as f:
        f.write((json.dumps(header) + "\n").encode())
        eqx.tree_serialise_leaves(f, model)


def load_checkpoint(path: str | pathlib.Path) -> NJDTPP:
    """Read a model written by :func:`save_checkpoint`.

    The header gives the configuration; the weights are read into a shape template built by
    ``eqx.filter_eval_shape`` (no weights are drawn).

    Args:
        path: a file written by :func:`save_checkpoint`.

    Returns:
        The :class:`NJDTPP`.

    Raises:
        ValueError: the file has no valid header, or its weights are truncated, corrupt or
            followed by other bytes.

    Examples:
        >>> import jax, tempfile, pathlib
        >>> from jaxcore.tpp import NJDTPP, load_checkpoint, save_checkpoint
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "model.eqx"
        >>> save_checkpoint(path, NJDTPP(1, key=jax.random.key(0), width=4, depth=1))
        >>> load_checkpoint(path).num_marks
        1
    """
    with open(path, "rb") as f:
        line = f.readline()
        try:
            h = json.loads(line.decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(expected("path", "an NJDTPP checkpoint (a JSON header line, then the weights)",
                                      str(path))) from e
        what = "an NJDTPP checkpoint (a JSON header line, then the weights)"
        try:
            # a shape template only: abstract arrays, no weights drawn (the key is abstract too)
            like = eqx.filter_eval_shape(
                functools.partial(NJDTPP, h["num_marks"], width=h["width"], depth=h["depth"],
                                  activation=h["activation"], dtype=jnp.dtype(h["dtype"])),
                key=jax.eval_shape(jax.random.key, 0))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(expected("path", what, f"{str(path)!r} with the header {h!r}", raw=True)) from e
        try:
            model = eqx.tree_deserialise_leaves(f, like)
        except Exception as e:  # noqa: BLE001 - a truncated or corrupt file fails anywhere in NumPy / equinox
            raise ValueError(expected("path", what, f"{str(path)!r} whose weights do not read back "
                                      f"({type(e).__name__})", raw=True)) from e
        if f.read(1):
            raise ValueError(expected("path", what, f"{str(path)!r} with bytes after the weights", raw=True))
        return model


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
    from .neural import NeuralTPP

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


def _train_loss(params, static, batch, key, num_substeps, convention, stochastic):
    """``-sum log L / sum N`` (nats per event; the paper convention does not count first events)."""
    m = eqx.combine(params, static)
    if num_substeps < 0:  # a neural TPP (train passes minus its number of quadrature nodes)
        from .neural import _loglik_batch

        ll = _loglik_batch(m, batch, -num_substeps)
        return -jnp.sum(ll.log_likelihood) / jnp.maximum(jnp.sum(batch.mask), 1)
    ll = _solve_batch(m, batch, key if stochastic else None, "scan", num_substeps, convention, None, None, 4096, 1e-3)
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
    loss, g = jax.value_and_grad(_train_loss)(params, static, sub, k_noise, num_substeps, convention, stochastic)
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
                due, lambda p: _train_loss(p, static, valid_batch, eval_key, num_substeps, convention,
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
