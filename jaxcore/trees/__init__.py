"""jaxcore.trees: tree ensembles as JAX kernels; recourse-aware trees (RACT) and forest reconstruction (DRAFT)."""

from .reconstruct import ReconstructionResult, is_consistent, leaf_counts, reconstruct, reconstruction_error
from .forest import Forest, apply, forest_from_arrays, leaf_boxes, predict_proba, sklearn_leaf_slots

__all__ = ["ReconstructionResult", "is_consistent", "leaf_counts", "reconstruct", "reconstruction_error", "Forest", "apply", "forest_from_arrays", "leaf_boxes", "predict_proba", "sklearn_leaf_slots"]
