"""jaxcore.finegrained: discovering fine-grained classes from coarse labels (FALCON, Gadetsky et al., ICML 2024).

Given samples labelled only with C coarse classes, :func:`fit` trains a classifier over F > C unknown
fine classes and, jointly, the fine-to-coarse assignment M ``[F, C]``. Its loss
(:func:`falcon_loss`) is a coarse cross-entropy through a masked logsumexp over the fine classes of
each coarse class, a fine cross-entropy on an EMA teacher's pseudo-labels restricted to the coarse
label's fine classes, a consistency term over a cosine kNN graph (:func:`knn_graph`) and the entropy of
the mean prediction. M is re-solved every few steps exactly (:func:`solve_assignment`: the
mixed-integer quadratic program is a convex min-cost flow, solved with OR-Tools; ``pip install
"jaxcore[trees]"``). Scores: :func:`cluster_accuracy` (Hungarian), :func:`normalized_mutual_info`,
:func:`adjusted_rand_index`, :func:`map_accuracy` (of the recovered fine-to-coarse map).

The main workflow, on real single-cell data (10 PBMC cell types, 5 coarse lineages):

>>> import jax, numpy as np
>>> from jaxcore.datasets import load_pbmc68k
>>> from jaxcore.finegrained import cluster_accuracy, fit, predict
>>> x, fine, coarse = load_pbmc68k()
>>> r = fit(jax.random.key(0), x, coarse, 10, num_steps=60, solve_every=30)   # doctest: +SKIP
>>> acc = cluster_accuracy(fine, np.asarray(predict(r.teacher, x)))           # doctest: +SKIP
>>> x.shape, int(coarse.max()) + 1
((700, 765), 5)

References:
    A. Gadetsky, Y. Jiang, M. Salzmann, M. Brbic. "Discovering fine-grained classes from coarsely
    labeled data." ICML 2024.
"""

from .assignment import AssignmentResult, assignment_cost, assignment_objective, solve_assignment
from .knn import KnnGraph, knn_graph
from .losses import (
    LossTerms,
    coarse_cross_entropy,
    coarse_log_probs,
    entropy_gap,
    falcon_loss,
    fine_cross_entropy,
    fine_targets,
    neighbour_consistency,
)
from .metrics import adjusted_rand_index, cluster_accuracy, cluster_matching, map_accuracy, normalized_mutual_info
from .model import FalconMLP
from .synthetic import coarse_blobs
from .trainer import CoarseFitResult, FitResult, embed, fit, fit_coarse, predict

__all__ = [
    "AssignmentResult",
    "CoarseFitResult",
    "FalconMLP",
    "FitResult",
    "KnnGraph",
    "LossTerms",
    "adjusted_rand_index",
    "assignment_cost",
    "assignment_objective",
    "cluster_accuracy",
    "cluster_matching",
    "coarse_blobs",
    "coarse_cross_entropy",
    "coarse_log_probs",
    "embed",
    "entropy_gap",
    "falcon_loss",
    "fine_cross_entropy",
    "fine_targets",
    "fit",
    "fit_coarse",
    "knn_graph",
    "map_accuracy",
    "neighbour_consistency",
    "normalized_mutual_info",
    "predict",
    "solve_assignment",
]
