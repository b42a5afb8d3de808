"""Linear forward operators of imaging inverse problems, with adjoints, data-term gradients and proxes.

An observation is ``y = A x + sigma_y n``, ``n ~ N(0, I)``, for an image ``x``
of shape ``[..., H, W, C]``. The data-fidelity term is the Gaussian negative
log-likelihood ``F(x, y) = ||A x - y||^2 / (2 sigma_y^2)``. Every operator is an
:class:`equinox.Module` (a pytree, so it can be vmapped over a batch of
operators) with

- ``op(x)`` = ``A x`` and ``op.adjoint(y)`` = ``A^T y``,
- ``op.data_grad(x, y, sigma_y)`` = ``A^T (A x - y) / sigma_y^2``,
- ``op.data_prox(z, y, sigma_y, tau)`` = ``argmin_x tau F(x, y) + ||x - z||^2 / 2``
  = ``(I + tau/sigma_y^2 A^T A)^{-1} (z + tau/sigma_y^2 A^T y)``, exact (diagonal
  in the Fourier or pixel basis).

Blur kernels: :func:`gaussian_kernel`, :func:`uniform_kernel`, :func:`motion_kernel`.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import threading

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

__all__ = [
    "AbstractOperator",
    "Identity",
    "Blur",
    "Inpainting",
    "gaussian_kernel",
    "uniform_kernel",
    "motion_kernel",
    "random_mask",
    "standard_normal",
    "add_gaussian_noise",
    "degrade",
]


def _is_concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


_TRUSTED = threading.local()


@contextlib.contextmanager
def trusted_values(*values):
    """While tracing inside this block, jaxcore's run-time argument checks (``eqx.error_if``)
    skip exactly these traced values (identity, not equality): values the caller has checked
    once, before a loop. Derived values and the fresh tracers of a jitted callee are still
    checked, so nothing unchecked is cached or reaches a user's own code.

    On a GPU each run-time check inside a loop body is a conditional whose predicate the host
    reads at every iteration, which drains the device queue each time.
    """
    previous = getattr(_TRUSTED, "values", ())
    _TRUSTED.values = previous + tuple(v for v in values if isinstance(v, jax.core.Tracer))
    try:
        yield
    finally:
        _TRUSTED.values = previous


def _is_trusted(value) -> bool:
    return any(value is v for v in getattr(_TRUSTED, "values", ()))


def _check_positive(value, name: str):
    value = jnp.asarray(value)
    if _is_concrete(value):
        v = np.asarray(value)
        if np.any(v < 0) or not np.all(np.isfinite(v)):
            raise ValueError(f"{name} must be finite and >= 0, got {v}")
        return value
    if _is_trusted(value):
        return value
    return eqx.error_if(value, jnp.any(value < 0), f"{name} must be >= 0")


def _check_image_shape(x, shape: tuple[int, ...], name: str, channels: int | None) -> None:
    if x.ndim < 3:
        raise ValueError(f"{name} must have shape [..., H, W, C], got shape {tuple(x.shape)}")
    if tuple(x.shape[-3:-1]) != tuple(shape):
        raise ValueError(f"{name} must have spatial shape (H, W) = {tuple(shape)}, got {tuple(x.shape[-3:-1])}")
    if channels is not None and x.shape[-1] != channels:
        raise ValueError(f"{name} must have {channels} channels (the operator's), got {x.shape[-1]}")


class AbstractOperator(eqx.Module):
    """A linear forward model ``A`` acting on images ``[..., H, W, C]``.

    Subclasses implement ``__call__``, :meth:`adjoint` and :meth:`data_prox`;
    :meth:`data_grad` and :meth:`data_fidelity` follow from them.
    """

    @abc.abstractmethod
    def __call__(self, x: Float[Array, "*batch H W C"]) -> Float[Array, "*batch H W C"]:
        """``A x``."""

    @abc.abstractmethod
    def adjoint(self, y: Float[Array, "*batch H W C"]) -> Float[Array, "*batch H W C"]:
        """``A^T y``."""

    def data_fidelity(self, x, y, sigma_y) -> Array:
        """``F(x, y) = ||A x - y||^2 / (2 sigma_y^2)`` per image, shape ``[...]``."""
        sigma_y = _check_positive(sigma_y, "sigma_y")
        return jnp.sum((self(x) - y) ** 2, axis=(-3, -2, -1)) / (2 * sigma_y**2)

    def data_grad(self, x, y, sigma_y) -> Array:
        """``grad_x F(x, y) = A^T (A x - y) / sigma_y^2``, same shape as ``x``."""
        sigma_y = _check_positive(sigma_y, "sigma_y")
        return self.adjoint(self(x) - y) / sigma_y**2

    @abc.abstractmethod
    def data_prox(self, z, y, sigma_y, tau) -> Array:
        """``prox_{tau F(., y)}(z) = argmin_x tau ||A x - y||^2 / (2 sigma_y^2) + ||x - z||^2 / 2``."""

    def lipschitz(self) -> Array:
        """``||A^T A||_2``, the Lipschitz constant of ``grad F`` times ``sigma_y^2``."""
        return jnp.asarray(1.0)


class Identity(AbstractOperator):
    """``A = I`` (denoising)."""

    def __call__(self, x):
        return x

    def adjoint(self, y):
        return y

    def data_prox(self, z, y, sigma_y, tau):
        r = _check_positive(tau, "tau") / _check_positive(sigma_y, "sigma_y") ** 2
        return (z + r * y) / (1 + r)


def _embed_kernel(kernel: np.ndarray | Array, shape: tuple[int, int]) -> Array:
    """Zero-pad ``[kh, kw, ...]`` to ``shape`` and roll its centre to pixel (0, 0)."""
    kh, kw = kernel.shape[:2]
    h, w = shape
    pad = [(0, h - kh), (0, w - kw)] + [(0, 0)] * (kernel.ndim - 2)
    big = jnp.pad(jnp.asarray(kernel), pad)
    return jnp.roll(big, (-(kh // 2), -(kw // 2)), axis=(0, 1))


class Blur(AbstractOperator):
    """Blur by periodic (circular) convolution with a kernel, computed with the FFT.

    ``(A x)[i, j, c] = sum_{u, v} k[u, v] x[(i - u + kh//2) mod H, (j - v + kw//2) mod W, c]``,
    i.e. ``A = F^{-1} diag(k_hat) F``; the adjoint uses ``conj(k_hat)`` and the
    data prox is ``F^{-1}[(z_hat + r conj(k_hat) y_hat) / (1 + r |k_hat|^2)]``, ``r = tau / sigma_y^2``.

    Attributes:
        kernel_fft: ``[H, W//2 + 1, 1 or C]`` real-FFT of the centred, zero-padded kernel.
        kernel: the ``[kh, kw, 1 or C]`` kernel itself (for display and baselines).
        shape: ``(H, W)`` (static).
    """

    kernel_fft: Array
    kernel: Array
    shape: tuple[int, int] = eqx.field(static=True)

    def __init__(self, kernel: Float[Array, "kh kw"] | Float[Array, "kh kw C"], shape: tuple[int, int]):
        """Build the operator for images of spatial shape ``shape``.

        Args:
            kernel: ``[kh, kw]`` (shared by all channels) or ``[kh, kw, C]``
                (one per channel); ``kh <= H``, ``kw <= W``. Not renormalised.
            shape: ``(H, W)``.

        Raises:
            ValueError: kernel not 2-D/3-D, larger than the image, or not finite.
        """
        kernel = jnp.asarray(kernel)
        if not jnp.issubdtype(kernel.dtype, jnp.floating):
            kernel = kernel.astype(jnp.float32)
        if kernel.ndim not in (2, 3):
            raise ValueError(f"kernel must have shape [kh, kw] or [kh, kw, C], got shape {tuple(kernel.shape)}")
        shape = tuple(int(s) for s in shape)
        if len(shape) != 2 or kernel.shape[0] > shape[0] or kernel.shape[1] > shape[1]:
            raise ValueError(f"kernel of shape {tuple(kernel.shape[:2])} must fit in the image shape {shape}")
        if _is_concrete(kernel) and not np.all(np.isfinite(np.asarray(kernel))):
            raise ValueError("kernel must be finite")
        if kernel.ndim == 2:
            kernel = kernel[..., None]
        self.kernel = kernel
        self.shape = shape
        self.kernel_fft = jnp.fft.rfft2(_embed_kernel(kernel, shape), axes=(0, 1))

    @property
    def channels(self) -> int | None:
        c = self.kernel.shape[-1]
        return None if c == 1 else c

    def _apply(self, x, kfft):
        _check_image_shape(x, self.shape, "x", self.channels)
        xf = jnp.fft.rfft2(x, axes=(-3, -2))
        return jnp.fft.irfft2(xf * kfft.astype(xf.dtype), s=self.shape, axes=(-3, -2)).astype(x.dtype)

    def __call__(self, x):
        return self._apply(x, self.kernel_fft)

    def adjoint(self, y):
        return self._apply(y, jnp.conj(self.kernel_fft))

    def data_prox(self, z, y, sigma_y, tau):
        _check_image_shape(z, self.shape, "z", self.channels)
        _check_image_shape(y, self.shape, "y", self.channels)
        r = _check_positive(tau, "tau") / _check_positive(sigma_y, "sigma_y") ** 2
        r = jnp.asarray(r, z.dtype)
        zf = jnp.fft.rfft2(z, axes=(-3, -2))
        yf = jnp.fft.rfft2(y, axes=(-3, -2))
        k = self.kernel_fft.astype(zf.dtype)
        xf = (zf + r * jnp.conj(k) * yf) / (1 + r * jnp.abs(k) ** 2)
        return jnp.fft.irfft2(xf, s=self.shape, axes=(-3, -2)).astype(z.dtype)

    def lipschitz(self):
        return jnp.max(jnp.abs(self.kernel_fft)) ** 2


class Inpainting(AbstractOperator):
    """Pixel masking: ``A x = m * x`` with a binary mask ``m`` (1 = observed).

    ``A`` is an orthogonal projection, so ``A^T = A`` and the data prox is
    ``(z + r m y) / (1 + r m)``, ``r = tau / sigma_y^2``, pixelwise.

    Attributes:
        mask: ``[H, W, 1]`` (same mask for all channels) or ``[H, W, C]``, float 0/1.
    """

    mask: Array

    def __init__(self, mask: Float[Array, "H W"] | Float[Array, "H W C"]):
        """Args:
            mask: ``[H, W]``, ``[H, W, 1]`` or ``[H, W, C]``; nonzero = observed.

        Raises:
            ValueError: mask with fewer than 2 or more than 3 dimensions.
        """
        mask = jnp.asarray(mask)
        if mask.ndim == 2:
            mask = mask[..., None]
        if mask.ndim != 3:
            raise ValueError(f"mask must have shape [H, W] or [H, W, C], got shape {tuple(mask.shape)}")
        self.mask = (mask != 0).astype(jnp.float32)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.mask.shape[:2])

    def _check(self, x, name):
        c = self.mask.shape[-1]
        _check_image_shape(x, self.shape, name, None if c == 1 else c)

    def __call__(self, x):
        self._check(x, "x")
        return x * self.mask.astype(x.dtype)

    def adjoint(self, y):
        return self(y)

    def data_prox(self, z, y, sigma_y, tau):
        self._check(z, "z")
        self._check(y, "y")
        r = _check_positive(tau, "tau") / _check_positive(sigma_y, "sigma_y") ** 2
        m = self.mask.astype(z.dtype)
        return (z + r * m * y) / (1 + r * m)


def gaussian_kernel(size: int, std: float) -> Array:
    """Normalised isotropic Gaussian blur kernel ``[size, size]``, ``k ~ exp(-|u|^2 / (2 std^2))``.

    Raises:
        ValueError: ``size`` not a positive odd integer or ``std <= 0``.
    """
    if not (isinstance(size, (int, np.integer)) and size > 0 and size % 2 == 1):
        raise ValueError(f"size must be a positive odd integer, got {size!r}")
    if not std > 0:
        raise ValueError(f"std must be > 0, got {std}")
    t = np.arange(size) - size // 2
    g = np.exp(-0.5 * (t[:, None] ** 2 + t[None, :] ** 2) / std**2)
    return jnp.asarray(g / g.sum(), jnp.float32)


def uniform_kernel(size: int) -> Array:
    """Normalised box (uniform) blur kernel ``[size, size]`` with entries ``1/size^2``.

    Raises:
        ValueError: ``size`` not a positive integer.
    """
    if not (isinstance(size, (int, np.integer)) and size > 0):
        raise ValueError(f"size must be a positive integer, got {size!r}")
    return jnp.full((size, size), 1.0 / size**2, jnp.float32)


def motion_kernel(key, size: int = 25, *, n_steps: int = 200, intensity: float = 0.5) -> Array:
    """A random camera-shake (motion) blur kernel ``[size, size]``, normalised.

    A 2-D trajectory of ``n_steps`` points with random-walk velocity
    ``v_{t+1} = (1 - intensity/2) v_t + intensity g_t`` (``g_t ~ N(0, I)``, unit
    steps) is centred, scaled into the ``size x size`` box and splatted with
    bilinear weights; the result is normalised to sum 1.

    Args:
        key: PRNG key.
        size: kernel side (odd).
        n_steps: trajectory samples (static).
        intensity: in (0, 1]; larger gives more erratic trajectories.

    Returns:
        ``[size, size]`` float32 kernel, non-negative, summing to 1.

    Raises:
        ValueError: ``size`` not a positive odd integer, ``intensity`` outside (0, 1].

    References:
        Boracchi & Foi, "Modeling the performance of image restoration from
        motion blur", IEEE TIP 2012 (random-trajectory camera shake).
    """
    if not (isinstance(size, (int, np.integer)) and size >= 3 and size % 2 == 1):
        raise ValueError(f"size must be an odd integer >= 3, got {size!r}")
    if not 0 < intensity <= 1:
        raise ValueError(f"intensity must be in (0, 1], got {intensity}")
    return _motion_kernel(key, jnp.float32(intensity), size=int(size), n_steps=int(n_steps))


@functools.partial(jax.jit, static_argnames=("size", "n_steps"))
def _motion_kernel(key, intensity, *, size: int, n_steps: int) -> Array:
    """:func:`motion_kernel` as one compiled program per ``(size, n_steps)``."""
    k0, k1 = jax.random.split(key)
    v0 = standard_normal(k0, (2,))
    g = standard_normal(k1, (n_steps, 2))

    def step(carry, gt):
        p, v = carry
        v = (1 - intensity / 2) * v + intensity * gt
        v = v / (jnp.linalg.norm(v) + 1e-12)
        return (p + v, v), p + v

    _, path = jax.lax.scan(step, (jnp.zeros(2), v0 / (jnp.linalg.norm(v0) + 1e-12)), g)
    path = path - 0.5 * (path.max(0) + path.min(0))
    extent = jnp.max(path.max(0) - path.min(0))
    path = path * ((size - 1) * 0.9 / jnp.maximum(extent, 1e-6)) + (size - 1) / 2
    i0 = jnp.clip(jnp.floor(path).astype(jnp.int32), 0, size - 2)
    f = jnp.clip(path - i0, 0.0, 1.0)
    k = jnp.zeros((size, size))
    for di in (0, 1):
        for dj in (0, 1):
            w = (f[:, 0] if di else 1 - f[:, 0]) * (f[:, 1] if dj else 1 - f[:, 1])
            k = k.at[i0[:, 0] + di, i0[:, 1] + dj].add(w)
    return (k / jnp.sum(k)).astype(jnp.float32)


def random_mask(key, shape: tuple[int, int], missing: float = 0.5, *, channels: int = 1) -> Array:
    """A random inpainting mask: each pixel missing (0) with probability ``missing``.

    Args:
        key: PRNG key.
        shape: ``(H, W)``.
        missing: fraction of missing pixels in [0, 1].
        channels: 1 (whole pixels missing) or C (channels missing independently).

    Returns:
        ``[H, W, channels]`` float32 of 0/1 (1 = observed).

    Raises:
        ValueError: ``missing`` outside [0, 1].
    """
    if not 0 <= missing <= 1:
        raise ValueError(f"missing must be in [0, 1], got {missing}")
    with jax.threefry_partitionable(False):  # as standard_normal: ~5x cheaper to compile on CPU
        u = jax.random.uniform(key, tuple(shape) + (channels,))
    return (u >= missing).astype(jnp.float32)


def _check_unit_range(x, name: str):
    if _is_concrete(x):
        v = np.asarray(x)
        if v.size and (v.min() < 0 or v.max() > 1):
            raise ValueError(
                f"{name} must lie in [0, 1] when clip=False, got values in [{v.min():.4g}, {v.max():.4g}]"
            )
        return x
    return eqx.error_if(x, jnp.any((x < 0) | (x > 1)), f"{name} must lie in [0, 1] when clip=False")


def standard_normal(key, shape: tuple[int, ...], dtype=jnp.float32) -> Array:
    """``N(0, I)`` noise of ``shape``: the noise source of this package's restoration loops.

    ``jax.random.normal`` under the non-partitionable threefry lowering, whatever the
    global ``jax_threefry_partitionable`` setting, so the same key gives the same noise
    everywhere. Measured on 2 CPU cores (jax 0.10): it compiles in ~0.3 s instead of
    ~1.5 s (a cost every restoration program pays once) and draws 2 x 256 x 256 x 3
    normals in 4 ms instead of 12 ms. Under ``jit`` with sharded inputs XLA may
    gather the key rather than partition the draw; the values are the same.

    Args:
        key: PRNG key (threefry).
        shape: output shape.
        dtype: float dtype.

    Returns:
        ``shape`` array of standard normal draws.
    """
    with jax.threefry_partitionable(False):
        return jax.random.normal(key, shape, dtype)


def add_gaussian_noise(key, x: Float[Array, "*batch H W C"], sigma) -> Array:
    """``x + sigma n`` with ``n ~ N(0, I)`` of ``x``'s shape and dtype (drawn by :func:`standard_normal`).

    Raises:
        ValueError: ``sigma < 0``.
    """
    sigma = _check_positive(sigma, "sigma")
    return x + jnp.asarray(sigma, x.dtype) * standard_normal(key, x.shape, x.dtype)


def degrade(key, x: Float[Array, "*batch H W C"], operator: AbstractOperator, sigma_y, *, clip: bool = False):
    """Simulate an observation ``y = A x + sigma_y n`` of a clean image.

    Args:
        key: PRNG key of the noise.
        x: clean image(s) ``[..., H, W, C]`` in [0, 1].
        operator: the forward model ``A``.
        sigma_y: noise standard deviation (pixel units of a [0, 1] image), >= 0.
        clip: clip ``x`` to [0, 1] first; if False, ``x`` outside [0, 1] is an error.

    Returns:
        ``y`` with ``x``'s shape.

    Raises:
        ValueError: ``x`` outside [0, 1] with ``clip=False``; ``sigma_y < 0``; shape
            or channel mismatch with ``operator``.
    """
    sigma_y = _check_positive(sigma_y, "sigma_y")
    x = jnp.asarray(x)
    x = jnp.clip(x, 0.0, 1.0) if clip else _check_unit_range(x, "x")
    return add_gaussian_noise(key, operator(x), sigma_y)
