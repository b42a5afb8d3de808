"""jaxcore.inverse: imaging inverse problems with plug-and-play priors (SNORE, RED, PnP).

Forward operators with adjoints and data-term gradients/proxes
(:mod:`~jaxcore.inverse.operators`), the paper's tasks as one factory
(:mod:`~jaxcore.inverse.tasks`), denoisers behind one interface ``D(x, sigma)``
(:mod:`~jaxcore.inverse.denoisers`, trained by :mod:`~jaxcore.inverse.training`), step schedules
(:mod:`~jaxcore.inverse.schedules`), the SNORE family and PnP baselines as one solver class per algorithm
under :class:`AbstractRestorer`, run by :func:`restore` as a compiled ``lax.scan``
(:mod:`~jaxcore.inverse.solvers`), the same as functions with one signature
``method(key, y, operator, denoiser, schedule, sigma_y, **options)`` (:mod:`~jaxcore.inverse.restoration`),
:func:`restore_batch` over images and seeds (:mod:`~jaxcore.inverse.batching`) and PSNR/SSIM
(:mod:`~jaxcore.inverse.metrics`).

The workflow: degrade a real image, restore it with SNORE and the shipped DnCNN, score it.

>>> import jax
>>> from jaxcore.datasets import load_image
>>> from jaxcore.inverse import constant_schedule, degrade, load_pretrained, make_task, psnr, snore
>>> x = load_image("camera")[200:232, 200:232]                      # [32, 32, 1] in [0, 1]
>>> task = make_task(jax.random.key(0), "gaussian_blur", x.shape[:2], 10 / 255)
>>> y = degrade(jax.random.key(1), x, task.operator, task.sigma_y)
>>> schedule = constant_schedule(20, sigma=2 * task.sigma_y, alpha=0.7, step_size=0.5 * task.sigma_y**2)
>>> out = snore(jax.random.key(2), y, task.operator, load_pretrained("dncnn"), schedule, task.sigma_y)
>>> bool(psnr(out.x, x) > psnr(y, x))
True
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
from .batching import restore_batch
from .restoration import METHODS, annealed_snore, pnp_hqs, pnp_pgd, red, red_prox, snore, snore_prox
from .schedules import RECOMMENDED, Schedule, annealed_schedule, constant_schedule, recommended_schedule
from .solvers import (
    RED,
    SNORE,
    AbstractRestorer,
    PnPHQS,
    PnPPGD,
    RestorationProblem,
    RestorationResult,
    restore,
)
from .tasks import TASKS, Task, make_task
from .training import (
    TABLE_SEED,
    TABLE_SIGMAS,
    TEST_IMAGES,
    TRAIN_IMAGES,
    DenoiserTrainResult,
    heldout_crops,
    psnr_table,
    train_denoiser,
)

__all__ = [
    "AbstractDenoiser", "AbstractOperator", "AbstractRestorer", "PnPHQS", "PnPPGD", "RED", "SNORE",
    "RestorationProblem", "restore", "Blur", "DenoiserTrainResult", "DnCNN", "GaussianMMSEDenoiser",
    "GradientStepDenoiser", "Identity", "Inpainting", "METHODS", "PRETRAINED", "RECOMMENDED", "RestorationResult", "Schedule",
    "TABLE_SEED", "TABLE_SIGMAS", "TASKS", "TEST_IMAGES", "TRAIN_IMAGES", "TVDenoiser", "Task",
    "add_gaussian_noise", "annealed_schedule", "annealed_snore", "constant_schedule", "conv3x3", "degrade",
    "gaussian_kernel", "heldout_crops", "load_pretrained", "make_task", "motion_kernel", "pnp_hqs", "pnp_pgd",
    "pretrained_info", "psnr", "psnr_table", "random_mask", "recommended_schedule", "red", "red_prox", "restore_batch", "snore",
    "snore_prox", "ssim", "standard_normal", "train_denoiser", "uniform_kernel",
]
