"""DRAFT: reconstructing a forest's binary training set by constraint programming; consistency and error.

A forest trained without bagging on ``N`` rows stores, in every leaf of every tree, the exact class
counts of the training rows reaching it. Any data set ``x [N, D]`` (binary), ``y [N]`` that reaches
every leaf with those counts is *consistent* with the forest; Ferry et al. show that the constraints
of a few trees already pin the training set down (up to row order), and solve for it with CP-SAT:

- ``x[n, d]`` Boolean, rows sorted by class (the class totals are the root's counts),
- ``z[t, n, l]`` Boolean, row ``n`` reaches leaf ``l`` of tree ``t``: exactly one per ``(t, n)``,
  ``z[t, n, l] => x[n, f] = b`` for each node ``(f, b)`` on the leaf's path (left: 0, right: 1),
- ``sum_{n in class c} z[t, n, l] = count[t, l, c]``.

With bagging (``bootstrap=True``) the leaf counts are bootstrap occurrence counts: each row gets an
occurrence count ``q[t, n] in {0..K}`` per tree, ``sum_n q[t, n] z[t, n, l] [y_n = c] = count[t, l, c]``,
and the objective maximises the bootstrap likelihood ``sum_{t,n} log Binomial(q[t, n]; N, 1/N)``
(the paper's objective).

References:
    J. Ferry, R. Fukasawa, T. Pascal, T. Vidal. "Trained Random Forests Completely Reveal your Dataset."
    ICML 2024.
"""

from __future__ import annotations

import math
import time
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxcore._util.checks import check_bool, check_int, check_scalar, expected

from .forest import Forest, _apply_impl, _check_x

__all__ = ["ReconstructionResult", "is_consistent", "leaf_counts", "reconstruct", "reconstruction_error"]


class ReconstructionResult(NamedTuple):
    """The outcome of :func:`reconstruct`.

    Attributes:
        x: ``[N, D]`` int8 binary rows found (zeros when no solution was found).
        y: ``[N]`` labels (the forest's class labels), rows sorted by class.
        status: CP-SAT's status name: ``"OPTIMAL"``, ``"FEASIBLE"``, ``"INFEASIBLE"``, ``"UNKNOWN"``, ...
        wall_s: solver wall time in seconds.
        found: whether a solution is in ``x``.
        num_variables: number of Boolean/integer variables of the model.
        objective: the bagging log-likelihood objective (scaled by 1000, rounded), 0 without bagging.
    """

    x: np.ndarray
    y: np.ndarray
    status: str
    wall_s: float
    found: bool
    num_variables: int
    objective: float


def _require_ortools():
    try:
        from ortools.sat.python import cp_model
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError('reconstruct needs OR-Tools (CP-SAT); run: pip install "jaxcore[trees]"') from exc
    return cp_model


def _paths(forest: Forest) -> list[list[list[tuple[int, int]]]]:
    """paths[t][l] = [(feature, bit), ...] for each reachable leaf (None when unreachable)."""
    feat = np.asarray(forest.feature)
    thr = np.asarray(forest.threshold)
    mask = np.asarray(forest.leaf_mask)
    h = forest.depth
    out = []
    for t in range(forest.num_trees):
        tree = []
        for leaf in range(forest.num_leaves):
            if not mask[t, leaf]:
                tree.append(None)
                continue
            path = []
            for level in range(h):
                node = (2 ** level - 1) + (leaf >> (h - level))
                bit = (leaf >> (h - level - 1)) & 1
                if np.isinf(thr[t, node]):
                    continue  # padding: every row goes left
                path.append((int(feat[t, node]), int(bit)))
            tree.append(path)
        out.append(tree)
    return out


def _check_binary_forest(forest: Forest) -> None:
    thr = np.asarray(forest.threshold)
    real = np.isfinite(thr)
    if real.any() and not ((thr[real] > 0) & (thr[real] < 1)).all():
        bad = thr[real][~((thr[real] > 0) & (thr[real] < 1))]
        raise ValueError(expected("forest", "splits on binary features (every threshold in (0, 1))",
                                  f"threshold {float(bad[0])!r}", raw=True))


