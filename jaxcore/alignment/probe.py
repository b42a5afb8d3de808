"""A linear toxicity probe: logistic regression on residual-stream features, trained with optax.

``P(toxic | h) = sigma(w . h + b)``, fitted by minimising the mean (optionally weighted) binary
cross-entropy plus ``l2 ||w||^2 / 2`` with Adam over the full batch, in one ``lax.scan``. Features
are standardised inside the fit (mean and scale of each coordinate) and ``w`` is mapped back, so
the returned ``weight`` acts on raw features; ``direction = w / ||w||`` is the toxicity direction
of the paper.

References:
    Lee et al., "A Mechanistic Understanding of Alignment Algorithms: A Case Study on DPO and
    Toxicity", ICML 2024, Section 3.1 (a linear probe on the last layer's residual stream,
    averaged over positions).
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jax import lax
from jaxtyping import Array, Float

from jaxcore._util import (
    as_float_array,
    check_finite,
    check_int,
    check_ndim,
    check_range,
    check_scalar,
    check_shape,
    expected,
)

__all__ = ["ProbeResult", "fit_probe"]


class ProbeResult(NamedTuple):
    """A fitted logistic-regression probe.

    Attributes:
        weight: ``[d]`` on raw features (``logit = features @ weight + bias``).
        bias: scalar.
        direction: ``[d]`` the unit vector ``weight / ||weight||`` (the toxicity direction).
        loss: ``[num_steps]`` training loss (mean cross-entropy + penalty, nats).
        accuracy: training accuracy of ``logit > 0`` against ``labels > 0.5``.
    """

    weight: Float[Array, " d"]
    bias: Float[Array, ""]
    direction: Float[Array, " d"]
    loss: Float[Array, " S"]
    accuracy: Float[Array, ""]


@eqx.filter_jit
def _fit_jit(x, y, w, num_steps, learning_rate, l2):
    mu = jnp.sum(w[:, None] * x, axis=0) / jnp.sum(w)
    sd = jnp.sqrt(jnp.sum(w[:, None] * (x - mu) ** 2, axis=0) / jnp.sum(w))
    sd = jnp.where(sd > 0, sd, 1.0)
    z = (x - mu) / sd
    opt = optax.adam(learning_rate)
    params = (jnp.zeros(x.shape[1], x.dtype), jnp.zeros((), x.dtype))

    def loss_fn(p):
        logit = z @ p[0] + p[1]
        ce = optax.sigmoid_binary_cross_entropy(logit, y)
        return jnp.sum(w * ce) / jnp.sum(w) + 0.5 * l2 * jnp.sum(p[0] ** 2)

    def body(carry, _):
        p, s = carry
        loss, g = jax.value_and_grad(loss_fn)(p)
        u, s = opt.update(g, s, p)
        return (optax.apply_updates(p, u), s), loss

    (p, _), losses = lax.scan(body, (params, opt.init(params)), None, length=num_steps)
    weight = p[0] / sd
    bias = p[1] - jnp.sum(mu * weight)
    acc = jnp.sum(w * ((x @ weight + bias > 0) == (y > 0.5))) / jnp.sum(w)
    return ProbeResult(weight, bias, weight / jnp.linalg.norm(weight), losses, acc)


def fit_probe(features: Float[Array, "N d"], labels: Float[Array, " N"], *, num_steps: int = 300,
              learning_rate: float = 0.05, l2: float = 1e-3,
              sample_weight: Float[Array, " N"] | None = None) -> ProbeResult:
    """Fit a logistic-regression probe ``sigma(features @ w + b)`` to (soft) labels in [0, 1].

    Minimises ``sum_i s_i CE(y_i, sigma(w . x_i + b)) / sum_i s_i + l2 ||w'||^2 / 2`` (``w'`` the
    weight on standardised features) with ``optax.adam`` over the full batch.

    Args:
        features: ``[N, d]`` finite floats (e.g. :func:`residual_features`).
        labels: ``[N]`` in [0, 1] (1 = toxic; soft labels such as a scorer's probability allowed).
        num_steps: >= 1 Adam steps.
        learning_rate: > 0.
        l2: >= 0 ridge penalty on the standardised weight.
        sample_weight: optional ``[N]`` non-negative weights (default 1), not all zero.

    Returns:
        A :class:`ProbeResult`.

    Raises:
        ValueError: shapes, non-finite features, labels outside [0, 1], bad hyperparameters.

    References:
        Lee et al., ICML 2024, Section 3.1.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> x = jax.random.normal(jax.random.key(0), (200, 3))
        >>> res = fit_probe(x, (x[:, 0] > 0).astype(jnp.float32))
        >>> bool(res.direction[0] > 0.9), bool(res.accuracy > 0.95)
        (True, True)
    """
    x = as_float_array(features, "features")
    check_ndim(x, "features", 2, "a [num_samples, dim] array")
    check_finite(x, "features")
    y = as_float_array(labels, "labels").astype(x.dtype)
    check_shape(y, "labels", (x.shape[0],))
    check_range(y, "labels", 0.0, 1.0)
    if sample_weight is None:
        w = jnp.ones(x.shape[0], x.dtype)
    else:
        w = as_float_array(sample_weight, "sample_weight").astype(x.dtype)
        check_shape(w, "sample_weight", (x.shape[0],))
        check_range(w, "sample_weight", 0.0, None)
        if not float(jnp.sum(w)) > 0:
            raise ValueError(expected("sample_weight", "a positive total weight", float(jnp.sum(w))))
    if x.shape[0] < 2:
        raise ValueError(expected("features", "at least 2 samples", f"shape {tuple(x.shape)}", raw=True))
    steps = check_int(num_steps, "num_steps", minimum=1)
    lr = check_scalar(learning_rate, "learning_rate", positive=True)
    pen = check_scalar(l2, "l2", nonnegative=True)
    return _fit_jit(x, y, w, steps, lr, pen)
