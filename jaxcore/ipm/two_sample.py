"""Permutation two-sample test for laws of random measures with the HIPM or WoW statistic.

H0: Q1 = Q2. The n1 + n2 measures are pooled; the statistic T (d_lip, WoW_p
or the W1 between laws of means) of the observed split is compared with its
values on B random relabellings (vmapped), and

    p-value = (1 + #{b : T_b >= T}) / (1 + B),

which is a valid (super-uniform) p-value under exchangeability. Work that
does not depend on the split is done once: the d_lip features of every
measure, or the full matrix of inner costs W_p^p for WoW.

References:
    M. Catalano, H. Lavenant. "Hierarchical Integral Probability Metrics",
    ICML 2024, Section 6 (two-sample testing).
    E. L. Lehmann, J. P. Romano. "Testing Statistical Hypotheses", 2005,
    Section 15.2 (permutation tests).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import Progress, ProgressArg, check_choice, check_int, check_key, check_progress, check_scalar, expected

from . import hipm as _hipm
from . import wasserstein as _wasserstein
from .samples import HierarchicalSample, _pad, check_interval, hierarchical_sample

__all__ = ["TwoSampleResult", "permutation_test", "pool"]


class TwoSampleResult(NamedTuple):
    """Result of :func:`permutation_test`.

    Attributes:
        statistic: scalar, the statistic on the observed split.
        p_value: scalar in (0, 1].
        null_statistics: ``[num_permutations]`` the statistic on each relabelling.

    Examples:
        >>> TwoSampleResult._fields
        ('statistic', 'p_value', 'null_statistics')
    """

    statistic: Float[Array, ""]
    p_value: Float[Array, ""]
    null_statistics: Float[Array, " B"]


def pool(sample1: HierarchicalSample | Any, sample2: HierarchicalSample | Any) -> HierarchicalSample:
    """Stack two samples into one of n1 + n2 measures, padding atoms with zero weights if m differs.

    Args:
        sample1: :class:`HierarchicalSample` or atoms ``[n1, m1(, d)]``.
        sample2: likewise ``[n2, m2(, d)]``, same d.

    Returns:
        :class:`HierarchicalSample` with ``n1 + n2`` measures of ``max(m1, m2)`` atoms
        (rows ``:n1`` are sample1), in the common floating dtype.

    Raises:
        ValueError / TypeError: invalid samples or samples in different dimensions.

    References:
        Catalano & Lavenant, ICML 2024, Section 6 (the pooled sample of the permutation test).

    Examples:
        >>> import jax.numpy as jnp
        >>> s = pool(jnp.array([[0.0, 1.0]]), jnp.array([[2.0]]))
        >>> s.atoms.tolist(), s.weights.tolist()
        ([[0.0, 1.0], [2.0, 2.0]], [[0.5, 0.5], [1.0, 0.0]])
    """
    s1 = hierarchical_sample(sample1, name="sample1")
    s2 = hierarchical_sample(sample2, name="sample2")
    if s1.dim != s2.dim or s1.atoms.ndim != s2.atoms.ndim:
        raise ValueError(expected("sample1, sample2", "measures in the same dimension d",
                                  f"atoms {tuple(s1.atoms.shape)} and {tuple(s2.atoms.shape)}", raw=True))
    return _pool_jit(s1, s2)


@jax.jit
def _pool_jit(s1: HierarchicalSample, s2: HierarchicalSample) -> HierarchicalSample:
    return _pool(s1, s2)


def _pool(s1: HierarchicalSample, s2: HierarchicalSample) -> HierarchicalSample:
    m = max(s1.m, s2.m)
    p1, p2 = _pad(s1, m), _pad(s2, m)
    dtype = jnp.result_type(p1.atoms.dtype, p2.atoms.dtype)
    return HierarchicalSample(
        jnp.concatenate([p1.atoms.astype(dtype), p2.atoms.astype(dtype)]),
        jnp.concatenate([p1.weights.astype(dtype), p2.weights.astype(dtype)]),
        p1.uniform and p2.uniform,
    )


def permutation_test(
    key: PRNGKeyArray,
    sample1: HierarchicalSample | Any,
    sample2: HierarchicalSample | Any,
    *,
    statistic: Literal["dlip", "wow", "lower_bound"] = "dlip",
    num_permutations: int = 200,
    interval: tuple[float, float] | None = None,
    p: float = 1.0,
    num_grid: int = _hipm.NUM_GRID,
    num_starts: int = _hipm.NUM_STARTS,
    max_steps: int = _hipm.MAX_STEPS,
    outer: Literal["exact", "sinkhorn"] = "exact",
    progress: ProgressArg = False,
) -> TwoSampleResult:
    """Permutation test of Q1 = Q2 from two hierarchical samples; relabellings vmapped.

    p-value = (1 + #{b : T_b >= T}) / (1 + B) for the statistic T on the observed
    split and T_1..T_B on B uniform relabellings of the pooled n1 + n2 measures.

    Args:
        key: PRNG key for the relabellings (and nothing else).
        sample1: :class:`HierarchicalSample` or atoms ``[n1, m1]``.
        sample2: likewise ``[n2, m2]``.
        statistic: "dlip" (HIPM d_lip on ``interval``), "wow" (WoW_p, exact 1-D
            inner costs) or "lower_bound" (W1 between the laws of the means).
        num_permutations: B >= 1 relabellings.
        interval: ``(a, b)`` containing every atom; required for "dlip".
        p: WoW order (static).
        num_grid, num_starts, max_steps: d_lip settings, with the defaults of
            :func:`jaxcore.ipm.dlip` (250 cells, 5 starts, 1000 steps).
        outer: WoW outer solver, "exact" (host callback, one call per
            relabelling) or "sinkhorn". Sharded (the relabellings split over devices by
            ``jax.jit(permutation_test_fn, out_shardings=TwoSampleResult(replicated,
            replicated, NamedSharding(mesh, P(axis))))``): "sinkhorn" and the other statistics run
            each device's relabellings there; "exact"'s callback runs on the host of one device,
            one relabelling after another, so its null statistics come back split but the
            solves do not parallelise.
        progress: ``False`` (default: every relabelling in one vmapped batch), ``True``
            (a progress bar) or ``fn(relabellings_done, {})``; when on, the relabellings run
            in about 20 vmapped chunks, one report after each (the same statistics).

    Returns:
        :class:`TwoSampleResult` (statistic, p-value in (0, 1], ``[num_permutations]``
        null statistics), in the atoms' dtype.

    Raises:
        ValueError: unknown statistic or outer, missing interval for "dlip",
            num_permutations < 1, num_grid < 1, num_starts < 1, max_steps < 0,
            p < 1, or invalid samples.
        TypeError: a key that is not a PRNG key; num_grid, num_starts,
            max_steps or num_permutations not an int; progress neither a bool nor a callable.

    References:
        Catalano & Lavenant, ICML 2024, Section 6; Lehmann & Romano, "Testing
        Statistical Hypotheses", 2005, Section 15.2.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> x = jnp.array([[0.0, 0.1], [0.2, 0.3], [0.1, 0.2]])
        >>> res = permutation_test(jax.random.key(0), x, x + 0.5, statistic="lower_bound", num_permutations=19)
        >>> float(res.statistic), float(res.p_value), res.null_statistics.shape
        (0.5, 0.1, (19,))
    """
    key = check_key(key)
    statistic = check_choice(statistic, "statistic", ("dlip", "wow", "lower_bound"))
    num_permutations = check_int(num_permutations, "num_permutations", minimum=1)
    outer = check_choice(outer, "outer", ("exact", "sinkhorn"))
    p = check_scalar(p, "p", low=1.0)
    num_grid = check_int(num_grid, "num_grid", minimum=1)
    num_starts = check_int(num_starts, "num_starts", minimum=1)
    max_steps = check_int(max_steps, "max_steps", minimum=0)
    if statistic == "dlip":
        if interval is None:
            raise ValueError(expected("interval", "(a, b) containing every atom (statistic='dlip' needs it)", None))
        a, b = check_interval(interval)
        s1 = _hipm._validate(sample1, a, b, "sample1")
        s2 = _hipm._validate(sample2, a, b, "sample2")
    else:
        a, b = (0.0, 1.0) if interval is None else check_interval(interval)
        s1 = hierarchical_sample(sample1, max_dim=1, name="sample1")
        s2 = hierarchical_sample(sample2, max_dim=1, name="sample2")
        s1, s2 = _wasserstein._squeeze(s1), _wasserstein._squeeze(s2)
    return _permutation_core(
        key, s1, s2, statistic, num_permutations, a, b, num_grid, num_starts, max_steps, p, outer,
        check_progress(progress),
    )


def _chunked_map(fn, xs: Array, progress: ProgressArg, description: str) -> Array:
    """``vmap(fn)(xs)`` in about 20 sequential vmapped chunks with a progress report after each."""
    total = xs.shape[0]
    size = -(-total // min(20, total))
    num_chunks = -(-total // size)
    padded = jnp.concatenate([xs, jnp.broadcast_to(xs[:1], (num_chunks * size - total,) + xs.shape[1:])])
    prog = Progress(progress, total, description, every=size)

    def body(_, chunk_and_index):
        chunk, i = chunk_and_index
        out = jax.vmap(fn)(chunk)
        prog.update(jnp.minimum((i + 1) * size, total) - 1)
        return None, out

    _, out = jax.lax.scan(body, None, (padded.reshape((num_chunks, size) + xs.shape[1:]), jnp.arange(num_chunks)))
    return out.reshape((num_chunks * size,) + out.shape[2:])[:total]


@partial(jax.jit, static_argnums=tuple(range(3, 13)))
def _permutation_core(
    key: PRNGKeyArray, s1: HierarchicalSample, s2: HierarchicalSample, statistic: str, num_permutations: int,
    a: float, b: float, num_grid: int, num_starts: int, max_steps: int, p: float, outer: str,
    progress: ProgressArg = False,
) -> TwoSampleResult:
    pooled, n1 = _pool(s1, s2), s1.n
    n = pooled.n
    perms = jax.vmap(lambda k: jax.random.permutation(k, n))(jax.random.split(key, num_permutations))
    identity = jnp.arange(n)

    if statistic == "dlip":
        feats = _hipm._features(pooled.atoms, pooled.weights, a, b, num_grid)
        starts = _hipm._default_starts(num_starts, num_grid, None, feats.dtype)
        tol = jnp.asarray(1e-7 * (b - a), feats.dtype)

        def stat(perm: Array) -> Array:
            f = feats[perm]
            return _hipm._dlip_from_features(f[:n1], f[n1:], starts, max_steps, tol)[0]

    elif statistic == "wow":
        scaled, _, unit = _wasserstein._scaled(pooled, pooled)  # atoms in [-1, 1]: no overflow of |x - y|^p
        cost = _wasserstein._inner_exact(scaled, scaled, p)

        def stat(perm: Array) -> Array:
            c = cost[perm[:n1]][:, perm[n1:]]
            if outer == "exact":
                total = _wasserstein._exact_outer(c)
            else:
                m1, m2 = c.shape
                total = _wasserstein._entropic_cost(c, jnp.full((m1,), 1.0 / m1, c.dtype),
                                                    jnp.full((m2,), 1.0 / m2, c.dtype), 1e-2, 2000)
            return unit * jnp.maximum(total, 0.0) ** (1.0 / p)

    else:
        means = pooled.means()

        def stat(perm: Array) -> Array:
            mm = means[perm]
            return _hipm._w1_empirical(mm[:n1], mm[n1:])

    observed = stat(identity)
    null = jax.vmap(stat)(perms) if progress is False else _chunked_map(stat, perms, progress, "permutation test")
    p_value = (1.0 + jnp.sum(null >= observed * (1 - 1e-6))) / (1.0 + num_permutations)
    return TwoSampleResult(statistic=observed, p_value=p_value, null_statistics=null)
