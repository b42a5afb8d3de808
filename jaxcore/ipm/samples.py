"""Hierarchical samples: n random probability measures, each with m weighted atoms.

A sample from a law Q of random probability measures is n measures
P_1, ..., P_n ~ Q, each observed through m atoms (exactly, for discrete random
measures such as truncated Dirichlet processes, or as m draws X_ij ~ P_i):

    P_i = sum_j w_ij delta_{x_ij},   w_ij >= 0,   sum_j w_ij = 1.

Atoms are ``[n, m]`` (measures on the line) or ``[n, m, d]`` (measures on
R^d); weights are ``[n, m]``. Variable numbers of atoms per measure are
handled by padding with zero-weight atoms (static shapes under ``jit``;
:func:`pad_atoms` pads a sample to a given number of atoms).

References:
    M. Catalano, H. Lavenant. "Hierarchical Integral Probability Metrics: A
    distance on random probability measures with low sample complexity."
    ICML 2024, Section 2.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxcore._util import check_float_dtype, check_int, error_if, expected, is_concrete

from ._inputs import WEIGHT_TOL, is_half, real_array, weight_tol

__all__ = ["HierarchicalSample", "hierarchical_sample", "from_groups", "pad_atoms"]

_WEIGHT_TOL = WEIGHT_TOL


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

    References:
        Catalano & Lavenant, "Hierarchical Integral Probability Metrics", ICML 2024, Section 2.

    Examples:
        >>> import jax.numpy as jnp
        >>> s = HierarchicalSample(jnp.array([[0.0, 1.0]]), jnp.array([[0.5, 0.5]]), True)
        >>> s.n, s.m, s.dim, float(s.means()[0])
        (1, 2, 1, 0.5)
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

    def __getitem__(self, index: Any) -> HierarchicalSample:
        """The sub-sample of the measures ``index`` selects, as a :class:`HierarchicalSample`.

        ``index``: an int (a sample of one measure), a slice, integer indices ``[k]`` (negative ones count
        from the end; repeats allowed: a bootstrap resample) or a boolean mask ``[n]``. The atoms of each
        selected measure are kept as they are.

        Raises:
            TypeError: a tuple, float or other index.
            IndexError: an integer index outside ``[-n, n)`` (also under ``jit``, at run time), a mask that is
                not of shape ``[n]``.

        Examples:
            >>> import jax.numpy as jnp
            >>> s = HierarchicalSample(jnp.array([[0.0, 1.0], [2.0, 4.0], [5.0, 5.0]]), jnp.full((3, 2), 0.5), True)
            >>> s[1:].means().tolist(), s[jnp.array([2, 0, 2])].n, s[-1].means().tolist()
            ([3.0, 5.0], 3, [5.0])
        """
        n = self.n
        if isinstance(index, slice):
            return HierarchicalSample(self.atoms[index], self.weights[index], self.uniform)
        if isinstance(index, (bool, np.bool_)) or isinstance(index, tuple) or index is None:
            raise TypeError(expected("index", "an int, a slice, integer indices or a boolean mask over the n "
                                              "measures", type(index).__name__, raw=True))
        idx = index if isinstance(index, jax.Array) else np.asarray(index)
        if idx.dtype == bool:
            if idx.shape != (n,):
                raise IndexError(expected("index", f"a boolean mask of shape [{n}] (one entry per measure)",
                                          f"shape {tuple(idx.shape)}", raw=True))
            if isinstance(idx, jax.core.Tracer):
                raise TypeError(expected("index", "a concrete boolean mask (its count sets the result's shape); "
                                                  "under jit pass integer indices", "a traced mask", raw=True))
            idx = np.flatnonzero(np.asarray(idx))
        elif not np.issubdtype(idx.dtype, np.integer):
            raise TypeError(expected("index", "an int, a slice, integer indices or a boolean mask over the n "
                                              "measures", f"dtype {idx.dtype}", raw=True))
        if idx.ndim > 1:
            raise IndexError(expected("index", "a scalar or 1-D integer indices", f"shape {tuple(idx.shape)}",
                                      raw=True))
        idx = idx.reshape(-1)
        if isinstance(idx, jax.core.Tracer):
            idx = error_if(idx, jnp.any((idx < -n) | (idx >= n)), "index", f"indices in [-{n}, {n})")
        elif idx.size and (int(idx.min()) < -n or int(idx.max()) >= n):
            raise IndexError(expected("index", f"indices in [-{n}, {n}) (there are {n} measures)",
                                      f"range [{int(idx.min())}, {int(idx.max())}]", raw=True))
        idx = jnp.where(idx < 0, idx + n, idx)
        return HierarchicalSample(jnp.take(self.atoms, idx, axis=0), jnp.take(self.weights, idx, axis=0),
                                  self.uniform)

    def means(self) -> Float[Array, " n"]:
        """The mean of each measure, ``sum_j w_ij x_ij``: ``[n]`` (or ``[n, d]``)."""
        if self.atoms.ndim == 2:
            return jnp.sum(self.weights * self.atoms, axis=1)
        return jnp.einsum("nm,nmd->nd", self.weights, self.atoms)


def hierarchical_sample(
    atoms: Any,
    weights: Any | None = None,
    *,
    interval: tuple[float, float] | None = None,
    max_dim: int | None = None,
    name: str = "sample",
) -> HierarchicalSample:
    """Validate atoms (and weights) and return a :class:`HierarchicalSample`.

    P_i = sum_j w_ij delta_{x_ij} with w_ij >= 0 and sum_j w_ij = 1 (tolerance 1e-4).
    Passing a :class:`HierarchicalSample` re-validates it (``interval`` and
    ``max_dim`` checks included). Concrete inputs are checked on the host; traced
    inputs (inside a user's ``jit``) are checked at run time with
    ``jaxcore._util.error_if`` (an error, never a NaN).

    Args:
        atoms: ``[n, m]`` or ``[n, m, d]`` real array (units of the data), or a
            :class:`HierarchicalSample`. Integer atoms become the default float dtype
            exactly (integers that do not survive the cast are refused); float16/bfloat16
            atoms and weights are promoted to float32 (the sample is computed in float32).
        weights: optional ``[n, m]`` finite non-negative weights summing to one per
            row (within 1e-4, or 4 epsilons of a half dtype; half-precision weights are then
            normalised explicitly); default uniform ``1/m``.
        interval: optional ``(a, b)``: every atom carrying positive weight is
            checked to lie in ``[a, b]`` (as :func:`jaxcore.ipm.dlip` needs).
        max_dim: if given, atoms of dimension ``d > max_dim`` are rejected.
        name: the argument's name, used in error messages.

    Returns:
        The validated sample, atoms and weights in the same floating dtype.

    Raises:
        TypeError: non-numeric atoms or weights.
        ValueError: wrong rank or shape, empty sample, non-finite atoms,
            negative weights, rows not summing to one, atoms outside
            ``interval``, or ``d > max_dim``.

    References:
        Catalano & Lavenant, "Hierarchical Integral Probability Metrics", ICML 2024, Section 2.

    Examples:
        >>> import numpy as np
        >>> s = hierarchical_sample(np.array([[0.0, 1.0], [2.0, 4.0]]), np.array([[0.25, 0.75], [0.5, 0.5]]))
        >>> s.n, s.m, s.dim, s.uniform
        (2, 2, 1, False)
        >>> s.means()
        Array([0.75, 3.  ], dtype=float32)
    """
    if isinstance(atoms, HierarchicalSample):
        if weights is not None:
            raise ValueError(expected(name, "no separate weights (a HierarchicalSample has its own)",
                                      "weights given twice", raw=True))
        atoms, weights, uniform = atoms.atoms, atoms.weights, atoms.uniform
    else:
        uniform = weights is None
    if isinstance(atoms, (list, tuple)):
        atoms = np.asarray(atoms)
    if not hasattr(atoms, "shape") or not hasattr(atoms, "dtype"):
        raise TypeError(expected(name, "atoms as an array of shape [n, m] or [n, m, d]", type(atoms).__name__,
                                 raw=True))
    if not (jnp.issubdtype(atoms.dtype, jnp.floating) or jnp.issubdtype(atoms.dtype, jnp.integer)):
        raise TypeError(expected(name, "real-valued atoms", f"dtype {atoms.dtype}", raw=True))
    if atoms.ndim not in (2, 3):
        raise ValueError(expected(name, "atoms of shape [n, m] or [n, m, d]",
                                  f"shape {tuple(atoms.shape)} (ndim {atoms.ndim})", raw=True))
    n, m = atoms.shape[:2]
    if n < 1 or m < 1 or (atoms.ndim == 3 and atoms.shape[2] < 1):
        raise ValueError(expected(name, "non-empty atoms (n, m, d >= 1)", f"shape {tuple(atoms.shape)}", raw=True))
    if max_dim is not None and atoms.ndim == 3 and atoms.shape[2] > max_dim:
        raise ValueError(expected(name, f"measures on R^d with d <= {max_dim} (this estimator supports d <= {max_dim})",
                                  f"atoms of shape {tuple(atoms.shape)} (d = {atoms.shape[2]})", raw=True))
    half = is_half(atoms.dtype)
    tol = weight_tol(atoms.dtype)
    atoms, _ = real_array(atoms, name, "atoms")  # integers exactly to float; half precision to float32
    dtype = atoms.dtype
    if weights is None:
        weights = jnp.full((n, m), 1.0 / m, dtype=dtype)
    else:
        if isinstance(weights, (list, tuple)):
            weights = np.asarray(weights)
        if not hasattr(weights, "shape") or not hasattr(weights, "dtype"):
            raise TypeError(expected(name, "weights as an array of shape [n, m]", type(weights).__name__, raw=True))
        if not (jnp.issubdtype(weights.dtype, jnp.floating) or jnp.issubdtype(weights.dtype, jnp.integer)):
            raise TypeError(expected(name, "real-valued weights", f"dtype {weights.dtype}", raw=True))
        if tuple(weights.shape) != (n, m):
            raise ValueError(expected(name, f"weights of shape [n, m] = {(n, m)} to match atoms {tuple(atoms.shape)}",
                                      f"shape {tuple(weights.shape)}", raw=True))
        if weights.dtype == jnp.bool_:
            raise TypeError(expected(name, "real-valued weights", f"dtype {weights.dtype}", raw=True))
        half = half or is_half(weights.dtype)
        tol = max(tol, weight_tol(weights.dtype))
        weights, _ = real_array(weights, name, "weights")
        weights = weights.astype(dtype)

    lo, hi = (None, None) if interval is None else check_interval(interval)

    if is_concrete(atoms, weights):
        a_np, w_np = np.asarray(atoms), np.asarray(weights)
        if not np.all(np.isfinite(a_np)):
            raise ValueError(expected(name, "finite atoms",
                                      f"{int(np.sum(~np.isfinite(a_np)))} non-finite values", raw=True))
        if not np.all(np.isfinite(w_np)) or np.any(w_np < 0):
            raise ValueError(expected(name, "finite non-negative weights",
                                      f"minimum {np.nanmin(w_np)}", raw=True))
        sums = w_np.astype(np.float64).sum(axis=1)
        bad = np.abs(sums - 1.0) > tol
        if np.any(bad):
            i = int(np.argmax(bad))
            raise ValueError(expected(name, "the weights of each measure to sum to one",
                f"row {i} sums to {sums[i]:.6g} ({int(bad.sum())} rows off by more than {tol:g})", raw=True))
        if not uniform and np.all(w_np == w_np.flat[0]) and abs(float(w_np.flat[0]) * m - 1.0) < 1e-6:
            uniform = True
        if interval is not None:
            live = w_np > 0
            vals = a_np[live] if a_np.ndim == 2 else a_np[live].ravel()
            if vals.size and (vals.min() < lo or vals.max() > hi):
                raise ValueError(expected(name, f"atoms that lie in the interval [a, b] = [{lo}, {hi}]",
                                          f"atoms in [{vals.min():.6g}, {vals.max():.6g}]", raw=True))
    else:
        atoms = error_if(atoms, ~jnp.all(jnp.isfinite(atoms)), name, "finite atoms")
        weights = error_if(weights, ~jnp.all(jnp.isfinite(weights) & (weights >= 0)), name,
                           "finite non-negative weights")
        weights = error_if(weights, jnp.any(jnp.abs(jnp.sum(weights, axis=1) - 1.0) > tol),
                           name, "the weights of each measure to sum to one")
        if interval is not None:
            live = weights > 0 if atoms.ndim == 2 else (weights > 0)[..., None]
            outside = live & ((atoms < lo) | (atoms > hi))
            atoms = error_if(atoms, jnp.any(outside), name, f"atoms that lie in the interval [a, b] = [{lo}, {hi}]")
    if half:  # half-precision weights are normalised explicitly after their promotion to float32
        weights = weights / jnp.sum(weights, axis=1, keepdims=True)
    return HierarchicalSample(atoms=atoms, weights=weights, uniform=uniform)


def check_interval(interval: Any, name: str = "interval") -> tuple[float, float]:
    """``(a, b)`` as two finite Python floats with ``a < b`` (host check; the interval is static)."""
    if isinstance(interval, (str, bytes)) or not hasattr(interval, "__len__") or len(interval) != 2:
        raise TypeError(expected(name, "a pair (a, b) of numbers", interval))
    try:
        a, b = float(interval[0]), float(interval[1])
    except (TypeError, ValueError):
        raise TypeError(expected(name, "a pair (a, b) of Python numbers (static)", tuple(interval))) from None
    if not (np.isfinite(a) and np.isfinite(b) and a < b):
        raise ValueError(expected(name, "a finite interval (a, b) with a < b", (a, b)))
    return a, b


def pad_atoms(sample: HierarchicalSample | Any, num_atoms: int) -> HierarchicalSample:
    """Pad every measure to ``num_atoms`` atoms with zero-weight copies of its first atom.

    The measures are unchanged (padding atoms carry weight 0): one compiled program then
    serves samples with different numbers of atoms (static shapes under ``jit``).

    Args:
        sample: :class:`HierarchicalSample` or atoms ``[n, m]`` / ``[n, m, d]``.
        num_atoms: the new number of atoms per measure, ``>= m``.

    Returns:
        :class:`HierarchicalSample` with atoms ``[n, num_atoms(, d)]`` and weights
        ``[n, num_atoms]`` (the validated sample unchanged when ``num_atoms == m``;
        otherwise ``uniform=False``).

    Raises:
        ValueError / TypeError: an invalid sample, or ``num_atoms`` not an int ``>= m``.

    Examples:
        >>> import numpy as np
        >>> s = pad_atoms(np.array([[0.25, 0.75]]), 3)
        >>> s.atoms, s.weights
        (Array([[0.25, 0.75, 0.25]], dtype=float32), Array([[0.5, 0.5, 0. ]], dtype=float32))
    """
    s = hierarchical_sample(sample, name="sample")
    num_atoms = check_int(num_atoms, "num_atoms", minimum=s.m)
    return _pad(s, num_atoms)


def _pad(s: HierarchicalSample, m: int) -> HierarchicalSample:
    if s.m == m:
        return s
    return _pad_jit(s, m)


@partial(jax.jit, static_argnums=(1,))
def _pad_jit(s: HierarchicalSample, m: int) -> HierarchicalSample:
    extra = m - s.m
    atoms = jnp.concatenate([s.atoms, jnp.repeat(s.atoms[:, :1], extra, axis=1)], axis=1)
    weights = jnp.concatenate([s.weights, jnp.zeros((s.n, extra), s.weights.dtype)], axis=1)
    return HierarchicalSample(atoms, weights, False)


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
        ValueError: mismatched lengths, empty input, NaN/inf values.
        TypeError: None, non-numeric values, a dtype that is not floating.

    Examples:
        >>> import numpy as np
        >>> s, labels = from_groups(np.array([1.0, 2.0, 3.0]), np.array(["b", "a", "b"]))
        >>> labels.tolist(), s.atoms.tolist(), s.weights.tolist()
        (['a', 'b'], [[2.0, 2.0], [1.0, 3.0]], [[1.0, 0.0], [0.5, 0.5]])
    """
    if values is None or groups is None:
        raise TypeError(expected("values" if values is None else "groups", "an array [N]", None))
    try:
        values = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(expected("values", "real observations [N] or [N, d]", type(values).__name__,
                                 raw=True)) from exc
    fdtype = check_float_dtype(dtype, "dtype", "a floating dtype")
    groups = np.asarray(groups)
    if values.ndim not in (1, 2) or groups.ndim != 1 or values.shape[0] != groups.shape[0]:
        raise ValueError(expected("values, groups", "values [N] or [N, d] and groups [N] of the same length N",
                                  f"shapes {values.shape} and {groups.shape}", raw=True))
    if values.shape[0] == 0:
        raise ValueError(expected("values", "at least one observation", "an empty array", raw=True))
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
    return hierarchical_sample(atoms.astype(fdtype), weights.astype(fdtype), name="values"), labels
