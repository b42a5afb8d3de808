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

from . import hipm as _hipm
from . import wow as _wow
from .samples import HierarchicalSample, hierarchical_sample

__all__ = ["TwoSampleResult", "permutation_test", "pool"]


class TwoSampleResult(NamedTuple):
    """Result of :func:`permutation_test`.

    Attributes:
        statistic: scalar, the statistic on the observed split.
        p_value: scalar in (0, 1].
        null_statistics: ``[num_permutations]`` the statistic on each relabelling.
    """

    statistic: Float[Array, ""]
    p_value: Float[Array, ""]
    null_statistics: Float[Array, " B"]


def pool(s1: HierarchicalSample, s2: HierarchicalSample) -> HierarchicalSample:
    """Stack two samples into one of n1 + n2 measures, padding atoms with zero weights if m differs."""
    m = max(s1.m, s2.m)

    def pad(s: HierarchicalSample) -> HierarchicalSample:
        if s.m == m:
            return s
        extra = m - s.m
        first = s.atoms[:, :1]
        atoms = jnp.concatenate([s.atoms, jnp.repeat(first, extra, axis=1)], axis=1)
        weights = jnp.concatenate([s.weights, jnp.zeros((s.n, extra), s.weights.dtype)], axis=1)
        return HierarchicalSample(atoms, weights, False)

    p1, p2 = pad(s1), pad(s2)
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
    num_grid: int = 100,
    num_starts: int = 3,
    max_steps: int = 200,
    outer: Literal["exact", "sinkhorn"] = "exact",
) -> TwoSampleResult:
    """Permutation test of Q1 = Q2 from two hierarchical samples; relabellings vmapped.

    Args:
        key: PRNG key for the relabellings (and nothing else).
        sample1: :class:`HierarchicalSample` or atoms ``[n1, m1]``.
        sample2: likewise ``[n2, m2]``.
        statistic: "dlip" (HIPM d_lip on ``interval``), "wow" (WoW_p, exact 1-D
            inner costs) or "lower_bound" (W1 between the laws of the means).
        num_permutations: B >= 1 relabellings.
        interval: ``(a, b)`` containing every atom; required for "dlip".
        p: WoW order (static).
        num_grid, num_starts, max_steps: d_lip settings (see :func:`jaxcore.ipm.dlip`).
        outer: WoW outer solver, "exact" (host callback, one call per
            relabelling) or "sinkhorn".

    Returns:
        :class:`TwoSampleResult` (statistic, p-value, null statistics).

    Raises:
        ValueError: unknown statistic, missing interval for "dlip",
            num_permutations < 1, num_grid < 1, num_starts < 1, max_steps < 0,
            or invalid samples.
        TypeError: num_grid, num_starts or max_steps not a Python int.

    References:
        Catalano & Lavenant, ICML 2024, Section 6.
    """
    if statistic not in ("dlip", "wow", "lower_bound"):
        raise ValueError(f"statistic must be 'dlip', 'wow' or 'lower_bound', got {statistic!r}")
    if isinstance(num_permutations, bool) or not isinstance(num_permutations, int) or num_permutations < 1:
        raise ValueError(f"num_permutations must be a positive int, got {num_permutations!r}")
    if outer not in ("exact", "sinkhorn"):
        raise ValueError(f"outer must be 'exact' or 'sinkhorn', got {outer!r}")
    p = _wow._check_p(p)
    num_grid = _hipm._check_int(num_grid, "num_grid", 1)
    num_starts = _hipm._check_int(num_starts, "num_starts", 1)
    max_steps = _hipm._check_int(max_steps, "max_steps", 0)
    if statistic == "dlip":
        if interval is None:
            raise ValueError("statistic='dlip' needs interval=(a, b) containing every atom")
        s1 = _hipm._validate(sample1, interval[0], interval[1], "sample1")
        s2 = _hipm._validate(sample2, interval[0], interval[1], "sample2")
    else:
        s1 = hierarchical_sample(sample1, max_dim=1, name="sample1")
        s2 = hierarchical_sample(sample2, max_dim=1, name="sample2")
        s1, s2 = _wow._squeeze(s1), _wow._squeeze(s2)
    pooled = pool(s1, s2)
    a, b = (0.0, 1.0) if interval is None else (float(interval[0]), float(interval[1]))
    return _permutation_core(
        key, pooled, s1.n, statistic, num_permutations, a, b, int(num_grid), int(num_starts), int(max_steps),
        float(p), outer,
    )


@partial(jax.jit, static_argnums=tuple(range(2, 12)))
def _permutation_core(
    key: PRNGKeyArray, pooled: HierarchicalSample, n1: int, statistic: str, num_permutations: int,
    a: float, b: float, num_grid: int, num_starts: int, max_steps: int, p: float, outer: str,
) -> TwoSampleResult:
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
        cost = _wow._inner_exact(pooled, pooled, p)

        def stat(perm: Array) -> Array:
            c = cost[perm[:n1]][:, perm[n1:]]
            if outer == "exact":
                total = _wow._exact_outer(c)
            else:
                m1, m2 = c.shape
                total = _wow._entropic_cost(c, jnp.full((m1,), 1.0 / m1, c.dtype), jnp.full((m2,), 1.0 / m2, c.dtype),
                                            1e-2, 2000)
            return jnp.maximum(total, 0.0) ** (1.0 / p)

    else:
        means = pooled.means()

        def stat(perm: Array) -> Array:
            mm = means[perm]
            return _hipm.w1_empirical(mm[:n1], mm[n1:])

    observed = stat(identity)
    null = jax.vmap(stat)(perms)
    p_value = (1.0 + jnp.sum(null >= observed * (1 - 1e-6))) / (1.0 + num_permutations)
    return TwoSampleResult(statistic=observed, p_value=p_value, null_statistics=null)
