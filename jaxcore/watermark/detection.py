"""Detection without the model: green-token counts, DiPmark's score, z-scores and exact p-values.

For a text x_1..x_n and a watermark (its key, context size and permutation), token i is green when
its position under the permutation of its own context key lies in the green list: for DiPmark the
last 1 - gamma of the permutation (positions >= floor(gamma V)), for KGW the first gamma
(positions < floor(gamma V)). With ``ignore_repeated`` only the first token of each distinct
context key is scored (the generation rule of DiPmark, and what makes the null count exact):
under H0 (text independent of the key) the scored green indicators are independent Bernoulli(g),
g = |green list| / V, so the green count G of n scored tokens is exactly Binomial(n, g) (for
uniformly random permutations). Returned per text (vmapped over texts, padding masked):

- DiPmark's score Phi = (G - (1 - gamma) n) / sqrt(n) (Wu et al., Section 5; Hoeffding gives
  P_H0(Phi >= t) <= exp(-2 t^2)); KGW's z = (G - gamma n) / sqrt(n gamma (1 - gamma));
- the z-score of either, with the exact green fraction g;
- the exact binomial p-value P(Bin(n, g) >= G) (a z-score is only asymptotically normal).

References:
    Wu et al., "A Resilient and Accessible Distribution-Preserving Watermark for Large Language
    Models", ICML 2024, Section 5 (detection, the green-token score and its bound).
    Kirchenbauer et al., "A Watermark for Large Language Models", ICML 2023, Section 3 (z-test).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from jaxcore._util import check_bool, check_scalar, error_if, expected

from .context import _hash, _mask, _secret_words, _token_array, _windows
from .permutation import _token_positions
from .processors import KGW, DiPmark

__all__ = ["DetectionResult", "binomial_sf", "detect", "green_mask"]


class DetectionResult(NamedTuple):
    """Per-text detection statistics of :func:`detect` (each ``[B]``).

    Attributes:
        num_green: green tokens G among the scored ones (int32).
        num_scored: scored tokens n (int32).
        score: the method's own statistic: DiPmark's Phi = (G - (1-gamma) n)/sqrt(n), KGW's z.
        z_score: (G - g n) / sqrt(n g (1 - g)) with g the exact green fraction.
        p_value: exact P(Binomial(n, g) >= G) (1 when n = 0).

    Examples:
        >>> DetectionResult._fields
        ('num_green', 'num_scored', 'score', 'z_score', 'p_value')
    """

    num_green: Int[Array, " B"]
    num_scored: Int[Array, " B"]
    score: Float[Array, " B"]
    z_score: Float[Array, " B"]
    p_value: Float[Array, " B"]


def binomial_sf(k: Any, n: Any, p: Any) -> Float[Array, "..."]:
    """P(Binomial(n, p) >= k), exactly, through the regularised incomplete beta function.

    P(X >= k) = I_p(k, n - k + 1) for 1 <= k <= n; 1 for k <= 0; 0 for k > n.

    Args:
        k, n: integer counts (broadcasting), n >= 0.
        p: success probability in (0, 1).

    Returns:
        Upper-tail probabilities in the default float dtype.

    Raises:
        ValueError: concrete counts that are not integers or n < 0; p outside (0, 1).

    Examples:
        >>> round(float(binomial_sf(2, 3, 0.5)), 6)  # P(X >= 2) = 4/8
        0.5
    """
    from jaxcore._util import default_float, is_concrete

    if is_concrete(k, n, p):
        import numpy as np

        ka, na = np.asarray(k, np.float64), np.asarray(n, np.float64)
        for name, a in (("k", ka), ("n", na)):
            if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
                raise ValueError(expected(name, "integer counts", a[~(np.isfinite(a) & (a == np.round(a)))].ravel()[0]))
        if np.any(na < 0):
            raise ValueError(expected("n", "counts >= 0", na[na < 0].ravel()[0]))
        check_scalar(p, "p", low=0.0, high=1.0, low_open=True, high_open=True)
    dt = default_float()
    k = jnp.asarray(k, dt)
    n = jnp.asarray(n, dt)
    safe_k = jnp.clip(k, 1, jnp.maximum(n, 1))
    tail = jax.scipy.special.betainc(safe_k, jnp.maximum(n - safe_k + 1, 1), jnp.asarray(p, dt))
    return jnp.where(k <= 0, 1.0, jnp.where(k > n, 0.0, tail)).astype(dt)


def _first_occurrence(h, valid):
    """True at the first valid position of each distinct value of h (one text)."""
    L = h.shape[0]
    idx = jnp.arange(L)
    order = jnp.lexsort((idx, h, ~valid))
    sh, sv = h[order], valid[order]
    prev_h = jnp.concatenate([sh[:1], sh[:-1]])
    prev_v = jnp.concatenate([jnp.zeros((1,), bool), sv[:-1]])
    first_sorted = sv & ((idx == 0) | (sh != prev_h) | ~prev_v)
    return jnp.zeros(L, bool).at[order].set(first_sorted)


def _green_and_scored(secret, tokens, mask, scored, k, vocab_size, method, num_rounds, threshold, upper, ignore_repeated):
    win = _windows(tokens, mask, k)  # [B, L, k]
    h = _hash(secret, win)  # [B, L]
    pos = _token_positions(secret, h, jnp.clip(tokens, 0, vocab_size - 1), vocab_size, method, num_rounds)
    green = (pos >= threshold) if upper else (pos < threshold)
    valid = scored & mask
    if ignore_repeated:
        valid = jax.vmap(_first_occurrence)(h, valid)
    return green & valid, valid


def _statistics(green, valid, g, gamma, dipmark):
    G = jnp.sum(green, axis=-1)
    n = jnp.sum(valid, axis=-1)
    dt = jnp.result_type(float)
    Gf, nf = G.astype(dt), n.astype(dt)
    sq = jnp.sqrt(jnp.maximum(nf, 1))
    z = jnp.where(n > 0, (Gf - g * nf) / jnp.sqrt(jnp.maximum(nf * g * (1 - g), 1e-30)), 0.0)
    if dipmark:
        score = jnp.where(n > 0, (Gf - (1 - gamma) * nf) / sq, 0.0)
    else:
        score = jnp.where(n > 0, (Gf - gamma * nf) / jnp.sqrt(jnp.maximum(nf * gamma * (1 - gamma), 1e-30)), 0.0)
    p = binomial_sf(G, n, g)
    return DetectionResult(G.astype(jnp.int32), n.astype(jnp.int32), score.astype(dt), z.astype(dt), p)


def _spec(watermark: Any, gamma: Any) -> tuple[bool, float, int, float]:
    """(upper, gamma, threshold position, exact green fraction g) of a watermark."""
    if isinstance(watermark, DiPmark):
        gamma = 0.5 if gamma is None else check_scalar(gamma, "gamma", low=0.0, high=1.0, low_open=True, high_open=True)
        thr = int(gamma * watermark.vocab_size)
        return True, gamma, thr, (watermark.vocab_size - thr) / watermark.vocab_size
    if isinstance(watermark, KGW):
        if gamma is not None:
            raise ValueError(expected("gamma", "None for KGW (its green fraction is the processor's gamma)", gamma))
        thr = watermark.num_green
        return False, watermark.gamma, thr, thr / watermark.vocab_size
    raise TypeError(expected("watermark", "a DiPmark or KGW processor", type(watermark).__name__, raw=True))


def _inputs(watermark, tokens, mask, scored):
    tokens = _token_array(tokens, "tokens", min_ndim=2, allow_minus_one=False)
    mask = _mask(mask, tokens)
    scored = _mask(scored, tokens, "scored")
    v = watermark.vocab_size
    if not isinstance(tokens, jax.core.Tracer) and not isinstance(mask, jax.core.Tracer):
        bad = jnp.where(mask, tokens, 0)
        if bad.size and int(bad.max()) >= v:
            raise ValueError(expected("tokens", f"token ids < vocab_size = {v}", int(bad.max())))
    elif tokens.size:  # under jit: a run-time check (an id >= V would be scored as another token)
        tokens = error_if(tokens, jnp.any(mask & ((tokens < 0) | (tokens >= v))), "tokens",
                          f"token ids in [0, vocab_size = {v}) (checked at run time)")
    return tokens, mask, scored


def green_mask(
    watermark: DiPmark | KGW,
    tokens: Int[Array, "B L"],
    mask: Bool[Array, "B L"] | None = None,
    *,
    scored: Bool[Array, "B L"] | None = None,
    gamma: float | None = None,
    ignore_repeated: bool = True,
) -> tuple[Bool[Array, "B L"], Bool[Array, "B L"]]:
    """Which tokens are green and which are scored, per position (the per-token view of :func:`detect`).

    Args: as :func:`detect`.

    Returns:
        ``(green, scored)``, both ``bool[B, L]``; ``green`` implies ``scored``.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> wm = DiPmark(100, key=jax.random.key(0), context_size=1)
        >>> g, s = green_mask(wm, jnp.array([[1, 2, 1, 2]]))
        >>> s.tolist()  # the second (1 -> 2) repeats the context of position 1
        [[True, True, True, False]]
    """
    upper, gamma, thr, g = _spec(watermark, gamma)
    tokens, mask, scored = _inputs(watermark, tokens, mask, scored)
    ignore_repeated = check_bool(ignore_repeated, "ignore_repeated")
    return _green_jit(watermark, tokens, mask, scored, thr, upper, ignore_repeated)


@jax.jit(static_argnums=(4, 5, 6))
def _green_jit(watermark, tokens, mask, scored, thr, upper, ignore_repeated):
    return _green_and_scored(_secret_words(watermark.key), tokens, mask, scored, watermark.context_size,
                             watermark.vocab_size, watermark.method, watermark.num_rounds, thr, upper, ignore_repeated)


def detect(
    watermark: DiPmark | KGW,
    tokens: Int[Array, "B L"],
    mask: Bool[Array, "B L"] | None = None,
    *,
    scored: Bool[Array, "B L"] | None = None,
    gamma: float | None = None,
    ignore_repeated: bool = True,
) -> DetectionResult:
    """Detect the watermark in a batch of texts from their tokens and the key alone (no model).

    Token i's context is ``tokens[i-k:i]`` (-1 before the start and at masked positions, as in
    decoding); it is scored if ``mask`` and ``scored`` hold there (and, with ``ignore_repeated``,
    if its context key did not occur at an earlier scored position of the same text). Pass
    ``tokens = prompt + generation`` with ``scored`` False on the prompt to reproduce decoding's
    contexts exactly; a generation alone works too (its first k tokens then read -1 contexts).

    Args:
        watermark: the :class:`DiPmark` or :class:`KGW` processor that generated (its key, V, k).
        tokens: ``int[B, L]`` token ids in ``[0, V)`` (padding entries may be anything in range).
        mask: ``bool[B, L]`` real tokens (None: all).
        scored: ``bool[B, L]`` positions to count (None: all real ones).
        gamma: DiPmark's detection split (default 1/2: green = last half of the permutation);
            must be None for KGW (its green list is the processor's gamma).
        ignore_repeated: score only the first token of each context key.

    Returns:
        :class:`DetectionResult` of ``[B]`` arrays.

    Raises:
        TypeError / ValueError: not a watermark processor, non-integer or out-of-range tokens,
            masks of another shape, gamma outside (0, 1). Under ``jit`` a real token outside
            ``[0, V)`` raises at run time (equinox's ``EqxRuntimeError``, naming ``tokens``).

    References:
        Wu et al., ICML 2024, Section 5; Kirchenbauer et al., ICML 2023, Section 3.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> wm = DiPmark(1000, key=jax.random.key(0))
        >>> text = jax.random.randint(jax.random.key(1), (2, 50), 0, 1000)  # not watermarked
        >>> res = detect(wm, text)
        >>> res.num_scored.tolist(), bool(jnp.all(res.p_value > 1e-3))
        ([50, 50], True)
    """
    upper, gamma, thr, g = _spec(watermark, gamma)
    tokens, mask, scored = _inputs(watermark, tokens, mask, scored)
    ignore_repeated = check_bool(ignore_repeated, "ignore_repeated")
    return _detect_jit(watermark, tokens, mask, scored, thr, upper, ignore_repeated, gamma, g)


@jax.jit(static_argnums=(4, 5, 6, 7, 8))
def _detect_jit(watermark, tokens, mask, scored, thr, upper, ignore_repeated, gamma, g):
    green, valid = _green_and_scored(_secret_words(watermark.key), tokens, mask, scored, watermark.context_size,
                                     watermark.vocab_size, watermark.method, watermark.num_rounds, thr, upper,
                                     ignore_repeated)
    return _statistics(green, valid, g, gamma, upper)
