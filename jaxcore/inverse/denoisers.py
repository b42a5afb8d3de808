"""Image denoisers behind one interface ``D(x, sigma)``.

Every denoiser is an :class:`equinox.Module` called as ``denoiser(x, sigma)``
with ``x`` of shape ``[..., H, W, C]`` (pixels nominally in [0, 1], noisy
inputs may leave that range) and ``sigma`` the standard deviation of the
additive white Gaussian noise in the same units (so 25/255 for "sigma 25"),
a scalar or an array broadcastable to the leading batch shape ``[...]``.
``x`` is a float array (integer images are refused: convert explicitly, e.g. ``x / 255``); a
half-precision ``x`` (float16, bfloat16) is denoised in float32 and the result cast back to its dtype.

Concrete denoisers:

- :class:`GaussianMMSEDenoiser`: the exact posterior mean under a Gaussian prior
  ``N(mu, s^2 I)``; the oracle of the convergence tests.
- :class:`TVDenoiser`: total-variation (ROF) denoising by Chambolle's dual
  projection algorithm; needs no weights.
- :class:`DnCNN`: a small noise-level-conditioned residual convolutional network
  (NHWC convolutions), trained by :func:`jaxcore.inverse.train_denoiser` (the recipe:
  ``scripts/train_denoiser.py``); load the shipped weights with :func:`load_pretrained`.
- :class:`GradientStepDenoiser`: ``D = Id - grad g`` (trained weights: ``load_pretrained("gs-dncnn")``) with
  ``g(x) = 1/2 ||x - N(x, sigma)||^2`` (gradient-step PnP), a true gradient field.
"""

from __future__ import annotations

import abc
import json
import pathlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import (
    check_bool,
    check_choice,
    check_int,
    check_key,
    check_scalar,
    checked_positive,
    expected,
    is_concrete,
)

from ._checks import as_array, compute_dtype
from .operators import _normal

__all__ = [
    "AbstractDenoiser",
    "GaussianMMSEDenoiser",
    "TVDenoiser",
    "DnCNN",
    "GradientStepDenoiser",
    "conv3x3",
    "load_pretrained",
    "pretrained_info",
    "PRETRAINED",
]

_WEIGHTS_DIR = pathlib.Path(__file__).parent / "weights"

#: Shipped weight files: name -> (weights file, metadata JSON) under ``jaxcore/inverse/weights``.
PRETRAINED: dict[str, tuple[str, str]] = {
    "dncnn": ("dncnn.eqx", "dncnn.json"),
    "gs-dncnn": ("gs_dncnn.eqx", "gs_dncnn.json"),
}


def _check_image(x, name: str = "x"):
    """``x`` as a float image array ``[..., H, W, C]`` (integers refused, NaN/inf refused when concrete)."""
    x = as_array(x, name)
    if x.ndim < 3:
        raise ValueError(expected(name, "images of shape [..., H, W, C] (at least 3 dimensions)",
                                  f"shape {tuple(x.shape)}", raw=True))
    return x


def _check_sigma(sigma, name: str = "sigma"):
    """The noise level checked finite and >= 0: on the host where the value is known, else one run-time
    check (skipped for values the restoration loop checked before it, see :func:`jaxcore._util.trusted_values`)."""
    if isinstance(sigma, (int, float)) and not isinstance(sigma, bool):
        sigma = jnp.asarray(sigma)
    elif not isinstance(sigma, jax.Array):
        sigma = as_array(sigma, name, integers=True, finite=False)
    if not jnp.issubdtype(sigma.dtype, jnp.floating) and not jnp.issubdtype(sigma.dtype, jnp.integer):
        raise TypeError(expected(name, "a real number or array", f"dtype {sigma.dtype}", raw=True))
    return checked_positive(sigma, name, allow_zero=True)


def _sigma_for_batch(sigma, batch_shape: tuple[int, ...], dtype) -> Array:
    """Broadcast ``sigma`` to the batch shape ``[...]`` (not the pixel axes)."""
    sigma = jnp.asarray(sigma, dtype)
    try:
        return jnp.broadcast_to(sigma, batch_shape)
    except ValueError:
        raise ValueError(expected("sigma", f"a scalar or an array broadcastable to the batch shape {batch_shape}",
                                  f"shape {sigma.shape}", raw=True)) from None


