"""RACT: recourse-aware classification trees and forests (Kanamori et al., ICML 2024).

A tree is grown top-down; a node's split minimises

    misclassified training rows + alpha * (rows left without an affordable action into a target leaf)

over features ``d``, thresholds ``t`` and the children's labels. An instance ``i`` *reaches* a box
when every feature's move into it costs at most the budget (exact for MPS, a per-feature relaxation
for the additive costs); ``w_i = 1`` marks instances that reach the node and have no other
reachable target leaf so far. For a split ``x_d <= t`` with ``move[i, d, t]`` (``i`` can cross ``t``
within the budget and the constraints), ``M_l = sum_i w_i [x_id <= t or move]``, ``M_r = sum_i w_i
[x_id > t or move]``, ``M_b = sum_i w_i``, and the recourse loss added by labels ``(y_l, y_r)`` is 0
(both target), ``M_b - M_l`` (left target), ``M_b - M_r`` (right target) or ``M_b`` (neither).

:func:`split_gains` evaluates every ``(d, t)`` at once: class counts left of every threshold by one
comparison-weighted sum (``[N, D, K]`` against the labels' one-hot), recourse counts likewise; the
growth (:func:`fit_recourse_tree`, :func:`fit_recourse_forest`) is a host loop over nodes that
calls it with fixed shapes (one compilation per data set).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxcore._util.checks import check_int, check_scalar, expected

from .forest import Forest, forest_from_arrays
from .recourse import ActionConstraints, RecourseCost, _feature_costs, action_constraints

__all__ = ["RecourseFitResult", "SplitResult", "candidate_thresholds", "crossing_mask", "fit_recourse_forest",
           "fit_recourse_tree", "split_gains"]


class SplitResult(NamedTuple):
    """Every split of one node.

    Attributes:
        gain: ``[D, K]`` parent objective minus the split's objective (``-inf`` for invalid splits).
        objective: ``[D, K]`` the split's node objective (misclassified + alpha * recourse loss).
        misclassified: ``[D, K]`` misclassified rows of the best labelling.
        recourse_loss: ``[D, K]`` recourse loss of the best labelling.
        labels: ``[D, K, 2]`` int32, the best (left, right) labels (1 = target class).
        parent_objective: the objective of not splitting (a scalar).
        parent_label: the parent's best label (1 = target).
    """

    gain: jax.Array
    objective: jax.Array
    misclassified: jax.Array
    recourse_loss: jax.Array
    labels: jax.Array
    parent_objective: jax.Array
    parent_label: jax.Array


class RecourseFitResult(NamedTuple):
    """A fitted recourse-aware tree or forest.

    Attributes:
        forest: the :class:`Forest` (labels: class 1 = the target class).
        objective: ``[T]`` each tree's final training objective.
        num_splits: ``[T]`` internal nodes per tree.
    """

    forest: Forest
    objective: np.ndarray
    num_splits: np.ndarray


def candidate_thresholds(x: Float[Array, "N D"], max_thresholds: int = 32) -> Float[Array, "D K"]:
    """Split thresholds: midpoints of consecutive distinct values per feature, at most ``max_thresholds``
    (evenly picked), padded with ``+inf`` (invalid).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.trees import candidate_thresholds
        >>> candidate_thresholds(np.array([[0.0, 1.0], [1.0, 1.0], [3.0, 1.0]]), 4).tolist()
        [[0.5, 2.0, inf, inf], [inf, inf, inf, inf]]
    """
    k = check_int(max_thresholds, "max_thresholds", minimum=1)
    xa = np.asarray(x, np.float64)
    if xa.ndim != 2:
        raise ValueError(expected("x", "an array [N, D]", x))
    out = np.full((xa.shape[1], k), np.inf, np.float32)
    for d in range(xa.shape[1]):
        u = np.unique(xa[:, d])
        mid = (u[:-1] + u[1:]) / 2
        if mid.size > k:
            mid = mid[np.linspace(0, mid.size - 1, k).astype(int)]
        out[d, :mid.size] = mid
    return jnp.asarray(out)


@eqx.filter_jit
def _crossing(x, thresholds, x_train_sorted_unique, constraints, cost, budget):
    # the value reached when crossing: t itself going left, the next training value above t going right
    up = jax.vmap(lambda s, t: s[jnp.clip(jnp.searchsorted(s, t, side="right"), 0, s.shape[0] - 1)])(
        x_train_sorted_unique, thresholds)  # [D, K]
    left = x[:, :, None] <= thresholds[None]  # [N, D, K]
    target = jnp.where(left, up[None], thresholds[None])
    xb = jnp.broadcast_to(x[:, :, None], target.shape)
    # per-feature single-change cost: move feature d only
    c = _feature_costs(cost, jnp.moveaxis(xb, 2, 1), jnp.moveaxis(target, 2, 1))  # [N, K, D]
    c = jnp.moveaxis(c, 1, 2)
    ok = (c <= budget) & ~constraints.fixed[None, :, None]
    ok &= ~(left & constraints.decrease_only[None, :, None]) & ~(~left & constraints.increase_only[None, :, None])
    return ok & jnp.isfinite(thresholds)[None]


def crossing_mask(x: Float[Array, "N D"], thresholds: Float[Array, "D K"], x_train: Float[Array, "n D"],
                  constraints: ActionConstraints, cost: RecourseCost, budget: float) -> Bool[Array, "N D K"]:
    """Whether instance ``i`` can cross threshold ``k`` of feature ``d`` within the budget and the constraints.

    Crossing to the right reaches the smallest training value above ``t``; crossing to the left
    reaches ``t``. The cost is that of changing feature ``d`` alone.

    Returns:
        ``[N, D, K]`` bool (False for padded thresholds).
    """
    budget = check_scalar(budget, "budget", nonnegative=True, finite=False)
    xt = np.asarray(x_train, np.float32)
    srt = np.sort(xt, axis=0).T  # [D, n]: duplicates are fine for the next-value search
    return _crossing(jnp.asarray(x, jnp.float32), jnp.asarray(thresholds, jnp.float32), jnp.asarray(srt),
                     constraints, cost, jnp.float32(budget))


@jax.jit
def _split(x, y, in_node, weight, move, thresholds, feature_mask, alpha):
    left = (x[:, :, None] <= thresholds[None]) & in_node[:, None, None]  # [N, D, K]
    onehot = jax.nn.one_hot(y, 2, dtype=jnp.float32) * in_node[:, None]  # [N, 2]
    nl = jnp.einsum("ndk,nc->dkc", left.astype(jnp.float32), onehot)
    tot = onehot.sum(0)
    nr = tot - nl
    w = weight.astype(jnp.float32)
    m_b = w.sum()
    m_l = jnp.einsum("ndk,n->dk", (x[:, :, None] <= thresholds[None]) | move, w)
    m_r = jnp.einsum("ndk,n->dk", (x[:, :, None] > thresholds[None]) | move, w)
    best_obj = jnp.full(thresholds.shape, jnp.inf)
    best_mis = jnp.zeros(thresholds.shape)
    best_rec = jnp.zeros(thresholds.shape)
    best_lab = jnp.zeros(thresholds.shape + (2,), jnp.int32)
    for yl in (0, 1):
        for yr in (0, 1):
            mis = nl[..., 1 - yl] + nr[..., 1 - yr]
            rec = {(1, 1): jnp.zeros_like(m_l), (1, 0): m_b - m_l, (0, 1): m_b - m_r, (0, 0): m_b + 0 * m_l}[(yl, yr)]
            obj = mis + alpha * rec
            better = obj < best_obj
            best_obj = jnp.where(better, obj, best_obj)
            best_mis = jnp.where(better, mis, best_mis)
            best_rec = jnp.where(better, rec, best_rec)
            best_lab = jnp.where(better[..., None], jnp.array([yl, yr]), best_lab)
    n_left = nl.sum(-1)
    valid = jnp.isfinite(thresholds) & feature_mask[:, None] & (n_left > 0) & (n_left < tot.sum())
    best_obj = jnp.where(valid, best_obj, jnp.inf)
    parent_t = tot[0]  # label 1: misclassified = class-0 rows, no added recourse loss
    parent_n = tot[1] + alpha * m_b
    parent_obj = jnp.minimum(parent_t, parent_n)
    parent_label = jnp.where(parent_t <= parent_n, 1, 0)
    return SplitResult(jnp.where(valid, parent_obj - best_obj, -jnp.inf), best_obj, best_mis, best_rec, best_lab,
                       parent_obj, parent_label)


def split_gains(x: Float[Array, "N D"], y: Int[Array, " N"], in_node: Bool[Array, " N"], weight: Float[Array, " N"],
                move: Bool[Array, "N D K"], thresholds: Float[Array, "D K"], *, alpha: float = 0.0,
                feature_mask: Bool[Array, " D"] | None = None) -> SplitResult:
    """Objective and gain of every split ``x_d <= thresholds[d, k]`` of one node (RACT's criterion).

    Args:
        x: ``[N, D]`` all training rows (rows outside the node are masked by ``in_node``).
        y: ``[N]`` labels in {0, 1}, 1 = the target (desired) class.
        in_node: ``[N]`` rows in the node.
        weight: ``[N]`` recourse weights ``w_i`` (1 for instances reaching the node without another
            reachable target leaf; any row of the training set, not only those in the node).
        move: ``[N, D, K]`` ``crossing_mask``: ``i`` can cross threshold ``k`` of feature ``d``.
        thresholds: ``[D, K]`` candidate thresholds (``+inf`` = padding).
        alpha: the recourse loss's weight (>= 0).
        feature_mask: ``[D]`` features considered (default all).

    Returns:
        A :class:`SplitResult` (gains ``[D, K]``; ``-inf`` where the split is invalid or empty).

    Raises:
        ValueError: shapes that disagree, ``alpha < 0``.

    References:
        K. Kanamori, T. Takagi, K. Kobayashi, Y. Ike. "Learning Decision Trees and Forests with
        Algorithmic Recourse." ICML 2024, Section 4.1.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.trees import split_gains
        >>> x = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0, 0, 1, 1])
        >>> r = split_gains(x, y, np.ones(4, bool), np.zeros(4), np.zeros((4, 1, 3), bool), np.array([[0.5, 1.5, 2.5]]))
        >>> r.gain.tolist(), r.labels[0, 1].tolist()
        ([[1.0, 2.0, 1.0]], [0, 1])
    """
    alpha = check_scalar(alpha, "alpha", nonnegative=True)
    xa = jnp.asarray(x, jnp.float32)
    if xa.ndim != 2:
        raise ValueError(expected("x", "an array [N, D]", x))
    n, d = xa.shape
    th = jnp.asarray(thresholds, jnp.float32)
    if th.ndim != 2 or th.shape[0] != d:
        raise ValueError(expected("thresholds", f"an array [{d}, K]", thresholds))
    mv = jnp.asarray(move, bool)
    if mv.shape != (n, d, th.shape[1]):
        raise ValueError(expected("move", f"a bool array of shape {(n, d, th.shape[1])}", move))
    fm = jnp.ones(d, bool) if feature_mask is None else jnp.asarray(feature_mask, bool)
    return _split(xa, jnp.asarray(y, jnp.int32), jnp.asarray(in_node, bool), jnp.asarray(weight, jnp.float32), mv, th,
                  fm, jnp.float32(alpha))


def _grow(x, y, sample_weight, move, thresholds, alpha, max_depth, min_samples_leaf, rng, max_features,
          actionable):
    """One tree by RACT's depth-first recursion; returns heap arrays of depth max_depth."""
    n, d = x.shape
    n_int, n_leaf = 2 ** max_depth - 1, 2 ** max_depth
    feat = np.zeros(n_int, np.int32)
    thr = np.full(n_int, np.inf, np.float64)
    value = np.zeros((n_leaf, 2), np.float64)
    mask = np.zeros(n_leaf, bool)
    in_bag = sample_weight > 0
    # class counts use the distinct in-bag rows; recourse counts use every training row, as the reference does
    xj, yj, movej, thj = (jnp.asarray(a) for a in (x, y, move, thresholds))
    valid_leaves = np.zeros(n, np.int64)
    state = {"splits": 0, "objective": 0.0}

    def node_fn(slot, depth, in_node, reach, label):
        nonlocal valid_leaves
        counts = np.bincount(y[in_node & in_bag], minlength=2)
        pure = (counts > 0).sum() <= 1
        if depth == max_depth or counts.sum() <= min_samples_leaf or pure:
            return leaf(slot, depth, in_node, reach, label, counts)
        invalid = (valid_leaves - (label == 1) * reach) == 0
        w = (invalid & reach).astype(np.float32)
        fmask = np.zeros(d, bool)
        pool = actionable if actionable.size else np.arange(d)
        fmask[rng.choice(pool, min(max_features, pool.size), replace=False)] = True
        r = _split(xj, yj, jnp.asarray(in_node & in_bag), jnp.asarray(w), movej, thj, jnp.asarray(fmask),
                   jnp.float32(alpha))
        obj = np.asarray(r.objective)
        j = np.unravel_index(int(np.argmin(obj)), obj.shape)
        if not np.isfinite(obj[j]):  # no valid split (as the reference, a valid split is always taken)
            return leaf(slot, depth, in_node, reach, label, counts)
        fd, ft = int(j[0]), float(thresholds[j])
        yl, yr = (int(v) for v in np.asarray(r.labels)[j])
        branch = x[:, fd] <= ft
        mv = np.asarray(move[:, fd, j[1]])
        reach_l = reach & (branch | mv)
        reach_r = reach & (~branch | mv)
        valid_leaves = valid_leaves - (label == 1) * reach + (yl == 1) * reach_l + (yr == 1) * reach_r
        feat[slot], thr[slot] = fd, ft
        state["splits"] += 1
        node_fn(2 * slot + 1, depth + 1, in_node & branch, reach_l, yl)
        node_fn(2 * slot + 2, depth + 1, in_node & ~branch, reach_r, yr)

    def leaf(slot, depth, in_node, reach, label, counts):
        while slot < n_int:
            slot = 2 * slot + 1
        li = slot - n_int
        value[li] = np.eye(2)[label]  # the label chosen by the split (RACT labels may differ from the majority)
        mask[li] = True
        state["objective"] += float(counts[1 - label])

    counts = np.bincount(y[in_bag], minlength=2)
    root_label = 1 if counts[0] <= counts[1] + alpha * n else 0
    valid_leaves[:] = int(root_label == 1)
    node_fn(0, 0, np.ones(n, bool), np.ones(n, bool), root_label)
    state["objective"] += alpha * float((valid_leaves == 0).sum())
    return feat, thr, value, mask, state


