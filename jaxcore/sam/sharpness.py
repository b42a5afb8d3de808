"""Sharpness measures: the Hessian's largest eigenvalue and m-sharpness.

Both take a scalar loss ``loss_fn(params, batch) -> loss`` (mean over the
batch). With a model state (BatchNorm), close over it in eval mode first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .perturbations import _check_rho, global_norm, random_perturbation, safe_normalize, tree_dot

PyTree = Any
ScalarLoss = Callable[[PyTree, PyTree], jax.Array]


def hessian_vector_product(loss_fn: ScalarLoss, params: PyTree, batch: PyTree, v: PyTree) -> PyTree:
    """``H v`` with ``H = d^2 loss / d params^2``, by forward-over-reverse differentiation.

    Costs about two gradient evaluations; ``H`` is never formed.

    Args:
        loss_fn: ``loss_fn(params, batch) -> scalar``.
        params: point ``w`` at which the Hessian is taken.
        batch: data (pytree).
        v: tangent pytree like ``params``.

    Returns:
        ``H v``, a pytree like ``params``.

    References:
        Pearlmutter, "Fast Exact Multiplication by the Hessian", Neural
        Computation, 1994.
    """
    grad_fn = jax.grad(lambda p: loss_fn(p, batch))
    return jax.jvp(grad_fn, (params,), (v,))[1]


class PowerIterationResult(NamedTuple):
    """Result of :func:`hessian_max_eigenvalue`.

    Attributes:
        eigenvalue: Rayleigh quotient ``v^T H v`` of the final unit vector (scalar).
        eigenvector: the unit vector ``v`` (pytree like ``params``).
        residual: ``||H v - eigenvalue v||`` (scalar; 0 at an exact eigenpair).
    """

    eigenvalue: Float[Array, ""]
    eigenvector: PyTree
    residual: Float[Array, ""]


def hessian_max_eigenvalue(
    loss_fn: ScalarLoss,
    params: PyTree,
    batch: PyTree,
    key: PRNGKeyArray,
    *,
    num_iters: int = 20,
) -> PowerIterationResult:
    """Largest-magnitude Hessian eigenvalue by power iteration on Hessian-vector products.

    ``v_{t+1} = H v_t / ||H v_t||`` from a random unit ``v_0``; returns
    ``lambda = v^T H v``. Converges to the eigenvalue of largest magnitude (the
    top eigenvalue near a minimum, where ``H`` is close to PSD) at the rate
    ``|lambda_2 / lambda_1|^t``; check ``residual``.

    Args:
        loss_fn: ``loss_fn(params, batch) -> scalar``.
        params: point ``w``.
        batch: data (pytree).
        key: PRNG key for ``v_0``.
        num_iters: number of iterations (static, >= 1); costs ``num_iters + 1``
            Hessian-vector products.

    Returns:
        :class:`PowerIterationResult`.

    Raises:
        ValueError: ``num_iters < 1``.

    References:
        Yao et al., "PyHessian: Neural Networks Through the Lens of the
        Hessian", IEEE BigData 2020, Algorithm 1. Used as the sharpness
        measure in Foret et al. (ICLR 2021, Sec. 4.2) and Vani et al. (ICML 2024).
    """
    if isinstance(num_iters, bool) or not isinstance(num_iters, int) or num_iters < 1:
        raise ValueError(f"num_iters: expected an int >= 1, got {num_iters!r}")

    def hvp(v):
        return hessian_vector_product(loss_fn, params, batch, v)

    v0 = random_perturbation(key, params, 1.0)

    def body(_, v):
        nxt, _ = safe_normalize(hvp(v))
        return nxt

    v = jax.lax.fori_loop(0, num_iters, body, v0)
    hv = hvp(v)
    lam = tree_dot(v, hv)
    res = global_norm(jax.tree.map(lambda a, b: a - lam.astype(a.dtype) * b, hv, v))
    return PowerIterationResult(lam, v, res)


def m_sharpness(
    loss_fn: ScalarLoss,
    params: PyTree,
    batch: PyTree,
    *,
    m: int,
    rho: float,
    num_steps: int = 1,
    step_size: float | None = None,
) -> tuple[Float[Array, ""], Float[Array, " k"]]:
    """m-sharpness: mean over micro-batches of ``max_{||eps|| <= rho} L_S(w + eps) - L_S(w)``.

    The batch ``[B, ...]`` is split into ``k = B / m`` micro-batches ``S``
    (vmapped); the inner maximum is approximated by ``num_steps`` steps of
    normalised gradient ascent projected on the ball (one step is SAM's
    ``eps = rho g / ||g||``).

    Args:
        loss_fn: ``loss_fn(params, batch) -> scalar`` (mean over the batch).
        params: point ``w``.
        batch: pytree of arrays with leading axis ``B``.
        m: micro-batch size, a positive divisor of ``B``.
        rho: radius (>= 0).
        num_steps: ascent steps (static, >= 1).
        step_size: ascent step length; default ``rho / num_steps``.

    Returns:
        ``(mean, per_batch)``: the mean sharpness and the ``[k]`` values (loss units).

    Raises:
        ValueError: bad ``m``, negative ``rho``, ``num_steps < 1``.

    References:
        Foret et al., "Sharpness-Aware Minimization for Efficiently Improving
        Generalization", ICLR 2021, Sec. 4.1 (m-sharpness); Andriushchenko &
        Flammarion, "Towards Understanding Sharpness-Aware Minimization",
        ICML 2022, Sec. 3.
    """
    _check_rho(rho)
    if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 1:
        raise ValueError(f"num_steps: expected an int >= 1, got {num_steps!r}")
    leaves = jax.tree.leaves(batch)
    if not leaves or any(jnp.ndim(x) == 0 for x in leaves):
        raise ValueError(f"batch: expected a pytree of arrays with a leading batch axis, got {batch!r:.80}")
    b = jnp.shape(leaves[0])[0]
    if isinstance(m, bool) or not isinstance(m, int) or m <= 0 or b % m:
        raise ValueError(f"m: expected a positive divisor of the batch size {b}, got {m!r}")
    k = b // m
    micro = jax.tree.map(lambda x: x.reshape((k, m) + x.shape[1:]), batch)
    lr = rho / num_steps if step_size is None else step_size

    def one(mb):
        f = lambda p: loss_fn(p, mb)  # noqa: E731
        base = f(params)

        def body(_, eps):
            w = jax.tree.map(jnp.add, params, eps)
            g = jax.grad(f)(w)
            stepv, _ = safe_normalize(g, lr)
            eps = jax.tree.map(jnp.add, eps, stepv)
            nrm = global_norm(eps)
            scale = jnp.where(nrm > rho, rho / jnp.where(nrm > 0, nrm, 1.0), 1.0)
            return jax.tree.map(lambda e: (scale * e).astype(e.dtype), eps)

        eps = jax.lax.fori_loop(0, num_steps, body, jax.tree.map(jnp.zeros_like, params))
        return f(jax.tree.map(jnp.add, params, eps)) - base

    per = jax.vmap(one)(micro)
    return jnp.mean(per), per
