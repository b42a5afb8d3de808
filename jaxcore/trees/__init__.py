"""jaxcore.trees: tree ensembles as JAX kernels; recourse-aware trees (RACT) and forest reconstruction (DRAFT).

A :class:`Forest` holds T trees as padded perfect trees (heap-ordered ``feature`` / ``threshold``,
per-leaf class probabilities and training counts); :meth:`Forest.from_sklearn` converts a fitted
scikit-learn tree or forest, and :func:`apply` / :func:`predict_proba` / :func:`leaf_boxes` evaluate it
exactly as scikit-learn does on float32 inputs. On top of them:

- RACT: :func:`recourse_cost` (MPS, TLPS, l1/MAD), :func:`action_constraints`, :func:`cheapest_actions`
  (every instance projected into every target box at once), :func:`split_gains` (the recourse-aware
  split criterion of every feature and threshold), :func:`fit_recourse_tree`, :func:`fit_recourse_forest`;
- DRAFT: :func:`reconstruct` (CP-SAT over the forest's structure and leaf counts), :func:`is_consistent`,
  :func:`leaf_counts`, :func:`reconstruction_error`.

The main workflow on real data (COMPAS, DRAFT's binarisation): a forest trained without bagging on 40
defendants gives its training rows back.

>>> import numpy as np
>>> from sklearn.ensemble import RandomForestClassifier
>>> from jaxcore.datasets import load_compas
>>> from jaxcore.trees import Forest, is_consistent, predict_proba, reconstruct, reconstruction_error
>>> d = load_compas("binary")
>>> x, y = d["x"][:40].astype(np.int8), d["y"][:40]
>>> model = RandomForestClassifier(5, bootstrap=False, random_state=0).fit(x, y)
>>> forest = Forest.from_sklearn(model)
>>> bool(np.allclose(predict_proba(forest, x), model.predict_proba(x), atol=1e-6))
True
>>> r = reconstruct(forest, time_limit_s=30.0, one_hot_groups=d["one_hot_groups"])
>>> r.status, is_consistent(forest, r.x, r.y), reconstruction_error(x, r.x) < 0.05
('OPTIMAL', True, True)

References:
    K. Kanamori, T. Takagi, K. Kobayashi, Y. Ike. "Learning Decision Trees and Forests with Algorithmic
    Recourse." ICML 2024.
    J. Ferry, R. Fukasawa, T. Pascal, T. Vidal. "Trained Random Forests Completely Reveal your Dataset."
    ICML 2024.
"""

from .reconstruct import ReconstructionResult, is_consistent, leaf_counts, reconstruct, reconstruction_error
from .recourse import (ActionConstraints, ActionResult, RecourseCost, action_constraints, action_cost,
                       cheapest_actions, recourse_cost, target_boxes)
from .ract import (RecourseFitResult, SplitResult, candidate_thresholds, crossing_mask, fit_recourse_forest,
                   fit_recourse_tree, split_gains)
from .forest import Forest, apply, forest_from_arrays, leaf_boxes, predict_proba, sklearn_leaf_slots

__all__ = ["RecourseFitResult", "SplitResult", "candidate_thresholds", "crossing_mask", "fit_recourse_forest", "fit_recourse_tree", "split_gains", "ActionConstraints", "ActionResult", "RecourseCost", "action_constraints", "action_cost", "cheapest_actions", "recourse_cost", "target_boxes", "ReconstructionResult", "is_consistent", "leaf_counts", "reconstruct", "reconstruction_error", "Forest", "apply", "forest_from_arrays", "leaf_boxes", "predict_proba", "sklearn_leaf_slots"]
