"""Prefix scorers: a value head (CD-FUDGE) and a vocabulary-wide Q head (CD-Q) on frozen hidden states.

Both read the frozen language model's final residual stream ``h`` (``[..., d]``, before the final
norm, as :func:`jaxcore.lm.forward_hidden` and the ``uses_hidden`` processor hook of
:func:`jaxcore.lm.generate` give it), normalise it to unit Euclidean norm (``n(h) = h / ||h||``: one
Adam step of size eta moves a value by at most about eta, whatever d) and apply one affine map:
``V(h) = w . n(h) + b`` (a scalar per prefix) and ``Q(h) = W^T n(h)`` (one value per next token).
A :class:`Combined` scorer is a weighted sum of scorers of one kind (multi-objective decoding).

References:
    S. Mudgal et al., "Controlled Decoding from Language Models", ICML 2024, Sec. 3 (prefix scorers,
    CD-FUDGE and CD-Q) and Sec. 4 (blockwise CD, multi-objective).
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxcore._util import check_int, check_key, default_float, error_if, expected, is_concrete

__all__ = ["Combined", "QHead", "ValueHead", "combine"]


def _normalise(hidden):
    h = hidden.astype(jnp.promote_types(hidden.dtype, default_float()))
    return h * jax.lax.rsqrt(jnp.maximum(jnp.sum(h * h, axis=-1, keepdims=True), 1e-30))


class ValueHead(eqx.Module):
    """A prefix value ``V(h) = w . n(h) + b`` with ``n(h) = h / ||h||`` (CD-FUDGE's scorer).

    Args:
        dim: the hidden size d.
        key: keyword-only; ``None`` (default) starts at zero (V = 0 everywhere: decoding equals the
            base model), a ``jax.random.key`` draws ``w ~ N(0, 1/d)``.

    Call ``head(hidden[..., d]) -> [...]`` float32.

    Examples:
        >>> import jax.numpy as jnp
        >>> ValueHead(4)(jnp.ones((2, 3, 4))).shape
        (2, 3)
    """

    weight: Float[Array, " d"]
    bias: Float[Array, ""]

    def __init__(self, dim: int, *, key=None):
        d = check_int(dim, "dim", minimum=1)
        if key is None:
            self.weight = jnp.zeros((d,), default_float())
        else:
            self.weight = jax.random.normal(check_key(key), (d,), default_float()) / np.sqrt(d)
        self.bias = jnp.zeros((), default_float())

    @property
    def dim(self) -> int:
        return self.weight.shape[0]

    def __call__(self, hidden: Float[Array, "... d"]) -> Float[Array, "..."]:
        return _normalise(hidden) @ self.weight + self.bias


def _check_ids(ids, vocab_size: int, name: str):
    """Integer token ids in ``[0, vocab_size)``: on the host when concrete, else at run time (``error_if``)."""
    dtype = getattr(ids, "dtype", None)
    if dtype is None:
        ids = np.asarray(ids)
        dtype = ids.dtype
    if dtype == np.bool_ or not jnp.issubdtype(dtype, jnp.integer):
        raise TypeError(expected(name, "an integer array of token ids", f"dtype {dtype}", raw=True))
    what = f"token ids in [0, {vocab_size})"
    if is_concrete(ids):
        a = np.asarray(ids)
        bad = a[(a < 0) | (a >= vocab_size)]
        if bad.size:
            raise ValueError(expected(name, what, int(bad[0])))
        return jnp.asarray(ids)
    return error_if(ids, jnp.any((ids < 0) | (ids >= vocab_size)), name, what + " (checked at run time)")


class QHead(eqx.Module):
    """Next-token values ``Q(h) = W^T n(h)`` for the whole vocabulary (CD-Q's scorer).

    ``Q(h_t)[y]`` scores the prefix extended by token ``y``; the head costs one d x V product per
    position, about the language-model head's. It has no bias: with a bias shared by all prefixes,
    Adam's semi-gradient steps on CD-Q's bootstrapped target diverged on the toy model (measured),
    without one they converge to the exact Q.

    Args:
        dim: the hidden size d.
        vocab_size: V.
        key: keyword-only; ``None`` (default) starts at zero, a key draws ``W ~ N(0, 1/d)``.

    Call ``head(hidden[..., d]) -> [..., V]``; ``head.at(hidden[..., d], ids[..., k]) -> [..., k]``
    gathers k of them (float32).

    Examples:
        >>> import jax.numpy as jnp
        >>> QHead(4, 10)(jnp.ones((2, 4))).shape
        (2, 10)
    """

    weight: Float[Array, "d V"]

    def __init__(self, dim: int, vocab_size: int, *, key=None):
        d = check_int(dim, "dim", minimum=1)
        v = check_int(vocab_size, "vocab_size", minimum=1)
        if key is None:
            self.weight = jnp.zeros((d, v), default_float())
        else:
            self.weight = jax.random.normal(check_key(key), (d, v), default_float()) / np.sqrt(d)

    @property
    def dim(self) -> int:
        return self.weight.shape[0]

    def __call__(self, hidden: Float[Array, "... d"]) -> Float[Array, "... V"]:
        return _normalise(hidden) @ self.weight

    def at(self, hidden: Float[Array, "... d"], ids: Int[Array, "... k"], *, check_ids: bool = True) -> Float[Array, "... k"]:
        """``Q(h)[ids]`` without forming all V values (a gather of k columns).

        Raises:
            TypeError: non-integer ``ids``.
            ValueError: an id outside ``[0, V)`` (on the host when concrete; under ``jit`` at run
                time, an ``EqxRuntimeError`` naming ``ids``, unless ``check_ids=False`` for callers
                who validated the ids once: then an out-of-range id gives NaN).
        """
        if check_ids:
            ids = _check_ids(ids, self.weight.shape[1], "ids")
        w = jnp.take(self.weight, ids, axis=1)  # [d, ..., k]
        w = jnp.moveaxis(w, 0, -1)  # [..., k, d]
        return jnp.einsum("...d,...kd->...k", _normalise(hidden), w)


class Combined(eqx.Module):
    """A weighted sum ``sum_i w_i s_i(h)`` of scorers of one kind (all value heads or all Q heads).

    Built by :func:`combine`. Decoding with ``strength * Combined`` tilts the base model towards the
    weighted sum of the rewards the scorers were trained on.
    """

    scorers: tuple
    weights: Float[Array, " n"]

    @property
    def dim(self) -> int:
        return self.scorers[0].dim

    def __call__(self, hidden):
        return sum(w * s(hidden) for w, s in zip(self.weights, self.scorers))

    def at(self, hidden, ids, *, check_ids: bool = True):
        """Weighted sum of the members' :meth:`QHead.at` (Q heads only; ids checked as there)."""
        return sum(w * s.at(hidden, ids, check_ids=check_ids) for w, s in zip(self.weights, self.scorers))


def _kind(s):
    if isinstance(s, ValueHead):
        return "value"
    if isinstance(s, QHead):
        return "q"
    if isinstance(s, Combined):
        return _kind(s.scorers[0])
    return None


def combine(scorers: Sequence[ValueHead | QHead], weights: Sequence[float]) -> Combined:
    """Combine prefix scorers for several rewards into one by a weighted sum (multi-objective CD).

    ``s(h) = sum_i w_i s_i(h)``: with value functions ``V_i`` of rewards ``r_i`` under the same base
    model, ``sum_i w_i V_i`` is the value function of ``sum_i w_i r_i`` (linearity of expectation).

    Args:
        scorers: one or more :class:`ValueHead` or one or more :class:`QHead` (same dim; Q heads the
            same vocabulary size).
        weights: one finite weight per scorer.

    Returns:
        A :class:`Combined` scorer.

    Raises:
        TypeError: scorers or weights that are not sequences; a scorer is not a ValueHead/QHead,
            or kinds are mixed.
        ValueError: lengths differ, sizes differ, or a weight is not finite.

    References:
        Mudgal et al., ICML 2024, Sec. 4 ("multi-objective" controlled decoding).

    Examples:
        >>> import jax.numpy as jnp
        >>> a, b = ValueHead(3), ValueHead(3)
        >>> combine([a, b], [0.5, 2.0])(jnp.ones((3,))).shape
        ()
    """
    if not isinstance(scorers, Sequence) or isinstance(scorers, str):
        raise TypeError(expected("scorers", "a sequence of ValueHead or QHead", type(scorers).__name__, raw=True))
    if not isinstance(weights, Sequence) and not (hasattr(weights, "shape") and np.ndim(weights) == 1):
        raise TypeError(expected("weights", "a sequence of numbers (one per scorer)", type(weights).__name__, raw=True))
    scorers = tuple(scorers)
    if not scorers:
        raise ValueError(expected("scorers", "at least one scorer", scorers))
    kinds = {_kind(s) for s in scorers}
    if None in kinds or len(kinds) > 1:
        raise TypeError(expected("scorers", "all ValueHead or all QHead", [type(s).__name__ for s in scorers]))
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (len(scorers),):
        raise ValueError(expected("weights", f"{len(scorers)} weights (one per scorer)", w))
    if not np.isfinite(w).all():
        raise ValueError(expected("weights", "finite weights", w))
    shapes = {tuple(s.weight.shape) if not isinstance(s, Combined) else tuple(s.scorers[0].weight.shape)
              for s in scorers}
    if len(shapes) > 1:
        raise ValueError(expected("scorers", "heads of one size", sorted(shapes), raw=True))
    return Combined(scorers, jnp.asarray(w, default_float()))


def _q_vocab(head):
    """The vocabulary size of a Q head (or a combination of them); None for other scorers."""
    if isinstance(head, QHead):
        return int(head.weight.shape[1])
    if isinstance(head, Combined) and head.scorers:
        return _q_vocab(head.scorers[0])
    return None


def check_scorer(scorer, kind: str, name: str = "scorer"):
    """TypeError unless ``scorer`` is a value (``kind='value'``) or Q (``'q'``) scorer."""
    if _kind(scorer) != kind:
        what = "a ValueHead (or combine() of ValueHeads)" if kind == "value" else "a QHead (or combine() of QHeads)"
        raise TypeError(expected(name, what, type(scorer).__name__, raw=True))
    return scorer
