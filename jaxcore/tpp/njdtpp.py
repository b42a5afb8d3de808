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
from jaxtyping import Array, Float, PRNGKeyArray

from ._common import check_int
from .events import EventBatch, check_batch, check_marks
from .solver import JumpDiffusion, solve

_ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "tanh": jnp.tanh, "relu": jax.nn.relu, "softplus": jax.nn.softplus, "gelu": jax.nn.gelu,
    "sigmoid": jax.nn.sigmoid, "silu": jax.nn.silu,
}


class NJDTPP(JumpDiffusion):
    """Neural jump-diffusion TPP with drift, diffusion and jump MLPs (an equinox module).

    Attributes:
        drift_net: MLP ``K -> K``, ``f(eta)``.
        diffusion_net: MLP ``K -> K``, diagonal ``g(eta)``.
        jump_net: MLP ``K -> K*K``, ``h(eta)`` reshaped ``[K, K]``.
        eta0: learned initial log-intensity ``[K]``.
        width, depth, activation: the MLP configuration (static, for checkpoints).

    Example:
        >>> import jax
        >>> from jaxcore.tpp import NJDTPP, EventBatch, solve
        >>> model = NJDTPP(num_marks=2, key=jax.random.key(0))
        >>> batch = EventBatch.from_sequences([[0.3, 1.2]], [[0, 1]], T=2.0, num_marks=2)
        >>> ll = solve(model, batch, jax.random.key(1)).log_likelihood   # [1]

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
            init_log_rate: initial value of every entry of ``eta0``.
            dtype: parameter dtype (default float32, float64 under x64).

        Raises:
            ValueError: bad sizes or unknown activation.
        """
        K = check_int(num_marks, "num_marks")
        check_int(width, "width")
        check_int(depth, "depth", minimum=0)
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation: expected one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        dtype = dtype or (jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)
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

    def jump(self, t, eta):
        K = eta.shape[0]
        return self.jump_net(eta).reshape(K, K)

    def log_likelihood(self, batch: EventBatch, key: PRNGKeyArray | None = None, **kwargs: Any) -> Array:
        """``[B]`` log-likelihoods (nats) via :func:`jaxcore.tpp.solve` (``key=None``: drift only)."""
        return solve(self, batch, key, **kwargs).log_likelihood


def save_checkpoint(path: str | pathlib.Path, model: NJDTPP) -> None:
    """Write an NJDTPP's configuration (JSON header line) and weights (equinox serialisation) to ``path``."""
    if not isinstance(model, NJDTPP):
        raise TypeError(f"model: expected an NJDTPP, got {type(model).__name__}")
    header = {"num_marks": model.num_marks, "width": model.width, "depth": model.depth,
              "activation": model.activation, "dtype": str(model.eta0.dtype)}
    with open(path, "wb") as f:
        f.write((json.dumps(header) + "\n").encode())
        eqx.tree_serialise_leaves(f, model)


def load_checkpoint(path: str | pathlib.Path) -> NJDTPP:
    """Read a model written by :func:`save_checkpoint`.

    Raises:
        ValueError: the file has no valid header.
    """
    with open(path, "rb") as f:
        line = f.readline()
        try:
            h = json.loads(line.decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"path: {path} is not an NJDTPP checkpoint (no JSON header line)") from e
        like = NJDTPP(h["num_marks"], key=jax.random.key(0), width=h["width"], depth=h["depth"],
                      activation=h["activation"], dtype=jnp.dtype(h["dtype"]))
        return eqx.tree_deserialise_leaves(f, like)


class TrainResult(NamedTuple):
    """Output of :func:`train`: ``model`` and ``history`` (``[steps]`` train NLL per event, nats)
    plus ``valid_history`` (``[n_evals]``, NaN-free; empty without a validation batch)."""

    model: NJDTPP
    history: np.ndarray
    valid_history: np.ndarray


