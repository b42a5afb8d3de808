"""Tree ensembles as padded perfect trees: :class:`Forest`, :func:`apply`, :func:`predict_proba`, :func:`leaf_boxes`.

Every tree of a forest is stored as a perfect binary tree of the forest's depth ``H`` in heap order:
``2**H - 1`` internal nodes (node ``i`` has children ``2i + 1`` (left) and ``2i + 2`` (right)) and
``L = 2**H`` leaf slots. A scikit-learn leaf above depth ``H`` is pushed down by padding nodes whose
threshold is ``+inf`` (every row goes left), so it occupies the leftmost slot below it; the other
slots under it are unreachable (``leaf_mask`` False). A row goes left at a node when
``x[feature] <= threshold``, as scikit-learn does.

Thresholds are float32: scikit-learn casts ``X`` to float32 and compares it with float64 thresholds;
storing each threshold rounded *down* to float32 gives the same decision for every float32 input
(``x <= t64`` iff ``x <= floor32(t64)`` for a float32 ``x``), so float32 inputs reach exactly the
leaves scikit-learn's ``apply`` reports.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxcore._util.checks import describe, expected, is_concrete

__all__ = ["Forest", "apply", "forest_from_arrays", "leaf_boxes", "predict_proba", "sklearn_leaf_slots"]


class Forest(eqx.Module):
    """A forest of ``T`` perfect binary trees of depth ``H`` over ``D`` features and ``C`` classes.

    Attributes:
        feature: ``[T, 2**H - 1]`` int32, the feature each internal node tests (0 on padding nodes).
        threshold: ``[T, 2**H - 1]`` float32; a row goes left when ``x[feature] <= threshold``
            (``+inf`` on padding nodes).
        leaf_value: ``[T, 2**H, C]`` float32, each leaf's class probabilities (zeros on unreachable slots).
        leaf_count: ``[T, 2**H, C]`` float32, each leaf's (weighted) training class counts: exact
            integers for a forest without bagging, bootstrap occurrence counts with it.
        leaf_mask: ``[T, 2**H]`` bool, reachable leaf slots.
        num_features: ``D`` (static).
        classes: the class labels, length ``C`` (static).

    Build one with :meth:`Forest.from_sklearn` or :func:`forest_from_arrays`.

    Examples:
        >>> import numpy as np
        >>> from sklearn.tree import DecisionTreeClassifier
        >>> from jaxcore.trees import Forest, predict_proba
        >>> x = np.array([[0.0], [1.0], [2.0], [3.0]], np.float32); y = np.array([0, 0, 1, 1])
        >>> f = Forest.from_sklearn(DecisionTreeClassifier(random_state=0).fit(x, y))
        >>> f.depth, f.num_trees, f.num_classes
        (1, 1, 2)
        >>> np.asarray(predict_proba(f, x))[:, 1].tolist()
        [0.0, 0.0, 1.0, 1.0]
    """

    feature: Int[Array, "T I"]
    threshold: Float[Array, "T I"]
    leaf_value: Float[Array, "T L C"]
    leaf_count: Float[Array, "T L C"]
    leaf_mask: Bool[Array, "T L"]
    num_features: int = eqx.field(static=True)
    classes: tuple = eqx.field(static=True)

    @property
    def num_trees(self) -> int:
        return int(self.feature.shape[0])

    @property
    def depth(self) -> int:
        return int(self.leaf_mask.shape[1]).bit_length() - 1

    @property
    def num_leaves(self) -> int:
        return int(self.leaf_mask.shape[1])

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @classmethod
    def from_sklearn(cls, model: Any) -> "Forest":
        """The forest of a fitted scikit-learn ``DecisionTreeClassifier`` or ``RandomForestClassifier``.

        Leaf probabilities are each leaf's normalised ``tree_.value``; leaf counts are
        ``value * weighted_n_node_samples`` (exact class counts without bagging). Map scikit-learn's
        node ids to leaf slots with :func:`sklearn_leaf_slots`.

        Raises:
            TypeError: ``model`` is not a fitted single-output scikit-learn tree classifier or forest.
        """
        trees, classes = _sklearn_trees(model)
        depth = max(1, max(int(t.max_depth) for t in trees))
        num_features = int(model.n_features_in_)
        arrays = [_pad_tree(t, depth) for t in trees]
        feat = np.stack([a[0] for a in arrays])
        thr = np.stack([a[1] for a in arrays])
        value = np.stack([a[2] for a in arrays])
        count = np.stack([a[3] for a in arrays])
        mask = np.stack([a[4] for a in arrays])
        return forest_from_arrays(feat, thr, value, mask, num_features=num_features, classes=classes,
                                  leaf_count=count, round_thresholds=True)


def _sklearn_trees(model: Any) -> tuple[list, tuple]:
    from sklearn.ensemble import RandomForestClassifier, ExtraTreesClassifier
    from sklearn.tree import DecisionTreeClassifier

    if isinstance(model, DecisionTreeClassifier):
        if not hasattr(model, "tree_"):
            raise TypeError(expected("model", "a fitted scikit-learn tree classifier", "an unfitted one", raw=True))
        trees = [model.tree_]
    elif isinstance(model, (RandomForestClassifier, ExtraTreesClassifier)):
        if not hasattr(model, "estimators_"):
            raise TypeError(expected("model", "a fitted scikit-learn forest classifier", "an unfitted one", raw=True))
        trees = [e.tree_ for e in model.estimators_]
    else:
        raise TypeError(expected("model", "a fitted sklearn DecisionTreeClassifier or RandomForestClassifier",
                                 type(model).__name__, raw=True))
    if getattr(model, "n_outputs_", 1) != 1:
        raise TypeError(expected("model", "a single-output classifier", f"{model.n_outputs_} outputs", raw=True))
    return trees, tuple(np.asarray(model.classes_).tolist())


def _floor32(t: np.ndarray) -> np.ndarray:
    """The largest float32 <= each float64 threshold (same decisions for float32 inputs)."""
    t = np.asarray(t, np.float64)
    t32 = t.astype(np.float32)
    over = t32.astype(np.float64) > t
    t32[over] = np.nextafter(t32[over], np.float32(-np.inf))
    return t32


def _pad_tree(tree: Any, depth: int):
    """Heap-ordered padded arrays of one sklearn tree and its node -> leaf-slot map."""
    n_int, n_leaf = 2 ** depth - 1, 2 ** depth
    c = tree.value.shape[-1]
    feat = np.zeros(n_int, np.int32)
    thr = np.full(n_int, np.inf, np.float64)
    value = np.zeros((n_leaf, c), np.float32)
    count = np.zeros((n_leaf, c), np.float64)
    mask = np.zeros(n_leaf, bool)
    node_to_leaf = np.full(tree.node_count, -1, np.int64)
    left, right = tree.children_left, tree.children_right
    stack = [(0, 0)]  # (sklearn node, heap slot)
    while stack:
        node, slot = stack.pop()
        if left[node] == -1:  # a leaf: push it down the left spine to depth H
            while slot < n_int:
                slot = 2 * slot + 1
            leaf = slot - n_int
            v = np.asarray(tree.value[node, 0], np.float64)
            tot = v.sum()
            value[leaf] = v / tot if tot > 0 else v
            count[leaf] = v / tot * tree.weighted_n_node_samples[node] if tot > 0 else 0.0
            mask[leaf] = True
            node_to_leaf[node] = leaf
            continue
        feat[slot] = tree.feature[node]
        thr[slot] = tree.threshold[node]
        stack.append((left[node], 2 * slot + 1))
        stack.append((right[node], 2 * slot + 2))
    return feat, thr, value, np.round(count, 6), mask, node_to_leaf


def sklearn_leaf_slots(model: Any) -> list[np.ndarray]:
    """For each tree of a fitted scikit-learn model, the leaf slot of each of its node ids (-1 for internal nodes).

    ``sklearn_leaf_slots(m)[t][m.estimators_[t].apply(x)]`` equals ``apply(Forest.from_sklearn(m), x)[:, t]``.
    """
    trees, _ = _sklearn_trees(model)
    depth = max(1, max(int(t.max_depth) for t in trees))
    return [_pad_tree(t, depth)[5] for t in trees]


def forest_from_arrays(feature: Any, threshold: Any, leaf_value: Any, leaf_mask: Any, *, num_features: int,
                       classes: Any = None, leaf_count: Any = None, round_thresholds: bool = False) -> Forest:
    """A :class:`Forest` from heap-ordered arrays (see :class:`Forest` for the layout).

    Args:
        feature: ``[T, 2**H - 1]`` integer features in ``[0, num_features)``.
        threshold: ``[T, 2**H - 1]`` real thresholds (``+inf`` for padding nodes).
        leaf_value: ``[T, 2**H, C]`` class probabilities.
        leaf_mask: ``[T, 2**H]`` reachable leaf slots.
        num_features: ``D``.
        classes: class labels (default ``0..C-1``).
        leaf_count: ``[T, 2**H, C]`` training class counts (default: zeros).
        round_thresholds: round float64 thresholds down to float32 (scikit-learn's float32 decisions).

    Raises:
        ValueError: inconsistent shapes or features out of range.
    """
    feature = np.asarray(feature)
    if feature.ndim != 2 or not np.issubdtype(feature.dtype, np.integer):
        raise ValueError(expected("feature", "an integer array [T, 2**H - 1]", feature))
    t, n_int = feature.shape
    if (n_int + 1) & n_int:
        raise ValueError(expected("feature", "2**H - 1 internal nodes per tree", f"{n_int}", raw=True))
    n_leaf = n_int + 1
    if feature.size and (feature.min() < 0 or feature.max() >= num_features):
        raise ValueError(expected("feature", f"features in [0, {num_features})", feature))
    threshold = np.asarray(threshold, np.float64)
    if threshold.shape != feature.shape or np.isnan(threshold).any():
        raise ValueError(expected("threshold", f"a non-NaN array of shape {feature.shape}", threshold))
    threshold = _floor32(threshold) if round_thresholds else threshold.astype(np.float32)
    leaf_value = np.asarray(leaf_value, np.float32)
    if leaf_value.ndim != 3 or leaf_value.shape[:2] != (t, n_leaf):
        raise ValueError(expected("leaf_value", f"an array [{t}, {n_leaf}, C]", describe(leaf_value), raw=True))
    leaf_mask = np.asarray(leaf_mask, bool)
    if leaf_mask.shape != (t, n_leaf):
        raise ValueError(expected("leaf_mask", f"a bool array of shape {(t, n_leaf)}", leaf_mask))
    c = leaf_value.shape[2]
    leaf_count = np.zeros_like(leaf_value) if leaf_count is None else np.asarray(leaf_count, np.float32)
    if leaf_count.shape != leaf_value.shape:
        raise ValueError(expected("leaf_count", f"an array of shape {leaf_value.shape}", leaf_count))
    classes = tuple(range(c)) if classes is None else tuple(np.asarray(classes).tolist())
    if len(classes) != c:
        raise ValueError(expected("classes", f"{c} labels", classes))
    return Forest(jnp.asarray(feature, jnp.int32), jnp.asarray(threshold), jnp.asarray(leaf_value),
                  jnp.asarray(leaf_count), jnp.asarray(leaf_mask), int(num_features), classes)


def _check_x(forest: Forest, x: Any) -> jax.Array:
    if not isinstance(forest, Forest):
        raise TypeError(expected("forest", "a jaxcore.trees.Forest", type(forest).__name__, raw=True))
    a = jnp.asarray(x)
    if a.ndim != 2 or a.shape[1] != forest.num_features:
        raise ValueError(expected("x", f"an array [N, {forest.num_features}]", x))
    if not jnp.issubdtype(a.dtype, jnp.floating):
        a = a.astype(jnp.float32)
    elif is_concrete(a) and bool(jnp.any(jnp.isnan(a))):
        raise ValueError(expected("x", "no NaN (the forest stores no missing-value directions)",
                                  f"NaN at row {int(jnp.argmax(jnp.isnan(a).any(axis=1)))}", raw=True))
    return a


def _tree_leaf(feature, threshold, x):
    """Leaf slot of one row ``x [D]`` in one padded tree."""
    n_int = feature.shape[0]
    depth = (n_int + 1).bit_length() - 1
    node = jnp.zeros((), jnp.int32)
    for _ in range(depth):
        go_right = x[feature[node]] > threshold[node]
        node = 2 * node + 1 + go_right.astype(jnp.int32)
    return node - n_int


def _select_leaves(feature, threshold, x):
    """Leaf slots ``[n, T]`` of shallow trees without gathers on node ids: every node's decision for every
    tree at once (``2**H - 1`` arrays ``[n, T]``), then per level the decision of the node reached,
    picked by comparisons."""
    t_n, n_int = feature.shape
    depth = (n_int + 1).bit_length() - 1
    bits = [x[:, feature[:, i]] > threshold[:, i] for i in range(n_int)]  # each [n, T]
    pos = jnp.zeros((x.shape[0], t_n), jnp.int32)
    for level in range(depth):
        base = 2 ** level - 1
        b = bits[base]
        for k in range(1, 2 ** level):
            b = jnp.where(pos == k, bits[base + k], b)
        pos = 2 * pos + b.astype(jnp.int32)
    return pos


def _gather_leaves(feature, threshold, x):
    per_tree = jax.vmap(_tree_leaf, in_axes=(0, 0, None))  # trees
    return jax.vmap(per_tree, in_axes=(None, None, 0))(feature, threshold, x)  # rows


_SELECT_MAX_DEPTH = 4  # shallower trees: all decisions then selection; deeper: a gather per level
_CHUNK_GATHER = 2048  # rows per block of the gather path (measured 1.8x faster than unblocked)
_CHUNK_SELECT = 1 << 20  # rows per block of the selection path (bounds the decisions' memory; blocks are slower)


def _blocked(fn, x: jax.Array, chunk: int) -> jax.Array:
    n = x.shape[0]
    if n <= chunk:
        return fn(x)
    pad = (-n) % chunk
    blocks = jnp.pad(x, ((0, pad), (0, 0))).reshape(-1, chunk, x.shape[1])
    out = jax.lax.map(fn, blocks)
    return out.reshape((n + pad,) + out.shape[2:])[:n]


def _apply_impl(forest: Forest, x: jax.Array) -> jax.Array:
    if forest.depth <= _SELECT_MAX_DEPTH:
        return _blocked(lambda c: _select_leaves(forest.feature, forest.threshold, c), x, _CHUNK_SELECT)
    return _blocked(lambda c: _gather_leaves(forest.feature, forest.threshold, c), x, _CHUNK_GATHER)


def _proba_block(forest: Forest, x: jax.Array) -> jax.Array:
    """Mean leaf probabilities of a block of rows (one gather of the reached leaves' values)."""
    leaves = _apply_impl(forest, x)
    t = jnp.arange(forest.num_trees)
    return jnp.mean(forest.leaf_value[t[None, :], leaves], axis=1)


@eqx.filter_jit
def _apply(forest: Forest, x: jax.Array) -> jax.Array:
    return _apply_impl(forest, x)


@eqx.filter_jit
def _predict_proba(forest: Forest, x: jax.Array) -> jax.Array:
    chunk = _CHUNK_SELECT if forest.depth <= _SELECT_MAX_DEPTH else _CHUNK_GATHER
    return _blocked(lambda c: _proba_block(forest, c), x, chunk)


def apply(forest: Forest, x: Float[Array, "N D"]) -> Int[Array, "N T"]:
    """The leaf slot each row reaches in each tree.

    A row goes left at a node when ``x[feature] <= threshold`` (scikit-learn's rule); float32 input
    reaches the same leaves as scikit-learn's ``apply`` after its node ids are mapped to slots by
    :func:`sklearn_leaf_slots`.

    Args:
        forest: the forest (``T`` trees of depth ``H``).
        x: ``[N, D]`` inputs (integers are converted to float32). Use float32 for scikit-learn's decisions.

    Returns:
        ``[N, T]`` int32 leaf slots in ``[0, 2**H)``.

    Raises:
        TypeError: ``forest`` is not a :class:`Forest`.
        ValueError: ``x`` is not ``[N, D]`` or holds NaN (checked when concrete).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.trees import apply, forest_from_arrays
        >>> f = forest_from_arrays([[0]], [[0.5]], [[[1.0, 0.0], [0.0, 1.0]]], [[True, True]], num_features=1)
        >>> np.asarray(apply(f, np.array([[0.5], [0.6]], np.float32)))[:, 0].tolist()
        [0, 1]
    """
    return _apply(forest, _check_x(forest, x))


def predict_proba(forest: Forest, x: Float[Array, "N D"]) -> Float[Array, "N C"]:
    """Class probabilities: the mean over trees of the reached leaves' class fractions (scikit-learn's rule).

    Args:
        forest: the forest.
        x: ``[N, D]`` inputs.

    Returns:
        ``[N, C]`` probabilities, in the order of ``forest.classes``.

    Raises:
        TypeError: ``forest`` is not a :class:`Forest`.
        ValueError: ``x`` is not ``[N, D]``.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.trees import forest_from_arrays, predict_proba
        >>> f = forest_from_arrays([[0]], [[0.5]], [[[0.9, 0.1], [0.2, 0.8]]], [[True, True]], num_features=1)
        >>> np.round(np.asarray(predict_proba(f, np.array([[1.0]]))), 2).tolist()
        [[0.2, 0.8]]
    """
    return _predict_proba(forest, _check_x(forest, x))


@eqx.filter_jit
def _leaf_boxes(forest: Forest) -> jax.Array:
    h, d = forest.depth, forest.num_features
    leaves = jnp.arange(forest.num_leaves)
    low = jnp.full((forest.num_trees, forest.num_leaves, d), -jnp.inf, forest.threshold.dtype)
    high = jnp.full_like(low, jnp.inf)
    for level in range(h):
        node = (2 ** level - 1) + (leaves >> (h - level))  # [L] ancestor at this level
        right = ((leaves >> (h - level - 1)) & 1).astype(bool)  # [L]
        f = forest.feature[:, node]  # [T, L]
        t = forest.threshold[:, node]  # [T, L]
        hit = jax.nn.one_hot(f, d, dtype=bool)  # [T, L, D]
        high = jnp.where(hit & ~right[None, :, None], jnp.minimum(high, t[..., None]), high)
        low = jnp.where(hit & right[None, :, None], jnp.maximum(low, t[..., None]), low)
    return jnp.stack([low, high], axis=-1)


def leaf_boxes(forest: Forest) -> Float[Array, "T L D 2"]:
    """Each leaf's box: the rows reaching leaf ``l`` of tree ``t`` are those with ``low < x <= high`` per feature.

    Returns:
        ``[T, 2**H, D, 2]``: ``[..., 0]`` the exclusive lower bounds, ``[..., 1]`` the inclusive upper
        bounds (``-inf`` / ``+inf`` where a feature is not tested). Unreachable slots have ``low = +inf``
        on some feature (an empty box).

    Raises:
        TypeError: ``forest`` is not a :class:`Forest`.

    Examples:
        >>> from jaxcore.trees import forest_from_arrays, leaf_boxes
        >>> f = forest_from_arrays([[0]], [[0.5]], [[[1.0, 0.0], [0.0, 1.0]]], [[True, True]], num_features=1)
        >>> leaf_boxes(f)[0, :, 0].tolist()
        [[-inf, 0.5], [0.5, inf]]
    """
    if not isinstance(forest, Forest):
        raise TypeError(expected("forest", "a jaxcore.trees.Forest", type(forest).__name__, raw=True))
    return _leaf_boxes(forest)
