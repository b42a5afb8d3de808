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

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln
from jaxtyping import Array, Float, Int

from jaxcore._util import check_bool, check_finite, check_int, check_scalar, expected, is_concrete

__all__ = [
    "MAX_TABLE_D",
    "ScoreTable",
    "as_score_table",
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


# ----------------------------------------------------------------------------- the table type


MAX_TABLE_D = 24  # a [d, 2**(d-1)] table of d = 24 holds 2**27 entries (0.5 GiB in float32)


def _popcounts(d: int) -> np.ndarray:
    idx = np.arange(1 << (d - 1), dtype=np.int64)
    pop = np.zeros_like(idx)
    for b in range(d - 1):
        pop += (idx >> b) & 1
    return pop


class ScoreTable(eqx.Module):
    """A decomposable local-score table ``table[j, c]`` over every (node, parent set) pair.

    ``table[j, c]`` is the local log score (log marginal likelihood plus local log prior, nats)
    of node ``j`` having the parent set with compressed index ``c``
    (:func:`~jaxcore.causal.compress_parents`); the log score of a DAG is
    ``sum_j table[j, c_j(G)]``. Parent sets with more than ``max_parents`` parents are ``-inf``
    (excluded). The table is validated once, here; every consumer (:func:`exact_posterior`,
    :func:`exact_edge_marginals`, :func:`exact_map_dag`, the MCMC samplers, the bootstrap)
    trusts it. ``a + b`` adds two tables (or a table and a ``[d, 2**(d-1)]`` array), e.g. a
    score and a prior; the bound of a sum is the smaller one.

    Args:
        table: ``[d, 2**(d-1)]`` float local log scores, ``1 <= d <= 24``; entries are finite or
            ``-inf``, never NaN or ``+inf`` (checked when concrete, not under ``jit``).
        max_parents: the in-degree bound the table honours (``None``: ``d - 1``, no bound);
            entries of larger parent sets are expected to be ``-inf`` (checked when concrete).

    Attributes:
        table: the ``[d, 2**(d-1)]`` array.
        d: number of nodes (static).
        max_parents: the in-degree bound, ``0 <= max_parents <= d - 1`` (static).

    Raises:
        ValueError: wrong shape, ``d > 24``, NaN / ``+inf`` entries, a bound out of range or
            violated.
        TypeError: a non-float table or a non-int bound.

    References:
        M. Koivisto, K. Sood, "Exact Bayesian structure discovery in Bayesian networks", JMLR 5, 2004, sec. 3 (parent sets indexed as subsets).
        D. Heckerman, D. Geiger, D. M. Chickering, "Learning Bayesian networks", Machine Learning 1995 (decomposable scores).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.causal import ScoreTable
        >>> t = ScoreTable(jnp.zeros((3, 4)))
        >>> t.d, t.max_parents, t.table.shape
        (3, 2, (3, 4))
        >>> (t + t).max_parents
        2
    """

    table: Float[Array, "d two_pow_d_minus_1"]
    d: int = eqx.field(static=True)
    max_parents: int = eqx.field(static=True)

    def __init__(self, table, max_parents: int | None = None):
        shape = tuple(np.shape(table))
        if len(shape) != 2 or shape[0] < 1 or shape[1] != 1 << (shape[0] - 1):
            raise ValueError(expected("table", "shape [d, 2**(d-1)] with d >= 1", f"shape {shape}", raw=True))
        d = shape[0]
        if d > MAX_TABLE_D:
            raise ValueError(expected("table", f"d <= {MAX_TABLE_D} nodes ([d, 2**(d-1)] entries)", f"d={d}", raw=True))
        t = table if isinstance(table, jax.Array) else jnp.asarray(table)
        if not jnp.issubdtype(t.dtype, jnp.floating):
            raise TypeError(expected("table", "a float array", f"dtype {t.dtype}", raw=True))
        k = d - 1 if max_parents is None else check_int(max_parents, "max_parents", 0)
        k = min(k, d - 1)
        if is_concrete(t):
            a = np.asarray(t)
            bad = np.isnan(a) | np.isposinf(a)
            if bad.any():
                j, c = (int(i) for i in np.argwhere(bad)[0])
                raise ValueError(expected("table", "finite or -inf entries (no NaN, no +inf)",
                                          f"{a[j, c]!r} at [{j}, {c}]", raw=True))
            if k < d - 1:
                over = _popcounts(d) > k
                if not np.all(np.isneginf(a[:, over])):
                    raise ValueError(expected("table", f"-inf for every parent set larger than max_parents={k}",
                                              "a finite entry", raw=True))
        self.table = t
        self.d = d
        self.max_parents = k

    def __add__(self, other):
        if isinstance(other, ScoreTable):
            if other.d != self.d:
                raise ValueError(expected("other", f"a ScoreTable with d={self.d}", f"d={other.d}", raw=True))
            return ScoreTable(self.table + other.table, min(self.max_parents, other.max_parents))
        if np.shape(other) != tuple(self.table.shape) or isinstance(other, (str, bytes)) or other is None:
            raise ValueError(expected("other", f"a ScoreTable or an array of shape {tuple(self.table.shape)}",
                                      f"{type(other).__name__} of shape {np.shape(other)}", raw=True))
        return ScoreTable(self.table + jnp.asarray(other), self.max_parents)

    __radd__ = __add__
    __array_ufunc__ = None  # numpy_array + table defers to ScoreTable.__radd__

    @property
    def dtype(self):
        """The dtype of :attr:`table`."""
        return self.table.dtype


def as_score_table(table, name: str = "table") -> ScoreTable:
    """``table`` if it is a :class:`ScoreTable`; else TypeError naming the scorers."""
    if not isinstance(table, ScoreTable):
        raise TypeError(expected(name, "a ScoreTable (from bge_local_scores, nig_local_scores, bdeu_local_scores "
                                       "or ScoreTable(array))", type(table).__name__, raw=True))
    return table


# ----------------------------------------------------------------------------- helpers


def check_data(data, name: str = "data", *, discrete: bool = False) -> np.ndarray:
    """Host-side validation of a data matrix ``[N, d]``: 2-D, N >= 1, d >= 1, finite.

    Raises:
        ValueError: wrong rank, empty, NaN/inf entries, or (discrete) negative / non-integer values.
        TypeError: non-numeric dtype.
    """
    if data is None:
        raise TypeError(expected(name, "a numeric array [N, d]", "None", raw=True))
    arr = np.asarray(data)
    if arr.dtype.name == "bfloat16" or arr.dtype == np.float16:
        arr = arr.astype(np.float32)  # half precision: widened (the scorers compute in float32)
    if arr.dtype.kind not in "biuf":
        raise TypeError(expected(name, "a numeric array", f"dtype {arr.dtype}", raw=True))
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(expected(name, "shape [N, d] with N, d >= 1", f"shape {arr.shape}", raw=True))
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ValueError(expected(name, "finite values (no NaN or inf)",
                                  f"{int(np.sum(~np.isfinite(arr)))} NaN or inf entries", raw=True))
    if discrete:
        if arr.dtype.kind == "f" and not np.all(arr == np.round(arr)):
            raise ValueError(expected(name, "integer category codes for a discrete score", "non-integer values",
                                      raw=True))
        if np.any(arr < 0):
            raise ValueError(expected(name, "non-negative category codes", f"minimum {arr.min()}", raw=True))
    return arr


def parent_set_list(d: int, max_parents: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """All (node, compressed parent index) pairs with at most ``max_parents`` parents.

    Args:
        d: number of nodes, ``1 <= d <= 24``.
        max_parents: in-degree bound (None: ``d - 1``).

    Returns:
        ``(nodes, index)``, each ``[num_pairs]`` int32 (host NumPy), node-major.

    Raises:
        ValueError: ``d`` or ``max_parents`` out of range.

    Examples:
        >>> from jaxcore.causal import parent_set_list
        >>> nodes, index = parent_set_list(3, max_parents=1)
        >>> nodes.tolist(), index.tolist()
        ([0, 0, 0, 1, 1, 1, 2, 2, 2], [0, 1, 2, 0, 1, 2, 0, 1, 2])
    """
    d = check_int(d, "d", 1, MAX_TABLE_D)
    k = d - 1 if max_parents is None else min(check_int(max_parents, "max_parents", 0), d - 1)
    return _parent_set_list(d, k)


@functools.lru_cache(maxsize=64)
def _parent_set_list(d: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    pop = _popcounts(d)
    keep = np.arange(1 << (d - 1), dtype=np.int64)[pop <= k].astype(np.int32)
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
    if max_parents is not None:
        check_int(max_parents, "max_parents", 0)
    if d > MAX_TABLE_D:
        raise ValueError(expected("data", f"d <= {MAX_TABLE_D} columns for a [d, 2**(d-1)] local-score table",
                                  f"d={d}", raw=True))


def _float_data(data):
    """Data as a float array: integers to the default float; float16 / bfloat16 to float32 (no
    half-precision Cholesky in LAPACK, and the log-determinants need the range)."""
    x = data if isinstance(data, jax.Array) else jnp.asarray(np.asarray(data).astype(np.float32)
                                                             if np.asarray(data).dtype.name == "bfloat16"
                                                             else data)
    if x.dtype == jnp.float16 or x.dtype == jnp.bfloat16:
        return x.astype(jnp.float32)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


# ----------------------------------------------------------------------------- BGe


def _bge_table(x, nu, alpha_mu, alpha_w, t, max_parents):
    # Dispatched op by op, not as one jitted program: on XLA:CPU (jaxlib 0.10.2) the jitted whole
    # deadlocks at execution for d >= 11 (0 % CPU, waiting on its result; d = 10 runs in 1.1 s),
    # while the op-by-op path runs d = 11 in 3 s and d = 15 as before. Each op is compiled once
    # and cached by JAX, so a second call with the same shapes compiles nothing.
    n, d = x.shape
    dtype = x.dtype
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


def bge_local_scores(
    data: Float[Array, "N d"],
    *,
    alpha_mu: float = 1.0,
    alpha_w: float | None = None,
    mean_prior: Float[Array, " d"] | None = None,
    max_parents: int | None = None,
) -> ScoreTable:
    """BGe local scores (log marginal likelihood of node ``j`` given its parents) for all parent sets.

    With the Normal-Wishart prior ``mu ~ N(nu, (alpha_mu W)^-1)``, ``W ~ Wishart(alpha_w, T0^-1)``,
    ``T0 = t I``, ``t = alpha_mu (alpha_w - d - 1) / (alpha_mu + 1)``, the posterior scale is
    ``T_N = T0 + S_N + N alpha_mu / (N + alpha_mu) (nu - xbar)(nu - xbar)^T`` and, with ``l = |pa|``,
    ``Y = pa ∪ {j}``::

        s_j(pa) = 1/2 log(alpha_mu / (N + alpha_mu)) - N/2 log(pi)
                  + lgamma((N + alpha_w - d + l + 1)/2) - lgamma((alpha_w - d + l + 1)/2)
                  + (alpha_w - d + 2 l + 1)/2 log t
                  + (N + alpha_w - d + l)/2 log|T_N[pa, pa]| - (N + alpha_w - d + l + 1)/2 log|T_N[Y, Y]|

    Markov-equivalent DAGs receive equal total scores (score equivalence). One jitted program
    per (N, d, hyper-parameters).

    Args:
        data: ``[N, d]`` float observations (no NaN/inf), ``d <= 24``.
        alpha_mu: ``alpha_mu > 0``, prior precision scale of the mean.
        alpha_w: Wishart degrees of freedom, ``> d + 1`` (default ``d + 2``; ``t > 0`` needs it).
        mean_prior: ``[d]`` prior mean ``nu`` (default zeros).
        max_parents: in-degree bound; larger parent sets get ``-inf``.

    Returns:
        :class:`ScoreTable` of ``[d, 2**(d-1)]`` log marginal likelihoods (nats), dtype of ``data``
        (float32 unless x64 data; float16 / bfloat16 data are computed and returned in float32,
        integer data in the default float).

    Raises:
        ValueError: data not ``[N, d]`` or not finite; ``alpha_mu <= 0``; ``alpha_w <= d + 1``
            (NaN / inf hyper-parameters fail every check); ``mean_prior`` not ``[d]`` finite.
        TypeError: non-numeric ``data`` (None included) or hyper-parameters.

    References:
        D. Geiger, D. Heckerman, "Parameter priors for directed acyclic graphical
        models and the characterization of several probability distributions",
        Annals of Statistics 2002. J. Kuipers, G. Moffa, D. Heckerman, "Addendum on
        the scoring of Gaussian directed acyclic graphical models", Annals of
        Statistics 2014, eq. (2)-(3) (the corrected local score).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import bge_local_scores
        >>> x = np.random.default_rng(0).normal(size=(50, 3))
        >>> t = bge_local_scores(x, max_parents=1)
        >>> t.d, t.max_parents, t.table.shape
        (3, 1, (3, 4))
    """
    if is_concrete(data):
        check_data(data)
    n, d = jnp.shape(data)
    if alpha_w is None:
        alpha_w = d + 2.0
    alpha_mu = check_scalar(alpha_mu, "alpha_mu", positive=True)
    alpha_w = check_scalar(alpha_w, "alpha_w", low=d + 1, low_open=True)
    _check_max_parents(max_parents, d)
    x = _float_data(data)
    dtype = x.dtype
    if mean_prior is None:
        nu = jnp.zeros((d,), dtype)
    else:
        if isinstance(mean_prior, (str, bytes)) or np.asarray(mean_prior).dtype.kind not in "biufV":
            raise TypeError(expected("mean_prior", "a real array [d]", type(mean_prior).__name__, raw=True))
        nu = _float_data(mean_prior).astype(dtype)
        check_finite(nu, "mean_prior")
        if nu.shape != (d,):
            raise ValueError(expected("mean_prior", f"shape [{d}]", f"shape {nu.shape}", raw=True))
    t = alpha_mu * (alpha_w - d - 1.0) / (alpha_mu + 1.0)
    table = _bge_table(x, nu, alpha_mu, alpha_w, t, max_parents)
    return ScoreTable(table, max_parents)


# ----------------------------------------------------------------------------- NIG


@functools.partial(jax.jit, static_argnames=("weight_scale", "a0", "b0", "center", "max_parents"))
def _nig_table(x, weight_scale, a0, b0, center, max_parents):
    n, d = x.shape
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


def nig_local_scores(
    data: Float[Array, "N d"],
    *,
    weight_scale: float = 1.0,
    a0: float = 1.0,
    b0: float = 1.0,
    center: bool = True,
    max_parents: int | None = None,
) -> ScoreTable:
    """Linear-Gaussian local scores with a conjugate Normal-inverse-gamma prior (unequal noise variances).

    Model for node ``j``: ``x_j = X_pa beta + eps``, ``eps ~ N(0, sigma_j^2)``,
    ``beta | sigma_j^2 ~ N(0, sigma_j^2 v I)``, ``sigma_j^2 ~ InvGamma(a0, b0)``. With
    ``Lambda = I / v + X_pa^T X_pa``, ``a_N = a0 + N/2``,
    ``b_N = b0 + (y^T y - y^T X_pa Lambda^-1 X_pa^T y)/2``::

        s_j(pa) = -N/2 log(2 pi) - l/2 log v - 1/2 log|Lambda| + a0 log b0 - a_N log b_N
                  + lgamma(a_N) - lgamma(a0)

    Args:
        data: ``[N, d]`` float observations, ``d <= 24``.
        weight_scale: prior variance scale ``v > 0`` of the edge weights.
        a0, b0: inverse-gamma shape and scale (> 0).
        center: subtract column means first (the model has no intercept).
        max_parents: in-degree bound.

    Returns:
        :class:`ScoreTable` of ``[d, 2**(d-1)]`` log marginal likelihoods (nats), dtype of
        ``data`` (float16 / bfloat16 data computed and returned in float32, integers in the
        default float).

    Raises:
        ValueError: bad data, or hyper-parameters not finite and > 0 (NaN / inf refused).
        TypeError: non-numeric ``data`` (None included) or hyper-parameters.

    References:
        K. P. Murphy, "Conjugate Bayesian analysis of the Gaussian distribution",
        2007, sec. 7.6 (NIG linear regression evidence); Karimi Mamaghan et al.,
        "Challenges and considerations in the evaluation of Bayesian causal
        discovery", ICML 2024 (unequal-variance linear-Gaussian model).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import nig_local_scores
        >>> x = np.random.default_rng(0).normal(size=(50, 3))
        >>> nig_local_scores(x).table.shape
        (3, 4)
    """
    if is_concrete(data):
        check_data(data)
    weight_scale = check_scalar(weight_scale, "weight_scale", positive=True)
    a0 = check_scalar(a0, "a0", positive=True)
    b0 = check_scalar(b0, "b0", positive=True)
    center = check_bool(center, "center")
    n, d = jnp.shape(data)
    _check_max_parents(max_parents, d)
    x = _float_data(data)
    return ScoreTable(_nig_table(x, weight_scale, a0, b0, center, max_parents), max_parents)


# ----------------------------------------------------------------------------- BDeu


@functools.partial(jax.jit, static_argnames=("arities", "ess", "max_parents"))
def _bdeu_table(x, arities, ess, max_parents):
    n, d = x.shape
    k = d - 1 if max_parents is None else min(max_parents, d - 1)
    rmax = max(arities)
    qmax = int(np.prod(sorted(arities)[::-1][:k])) if k > 0 else 1
    x = x.astype(jnp.int32)
    ar = jnp.asarray(arities, jnp.int32)
    dtype = jnp.result_type(float)

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


def bdeu_local_scores(
    data: Int[Array, "N d"],
    arities,
    *,
    equivalent_sample_size: float = 1.0,
    max_parents: int | None = None,
) -> ScoreTable:
    """BDeu local scores for discrete data.

    With ``q`` parent configurations, ``r`` states, ``a = ess / q``, ``b = ess / (q r)``
    and counts ``N_ck``::

        s_j(pa) = sum_c [lgamma(a) - lgamma(a + N_c)] + sum_{c,k} [lgamma(b + N_ck) - lgamma(b)]

    Args:
        data: ``[N, d]`` integer category codes, ``0 <= data[:, j] < arities[j]``, ``d <= 24``.
        arities: ``[d]`` number of states of each variable (static Python ints).
        equivalent_sample_size: ``ess > 0``.
        max_parents: in-degree bound (bounds the count-table size).

    Returns:
        :class:`ScoreTable` of ``[d, 2**(d-1)]`` log marginal likelihoods (nats), float32
        (float64 under x64).

    Raises:
        ValueError: bad data, codes out of range, ``arities`` not ints >= 1 of length d,
            ``ess`` not finite and > 0.
        TypeError: non-numeric ``data`` or ``arities``.

    References:
        W. Buntine, "Theory refinement on Bayesian networks", UAI 1991;
        D. Heckerman, D. Geiger, D. M. Chickering, "Learning Bayesian networks:
        the combination of knowledge and statistical data", Machine Learning 1995, eq. (28).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import bdeu_local_scores
        >>> x = np.random.default_rng(0).integers(0, 2, size=(40, 3))
        >>> bdeu_local_scores(x, [2, 2, 2]).table.shape
        (3, 4)
    """
    if arities is None or isinstance(arities, (str, bytes)):
        raise TypeError(expected("arities", "a sequence of ints (states per variable)", type(arities).__name__,
                                 raw=True))
    ar = np.asarray(arities)
    if ar.ndim != 1 or ar.dtype.kind not in "iu" and not (ar.dtype.kind == "f" and np.all(ar == np.round(ar))):
        raise TypeError(expected("arities", "a 1-d sequence of ints", f"{ar.dtype} array of shape {ar.shape}",
                                 raw=True))
    if ar.size and (not np.all(np.isfinite(ar)) or ar.min() < 1):
        raise ValueError(expected("arities", "ints >= 1", f"minimum {ar.min()!r}", raw=True))
    arities = tuple(int(r) for r in ar)
    if is_concrete(data):
        arr = check_data(data, discrete=True)
        if arr.shape[1] != len(arities):
            raise ValueError(expected("arities", f"length d={arr.shape[1]}", f"length {len(arities)}", raw=True))
        if np.any(arr >= np.asarray(arities)[None, :]):
            raise ValueError(expected("data", "category codes below each variable's arity",
                                      "a code >= its arity", raw=True))
    ess = check_scalar(equivalent_sample_size, "equivalent_sample_size", positive=True)
    n, d = jnp.shape(data)
    _check_max_parents(max_parents, d)
    return ScoreTable(_bdeu_table(jnp.asarray(data), arities, ess, max_parents), max_parents)


# ----------------------------------------------------------------------------- priors


def _popcount_table(d):
    return np.broadcast_to(_popcounts(d), (d, 1 << (d - 1)))


def _check_d(d):
    return check_int(d, "d", 1, MAX_TABLE_D)


def uniform_prior_table(d: int) -> ScoreTable:
    """Log-prior table of the uniform prior over DAGs (all zeros; normalised by the posterior).

    Args:
        d: number of nodes, ``1 <= d <= 24``.

    Returns:
        :class:`ScoreTable` of zeros ``[d, 2**(d-1)]`` (default float dtype).

    Raises:
        ValueError / TypeError: ``d`` not an int in 1..24.

    References:
        A. Karimi Mamaghan et al., "Challenges and considerations in the evaluation of Bayesian causal discovery", ICML 2024.

    Examples:
        >>> from jaxcore.causal import uniform_prior_table
        >>> float(uniform_prior_table(3).table.sum())
        0.0
    """
    d = _check_d(d)
    return ScoreTable(jnp.zeros((d, 1 << (d - 1))))


def erdos_renyi_prior_table(d: int, edge_probability: float) -> ScoreTable:
    """Log-prior table of independent edges with probability ``p`` (restricted to DAGs).

    ``log p(pa_j) = |pa_j| log p + (d - 1 - |pa_j|) log(1 - p)``.

    Args:
        d: number of nodes, ``1 <= d <= 24``.
        edge_probability: ``p`` in ``(0, 1)``.

    Returns:
        :class:`ScoreTable` ``[d, 2**(d-1)]`` of log prior probabilities (nats).

    Raises:
        ValueError: ``p`` not in (0, 1), ``d`` out of range.

    References:
        P. Erdős, A. Rényi, "On random graphs I", 1959; used as a DAG prior by
        Karimi Mamaghan et al., ICML 2024.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import erdos_renyi_prior_table
        >>> t = erdos_renyi_prior_table(3, 0.5)
        >>> np.allclose(np.exp(t.table).sum(1), 1.0)
        True
    """
    d = _check_d(d)
    p = check_scalar(edge_probability, "edge_probability", low=0.0, high=1.0, low_open=True, high_open=True)
    pop = _popcount_table(d)
    return ScoreTable(jnp.asarray(pop * math.log(p) + (d - 1 - pop) * math.log1p(-p)))


def sparsity_prior_table(d: int, penalty: float) -> ScoreTable:
    """Log-prior table penalising the edge count: ``log p(G) = -penalty * |E| + const``.

    Args:
        d: number of nodes, ``1 <= d <= 24``.
        penalty: ``>= 0`` nats per edge.

    Returns:
        :class:`ScoreTable` ``[d, 2**(d-1)]``.

    Raises:
        ValueError: negative ``penalty``.

    References:
        A. Karimi Mamaghan et al., "Challenges and considerations in the evaluation of Bayesian causal discovery", ICML 2024.

    Examples:
        >>> from jaxcore.causal import sparsity_prior_table
        >>> sparsity_prior_table(3, 2.0).table[0].tolist()
        [0.0, -2.0, -2.0, -4.0]
    """
    d = _check_d(d)
    penalty = check_scalar(penalty, "penalty", nonnegative=True)
    return ScoreTable(jnp.asarray(-penalty * _popcount_table(d).astype(float)))


def order_modular_prior_table(d: int) -> ScoreTable:
    """Log-prior table ``-log C(d-1, |pa_j|)`` of Friedman & Koller's order-modular prior.

    Used with a uniform prior over orders: ``p(G) ∝ #orders(G) prod_j C(d-1, |pa_j|)^-1``.

    Args:
        d: number of nodes, ``1 <= d <= 24``.

    Returns:
        :class:`ScoreTable` ``[d, 2**(d-1)]`` (nats).

    Raises:
        ValueError / TypeError: ``d`` not an int in 1..24.

    References:
        N. Friedman, D. Koller, "Being Bayesian about network structure", Machine Learning 2003;
        M. Koivisto, K. Sood, "Exact Bayesian structure discovery in Bayesian networks", JMLR 2004.

    Examples:
        >>> import math
        >>> from jaxcore.causal import order_modular_prior_table
        >>> t = order_modular_prior_table(5)
        >>> math.isclose(float(t.table[0, 1]), -math.log(4), rel_tol=1e-6)
        True
    """
    d = _check_d(d)
    pop = _popcount_table(d)
    lc = np.array([math.log(math.comb(d - 1, k)) for k in range(d)])
    return ScoreTable(jnp.asarray(-lc[pop]))