def train(
    model: NJDTPP,
    batch: EventBatch,
    *,
    key: PRNGKeyArray,
    steps: int = 500,
    batch_size: int = 32,
    optimizer: optax.GradientTransformation | None = None,
    num_substeps: int = 10,
    convention: str = "window",
    valid_batch: EventBatch | None = None,
    eval_every: int = 50,
    stochastic: bool = True,
) -> TrainResult:
    """Fit an NJDTPP by minibatch maximum likelihood with optax.

    Each step draws ``batch_size`` sequences uniformly (with replacement) and a
    fresh Brownian key, and takes one optimizer step on
    ``-sum log L / sum N`` (nats per event). With a validation batch the model
    with the best validation NLL (evaluated every ``eval_every`` steps, fixed
    noise key) is returned.

    Args:
        model: the initial :class:`NJDTPP`.
        batch: training sequences.
        key: PRNG key (minibatches and noise).
        steps: optimizer steps.
        batch_size: sequences per step.
        optimizer: optax transformation (default ``adam(1e-2)`` with global-norm clipping at 10).
        num_substeps, convention: passed to :func:`solve`.
        valid_batch: optional validation sequences for model selection.
        eval_every: validation period in steps.
        stochastic: include the diffusion term during training (False: drift only).

    Returns:
        A :class:`TrainResult`.

    Raises:
        TypeError/ValueError: bad model, batch, or sizes.
    """
    if not isinstance(model, NJDTPP):
        raise TypeError(f"model: expected an NJDTPP, got {type(model).__name__}")
    check_batch(batch)
    check_marks(batch, model.num_marks)
    steps = check_int(steps, "steps")
    batch_size = check_int(batch_size, "batch_size")
    eval_every = check_int(eval_every, "eval_every")
    optimizer = _default_optimizer() if optimizer is None else optimizer
    params, static = eqx.partition(model, eqx.is_inexact_array)
    opt_state = optimizer.init(params)
    opts = (optimizer, batch_size, num_substeps, convention, stochastic)

    history, valid_hist = [], []
    best, best_params = np.inf, params
    eval_key = jax.random.key(12345)
    keys = jax.random.split(key, steps)
    for s in range(steps):  # one jitted optimizer step per iteration (training loop, not a time loop)
        params, opt_state, loss = _train_step(params, static, opt_state, batch, keys[s], *opts)
        history.append(float(loss))
        if valid_batch is not None and ((s + 1) % eval_every == 0 or s == steps - 1):
            v = float(_train_loss_jit(params, static, valid_batch, eval_key, num_substeps, convention, stochastic))
            valid_hist.append(v)
            if np.isfinite(v) and v < best:
                best, best_params = v, params
    final = best_params if valid_batch is not None else params
    return TrainResult(eqx.combine(final, static), np.asarray(history), np.asarray(valid_hist))


@functools.cache
def _default_optimizer() -> optax.GradientTransformation:
    # one instance, so that repeated calls of train hit the compilation cache (the optimizer is static)
    return optax.chain(optax.clip_by_global_norm(10.0), optax.adam(1e-2))


def _train_loss(params, static, batch, key, num_substeps, convention, stochastic):
    """``-sum log L / sum N`` (nats per event; the paper convention does not count first events)."""
    m = eqx.combine(params, static)
    ll = solve(m, batch, key if stochastic else None, num_substeps=num_substeps, convention=convention)
    n = jnp.sum(batch.mask) - (batch.batch_size if convention == "paper" else 0)
    return -jnp.sum(ll.log_likelihood) / jnp.maximum(n, 1)


_train_loss_jit = eqx.filter_jit(_train_loss)


@eqx.filter_jit
def _train_step(params, static, opt_state, batch, key, optimizer, batch_size, num_substeps, convention, stochastic):
    """One optimizer step on a minibatch of ``batch_size`` sequences drawn with replacement; compiled
    once per model structure, data shape and setting (reused across calls of :func:`train`)."""
    k_idx, k_noise = jax.random.split(key)
    idx = jax.random.randint(k_idx, (batch_size,), 0, batch.batch_size)
    sub = EventBatch(batch.times[idx], batch.marks[idx], batch.mask[idx], batch.T[idx], batch.num_marks)
    loss, g = jax.value_and_grad(_train_loss)(params, static, sub, k_noise, num_substeps, convention, stochastic)
    updates, opt_state = optimizer.update(g, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss
