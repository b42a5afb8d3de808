"""Recourse actions for tree ensembles: costs (MPS, TLPS, l1/MAD), constraints, and :func:`cheapest_actions`.

An action ``a`` moves an instance ``x`` to ``x + a``. Its cost, for the empirical percentile CDF
``Q_d(v) = (#{train x_d <= v} + 1/2) / (n + 1)`` (in (0, 1)) and the median absolute deviation ``MAD_d``:

- MPS, max percentile shift: ``max_d |Q_d(x_d + a_d) - Q_d(x_d)|``;
- TLPS, total log-percentile shift: ``sum_d |log((1 - Q_d(x_d + a_d)) / (1 - Q_d(x_d)))|``;
- l1/MAD: ``sum_d |a_d| / MAD_d`` (``MAD_d`` of 0 replaced by ``1.4826 * std_d``, then 1).

All three are separable and grow with ``|a_d|`` on each side of ``x_d``, so the cheapest point of a
box ``low < x' <= high`` is ``x`` clipped into it per feature (``nextafter(low)`` from below; on features
whose training values are all integers, ``floor(low) + 1`` from below and ``floor(high)`` from above).
:func:`cheapest_actions` projects every instance into every candidate box at once (``[N, R, D]``),
refuses projections that move a fixed feature, move an increase-only feature down or a
decrease-only one up, or change more than ``max_changes`` features, runs the forest on every
candidate ``x + a`` and keeps the cheapest one the forest assigns the target class.

Candidate boxes (:func:`target_boxes`): ``"leaves"``, the boxes of the target-class leaves of every
tree (RACT's search for forests; exact for a single tree), or ``"cells"``, every non-empty
intersection of one leaf per tree on which the forest predicts the target class (exact for a
forest; ``L**T`` combinations, for small forests).
"""

from __future__ import annotations

import itertools
from typing import Any, Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from jaxcore._util.checks import check_choice, check_int, check_scalar, expected

from .forest import Forest, _check_x, _leaf_boxes, _predict_proba

__all__ = ["ActionConstraints", "ActionResult", "RecourseCost", "action_constraints", "action_cost",
           "cheapest_actions", "recourse_cost", "target_boxes"]

CostKind = Literal["mps", "tlps", "l1_mad"]


class RecourseCost(eqx.Module):
    """A fitted action cost (see the module docstring for the formulas).

    Attributes:
        sorted_x: ``[D, n]`` each feature's training values, sorted (the percentile CDFs).
        scale: ``[D]`` the l1/MAD scales ``MAD_d``.
        integer: ``[D]`` features whose training values are all integers: actions on them move to
            integers (the projection into ``low < x <= high`` is ``floor(low) + 1`` from below and
            ``floor(high)`` from above).
        kind: ``"mps"``, ``"tlps"`` or ``"l1_mad"`` (static).
    """

    sorted_x: Float[Array, "D n"]
    scale: Float[Array, " D"]
    integer: Bool[Array, " D"]
    kind: str = eqx.field(static=True)


class ActionConstraints(eqx.Module):
    """Per-feature action constraints.

    Attributes:
        fixed: ``[D]`` bool, immutable features.
        increase_only: ``[D]`` bool.
        decrease_only: ``[D]`` bool.
        max_changes: the largest number of changed features (static; ``D`` = no limit).
    """

    fixed: Bool[Array, " D"]
    increase_only: Bool[Array, " D"]
    decrease_only: Bool[Array, " D"]
    max_changes: int = eqx.field(static=True)


class ActionResult(NamedTuple):
    """The cheapest valid action of every instance.

    Attributes:
        action: ``[N, D]`` the action ``a`` (zeros where none is valid).
        cost: ``[N]`` its cost (``inf`` where none is valid).
        valid: ``[N]`` bool, a valid action exists (the forest predicts the target class on ``x + a``).
        box: ``[N]`` int32, the index of the candidate box used (-1 where none).
    """

    action: jax.Array
    cost: jax.Array
    valid: jax.Array
    box: jax.Array


def recourse_cost(x_train: Float[Array, "n D"], kind: CostKind = "mps") -> RecourseCost:
    """Fit the percentile CDFs and MAD scales of a cost on training data.

    Args:
        x_train: ``[n, D]`` training inputs.
        kind: ``"mps"`` (max percentile shift), ``"tlps"`` (total log-percentile shift), ``"l1_mad"``.

    Returns:
        A :class:`RecourseCost`.

    Raises:
        ValueError: ``x_train`` not 2-D finite, or an unknown ``kind``.

    References:
        K. Kanamori, T. Takagi, K. Kobayashi, Y. Ike. "Learning Decision Trees and Forests with
        Algorithmic Recourse." ICML 2024 (MPS); B. Ustun, A. Spangher, Y. Liu. "Actionable Recourse in
        Linear Classification." FAT* 2019 (TLPS); S. Wachter et al. 2017 (l1/MAD).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.trees import action_cost, recourse_cost
        >>> c = recourse_cost(np.array([[0.0], [1.0], [2.0], [3.0]]), "mps")
        >>> round(float(action_cost(c, np.array([[0.0]]), np.array([[2.0]]))[0]), 4)  # (3.5 - 1.5) / 5
        0.4
    """
    kind = check_choice(kind, "kind", ("mps", "tlps", "l1_mad"))
    x = np.asarray(x_train, np.float64)
    if x.ndim != 2 or x.shape[0] < 1 or not np.isfinite(x).all():
        raise ValueError(expected("x_train", "a finite array [n, D] with n >= 1", x_train))
    med = np.median(x, axis=0)
    mad = np.median(np.abs(x - med), axis=0)
    std = 1.4826 * x.std(axis=0)
    scale = np.where(mad > 0, mad, np.where(std > 0, std, 1.0))
    dt = jnp.float32
    integer = (x == np.round(x)).all(axis=0)
    return RecourseCost(jnp.asarray(np.sort(x, axis=0).T, dt), jnp.asarray(scale, dt), jnp.asarray(integer), kind)


def _percentile(cost: RecourseCost, v: jax.Array) -> jax.Array:
    """Q_d(v) for ``v [..., D]``."""
    n = cost.sorted_x.shape[1]
    flat = v.reshape(-1, v.shape[-1])
    cnt = jax.vmap(lambda s, col: jnp.searchsorted(s, col, side="right"), in_axes=(0, 1), out_axes=1)(
        cost.sorted_x, flat.astype(cost.sorted_x.dtype))
    return ((cnt + 0.5) / (n + 1)).reshape(v.shape)


def _feature_costs(cost: RecourseCost, x: jax.Array, x_new: jax.Array) -> jax.Array:
    """Per-feature cost terms ``[..., D]`` (combined by max for MPS, by sum otherwise)."""
    if cost.kind == "l1_mad":
        return jnp.abs(x_new - x) / cost.scale
    q0, q1 = _percentile(cost, x), _percentile(cost, x_new)
    if cost.kind == "mps":
        return jnp.abs(q1 - q0)
    return jnp.abs(jnp.log1p(-q1) - jnp.log1p(-q0))


def _combine(cost: RecourseCost, terms: jax.Array) -> jax.Array:
    return jnp.max(terms, axis=-1) if cost.kind == "mps" else jnp.sum(terms, axis=-1)


@eqx.filter_jit
def _action_cost(cost: RecourseCost, x: jax.Array, a: jax.Array) -> jax.Array:
    return _combine(cost, _feature_costs(cost, x, x + a))


def action_cost(cost: RecourseCost, x: Float[Array, "N D"], a: Float[Array, "N D"]) -> Float[Array, " N"]:
    """The cost of moving each ``x`` to ``x + a``.

    Args:
        cost: a :class:`RecourseCost`.
        x: ``[N, D]`` instances.
        a: ``[N, D]`` actions.

    Returns:
        ``[N]`` costs (MPS in [0, 1]; TLPS and l1/MAD non-negative).

    Raises:
        ValueError: shapes that do not match the cost's ``D``.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.trees import action_cost, recourse_cost
        >>> c = recourse_cost(np.array([[0.0, 0.0], [2.0, 4.0], [4.0, 8.0]]), "l1_mad")   # MADs 2 and 4
        >>> float(action_cost(c, np.zeros((1, 2)), np.array([[1.0, 2.0]]))[0])
        1.0
    """
    if not isinstance(cost, RecourseCost):
        raise TypeError(expected("cost", "a jaxcore.trees.RecourseCost", type(cost).__name__, raw=True))
    d = cost.scale.shape[0]
    xa, aa = jnp.asarray(x, jnp.float32), jnp.asarray(a, jnp.float32)
    if xa.ndim != 2 or xa.shape[1] != d or aa.shape != xa.shape:
        raise ValueError(expected("a", f"two arrays [N, {d}] of the same shape", f"{xa.shape} and {aa.shape}",
                                  raw=True))
    return _action_cost(cost, xa, aa)


