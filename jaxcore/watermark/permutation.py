"""Keyed pseudorandom permutations of the vocabulary: a Feistel network with cycle-walking.

DiPmark reorders the vocabulary by a permutation drawn afresh from each context key. Drawing a
uniform permutation of V = 49,152 entries per token (the reference's ``torch.randperm``, or
``jax.random.permutation``, a sort) costs O(V log V) per token and O(V) even to look up one token.
A keyed bijection of the index set instead gives a token's position in O(1):

- write an index x < u w (two radices u <= w near sqrt(V), u w >= V as small as possible) as
  x = a w + b, a < u, b < w;
- apply r rounds of (a, b) <- (b, (a + F_i(b)) mod u), the radices swapping each round
  (a mixed-radix Feistel network, as in the NIST FF1/FF3 format-preserving ciphers), with
  F_i(b) = floor(hi16(mix(b xor k_i)) u / 2^16) and round keys k_i = mix(seed + mix(mix(s_0 xor i phi) + s_1))
  from the context hash ``seed`` and the secret;
- cycle-walk: apply the network again while the result is >= V (a bijection of [0, u w)
  restricted this way is a bijection of [0, V); Black & Rogaway 2002). SmolLM2's V = 49,152 =
  192 x 256 is covered exactly (no walk); otherwise u w - V < u, so walks are rare.

A Feistel network with few rounds and small halves is not a uniformly random permutation; the bias
this leaves in DiPmark's distribution preservation is measured against true permutations by
:func:`jaxcore.watermark.permutation_bias` (the ``watermark.bias`` benchmark). ``method="shuffle"``
draws true uniform permutations with ``jax.random.permutation`` instead (O(V log V) per token).

References:
    M. Luby, C. Rackoff. "How to construct pseudorandom permutations from pseudorandom functions."
    SIAM J. Computing 17(2), 1988.
    J. Black, P. Rogaway. "Ciphers with arbitrary finite domains." CT-RSA 2002 (cycle-walking).
    M. Dworkin. "Recommendation for block cipher modes of operation: methods for format-preserving
    encryption." NIST SP 800-38G, 2016 (mixed-radix Feistel rounds).
    Wu et al., "A Resilient and Accessible Distribution-Preserving Watermark for Large Language
    Models", ICML 2024, Section 4 (the permutation of the token list).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import jax
import jax.numpy as jnp
from jaxtyping import Array, Int, UInt32

from jaxcore._util import check_choice, check_int, check_key, error_if, expected

from .context import GOLDEN, _secret_words, _token_array, mix32

__all__ = ["PERMUTATION_METHODS", "token_positions", "vocab_positions"]

PERMUTATION_METHODS = ("feistel", "shuffle")
DEFAULT_ROUNDS = 6


def radices(vocab_size: int) -> tuple[int, int]:
    """(u, w): the two radices of the network's domain [0, u w), u w >= V as small as possible, both near sqrt(V).

    V = 49,152 = 192 x 256 is covered exactly (no cycle-walking); a prime V gets u w - V < u.
    Both radices are >= 2 for V >= 3 (a radix of 1 would leave only the cyclic shifts).
    """
    v = int(vocab_size)
    best = None
    u = math.isqrt(v - 1) + 1
    while u >= min(2, v - 1) and 4 * u * u >= v:
        w = -(-v // u)
        cost = (u * w - v, abs(w - u), u)
        if best is None or cost < best[0]:
            best = (cost, u, w)
        u -= 1
    return best[1], best[2]


def _round_keys(secret: UInt32[Array, "2"], seed: UInt32[Array, "..."], num_rounds: int) -> UInt32[Array, "... r"]:
    consts = jnp.asarray([(i + 1) * GOLDEN & 0xFFFFFFFF for i in range(num_rounds)], jnp.uint32)
    per_round = mix32(mix32(secret[0] ^ consts) + secret[1])  # [r]: both key words
    return mix32(seed.astype(jnp.uint32)[..., None] + per_round)


def _network(x: UInt32[Array, "..."], keys: UInt32[Array, "... r"], u: int, w: int) -> UInt32[Array, "..."]:
    """One pass of the mixed-radix Feistel network on x < u w; ``keys`` broadcasts against ``x[..., None]``.

    x = a w + b with a < u, b < w; a round maps (a, b) in Z_u x Z_w to (b, a + F(b) mod u) in
    Z_w x Z_u (the radices swap), F(b) = floor(hi16(mix(b xor k_i)) u / 2^16). Each round is a
    bijection (a = (a' - F(b)) mod u), hence so is the pass. No division inside the rounds.
    """
    if w & (w - 1) == 0:
        shift = w.bit_length() - 1
        a, b = x >> shift, x & jnp.uint32(w - 1)
    else:
        a, b = x // jnp.uint32(w), x % jnp.uint32(w)
    ra, rb = u, w
    for i in range(keys.shape[-1]):  # static round count, unrolled
        f = ((mix32(b ^ keys[..., i]) >> 16) * jnp.uint32(ra)) >> 16
        s = a + f
        a, b = b, jnp.where(s >= ra, s - jnp.uint32(ra), s)
        ra, rb = rb, ra
    return a * jnp.uint32(rb) + b


def _walk(x: UInt32[Array, "..."], keys: UInt32[Array, "... r"], vocab_size: int) -> UInt32[Array, "..."]:
    """Cycle-walking: the network applied until the value is < vocab_size (x < vocab_size on entry)."""
    u, w = radices(vocab_size)
    y = _network(x, keys, u, w)
    if u * w == vocab_size:
        return y
    v = jnp.uint32(vocab_size)
    return jax.lax.while_loop(lambda y: jnp.any(y >= v), lambda y: jnp.where(y >= v, _network(y, keys, u, w), y), y)


def _shuffle_key(secret: UInt32[Array, "2"], seed: UInt32[Array, ""]) -> Any:
    base = jax.random.wrap_key_data(secret, impl="threefry2x32")
    return jax.random.fold_in(base, seed)


def _positions_one(secret, seed, vocab_size: int, method: str, num_rounds: int) -> Int[Array, " V"]:
    """Position of every token under the permutation of one context hash ``seed`` (scalar)."""
    if method == "shuffle":
        perm = jax.random.permutation(_shuffle_key(secret, seed), vocab_size)  # position -> token
        return jnp.zeros(vocab_size, jnp.int32).at[perm].set(jnp.arange(vocab_size, dtype=jnp.int32))
    keys = _round_keys(secret, seed, num_rounds)
    return _walk(jnp.arange(vocab_size, dtype=jnp.uint32), keys, vocab_size).astype(jnp.int32)


def _positions(secret, seeds, vocab_size: int, method: str, num_rounds: int) -> Int[Array, "... V"]:
    flat = seeds.reshape(-1)
    out = jax.vmap(lambda s: _positions_one(secret, s, vocab_size, method, num_rounds))(flat)
    return out.reshape(seeds.shape + (vocab_size,))


def _token_positions(secret, seeds, tokens, vocab_size: int, method: str, num_rounds: int) -> Int[Array, "..."]:
    """Position of ``tokens`` (same shape as ``seeds``) under the permutation of each seed; O(1) for Feistel."""
    if method == "shuffle":
        pos = _positions(secret, seeds, vocab_size, method, num_rounds)
        return jnp.take_along_axis(pos, tokens[..., None].astype(jnp.int32), axis=-1)[..., 0]
    keys = _round_keys(secret, seeds, num_rounds)
    return _walk(tokens.astype(jnp.uint32), keys, vocab_size).astype(jnp.int32)


def _check_method(method: Any, num_rounds: Any) -> tuple[str, int]:
    method = check_choice(method, "method", PERMUTATION_METHODS)
    num_rounds = check_int(num_rounds, "num_rounds", minimum=1, maximum=64)
    return method, num_rounds


def _seeds(seed: Any) -> jax.Array:
    dtype = getattr(seed, "dtype", None)
    if dtype is None or not jnp.issubdtype(dtype, jnp.integer) or dtype == jnp.bool_:
        got = type(seed).__name__ if dtype is None else f"dtype {dtype}"
        raise TypeError(expected("seed", "an integer (uint32) array of context hashes", got, raw=True))
    return jnp.asarray(seed).astype(jnp.uint32)


def vocab_positions(
    key: Any,
    seed: UInt32[Array, "..."],
    vocab_size: int,
    *,
    method: Literal["feistel", "shuffle"] = "feistel",
    num_rounds: int = DEFAULT_ROUNDS,
) -> Int[Array, "... V"]:
    """The position of every token of the vocabulary under the permutation seeded by each context hash.

    pi_seed : {0..V-1} -> {0..V-1} is a bijection; ``out[..., t] = pi_seed(t)``. DiPmark's green
    list is the tokens at positions >= gamma V; KGW's, those at positions < gamma V.

    Args:
        key: the watermark's secret ``jax.random.key(...)``.
        seed: ``uint32[...]`` context hashes (:func:`jaxcore.watermark.context_hash`).
        vocab_size: V >= 2.
        method: "feistel" (keyed Feistel network with cycle-walking, O(V) per seed) or "shuffle"
            (``jax.random.permutation``, a uniform permutation, O(V log V) per seed).
        num_rounds: Feistel rounds (static), default 6.

    Returns:
        ``int32[..., V]``: a permutation of ``0..V-1`` along the last axis.

    Raises:
        TypeError / ValueError: a bad key, seed dtype, vocabulary size, method or round count.

    References:
        Luby & Rackoff 1988; Black & Rogaway 2002; Wu et al., ICML 2024, Section 4.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> p = vocab_positions(jax.random.key(0), jnp.uint32(7), 10)
        >>> sorted(p.tolist()) == list(range(10))
        True
    """
    check_key(key)
    seed = _seeds(seed)
    vocab_size = check_int(vocab_size, "vocab_size", minimum=2, maximum=2**30)
    method, num_rounds = _check_method(method, num_rounds)
    return _vocab_positions_jit(key, seed, vocab_size, method, num_rounds)


@jax.jit(static_argnums=(2, 3, 4))
def _vocab_positions_jit(key, seed, vocab_size, method, num_rounds):
    return _positions(_secret_words(key), seed, vocab_size, method, num_rounds)


def token_positions(
    key: Any,
    seed: UInt32[Array, "..."],
    tokens: Int[Array, "..."],
    vocab_size: int,
    *,
    method: Literal["feistel", "shuffle"] = "feistel",
    num_rounds: int = DEFAULT_ROUNDS,
) -> Int[Array, "..."]:
    """Position of each token under the permutation of its own context hash: pi_seed[i](token[i]).

    With ``method="feistel"`` this is O(1) per token (about 4/3 network passes on average for
    V = 49,152), without materialising the permutation; equal to
    ``vocab_positions(key, seed, V)[..., token]``.

    Args:
        key: the watermark's secret key.
        seed: ``uint32[...]`` context hashes.
        tokens: ``int[...]`` token ids in ``[0, V)``, the shape of ``seed``.
        vocab_size: V >= 2.
        method, num_rounds: as in :func:`vocab_positions`.

    Returns:
        ``int32[...]`` positions in ``[0, V)``.

    Raises:
        TypeError / ValueError: bad arguments, tokens outside ``[0, V)`` or of another shape. Under
            ``jit`` a token outside ``[0, V)`` raises at run time (``EqxRuntimeError`` naming ``tokens``).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> k, s = jax.random.key(0), jnp.uint32(7)
        >>> int(token_positions(k, s, jnp.int32(3), 10)) == int(vocab_positions(k, s, 10)[3])
        True
    """
    check_key(key)
    seed = _seeds(seed)
    vocab_size = check_int(vocab_size, "vocab_size", minimum=2, maximum=2**30)
    tokens = _token_array(tokens, "tokens", allow_minus_one=False)
    if tokens.shape != seed.shape:
        raise ValueError(expected("tokens", f"the shape of seed {tuple(seed.shape)}", f"shape {tuple(tokens.shape)}", raw=True))
    if not isinstance(tokens, jax.core.Tracer) and tokens.size and int(tokens.max()) >= vocab_size:
        raise ValueError(expected("tokens", f"token ids < vocab_size = {vocab_size}", int(tokens.max())))
    if isinstance(tokens, jax.core.Tracer) and tokens.size:  # under jit: an id outside [0, V) has no position
        tokens = error_if(tokens, jnp.any((tokens < 0) | (tokens >= vocab_size)), "tokens",
                          f"token ids in [0, vocab_size = {vocab_size}) (checked at run time)")
    method, num_rounds = _check_method(method, num_rounds)
    return _token_positions_jit(key, seed, tokens, vocab_size, method, num_rounds)


@jax.jit(static_argnums=(3, 4, 5))
def _token_positions_jit(key, seed, tokens, vocab_size, method, num_rounds):
    return _token_positions(_secret_words(key), seed, tokens, vocab_size, method, num_rounds)
