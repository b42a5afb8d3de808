"""Image quality metrics: PSNR and SSIM (the latter agreeing with scikit-image).

Dtypes: integer images (uint8 and the like) are converted exactly to float before any difference
is taken (so a uint8 difference never wraps); half-precision images are computed in float32 and the
result is cast back to the half dtype; ``x`` and ``ref`` are brought to their common float dtype.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxcore._util import check_bool, check_int, check_scalar, expected

from ._checks import as_array, compute_dtype

__all__ = ["psnr", "ssim"]


def _check_pair(x, ref):
    """Both images as float arrays of one dtype, integers converted exactly; returns ``(x, ref, out_dtype)``
    with ``x``, ``ref`` in the compute dtype (float32 for half precision) and ``out_dtype`` the result's."""
    x = as_array(x, "x", integers=True)
    ref = as_array(ref, "ref", integers=True)
    if x.ndim < 3:
        raise ValueError(expected("x", "images of shape [..., H, W, C]", f"shape {tuple(x.shape)}", raw=True))
    if x.shape != ref.shape:
        raise ValueError(expected("ref", f"the same shape as x {tuple(x.shape)}", f"shape {tuple(ref.shape)}",
                                  raw=True))
    out = jnp.result_type(x.dtype, ref.dtype)
    work = compute_dtype(out)
    return x.astype(work), ref.astype(work), out


def _psnr(x, ref, data_range):
    """PSNR as traced code (the restoration loops track it with this)."""
    mse = jnp.mean((x - ref) ** 2, axis=(-3, -2, -1))
    return 10.0 * jnp.log10(data_range**2 / mse)


@jax.jit
def _psnr_program(x, ref, data_range):
    return _psnr(x, ref, data_range.astype(x.dtype))


def psnr(x: Float[Array, "*batch H W C"], ref: Float[Array, "*batch H W C"], data_range: float = 1.0) -> Array:
    """Peak signal-to-noise ratio in dB, per image.

    ``PSNR = 10 log10(data_range^2 / MSE)``, ``MSE`` the mean over ``H, W, C``.

    Args:
        x: estimate ``[..., H, W, C]``; integer images (uint8, ...) are converted exactly to float
            first, half precision is computed in float32.
        ref: reference (clean) image, same shape (converted as ``x``).
        data_range: peak value (1 for images in [0, 1], 255 for uint8 images).

    Returns:
        ``[...]`` PSNR in dB (``inf`` where ``x == ref``), in the common float dtype of ``x`` and
        ``ref`` (float32 for integer images).

    Raises:
        TypeError: ``x`` or ``ref`` not a real array (None, complex, strings).
        ValueError: shape mismatch or fewer than 3 dimensions; a NaN or inf pixel; ``data_range``
            not finite and > 0.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import psnr
        >>> round(float(psnr(jnp.zeros((4, 4, 1)), jnp.full((4, 4, 1), 0.1))), 4)  # MSE 0.01
        20.0
    """
    x, ref, out = _check_pair(x, ref)
    data_range = check_scalar(data_range, "data_range", positive=True)
    return _psnr_program(x, ref, jnp.asarray(data_range, x.dtype)).astype(out)


def _filter_1d(x: Array, taps: Array, axis: int) -> Array:
    """Correlate along ``axis`` with odd ``taps``, symmetric ('reflect' in SciPy) boundary."""
    r = (taps.shape[0] - 1) // 2
    pad = [(0, 0)] * x.ndim
    pad[axis] = (r, r)
    xp = jnp.pad(x, pad, mode="symmetric")
    n = x.shape[axis]
    out = 0.0
    for i in range(taps.shape[0]):
        out = out + taps[i] * jax.lax.slice_in_dim(xp, i, i + n, axis=axis)
    return out


