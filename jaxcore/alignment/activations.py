"""Position-averaged internals of a Llama: the residual stream of every layer and the MLP keys.

For tokens ``x`` with a position mask ``p`` (the tokens to average over, e.g. a continuation),
``residual[b, l] = mean_{i: p_i} h^l_i`` (``h^0`` the embeddings, ``h^l`` the stream after block l)
and ``mlp[b, l, j] = mean_{i: p_i} a^l_{i, j}`` with ``a^l = silu(x W_gate) * (x W_up)`` the MLP
hidden activations: the coefficient ("key activation") with which value vector ``W_down[l, j]``
is written into the stream. One ``eqx.filter_jit`` program, ``lax.map`` over chunks of the batch
(the per-position internals of SmolLM2 are ``30 x L x 1536`` floats per sequence); chunk j holds rows
j, j + m, j + 2 m, ... (m chunks), so a batch split over devices stays split inside every chunk.

References:
    Geva, Schuster, Berant, Levy, "Transformer Feed-Forward Layers Are Key-Value Memories",
    EMNLP 2021 (keys and values of an MLP layer).
    Lee et al., "A Mechanistic Understanding of Alignment Algorithms", ICML 2024, Section 3.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxcore import lm
from jaxcore._util import check_int, error_if, expected, is_concrete

from ._chunks import interleaved_map
from .logprobs import _bool_mask, check_sequences

__all__ = ["HiddenMeans", "key_activations", "mean_hidden", "residual_features"]


class HiddenMeans(NamedTuple):
    """Position-averaged internals of :func:`mean_hidden`.

    Attributes:
        residual: ``[B, n + 1, d]`` float32 residual stream (embeddings, then after each block).
        mlp: ``[B, n, f]`` float32 MLP hidden (key) activations of each block.
    """

    residual: Float[Array, "B n1 d"]
    mlp: Float[Array, "B n f"]


def _means(model, tokens, mask, pos):
    # ids validated by mean_hidden's check_sequences (on the host, or in the caller's trace): no second,
    # run-time check here (its host callback would keep the program out of the persistent cache)
    out = lm.forward_hidden(model, tokens, mask, check_ids=False)
    w = pos.astype(jnp.float32)
    w = w / jnp.maximum(jnp.sum(w, axis=1, keepdims=True), 1.0)
    res = jnp.einsum("bnld,bl->bnd", out.residual, w)
    mlp = jnp.einsum("bnlf,bl->bnf", out.mlp, w)
    return HiddenMeans(res, mlp)


@eqx.filter_jit
def _mean_hidden_jit(model, tokens, mask, pos, chunk_size):
    return interleaved_map(lambda xs: _means(model, *xs), (tokens, mask, pos), chunk_size)


def mean_hidden(model: lm.Llama, tokens: Int[Array, "B L"], mask: Bool[Array, "B L"] | None = None, *,
                position_mask: Bool[Array, "B L"] | None = None, chunk_size: int = 16) -> HiddenMeans:
    """The residual stream of every layer and every MLP key activation, averaged over positions.

    ``residual[b, l] = sum_i p_bi h^l_bi / sum_i p_bi`` and the same for the MLP activations, with
    ``p = position_mask & mask`` (0 for a row without such a position).

    Args:
        model: a :class:`jaxcore.lm.Llama`.
        tokens: ``[B, L]`` int ids.
        mask: ``[B, L]`` bool real tokens, one contiguous run per row (default all True).
        position_mask: ``[B, L]`` bool, the positions to average over (default ``mask``).
        chunk_size: sequences per forward (memory); the result does not depend on it. Chunk j holds
            rows j, j + m, ... (m = ceil(B / chunk_size)): rows split over D devices stay split (no
            collective at all) when ``chunk_size`` is a multiple of D dividing B; otherwise the padded
            chunks do not line up with the devices' rows and XLA all-gathers the inputs.

    Returns:
        A :class:`HiddenMeans` (``residual [B, n + 1, d]``, ``mlp [B, n, f]``, float32).

    Raises:
        TypeError, ValueError: as :func:`sequence_log_probs`; ``chunk_size < 1``.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore import lm
        >>> h = mean_hidden(lm.random_llama(jax.random.key(0)), jnp.array([[1, 2, 3]]))
        >>> h.residual.shape, h.mlp.shape
        ((1, 3, 32), (1, 2, 96))
    """
    lm.model.check_model(model)
    tokens, mask, _ = check_sequences(model, tokens, mask, None)
    pos = mask if position_mask is None else _bool_mask(position_mask, "position_mask", tokens.shape) & mask
    chunk = check_int(chunk_size, "chunk_size", minimum=1)
    return _mean_hidden_jit(model, tokens, mask, pos, min(chunk, tokens.shape[0]))


def residual_features(model: lm.Llama, tokens: Int[Array, "B L"], mask: Bool[Array, "B L"] | None = None, *,
                      layer: int = -1, position_mask: Bool[Array, "B L"] | None = None,
                      chunk_size: int = 16) -> Float[Array, "B d"]:
    """Probe features: the residual stream after block ``layer``, averaged over positions.

    ``layer = l`` reads the stream after block ``l``, ``mean_hidden(...).residual[:, l + 1]``;
    ``-1`` (the default) is the last block's output, the paper's probe input.

    Args:
        model, tokens, mask, position_mask, chunk_size: as :func:`mean_hidden`.
        layer: a block index in ``[-n, n)``.

    Returns:
        ``[B, d]`` float32.

    Raises:
        ValueError: ``layer`` out of range; as :func:`mean_hidden`.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore import lm
        >>> residual_features(lm.random_llama(jax.random.key(0)), jnp.array([[1, 2, 3]])).shape
        (1, 32)
    """
    n = lm.model.check_model(model).config.num_layers
    layer = check_int(layer, "layer", minimum=-n, maximum=n - 1) % n
    return mean_hidden(model, tokens, mask, position_mask=position_mask, chunk_size=chunk_size).residual[:, layer + 1]


def _check_neurons(model, layers, indices):
    """``(layers, indices)`` as int32 arrays: checked on the host when concrete; under an outer ``jit``
    (traced) their dtype and shapes at trace time and their ranges at run time (a check threaded
    through the ``[k]`` indices only, never through the batch)."""
    c = model.config
    bounds = (("layers", "block indices", c.num_layers), ("indices", "MLP neuron indices", c.hidden_dim))
    arrays = [a if isinstance(a, jax.core.Tracer) else np.asarray(a) for a in (layers, indices)]
    for (name, _, _), a in zip(bounds, arrays):
        if not jnp.issubdtype(a.dtype, jnp.integer) or a.ndim != 1:
            raise TypeError(expected(name, "a 1-d int array", f"dtype {a.dtype}, shape {a.shape}", raw=True))
    if arrays[0].shape != arrays[1].shape:
        raise ValueError(expected("indices", f"the shape of layers {arrays[0].shape}", f"shape {arrays[1].shape}",
                                  raw=True))
    out = []
    for (name, what, top), a in zip(bounds, arrays):
        if is_concrete(a):
            if a.size and (a.min() < 0 or a.max() >= top):
                raise ValueError(expected(name, f"{what} in [0, {top})", a))
            out.append(jnp.asarray(a, jnp.int32))
        else:
            a = a.astype(jnp.int32)
            out.append(error_if(a, jnp.any((a < 0) | (a >= top)), name, f"{what} in [0, {top})"))
    return tuple(out)


def key_activations(model: lm.Llama, tokens: Int[Array, "B L"], mask: Bool[Array, "B L"] | None = None, *,
                    layers: Int[Array, " k"], indices: Int[Array, " k"],
                    position_mask: Bool[Array, "B L"] | None = None, chunk_size: int = 16) -> Float[Array, "B k"]:
    """Mean activation of chosen MLP neurons (the keys of value vectors ``(layer, index)``).

    ``out[b, j] = mean_{i} a^{layers[j]}_{b, i, indices[j]}`` over the position mask.

    Args:
        model, tokens, mask, position_mask, chunk_size: as :func:`mean_hidden`.
        layers: ``[k]`` int block indices in ``[0, n)``.
        indices: ``[k]`` int neuron indices in ``[0, f)``. Both may be traced (``key_activations``
            under ``jax.jit`` with the neurons as arguments): their ranges are then checked at run time.

    Returns:
        ``[B, k]`` float32.

    Raises:
        TypeError, ValueError: bad neuron indices; as :func:`mean_hidden`.
        equinox.EquinoxRuntimeError: traced neuron indices out of range (at run time).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore import lm
        >>> key_activations(lm.random_llama(jax.random.key(0)), jnp.array([[1, 2, 3]]),
        ...                 layers=jnp.array([0, 1]), indices=jnp.array([5, 7])).shape
        (1, 2)
    """
    lm.model.check_model(model)
    la, ia = _check_neurons(model, layers, indices)
    return mean_hidden(model, tokens, mask, position_mask=position_mask, chunk_size=chunk_size).mlp[:, la, ia]
