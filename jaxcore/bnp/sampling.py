"""Reparameterised random draws of this family: Gamma variates and open-interval uniforms from one bit stream.

- :func:`gamma_rsample`: Gamma(a, 1) draws, differentiable in ``a`` (implicit reparameterisation), by a
  Marsaglia-Tsang sampler with a fixed number of proposals (no ``while`` loop: it batches like elementwise code).
- the noise helpers the ELBO and the processes share: uniforms on the open interval (0, 1) from uint32 words
  (a Threefry-2x32 written as fusable ``jax.numpy`` code) and standard normals from those uniforms.

References:
    Marsaglia & Tsang, "A simple method for generating gamma variables", ACM TOMS 2000. Figurnov, Mohamed &
    Mnih, "Implicit reparameterization gradients", NeurIPS 2018. Salmon, Moraes, Dror & Shaw, "Parallel random
    numbers: as easy as 1, 2, 3", SC 2011.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxcore._util import check_int, check_key, check_positive, expected

from ._checks import float_arg

__all__ = [
    "gamma_rsample",
]


_GAMMA_PROPOSALS = 8


@jax.custom_jvp
def _gamma_from_noise(a, normals, uniforms, boost_u):
    """Marsaglia-Tsang Gamma(a, 1) draws from pre-drawn noise, with a fixed number of proposals.

    Each draw makes ``_GAMMA_PROPOSALS`` proposals at once and keeps the first
    accepted one (acceptance >= 0.95 for shape >= 1, so all 8 fail with
    probability < 4e-11; the last proposal is then kept). Shapes below 1 are
    boosted: ``G(a) = G(a + 1) U^(1/a)``. No ``while`` loop: it compiles and
    batches like elementwise code. The derivative in ``a`` is the implicit
    reparameterisation ``dx/da = -(dF(x; a)/da) / p(x; a)``
    (``lax.random_gamma_grad``), which depends only on ``(a, x)``.
    """
    boost = a < 1.0
    ab = jnp.where(boost, a + 1.0, a)
    d = ab - 1.0 / 3.0
    c = 1.0 / jnp.sqrt(9.0 * d)
    v = (1.0 + c * normals) ** 3
    tiny = jnp.finfo(v.dtype).tiny
    log_v = jnp.log(jnp.maximum(v, tiny))
    accept = (v > 0) & (jnp.log(uniforms) < 0.5 * jnp.square(normals) + d - d * v + d * log_v)
    accept = accept.at[-1].set(True)
    first = jnp.argmax(accept, axis=0)
    x = d * jnp.take_along_axis(v, first[None], axis=0)[0]
    x = jnp.where(boost, x * jnp.exp(jnp.log(boost_u) / a), x)
    return jnp.maximum(x, tiny)


@_gamma_from_noise.defjvp
def _gamma_from_noise_jvp(primals, tangents):
    a, normals, uniforms, boost_u = primals
    da = tangents[0]
    x = _gamma_from_noise(a, normals, uniforms, boost_u)
    return x, jax.lax.random_gamma_grad(a, x) * da


def _uniform_open(key, shape, dtype=jnp.float32):
    """Uniforms on the open interval (0, 1) from one call of the bit generator.

    The values are the midpoints ``(k + 1/2) 2^-23``, ``k = 0 .. 2^23 - 1``, of a
    23-bit grid, symmetric about 1/2, so ``log u``, ``log1p(-u)`` and
    ``erf_inv(2u - 1)`` are finite for every draw (in float32 and float64).
    """
    return _uniform_from_words(_random_words(key, int(np.prod(shape))).reshape(shape), dtype)


def _uniform_from_words(words, dtype=jnp.float32):
    """:func:`_uniform_open` of given uint32 words (their top 23 bits)."""
    return (((words >> 9).astype(jnp.float32) + 0.5) * np.float32(2.0**-23)).astype(dtype)


def _random_words(key, n: int):
    """``n`` random uint32 words from ``key``.

    For threefry keys, word pair ``i`` is the Threefry-2x32 block of the key's two words at
    counter ``(i, 0)`` (the words XLA's ``RngBitGenerator`` gives with its Threefry algorithm).
    They are computed by :func:`_threefry_words`, elementwise ``jax.numpy`` code that XLA fuses
    into one vectorised loop: 1.74 M words (the noise of an SVI step at width 128) in 2.9-3.2 ns
    a word against 4.6-6.3 ns through ``RngBitGenerator`` and more through
    ``jax.extend.random.threefry_2x32`` (2 cores, jax 0.10, interleaved, under load). Being
    elementwise, it batches under ``vmap`` over keys as a loop over them would. Other key
    implementations use ``jax.random.bits``.
    """
    typed = jnp.issubdtype(jnp.result_type(key), jax.dtypes.prng_key)
    if not typed or str(jax.random.key_impl(key)) != "threefry2x32":
        return jax.random.bits(key, (n,), jnp.uint32)
    return _threefry_words(jax.random.key_data(key).astype(jnp.uint32), int(n))


# Threefry-2x32's rotation constants (Salmon et al. 2011, Table 4), used in alternating groups of 4 rounds
_THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _rotate_left(x, r: int):
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _threefry_words(key_data, n: int):
    """Word pairs ``threefry_2x32(key_data, (i, 0))``, ``i = 0, 1, ...``, interleaved, first ``n`` words.

    Threefry-2x32 with 20 rounds (JAX's generator): five groups of four add-rotate-xor rounds,
    each group followed by a key injection with the key schedule ``(k0, k1, k0 ^ k1 ^ 0x1BD11BDA)``.
    ``key_data`` ``[..., 2]`` uint32; leading axes (from ``vmap``) broadcast.

    References:
        Salmon, Moraes, Dror & Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011.
    """
    m = (n + 1) // 2
    if m > 2**32:
        raise ValueError(expected("n", "at most 2**33 words (a 32-bit block counter)", n))
    k0, k1 = key_data[..., 0:1], key_data[..., 1:2]
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(0x1BD11BDA))
    x0 = jnp.arange(m, dtype=jnp.uint32) + k0
    x1 = jnp.zeros((m,), jnp.uint32) + k1
    for group in range(5):
        for r in _THREEFRY_ROTATIONS[group % 2]:
            x0 = x0 + x1
            x1 = _rotate_left(x1, r) ^ x0
        x0 = x0 + ks[(group + 1) % 3]
        x1 = x1 + ks[(group + 2) % 3] + np.uint32(group + 1)
    return jnp.stack([x0, x1], axis=-1).reshape(key_data.shape[:-1] + (2 * m,))[..., :n]


# Giles' single-precision erf^-1 polynomials: p(w - 2.5) for w < 5, q(sqrt(w) - 3) beyond (Horner order)
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                   -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _horner(coefficients, w):
    p = jnp.full_like(w, coefficients[0])
    for c in coefficients[1:]:
        p = p * w + c
    return p


def _normal_from_uniform(u):
    """Standard normals ``sqrt(2) erf^-1(2u - 1)`` from open-interval uniforms (the inverse CDF).

    ``erf^-1(x) = x P(w)``, ``w = -log(1 - x^2)``, with Giles' polynomials, and ``1 - x^2`` taken as
    ``4 u (1 - u)`` (``1 - u`` is exact on the sampler's grid, so the only rounding is the product):
    on every point of the 23-bit grid of :func:`_uniform_open` the float32 result is within 1e-6 of
    the exact quantile (XLA's ``erf_inv(2u - 1)``: 2.2e-5 in the tails, from ``x^2``'s cancellation),
    exactly antisymmetric about ``u = 1/2``, and a fifth cheaper on CPU (0.9 M draws: 3.1 vs
    3.9 ms, 2 cores under load). float64 input keeps XLA's float64 ``erf_inv`` (full precision).

    References:
        Giles, "Approximating the erfinv function", GPU Computing Gems Jade Edition, 2011.
    """
    x = 2.0 * u - 1.0
    if jnp.finfo(u.dtype).bits > 32:
        return np.sqrt(2.0).astype(u.dtype) * jax.lax.erf_inv(x)
    w = -jnp.log(4.0 * u * (1.0 - u))
    p = jnp.where(w < 5.0, _horner(_ERFINV_CENTRAL, w - 2.5), _horner(_ERFINV_TAIL, jnp.sqrt(w) - 3.0))
    return np.sqrt(2.0).astype(u.dtype) * p * x


def gamma_rsample(key, a, shape=None):
    """Reparameterised ``Gamma(a, 1)`` draws (implicit gradients in ``a``), loop-free.

    All the noise (``8`` proposals of a normal and a uniform per draw, plus
    one uniform for shapes below 1) comes from a single call of the bit
    generator, which keeps the compiled graph small.

    Args:
        key: PRNG key.
        a: shape parameter(s) ``> 0``.
        shape: output shape (default ``a``'s shape); broadcastable with ``a``.

    Returns:
        draws ``[*shape]`` float (``a``'s float dtype; integers become the default float, float16 and
        bfloat16 are drawn in float32 and cast back), differentiable in ``a``.

    Raises:
        TypeError: ``key`` is not a PRNG key, ``a`` not real numeric data, ``shape`` not a tuple of ints.
        ValueError: a concrete ``a`` that is not finite and > 0, a ``shape`` with a negative entry or
            one that ``a`` does not broadcast to.

    References:
        Marsaglia & Tsang, "A simple method for generating gamma variables", ACM
        TOMS 2000; Figurnov, Mohamed & Mnih, "Implicit Reparameterization
        Gradients", NeurIPS 2018, eq. (6).

    Examples:
        >>> import jax
        >>> x = gamma_rsample(jax.random.key(0), 2.0, (1000,))
        >>> x.shape, bool((x > 0).all())
        ((1000,), True)
    """
    check_key(key)
    a = float_arg(a, "a")
    check_positive(a, "a")
    if shape is None:
        shape = jnp.shape(a)
    else:
        if isinstance(shape, (int, np.integer)) or not hasattr(shape, "__iter__"):
            raise TypeError(expected("shape", "a tuple of ints", type(shape).__name__, raw=True))
        shape = tuple(check_int(n, "shape", 0) for n in shape)
        try:
            if jnp.broadcast_shapes(jnp.shape(a), shape) != shape:
                raise ValueError
        except ValueError:
            raise ValueError(expected("shape", f"a shape that a's shape {jnp.shape(a)} broadcasts to",
                                      shape, raw=True)) from None
    if jnp.finfo(a.dtype).bits < 32:  # half precision: drawn in float32 (its uniforms need 23 bits), cast back
        return _gamma_rsample_jit(key, a.astype(jnp.float32), shape).astype(a.dtype)
    return _gamma_rsample_jit(key, a, shape)


def _gamma_rsample(key, a, shape):
    a = jnp.broadcast_to(a, shape)
    u = _uniform_open(key, (2 * _GAMMA_PROPOSALS + 1,) + shape, a.dtype)
    return _gamma_from_uniforms(a, u)


_gamma_rsample_jit = jax.jit(_gamma_rsample, static_argnames="shape")


def _gamma_from_uniforms(a, u):
    """:func:`gamma_rsample` given its ``[2 * 8 + 1, *shape]`` open-interval uniforms."""
    p = _GAMMA_PROPOSALS
    return _gamma_from_noise(a, _normal_from_uniform(u[:p]), u[p:2 * p], u[2 * p])