class AbstractDenoiser(eqx.Module):
    """A Gaussian denoiser ``D(x, sigma)`` for images ``[..., H, W, C]``.

    Subclasses implement :meth:`__call__`; the contract is: same shape and dtype
    out as in, ``sigma`` the noise standard deviation in pixel units of a
    [0, 1] image, scalar or broadcastable to the batch shape ``[...]``.
    """

    @abc.abstractmethod
    def __call__(self, x: Float[Array, "*batch H W C"], sigma) -> Float[Array, "*batch H W C"]:
        raise NotImplementedError


class GaussianMMSEDenoiser(AbstractDenoiser):
    """Exact MMSE denoiser for the Gaussian prior ``x ~ N(mu, s^2 I)``.

    ``D(x, sigma) = E[x0 | x0 + sigma z = x] = (s^2 x + sigma^2 mu) / (s^2 + sigma^2)``;
    by Tweedie's formula ``x - D(x, sigma) = -sigma^2 grad log p_sigma(x)`` with
    ``p_sigma = N(mu, (s^2 + sigma^2) I)``.

    Attributes:
        mean: prior mean ``mu``, a scalar or an array broadcastable to ``[H, W, C]``.
        variance: prior variance ``s^2 > 0`` (scalar).

    References:
        Efron, "Tweedie's formula and selection bias", JASA 2011, eq. (1.4).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import GaussianMMSEDenoiser
        >>> den = GaussianMMSEDenoiser(0.5, 0.01)
        >>> float(den(jnp.ones((1, 1, 1)), 0.1)[0, 0, 0])  # (s^2 x + sigma^2 mu) / (s^2 + sigma^2)
        0.75
    """

    mean: Array
    variance: Array

    def __init__(self, mean, variance):
        """Args:
            mean: prior mean ``mu`` (scalar or broadcastable to ``[H, W, C]``).
            variance: prior variance ``s^2``, a finite scalar > 0.

        Raises:
            TypeError: ``mean`` or ``variance`` not real numbers/arrays.
            ValueError: ``variance`` not a scalar, or not finite and > 0; ``mean`` not finite or
                not broadcastable to an image ``[H, W, C]`` (more than 3 dimensions).
        """
        variance = as_array(variance, "variance", integers=True, finite=False)
        if variance.ndim != 0:
            raise ValueError(expected("variance", "a scalar", f"shape {variance.shape}", raw=True))
        if is_concrete(variance):
            check_scalar(variance, "variance", positive=True)
        mean = as_array(mean, "mean", integers=True)
        if mean.ndim > 3:
            raise ValueError(expected("mean", "a scalar or an array broadcastable to [H, W, C]",
                                      f"shape {tuple(mean.shape)}", raw=True))
        self.mean = mean
        self.variance = variance

    def __call__(self, x, sigma):
        x = _check_image(x)
        sigma = _check_sigma(sigma)
        try:
            jnp.broadcast_shapes(x.shape[-3:], self.mean.shape)
        except ValueError:
            raise ValueError(expected("x", f"images broadcastable with the prior mean's shape {self.mean.shape}",
                                      f"shape {tuple(x.shape)}", raw=True)) from None
        work = compute_dtype(x.dtype)
        s2 = _sigma_for_batch(sigma, x.shape[:-3], work)[..., None, None, None] ** 2
        v = self.variance.astype(work)
        return ((v * x.astype(work) + s2 * self.mean.astype(work)) / (v + s2)).astype(x.dtype)

    def log_density_grad(self, x, sigma):
        """``grad log p_sigma(x) = -(x - mu) / (s^2 + sigma^2)`` (the score of the noisy prior)."""
        x = _check_image(x)
        sigma = _check_sigma(sigma)
        s2 = _sigma_for_batch(sigma, x.shape[:-3], x.dtype)[..., None, None, None] ** 2
        return -(x - self.mean) / (self.variance + s2)


def _grad_forward(u: Array) -> tuple[Array, Array]:
    """Forward differences along H and W with zero at the last row/column (Neumann)."""
    gh = jnp.concatenate([u[..., 1:, :, :] - u[..., :-1, :, :], jnp.zeros_like(u[..., :1, :, :])], axis=-3)
    gw = jnp.concatenate([u[..., :, 1:, :] - u[..., :, :-1, :], jnp.zeros_like(u[..., :, :1, :])], axis=-2)
    return gh, gw


