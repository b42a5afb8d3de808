"""jaxcore.inverse: imaging inverse problems with plug-and-play priors (SNORE, RED, PnP).

Forward operators with adjoints and data-term gradients/proxes
(:mod:`~jaxcore.inverse.operators`), denoisers behind one interface ``D(x, sigma)``
(:mod:`~jaxcore.inverse.denoisers`), the SNORE family and PnP baselines as
``lax.scan`` loops (:mod:`~jaxcore.inverse.snore`) and PSNR/SSIM
(:mod:`~jaxcore.inverse.metrics`).
"""

from .denoisers import (
    PRETRAINED,
    AbstractDenoiser,
    DnCNN,
    GaussianMMSEDenoiser,
    GradientStepDenoiser,
    TVDenoiser,
    conv3x3,
    load_pretrained,
    pretrained_info,
)
from .metrics import psnr, ssim
from .operators import (
    AbstractOperator,
    Blur,
    Identity,
    Inpainting,
    add_gaussian_noise,
    degrade,
    gaussian_kernel,
    motion_kernel,
    random_mask,
    standard_normal,
    uniform_kernel,
)
from .snore import (
    METHODS,
    RestorationResult,
    Schedule,
    annealed_schedule,
    annealed_snore,
    constant_schedule,
    pnp_hqs,
    pnp_pgd,
    red,
    restore_batch,
    snore,
    snore_prox,
)

__all__ = [
    "AbstractDenoiser", "AbstractOperator", "Blur", "DnCNN", "GaussianMMSEDenoiser", "GradientStepDenoiser",
    "Identity", "Inpainting", "METHODS", "PRETRAINED", "RestorationResult", "Schedule", "TVDenoiser",
    "add_gaussian_noise", "annealed_schedule", "annealed_snore", "constant_schedule", "conv3x3", "degrade",
    "gaussian_kernel", "load_pretrained", "motion_kernel", "pnp_hqs", "pnp_pgd", "pretrained_info", "psnr",
    "random_mask", "red", "standard_normal", "restore_batch", "snore", "snore_prox", "ssim", "uniform_kernel",
]
