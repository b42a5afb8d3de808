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

Dtypes: images are float arrays (integer images are refused: convert explicitly, e.g. ``x / 255``);
half-precision images (float16, bfloat16) are computed in float32 internally (the FFT has no
half-precision form) and the result is cast back to the input dtype. ``sigma_y`` of the data term
must be > 0 (it divides by ``sigma_y^2``); ``tau >= 0``.
"""

from __future__ import annotations

import abc
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import (
    check_bool,
    check_finite,
    check_float_dtype,
    check_int,
    check_key,
    check_scalar,
    checked_positive,
    checked_range,
    expected,
    is_concrete,
)

from ._checks import as_array, compute_dtype

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


def _check_nonnegative(value, name: str, *, positive: bool = False):
    """``value`` (a noise level or step size) checked finite and >= 0 (> 0 with ``positive``): on the host when
    concrete, else by one run-time check, skipped for values a caller checked once before a loop
    (:func:`jaxcore._util.trusted_values`)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = jnp.asarray(value)  # weakly typed: keeps the image's dtype
    elif not isinstance(value, jax.Array):
        value = as_array(value, name, integers=True, finite=False)
    elif not (jnp.issubdtype(value.dtype, jnp.floating) or jnp.issubdtype(value.dtype, jnp.integer)):
        raise TypeError(expected(name, "a real number or array", f"dtype {value.dtype}", raw=True))
    return checked_positive(value, name, allow_zero=not positive)


def _check_sigma_y(value):
    return _check_scalar_level(value, "sigma_y", positive=True)


def _check_image_shape(x, shape: tuple[int, ...], name: str, channels: int | None):
    """``x`` as a float image array checked against the operator's spatial shape and channels; returned."""
    x = as_array(x, name)
    if x.ndim < 3:
        raise ValueError(expected(name, "an image of shape [..., H, W, C]", f"shape {tuple(x.shape)}", raw=True))
    if tuple(x.shape[-3:-1]) != tuple(shape):
        raise ValueError(expected(name, f"spatial shape (H, W) = {tuple(shape)} (the operator's)",
                                  f"{tuple(x.shape[-3:-1])}", raw=True))
    if channels is not None and x.shape[-1] != channels:
        raise ValueError(expected(name, f"{channels} channels (the operator's)", f"{x.shape[-1]}", raw=True))
    return x


def _residual(ax, y):
    """``A x - y``; ValueError naming ``y`` when its shape does not match the measurement ``A x``."""
    try:
        jnp.broadcast_shapes(ax.shape, y.shape)
    except ValueError:
        raise ValueError(expected("y", f"a measurement of the shape of A x, {tuple(ax.shape)}",
                                  f"shape {tuple(y.shape)}", raw=True)) from None
    return ax - y


def _check_any_image(x, name: str):
    x = as_array(x, name)
    if x.ndim < 3:
        raise ValueError(expected(name, "an image of shape [..., H, W, C]", f"shape {tuple(x.shape)}", raw=True))
    return x