def _div_backward(ph: Array, pw: Array) -> Array:
    """Discrete divergence, the negative adjoint of :func:`_grad_forward`."""
    dh = jnp.concatenate([ph[..., :1, :, :], ph[..., 1:-1, :, :] - ph[..., :-2, :, :], -ph[..., -2:-1, :, :]], axis=-3)
    dw = jnp.concatenate([pw[..., :, :1, :], pw[..., :, 1:-1, :] - pw[..., :, :-2, :], -pw[..., :, -2:-1, :]], axis=-2)
    return dh + dw


class TVDenoiser(AbstractDenoiser):
    """Total-variation (ROF) denoiser, solved by Chambolle's dual projection algorithm.

    ``D(x, sigma) = argmin_u 1/2 ||u - x||^2 + lam TV(u)`` with the isotropic,
    channel-coupled (vectorial) total variation ``TV(u) = sum_ij sqrt(sum_c |grad u_c|^2)``
    and ``lam = weight_per_sigma * sigma``. Solved by ``num_steps`` fixed-point steps
    ``p <- (p + tau grad(div p - x/lam)) / (1 + tau |grad(div p - x/lam)|)``, ``u = x - lam div p``.

    Attributes:
        weight_per_sigma: ``lam / sigma``; 1.1 maximised the mean PSNR over the grid
            {0.5, 0.7, 0.9, 1.1, 1.4} at ``sigma in {5, 10, 15, 25}/255`` on 128x128
            crops of three of the network's training images (astronaut, rocket, moon).
        num_steps: number of dual fixed-point steps (static), >= 1.
        tau: dual step size in ``(0, 1/4]`` (the range where the iteration converges).

    Raises:
        ValueError: at construction, ``weight_per_sigma`` not finite and > 0, ``tau`` outside
            (0, 1/4] (NaN and inf included), ``num_steps < 1``; when called, ``sigma`` not finite
            and >= 0, ``x`` not an image ``[..., H, W, C]`` or with a NaN or inf entry.
        TypeError: ``num_steps`` not an int; ``x`` not a float array.

    References:
        Chambolle, "An algorithm for total variation minimization and applications",
        JMIV 2004, eq. (11); Rudin, Osher & Fatemi, Physica D 1992.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import TVDenoiser
        >>> x = jnp.zeros((8, 8, 1)).at[::2].set(1.0)  # stripes: large total variation
        >>> u = TVDenoiser(num_steps=50)(x, 0.1)
        >>> bool(jnp.abs(jnp.diff(u, axis=0)).sum() < jnp.abs(jnp.diff(x, axis=0)).sum())
        True
    """

    weight_per_sigma: float = 1.1
    num_steps: int = eqx.field(static=True, default=100)
    tau: float = 0.248

    def __check_init__(self):
        """Raises ValueError for ``weight_per_sigma`` not finite and > 0, ``tau`` outside (0, 1/4] or
        ``num_steps < 1`` (TypeError: not a number / not an int); NaN and inf fail."""
        if is_concrete(self.weight_per_sigma):
            check_scalar(self.weight_per_sigma, "weight_per_sigma", positive=True)
        if is_concrete(self.tau):
            check_scalar(self.tau, "tau", low=0.0, high=0.25, low_open=True)
        check_int(self.num_steps, "num_steps", minimum=1)

    def __call__(self, x, sigma):
        x_in = _check_image(x)
        sigma = _check_sigma(sigma)
        x = x_in.astype(compute_dtype(x_in.dtype))
        lam = self.weight_per_sigma * _sigma_for_batch(sigma, x.shape[:-3], x.dtype)[..., None, None, None]
        lam = jnp.maximum(lam, jnp.finfo(x.dtype).tiny)  # sigma = 0 gives u = x below
        xs = x / lam

        def body(_, p):
            ph, pw = p
            gh, gw = _grad_forward(_div_backward(ph, pw) - xs)
            norm = jnp.sqrt(jnp.sum(gh**2 + gw**2, axis=-1, keepdims=True))
            return ((ph + self.tau * gh) / (1 + self.tau * norm), (pw + self.tau * gw) / (1 + self.tau * norm))

        p0 = (jnp.zeros_like(x), jnp.zeros_like(x))
        ph, pw = jax.lax.fori_loop(0, self.num_steps, body, p0)
        return (x - lam * _div_backward(ph, pw)).astype(x_in.dtype)


