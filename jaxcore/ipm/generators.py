"""Samplers of hierarchical samples: Dirichlet processes (three approximations) and Gaussian models.

A Dirichlet process DP(alpha, P0) is approximated by a measure with N atoms:

- Blackwell-MacQueen urn: X_1 ~ P0, then X_{k+1} is a fresh draw from P0 with
  probability alpha / (alpha + k), else a copy of a uniformly chosen X_l, l <= k;
  the measure is (1/N) sum_k delta_{X_k} (the empirical measure of N draws
  from P ~ DP). Coupling error E W1 <= sqrt(alpha/(alpha+1)) pi / (8 sqrt(N))
  for P0 = U[0, 1] (see :func:`dirichlet_process_approximation_bounds` for the derivations).
- Finite Dirichlet: weights ~ Dirichlet(alpha/N, ..., alpha/N), atoms iid P0.
  Coupling error E W1 <= pi / (8 sqrt(N)) for P0 = U[0, 1].
- Truncated stick-breaking: v_k ~ Beta(1, alpha), w_k = v_k prod_{l<k}(1 - v_l)
  for k < N and w_N = prod_{l<N}(1 - v_l) (the remaining mass); atoms iid P0.
  Coupling error E W1 <= (alpha/(alpha+1))^N / 3 for P0 = U[0, 1].

A base measure is a sampler ``base(key, shape, dtype) -> atoms`` (see
:func:`uniform_base`, :func:`uniform_mixture_base`).

References:
    D. Blackwell, J. MacQueen. "Ferguson distributions via Polya urn schemes."
    Annals of Statistics, 1973.
    J. Sethuraman. "A constructive definition of Dirichlet priors." Statistica
    Sinica, 1994.
    H. Ishwaran, M. Zarepour. "Exact and approximate sum representations for
    the Dirichlet process." Canadian Journal of Statistics, 2002.
    M. Catalano, H. Lavenant. "Hierarchical Integral Probability Metrics",
    ICML 2024, Section 6 (approximation of the Dirichlet process).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import check_int, check_key, check_scalar, error_if, expected, is_concrete

from ._inputs import float_dtypes

from .samples import HierarchicalSample

__all__ = [
    "BaseSampler",
    "uniform_base",
    "uniform_mixture_base",
    "dirichlet_process_urn",
    "dirichlet_process_finite",
    "dirichlet_process_stick_breaking",
    "hierarchical_gaussian",
    "dirichlet_process_approximation_bounds",
]

BaseSampler = Callable[[PRNGKeyArray, tuple, Any], Array]


@dataclasses.dataclass(frozen=True)
class _Uniform:
    low: float
    high: float

    def __call__(self, key: PRNGKeyArray, shape: tuple, dtype: Any = jnp.float32) -> Array:
        return jax.random.uniform(key, shape, dtype, self.low, self.high)


@dataclasses.dataclass(frozen=True)
class _UniformMixture:
    intervals: tuple[tuple[float, float], ...]
    probs: tuple[float, ...]

    def __call__(self, key: PRNGKeyArray, shape: tuple, dtype: Any = jnp.float32) -> Array:
        iv = np.asarray(self.intervals, np.float64)
        lo, width = iv[:, 0], iv[:, 1] - iv[:, 0]
        logp = np.log(np.maximum(np.asarray(self.probs, np.float64), 1e-300))
        kc, ku = jax.random.split(key)
        c = jax.random.categorical(kc, jnp.asarray(logp), shape=shape)
        u = jax.random.uniform(ku, shape, dtype)
        return (jnp.asarray(lo, dtype)[c] + jnp.asarray(width, dtype)[c] * u).astype(dtype)


def uniform_base(low: float = 0.0, high: float = 1.0) -> BaseSampler:
    """The base measure U[low, high] as a sampler ``base(key, shape, dtype)``.

    The sampler is hashable by value, so generators jit-compile once per base.

    Args:
        low, high: the interval, finite, ``low < high``.

    Returns:
        A sampler ``base(key, shape, dtype=float32) -> atoms`` of the given shape, uniform on [low, high].

    Raises:
        ValueError: ``low >= high`` or a non-finite bound.

    References:
        Catalano & Lavenant, ICML 2024, Section 6 (the DP(1, U[0, 1]) experiments).

    Examples:
        >>> import jax
        >>> x = uniform_base(2.0, 3.0)(jax.random.key(0), (1000,))
        >>> x.shape, bool((x >= 2.0).all() & (x <= 3.0).all())
        ((1000,), True)
    """
    low = check_scalar(low, "low")
    high = check_scalar(high, "high", low=low, low_open=True)
    return _Uniform(low, high)


def uniform_mixture_base(intervals: Sequence[tuple[float, float]], probs: Sequence[float]) -> BaseSampler:
    """A mixture of uniforms sum_c p_c U[lo_c, hi_c] as a sampler (hashable by value).

    Example: the paper's "splitting" base 1/2 U[-1, -3/4] + 1/2 U[3/4, 1] is
    ``uniform_mixture_base([(-1, -0.75), (0.75, 1)], [0.5, 0.5])``.

    Args:
        intervals: ``[C, 2]`` pairs ``(lo_c, hi_c)`` with ``lo_c < hi_c``.
        probs: ``[C]`` non-negative mixture weights summing to one.

    Returns:
        A sampler ``base(key, shape, dtype=float32) -> atoms``.

    Raises:
        ValueError: empty or mismatched lists, lo >= hi, non-finite bounds, negative or
            non-finite probabilities or probabilities not summing to one (within 1e-6).
        TypeError: None or non-numeric lists.

    References:
        Catalano & Lavenant, ICML 2024, Section 6 (the "splitting" pair).

    Examples:
        >>> import jax
        >>> base = uniform_mixture_base([(-1, -0.75), (0.75, 1)], [0.5, 0.5])
        >>> x = base(jax.random.key(0), (1000,))
        >>> bool((abs(x) >= 0.75).all() & (abs(x) <= 1.0).all())
        True
    """
    iv = _host_floats(intervals, "intervals")
    pr = _host_floats(probs, "probs")
    if iv.ndim != 2 or iv.shape[1] != 2 or iv.shape[0] < 1 or pr.shape != (iv.shape[0],):
        raise ValueError(expected("intervals, probs", "shapes [C, 2] and [C] with C >= 1",
                                  f"shapes {iv.shape} and {pr.shape}", raw=True))
    if not np.all(np.isfinite(iv)) or np.any(iv[:, 0] >= iv[:, 1]):
        raise ValueError(expected("intervals", "finite intervals with lo < hi", iv.tolist()))
    if not np.all(np.isfinite(pr)) or np.any(pr < 0) or abs(pr.sum() - 1.0) > 1e-6:
        raise ValueError(expected("probs", "non-negative probabilities that sum to one", pr.tolist()))
    return _UniformMixture(tuple(map(tuple, iv.tolist())), tuple(pr.tolist()))


def _host_floats(x: Any, name: str) -> np.ndarray:
    """A list/array of real numbers as float64 (TypeError in the dialect for None, strings, ragged lists)."""
    try:
        a = np.asarray(x)
    except Exception as exc:  # noqa: BLE001
        raise TypeError(expected(name, "real numbers", type(x).__name__, raw=True)) from exc
    if x is None or a.dtype == np.bool_ or (a.dtype.kind not in "iuf" and a.dtype.name != "bfloat16"):
        raise TypeError(expected(name, "real numbers", x))
    return a.astype(np.float64)


def _check_dirichlet_process_args(
    key: Any, base: Any, alpha: Any, num_measures: Any, num_atoms: Any, dtype: Any, base_shape: str
) -> tuple:
    """Host checks (and, for a traced ``alpha``, a run-time ``error_if``) of the three DP generators.

    Returns ``(key, alpha array, num_measures, num_atoms, compute dtype, result dtype)``.
    """
    key = check_key(key)
    if not callable(base):
        raise TypeError(expected("base", "a sampler base(key, shape, dtype) (e.g. uniform_base())",
                                 type(base).__name__, raw=True))
    num_measures = check_int(num_measures, "num_measures", minimum=1)
    num_atoms = check_int(num_atoms, "num_atoms", minimum=1)
    dtype, out_dtype = float_dtypes(dtype)
    if isinstance(alpha, jax.core.Tracer):
        if alpha.ndim != 0 or not jnp.issubdtype(alpha.dtype, jnp.floating):
            raise TypeError(expected("alpha", "a scalar float", alpha))
        alpha = error_if(jnp.asarray(alpha, dtype), ~(jnp.isfinite(alpha) & (alpha > 0)), "alpha",
                         "a finite number > 0")
    else:
        alpha = jnp.asarray(check_scalar(alpha, "alpha", positive=True), dtype)
    shape = (num_atoms,) if base_shape == "one" else (num_measures, num_atoms)
    try:
        out = jax.eval_shape(lambda k: base(k, shape, dtype), key)
    except Exception as exc:  # noqa: BLE001 - a user's sampler failing is their argument's error
        raise TypeError(expected("base", "a sampler base(key, shape, dtype) -> atoms",
                                 f"{type(exc).__name__}: {exc}"[:200], raw=True)) from exc
    if getattr(out, "shape", None) != shape or not jnp.issubdtype(getattr(out, "dtype", jnp.int32), jnp.floating):
        raise ValueError(expected("base", f"a sampler returning float atoms of the requested shape {shape}",
                                  f"{getattr(out, 'dtype', type(out).__name__)} {getattr(out, 'shape', '')}",
                                  raw=True))
    return key, alpha, num_measures, num_atoms, dtype, out_dtype


# A sample of at most _MEASURE_BUCKET measures is drawn at that many and cut to its first n on the host, so
# one compiled generator serves every n up to it (per base, number of atoms and dtype). The draws do not
# change: the counter-based (partitionable) threefry keys each element by its index, so measure i's atoms
# and weights are the same whatever the number of measures drawn (tests/ipm: bit-identical samples).
_MEASURE_BUCKET = 256


def _draw(program: Callable[[int], HierarchicalSample], n: int, *inputs: Any, base: Any = None) -> HierarchicalSample:
    """``program(n)``, compiled for the bucket's n when ``n`` is below it and every input is concrete.

    ``base``: the sampler of a program that draws all measures' atoms at once (``base(key, (n, N))``); it
    is bucketed only when it is one of this module's, whose draws are element-wise (a user's sampler may
    depend on the whole shape). ``None``: the atoms are drawn measure by measure.
    """
    if (n >= _MEASURE_BUCKET or not jax.config.jax_threefry_partitionable
            or (base is not None and not isinstance(base, (_Uniform, _UniformMixture)))
            or not is_concrete(*inputs)):
        return program(n)
    s = program(_MEASURE_BUCKET)
    atoms, weights = np.asarray(s.atoms)[:n], np.asarray(s.weights)[:n]
    return HierarchicalSample(jnp.asarray(atoms), jnp.asarray(weights), s.uniform)


def _cast(s: HierarchicalSample, dtype: Any) -> HierarchicalSample:
    """Cast a sample drawn in float32 back to a half dtype (rows then sum to one within a few epsilons)."""
    if s.atoms.dtype == dtype:
        return s
    return HierarchicalSample(s.atoms.astype(dtype), s.weights.astype(dtype), s.uniform)


def _urn_one(key: PRNGKeyArray, base: BaseSampler, alpha: Array, num_atoms: int, dtype: Any) -> Array:
    k_new, k_u, k_idx = jax.random.split(key, 3)
    fresh = base(k_new, (num_atoms,), dtype)
    u = jax.random.uniform(k_u, (num_atoms,), dtype)
    v = jax.random.uniform(k_idx, (num_atoms,), dtype)

    def step(buf: Array, k: Array) -> tuple[Array, Array]:
        kf = k.astype(dtype)
        is_new = u[k] * (alpha + kf) < alpha  # probability alpha / (alpha + k); k = 0 always new
        j = jnp.minimum(jnp.floor(v[k] * kf).astype(jnp.int32), jnp.maximum(k - 1, 0))
        x = jnp.where(is_new, fresh[k], buf[j])
        return buf.at[k].set(x), x

    _, xs = jax.lax.scan(step, jnp.zeros((num_atoms,), dtype), jnp.arange(num_atoms))
    return xs


def dirichlet_process_urn(
    key: PRNGKeyArray,
    base: BaseSampler,
    alpha: float | Float[Array, ""],
    num_measures: int,
    num_atoms: int,
    dtype: Any = jnp.float32,
) -> HierarchicalSample:
    """``num_measures`` draws of DP(alpha, base) approximated by the Blackwell-MacQueen urn with N atoms.

    X_1 ~ P0; X_{k+1} = fresh draw ~ P0 w.p. alpha/(alpha+k), else X_J with J
    uniform on {1..k} (a ``lax.scan`` over k); P_i = (1/N) sum_k delta_{X_k}.

    Args:
        key: PRNG key.
        base: base-measure sampler (e.g. :func:`uniform_base`).
        alpha: concentration > 0, finite (a traced alpha is checked at run time through ``error_if``).
        num_measures: n, the number of random measures.
        num_atoms: N, atoms per measure.
        dtype: floating dtype; float16/bfloat16 are sampled in float32 and cast.

    Returns:
        :class:`HierarchicalSample` with atoms ``[n, N]`` and uniform weights.

    Raises:
        ValueError: alpha <= 0 or NaN/inf, num_measures < 1 or num_atoms < 1, a base whose
            atoms are not float of the requested shape.
        TypeError: a key that is not a PRNG key, a base that is not callable (or fails),
            non-int counts, a dtype that is not floating.

    References:
        Blackwell & MacQueen, Ann. Statist. 1973.

    Examples:
        >>> import jax
        >>> s = dirichlet_process_urn(jax.random.key(0), uniform_base(), 1.0, 3, 5)
        >>> s.atoms.shape, s.uniform
        ((3, 5), True)
    """
    key, alpha, num_measures, num_atoms, dtype, out_dtype = _check_dirichlet_process_args(
        key, base, alpha, num_measures, num_atoms, dtype, "one")
    return _cast(_draw(lambda n: _urn_jit(key, alpha, base, n, num_atoms, dtype), num_measures, key, alpha),
                 out_dtype)


@partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _urn_jit(key: PRNGKeyArray, alpha: Array, base: BaseSampler, n: int, num_atoms: int, dtype: Any):
    keys = jax.random.split(key, n)
    atoms = jax.vmap(lambda k: _urn_one(k, base, alpha, num_atoms, dtype))(keys)
    return HierarchicalSample(atoms, jnp.full((n, num_atoms), 1.0 / num_atoms, dtype), True)


def dirichlet_process_finite(
    key: PRNGKeyArray,
    base: BaseSampler,
    alpha: float | Float[Array, ""],
    num_measures: int,
    num_atoms: int,
    dtype: Any = jnp.float32,
) -> HierarchicalSample:
    """``num_measures`` draws of the finite Dirichlet approximation of DP(alpha, base) with N atoms.

    P = sum_k w_k delta_{X_k}, w ~ Dirichlet(alpha/N, ..., alpha/N), X_k iid P0.

    Args:
        key, base, alpha, num_measures, num_atoms, dtype: as in :func:`dirichlet_process_urn`.

    Returns:
        :class:`HierarchicalSample` with atoms and weights ``[n, N]``.

    Raises:
        ValueError / TypeError: as :func:`dirichlet_process_urn`.

    References:
        Ishwaran & Zarepour, Canad. J. Statist. 2002.

    Examples:
        >>> import jax
        >>> s = dirichlet_process_finite(jax.random.key(0), uniform_base(), 1.0, 3, 5)
        >>> s.weights.shape, [round(float(w), 4) for w in s.weights.sum(1)]
        ((3, 5), [1.0, 1.0, 1.0])
    """
    key, alpha, num_measures, num_atoms, dtype, out_dtype = _check_dirichlet_process_args(
        key, base, alpha, num_measures, num_atoms, dtype, "all")
    return _cast(_draw(lambda n: _finite_jit(key, alpha, base, n, num_atoms, dtype), num_measures, key, alpha,
                       base=base),
                 out_dtype)


@partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _finite_jit(key: PRNGKeyArray, alpha: Array, base: BaseSampler, n: int, num_atoms: int, dtype: Any):
    k_w, k_x = jax.random.split(key)
    conc = jnp.full((num_atoms,), alpha / num_atoms, dtype)
    weights = jax.random.dirichlet(k_w, conc, (n,), dtype)
    atoms = base(k_x, (n, num_atoms), dtype)
    return HierarchicalSample(atoms, weights, False)


def dirichlet_process_stick_breaking(
    key: PRNGKeyArray,
    base: BaseSampler,
    alpha: float | Float[Array, ""],
    num_measures: int,
    num_atoms: int,
    dtype: Any = jnp.float32,
) -> HierarchicalSample:
    """``num_measures`` draws of DP(alpha, base) by stick-breaking truncated at N atoms.

    v_k ~ Beta(1, alpha); w_k = v_k prod_{l<k} (1 - v_l) for k < N and
    w_N = prod_{l<N} (1 - v_l), so the weights sum to one; X_k iid P0.
    (v_k by inversion, 1 - v_k = U_k^(1/alpha); products accumulated in log space.)

    Args:
        key, base, alpha, num_measures, num_atoms, dtype: as in :func:`dirichlet_process_urn`.

    Returns:
        :class:`HierarchicalSample` with atoms and weights ``[n, N]``.

    Raises:
        ValueError / TypeError: as :func:`dirichlet_process_urn`.

    References:
        Sethuraman, Statistica Sinica 1994.

    Examples:
        >>> import jax
        >>> s = dirichlet_process_stick_breaking(jax.random.key(0), uniform_base(), 1.0, 3, 5)
        >>> s.weights.shape, [round(float(w), 4) for w in s.weights.sum(1)]
        ((3, 5), [1.0, 1.0, 1.0])
    """
    key, alpha, num_measures, num_atoms, dtype, out_dtype = _check_dirichlet_process_args(
        key, base, alpha, num_measures, num_atoms, dtype, "all")
    return _cast(_draw(lambda n: _stick_jit(key, alpha, base, n, num_atoms, dtype), num_measures, key, alpha,
                       base=base),
                 out_dtype)


@partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _stick_jit(key: PRNGKeyArray, alpha: Array, base: BaseSampler, n: int, num_atoms: int, dtype: Any):
    k_v, k_x = jax.random.split(key)
    # v ~ Beta(1, alpha) by inversion: 1 - v = U^(1/alpha), so log(1 - v) = log(U) / alpha exactly
    u = jax.random.uniform(k_v, (n, num_atoms), dtype, minval=jnp.finfo(dtype).tiny, maxval=1.0)
    log_one_minus_v = jnp.log(u) / alpha
    v = -jnp.expm1(log_one_minus_v)
    v = v.at[:, -1].set(1.0)  # the last atom takes the remaining mass
    log_rest = jnp.cumsum(log_one_minus_v[:, :-1], axis=1)
    log_prefix = jnp.concatenate([jnp.zeros((n, 1), dtype), log_rest], axis=1)
    weights = v * jnp.exp(log_prefix)
    weights = weights / jnp.sum(weights, axis=1, keepdims=True)
    atoms = base(k_x, (n, num_atoms), dtype)
    return HierarchicalSample(atoms, weights, False)


def hierarchical_gaussian(
    key: PRNGKeyArray,
    num_measures: int,
    num_atoms: int,
    *,
    mean: float = 0.0,
    mean_scale: float = 1.0,
    scale: float = 1.0,
    log_scale_sd: float = 0.0,
    dim: int | None = None,
    dtype: Any = jnp.float32,
) -> HierarchicalSample:
    """n random Gaussian measures N(mu_i, sigma_i^2 I), each observed through m draws.

    mu_i ~ N(mean, mean_scale^2 I); log sigma_i ~ N(log scale, log_scale_sd^2);
    x_ij ~ N(mu_i, sigma_i^2 I); P_i = (1/m) sum_j delta_{x_ij}.

    Args:
        key: PRNG key.
        num_measures: n, the number of random measures.
        num_atoms: m, the draws (atoms) per measure.
        mean, mean_scale: location and spread (>= 0) of the random means.
        scale, log_scale_sd: typical standard deviation (> 0) and its log-normal spread (>= 0).
        dim: None for atoms ``[n, m]`` on R, else d >= 1 for atoms ``[n, m, d]``.
        dtype: floating dtype; float16/bfloat16 are sampled in float32 and cast.

    Every scale is a concrete Python/NumPy number (NaN and inf are refused).

    Returns:
        :class:`HierarchicalSample` with uniform weights.

    Raises:
        ValueError: num_measures, num_atoms or dim < 1, or scales out of range or NaN/inf.
        TypeError: a key that is not a PRNG key, non-int counts, traced scales, a dtype that
            is not floating.

    References:
        Catalano & Lavenant, ICML 2024, Section 6 (hierarchical Gaussian models).

    Examples:
        >>> import jax
        >>> s = hierarchical_gaussian(jax.random.key(0), 4, 3, dim=2)
        >>> s.atoms.shape, s.uniform
        ((4, 3, 2), True)
    """
    key = check_key(key)
    num_measures = check_int(num_measures, "num_measures", minimum=1)
    num_atoms = check_int(num_atoms, "num_atoms", minimum=1)
    if dim is not None:
        dim = check_int(dim, "dim", minimum=1)
    mean = check_scalar(mean, "mean")
    mean_scale = check_scalar(mean_scale, "mean_scale", nonnegative=True)
    scale = check_scalar(scale, "scale", positive=True)
    log_scale_sd = check_scalar(log_scale_sd, "log_scale_sd", nonnegative=True)
    dtype, out_dtype = float_dtypes(dtype)
    params = jnp.asarray([mean, mean_scale, scale, log_scale_sd], dtype)
    return _cast(_draw(lambda n: _gaussian_jit(key, params, n, num_atoms, dim, dtype), num_measures, key),
                 out_dtype)


@partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _gaussian_jit(key: PRNGKeyArray, params: Array, n: int, m: int, dim: int | None, dtype: Any):
    mean, mean_scale, scale, log_scale_sd = params[0], params[1], params[2], params[3]
    d = 1 if dim is None else dim
    k_mu, k_s, k_x = jax.random.split(key, 3)
    mu = mean + mean_scale * jax.random.normal(k_mu, (n, 1, d), dtype)
    sigma = scale * jnp.exp(log_scale_sd * jax.random.normal(k_s, (n, 1, 1), dtype))
    x = mu + sigma * jax.random.normal(k_x, (n, m, d), dtype)
    if dim is None:
        x = x[..., 0]
    return HierarchicalSample(x, jnp.full((n, m), 1.0 / m, dtype), True)


def dirichlet_process_approximation_bounds(alpha: float, num_atoms: Any) -> dict[str, np.ndarray]:
    """Analytic upper bounds on WoW_1 (hence on d_lip) between DP(alpha, U[0, 1]) and its N-atom approximations.

    Each bound is E W1(P, P_N) for an explicit coupling of P ~ DP(alpha, U[0, 1])
    with its approximation P_N, which bounds WoW_1(law P, law P_N) and so
    d_lip <= WoW_1 (Catalano & Lavenant, ICML 2024). The three formulae are the
    ones the implementation issue lists for the paper's Section 6 experiment;
    the derivations below are this module's own (the paper is not quoted for
    them), each using, for the empirical measure H_N of N iid draws from a law
    with cdf F on [0, 1], E W1(law, H_N) = int E|F_N - F| <= N^{-1/2} int sqrt(F (1 - F))
    (Cauchy-Schwarz), and int_0^1 sqrt(t (1 - t)) dt = pi / 8:

    - urn: sqrt(alpha/(alpha+1)) * pi / (8 sqrt(N)). The urn's N values are
      exchangeable with de Finetti measure DP(alpha, U[0, 1]), i.e. N iid draws
      from P ~ DP; couple P_N with that P. Then E W1(P, P_N) <= N^{-1/2}
      int E sqrt(F(1-F)) <= N^{-1/2} int sqrt(E F(1-F)) (Jensen), with
      E F(t)(1 - F(t)) = alpha/(alpha+1) t(1-t) since F(t) ~ Beta(alpha t, alpha(1-t)).
    - finite Dirichlet: pi / (8 sqrt(N)), for every alpha. Given its atoms
      X_1..X_N, Dirichlet(alpha/N, ..., alpha/N) weights make P_N ~ DP(alpha, H_N)
      with H_N = (1/N) sum_k delta_{X_k}. Write P and P_N by stick-breaking with
      the same sticks and atoms (theta_k, theta'_k) drawn iid from an optimal
      coupling of U[0, 1] and H_N: E W1(P, P_N) <= E sum_k w_k |theta_k - theta'_k|
      = E W1(U[0, 1], H_N) <= pi / (8 sqrt(N)).
    - stick-breaking: (alpha/(alpha+1))^N / 3. Same sticks and atoms as P; the
      truncation moves the mass sum_{k>N} w_k (expectation (alpha/(alpha+1))^N)
      onto atom N, each unit an expected distance E|X - Y| = 1/3 (X, Y iid U[0, 1]).

    Args:
        alpha: concentration > 0.
        num_atoms: N (scalar or array).

    Returns:
        dict with keys "urn", "finite", "stick_breaking" of float64 arrays shaped like N.

    Raises:
        ValueError: alpha <= 0 or NaN/inf, N < 1 or not an integer.
        TypeError: non-numeric N.

    References:
        Catalano & Lavenant, ICML 2024, Section 6 (the experiment these bounds accompany).
        E. del Barrio, E. Gine, C. Matran. "Central limit theorems for the
        Wasserstein distance between the empirical and the true distributions."
        Annals of Probability, 1999 (E W1(F, F_N) <= N^{-1/2} int sqrt(F(1-F))).
        Sethuraman, Statistica Sinica 1994 (stick-breaking).

    Examples:
        >>> b = dirichlet_process_approximation_bounds(1.0, [1, 4])
        >>> [round(float(v), 4) for v in b["stick_breaking"]], [round(float(v), 4) for v in b["finite"]]
        ([0.1667, 0.0208], [0.3927, 0.1963])
    """
    alpha = check_scalar(alpha, "alpha", positive=True)
    n = _host_floats(num_atoms, "num_atoms")
    if n.size == 0 or not np.all(np.isfinite(n)) or np.any(n < 1) or np.any(n != np.round(n)):
        raise ValueError(expected("num_atoms", "values N >= 1 that are integers", num_atoms))
    r = alpha / (alpha + 1.0)
    return {
        "urn": np.sqrt(r) * np.pi / (8.0 * np.sqrt(n)),
        "finite": np.pi / (8.0 * np.sqrt(n)),
        "stick_breaking": r**n / 3.0,
    }
