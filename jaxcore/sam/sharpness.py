"""Sharpness measures: Hessian-vector products, the Hessian's largest eigenvalue and m-sharpness.

They take the family's one loss convention (see :mod:`jaxcore.sam`)::

    loss_fn(params, model_state, batch) -> (loss, aux)

and use ``loss`` only (a scalar mean over the batch); ``model_state`` is passed
through unchanged (``None`` by default). With BatchNorm, pass a ``loss_fn`` that
runs the model in eval mode, or the sharpness is that of the training-mode loss.

Each public function validates on the host and runs one module-level compiled
program (``eqx.filter_jit``, with ``loss_fn`` static): a second call with the same
``loss_fn`` and shapes does not recompile.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import check_int, check_key, expected

from ._checks import _as_scalar, _check_radius, _check_tree, _checked_value, _same_structure
from ._loss import LossFn, _check_loss_fn, _scalar_loss
from .perturbations import _random_perturbation
from .tree_math import _global_norm, _safe_normalize, _tree_dot

PyTree = Any


def _leading_size(batch: PyTree) -> int:
    leaves = jax.tree.leaves(batch)
    if not leaves or any(jnp.ndim(x) == 0 for x in leaves):
        raise ValueError(expected("batch", "a pytree of arrays with a leading batch axis", batch))
    sizes = {jnp.shape(x)[0] for x in leaves}
    if len(sizes) != 1:
        raise ValueError(expected("batch", "leaves with one leading batch size", f"leading sizes {sorted(sizes)}",
                                  raw=True))
    return sizes.pop()


def _hvp(loss_fn: LossFn, params: PyTree, batch: PyTree, v: PyTree, model_state: PyTree = None) -> PyTree:
    f = _scalar_loss(loss_fn, model_state)
    grad_fn = jax.grad(lambda p: f(p, batch))
    return jax.jvp(grad_fn, (params,), (v,))[1]


_hvp_jit = eqx.filter_jit(_hvp)


def hessian_vector_product(
    loss_fn: LossFn, params: PyTree, batch: PyTree, v: PyTree, *, model_state: PyTree = None
) -> PyTree:
    """``H v`` with ``H = d^2 loss / d params^2``, by forward-over-reverse differentiation.

    Costs about two gradient evaluations; ``H`` is never formed.

    Args:
        loss_fn: ``loss_fn(params, model_state, batch) -> (loss, aux)``, scalar ``loss``.
        params: point ``w`` at which the Hessian is taken (pytree of float arrays).
        batch: data (pytree).
        v: tangent pytree like ``params`` (each leaf cast to the dtype of its ``params`` leaf).
        model_state: passed to ``loss_fn`` unchanged (default None).

    Returns:
        ``H v``, a pytree like ``params`` (loss units per parameter unit squared).

    Raises:
        TypeError: ``loss_fn`` not callable or not returning ``(loss, aux)``; non-float leaves.
        ValueError: ``v`` not shaped like ``params``.

    References:
        Pearlmutter, "Fast Exact Multiplication by the Hessian", Neural
        Computation, 1994.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.sam import hessian_vector_product
        >>> loss = lambda w, _, b: (jnp.sum(b * w ** 2), {})  # H = diag(2 b)
        >>> hessian_vector_product(loss, jnp.ones(2), jnp.array([1.0, 3.0]), jnp.ones(2)).tolist()
        [2.0, 6.0]
    """
    _check_loss_fn(loss_fn)
    _check_tree(params, "params")
    _check_tree(v, "v")
    _same_structure(params, v, "params", "v")
    # The tangent takes each parameter leaf's dtype (jvp needs equal dtypes; documented).
    v = jax.tree.map(lambda p, t: jnp.asarray(t).astype(jnp.result_type(p)), params, v)
    return _hvp_jit(loss_fn, params, batch, v, model_state)


class PowerIterationResult(NamedTuple):
    """Result of :func:`hessian_max_eigenvalue`.

    Attributes:
        eigenvalue: Rayleigh quotient ``v^T H v`` of the final unit vector (scalar).
        eigenvector: the unit vector ``v`` (pytree like ``params``).
        residual: ``||H v - eigenvalue v||`` (scalar; 0 at an exact eigenpair).

    References:
        Yao et al., "PyHessian", IEEE BigData 2020, Algorithm 1.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.sam import hessian_max_eigenvalue
        >>> loss = lambda w, _, b: (jnp.sum(w ** 2), {})
        >>> res = hessian_max_eigenvalue(jax.random.key(0), loss, jnp.ones(2), None, num_iters=2)
        >>> round(float(res.eigenvalue), 4), round(float(res.residual), 4)
        (2.0, 0.0)
    """

    eigenvalue: Float[Array, ""]
    eigenvector: PyTree
    residual: Float[Array, ""]


def _power_iteration(key, loss_fn, params, batch, model_state, num_iters):
    def hvp(v):
        return _hvp(loss_fn, params, batch, v, model_state)

    v0 = _random_perturbation(key, params, 1.0)

    def body(_, v):
        nxt, _ = _safe_normalize(hvp(v))
        return nxt

    v = jax.lax.fori_loop(0, num_iters, body, v0)
    hv = hvp(v)
    lam = _tree_dot(v, hv)
    res = _global_norm(jax.tree.map(lambda a, b: a - lam.astype(a.dtype) * b, hv, v))
    return PowerIterationResult(lam, v, res)


_power_iteration_jit = eqx.filter_jit(_power_iteration)


def hessian_max_eigenvalue(
    key: PRNGKeyArray,
    loss_fn: LossFn,
    params: PyTree,
    batch: PyTree,
    *,
    model_state: PyTree = None,
    num_iters: int = 20,
) -> PowerIterationResult:
    """Largest-magnitude Hessian eigenvalue by power iteration on Hessian-vector products.

    ``v_{t+1} = H v_t / ||H v_t||`` from a random unit ``v_0``; returns
    ``lambda = v^T H v``. Converges to the eigenvalue of largest magnitude (the
    top eigenvalue near a minimum, where ``H`` is close to PSD) at the rate
    ``|lambda_2 / lambda_1|^t``; check ``residual``.

    Args:
        key: PRNG key for ``v_0``.
        loss_fn: ``loss_fn(params, model_state, batch) -> (loss, aux)``, scalar ``loss``.
        params: point ``w`` (pytree of float arrays).
        batch: data (pytree).
        model_state: passed to ``loss_fn`` unchanged (default None).
        num_iters: number of iterations (static, >= 1); costs ``num_iters + 1``
            Hessian-vector products.

    Returns:
        :class:`PowerIterationResult` (eigenvalue in loss units per parameter unit squared).

    Raises:
        TypeError: ``key`` not a PRNG key; ``num_iters`` not an int; bad ``loss_fn``.
        ValueError: ``num_iters < 1``.

    References:
        Yao et al., "PyHessian: Neural Networks Through the Lens of the
        Hessian", IEEE BigData 2020, Algorithm 1. Used as the sharpness
        measure in Foret et al. (ICLR 2021, Sec. 4.2) and Vani et al. (ICML 2024).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.sam import hessian_max_eigenvalue
        >>> loss = lambda w, _, b: (0.5 * jnp.sum(b * w ** 2), {})  # H = diag(b)
        >>> res = hessian_max_eigenvalue(jax.random.key(0), loss, jnp.ones(3), jnp.array([1.0, 4.0, 2.0]),
        ...                              num_iters=50)
        >>> round(float(res.eigenvalue), 4)
        4.0
    """
    check_key(key)
    _check_loss_fn(loss_fn)
    _check_tree(params, "params")
    num_iters = check_int(num_iters, "num_iters", minimum=1)
    return _power_iteration_jit(key, loss_fn, params, batch, model_state, num_iters)


class MSharpnessResult(NamedTuple):
    """Result of :func:`m_sharpness`.

    Attributes:
        sharpness: mean over micro-batches (scalar, loss units).
        per_micro_batch: the ``[num_micro_batches]`` values (loss units).

    References:
        Foret et al., ICLR 2021, Sec. 4.1 (m-sharpness).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.sam import m_sharpness
        >>> loss = lambda w, _, x: (jnp.mean(x @ w), {})  # linear: sharpness rho ||mean x||
        >>> res = m_sharpness(loss, jnp.zeros(2), jnp.ones((4, 2)), num_micro_batches=4, rho=0.1)
        >>> res.per_micro_batch.shape, round(float(res.sharpness), 4)
        ((4,), 0.1414)
    """

    sharpness: Float[Array, ""]
    per_micro_batch: Float[Array, " num_micro_batches"]


def _m_sharpness(loss_fn, params, batch, model_state, rho, step_size, num_micro_batches, num_steps):
    f_full = _scalar_loss(loss_fn, model_state)
    k = num_micro_batches
    micro = jax.tree.map(lambda x: x.reshape((k, x.shape[0] // k) + x.shape[1:]), batch)
    lr = rho / num_steps if step_size is None else step_size

    def one(mb):
        f = lambda p: f_full(p, mb)  # noqa: E731
        base = f(params)

        def body(_, eps):
            w = jax.tree.map(jnp.add, params, eps)
            g = jax.grad(f)(w)
            stepv, _ = _safe_normalize(g, lr)
            eps = jax.tree.map(jnp.add, eps, stepv)
            nrm = _global_norm(eps)
            scale = jnp.where(nrm > rho, rho / jnp.where(nrm > 0, nrm, 1.0), 1.0)
            return jax.tree.map(lambda e: (scale * e).astype(e.dtype), eps)

        eps = jax.lax.fori_loop(0, num_steps, body, jax.tree.map(jnp.zeros_like, params))
        return f(jax.tree.map(jnp.add, params, eps)) - base

    per = jax.vmap(one)(micro)
    return MSharpnessResult(jnp.mean(per), per)


_m_sharpness_jit = eqx.filter_jit(_m_sharpness)


def m_sharpness(
    loss_fn: LossFn,
    params: PyTree,
    batch: PyTree,
    *,
    num_micro_batches: int,
    rho: float,
    num_steps: int = 1,
    step_size: float | None = None,
    model_state: PyTree = None,
) -> MSharpnessResult:
    """m-sharpness: mean over micro-batches of ``max_{||eps|| <= rho} L_S(w + eps) - L_S(w)``.

    The batch ``[B, ...]`` is split into ``k = num_micro_batches`` disjoint
    micro-batches ``S`` of ``m = B / k`` examples (vmapped); the inner maximum
    is approximated by ``num_steps`` steps of normalised gradient ascent
    projected on the ball (one step is SAM's ``eps = rho g / ||g||``).

    Args:
        loss_fn: ``loss_fn(params, model_state, batch) -> (loss, aux)``, ``loss`` a mean over the batch.
        params: point ``w`` (pytree of float arrays).
        batch: pytree of arrays with leading axis ``B``.
        num_micro_batches: ``k``, a positive divisor of ``B`` (static); ``k = 1`` is sharpness on the whole batch.
        rho: radius (finite, >= 0).
        num_steps: ascent steps (static, >= 1).
        step_size: ascent step length (finite, >= 0); default ``rho / num_steps``.
        model_state: passed to ``loss_fn`` unchanged (default None).

    Returns:
        :class:`MSharpnessResult` ``(sharpness, per_micro_batch)`` (loss units); unpacks as a pair.

    Raises:
        TypeError: ``num_micro_batches`` / ``num_steps`` not ints; bad ``loss_fn``.
        ValueError: ``num_micro_batches`` not a positive divisor of ``B``, negative ``rho``, ``num_steps < 1``.

    References:
        Foret et al., "Sharpness-Aware Minimization for Efficiently Improving
        Generalization", ICLR 2021, Sec. 4.1 (m-sharpness); Andriushchenko &
        Flammarion, "Towards Understanding Sharpness-Aware Minimization",
        ICML 2022, Sec. 3.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.sam import m_sharpness
        >>> loss = lambda w, _, x: (0.5 * jnp.mean(jnp.sum((w - x) ** 2, -1)), {})  # Hessian = I
        >>> x = jnp.array([[1.0, 0.0], [-1.0, 0.0]])
        >>> mean, per = m_sharpness(loss, jnp.zeros(2), x, num_micro_batches=2, rho=0.1)
        >>> [round(v, 4) for v in per.tolist()]  # rho ||g|| + rho^2 / 2
        [0.105, 0.105]
    """
    _check_loss_fn(loss_fn)
    _check_tree(params, "params")
    _check_radius(rho, schedule=False)
    rho = _checked_value(rho, "rho")
    num_steps = check_int(num_steps, "num_steps", minimum=1)
    if step_size is not None:
        step_size = _checked_value(step_size, "step_size")
    b = _leading_size(batch)
    k = check_int(num_micro_batches, "num_micro_batches", minimum=1)
    if b % k:
        raise ValueError(expected("num_micro_batches", f"a positive divisor of the batch size {b}", k))
    return _m_sharpness_jit(loss_fn, params, batch, model_state, _as_scalar(rho),
                            None if step_size is None else _as_scalar(step_size), k, num_steps)