_NHWC = ("NHWC", "HWIO", "NHWC")


@jax.custom_vjp
def conv3x3(h: Float[Array, "N H W I"], w: Float[Array, "3 3 I O"]) -> Float[Array, "N H W O"]:
    """3x3 "same" convolution (zero padding, stride 1), NHWC, whose input gradient is a plain convolution.

    The value is ``lax.conv_general_dilated(h, w, (1, 1), "SAME")``. Its VJP computes the
    input cotangent as the same kind of convolution with the spatially flipped,
    in/out-transposed kernel, instead of the transposed convolution JAX's autodiff emits:
    inside ``lax.scan``/``lax.map`` bodies XLA:CPU runs that transposed form ~14x slower
    (measured: 3 gradient-step denoiser evaluations of 2 x 128 x 128 RGB images in a
    scan, 4.2 s with autodiff, 0.30 s with this rule, 2 cores), which made any restoration
    loop with :class:`GradientStepDenoiser` crawl. Reverse mode only (``jax.grad``,
    ``jax.vjp``, nested); forward mode (``jax.jvp``) is not defined.

    Args:
        h: input activations ``[N, H, W, I]``.
        w: kernel ``[3, 3, I, O]`` (HWIO).

    Returns:
        ``[N, H, W, O]`` in the inputs' dtype.

    Raises:
        TypeError: ``h`` or ``w`` not a float array, or of different dtypes.
        ValueError: ``h`` not 4-d, ``w`` not ``[3, 3, I, O]`` with ``I`` the channels of ``h``.

    References:
        Dumoulin & Visin, "A guide to convolution arithmetic for deep learning", 2016 (the
        transposed convolution of a stride-1 "same" convolution is a flipped-kernel convolution).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import conv3x3
        >>> w = jnp.zeros((3, 3, 1, 1)).at[1, 1].set(2.0)  # a centred tap: scaling by 2
        >>> float(conv3x3(jnp.ones((1, 4, 4, 1)), w)[0, 0, 0, 0])
        2.0
    """
    h = as_array(h, "h", finite=False)  # no host read of the values: called per layer
    w = as_array(w, "w", finite=False)
    if w.dtype != h.dtype:
        raise TypeError(expected("w", f"h's dtype {h.dtype}", f"dtype {w.dtype}", raw=True))
    if h.ndim != 4:
        raise ValueError(expected("h", "activations [N, H, W, I]", f"shape {tuple(h.shape)}", raw=True))
    if w.ndim != 4 or w.shape[:2] != (3, 3) or w.shape[2] != h.shape[-1]:
        raise ValueError(expected("w", f"a kernel [3, 3, {h.shape[-1]}, O] (HWIO)", f"shape {tuple(w.shape)}", raw=True))
    return jax.lax.conv_general_dilated(h, w, (1, 1), "SAME", dimension_numbers=_NHWC)


def _conv3x3_fwd(h, w):
    return conv3x3(h, w), (h, w)


def _conv3x3_bwd(res, g):
    h, w = res
    dh = conv3x3(g, jnp.flip(w, (0, 1)).swapaxes(2, 3))
    _, vjp_w = jax.vjp(lambda w_: jax.lax.conv_general_dilated(h, w_, (1, 1), "SAME", dimension_numbers=_NHWC), w)
    return dh, vjp_w(g)[0]


conv3x3.defvjp(_conv3x3_fwd, _conv3x3_bwd)


