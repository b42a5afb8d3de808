"""How far a finite approximation of a Dirichlet process is from the process, measured by d_lip.

Catalano & Lavenant's Section 6 experiment: draw n random measures from DP(alpha, P0) by each of
the three N-atom constructions (Blackwell-MacQueen urn, finite Dirichlet, truncated
stick-breaking) and n from a fine stick-breaking reference (``num_reference_atoms`` atoms), and
estimate d_lip between the two hierarchical samples. The estimator is biased upwards at finite n
(two independent reference samples are not at distance 0), so the same estimate between two
reference samples, the noise floor, is returned beside it: an approximation error is resolved
only where it stands clearly above the floor. :func:`dirichlet_process_approximation_bounds`
gives the analytic upper bounds these estimates are checked against (estimate <= bound + floor).

References:
    M. Catalano, H. Lavenant. "Hierarchical Integral Probability Metrics: A distance on random
    probability measures with low sample complexity." ICML 2024, Section 6.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import check_int, check_key, check_scalar, expected

from .generators import (
    BaseSampler,
    dirichlet_process_finite,
    dirichlet_process_stick_breaking,
    dirichlet_process_urn,
)
from .hipm import MAX_STEPS, NUM_GRID, NUM_STARTS, dlip
from .samples import pad_atoms

__all__ = ["ApproximationError", "dirichlet_process_approximation_error"]

_METHODS = (("urn", dirichlet_process_urn), ("finite", dirichlet_process_finite),
            ("stick_breaking", dirichlet_process_stick_breaking))


class ApproximationError(NamedTuple):
    """Result of :func:`dirichlet_process_approximation_error`, one entry per repetition (``R``).

    Attributes:
        urn: ``float32[R]`` d_lip between the urn approximation and the reference.
        finite: ``float32[R]`` the same for the finite-Dirichlet approximation.
        stick_breaking: ``float32[R]`` the same for stick-breaking truncated at N atoms.
        noise_floor: ``float32[R]`` d_lip between a second reference sample and the first.

    Examples:
        >>> ApproximationError._fields
        ('urn', 'finite', 'stick_breaking', 'noise_floor')
    """

    urn: Float[Array, " R"]
    finite: Float[Array, " R"]
    stick_breaking: Float[Array, " R"]
    noise_floor: Float[Array, " R"]


def dirichlet_process_approximation_error(
    key: PRNGKeyArray,
    base: BaseSampler,
    alpha: float,
    num_measures: int,
    num_atoms: int,
    *,
    interval: tuple[float, float],
    num_reference_atoms: int = 1000,
    num_reps: int = 1,
    num_grid: int = NUM_GRID,
    num_starts: int = NUM_STARTS,
    max_steps: int = MAX_STEPS,
) -> ApproximationError:
    """d_lip between DP(alpha, base) and its three N-atom approximations, with the estimator's noise floor.

    For each of ``num_reps`` repetitions (``jax.random.split(key, num_reps)``; each repetition's
    key split in three: reference, approximations, second reference): a reference sample of
    ``num_measures`` stick-breaking draws with ``num_reference_atoms`` atoms; one sample of
    ``num_measures`` draws by each approximation with ``num_atoms`` atoms (all three from the
    same key), zero-weight padded to ``num_reference_atoms`` atoms so that one compiled d_lip
    serves every N; d_lip of each against the reference; and d_lip between a second reference
    sample and the first (the noise floor). A Python loop over the jitted generators and
    :func:`dlip` (no program of its own): the cost is ``4 * num_reps`` d_lip calls.

    Args:
        key: PRNG key.
        base: the base measure's sampler (e.g. :func:`uniform_base`), inside ``interval``.
        alpha: concentration > 0.
        num_measures: n, random measures per sample (>= 1).
        num_atoms: N, atoms of each approximation (1 <= N <= ``num_reference_atoms``).
        interval: ``(a, b)`` containing the base's support (d_lip's interval).
        num_reference_atoms: atoms of the stick-breaking reference.
        num_reps: R independent repetitions (>= 1).
        num_grid, num_starts, max_steps: d_lip's settings (:func:`dlip`).

    Returns:
        :class:`ApproximationError` of ``float32[R]`` arrays; average over R for the estimate.

    Raises:
        TypeError: ``key`` not a PRNG key; non-integer counts.
        ValueError: ``alpha`` not positive and finite; counts below 1; ``num_atoms`` above
            ``num_reference_atoms``; invalid d_lip settings (as :func:`dlip`).

    References:
        Catalano & Lavenant, ICML 2024, Section 6.

    Examples:
        >>> import jax
        >>> from jaxcore.ipm import uniform_base
        >>> err = dirichlet_process_approximation_error(jax.random.key(0), uniform_base(), 1.0, 16, 2,
        ...     interval=(0.0, 1.0), num_reference_atoms=100, num_grid=20, num_starts=2, max_steps=50)
        >>> bool(err.stick_breaking[0] > err.noise_floor[0])   # two atoms: far from DP(1, U[0, 1])
        True
    """
    check_key(key, "key")
    alpha = check_scalar(alpha, "alpha", positive=True)
    n = check_int(num_measures, "num_measures", minimum=1)
    n_ref = check_int(num_reference_atoms, "num_reference_atoms", minimum=1)
    num_atoms = check_int(num_atoms, "num_atoms", minimum=1)
    if num_atoms > n_ref:
        raise ValueError(expected("num_atoms", f"at most num_reference_atoms = {n_ref}", num_atoms))
    reps = check_int(num_reps, "num_reps", minimum=1)

    def dist(s1, s2):
        return dlip(s1, s2, interval=interval, num_grid=num_grid, num_starts=num_starts, max_steps=max_steps).value

    out: dict[str, list] = {name: [] for name, _ in _METHODS}
    floors = []
    for k in jax.random.split(key, reps):
        k_ref, k_app, k_ref2 = jax.random.split(k, 3)
        ref = dirichlet_process_stick_breaking(k_ref, base, alpha, n, n_ref)
        for name, draw in _METHODS:
            out[name].append(dist(pad_atoms(draw(k_app, base, alpha, n, num_atoms), n_ref), ref))
        floors.append(dist(dirichlet_process_stick_breaking(k_ref2, base, alpha, n, n_ref), ref))
    return ApproximationError(*(jnp.stack(out[name]) for name, _ in _METHODS), jnp.stack(floors))
