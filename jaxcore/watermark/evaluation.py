"""Detection rate versus text length: the curve a watermark evaluation reports.

A watermark is judged by how many tokens it needs: the fraction of texts whose detection p-value
falls below a level after their first n scored tokens, for several n, beside the same fraction on
unwatermarked texts (the false-positive rate). :func:`detection_rates` computes every length in
one compiled program: the green and scored masks of :func:`jaxcore.watermark.detect` once, then
the statistics of each prefix (a context key's first occurrence in a prefix is its first
occurrence in the whole text, so truncating after the masks gives :func:`detect` on the prefix).

References:
    Wu et al., ICML 2024, Section 6 (detection versus length); Kirchenbauer et al., ICML 2023,
    Section 6.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxcore._util import check_bool, check_int, check_scalar, expected

from .context import _secret_words
from .detection import _green_and_scored, _inputs, _spec, _statistics
from .processors import KGW, DiPmark

__all__ = ["DetectionRates", "detection_rates"]


class DetectionRates(NamedTuple):
    """Result of :func:`detection_rates` (``N`` lengths, ``B`` texts).

    Attributes:
        lengths: ``int32[N]`` the lengths, in scored tokens.
        rate: ``float[N]`` fraction of texts with ``p_value < level`` at each length.
        p_value: ``float[N, B]`` the exact binomial p-value of each text's prefix.
        z_score: ``float[N, B]`` the z-score against the green fraction.
        num_scored: ``int32[N, B]`` tokens counted (``<= length``: fewer in a short text or where
            a context repeats).

    Examples:
        >>> DetectionRates._fields
        ('lengths', 'rate', 'p_value', 'z_score', 'num_scored')
    """

    lengths: Int[Array, " N"]
    rate: Float[Array, " N"]
    p_value: Float[Array, "N B"]
    z_score: Float[Array, "N B"]
    num_scored: Int[Array, "N B"]


def _lengths(lengths: Any) -> np.ndarray:
    if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__iter__"):
        raise TypeError(expected("lengths", "a sequence of positive ints", lengths))
    out = [check_int(n, f"lengths[{i}]", minimum=1) for i, n in enumerate(np.asarray(lengths).reshape(-1).tolist())]
    if not out or np.ndim(lengths) != 1:
        raise ValueError(expected("lengths", "a non-empty 1-D sequence of positive ints", lengths))
    return np.asarray(out, np.int32)


def detection_rates(
    watermark: DiPmark | KGW,
    tokens: Int[Array, "B L"],
    mask: Bool[Array, "B L"] | None = None,
    *,
    lengths: Sequence[int],
    scored: Bool[Array, "B L"] | None = None,
    level: float = 0.01,
    gamma: float | None = None,
    ignore_repeated: bool = True,
) -> DetectionRates:
    """Detection rate at a level versus the number of scored tokens, for a batch of texts.

    For each ``n`` in ``lengths``, :func:`jaxcore.watermark.detect` on each text's first ``n``
    scored positions (``mask & scored``, counted from the left); the rate is the fraction of the
    ``B`` texts whose exact binomial p-value is below ``level``. On unwatermarked texts the rate is
    the empirical false-positive rate (at most ``level`` in expectation, the test being exact).

    Args:
        watermark: the :class:`DiPmark` or :class:`KGW` processor (its key, V, k).
        tokens: ``int[B, L]`` token ids in ``[0, V)``; pass ``prompt + generation`` with
            ``scored`` False on the prompt to score the generation in decoding's contexts.
        mask: ``bool[B, L]`` real tokens (None: all).
        lengths: ``N`` positive ints, prefix lengths in scored tokens.
        scored: ``bool[B, L]`` positions that count (None: all real ones).
        level: the test's level in (0, 1).
        gamma, ignore_repeated: as :func:`jaxcore.watermark.detect`.

    Returns:
        :class:`DetectionRates` (``rate`` ``float[N]``, the per-text arrays ``[N, B]``).

    Raises:
        TypeError: not a watermark processor; ``lengths`` not a sequence of ints; non-integer tokens.
        ValueError: empty or non-positive ``lengths``; ``level`` outside (0, 1); tokens out of
            range or masks of another shape (as :func:`jaxcore.watermark.detect`).

    References:
        Wu et al., ICML 2024, Section 6; Kirchenbauer et al., ICML 2023, Section 6.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> wm = DiPmark(1000, key=jax.random.key(0))
        >>> text = jax.random.randint(jax.random.key(2), (8, 64), 0, 1000)  # not watermarked
        >>> res = detection_rates(wm, text, lengths=[16, 64])
        >>> res.rate.tolist(), res.num_scored[:, 0].tolist()
        ([0.0, 0.0], [16, 64])
    """
    upper, gamma, thr, g = _spec(watermark, gamma)
    tokens, mask, scored = _inputs(watermark, tokens, mask, scored)
    ignore_repeated = check_bool(ignore_repeated, "ignore_repeated")
    level = check_scalar(level, "level", low=0.0, high=1.0, low_open=True, high_open=True)
    lens = jnp.asarray(_lengths(lengths))
    return _rates_jit(watermark, tokens, mask, scored, lens, jnp.asarray(level, jnp.result_type(float)),
                      thr, upper, ignore_repeated, gamma, g)


@jax.jit(static_argnums=(6, 7, 8, 9, 10))
def _rates_jit(watermark, tokens, mask, scored, lengths, level, thr, upper, ignore_repeated, gamma, g):
    green, valid = _green_and_scored(_secret_words(watermark.key), tokens, mask, scored, watermark.context_size,
                                     watermark.vocab_size, watermark.method, watermark.num_rounds, thr, upper,
                                     ignore_repeated)
    rank = jnp.cumsum(scored & mask, axis=-1)  # 1 at the first scored position, 2 at the second, ...

    def one(n):
        keep = rank <= n
        return _statistics(green & keep, valid & keep, g, gamma, upper)

    res = jax.vmap(one)(lengths)
    rate = jnp.mean((res.p_value < level).astype(level.dtype), axis=-1)
    return DetectionRates(lengths, rate, res.p_value, res.z_score, res.num_scored)
