"""Interventions as pure transforms: subtract a direction from the residual stream, scale MLP keys.

- :func:`subtract_direction` returns a :class:`jaxcore.lm.Intervention` that adds ``-alpha u``
  (``u`` the unit probe direction) to the residual stream after a block, at every position
  (the paper's baseline: ``x^L <- x^L - alpha W_toxic``).
- :func:`scale_keys` returns a new :class:`jaxcore.lm.Llama` whose chosen MLP neurons fire
  ``scale`` times as strongly: their column of the up projection is multiplied by ``scale``, so
  the key activation ``silu(x W_gate) * (x W_up)`` and with it the written value vector scale
  exactly (the paper's un-alignment: the keys of the top toxic value vectors scaled by 10;
  in GPT-2 the GELU key of ``W_in`` is scaled). ``scale = 1`` returns equal weights.
- :func:`residual_offset` is the mean difference of two models' residual streams on the same
  inputs (what DPO learns in order to route around the toxic vectors).

References:
    Lee et al., "A Mechanistic Understanding of Alignment Algorithms: A Case Study on DPO and
    Toxicity", ICML 2024, Sections 3.3 (subtraction), 6 (offsets) and 7 (un-alignment).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxcore import lm
from jaxcore._util import check_int, check_scalar, expected

from .activations import _check_neurons, mean_hidden
from .vectors import _direction

__all__ = ["residual_offset", "scale_keys", "subtract_direction"]


def subtract_direction(model: lm.Llama, direction: Float[Array, " d"], *, alpha: float,
                       layer: int = -1) -> lm.Intervention:
    """An intervention that subtracts ``alpha * direction / ||direction||`` after block ``layer``.

    Args:
        model: the :class:`jaxcore.lm.Llama` it is for (its shapes).
        direction: ``[d]`` non-zero, e.g. the probe's direction.
        alpha: the finite amount (units of the residual stream; negative adds the direction).
        layer: the block after which it acts, in ``[-n, n)`` (default the last: the stream the head reads).

    Returns:
        A :class:`jaxcore.lm.Intervention` for :func:`jaxcore.lm.generate` / ``forward`` / ``perplexity``.

    Raises:
        ValueError: wrong shape or zero direction, non-finite alpha, layer out of range.

    References:
        Lee et al., ICML 2024, Section 3.3 and Table 2 ("subtract probe").

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> model = lm.random_llama(jax.random.key(0))
        >>> iv = subtract_direction(model, jnp.ones(32), alpha=2.0)
        >>> iv.residual.shape, round(float(jnp.linalg.norm(iv.residual[1])), 4)
        ((2, 32), 2.0)
    """
    lm.model.check_model(model)
    d = _direction(model, direction)
    a = check_scalar(alpha, "alpha")
    n = model.config.num_layers
    layer = check_int(layer, "layer", minimum=-n, maximum=n - 1) % n
    u = (d / jnp.linalg.norm(d)).astype(jnp.float32)
    return lm.Intervention(residual=jnp.zeros((n, model.config.dim), jnp.float32).at[layer].set(-a * u))


def scale_keys(model: lm.Llama, layers: Int[Array, " k"], indices: Int[Array, " k"], scale: float) -> lm.Llama:
    """The model with MLP neurons ``(layers[j], indices[j])`` firing ``scale`` times as strongly.

    Multiplies column ``f + indices[j]`` of block ``layers[j]``'s fused gate|up matrix (the up
    projection) by ``scale``: the neuron's activation, hence its value vector's contribution, is
    exactly ``scale`` times the original, equal to ``Intervention(mlp_scale=...)`` at those neurons.
    A neuron listed twice is scaled once.

    Args:
        model: a :class:`jaxcore.lm.Llama`.
        layers, indices: ``[k]`` int coordinates (e.g. a :class:`ValueVectorRanking`).
        scale: a finite factor (the paper's un-alignment uses 10).

    Returns:
        A new :class:`jaxcore.lm.Llama` (the input is unchanged).

    Raises:
        TypeError, ValueError: bad indices or scale.

    References:
        Lee et al., ICML 2024, Section 7 (un-aligning by scaling 7 toxic keys by 10).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> model = lm.random_llama(jax.random.key(0))
        >>> big = scale_keys(model, jnp.array([1]), jnp.array([4]), 10.0)
        >>> float(big.layers[1].w_gate_up[0, 96 + 4] / model.layers[1].w_gate_up[0, 96 + 4])
        10.0
    """
    lm.model.check_model(model)
    la, ia = _check_neurons(model, layers, indices)
    s = check_scalar(scale, "scale")
    f = model.config.hidden_dim
    blocks = list(model.layers)
    la_h, ia_h = np.asarray(la), np.asarray(ia)
    for i in sorted(set(la_h.tolist())):
        cols = f + ia_h[la_h == i]
        w = blocks[i].w_gate_up
        if s == 1.0:
            new_w = w
        elif isinstance(w, jax.core.Tracer):
            factor = jnp.ones(w.shape[1], jnp.float32).at[cols].set(s)
            new_w = (w.astype(jnp.float32) * factor).astype(w.dtype)
        else:  # on the host: eager jnp ops would compile a program each
            w32 = np.array(w, np.float32)
            w32[:, np.unique(cols)] *= np.float32(s)
            new_w = jnp.asarray(w32.astype(np.dtype(w.dtype)))
        blocks[i] = lm.LlamaBlock(blocks[i].attn_norm, blocks[i].wqkv, blocks[i].wo, blocks[i].mlp_norm, new_w,
                                  blocks[i].w_down)
    return lm.Llama(model.config, model.embed, tuple(blocks), model.final_norm, model.head)


def residual_offset(before: lm.Llama, after: lm.Llama, tokens: Int[Array, "B L"],
                    mask: Bool[Array, "B L"] | None = None, *,
                    position_mask: Bool[Array, "B L"] | None = None) -> Float[Array, "n1 d"]:
    """Mean difference of the residual streams of two models on the same inputs, per layer.

    ``offset[l] = mean_b (h^l_after(x_b) - h^l_before(x_b))`` with each ``h^l`` averaged over the
    position mask (:func:`mean_hidden`); ``offset[0]`` is the embeddings' difference.

    Args:
        before, after: :class:`jaxcore.lm.Llama` s of one configuration.
        tokens, mask, position_mask: as :func:`mean_hidden`.

    Returns:
        ``[n + 1, d]`` float32.

    Raises:
        TypeError, ValueError: as :func:`mean_hidden`; models of different configurations.

    References:
        Lee et al., ICML 2024, Section 6 (DPO's offsets in the residual stream).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> m = lm.random_llama(jax.random.key(0))
        >>> float(jnp.abs(residual_offset(m, m, jnp.array([[1, 2, 3]]))).max())
        0.0
    """
    lm.model.check_model(before)
    lm.model.check_model(after)
    if before.config != after.config:
        raise ValueError(expected("after", "a Llama with the configuration of before", after.config, raw=True))
    h0 = mean_hidden(before, tokens, mask, position_mask=position_mask).residual
    h1 = mean_hidden(after, tokens, mask, position_mask=position_mask).residual
    return jnp.mean(h1 - h0, axis=0)


