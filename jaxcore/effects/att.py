"""Kernel balancing for the effect on the treated (ATT): the controls reweighted to the treated arm.

The ATT ``E[Y(1) - Y(0) | T = 1]`` needs only the controls' outcomes reweighted so that their
covariate distribution matches the treated one; every treated unit keeps the weight ``1 / n_1``.
With ``v = T / n_1 - (1 - T) w`` the balancing problem over the control weights ``w`` is

    min_w  v^T K v + lam sum_{T=0} w_j^2   s.t.  w_j >= 0,  sum_{T=0} w_j = 1,

the squared kernel MMD between the treated mean embedding and the weighted control embedding plus
``lam`` times the inverse of the controls' effective sample size ``1 / ESS_0 = sum w_j^2`` (so
``lam`` trades balance against variance, as ``lam`` does in the ATE problem of :mod:`.dual`). The
objective is strongly convex (``2 lam``): the solution is unique. Solved by accelerated projected
gradient (FISTA with adaptive restart) on the simplex of the controls, vmapped over the ``B`` data
sets; the stopping rule is the gradient-mapping residual.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from .data import EffectData, check_data
from .dual import _lipschitz, _tnext, check_solver_args

__all__ = ["ATTBalancingResult", "att_balancing"]


class ATTBalancingResult(NamedTuple):
    """Result of :func:`att_balancing` for ``B`` data sets of ``N`` units.

    Attributes:
        weights: ``[B, N]``: ``1 / n_1`` on every treated unit, the balancing weights (summing to 1) on the
            controls, 0 on padding.
        objective: ``[B]`` ``MMD^2 + lam sum_{T=0} w^2`` at the solution.
        mmd2: ``[B]`` the squared kernel MMD between the treated arm and the weighted controls.
        kkt_residual: ``[B]`` the gradient-mapping residual ``L |w - P(w - grad / L)|_inf`` (0 at the optimum).
        num_steps: ``[B]`` int32 iterations run.

    Examples:
        >>> ATTBalancingResult._fields[:2]
        ('weights', 'objective')
    """

    weights: Float[Array, "B N"]
    objective: Float[Array, " B"]
    mmd2: Float[Array, " B"]
    kkt_residual: Float[Array, " B"]
    num_steps: Int[Array, " B"]


def project_simplex(z: jnp.ndarray, arm: jnp.ndarray) -> jnp.ndarray:
    """Euclidean projection of ``z`` restricted to ``arm`` (bool) onto the probability simplex; 0 elsewhere."""
    u = -jnp.sort(jnp.where(arm, -z, jnp.inf))  # arm's values in decreasing order first
    valid = jnp.isfinite(u)
    u = jnp.where(valid, u, 0.0)
    css = jnp.cumsum(u)
    j = jnp.arange(1, z.shape[0] + 1, dtype=z.dtype)
    ok = valid & (u - (css - 1.0) / j > 0)
    rho = jnp.maximum(jnp.sum(ok), 1)
    theta = (css[rho - 1] - 1.0) / rho.astype(z.dtype)
    return jnp.where(arm, jnp.maximum(z - theta, 0.0), 0.0)


def _att_one(k, treatment, mask, lam, max_steps, tol):
    dtype = k.dtype
    t = (treatment > 0.5) & mask
    c = (treatment < 0.5) & mask
    n1 = jnp.maximum(jnp.sum(t), 1).astype(dtype)
    n0 = jnp.maximum(jnp.sum(c), 1).astype(dtype)
    tw = t.astype(dtype) / n1
    kc = k * c[:, None] * c[None, :]
    lip = _lipschitz(kc) + 2.0 * lam

    def grad(w):
        return jnp.where(c, -2.0 * (k @ (tw - w)) + 2.0 * lam * w, 0.0)

    def cond(s):
        return (s[3] < max_steps) & (s[4] > tol)

    def body(s):
        w, prev, tk, i, _ = s
        y = w + ((tk - 1.0) / _tnext(tk)) * (w - prev)
        new = project_simplex(y - grad(y) / lip, c)
        restart = jnp.sum((y - new) * (new - w)) > 0
        r = jnp.max(jnp.abs(y - new)) * lip
        return new, jnp.where(restart, new, w), jnp.where(restart, 1.0, _tnext(tk)), i + 1, r

    w0 = c.astype(dtype) / n0
    init = (w0, w0, jnp.asarray(1.0, dtype), jnp.asarray(0, jnp.int32), jnp.asarray(jnp.inf, dtype))
    w, _, _, steps, _ = jax.lax.while_loop(cond, body, init)
    new = project_simplex(w - grad(w) / lip, c)
    res = jnp.max(jnp.abs(w - new)) * lip
    v = tw - w
    mmd2 = jnp.maximum(v @ (k @ v), 0.0)
    return tw + w, mmd2 + lam * jnp.sum(w * w), mmd2, res, steps


@jax.jit
def _att_jit(kernel, treatment, mask, lam, max_steps, tol):
    return ATTBalancingResult(*jax.vmap(_att_one, in_axes=(0, 0, 0, None, None, None))(
        kernel, treatment, mask, lam, max_steps, tol))


def att_balancing(
    kernel: Float[Array, "B N N"],
    data: EffectData,
    *,
    lam: float = 0.1,
    max_steps: int = 20_000,
    tol: float = 1e-5,
) -> ATTBalancingResult:
    """Kernel balancing weights for the ATT: the controls reweighted to the treated, for every data set of a batch.

    ``min_w (T/n_1 - w)^T K (T/n_1 - w) + lam sum_{T=0} w_j^2`` over the simplex of the controls (module
    docstring); the treated keep ``1 / n_1``. The ATT is then ``sum_{T=1} Y / n_1 - sum_{T=0} w Y``
    (:func:`weighted_ate`).

    Args:
        kernel: ``[B, N, N]`` PSD kernel matrices (:func:`kernel_matrix`).
        data: :class:`EffectData` with ``[B, N]`` treatment and mask (outcomes unused).
        lam: ``> 0``, the price of ``1 / ESS`` of the controls in units of the squared MMD.
        max_steps: iteration cap (>= 1).
        tol: stop when the gradient-mapping residual (units of the objective's gradient) is below it.

    Returns:
        :class:`ATTBalancingResult`.

    Raises:
        TypeError: ``data`` is not an :class:`EffectData`; a non-floating kernel.
        ValueError: shapes disagree, ``lam``/``tol`` not positive, ``max_steps < 1``; a kernel with a NaN/inf,
            a negative diagonal entry or asymmetric on the real units.

    References:
        J. Zhang et al., "Towards Causal Foundation Model: on Duality between Causal Inference and Attention",
        ICML 2024, Eq. (1)-(3) (balancing, here with the treated arm as the target). J. R. Zubizarreta,
        "Stable weights that balance covariates for estimation with incomplete outcome data", JASA 110, 2015
        (the variance penalty). A. Beck, M. Teboulle, SIAM J. Imaging Sci., 2009 (FISTA).

    Examples:
        >>> from jaxcore.effects import effect_data, kernel_matrix
        >>> d = effect_data([[1.0], [0.0], [2.0]], [1, 0, 0])
        >>> r = att_balancing(kernel_matrix(d, kind="linear"), d, lam=1e-6)
        >>> [round(float(w), 3) for w in r.weights[0]]     # controls at 0 and 2 average to the treated 1
        [1.0, 0.5, 0.5]
    """
    check_data(data)
    k, max_steps = check_solver_args(kernel, data, lam, tol, max_steps)
    return _att_jit(k, data.treatment.astype(k.dtype), data.mask, jnp.asarray(lam, k.dtype),
                    jnp.asarray(max_steps, jnp.int32), jnp.asarray(tol, k.dtype))
