"""Decomposable structure scores as local-score tables ``[d, 2**(d-1)]``, and graph priors.

A decomposable score is ``log p(D | G) = sum_j s_j(pa_j)``. Every scorer here
returns the whole table ``table[j, c]`` of local scores, ``c`` the compressed
parent index of :func:`jaxcore.causal.graphs.compress_parents`, computed by one
``vmap`` over (node, parent set) pairs. Parent sets larger than
``max_parents`` get ``-inf`` (excluded). The log posterior of a DAG under a
decomposable prior is then a gather and a sum (:mod:`jaxcore.causal.posterior`).

Scores:
- :func:`bge_local_scores`: the BGe marginal likelihood (Normal-Wishart prior),
  in the corrected form of Kuipers, Moffa & Heckerman (2014).
- :func:`nig_local_scores`: linear-Gaussian SEM with a conjugate
  Normal-inverse-gamma prior on each node's weights and own noise variance
  (unequal variances).
- :func:`bdeu_local_scores`: BDeu for discrete data (Buntine 1991; Heckerman,
  Geiger & Chickering 1995).

Priors (tables of the same shape, added to a score table):
:func:`uniform_prior_table`, :func:`erdos_renyi_prior_table`,
:func:`sparsity_prior_table`, :func:`order_modular_prior_table`.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln
from jaxtyping import Array, Float, Int

__all__ = [
    "parent_set_list",
    "bge_local_scores",
    "nig_local_scores",
    "bdeu_local_scores",
    "uniform_prior_table",
    "erdos_renyi_prior_table",
    "sparsity_prior_table",
    "order_modular_prior_table",
    "check_data",
]


# ----------------------------------------------------------------------------- helpers


def check_data(data, name: str = "data", *, discrete: bool = False) -> np.ndarray:
    """Host-side validation of a data matrix ``[N, d]``: 2-D, N >= 1, d >= 1, finite.

    Raises:
        ValueError: wrong rank, empty, NaN/inf entries, or (discrete) negative / non-integer values.
        TypeError: non-numeric dtype.
    """
    arr = np.asarray(data)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"{name} must have shape [N, d] with N, d >= 1, got shape {arr.shape}")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values ({int(np.sum(~np.isfinite(arr)))} entries)")
    if discrete:
        if arr.dtype.kind == "f" and not np.all(arr == np.round(arr)):
            raise ValueError(f"{name} must hold integer category codes for a discrete score")
        if np.any(arr < 0):
            raise ValueError(f"{name} must hold non-negative category codes, got minimum {arr.min()}")
    return arr


@functools.lru_cache(maxsize=64)
def parent_set_list(d: int, max_parents: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """All (node, compressed parent index) pairs with at most ``max_parents`` parents.

    Args:
        d: number of nodes (<= 31).
        max_parents: in-degree bound (None: ``d - 1``).

    Returns:
        ``(nodes, index)``, each ``[n_pairs]`` int32 (host NumPy), node-major.
    """
    k = d - 1 if max_parents is None else min(int(max_parents), d - 1)
    idx = np.arange(1 << (d - 1), dtype=np.int64)
    pop = np.zeros_like(idx)
    for b in range(d - 1):
        pop += (idx >> b) & 1
    keep = idx[pop <= k].astype(np.int32)
    nodes = np.repeat(np.arange(d, dtype=np.int32), keep.size)
    return nodes, np.tile(keep, d)


def _full_mask_bool(node, cidx, d):
    """Bool [d] membership of the parent set with compressed index ``cidx`` of ``node``."""
    j = jnp.arange(d, dtype=jnp.int32)
    bitpos = jnp.where(j < node, j, j - 1)
    return (j != node) & (((cidx >> jnp.maximum(bitpos, 0)) & 1) == 1)


def _masked_logdet(mat, mask):
    """log det of ``mat[mask][:, mask]`` (0 for an empty mask), static shapes via an identity fill."""
    m = mask.astype(mat.dtype)
    sub = mat * m[:, None] * m[None, :] + jnp.diag(1.0 - m)
    chol = jnp.linalg.cholesky(sub)
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol)))


def _table(local_fn, d, max_parents, dtype):
    nodes, cidx = parent_set_list(d, max_parents)
    vals = jax.vmap(local_fn)(jnp.asarray(nodes), jnp.asarray(cidx))
    table = jnp.full((d, 1 << (d - 1)), -jnp.inf, dtype)
    return table.at[jnp.asarray(nodes), jnp.asarray(cidx)].set(vals.astype(dtype))


def _check_max_parents(max_parents, d):
    if max_parents is not None and (not isinstance(max_parents, (int, np.integer)) or max_parents < 0):
        raise ValueError(f"max_parents must be None or a non-negative int, got {max_parents!r}")
    if d > 24:
        raise ValueError(f"local-score tables [d, 2**(d-1)] support d <= 24, got d={d}")


# ----------------------------------------------------------------------------- BGe


def bge_local_scores(
    data: Float[Array, "N d"],
    *,
    alpha_mu: float = 1.0,
    alpha_w: float | None = None,
    mean_prior: Float[Array, " d"] | None = None,
    max_parents: int | None = None,
) -> Float[Array, "d two_pow_d_minus_1"]:
    """BGe local scores (log marginal likelihood of node ``j`` given its parents) for all parent sets.

    With the Normal-Wishart prior ``mu ~ N(nu, (alpha_mu W)^-1)``, ``W ~ Wishart(alpha_w, T0^-1)``,
    ``T0 = t I``, ``t = alpha_mu (alpha_w - d - 1) / (alpha_mu + 1)``, the posterior scale is
    ``T_N = T0 + S_N + N alpha_mu / (N + alpha_mu) (nu - xbar)(nu - xbar)^T`` and, with ``l = |pa|``,
    ``Y = pa ∪ {j}``::

        s_j(pa) = 1/2 log(alpha_mu / (N + alpha_mu)) - N/2 log(pi)
                  + lgamma((N + alpha_w - d + l + 1)/2) - lgamma((alpha_w - d + l + 1)/2)
                  + (alpha_w - d + 2 l + 1)/2 log t
                  + (N + alpha_w - d + l)/2 log|T_N[pa, pa]| - (N + alpha_w - d + l + 1)/2 log|T_N[Y, Y]|

    Markov-equivalent DAGs receive equal total scores (score equivalence).

    Args:
        data: ``[N, d]`` float observations (no NaN/inf).
        alpha_mu: ``alpha_mu > 0``, prior precision scale of the mean.
        alpha_w: Wishart degrees of freedom, ``> d - 1`` (default ``d + 2``).
        mean_prior: ``[d]`` prior mean ``nu`` (default zeros).
        max_parents: in-degree bound; larger parent sets get ``-inf``.

    Returns:
        ``[d, 2**(d-1)]`` table of log marginal likelihoods (nats), dtype of ``data``
        (float32 unless x64 data).

    Raises:
        ValueError: data not ``[N, d]`` or not finite; ``alpha_mu <= 0``; ``alpha_w <= d - 1``.

    References:
        D. Geiger, D. Heckerman, "Parameter priors for directed acyclic graphical
        models and the characterization of several probability distributions",
        Annals of Statistics 2002. J. Kuipers, G. Moffa, D. Heckerman, "Addendum on
        the scoring of Gaussian directed acyclic graphical models", Annals of
        Statistics 2014, eq. (2)-(3) (the corrected local score).
    """
    if not isinstance(data, jax.core.Tracer):
        check_data(data)
    n, d = jnp.shape(data)
    if alpha_w is None:
        alpha_w = d + 2.0
    if alpha_mu <= 0:
        raise ValueError(f"alpha_mu must be > 0, got {alpha_mu}")
    if alpha_w <= d - 1:
        raise ValueError(f"alpha_w must be > d - 1 = {d - 1}, got {alpha_w}")
    _check_max_parents(max_parents, d)
    x = jnp.asarray(data)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    dtype = x.dtype
    nu = jnp.zeros((d,), dtype) if mean_prior is None else jnp.asarray(mean_prior, dtype)
    t = alpha_mu * (alpha_w - d - 1.0) / (alpha_mu + 1.0)
    xbar = jnp.mean(x, axis=0)
    xc = x - xbar
    tn = t * jnp.eye(d, dtype=dtype) + xc.T @ xc + (n * alpha_mu / (n + alpha_mu)) * jnp.outer(nu - xbar, nu - xbar)

    def local(node, cidx):
        pa = _full_mask_bool(node, cidx, d)
        y = pa | (jnp.arange(d) == node)
        l = jnp.sum(pa).astype(dtype)
        a = alpha_w - d + l
        const = (
            0.5 * jnp.log(alpha_mu / (n + alpha_mu))
            - 0.5 * n * jnp.log(jnp.pi)
            + gammaln((n + a + 1.0) / 2.0)
            - gammaln((a + 1.0) / 2.0)
            + (alpha_w - d + 2.0 * l + 1.0) / 2.0 * jnp.log(t)
        )
        return const + (n + a) / 2.0 * _masked_logdet(tn, pa) - (n + a + 1.0) / 2.0 * _masked_logdet(tn, y)

    return _table(local, d, max_parents, dtype)


# ----------------------------------------------------------------------------- NIG


def nig_local_scores(
    data: Float[Array, "N d"],
    *,
    weight_scale: float = 1.0,
    a0: float = 1.0,
    b0: float = 1.0,
    center: bool = True,
    max_parents: int | None = None,
) -> Float[Array, "d two_pow_d_minus_1"]:
    """Linear-Gaussian local scores with a conjugate Normal-inverse-gamma prior (unequal noise variances).

    Model for node ``j``: ``x_j = X_pa beta + eps``, ``eps ~ N(0, sigma_j^2)``,
    ``beta | sigma_j^2 ~ N(0, sigma_j^2 v I)``, ``sigma_j^2 ~ InvGamma(a0, b0)``. With
    ``Lambda = I / v + X_pa^T X_pa``, ``a_N = a0 + N/2``,
    ``b_N = b0 + (y^T y - y^T X_pa Lambda^-1 X_pa^T y)/2``::

        s_j(pa) = -N/2 log(2 pi) - l/2 log v - 1/2 log|Lambda| + a0 log b0 - a_N log b_N
                  + lgamma(a_N) - lgamma(a0)

    Args:
        data: ``[N, d]`` float observations.
        weight_scale: prior variance scale ``v > 0`` of the edge weights.
        a0, b0: inverse-gamma shape and scale (> 0).
        center: subtract column means first (the model has no intercept).
        max_parents: in-degree bound.

    Returns:
        ``[d, 2**(d-1)]`` log marginal likelihoods (nats).

    Raises:
        ValueError: bad data or non-positive hyper-parameters.

    References:
        K. P. Murphy, "Conjugate Bayesian analysis of the Gaussian distribution",
        2007, sec. 7.6 (NIG linear regression evidence); Karimi Mamaghan et al.,
        "Challenges and considerations in the evaluation of Bayesian causal
        discovery", ICML 2024 (unequal-variance linear-Gaussian model).
    """
    if not isinstance(data, jax.core.Tracer):
        check_data(data)
    for nm, v in (("weight_scale", weight_scale), ("a0", a0), ("b0", b0)):
        if v <= 0:
            raise ValueError(f"{nm} must be > 0, got {v}")
    n, d = jnp.shape(data)
    _check_max_parents(max_parents, d)
    x = jnp.asarray(data)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    dtype = x.dtype
    if center:
        x = x - jnp.mean(x, axis=0)
    g = x.T @ x

    def local(node, cidx):
        pa = _full_mask_bool(node, cidx, d)
        m = pa.astype(dtype)
        l = jnp.sum(m)
        lam = (g + jnp.eye(d, dtype=dtype) / weight_scale) * m[:, None] * m[None, :] + jnp.diag(1.0 - m)
        chol = jnp.linalg.cholesky(lam)
        b = g[:, node] * m
        z = jax.scipy.linalg.solve_triangular(chol, b, lower=True)
        an = a0 + n / 2.0
        bn = b0 + 0.5 * (g[node, node] - jnp.sum(z * z))
        return (
            -0.5 * n * jnp.log(2.0 * jnp.pi)
            - 0.5 * l * jnp.log(weight_scale)
            - jnp.sum(jnp.log(jnp.diagonal(chol)))
            + a0 * jnp.log(b0)
            - an * jnp.log(bn)
            + gammaln(an)
            - gammaln(a0)
        )

    return _table(local, d, max_parents, dtype)


# ----------------------------------------------------------------------------- BDeu


def bdeu_local_scores(
    data: Int[Array, "N d"],
    arities,
    *,
    equivalent_sample_size: float = 1.0,
    max_parents: int | None = None,
) -> Float[Array, "d two_pow_d_minus_1"]:
    """BDeu local scores for discrete data.

    With ``q`` parent configurations, ``r`` states, ``a = ess / q``, ``b = ess / (q r)``
    and counts ``N_ck``::

        s_j(pa) = sum_c [lgamma(a) - lgamma(a + N_c)] + sum_{c,k} [lgamma(b + N_ck) - lgamma(b)]

    Args:
        data: ``[N, d]`` integer category codes, ``0 <= data[:, j] < arities[j]``.
        arities: ``[d]`` number of states of each variable (static Python ints).
        equivalent_sample_size: ``ess > 0``.
        max_parents: in-degree bound (bounds the count-table size).

    Returns:
        ``[d, 2**(d-1)]`` log marginal likelihoods (nats), float32 (float64 under x64).

    Raises:
        ValueError: bad data, codes out of range, ``ess <= 0``.

    References:
        W. Buntine, "Theory refinement on Bayesian networks", UAI 1991;
        D. Heckerman, D. Geiger, D. M. Chickering, "Learning Bayesian networks:
        the combination of knowledge and statistical data", Machine Learning 1995, eq. (28).
    """
    arities = tuple(int(r) for r in np.asarray(arities).reshape(-1))
    if not isinstance(data, jax.core.Tracer):
        arr = check_data(data, discrete=True)
        if arr.shape[1] != len(arities):
            raise ValueError(f"arities must have length d={arr.shape[1]}, got {len(arities)}")
        if np.any(arr >= np.asarray(arities)[None, :]):
            raise ValueError("data has a category code >= its variable's arity")
    if equivalent_sample_size <= 0:
        raise ValueError(f"equivalent_sample_size must be > 0, got {equivalent_sample_size}")
    n, d = jnp.shape(data)
    _check_max_parents(max_parents, d)
    k = d - 1 if max_parents is None else min(max_parents, d - 1)
    rmax = max(arities)
    qmax = int(np.prod(sorted(arities)[::-1][:k])) if k > 0 else 1
    x = jnp.asarray(data).astype(jnp.int32)
    ar = jnp.asarray(arities, jnp.int32)
    dtype = jnp.result_type(float)
    ess = equivalent_sample_size

    def local(node, cidx):
        pa = _full_mask_bool(node, cidx, d)
        radix = jnp.where(pa, ar, 1)
        stride = jnp.concatenate([jnp.ones((1,), jnp.int32), jnp.cumprod(radix)[:-1]])
        q = jnp.prod(radix).astype(dtype)
        cfg = jnp.sum(jnp.where(pa, x * stride, 0), axis=1)
        r = ar[node].astype(dtype)
        seg = cfg * rmax + x[:, node]
        counts = jax.ops.segment_sum(jnp.ones((n,), dtype), seg, num_segments=qmax * rmax).reshape(qmax, rmax)
        nc = jnp.sum(counts, axis=1)
        a = ess / q
        b = ess / (q * r)
        return jnp.sum(gammaln(a) - gammaln(a + nc)) + jnp.sum(gammaln(b + counts) - gammaln(b))

    return _table(local, d, max_parents, dtype)


# ----------------------------------------------------------------------------- priors


def _popcount_table(d):
    idx = np.arange(1 << (d - 1))
    pop = np.zeros_like(idx)
    for b in range(d - 1):
        pop += (idx >> b) & 1
    return np.broadcast_to(pop, (d, idx.size))


def _check_d(d):
    if not isinstance(d, (int, np.integer)) or d < 1 or d > 24:
        raise ValueError(f"d must be an int in 1..24, got {d!r}")


def uniform_prior_table(d: int) -> Float[Array, "d two_pow_d_minus_1"]:
    """Log-prior table of the uniform prior over DAGs (all zeros; normalised by the posterior)."""
    _check_d(d)
    return jnp.zeros((d, 1 << (d - 1)))


def erdos_renyi_prior_table(d: int, edge_probability: float) -> Float[Array, "d two_pow_d_minus_1"]:
    """Log-prior table of independent edges with probability ``p`` (restricted to DAGs).

    ``log p(pa_j) = |pa_j| log p + (d - 1 - |pa_j|) log(1 - p)``.

    Raises:
        ValueError: ``p`` not in (0, 1).
    """
    _check_d(d)
    p = edge_probability
    if not 0.0 < p < 1.0:
        raise ValueError(f"edge_probability must be in (0, 1), got {p}")
    pop = _popcount_table(d)
    return jnp.asarray(pop * math.log(p) + (d - 1 - pop) * math.log1p(-p))


def sparsity_prior_table(d: int, penalty: float) -> Float[Array, "d two_pow_d_minus_1"]:
    """Log-prior table penalising the edge count: ``log p(G) = -penalty * |E| + const``.

    Raises:
        ValueError: negative ``penalty``.
    """
    _check_d(d)
    if penalty < 0:
        raise ValueError(f"penalty must be >= 0, got {penalty}")
    return jnp.asarray(-penalty * _popcount_table(d).astype(float))


def order_modular_prior_table(d: int) -> Float[Array, "d two_pow_d_minus_1"]:
    """Log-prior table ``-log C(d-1, |pa_j|)`` of Friedman & Koller's order-modular prior.

    Used with a uniform prior over orders: ``p(G) ∝ #orders(G) prod_j C(d-1, |pa_j|)^-1``.

    References:
        N. Friedman, D. Koller, "Being Bayesian about network structure", Machine Learning 2003;
        M. Koivisto, K. Sood, "Exact Bayesian structure discovery in Bayesian networks", JMLR 2004.
    """
    _check_d(d)
    pop = _popcount_table(d)
    lc = np.array([math.log(math.comb(d - 1, k)) for k in range(d)])
    return jnp.asarray(-lc[pop])
