"""Scores of a discovered fine-grained labelling (host-side NumPy; labels are small integer arrays).

- :func:`cluster_accuracy`: accuracy under the best one-to-one matching of predicted clusters to
  true classes (Hungarian, ``scipy.optimize.linear_sum_assignment``);
- :func:`normalized_mutual_info`: ``I(Y; Z) / ((H(Y) + H(Z)) / 2)`` (scikit-learn's default, arithmetic);
- :func:`adjusted_rand_index`: Hubert & Arabie's ARI;
- :func:`map_accuracy`: the fraction of true fine classes whose matched cluster was assigned to the
  right coarse class by the recovered fine-to-coarse map.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import ArrayLike

from jaxcore._util import expected

__all__ = ["adjusted_rand_index", "cluster_accuracy", "cluster_matching", "map_accuracy", "normalized_mutual_info"]


def _labels(y, name) -> np.ndarray:
    a = np.asarray(y)
    if a.ndim != 1 or a.dtype.kind not in "iu":
        raise ValueError(expected(name, "a 1-d int array of labels", f"{a.dtype} array of shape {a.shape}", raw=True))
    if a.size and a.min() < 0:
        raise ValueError(expected(name, "labels >= 0", int(a.min())))
    return a.astype(np.int64)


def _pair(y_true, y_pred):
    t, p = _labels(y_true, "y_true"), _labels(y_pred, "y_pred")
    if t.shape != p.shape or t.size == 0:
        raise ValueError(expected("y_pred", f"a non-empty array of the shape of y_true {t.shape}", f"shape {p.shape}",
                                  raw=True))
    return t, p


def _contingency(t, p):
    _, ti = np.unique(t, return_inverse=True)
    _, pi = np.unique(p, return_inverse=True)
    w = np.zeros((ti.max() + 1, pi.max() + 1), np.int64)
    np.add.at(w, (ti, pi), 1)
    return w


def cluster_matching(y_true: ArrayLike, y_pred: ArrayLike) -> dict[int, int]:
    """The Hungarian matching ``{true class: predicted cluster}`` maximising agreement.

    Examples:
        >>> cluster_matching([0, 0, 1, 1], [1, 1, 0, 0])
        {0: 1, 1: 0}
    """
    from scipy.optimize import linear_sum_assignment

    t, p = _pair(y_true, y_pred)
    tu, pu = np.unique(t), np.unique(p)
    w = _contingency(t, p)
    r, c = linear_sum_assignment(-w)
    return {int(tu[i]): int(pu[j]) for i, j in zip(r, c)}


def cluster_accuracy(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """``max_pi (1/N) sum_n [pi(z_n) = y_n]`` over one-to-one maps pi (Hungarian).

    Args:
        y_true: ``[N]`` int true classes. y_pred: ``[N]`` int cluster ids (any count).

    Returns:
        Accuracy in [0, 1].

    Raises:
        ValueError: not 1-d int arrays of one length, negative labels.

    Examples:
        >>> cluster_accuracy([0, 0, 1, 1, 2], [2, 2, 0, 0, 0])
        0.8
    """
    from scipy.optimize import linear_sum_assignment

    t, p = _pair(y_true, y_pred)
    w = _contingency(t, p)
    r, c = linear_sum_assignment(-w)
    return float(w[r, c].sum() / t.size)


def _entropy(counts):
    q = counts[counts > 0] / counts.sum()
    return float(-(q * np.log(q)).sum())


def normalized_mutual_info(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """``NMI = I(Y; Z) / ((H(Y) + H(Z)) / 2)`` in [0, 1] (1 when both labellings are constant).

    Examples:
        >>> normalized_mutual_info([0, 0, 1, 1], [1, 1, 0, 0])
        1.0
    """
    t, p = _pair(y_true, y_pred)
    w = _contingency(t, p).astype(np.float64)
    n = w.sum()
    hy, hz = _entropy(w.sum(1)), _entropy(w.sum(0))
    if hy == 0.0 and hz == 0.0:
        return 1.0
    nz = w > 0
    outer = np.outer(w.sum(1), w.sum(0))
    mi = float((w[nz] / n * np.log(w[nz] * n / outer[nz])).sum())
    denom = (hy + hz) / 2
    return float(max(mi, 0.0) / denom) if denom > 0 else 0.0


def adjusted_rand_index(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Hubert & Arabie's adjusted Rand index (1: identical partitions, about 0: random).

    Examples:
        >>> adjusted_rand_index([0, 0, 1, 1], [1, 1, 0, 0])
        1.0
    """
    t, p = _pair(y_true, y_pred)
    w = _contingency(t, p).astype(np.float64)

    def comb2(v):
        return (v * (v - 1) / 2).sum()

    n = w.sum()
    sum_ij, sum_a, sum_b = comb2(w), comb2(w.sum(1)), comb2(w.sum(0))
    expected_index = sum_a * sum_b / (n * (n - 1) / 2) if n > 1 else 0.0
    max_index = (sum_a + sum_b) / 2
    if max_index == expected_index:
        return 1.0
    return float((sum_ij - expected_index) / (max_index - expected_index))


def map_accuracy(
    y_true: ArrayLike, y_pred: ArrayLike, true_fine_to_coarse: ArrayLike, fine_to_coarse: ArrayLike
) -> float:
    """Accuracy of the recovered fine-to-coarse map.

    Each true fine class f is matched to a predicted cluster m(f) (:func:`cluster_matching`); the score
    is the fraction of true fine classes with ``fine_to_coarse[m(f)] == true_fine_to_coarse[f]`` (an
    unmatched class counts as wrong).

    Args:
        y_true: ``[N]`` true fine classes. y_pred: ``[N]`` predicted fine clusters.
        true_fine_to_coarse: ``[F_true]`` coarse class of each true fine class.
        fine_to_coarse: ``[F]`` coarse class of each predicted cluster (``FitResult.fine_to_coarse``).

    Returns:
        Fraction in [0, 1].

    Examples:
        >>> map_accuracy([0, 0, 1, 2], [2, 2, 0, 1], [0, 0, 1], [0, 0, 1])   # true 0 -> cluster 2 -> coarse 1
        0.3333333333333333
    """
    t, p = _pair(y_true, y_pred)
    truth = _labels(true_fine_to_coarse, "true_fine_to_coarse")
    pred = _labels(fine_to_coarse, "fine_to_coarse")
    if t.max() >= truth.size:
        raise ValueError(expected("true_fine_to_coarse", f"an entry for each of the {t.max() + 1} true classes",
                                  f"{truth.size} entries", raw=True))
    if p.max() >= pred.size:
        raise ValueError(expected("fine_to_coarse", f"an entry for each of the {p.max() + 1} clusters",
                                  f"{pred.size} entries", raw=True))
    match = cluster_matching(t, p)
    classes = np.unique(t)
    good = sum(1 for f in classes if f in match and pred[match[f]] == truth[f])
    return float(good / classes.size)