class AbstractOperator(eqx.Module):
    """A linear forward model ``A`` acting on images ``[..., H, W, C]``.

    Subclasses implement ``__call__``, :meth:`adjoint` and :meth:`data_prox`;
    :meth:`data_grad` and :meth:`data_fidelity` follow from them. The methods are plain traced
    code (no ``jit`` of their own): they are the building blocks of the compiled restoration loops.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import Identity
        >>> op = Identity()
        >>> x, y = jnp.full((4, 4, 1), 0.5), jnp.zeros((4, 4, 1))
        >>> float(op.data_fidelity(x, y, 0.5))  # ||x - y||^2 / (2 sigma_y^2) = 16 * 0.25 / 0.5
        8.0
    """

    @abc.abstractmethod
    def __call__(self, x: Float[Array, "*batch H W C"]) -> Float[Array, "*batch H W C"]:
        """``A x``."""

    @abc.abstractmethod
    def adjoint(self, y: Float[Array, "*batch H W C"]) -> Float[Array, "*batch H W C"]:
        """``A^T y``."""

    def data_fidelity(self, x, y, sigma_y) -> Array:
        """``F(x, y) = ||A x - y||^2 / (2 sigma_y^2)`` per image, shape ``[...]``.

        Raises:
            TypeError: ``x`` or ``y`` not a float array.
            ValueError: ``sigma_y`` not finite and > 0; shape mismatch.
        """
        sigma_y = _check_sigma_y(sigma_y)
        y = _check_any_image(y, "y")
        return jnp.sum(_residual(self(x), y) ** 2, axis=(-3, -2, -1)) / (2 * sigma_y**2)

    def data_grad(self, x, y, sigma_y) -> Array:
        """``grad_x F(x, y) = A^T (A x - y) / sigma_y^2``, same shape as ``x``.

        Raises:
            TypeError: ``x`` or ``y`` not a float array.
            ValueError: ``sigma_y`` not finite and > 0; shape mismatch.
        """
        sigma_y = _check_sigma_y(sigma_y)
        y = _check_any_image(y, "y")
        return self.adjoint(_residual(self(x), y)) / sigma_y**2

    @abc.abstractmethod
    def data_prox(self, z, y, sigma_y, tau) -> Array:
        """``prox_{tau F(., y)}(z) = argmin_x tau ||A x - y||^2 / (2 sigma_y^2) + ||x - z||^2 / 2``."""

    def lipschitz(self) -> Array:
        """``||A^T A||_2``, the Lipschitz constant of ``grad F`` times ``sigma_y^2``."""
        return jnp.asarray(1.0)