def ssim(
    x: Float[Array, "*batch H W C"],
    ref: Float[Array, "*batch H W C"],
    data_range: float = 1.0,
    *,
    win_size: int | None = None,
    gaussian_weights: bool = False,
    sigma: float = 1.5,
    use_sample_covariance: bool = True,
    k1: float = 0.01,
    k2: float = 0.03,
) -> Array:
    """Mean structural similarity per image, as ``skimage.metrics.structural_similarity``.

    ``SSIM = (2 mu_x mu_y + C1)(2 s_xy + C2) / ((mu_x^2 + mu_y^2 + C1)(s_x^2 + s_y^2 + C2))``
    with local statistics over a ``win_size`` uniform (or Gaussian) window,
    ``C1 = (k1 L)^2``, ``C2 = (k2 L)^2``; the map is averaged over pixels at least
    ``(win_size - 1)/2`` from the border and over channels, exactly as scikit-image
    does with ``channel_axis=-1`` (symmetric boundary for the filters).

    Args:
        x, ref: ``[..., H, W, C]`` images (order does not matter: SSIM is symmetric); integer
            images are converted exactly to float first, half precision is computed in float32.
        data_range: ``L``, the dynamic range (1 for [0, 1] images, 255 for uint8 images).
        win_size: odd window side; default 7, or 11 with ``gaussian_weights``.
        gaussian_weights: Gaussian window of std ``sigma`` (Wang et al.'s setting).
        sigma: std of the Gaussian window, in pixels.
        use_sample_covariance: normalise by ``N - 1`` instead of ``N``.
        k1, k2: the stabilising constants.

    Returns:
        ``[...]`` mean SSIM, in the common float dtype of ``x`` and ``ref`` (float32 for integers).

    Raises:
        TypeError: ``x`` or ``ref`` not a real array; ``win_size`` not an int; a flag not a bool.
        ValueError: shapes differ; a NaN or inf pixel; ``win_size`` even, < 3 or larger than the
            image; ``data_range``, ``sigma`` not finite and > 0; ``k1``, ``k2`` not finite and > 0.

    References:
        Wang, Bovik, Sheikh & Simoncelli, "Image quality assessment: from error
        visibility to structural similarity", IEEE TIP 2004, eq. (13).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import ssim
        >>> x = jnp.linspace(0, 1, 100).reshape(10, 10, 1)
        >>> round(float(ssim(x, x)), 6), bool(ssim(x, 1 - x) < 0)
        (1.0, True)
    """
    x, ref, out = _check_pair(x, ref)
    data_range = check_scalar(data_range, "data_range", positive=True)
    sigma = check_scalar(sigma, "sigma", positive=True)
    k1 = check_scalar(k1, "k1", positive=True)
    k2 = check_scalar(k2, "k2", positive=True)
    gaussian_weights = check_bool(gaussian_weights, "gaussian_weights")
    use_sample_covariance = check_bool(use_sample_covariance, "use_sample_covariance")
    if win_size is None:
        win_size = 2 * int(3.5 * sigma + 0.5) + 1 if gaussian_weights else 7
    win_size = check_int(win_size, "win_size", minimum=3)
    if win_size % 2 != 1:
        raise ValueError(expected("win_size", "an odd int >= 3", win_size))
    if win_size > min(x.shape[-3], x.shape[-2]):
        raise ValueError(expected("win_size", f"at most the image side {min(x.shape[-3], x.shape[-2])}", win_size))
    if gaussian_weights:
        r = (win_size - 1) // 2
        t = np.arange(-r, r + 1, dtype=np.float64)
        taps = np.exp(-0.5 * (t / sigma) ** 2)
        taps = jnp.asarray(taps / taps.sum(), x.dtype)
    else:
        taps = jnp.full((win_size,), 1.0 / win_size, x.dtype)
    npix = win_size**2
    cov_norm = npix / (npix - 1) if use_sample_covariance else 1.0
    c1 = (k1 * data_range) ** 2
    c2 = (k2 * data_range) ** 2
    return _ssim_map_mean(x, ref, taps, jnp.asarray(cov_norm, x.dtype), jnp.asarray(c1, x.dtype),
                          jnp.asarray(c2, x.dtype)).astype(out)


@jax.jit
def _ssim_map_mean(x, ref, taps, cov_norm, c1, c2):
    """The SSIM map averaged away from the border (one compiled program per shape and window size)."""
    win_size = taps.shape[0]

    def filt(u):
        return _filter_1d(_filter_1d(u, taps, -3), taps, -2)

    ux, uy = filt(x), filt(ref)
    uxx, uyy, uxy = filt(x * x), filt(ref * ref), filt(x * ref)
    vx = cov_norm * (uxx - ux * ux)
    vy = cov_norm * (uyy - uy * uy)
    vxy = cov_norm * (uxy - ux * uy)
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux**2 + uy**2 + c1) * (vx + vy + c2))
    p = (win_size - 1) // 2
    s = s[..., p : x.shape[-3] - p, p : x.shape[-2] - p, :]
    return jnp.mean(s, axis=(-3, -2, -1))