def action_constraints(num_features: int, *, fixed: Any = (), increase_only: Any = (), decrease_only: Any = (),
                       max_changes: int | None = None) -> ActionConstraints:
    """Per-feature constraints from lists of feature indices.

    Args:
        num_features: ``D``.
        fixed: indices of immutable features (age, race, ...).
        increase_only: indices that may only increase.
        decrease_only: indices that may only decrease.
        max_changes: the largest number of changed features (default: no limit).

    Raises:
        ValueError: indices out of range, a feature in two lists, ``max_changes < 1``.

    Examples:
        >>> from jaxcore.trees import action_constraints
        >>> c = action_constraints(3, fixed=[0], increase_only=[2])
        >>> c.fixed.tolist(), c.increase_only.tolist(), c.max_changes
        ([True, False, False], [False, False, True], 3)
    """
    d = check_int(num_features, "num_features", minimum=1)
    masks = []
    for name, idx in (("fixed", fixed), ("increase_only", increase_only), ("decrease_only", decrease_only)):
        idx = np.asarray(list(idx), np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= d):
            raise ValueError(expected(name, f"feature indices in [0, {d})", idx))
        m = np.zeros(d, bool)
        m[idx] = True
        masks.append(m)
    if (np.sum(masks, axis=0) > 1).any():
        raise ValueError(expected("fixed", "each feature in at most one of fixed / increase_only / decrease_only",
                                  np.flatnonzero(np.sum(masks, axis=0) > 1), raw=False))
    k = d if max_changes is None else check_int(max_changes, "max_changes", minimum=1)
    return ActionConstraints(*(jnp.asarray(m) for m in masks), min(k, d))


def target_boxes(forest: Forest, target: int = 1, *, mode: Literal["leaves", "cells"] = "leaves",
                 max_cells: int = 100_000) -> Float[Array, "R D 2"]:
    """Candidate boxes for :func:`cheapest_actions`: ``low < x <= high`` per feature.

    Args:
        forest: the forest.
        target: the desired class's index in ``forest.classes``.
        mode: ``"leaves"``: every reachable leaf whose majority class is ``target`` (RACT's search);
            ``"cells"``: every non-empty intersection of one leaf per tree where the forest's mean
            probability makes ``target`` the predicted class (exact; ``L**T`` combinations).
        max_cells: refuse ``"cells"`` beyond this many combinations.

    Returns:
        ``[R, D, 2]`` boxes (``R >= 1``; an all-empty box when there is no candidate).

    Raises:
        ValueError: bad ``target`` / ``mode``, or too many combinations.

    Examples:
        >>> from jaxcore.trees import forest_from_arrays, target_boxes
        >>> f = forest_from_arrays([[0]], [[0.5]], [[[1.0, 0.0], [0.0, 1.0]]], [[True, True]], num_features=1)
        >>> target_boxes(f, 1).tolist()
        [[[0.5, inf]]]
    """
    mode = check_choice(mode, "mode", ("leaves", "cells"))
    target = check_int(target, "target", minimum=0, maximum=forest.num_classes - 1)
    boxes = np.asarray(_leaf_boxes(forest))  # [T, L, D, 2]
    mask = np.asarray(forest.leaf_mask)
    value = np.asarray(forest.leaf_value)
    if mode == "leaves":
        pick = mask & (np.argmax(value, axis=-1) == target)
        out = boxes[pick]
    else:
        n = int(mask.sum(1).astype(np.float64).prod())
        if n > max_cells:
            raise ValueError(expected("mode", f"'leaves' for a forest with more than {max_cells} leaf combinations",
                                      f"'cells' over {n}", raw=True))
        leaves = [np.flatnonzero(mask[t]) for t in range(forest.num_trees)]
        combos = np.array(list(itertools.product(*leaves)), np.int64)  # [K, T]
        t = np.arange(forest.num_trees)
        cb = boxes[t[None, :], combos]  # [K, T, D, 2]
        low, high = cb[..., 0].max(axis=1), cb[..., 1].min(axis=1)
        prob = value[t[None, :], combos].mean(axis=1)  # [K, C]
        keep = (low < high).all(-1) & (np.argmax(prob, -1) == target)
        out = np.stack([low, high], -1)[keep]
    if out.shape[0] == 0:
        out = np.tile(np.array([np.inf, -np.inf], np.float32), (1, forest.num_features, 1))
    return jnp.asarray(out, jnp.float32)