class DnCNN(AbstractDenoiser):
    """Noise-level-conditioned DnCNN: ``D(x, sigma) = x - s(sigma) R([x, c sigma 1])``.

    ``s(sigma) = sigma`` when ``noise_scaled`` (``R`` predicts the unit-variance
    noise ``z``, so ``D -> Id`` as ``sigma -> 0``), else 1 (``R`` predicts ``sigma z``);
    ``c = sigma_scale`` scales the noise-level map. ``R`` is a stack of ``depth`` 3x3 "same" convolutions (ReLU between them, no
    batch norm) from ``channels + 1`` inputs (the image and a constant noise-level
    map) through ``features`` channels to ``channels`` outputs, the predicted noise.
    Convolutions run in NHWC layout (measured on par with NCHW on CPU) through :func:`conv3x3`. A
    3-channel network applied to a 1-channel image sees it replicated to RGB and
    returns the channel mean.

    Attributes:
        weights: per layer ``[3, 3, in, out]`` (HWIO) float32 kernels.
        biases: per layer ``[out]``.
        channels: image channels the network was built for (static).
        noise_scaled: output parametrisation (static, see above).
        sigma_scale: multiplier of the noise-level input map (static).
        boundary: "zeros" (each convolution zero-pads, as in training) or "symmetric"
            (the image is first extended by ``depth`` pixels by mirror symmetry, the
            network's receptive-field radius, and the output cropped back): border
            pixels then see image-like context. Measured with the shipped weights on
            held-out central crops (RGB, mean of camera/chelsea/coffee): +0.36 dB at
            sigma 10/255 and +0.28 dB at 25/255 on 64 x 64 crops, +0.08 / +0.04 dB on
            256 x 256; it costs ``((H + 2 depth) / H)^2`` the work (1.41x at 64 x 64).

    References:
        Zhang, Zuo, Chen, Meng & Zhang, "Beyond a Gaussian denoiser: residual
        learning of deep CNN for image denoising", IEEE TIP 2017 (residual form);
        Zhang, Zuo & Zhang, "FFDNet", IEEE TIP 2018 (noise-level map input).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.inverse import DnCNN
        >>> net = DnCNN(key=jax.random.key(0), channels=1, features=4, depth=3)
        >>> x = jnp.full((8, 8, 1), 0.5)
        >>> net(x, 0.1).shape, bool((net(x, 0.0) == x).all())  # noise-scaled: D(x, 0) = x
        ((8, 8, 1), True)
    """

    weights: list[Array]
    biases: list[Array]
    channels: int = eqx.field(static=True)
    noise_scaled: bool = eqx.field(static=True)
    sigma_scale: float = eqx.field(static=True)
    boundary: str = eqx.field(static=True)

    def __init__(self, *, key: PRNGKeyArray, channels: int = 3, features: int = 32, depth: int = 6,
                 noise_scaled: bool = True, sigma_scale: float = 255.0 / 25.0, boundary: str = "zeros"):
        """Random (He-normal) initialisation.

        Args:
            key: PRNG key (keyword-only, equinox's convention).
            channels: image channels C.
            features: hidden channels.
            depth: number of convolution layers (>= 2).
            noise_scaled: predict unit-variance noise scaled by sigma (True) or the noise itself.
            sigma_scale: multiplier of the noise-level map (1/c is the reference noise level).
            boundary: "zeros" or "symmetric" (see the class docstring).

        Raises:
            TypeError: ``key`` not a PRNG key; a count not an int; a flag not a bool.
            ValueError: ``depth < 2``, non-positive ``channels``/``features``, unknown ``boundary``,
                ``sigma_scale`` not finite and > 0.
        """
        key = check_key(key)
        depth = check_int(depth, "depth", minimum=2)
        channels = check_int(channels, "channels", minimum=1)
        features = check_int(features, "features", minimum=1)
        boundary = check_choice(boundary, "boundary", ("zeros", "symmetric"))
        dims = [channels + 1] + [features] * (depth - 1) + [channels]
        sizes = [9 * dims[i] * dims[i + 1] for i in range(depth)]
        # one draw for all layers (one small compile, not one per layer shape)
        flat = _normal(key, (sum(sizes),), jnp.float32)
        offsets = np.cumsum([0] + sizes)
        self.weights = []
        self.biases = []
        for i in range(depth):
            fan_in = 9 * dims[i]
            scale = np.sqrt(2.0 / fan_in) * (0.1 if i == depth - 1 else 1.0)
            w = flat[offsets[i] : offsets[i + 1]].reshape(3, 3, dims[i], dims[i + 1])
            self.weights.append(scale * w)
            self.biases.append(jnp.zeros((dims[i + 1],), jnp.float32))
        self.channels = channels
        self.noise_scaled = check_bool(noise_scaled, "noise_scaled")
        self.sigma_scale = check_scalar(sigma_scale, "sigma_scale", positive=True)
        self.boundary = boundary

    @property
    def depth(self) -> int:
        return len(self.weights)

    @property
    def features(self) -> int:
        return int(self.weights[0].shape[-1])

    def residual(self, x: Float[Array, "N H W C"], sigma: Float[Array, " N"]) -> Float[Array, "N H W C"]:
        """The network output ``R([x, c sigma])`` for a flat batch ``[N, H, W, C]`` (no checks)."""
        smap = jnp.broadcast_to(self.sigma_scale * sigma[:, None, None, None], x.shape[:-1] + (1,))
        h = jnp.concatenate([x, smap.astype(x.dtype)], -1)
        n = len(self.weights)
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = conv3x3(h, w.astype(x.dtype)) + b.astype(x.dtype)
            if i < n - 1:
                h = jax.nn.relu(h)
        return h

    def __call__(self, x, sigma):
        x_in = _check_image(x)
        sigma = _check_sigma(sigma)
        x = x_in.astype(compute_dtype(x_in.dtype))
        c = x.shape[-1]
        if c != self.channels and not (c == 1 and self.channels == 3):
            raise ValueError(expected(
                "x", f"{self.channels} channels (the network's)" + (" or 1 (replicated)" if self.channels == 3 else ""),
                f"{c} channels", raw=True))
        batch = x.shape[:-3]
        s = _sigma_for_batch(sigma, batch, x.dtype).reshape(-1)
        flat = x.reshape((-1,) + x.shape[-3:])
        inp = jnp.broadcast_to(flat, flat.shape[:-1] + (self.channels,)) if c != self.channels else flat
        if self.boundary == "symmetric":
            p = self.depth
            r = self.residual(jnp.pad(inp, ((0, 0), (p, p), (p, p), (0, 0)), mode="symmetric"), s)[:, p:-p, p:-p]
        else:
            r = self.residual(inp, s)
        if self.noise_scaled:
            r = r * s[:, None, None, None]
        if c != self.channels:
            r = jnp.mean(r, axis=-1, keepdims=True)
        return (flat - r).reshape(x.shape).astype(x_in.dtype)


