"""Context keys: a keyed 32-bit hash of the previous k tokens (the "texture key" of DiPmark).

The watermark's randomness at a position is a function of a secret key and of the ``k`` tokens before
it. Here that function is a keyed integer hash: the secret key's words seed a chain of the
``lowbias32`` avalanche mixer (C. Wellons, "Prospecting for hash functions", 2018; every output bit
flips with probability 1/2 when one input bit flips),

    h_0 = mix(s_0),   h_j = mix(h_{j-1} xor mix(c_j xor s_1) + j * 0x9E3779B9),   j = 1..k,

in uint32 arithmetic, vectorised over any batch of contexts (no host round trip, no Python loop over
tokens; the ``k`` context slots are a ``lax.scan``).

Not bit-compatible with the reference implementation: DiPmark's code (after Hu et al.'s unbiased
watermark) hashes the secret and the context bytes with SHA-256 on the host and seeds
``torch.randperm`` with the digest. SHA-256 on the host per token would leave the compiled decoding
loop at every step, and ``torch.randperm``'s output is defined only by PyTorch's CPU generator, so no
JAX program can reproduce it. The statistical contract is what carries over: distinct contexts give
(pseudo)independent, uniform-looking permutations, identical contexts give identical ones.

References:
    Y. Wu, Z. Hu, J. Guo, H. Zhang, H. Huang. "A Resilient and Accessible Distribution-Preserving
    Watermark for Large Language Models." ICML 2024, Section 4 (texture key, cipher).
    J. Kirchenbauer et al. "A Watermark for Large Language Models." ICML 2023, Algorithm 2.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Int, UInt32

from jaxcore._util import check_auto_mesh, check_int, check_key, expected

__all__ = ["context_hash", "context_windows", "secret_words"]

GOLDEN = 0x9E3779B9


def mix32(x: UInt32[Array, "..."]) -> UInt32[Array, "..."]:
    """The lowbias32 avalanche mixer on uint32 (Wellons 2018): xorshift-multiply, twice."""
    x = x.astype(jnp.uint32)
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def secret_words(key: Any) -> UInt32[Array, "2"]:
    """The two uint32 words of a watermark's secret key, from any ``jax.random.key`` implementation.

    Args:
        key: a single ``jax.random.key(...)`` (or legacy raw ``PRNGKey``).

    Returns:
        ``uint32[2]``: the key's data words folded into two (threefry keys are two words already).

    Raises:
        TypeError: ``key`` is not a single PRNG key.

    Examples:
        >>> import jax
        >>> secret_words(jax.random.key(0)).dtype
        dtype('uint32')
    """
    check_key(key)
    return _secret_words(key)


def _secret_words(key: Any) -> UInt32[Array, "2"]:
    data = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    data = jnp.ravel(data).astype(jnp.uint32)
    if data.shape[0] == 2:
        return data
    a = jnp.uint32(0x243F6A88)
    b = jnp.uint32(0x85A308D3)
    for i in range(data.shape[0]):  # static, the key's word count
        a = mix32(a ^ data[i])
        b = mix32(b + data[i] * jnp.uint32(GOLDEN))
    return jnp.stack([a, b])


def _hash(secret: UInt32[Array, "2"], context: Int[Array, "... k"]) -> UInt32[Array, "..."]:
    c = context.astype(jnp.int32).astype(jnp.uint32)  # -1 (before the text) becomes 0xFFFFFFFF
    h = jnp.broadcast_to(mix32(secret[0]), c.shape[:-1])
    s1 = secret[1]
    consts = jnp.asarray([(j + 1) * GOLDEN & 0xFFFFFFFF for j in range(c.shape[-1])], jnp.uint32)

    def body(h, xs):
        cj, gj = xs
        return mix32(h ^ (mix32(cj ^ s1) + gj)), None

    # a scan, not an unrolled chain: XLA:CPU's compile time of the unrolled chain fused into the
    # permutation network grows exponentially with the context size (minutes at k = 5)
    h, _ = jax.lax.scan(body, h, (jnp.moveaxis(c, -1, 0), consts))
    return h


def context_hash(key: Any, context: Int[Array, "... k"]) -> UInt32[Array, "..."]:
    """Keyed 32-bit hash of each context window (its last axis: the k previous tokens, oldest first).

    h_0 = mix(s_0), h_j = mix(h_{j-1} xor (mix(c_j xor s_1) + j phi)), with mix the lowbias32
    mixer and phi = 0x9E3779B9; order-sensitive, and -1 (a position before the text) is a value.

    Args:
        key: the watermark's secret ``jax.random.key(...)``.
        context: ``int[..., k]`` token ids (``k >= 1``), -1 for positions before the start.

    Returns:
        ``uint32[...]``: one hash per window.

    Raises:
        TypeError: ``key`` is not a PRNG key, or ``context`` is not an integer array.
        ValueError: ``context`` has no last axis, or entries below -1.

    References:
        Wu et al., ICML 2024, Section 4 (texture key); Wellons, "Prospecting for hash functions", 2018.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> k = jax.random.key(0)
        >>> h = context_hash(k, jnp.array([[1, 2], [2, 1], [1, 2]]))
        >>> bool(h[0] == h[2]), bool(h[0] == h[1])
        (True, False)
    """
    check_key(key)
    context = _token_array(context, "context", min_ndim=1)
    if context.shape[-1] < 1:
        raise ValueError(expected("context", "a last axis of k >= 1 tokens", f"shape {context.shape}", raw=True))
    return _context_hash_jit(key, context)


@jax.jit
def _context_hash_jit(key, context):
    return _hash(_secret_words(key), context)


def _token_array(x: Any, name: str, min_ndim: int = 0, allow_minus_one: bool = True) -> jax.Array:
    """An int32 JAX array of token ids; concrete values are checked (>= -1, or >= 0)."""
    if isinstance(x, (list, tuple)):
        x = np.asarray(x)
    dtype = getattr(x, "dtype", None)
    if dtype is None or not (jnp.issubdtype(dtype, jnp.integer)) or dtype == jnp.bool_:
        got = type(x).__name__ if dtype is None else f"dtype {dtype}"
        raise TypeError(expected(name, "an integer array of token ids", got, raw=True))
    check_auto_mesh(x, name)
    if np.ndim(x) < min_ndim:
        raise ValueError(expected(name, f"an array with at least {min_ndim} axes", f"shape {np.shape(x)}", raw=True))
    if not isinstance(x, jax.core.Tracer):
        a = np.asarray(x)
        low = -1 if allow_minus_one else 0
        if a.size and a.min() < low:
            raise ValueError(expected(name, f"token ids >= {low}", int(a.min())))
        if a.size and a.max() > np.iinfo(np.int32).max:
            raise ValueError(expected(name, "token ids that fit in int32", int(a.max())))
    return jnp.asarray(x).astype(jnp.int32)


def _windows(tokens: Int[Array, "B L"], mask: Bool[Array, "B L"], k: int) -> Int[Array, "B L k"]:
    t = jnp.where(mask, tokens, -1)
    L = t.shape[1]
    pad = jnp.full((t.shape[0], k), -1, t.dtype)
    tp = jnp.concatenate([pad, t], axis=1)  # position i of t is i + k of tp
    idx = jnp.arange(L)[:, None] + jnp.arange(k)[None, :]  # [L, k]: tp[i .. i+k-1] = t[i-k .. i-1]
    return tp[:, idx]


def context_windows(tokens: Int[Array, "B L"], mask: Bool[Array, "B L"] | None, context_size: int) -> Int[Array, "B L k"]:
    """The context window of every position of a batch of texts: ``out[b, i] = tokens[b, i-k:i]``.

    Positions before the start of a text and masked (padding) positions read as -1, as in
    ``jaxcore.lm``'s decoding protocol (a left-padded prompt's padding is -1 in the context).

    Args:
        tokens: ``int[B, L]`` token ids.
        mask: ``bool[B, L]``, True for real tokens (None: all real).
        context_size: k >= 1.

    Returns:
        ``int32[B, L, k]``, oldest token first.

    Raises:
        TypeError / ValueError: non-integer tokens, a mask of another shape, k < 1.

    Examples:
        >>> import jax.numpy as jnp
        >>> context_windows(jnp.array([[5, 6, 7]]), None, 2)[0].tolist()
        [[-1, -1], [-1, 5], [5, 6]]
    """
    tokens = _token_array(tokens, "tokens", min_ndim=2)
    k = check_int(context_size, "context_size", minimum=1)
    mask = _mask(mask, tokens)
    return _windows_jit(tokens, mask, k)


_windows_jit = jax.jit(_windows, static_argnums=2)


def _mask(mask: Any, tokens: jax.Array, name: str = "mask") -> jax.Array:
    if tokens.ndim != 2:
        raise ValueError(expected("tokens", "a [batch, length] array", f"shape {tuple(tokens.shape)}", raw=True))
    if mask is None:
        return jnp.ones(tokens.shape, bool)
    dtype = getattr(mask, "dtype", None)
    if dtype is None:
        mask = np.asarray(mask)
        dtype = mask.dtype
    if not (dtype == jnp.bool_ or jnp.issubdtype(dtype, jnp.integer)):
        raise TypeError(expected(name, "a bool array", f"dtype {dtype}", raw=True))
    if tuple(np.shape(mask)) != tuple(tokens.shape):
        raise ValueError(expected(name, f"shape {tuple(tokens.shape)} (like tokens)", f"shape {tuple(np.shape(mask))}", raw=True))
    return jnp.asarray(mask).astype(bool)
