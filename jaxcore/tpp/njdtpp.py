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
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import check_choice, check_int, check_key, check_scalar, default_float, expected, is_concrete

from ._checks import checked, float_dtype
from .solver import JumpDiffusion

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