def _prepare(x, y, cost, constraints, budget, max_thresholds):
    xa = np.asarray(x, np.float32)
    ya = np.asarray(y)
    if xa.ndim != 2 or not np.isfinite(xa).all():
        raise ValueError(expected("x", "a finite array [N, D]", x))
    if ya.shape != (xa.shape[0],) or not np.isin(ya, [0, 1]).all():
        raise ValueError(expected("y", f"{xa.shape[0]} labels in {{0, 1}} (1 = the target class)", y))
    if not isinstance(cost, RecourseCost) or cost.scale.shape != (xa.shape[1],):
        raise TypeError(expected("cost", f"a RecourseCost over {xa.shape[1]} features", type(cost).__name__, raw=True))
    if constraints is None:
        constraints = action_constraints(xa.shape[1])
    th = np.asarray(candidate_thresholds(xa, max_thresholds))
    move = np.asarray(crossing_mask(xa, th, xa, constraints, cost, budget))
    actionable = np.flatnonzero(~np.asarray(constraints.fixed))
    return xa, ya.astype(np.int64), th, move, actionable


def fit_recourse_tree(x: Float[Array, "N D"], y: Int[Array, " N"], cost: RecourseCost, *, alpha: float = 0.0,
                      budget: float = 0.3, constraints: ActionConstraints | None = None, max_depth: int = 3,
                      min_samples_leaf: int = 1, max_thresholds: int = 32) -> RecourseFitResult:
    """Grow one recourse-aware classification tree (RACT) of depth ``max_depth``.

    Args:
        x: ``[N, D]`` training inputs.
        y: ``[N]`` labels in {0, 1}; 1 is the target (desired) class.
        cost: the action cost (:func:`recourse_cost` on ``x``).
        alpha: weight of the recourse loss (0: a plain greedy 0-1-loss tree).
        budget: the largest affordable cost.
        constraints: per-feature constraints (default none).
        max_depth: depth ``H``.
        min_samples_leaf: nodes with at most this many rows become leaves.
        max_thresholds: candidate thresholds per feature.

    Returns:
        A :class:`RecourseFitResult` with a one-tree :class:`Forest`.

    Raises:
        ValueError / TypeError: bad inputs.

    References:
        K. Kanamori, T. Takagi, K. Kobayashi, Y. Ike. "Learning Decision Trees and Forests with
        Algorithmic Recourse." ICML 2024, Algorithm 1.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.trees import fit_recourse_tree, predict_proba, recourse_cost
        >>> x = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0, 0, 1, 1])
        >>> r = fit_recourse_tree(x, y, recourse_cost(x), max_depth=1)
        >>> np.asarray(predict_proba(r.forest, x))[:, 1].tolist()
        [0.0, 0.0, 1.0, 1.0]
    """
    alpha = check_scalar(alpha, "alpha", nonnegative=True)
    max_depth = check_int(max_depth, "max_depth", minimum=1, maximum=12)
    min_samples_leaf = check_int(min_samples_leaf, "min_samples_leaf", minimum=0)
    xa, ya, th, move, actionable = _prepare(x, y, cost, constraints, budget, max_thresholds)
    out = _grow(xa, ya, np.ones(len(ya)), move, th, alpha, max_depth, min_samples_leaf, np.random.default_rng(0),
                xa.shape[1], np.arange(xa.shape[1]))
    feat, thr, value, mask, st = out
    f = forest_from_arrays(feat[None], thr[None], value[None], mask[None], num_features=xa.shape[1])
    return RecourseFitResult(f, np.array([st["objective"]]), np.array([st["splits"]]))