def _box_points(boxes: jax.Array, integer: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Each box's lowest and highest admissible values ``[R, D]`` (integers on integer features)."""
    low = jnp.where(integer, jnp.floor(boxes[..., 0]) + 1, jnp.nextafter(boxes[..., 0], jnp.inf))
    high = jnp.where(integer, jnp.floor(boxes[..., 1]), boxes[..., 1])
    return low, high


def _candidate_costs(cost: RecourseCost, x: jax.Array, low: jax.Array, high: jax.Array, xp: jax.Array) -> jax.Array:
    """Costs ``[N, R]`` of the projections: each feature of ``xp`` is ``x``, ``low`` or ``high``, so the
    percentiles are computed for ``[N, D]`` and ``[R, D]`` values only, never for ``[N, R, D]``."""
    if cost.kind == "l1_mad":
        return _combine(cost, _feature_costs(cost, x[:, None, :], xp))
    qx, ql, qh = _percentile(cost, x), _percentile(cost, low), _percentile(cost, high)
    below, above = x[:, None, :] < low[None], x[:, None, :] > high[None]
    q1 = jnp.where(below, ql[None], jnp.where(above, qh[None], qx[:, None, :]))
    q0 = qx[:, None, :]
    terms = jnp.abs(q1 - q0) if cost.kind == "mps" else jnp.abs(jnp.log1p(-q1) - jnp.log1p(-q0))
    return _combine(cost, terms)


_ROUND = 16  # candidates per instance checked by the forest in one round of cheapest_actions


@eqx.filter_jit
def _cheapest(x, forest, boxes, constraints, cost, budget, target):
    low, high = _box_points(boxes, cost.integer)
    xp = jnp.minimum(jnp.maximum(x[:, None, :], low[None]), high[None])  # [N, R, D] projections
    a = xp - x[:, None, :]
    ok = jnp.all((xp > boxes[None, ..., 0]) & (xp <= boxes[None, ..., 1]), axis=-1)  # inside the box: [N, R]
    moved = a != 0
    ok &= ~jnp.any(moved & constraints.fixed, -1)
    ok &= ~jnp.any((a < 0) & constraints.increase_only, -1) & ~jnp.any((a > 0) & constraints.decrease_only, -1)
    ok &= jnp.sum(moved, -1) <= constraints.max_changes
    c = _candidate_costs(cost, x, low, high, xp)  # [N, R]
    c = jnp.where(ok & (c <= budget), c, jnp.inf)
    n, r, _ = xp.shape
    rows = jnp.arange(n)

    # Validity by the forest, cheapest candidates first: each round runs the forest on every
    # unfinished instance's k cheapest remaining candidates only ([N * k, D], not [N * R, D]); the first
    # of them (in cost order) that the forest accepts is the cheapest valid action; if none is, all k
    # are struck off. The answer is that of checking all N x R candidates, in far fewer forest rows.
    k = min(_ROUND, r)

    def cond(state):
        c, done, best, it = state
        return jnp.any(~done) & (it * k < r)

    def body(state):
        c, done, best, it = state
        negc, js = jax.lax.top_k(-c, k)  # [N, k] cheapest first
        cj = -negc
        prob = _predict_proba(forest, xp[rows[:, None], js].reshape(n * k, -1)).reshape(n, k, -1)
        valid = (jnp.argmax(prob, -1) == target) & jnp.isfinite(cj)  # [N, k]
        first = jnp.argmax(valid, axis=1)
        found = valid.any(axis=1)
        exhausted = ~jnp.isfinite(cj[:, -1])  # no candidate left after these k
        best = jnp.where(~done & found, js[rows, first], best)
        strike = (~done & ~found)[:, None] & jnp.ones((1, k), bool)
        c = c.at[rows[:, None], js].set(jnp.where(strike, jnp.inf, cj))
        return c, done | found | exhausted, best, it + 1

    init = (c, jnp.zeros(n, bool), jnp.full(n, -1, jnp.int32), jnp.zeros((), jnp.int32))
    c, _, best, _ = jax.lax.while_loop(cond, body, init)
    valid = best >= 0
    j = jnp.maximum(best, 0)
    act = a[rows, j]
    return ActionResult(jnp.where(valid[:, None], act, 0.0), jnp.where(valid, c[rows, j], jnp.inf), valid,
                        best)


def cheapest_actions(x: Float[Array, "N D"], forest: Forest, constraints: ActionConstraints, cost: RecourseCost, *,
                     target: int = 1, boxes: Float[Array, "R D 2"] | None = None,
                     budget: float = float("inf")) -> ActionResult:
    """The cheapest action moving each instance into a box where the forest predicts ``target``.

    Every instance is projected into every candidate box at once (``[N, R, D]``) and the costs are
    computed for all of them; a projection is refused when it breaks a constraint or costs more than
    ``budget``. The forest then checks candidates cheapest first, all instances at once, 16 candidates
    an instance a round (one ``[16 N, D]`` forest evaluation a round), until each instance has one the
    forest assigns ``target`` or none is left: the cheapest valid action, as checking every candidate
    would give.

    Args:
        x: ``[N, D]`` instances.
        forest: the forest.
        constraints: an :class:`ActionConstraints` over ``D`` features.
        cost: a :class:`RecourseCost` fitted on training data.
        target: the desired class's index in ``forest.classes``.
        boxes: ``[R, D, 2]`` candidate boxes; default ``target_boxes(forest, target)`` (target leaves).
        budget: the largest admissible cost.

    Returns:
        An :class:`ActionResult`: action ``[N, D]``, cost ``[N]``, valid ``[N]``, box ``[N]``.

    Raises:
        TypeError / ValueError: wrong containers or shapes.

    References:
        K. Kanamori, T. Takagi, K. Kobayashi, Y. Ike. "Learning Decision Trees and Forests with
        Algorithmic Recourse." ICML 2024.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.trees import action_constraints, cheapest_actions, forest_from_arrays, recourse_cost
        >>> f = forest_from_arrays([[0]], [[0.5]], [[[1.0, 0.0], [0.0, 1.0]]], [[True, True]], num_features=1)
        >>> r = cheapest_actions(np.array([[0.0], [1.0]]), f, action_constraints(1),
        ...                      recourse_cost(np.array([[0.0], [1.0]]), "l1_mad"))
        >>> r.valid.tolist(), bool(r.action[0, 0] > 0.5), float(r.cost[1])
        ([True, True], True, 0.0)
    """
    xa = _check_x(forest, x).astype(jnp.float32)
    if not isinstance(constraints, ActionConstraints) or constraints.fixed.shape != (forest.num_features,):
        raise TypeError(expected("constraints", f"ActionConstraints over {forest.num_features} features",
                                 type(constraints).__name__, raw=True))
    if not isinstance(cost, RecourseCost) or cost.scale.shape != (forest.num_features,):
        raise TypeError(expected("cost", f"a RecourseCost over {forest.num_features} features",
                                 type(cost).__name__, raw=True))
    target = check_int(target, "target", minimum=0, maximum=forest.num_classes - 1)
    budget = check_scalar(budget, "budget", nonnegative=True, finite=False)
    b = target_boxes(forest, target) if boxes is None else jnp.asarray(boxes, jnp.float32)
    if b.ndim != 3 or b.shape[1:] != (forest.num_features, 2):
        raise ValueError(expected("boxes", f"an array [R, {forest.num_features}, 2]", boxes))
    return _cheapest(xa, forest, b, constraints, cost, jnp.float32(budget), target)