class GradientStepDenoiser(AbstractDenoiser):
    """Gradient-step denoiser ``D(x, sigma) = x - grad_x g_sigma(x)``.

    ``g_sigma(x) = 1/2 ||x - N(x, sigma)||^2`` summed over each image's pixels,
    with ``N`` any denoiser (here a :class:`DnCNN`); ``D`` is then an exact
    gradient step on the explicit potential ``g_sigma``, as needed by RED/SNORE
    convergence theory. ``grad g = (I - J_N)^T (x - N(x))`` by one VJP.

    Trained weights ship as ``load_pretrained("gs-dncnn")``: the shipped DnCNN's
    architecture fine-tuned in this form (1500 Adam steps through the double
    backward pass, recipe and seed in ``gs_dncnn.json``). Held-out PSNR (dB) at
    sigma 5/10/15/25 (/255): 35.80/32.58/30.74/27.78, against 36.51/33.12/30.98/28.56
    for the unconstrained DnCNN and 36.38/32.87/30.97/28.70 for TV: the gradient-field
    constraint costs 0.2-0.8 dB at this size. A second 1500-step stage changed it by
    -0.11 to +0.18 dB and is not shipped. Wrapping the plain DnCNN
    (``GradientStepDenoiser(load_pretrained())``) also gives a true gradient field, but
    one not trained in that form: 35.11/31.14/28.51/24.92 dB.

    Attributes:
        network: the inner denoiser ``N``.

    References:
        Hurault, Leclaire & Papadakis, "Gradient step denoiser for convergent
        plug-and-play", ICLR 2022, eq. (7).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import GaussianMMSEDenoiser, GradientStepDenoiser
        >>> gs = GradientStepDenoiser(GaussianMMSEDenoiser(0.0, 1.0))  # N(x) = x / 2 at sigma = 1
        >>> float(gs(jnp.ones((1, 1, 1)), 1.0)[0, 0, 0])  # x - (I - J)^T (x - N(x)) = 1 - 1/4
        0.75
    """

    network: AbstractDenoiser

    def __check_init__(self):
        """Raises TypeError unless ``network`` is a denoiser ``N(x, sigma)``."""
        if not (isinstance(self.network, AbstractDenoiser) or callable(self.network)):
            raise TypeError(expected("network", "a denoiser callable as N(x, sigma)", type(self.network).__name__,
                                     raw=True))

    def potential(self, x, sigma):
        """``g_sigma(x)`` per image: shape ``[...]`` for ``x`` of shape ``[..., H, W, C]``."""
        r = x - self.network(x, sigma)
        return 0.5 * jnp.sum(r**2, axis=(-3, -2, -1))

    def __call__(self, x, sigma):
        x_in = _check_image(x)
        sigma = _check_sigma(sigma)
        x = x_in.astype(compute_dtype(x_in.dtype))
        n_out, vjp = jax.vjp(lambda u: self.network(u, sigma), x)
        r = x - n_out
        (jt_r,) = vjp(r)
        return (x - (r - jt_r)).astype(x_in.dtype)