class Identity(AbstractOperator):
    """``A = I`` (denoising).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import Identity
        >>> z, y = jnp.zeros((2, 2, 1)), jnp.ones((2, 2, 1))
        >>> float(Identity().data_prox(z, y, 1.0, 1.0)[0, 0, 0])  # (z + r y) / (1 + r), r = 1
        0.5
    """

    def __call__(self, x):
        return _check_any_image(x, "x")

    def adjoint(self, y):
        return _check_any_image(y, "y")

    def data_prox(self, z, y, sigma_y, tau):
        z = _check_any_image(z, "z")
        y = _check_any_image(y, "y")
        if z.shape != y.shape:
            raise ValueError(expected("y", f"z's shape {tuple(z.shape)}", f"shape {tuple(y.shape)}", raw=True))
        r = _check_scalar_level(tau, "tau") / _check_sigma_y(sigma_y) ** 2
        return ((z + r * y) / (1 + r)).astype(z.dtype)


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
        kernel_fft: ``[H, W//2 + 1, 1 or C]`` real-FFT of the centred, zero-padded kernel (the only
            array the computation uses).
        kernel: the ``[kh, kw, 1 or C]`` kernel itself (for display and baselines), or None when built
            with ``keep_kernel=False``: then blurs of different kernel sizes are pytrees of one
            structure and shapes, and share one compilation of any program they enter.
        shape: ``(H, W)`` (static).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import Blur, uniform_kernel
        >>> op = Blur(uniform_kernel(3), (8, 8))
        >>> x = jnp.zeros((8, 8, 1)).at[4, 4, 0].set(9.0)
        >>> float(op(x)[3:6, 3:6, 0].sum()), float(op(x)[4, 4, 0])  # a point spread over 3 x 3
        (9.0, 1.0)
        >>> Blur(uniform_kernel(3), (8, 8), keep_kernel=False).kernel is None
        True
    """

    kernel_fft: Array
    kernel: Array | None
    shape: tuple[int, int] = eqx.field(static=True)

    def __init__(self, kernel: Float[Array, "kh kw"] | Float[Array, "kh kw C"], shape: tuple[int, int], *,
                 keep_kernel: bool = True):
        """Build the operator for images of spatial shape ``shape``.

        Args:
            kernel: ``[kh, kw]`` (shared by all channels) or ``[kh, kw, C]``
                (one per channel); ``kh <= H``, ``kw <= W``. Not renormalised.
            shape: ``(H, W)``.
            keep_kernel: keep ``kernel`` as an attribute (True) or only its FFT (False).

        Raises:
            TypeError: ``kernel`` not a real array; ``shape`` not two ints.
            ValueError: kernel not 2-D/3-D, larger than the image, or not finite; ``shape`` sides < 1.
        """
        kernel = as_array(kernel, "kernel", integers=True)
        if kernel.dtype in (jnp.float16, jnp.bfloat16):  # the FFT runs in float32
            kernel = kernel.astype(jnp.float32)
        if kernel.ndim not in (2, 3):
            raise ValueError(expected("kernel", "shape [kh, kw] or [kh, kw, C]", f"shape {tuple(kernel.shape)}",
                                      raw=True))
        shape = _check_hw(shape, "shape")
        if kernel.shape[0] > shape[0] or kernel.shape[1] > shape[1]:
            raise ValueError(expected("kernel", f"a kernel that fits in the image shape {shape}",
                                      f"shape {tuple(kernel.shape[:2])}", raw=True))
        if is_concrete(kernel) and not np.all(np.isfinite(np.asarray(kernel))):
            raise ValueError(expected("kernel", "finite values", "a NaN or inf entry", raw=True))
        if kernel.ndim == 2:
            kernel = kernel[..., None]
        self.kernel = kernel if check_bool(keep_kernel, "keep_kernel") else None
        self.shape = shape
        self.kernel_fft = jnp.fft.rfft2(_embed_kernel(kernel, shape), axes=(0, 1))

    @property
    def channels(self) -> int | None:
        """The kernel's channel count C, or None for a kernel shared by all channels."""
        c = self.kernel_fft.shape[-1]
        return None if c == 1 else c

    def _apply(self, x, kfft, name):
        x = _check_image_shape(x, self.shape, name, self.channels)
        xf = jnp.fft.rfft2(x.astype(compute_dtype(x.dtype)), axes=(-3, -2))
        return jnp.fft.irfft2(xf * kfft.astype(xf.dtype), s=self.shape, axes=(-3, -2)).astype(x.dtype)

    def __call__(self, x):
        return self._apply(x, self.kernel_fft, "x")

    def adjoint(self, y):
        return self._apply(y, jnp.conj(self.kernel_fft), "y")

    def data_prox(self, z, y, sigma_y, tau):
        z = _check_image_shape(z, self.shape, "z", self.channels)
        y = _check_image_shape(y, self.shape, "y", self.channels)
        r = _check_scalar_level(tau, "tau") / _check_sigma_y(sigma_y) ** 2
        work = compute_dtype(z.dtype)
        r = jnp.asarray(r, work)
        zf = jnp.fft.rfft2(z.astype(work), axes=(-3, -2))
        yf = jnp.fft.rfft2(y.astype(work), axes=(-3, -2))
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
        mask: ``[H, W, 1]`` (same mask for all channels) or ``[H, W, C]``, float32 0/1.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import Inpainting
        >>> op = Inpainting(jnp.array([[1.0, 0.0], [0.0, 1.0]]))
        >>> op(jnp.ones((2, 2, 3)))[..., 0].tolist()
        [[1.0, 0.0], [0.0, 1.0]]
    """

    mask: Array

    def __init__(self, mask: Float[Array, "H W"] | Float[Array, "H W C"]):
        """Args:
            mask: ``[H, W]``, ``[H, W, 1]`` or ``[H, W, C]``; nonzero = observed.

        Raises:
            TypeError: ``mask`` not a real array.
            ValueError: mask with fewer than 2 or more than 3 dimensions, or a NaN or inf entry.
        """
        mask = as_array(mask, "mask", integers=True)
        if mask.ndim == 2:
            mask = mask[..., None]
        if mask.ndim != 3:
            raise ValueError(expected("mask", "shape [H, W] or [H, W, C]", f"shape {tuple(mask.shape)}", raw=True))
        self.mask = (mask != 0).astype(jnp.float32)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.mask.shape[:2])

    def _check(self, x, name):
        c = self.mask.shape[-1]
        return _check_image_shape(x, self.shape, name, None if c == 1 else c)

    def __call__(self, x):
        x = self._check(x, "x")
        return x * self.mask.astype(x.dtype)

    def adjoint(self, y):
        y = self._check(y, "y")
        return y * self.mask.astype(y.dtype)

    def data_prox(self, z, y, sigma_y, tau):
        z = self._check(z, "z")
        y = self._check(y, "y")
        r = _check_scalar_level(tau, "tau") / _check_sigma_y(sigma_y) ** 2
        work = compute_dtype(z.dtype)
        m = self.mask.astype(work)
        r = jnp.asarray(r, work)
        return ((z.astype(work) + r * m * y.astype(work)) / (1 + r * m)).astype(z.dtype)


def _check_hw(shape, name: str) -> tuple[int, int]:
    """``(H, W)``: two ints >= 1."""
    try:
        parts = tuple(shape)
    except TypeError:
        raise TypeError(expected(name, "(H, W), two ints", shape)) from None
    if len(parts) != 2:
        raise TypeError(expected(name, "(H, W), two ints", shape))
    return tuple(check_int(s, name, minimum=1) for s in parts)


def _check_kernel_size(size, name: str = "size", *, odd: bool, minimum: int = 1) -> int:
    size = check_int(size, name, minimum=minimum)
    if odd and size % 2 != 1:
        raise ValueError(expected(name, f"an odd int >= {minimum}", size))
    return size


def gaussian_kernel(size: int, std: float) -> Array:
    """Normalised isotropic Gaussian blur kernel ``[size, size]``, ``k ~ exp(-|u|^2 / (2 std^2))``.

    Args:
        size: kernel side in pixels, a positive odd int.
        std: standard deviation in pixels, > 0.

    Returns:
        ``[size, size]`` float32, non-negative, summing to 1.

    Raises:
        TypeError: ``size`` not an int.
        ValueError: ``size`` not positive and odd, or ``std`` not finite and > 0.

    Examples:
        >>> from jaxcore.inverse import gaussian_kernel
        >>> k = gaussian_kernel(5, 1.0)
        >>> k.shape, round(float(k.sum()), 6), bool(k[2, 2] == k.max())
        ((5, 5), 1.0, True)
    """
    size = _check_kernel_size(size, odd=True)
    std = check_scalar(std, "std", positive=True)
    t = np.arange(size) - size // 2
    g = np.exp(-0.5 * (t[:, None] ** 2 + t[None, :] ** 2) / std**2)
    return jnp.asarray(g / g.sum(), jnp.float32)


def uniform_kernel(size: int) -> Array:
    """Normalised box (uniform) blur kernel ``[size, size]`` with entries ``1/size^2``.

    Args:
        size: kernel side in pixels, a positive int.

    Returns:
        ``[size, size]`` float32.

    Raises:
        TypeError: ``size`` not an int.
        ValueError: ``size < 1``.

    Examples:
        >>> from jaxcore.inverse import uniform_kernel
        >>> uniform_kernel(3).shape, round(float(uniform_kernel(3)[0, 0]) * 9, 6)
        ((3, 3), 1.0)
    """
    size = _check_kernel_size(size, odd=False)
    return jnp.full((size, size), 1.0 / size**2, jnp.float32)


def motion_kernel(key: PRNGKeyArray, size: int = 25, *, num_steps: int = 200, intensity: float = 0.5) -> Array:
    """A random camera-shake (motion) blur kernel ``[size, size]``, normalised.

    A 2-D trajectory of ``num_steps`` points with random-walk velocity
    ``v_{t+1} = (1 - intensity/2) v_t + intensity g_t`` (``g_t ~ N(0, I)``, unit
    steps) is centred, scaled into the ``size x size`` box and splatted with
    bilinear weights; the result is normalised to sum 1.

    Args:
        key: PRNG key.
        size: kernel side in pixels (odd, >= 3).
        num_steps: trajectory points (static: one compilation per value).
        intensity: in (0, 1]; larger gives more erratic trajectories.

    Returns:
        ``[size, size]`` float32 kernel, non-negative, summing to 1.

    Raises:
        TypeError: ``key`` not a PRNG key; ``size`` or ``num_steps`` not an int.
        ValueError: ``size`` not an odd int >= 3, ``num_steps < 1``, ``intensity`` outside (0, 1].

    References:
        Boracchi & Foi, "Modeling the performance of image restoration from
        motion blur", IEEE TIP 2012 (random-trajectory camera shake).

    Examples:
        >>> import jax
        >>> from jaxcore.inverse import motion_kernel
        >>> k = motion_kernel(jax.random.key(0), 9, num_steps=50)
        >>> k.shape, round(float(k.sum()), 5), bool((k >= 0).all())
        ((9, 9), 1.0, True)
    """
    key = check_key(key)
    size = _check_kernel_size(size, odd=True, minimum=3)
    num_steps = check_int(num_steps, "num_steps", minimum=1)
    intensity = check_scalar(intensity, "intensity", low=0.0, high=1.0, low_open=True)
    return _motion_kernel(key, jnp.float32(intensity), size=size, num_steps=num_steps)


@functools.partial(jax.jit, static_argnames=("size", "num_steps"))
def _motion_kernel(key, intensity, *, size: int, num_steps: int) -> Array:
    """:func:`motion_kernel` as one compiled program per ``(size, num_steps)``."""
    k0, k1 = jax.random.split(key)
    v0 = _normal(k0, (2,))
    g = _normal(k1, (num_steps, 2))

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


def random_mask(key: PRNGKeyArray, shape: tuple[int, int], missing: float = 0.5, *, channels: int = 1) -> Array:
    """A random inpainting mask: each pixel missing (0) with probability ``missing``.

    Args:
        key: PRNG key.
        shape: ``(H, W)``.
        missing: fraction of missing pixels in [0, 1].
        channels: 1 (whole pixels missing) or C (channels missing independently).

    Returns:
        ``[H, W, channels]`` float32 of 0/1 (1 = observed).

    Raises:
        TypeError: ``key`` not a PRNG key; ``shape`` not two ints.
        ValueError: ``missing`` outside [0, 1]; ``channels < 1``; a side < 1.

    Examples:
        >>> import jax
        >>> from jaxcore.inverse import random_mask
        >>> m = random_mask(jax.random.key(0), (100, 100), 0.25)
        >>> m.shape, abs(float(m.mean()) - 0.75) < 0.02
        ((100, 100, 1), True)
    """
    key = check_key(key)
    missing = check_scalar(missing, "missing", low=0.0, high=1.0)
    shape = _check_hw(shape, "shape")
    channels = check_int(channels, "channels", minimum=1)
    return _random_mask(key, jnp.float32(missing), shape=shape, channels=channels)


@functools.partial(jax.jit, static_argnames=("shape", "channels"))
def _random_mask(key, missing, *, shape, channels):
    with jax.threefry_partitionable(False):  # as standard_normal: ~5x cheaper to compile on CPU
        u = jax.random.uniform(key, tuple(shape) + (channels,))
    return (u >= missing).astype(jnp.float32)


def _check_unit_range(x, name: str):
    return checked_range(x, name, 0.0, 1.0, what="values in [0, 1] (or clip=True)")


def _normal(key, shape, dtype=jnp.float32) -> Array:
    """:func:`standard_normal` as traced code (the restoration loops draw with it)."""
    with jax.threefry_partitionable(False):
        return jax.random.normal(key, shape, dtype)


def standard_normal(key: PRNGKeyArray, shape: tuple[int, ...], dtype=jnp.float32) -> Array:
    """``N(0, I)`` noise of ``shape``: the noise source of this package's restoration loops.

    ``jax.random.normal`` under the non-partitionable threefry lowering, whatever the
    global ``jax_threefry_partitionable`` setting, so the same key gives the same noise
    everywhere. Measured on 2 CPU cores (jax 0.10): it compiles in ~0.3 s instead of
    ~1.5 s (a cost every restoration program pays once) and draws 2 x 256 x 256 x 3
    normals in 4 ms instead of 12 ms. Under ``jit`` with sharded inputs XLA may
    gather the key rather than partition the draw; the values are the same.

    Args:
        key: PRNG key (threefry).
        shape: output shape (static).
        dtype: float dtype.

    Returns:
        ``shape`` array of standard normal draws.

    Raises:
        TypeError: ``key`` not a PRNG key; ``shape`` not a tuple of ints; ``dtype`` not a float dtype.
        ValueError: a negative side.

    Examples:
        >>> import jax
        >>> from jaxcore.inverse import standard_normal
        >>> z = standard_normal(jax.random.key(0), (2, 3))
        >>> z.shape, z.dtype, bool((z == standard_normal(jax.random.key(0), (2, 3))).all())
        ((2, 3), dtype('float32'), True)
    """
    key = check_key(key)
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        parts = tuple(shape)
    except TypeError:
        raise TypeError(expected("shape", "a tuple of ints", shape)) from None
    shape = tuple(check_int(s, "shape", minimum=0) for s in parts)
    return _standard_normal(key, shape=shape, dtype=check_float_dtype(dtype))


@functools.partial(jax.jit, static_argnames=("shape", "dtype"))
def _standard_normal(key, *, shape, dtype):
    return _normal(key, shape, dtype)


def add_gaussian_noise(key: PRNGKeyArray, x: Float[Array, "*batch H W C"], sigma) -> Array:
    """``x + sigma n`` with ``n ~ N(0, I)`` of ``x``'s shape and dtype (drawn by :func:`standard_normal`).

    Args:
        key: PRNG key of the noise.
        x: any float array (images ``[..., H, W, C]``).
        sigma: noise standard deviation (pixel units of a [0, 1] image), >= 0.

    Returns:
        An array of ``x``'s shape and dtype.

    Raises:
        TypeError: ``key`` not a PRNG key; ``x`` not a float array.
        ValueError: ``sigma`` not finite and >= 0, or not a scalar; ``x`` with a NaN or inf entry.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.inverse import add_gaussian_noise
        >>> y = add_gaussian_noise(jax.random.key(0), jnp.zeros((64, 64, 1)), 0.1)
        >>> round(float(y.std()), 1)
        0.1
    """
    key = check_key(key)
    x = as_array(x, "x")
    sigma = _check_scalar_level(sigma, "sigma")
    return _add_gaussian_noise(key, x, sigma)


def _check_scalar_level(value, name: str, *, positive: bool = False):
    value = _check_nonnegative(value, name, positive=positive)
    if value.ndim != 0:
        raise ValueError(expected(name, "a scalar", f"shape {tuple(value.shape)}", raw=True))
    return value


@jax.jit
def _add_gaussian_noise(key, x, sigma):
    return x + jnp.asarray(sigma, x.dtype) * _normal(key, x.shape, x.dtype)


def degrade(key: PRNGKeyArray, x: Float[Array, "*batch H W C"], operator: AbstractOperator, sigma_y, *,
            clip: bool = False) -> Array:
    """Simulate an observation ``y = A x + sigma_y n``, ``n ~ N(0, I)``, of a clean image.

    Args:
        key: PRNG key of the noise.
        x: clean image(s) ``[..., H, W, C]`` in [0, 1].
        operator: the forward model ``A``.
        sigma_y: noise standard deviation (pixel units of a [0, 1] image), >= 0.
        clip: clip ``x`` to [0, 1] first; if False, ``x`` outside [0, 1] is an error.

    Returns:
        ``y`` with ``x``'s shape and dtype.

    Raises:
        TypeError: ``key`` not a PRNG key; ``x`` not a float array; ``operator`` not an
            :class:`AbstractOperator`; ``clip`` not a bool.
        ValueError: ``x`` outside [0, 1] (NaN included) with ``clip=False`` (under ``jit``: equinox's run-time
            error); ``sigma_y`` not finite and >= 0; shape or channel mismatch with ``operator``.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.inverse import Blur, degrade, uniform_kernel
        >>> x = jnp.full((8, 8, 1), 0.5)
        >>> y = degrade(jax.random.key(0), x, Blur(uniform_kernel(3), (8, 8)), 0.0)
        >>> bool(jnp.allclose(y, 0.5, atol=1e-6))
        True
    """
    key = check_key(key)
    if not isinstance(operator, AbstractOperator):
        raise TypeError(expected("operator", "an AbstractOperator", type(operator).__name__, raw=True))
    sigma_y = _check_scalar_level(sigma_y, "sigma_y")
    clip = check_bool(clip, "clip")
    x = as_array(x, "x", finite=not clip)
    if clip:
        check_finite(x, "x")
    else:
        x = _check_unit_range(x, "x")
    if isinstance(operator, (Blur, Inpainting)):
        _check_image_shape(x, operator.shape, "x", operator.channels if isinstance(operator, Blur)
                           else (None if operator.mask.shape[-1] == 1 else operator.mask.shape[-1]))
    else:
        _check_any_image(x, "x")
    return _degrade(key, x, operator, sigma_y, clip)


@eqx.filter_jit
def _degrade(key, x, operator, sigma_y, clip):
    if clip:
        x = jnp.clip(x, 0.0, 1.0)
    ax = operator(x)
    return ax + jnp.asarray(sigma_y, ax.dtype) * _normal(key, ax.shape, ax.dtype)