def fit_recourse_forest(key: Any, x: Float[Array, "N D"], y: Int[Array, " N"], cost: RecourseCost, *,
                        num_trees: int = 100, alpha: float = 0.0, budget: float = 0.3,
                        constraints: ActionConstraints | None = None, max_depth: int = 3,
                        max_features: int | str = "sqrt", min_samples_leaf: int = 1,
                        max_thresholds: int = 32) -> RecourseFitResult:
    """A bagged forest of RACT trees: each tree on a bootstrap sample, ``max_features`` actionable
    features drawn per node.

    Args:
        key: a ``jax.random.key`` (bootstrap samples and feature draws).
        x, y, cost, alpha, budget, constraints, max_depth, min_samples_leaf, max_thresholds: as
            :func:`fit_recourse_tree`.
        num_trees: ``T``.
        max_features: features drawn per node (``"sqrt"``: ``max(1, floor(sqrt(D)))``).

    Returns:
        A :class:`RecourseFitResult` (leaf values are one-hot labels; the forest averages them).

    Raises:
        TypeError: ``key`` is not a PRNG key array.

    Examples:
        >>> import jax, numpy as np
        >>> from jaxcore.trees import fit_recourse_forest, recourse_cost
        >>> x = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 1.0], [3.0, 0.0]]); y = np.array([0, 0, 1, 1])
        >>> r = fit_recourse_forest(jax.random.key(0), x, y, recourse_cost(x), num_trees=3, max_depth=1)
        >>> r.forest.num_trees
        3
    """
    if not (isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jax.dtypes.prng_key)):
        raise TypeError(expected("key", "a jax.random.key(...) array", type(key).__name__, raw=True))
    alpha = check_scalar(alpha, "alpha", nonnegative=True)
    max_depth = check_int(max_depth, "max_depth", minimum=1, maximum=12)
    num_trees = check_int(num_trees, "num_trees", minimum=1)
    min_samples_leaf = check_int(min_samples_leaf, "min_samples_leaf", minimum=0)
    xa, ya, th, move, actionable = _prepare(x, y, cost, constraints, budget, max_thresholds)
    pool = xa.shape[1]
    mf = max(1, int(np.sqrt(pool))) if max_features == "sqrt" else check_int(max_features, "max_features", minimum=1)
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())
    trees = []
    for _ in range(num_trees):
        w = np.bincount(rng.integers(0, len(ya), len(ya)), minlength=len(ya)).astype(np.float64)
        trees.append(_grow(xa, ya, w, move, th, alpha, max_depth, min_samples_leaf, rng, mf, np.arange(pool)))
    f = forest_from_arrays(np.stack([t[0] for t in trees]), np.stack([t[1] for t in trees]),
                           np.stack([t[2] for t in trees]), np.stack([t[3] for t in trees]), num_features=xa.shape[1])
    return RecourseFitResult(f, np.array([t[4]["objective"] for t in trees]),
                             np.array([t[4]["splits"] for t in trees]))
