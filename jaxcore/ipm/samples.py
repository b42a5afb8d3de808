"""Hierarchical samples: n random probability measures, each with m weighted atoms.

A sample from a law Q of random probability measures is n measures
P_1, ..., P_n ~ Q, each observed through m atoms (exactly, for discrete random
measures such as truncated Dirichlet processes, or as m draws X_ij ~ P_i):

    P_i = sum_j w_ij delta_{x_ij},   w_ij >= 0,   sum_j w_ij = 1.

Atoms are ``[n, m]`` (measures on the line) or ``[n, m, d]`` (measures on
R^d); weights are ``[n, m]``. Variable numbers of atoms per measure are
handled by padding with zero-weight atoms (static shapes under ``jit``).

References:
    M. Catalano, H. Lavenant. "Hierarchical Integral Probability Metrics: A
    distance on random probability measures with low sample complexity."
    ICML 2024, Section 2.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

__all__ = ["HierarchicalSample", "hierarchical_sample", "from_groups"]

_WEIGHT_TOL = 1e-4


class HierarchicalSample(eqx.Module):
    """n random probability measures with m weighted atoms each (a pytree).

    Attributes:
        atoms: ``[n, m]`` (measures on R) or ``[n, m, d]`` (measures on R^d),
            floating point.
        weights: ``[n, m]``, non-negative, each row sums to one. Padding atoms
            carry weight zero.
        uniform: static flag, True when every weight is known to be ``1/m``
            (enables the sorting fast path of the 1-D inner costs).

    Build it with :func:`hierarchical_sample`, which validates the inputs;
    the constructor itself does not check (it is also used under ``jit``).
    """

    atoms: Float[Array, "n m *d"]
    weights: Float[Array, "n m"]
    uniform: bool = eqx.field(static=True, default=False)

    @property
    def n(self) -> int:
        """Number of random measures."""
        return self.atoms.shape[0]

    @property
    def m(self) -> int:
        """Number of atoms per measure (padded)."""
        return self.atoms.shape[1]

    @property
    def dim(self) -> int:
        """Dimension d of the space the measures live on (1 for ``[n, m]`` atoms)."""
        return 1 if self.atoms.ndim == 2 else self.atoms.shape[2]

    def means(self) -> Float[Array, " n"]:
        """The mean of each measure, ``sum_j w_ij x_ij``: ``[n]`` (or ``[n, d]``)."""
        if self.atoms.ndim == 2:
            return jnp.sum(self.weights * self.atoms, axis=1)
        return jnp.einsum("nm,nmd->nd", self.weights, self.atoms)


def _is_concrete(x: Any) -> bool:
    return not isinstance(x, jax.core.Tracer)


def hierarchical_sample(
    atoms: Any,
    weights: Any | None = None,
    *,
    interval: tuple[float, float] | None = None,
    max_dim: int | None = None,
    name: str = "sample",
) -> HierarchicalSample:
    """Validate atoms (and weights) and return a :class:`HierarchicalSample`.

    Passing a :class:`HierarchicalSample` re-validates it (``interval`` and
    ``max_dim`` checks included).

    Args:
        atoms: ``[n, m]`` or ``[n, m, d]`` real array, or a
            :class:`HierarchicalSample`.
        weights: optional ``[n, m]`` non-negative weights summing to one per
            row (tolerance 1e-4); default uniform ``1/m``.
        interval: optional ``(a, b)``: every atom carrying positive weight must
            lie in ``[a, b]`` (required by :func:`jaxcore.ipm.dlip`).
        max_dim: if given, atoms of dimension ``d > max_dim`` are rejected.
        name: the argument's name, used in error messages.

    Returns:
        The validated sample, atoms and weights in the same floating dtype.

    Raises:
        TypeError: non-numeric atoms or weights.
        ValueError: wrong rank or shape, empty sample, non-finite atoms,
            negative weights, rows not summing to one, atoms outside
            ``interval``, or ``d > max_dim``. Under ``jit`` the value checks
            are done with ``eqx.error_if`` (a runtime error, never a NaN).
    """
    if isinstance(atoms, HierarchicalSample):
        if weights is not None:
            raise ValueError(f"{name}: weights given twice (a HierarchicalSample already has weights)")
        atoms, weights, uniform = atoms.atoms, atoms.weights, atoms.uniform
    else:
        uniform = weights is None
    if isinstance(atoms, (list, tuple)):
        atoms = np.asarray(atoms)
    if not hasattr(atoms, "shape") or not hasattr(atoms, "dtype"):
        raise TypeError(f"{name}: atoms must be an array of shape [n, m] or [n, m, d], got {type(atoms).__name__}")
    if not (jnp.issubdtype(atoms.dtype, jnp.floating) or jnp.issubdtype(atoms.dtype, jnp.integer)):
        raise TypeError(f"{name}: atoms must be real numbers, got dtype {atoms.dtype}")
    if atoms.ndim not in (2, 3):
        raise ValueError(
            f"{name}: atoms must have shape [n, m] or [n, m, d], got shape {tuple(atoms.shape)} (ndim {atoms.ndim})"
        )
    n, m = atoms.shape[:2]
    if n < 1 or m < 1 or (atoms.ndim == 3 and atoms.shape[2] < 1):
        raise ValueError(f"{name}: atoms must be non-empty, got shape {tuple(atoms.shape)}")
    if max_dim is not None and atoms.ndim == 3 and atoms.shape[2] > max_dim:
        raise ValueError(
            f"{name}: this estimator supports measures on R^d with d <= {max_dim}, got atoms of shape "
            f"{tuple(atoms.shape)} (d = {atoms.shape[2]})"
        )
    dtype = jnp.result_type(float) if jnp.issubdtype(atoms.dtype, jnp.integer) else atoms.dtype
    dtype = jax.dtypes.canonicalize_dtype(dtype)
    atoms = jnp.asarray(atoms).astype(dtype)
    if weights is None:
        weights = jnp.full((n, m), 1.0 / m, dtype=dtype)
    else:
        if isinstance(weights, (list, tuple)):
            weights = np.asarray(weights)
        if not hasattr(weights, "shape") or not hasattr(weights, "dtype"):
            raise TypeError(f"{name}: weights must be an array of shape [n, m], got {type(weights).__name__}")
        if not (jnp.issubdtype(weights.dtype, jnp.floating) or jnp.issubdtype(weights.dtype, jnp.integer)):
            raise TypeError(f"{name}: weights must be real numbers, got dtype {weights.dtype}")
        if tuple(weights.shape) != (n, m):
            raise ValueError(
                f"{name}: weights must have shape [n, m] = {(n, m)} to match atoms {tuple(atoms.shape)}, "
                f"got {tuple(weights.shape)}"
            )
        weights = jnp.asarray(weights).astype(dtype)

    lo, hi = (None, None) if interval is None else (float(interval[0]), float(interval[1]))
    if interval is not None and not lo < hi:
        raise ValueError(f"interval (a, b) must satisfy a < b, got ({lo}, {hi})")

    if _is_concrete(atoms) and _is_concrete(weights):
        a_np, w_np = np.asarray(atoms), np.asarray(weights)
        if not np.all(np.isfinite(a_np)):
            raise ValueError(f"{name}: atoms must be finite, got {int(np.sum(~np.isfinite(a_np)))} non-finite values")
        if not np.all(np.isfinite(w_np)) or np.any(w_np < 0):
            raise ValueError(f"{name}: weights must be finite and non-negative, got minimum {np.nanmin(w_np)}")
        sums = w_np.sum(axis=1)
        bad = np.abs(sums - 1.0) > _WEIGHT_TOL
        if np.any(bad):
            i = int(np.argmax(bad))
            raise ValueError(
                f"{name}: the weights of each measure must sum to one, row {i} sums to {sums[i]:.6g} "
                f"({int(bad.sum())} rows off by more than {_WEIGHT_TOL})"
            )
        if not uniform and np.all(w_np == w_np.flat[0]) and abs(float(w_np.flat[0]) * m - 1.0) < 1e-6:
            uniform = True
        if interval is not None:
            live = w_np > 0
            vals = a_np[live] if a_np.ndim == 2 else a_np[live].ravel()
            if vals.size and (vals.min() < lo or vals.max() > hi):
                raise ValueError(
                    f"{name}: atoms must lie in the interval [a, b] = [{lo}, {hi}], got atoms in "
                    f"[{vals.min():.6g}, {vals.max():.6g}]"
                )
    else:
        atoms = eqx.error_if(atoms, ~jnp.all(jnp.isfinite(atoms)), f"{name}: atoms must be finite")
        weights = eqx.error_if(weights, jnp.any(weights < 0), f"{name}: weights must be non-negative")
        weights = eqx.error_if(
            weights,
            jnp.any(jnp.abs(jnp.sum(weights, axis=1) - 1.0) > _WEIGHT_TOL),
            f"{name}: the weights of each measure must sum to one",
        )
        if interval is not None:
            live = weights > 0 if atoms.ndim == 2 else (weights > 0)[..., None]
            outside = live & ((atoms < lo) | (atoms > hi))
            atoms = eqx.error_if(atoms, jnp.any(outside), f"{name}: atoms must lie in [a, b] = [{lo}, {hi}]")
    return HierarchicalSample(atoms=atoms, weights=weights, uniform=uniform)


def from_groups(
    values: Any,
    groups: Any,
    *,
    dtype: Any = np.float32,
) -> tuple[HierarchicalSample, np.ndarray]:
    """Group a flat array of observations into one empirical measure per group.

    Each group g with observations v_1..v_k becomes the measure
    (1/k) sum_i delta_{v_i}; groups are padded to the largest group size with
    zero-weight copies of their first value.

    Args:
        values: ``[N]`` (or ``[N, d]``) observations.
        groups: ``[N]`` group labels (any hashable, sortable values).
        dtype: floating dtype of the result.

    Returns:
        ``(sample, labels)``: a :class:`HierarchicalSample` with ``n`` = number
        of groups and ``m`` = largest group size, and the ``[n]`` group labels
        in sorted order.

    Raises:
        ValueError: mismatched lengths or empty input.
    """
    values = np.asarray(values, dtype=np.float64)
    groups = np.asarray(groups)
    if values.ndim not in (1, 2) or groups.ndim != 1 or values.shape[0] != groups.shape[0]:
        raise ValueError(
            f"values [N] or [N, d] and groups [N] must have the same length N, got shapes "
            f"{values.shape} and {groups.shape}"
        )
    if values.shape[0] == 0:
        raise ValueError("values must be non-empty")
    labels, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    n, m = len(labels), int(counts.max())
    shape = (n, m) + values.shape[1:]
    atoms = np.zeros(shape, dtype=np.float64)
    weights = np.zeros((n, m), dtype=np.float64)
    order = np.argsort(inverse, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    for g in range(n):  # host-side data preparation, once per data set
        rows = values[order[starts[g] : starts[g] + counts[g]]]
        atoms[g, : counts[g]] = rows
        atoms[g, counts[g] :] = rows[0]
        weights[g, : counts[g]] = 1.0 / counts[g]
    return hierarchical_sample(atoms.astype(dtype), weights.astype(dtype), name="groups"), labels
