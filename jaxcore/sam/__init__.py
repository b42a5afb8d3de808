"""jaxcore.sam: sharpness-aware minimization (SAM, ASAM, GSAM, OBF) for optax.

See :func:`step` / :func:`sharpness_aware` for the training step,
:mod:`jaxcore.sam.transforms` for optax transformations and
:mod:`jaxcore.sam.sharpness` for sharpness measures.
"""

from .perturbations import (
    ASAM,
    GSAM,
    OBF,
    SAM,
    Perturbation,
    RandomDirection,
    asam_perturbation,
    default_weight_mask,
    global_norm,
    gsam_direction,
    lr_proportional_rho,
    obf_alpha,
    obf_cotangent,
    obf_loss,
    random_perturbation,
    rho_at,
    safe_normalize,
    sam_perturbation,
    tree_dot,
)
from .sharpness import PowerIterationResult, hessian_max_eigenvalue, hessian_vector_product, m_sharpness
from .step import SAMState, SharpnessAware, StepInfo, init, sharpness_aware, step
from .transforms import (
    SharpnessAwareTransformState,
    asam_adversary,
    normalize,
    sam_adversary,
    sharpness_aware_transform,
)

__all__ = [
    "ASAM", "GSAM", "OBF", "SAM", "Perturbation", "RandomDirection",
    "asam_perturbation", "default_weight_mask", "global_norm", "gsam_direction", "lr_proportional_rho",
    "obf_alpha", "obf_cotangent", "obf_loss", "random_perturbation", "rho_at", "safe_normalize",
    "sam_perturbation", "tree_dot",
    "PowerIterationResult", "hessian_max_eigenvalue", "hessian_vector_product", "m_sharpness",
    "SAMState", "SharpnessAware", "StepInfo", "init", "sharpness_aware", "step",
    "SharpnessAwareTransformState", "asam_adversary", "normalize", "sam_adversary", "sharpness_aware_transform",
]
