"""The restoration tasks of the SNORE paper's experiments as one factory: operator, noise level, display kernel.

:func:`make_task` builds a named degradation (Gaussian, uniform or motion blur; inpainting) for
images of a given size. The task's operator is built for computation: a :class:`Blur` keeps only
the kernel's FFT (``keep_kernel=False``), so the 9 x 9 and 25 x 25 blurs are pytrees of one
structure and shapes and share one compilation of every restoration program; the kernel itself
(for display and for baselines that convolve directly) is the task's ``kernel``.
"""

from __future__ import annotations

from typing import NamedTuple

from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import check_choice, check_int, check_key, check_scalar, expected

from .operators import _check_hw, AbstractOperator, Blur, Inpainting, gaussian_kernel, motion_kernel, random_mask, uniform_kernel

__all__ = ["TASKS", "Task", "make_task"]

#: The tasks :func:`make_task` builds, name -> description.
TASKS: dict[str, str] = {
    "gaussian_blur": "Gaussian blur 9x9, std 1.6",
    "uniform_blur": "uniform blur 9x9",
    "motion_blur": "motion blur 25x25",
    "inpainting": "inpainting, 50% pixels missing",
}


class Task(NamedTuple):
    """A degradation ``y = A x + sigma_y n`` of images ``[H, W, C]``.

    Attributes:
        name: a key of :data:`TASKS`.
        description: its description (``TASKS[name]``).
        operator: the forward model ``A`` for computation (a :class:`Blur` without its kernel
            attribute, or an :class:`Inpainting`).
        sigma_y: the observation noise standard deviation (pixel units of a [0, 1] image), a float.
        kernel: the blur kernel ``[kh, kw]`` (float32, sums to 1) for display, or None (inpainting).
    """

    name: str
    description: str
    operator: AbstractOperator
    sigma_y: float
    kernel: Float[Array, "kh kw"] | None


def make_task(key: PRNGKeyArray, name: str, shape: tuple[int, int], sigma_y: float) -> Task:
    """The named restoration task for images of spatial shape ``shape`` and noise level ``sigma_y``.

    - "gaussian_blur": :func:`gaussian_kernel` ``(9, 1.6)``;
    - "uniform_blur": :func:`uniform_kernel` ``(9)``;
    - "motion_blur": :func:`motion_kernel` ``(key, 25)``, a random camera-shake trajectory;
    - "inpainting": :func:`random_mask` ``(key, shape, 0.5)``, each pixel missing with probability 1/2.

    Args:
        key: PRNG key of the random tasks (motion blur, inpainting); the other tasks do not use it.
        name: a key of :data:`TASKS`.
        shape: ``(H, W)`` in pixels (each side at least the kernel's: 25 for motion blur, 9 for the others).
        sigma_y: observation noise standard deviation (pixel units), finite and >= 0.

    Returns:
        A :class:`Task`.

    Raises:
        TypeError: ``key`` not a PRNG key; ``shape`` not two ints.
        ValueError: unknown ``name``; ``sigma_y`` not finite and >= 0; ``shape`` smaller than the kernel.

    References:
        Renaud, Prost, Leclaire & Papadakis, ICML 2024, Section 5 (deblurring with Gaussian,
        uniform and motion kernels; inpainting with half the pixels missing).

    Examples:
        >>> import jax
        >>> from jaxcore.inverse import make_task
        >>> task = make_task(jax.random.key(0), "gaussian_blur", (32, 32), 10 / 255)
        >>> task.kernel.shape, task.operator.kernel is None, round(task.sigma_y * 255, 6)
        ((9, 9), True, 10.0)
        >>> make_task(jax.random.key(0), "inpainting", (32, 32), 0.0).operator.mask.shape
        (32, 32, 1)
    """
    key = check_key(key)
    name = check_choice(name, "name", tuple(TASKS))
    shape = _check_hw(shape, "shape")
    sigma_y = check_scalar(sigma_y, "sigma_y", nonnegative=True)
    if name == "inpainting":
        return Task(name, TASKS[name], Inpainting(random_mask(key, shape, 0.5)), sigma_y, None)
    if name == "gaussian_blur":
        kernel = gaussian_kernel(9, 1.6)
    elif name == "uniform_blur":
        kernel = uniform_kernel(9)
    else:
        kernel = motion_kernel(key, 25)
    if min(shape) < kernel.shape[0]:
        raise ValueError(expected("shape", f"sides >= {kernel.shape[0]} (the {name} kernel's)", shape))
    return Task(name, TASKS[name], Blur(kernel, shape, keep_kernel=False), sigma_y, kernel)
