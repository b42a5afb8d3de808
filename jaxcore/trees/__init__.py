"""jaxcore.trees: tree ensembles as JAX kernels; recourse-aware trees (RACT) and forest reconstruction (DRAFT)."""

from .reconstruct import ReconstructionResult, is_consistent, leaf_counts, reconstruct, reconstruction_error
from .recourse import (ActionConstraints, ActionResult, RecourseCost, action_constraints, action_cost,
                       cheapest_actions, recourse_cost, target_boxes)
from .ract import (RecourseFitResult, SplitResult, candidate_thresholds, crossing_mask, fit_recourse_forest,
                   fit_recourse_tree, split_gains)
from .forest import Forest, apply, forest_from_arrays, leaf_boxes, predict_proba, sklearn_leaf_slots

__all__ = ["RecourseFitResult", "SplitResult", "candidate_thresholds", "crossing_mask", "fit_recourse_forest", "fit_recourse_tree", "split_gains", "ActionConstraints", "ActionResult", "RecourseCost", "action_constraints", "action_cost", "cheapest_actions", "recourse_cost", "target_boxes", "ReconstructionResult", "is_consistent", "leaf_counts", "reconstruct", "reconstruction_error", "Forest", "apply", "forest_from_arrays", "leaf_boxes", "predict_proba", "sklearn_leaf_slots"]