def pretrained_info(name: str = "dncnn") -> dict:
    """The metadata JSON (architecture, recipe, seed, held-out PSNR table) of a shipped weight file.

    Args:
        name: a key of :data:`PRETRAINED` ("dncnn" or "gs-dncnn").

    Returns:
        The parsed JSON: ``architecture``, ``recipe``, ``seed``, ``psnr_table`` (dB), ...

    Raises:
        ValueError: unknown ``name``.
        FileNotFoundError: the weight files are missing from the installation.

    Examples:
        >>> from jaxcore.inverse import pretrained_info
        >>> info = pretrained_info("dncnn")
        >>> info["architecture"]["kind"], info["psnr_table"]["sigma_255"]
        ('DnCNN', [5, 10, 15, 25])
    """
    name = check_choice(name, "name", sorted(PRETRAINED))
    path = _WEIGHTS_DIR / PRETRAINED[name][1]
    if not path.exists():
        raise FileNotFoundError(f"no metadata {path}; train with: python scripts/train_denoiser.py")
    return json.loads(path.read_text())


#: The abstract shape of one PRNG key: the template key of :func:`load_pretrained` (no key is drawn).
_KEY_SHAPE = jax.eval_shape(jax.random.key, jax.ShapeDtypeStruct((), jnp.uint32))


def load_pretrained(name: str = "dncnn", *, boundary: str = "zeros") -> AbstractDenoiser:
    """The shipped trained denoiser ``name`` ("dncnn" or "gs-dncnn").

    The architecture is read from the JSON beside the weights; see
    :func:`pretrained_info` for the training recipe, seed and held-out PSNR
    (stated for ``boundary="zeros"``, the training setting). ``boundary`` is
    :class:`DnCNN`'s border handling ("symmetric" helps small crops).

    Args:
        name: a key of :data:`PRETRAINED`.
        boundary: "zeros" or "symmetric".

    Returns:
        A :class:`DnCNN` (or :class:`GradientStepDenoiser` around one), float32.

    Raises:
        ValueError: unknown ``name`` or ``boundary``.
        FileNotFoundError: the weight files are missing from the installation.

    References:
        Zhang et al., IEEE TIP 2017 (DnCNN); Hurault et al., ICLR 2022 (gradient-step denoiser).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.inverse import load_pretrained
        >>> net = load_pretrained("dncnn")
        >>> net.depth, net(jnp.full((8, 8, 3), 0.5), 0.05).shape
        (6, (8, 8, 3))
    """
    info = pretrained_info(name)
    boundary = check_choice(boundary, "boundary", ("zeros", "symmetric"))
    arch = info["architecture"]
    # a template of shapes only (eqx.filter_eval_shape with an abstract key: nothing is drawn or
    # initialised); the file supplies every array
    net = eqx.filter_eval_shape(
        lambda key: DnCNN(key=key, channels=arch["channels"], features=arch["features"], depth=arch["depth"],
                          noise_scaled=arch.get("noise_scaled", False), sigma_scale=arch.get("sigma_scale", 1.0),
                          boundary=boundary), _KEY_SHAPE)
    model: AbstractDenoiser = GradientStepDenoiser(net) if arch.get("gradient_step") else net
    path = _WEIGHTS_DIR / PRETRAINED[name][0]
    if not path.exists():
        raise FileNotFoundError(f"no weights {path}; train with: python scripts/train_denoiser.py")
    return eqx.tree_deserialise_leaves(path, model)
