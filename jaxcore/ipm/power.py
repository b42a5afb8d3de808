"""Power (or size) of the permutation two-sample test versus the number of measures per side.

How many random measures a test needs to tell two laws apart is the practical face of a distance's
sample complexity: :func:`permutation_test_power` draws ``num_datasets`` independent pairs of
hierarchical samples at each size n from a user's sampler, runs :func:`permutation_test` on each,
and reports the fraction rejected at a level (the power when the laws differ, the size when they
are equal).

References:
    M. Catalano, H. Lavenant. "Hierarchical Integral Probability Metrics: A distance on random
    probability measures with low sample complexity." ICML 2024, Section 6.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxcore._util import check_int, check_key, check_scalar, expected

from .samples import HierarchicalSample
from .two_sample import permutation_test

__all__ = ["PowerResult", "permutation_test_power"]


class PowerResult(NamedTuple):
    """Result of :func:`permutation_test_power` (``N`` sizes, ``R`` data sets per size).

    Attributes:
        num_measures: ``int32[N]`` the sizes n.
        rejection_rate: ``float32[N]`` fraction of the data sets whose p-value is ``<= level``.
        p_values: ``float32[N, R]`` every test's p-value.

    Examples:
        >>> PowerResult._fields
        ('num_measures', 'rejection_rate', 'p_values')
    """

    num_measures: Int[Array, " N"]
    rejection_rate: Float[Array, " N"]
    p_values: Float[Array, "N R"]


def permutation_test_power(
    key: PRNGKeyArray,
    draw_pair: Callable[[PRNGKeyArray, int], tuple[HierarchicalSample, HierarchicalSample]],
    num_measures: Sequence[int],
    *,
    num_datasets: int,
    level: float = 0.05,
    **test_kwargs: Any,
) -> PowerResult:
    """Rejection rate of :func:`permutation_test` at ``level`` versus n, over independent data sets.

    For each n in ``num_measures`` and each data set r: ``k = fold_in(fold_in(key, n), r)``, split
    in two, ``draw_pair(k_data, n)`` draws the two samples and ``permutation_test(k_test, ...)``
    tests them. Data sets at different n are independent; every statistic run with the same
    ``key`` sees the same data sets (a paired comparison of statistics). A Python loop over
    the jitted test (no program of its own): ``N * R`` tests.

    Args:
        key: PRNG key.
        draw_pair: ``draw_pair(key, n) -> (sample1, sample2)``, n measures per side (e.g. two
            :func:`dirichlet_process_stick_breaking` draws with different bases).
        num_measures: the sizes n, positive ints.
        num_datasets: R >= 1 data sets per size.
        level: the test's level in (0, 1); a data set is rejected when its p-value is ``<= level``.
        **test_kwargs: passed to :func:`permutation_test` (``statistic``, ``num_permutations``,
            ``interval``, d_lip's settings, ...).

    Returns:
        :class:`PowerResult`; with B permutations the rates move in steps of 1 / R and a level
        below ``1 / (B + 1)`` can never reject.

    Raises:
        TypeError: ``key`` not a PRNG key; ``draw_pair`` not callable; non-integer sizes.
        ValueError: sizes below 1, ``num_datasets < 1``, ``level`` outside (0, 1); invalid test
            arguments (as :func:`permutation_test`).

    References:
        Catalano & Lavenant, ICML 2024, Section 6 (two-sample testing).

    Examples:
        >>> import jax
        >>> from jaxcore.ipm import dirichlet_process_stick_breaking, uniform_base
        >>> def pair(k, n):  # DP(1, U[0, 1/2]) vs DP(1, U[1/2, 1]): different mean measures
        ...     k1, k2 = jax.random.split(k)
        ...     return (dirichlet_process_stick_breaking(k1, uniform_base(0.0, 0.5), 1.0, n, 20),
        ...             dirichlet_process_stick_breaking(k2, uniform_base(0.5, 1.0), 1.0, n, 20))
        >>> res = permutation_test_power(jax.random.key(0), pair, [4, 16], num_datasets=4, level=0.1,
        ...                              statistic="lower_bound", num_permutations=19)
        >>> res.rejection_rate.tolist()   # the power grows with the number of measures per side
        [0.5, 1.0]
    """
    check_key(key, "key")
    if not callable(draw_pair):
        raise TypeError(expected("draw_pair", "a function (key, n) -> (sample1, sample2)", draw_pair))
    if isinstance(num_measures, (str, bytes)) or not hasattr(num_measures, "__iter__"):
        raise TypeError(expected("num_measures", "a sequence of positive ints", num_measures))
    ns = [check_int(n, f"num_measures[{i}]", minimum=1) for i, n in enumerate(num_measures)]
    if not ns:
        raise ValueError(expected("num_measures", "a non-empty sequence of positive ints", num_measures))
    reps = check_int(num_datasets, "num_datasets", minimum=1)
    level = check_scalar(level, "level", low=0.0, high=1.0, low_open=True, high_open=True)
    p_values = []
    for n in ns:
        row = []
        for r in range(reps):
            k_data, k_test = jax.random.split(jax.random.fold_in(jax.random.fold_in(key, n), r))
            s1, s2 = draw_pair(k_data, n)
            row.append(permutation_test(k_test, s1, s2, **test_kwargs).p_value)
        p_values.append(jnp.stack(row))
    pv = jnp.stack(p_values)
    rate = jnp.asarray(np.mean(np.asarray(pv, np.float64) <= level, axis=1), jnp.float32)
    return PowerResult(jnp.asarray(ns, jnp.int32), rate, pv)
