"""jaxcore.effects: average treatment effects by optimal kernel balancing and CInA attention."""

from .data import EffectData, effect_data, stack_datasets
from .dual import BalancingResult, balancing_dual, balancing_objective
from .kernels import KERNELS, kernel_matrix, standardize, weighted_mmd