def reconstruct(
    forest: Forest,
    *,
    num_rows: int | None = None,
    bootstrap: bool = False,
    max_occurrences: int = 4,
    time_limit_s: float = 60.0,
    num_workers: int = 1,
    seed: int = 0,
    one_hot_groups: Any = (),
) -> ReconstructionResult:
    """Reconstruct a binary training set from a forest's structure and leaf class counts (DRAFT).

    Args:
        forest: a forest over binary features (thresholds in (0, 1)), e.g. ``Forest.from_sklearn`` of a
            scikit-learn forest fitted on 0/1 features; ``leaf_count`` holds its per-leaf class counts.
        num_rows: ``N``; default (and required without bagging to equal) the root's total count.
        bootstrap: whether the forest was trained with bagging (counts are occurrence counts).
        max_occurrences: with bagging, the largest occurrence count of one row in one tree.
        time_limit_s: CP-SAT's wall-clock limit, seconds.
        num_workers: CP-SAT search workers.
        seed: CP-SAT's random seed.
        one_hot_groups: lists of feature indices that one-hot encode one attribute (exactly one is 1 in
            every row), known to the attacker as in the paper; they prune the search a lot.

    Returns:
        A :class:`ReconstructionResult`.

    Raises:
        ImportError: OR-Tools is missing (names ``pip install "jaxcore[trees]"``).
        TypeError: ``forest`` is not a :class:`Forest`.
        ValueError: thresholds not in (0, 1), non-integer counts, inconsistent class totals without
            bagging, bad sizes or limits.

    References:
        J. Ferry, R. Fukasawa, T. Pascal, T. Vidal. "Trained Random Forests Completely Reveal your
        Dataset." ICML 2024 (Section 4: the CP model; bagging's likelihood objective).

    Examples:
        >>> import numpy as np
        >>> from sklearn.tree import DecisionTreeClassifier
        >>> from jaxcore.trees import Forest, reconstruct
        >>> x = np.array([[0, 0], [0, 1], [1, 0], [1, 1]]); y = np.array([0, 1, 1, 0])
        >>> f = Forest.from_sklearn(DecisionTreeClassifier(random_state=0).fit(x, y))
        >>> r = reconstruct(f, time_limit_s=5.0)
        >>> r.status, sorted(map(tuple, r.x.tolist())) == sorted(map(tuple, x.tolist()))
        ('OPTIMAL', True)
    """
    cp_model = _require_ortools()
    if not isinstance(forest, Forest):
        raise TypeError(expected("forest", "a jaxcore.trees.Forest", type(forest).__name__, raw=True))
    bootstrap = check_bool(bootstrap, "bootstrap")
    time_limit_s = check_scalar(time_limit_s, "time_limit_s", positive=True)
    num_workers = check_int(num_workers, "num_workers", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    max_occurrences = check_int(max_occurrences, "max_occurrences", minimum=1)
    _check_binary_forest(forest)
    counts_f = np.asarray(forest.leaf_count, np.float64)
    counts = np.rint(counts_f).astype(np.int64)
    if np.abs(counts - counts_f).max(initial=0.0) > 1e-3 or counts.min(initial=0) < 0:
        raise ValueError(expected("forest", "non-negative integer leaf counts (leaf_count)", "fractional counts",
                                  raw=True))
    totals = counts.sum(axis=1)  # [T, C]
    t_n, c_n, d_n = forest.num_trees, forest.num_classes, forest.num_features
    if not bootstrap:
        if not (totals == totals[0]).all():
            raise ValueError(expected("forest", "the same class totals in every tree (a forest without bagging)",
                                      f"totals {totals.tolist()}", raw=True))
        n_total = int(totals[0].sum())
        if num_rows is not None and check_int(num_rows, "num_rows", minimum=1) != n_total:
            raise ValueError(expected("num_rows", f"the forest's number of training rows {n_total}", num_rows))
        num_rows = n_total
        class_of = np.repeat(np.arange(c_n), totals[0])
    else:
        if num_rows is None:
            num_rows = int(round(float(totals.sum(axis=1).mean())))
        num_rows = check_int(num_rows, "num_rows", minimum=1)
        class_of = None
    paths = _paths(forest)
    model = cp_model.CpModel()
    x = [[model.NewBoolVar(f"x{n}_{d}") for d in range(d_n)] for n in range(num_rows)]
    nvars = num_rows * d_n
    for g in one_hot_groups:
        g = [check_int(int(i), "one_hot_groups", minimum=0, maximum=d_n - 1) for i in g]
        for n in range(num_rows):
            model.AddExactlyOne([x[n][i] for i in g])
    if bootstrap:
        ycl = [[model.NewBoolVar(f"y{n}_{c}") for c in range(c_n)] for n in range(num_rows)]
        nvars += num_rows * c_n
        for n in range(num_rows):
            model.AddExactlyOne(ycl[n])
        # rows ordered by class (symmetry breaking): class index non-decreasing
        cls_idx = [sum(c * ycl[n][c] for c in range(c_n)) for n in range(num_rows)]
        for n in range(num_rows - 1):
            model.Add(cls_idx[n] <= cls_idx[n + 1])
        logp = [math.lgamma(num_rows + 1) - math.lgamma(k + 1) - math.lgamma(num_rows - k + 1)
                + k * math.log(1.0 / num_rows) + (num_rows - k) * math.log1p(-1.0 / num_rows)
                for k in range(max_occurrences + 1)]
        objective = []
    for t in range(t_n):
        if bootstrap:
            # eta[n] = occurrences of row n in tree t's bootstrap sample, one-hot q[n][k] for the objective
            eta = [model.NewIntVar(0, max_occurrences, f"eta{t}_{n}") for n in range(num_rows)]
            for n in range(num_rows):
                ks = [model.NewBoolVar(f"q{t}_{n}_{k}") for k in range(max_occurrences + 1)]
                model.AddMapDomain(eta[n], ks)
                objective += [int(round(1000 * logp[k])) * ks[k] for k in range(max_occurrences + 1)]
            model.Add(sum(eta) == int(totals[t].sum()))  # the bootstrap draws N rows
            nvars += num_rows * (max_occurrences + 2)
        leaf_terms: dict[tuple[int, int], list] = {}
        for n in range(num_rows):
            zs = []
            for leaf, path in enumerate(paths[t]):
                if path is None:
                    continue
                if class_of is not None and counts[t, leaf, class_of[n]] == 0:
                    continue
                z = model.NewBoolVar(f"z{t}_{n}_{leaf}")
                nvars += 1
                for f, bit in path:
                    model.AddImplication(z, x[n][f] if bit else x[n][f].Not())
                zs.append((leaf, z))
            if not zs:
                model.AddBoolOr([])  # infeasible: a row of this class fits no leaf
                continue
            model.AddExactlyOne([z for _, z in zs])
            for leaf, z in zs:
                if not bootstrap:
                    leaf_terms.setdefault((leaf, int(class_of[n])), []).append(z)
                    continue
                for c in range(c_n):
                    if counts[t, leaf, c] == 0:  # a row of class c in this leaf was out of the bag
                        model.Add(eta[n] == 0).OnlyEnforceIf([z, ycl[n][c]])
                        continue
                    # occurrences of row n in leaf l as class c: eta[n] when it is there with that class
                    occ = model.NewIntVar(0, max_occurrences, "")
                    model.Add(occ == eta[n]).OnlyEnforceIf([z, ycl[n][c]])
                    model.Add(occ == 0).OnlyEnforceIf(z.Not())
                    model.Add(occ == 0).OnlyEnforceIf(ycl[n][c].Not())
                    leaf_terms.setdefault((leaf, c), []).append(occ)
                    nvars += 1
        for leaf in range(forest.num_leaves):
            if paths[t][leaf] is None:
                continue
            for c in range(c_n):
                terms = leaf_terms.get((leaf, c), [])
                if terms:
                    model.Add(sum(terms) == int(counts[t, leaf, c]))
                elif counts[t, leaf, c] != 0:
                    model.AddBoolOr([])  # counts no row can produce
    if bootstrap:
        model.Maximize(sum(objective))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_search_workers = num_workers
    solver.parameters.random_seed = seed
    t0 = time.perf_counter()
    status = solver.Solve(model)
    wall = time.perf_counter() - t0
    found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    xs = np.zeros((num_rows, d_n), np.int8)
    labels = np.asarray(forest.classes)
    if found:
        xs = np.array([[solver.Value(v) for v in row] for row in x], np.int8)
        if bootstrap:
            yi = np.array([int(np.argmax([solver.Value(v) for v in row])) for row in ycl])
        else:
            yi = class_of
        ys = labels[yi]
    else:
        ys = labels[class_of] if class_of is not None else np.full(num_rows, labels[0])
    obj = float(solver.ObjectiveValue()) if (found and bootstrap) else 0.0
    return ReconstructionResult(xs, ys, solver.StatusName(status), wall, bool(found), int(nvars), obj)


@eqx.filter_jit
def _leaf_counts(forest: Forest, x: jax.Array, yi: jax.Array) -> jax.Array:
    leaves = _apply_impl(forest, x)  # [N, T]
    seg = leaves * forest.num_classes + yi[:, None]  # [N, T]
    num = forest.num_leaves * forest.num_classes

    def per_tree(s):
        return jax.ops.segment_sum(jnp.ones_like(s, jnp.float32), s, num_segments=num)

    out = jax.vmap(per_tree, in_axes=1)(seg)  # [T, L*C]
    return out.reshape(forest.num_trees, forest.num_leaves, forest.num_classes)


def _class_index(forest: Forest, y: Any) -> jax.Array:
    y = np.asarray(y)
    lookup = {c: i for i, c in enumerate(forest.classes)}
    try:
        return jnp.asarray([lookup[v] for v in y.tolist()], jnp.int32)
    except (KeyError, TypeError):
        raise ValueError(expected("y", f"labels among the forest's classes {list(forest.classes)}", y)) from None


def leaf_counts(forest: Forest, x: Float[Array, "N D"], y: Any) -> Float[Array, "T L C"]:
    """Per-leaf class counts of a data set in the forest: ``apply`` then a ``segment_sum`` per tree.

    Args:
        forest: the forest.
        x: ``[N, D]`` rows.
        y: ``[N]`` labels among ``forest.classes``.

    Returns:
        ``[T, 2**H, C]`` float32 counts.

    Raises:
        TypeError / ValueError: as :func:`apply`; labels not among the forest's classes.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.trees import forest_from_arrays, leaf_counts
        >>> f = forest_from_arrays([[0]], [[0.5]], [[[1.0, 0.0], [0.0, 1.0]]], [[True, True]], num_features=1)
        >>> np.asarray(leaf_counts(f, np.array([[0.0], [1.0], [1.0]]), [0, 1, 0]))[0].tolist()
        [[1.0, 0.0], [1.0, 1.0]]
    """
    xa = _check_x(forest, x)
    yi = _class_index(forest, y)
    if yi.shape[0] != xa.shape[0]:
        raise ValueError(expected("y", f"{xa.shape[0]} labels", y))
    return _leaf_counts(forest, xa, yi)


def is_consistent(forest: Forest, x: Float[Array, "N D"], y: Any, *, atol: float = 1e-3) -> bool:
    """Whether a data set reaches every leaf of the forest with exactly its stored class counts.

    Returns:
        True iff ``|leaf_counts(forest, x, y) - forest.leaf_count| <= atol`` everywhere.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.trees import forest_from_arrays, is_consistent
        >>> f = forest_from_arrays([[0]], [[0.5]], [[[1.0, 0.0], [0.0, 1.0]]], [[True, True]], num_features=1,
        ...                        leaf_count=[[[1.0, 0.0], [0.0, 1.0]]])
        >>> is_consistent(f, np.array([[0.0], [1.0]]), [0, 1]), is_consistent(f, np.array([[1.0], [1.0]]), [0, 1])
        (True, False)
    """
    got = leaf_counts(forest, x, y)
    return bool(jnp.all(jnp.abs(got - forest.leaf_count) <= atol))


@jax.jit
def _hamming(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.sum(a[:, None, :] != b[None, :, :], axis=-1)


def reconstruction_error(x_true: Int[Array, "N D"], x_found: Int[Array, "M D"]) -> float:
    """The fraction of binary cells that differ after the optimal matching of reconstructed rows to true rows.

    The cost of matching row ``i`` to row ``j`` is their Hamming distance (one batched comparison
    ``[N, M]``); scipy's ``linear_sum_assignment`` finds the matching of least total cost. The error is
    that cost over ``N * D`` (unmatched rows, when ``M != N``, count as ``D`` mismatches each).

    Args:
        x_true: ``[N, D]`` binary training rows.
        x_found: ``[M, D]`` binary reconstructed rows.

    Returns:
        The error in [0, 1]: 0 for a reconstruction equal to the training set up to row order.

    Raises:
        ValueError: not 2-D arrays with the same number of columns.

    Examples:
        >>> from jaxcore.trees import reconstruction_error
        >>> reconstruction_error([[0, 1], [1, 1]], [[1, 1], [0, 0]])
        0.25
    """
    from scipy.optimize import linear_sum_assignment

    a, b = np.asarray(x_true), np.asarray(x_found)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(expected("x_found", f"an array [M, {a.shape[-1] if a.ndim else '?'}] like x_true",
                                  b))
    cost = np.asarray(_hamming(jnp.asarray(a, jnp.int8), jnp.asarray(b, jnp.int8)))
    rows, cols = linear_sum_assignment(cost)
    unmatched = abs(a.shape[0] - b.shape[0]) * a.shape[1]
    return float((cost[rows, cols].sum() + unmatched) / (max(a.shape[0], b.shape[0]) * a.shape[1]))
