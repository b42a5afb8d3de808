"""MLP value vectors: ranking by cosine with a direction, projection to the vocabulary, change.

Block l's MLP writes ``sum_j a^l_j v^l_j`` into the residual stream, with keys' activations
``a^l = silu(x W_gate) * (x W_up)`` and value vectors ``v^l_j = W_down[l][j]`` (``[n, f, d]`` in
all). A value vector aligned with the probe direction writes "toxicity"; its projection through
the unembedding, ``E (g * v)`` (``g`` the final RMSNorm scale, ``E`` the tied embedding), ranks the
tokens it promotes. SwiGLU keys can be negative (unlike GPT-2's GELU keys, almost never below
-0.17), so a vector with a large negative cosine writes the direction when its key is negative.

References:
    Geva, Caciularu, Wang, Goldberg, "Transformer Feed-Forward Layers Build Predictions by
    Promoting Concepts in the Vocabulary Space", EMNLP 2022 (vocabulary projections).
    Lee et al., "A Mechanistic Understanding of Alignment Algorithms", ICML 2024, Sections 3.2, 6.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from jaxcore import lm
from jaxcore._util import as_float_array, check_choice, check_finite, check_int, check_ndim, check_shape, expected

from .activations import _check_neurons

__all__ = ["ValueVectorChange", "ValueVectorRanking", "VocabProjection", "rank_value_vectors",
           "value_vector_change", "value_vectors", "vocab_projection", "vocab_scores"]


class ValueVectorRanking(NamedTuple):
    """The value vectors most aligned with a direction, best first.

    Attributes:
        layer: ``[k]`` int32 block index.
        index: ``[k]`` int32 neuron index within the block.
        cosine: ``[k]`` float32 cosine similarity with the direction.
    """

    layer: Int[Array, " k"]
    index: Int[Array, " k"]
    cosine: Float[Array, " k"]


class VocabProjection(NamedTuple):
    """Top tokens of vectors projected to the vocabulary.

    Attributes:
        token_ids: ``[k, t]`` int32, best first.
        scores: ``[k, t]`` float32 their scores (logits or cosines).
    """

    token_ids: Int[Array, "k t"]
    scores: Float[Array, "k t"]


class ValueVectorChange(NamedTuple):
    """How chosen value vectors differ between two models (e.g. before and after DPO).

    Attributes:
        cosine: ``[k]`` cosine between the two versions of each vector.
        norm_ratio: ``[k]`` ``||v_after|| / ||v_before||``.
    """

    cosine: Float[Array, " k"]
    norm_ratio: Float[Array, " k"]


def value_vectors(model: lm.Llama) -> Float[Array, "n f d"]:
    """All MLP value vectors, ``W_down`` of every block stacked: ``[n, f, d]`` float32.

    Examples:
        >>> import jax
        >>> value_vectors(lm.random_llama(jax.random.key(0))).shape
        (2, 96, 32)
    """
    lm.model.check_model(model)
    return jnp.stack([b.w_down for b in model.layers]).astype(jnp.promote_types(model.dtype, jnp.float32))


def _direction(model, direction):
    lm.model.check_model(model)
    d = as_float_array(direction, "direction")
    check_shape(d, "direction", (model.config.dim,))
    check_finite(d, "direction")
    if not bool(jnp.linalg.norm(d) > 0):
        raise ValueError(expected("direction", "a non-zero vector", "the zero vector", raw=True))
    return d


@jax.jit
def _cosines(vv, direction):
    u = direction / jnp.linalg.norm(direction)
    return (vv @ u.astype(vv.dtype)) / jnp.maximum(jnp.linalg.norm(vv, axis=-1), 1e-30)


def rank_value_vectors(model: lm.Llama, direction: Float[Array, " d"], *, top_k: int = 10) -> ValueVectorRanking:
    """The ``top_k`` value vectors with the largest cosine similarity to ``direction``.

    ``cos(v^l_j, w) = v^l_j . w / (||v^l_j|| ||w||)`` over all ``n f`` vectors; ties by position.

    Args:
        model: a :class:`jaxcore.lm.Llama`.
        direction: ``[d]`` non-zero (e.g. ``fit_probe(...).direction``; negate it for the other end).
        top_k: how many, in ``[1, n f]``.

    Returns:
        A :class:`ValueVectorRanking`.

    Raises:
        TypeError: ``model`` is not a :class:`jaxcore.lm.Llama`; a non-numeric direction.
        ValueError: wrong shape, zero or non-finite direction, bad ``top_k``.

    References:
        Lee et al., ICML 2024, Section 3.2 (Table 1: MLP value vectors closest to the probe).

    Examples:
        >>> import jax
        >>> model = lm.random_llama(jax.random.key(0))
        >>> v = model.layers[1].w_down[7]
        >>> r = rank_value_vectors(model, v, top_k=2)
        >>> int(r.layer[0]), int(r.index[0]), round(float(r.cosine[0]), 4)
        (1, 7, 1.0)
    """
    d = _direction(model, direction)
    k = check_int(top_k, "top_k", minimum=1, maximum=model.config.num_layers * model.config.hidden_dim)
    return _rank_jit(model, d, k)


@eqx.filter_jit
def _rank_jit(model, d, k):
    vv = value_vectors(model)
    n, f, _ = vv.shape
    cos = _cosines(vv, d).reshape(-1)
    val, idx = jax.lax.top_k(cos, k)
    return ValueVectorRanking((idx // f).astype(jnp.int32), (idx % f).astype(jnp.int32), val)


def _vectors(model, vectors):
    v = as_float_array(vectors, "vectors")
    check_ndim(v, "vectors", 2, "a [k, dim] array")
    check_shape(v, "vectors", (None, model.config.dim), f"a [k, {model.config.dim}] array")
    check_finite(v, "vectors")
    return v


def _unembedding(model):
    e = model.embed if model.head is None else model.head.T  # [V, d]
    return e.astype(jnp.promote_types(e.dtype, jnp.float32))


@jax.jit
def _scores_logit(e, g, v):
    return (v * g) @ e.T


@jax.jit
def _scores_cosine(e, v):
    en = e / jnp.maximum(jnp.linalg.norm(e, axis=1, keepdims=True), 1e-30)
    vn = v / jnp.maximum(jnp.linalg.norm(v, axis=1, keepdims=True), 1e-30)
    return vn @ en.T


def vocab_scores(model: lm.Llama, vectors: Float[Array, "k d"], *,
                 measure: Literal["logit", "cosine"] = "logit") -> Float[Array, "k V"]:
    """Each vector's score for every token: ``logit = E (g * v)`` or ``cosine(v, E_t)``.

    ``logit`` is what the head would add to the logits if ``v`` were the (normalised) final
    stream (``g`` the final RMSNorm scale); ``cosine`` compares ``v`` with each unembedding row.

    Args:
        model: a :class:`jaxcore.lm.Llama`.
        vectors: ``[k, d]`` finite (e.g. value vectors, the probe direction).
        measure: ``"logit"`` or ``"cosine"``.

    Returns:
        ``[k, V]`` float32.

    Raises:
        ValueError: wrong shape, non-finite vectors, unknown measure.

    Examples:
        >>> import jax
        >>> model = lm.random_llama(jax.random.key(0))
        >>> vocab_scores(model, model.embed[:2], measure="cosine").shape
        (2, 64)
    """
    lm.model.check_model(model)
    v = _vectors(model, vectors)
    check_choice(measure, "measure", ("logit", "cosine"))
    e = _unembedding(model)
    v = v.astype(e.dtype)
    if measure == "cosine":
        return _scores_cosine(e, v)
    return _scores_logit(e, model.final_norm.astype(e.dtype), v)


def vocab_projection(model: lm.Llama, vectors: Float[Array, "k d"], *, top_k: int = 10,
                     measure: Literal["logit", "cosine"] = "logit") -> VocabProjection:
    """The ``top_k`` tokens each vector promotes (its highest :func:`vocab_scores`).

    Args:
        model, vectors, measure: as :func:`vocab_scores`.
        top_k: tokens per vector, in ``[1, V]``.

    Returns:
        A :class:`VocabProjection`.

    Raises:
        ValueError: as :func:`vocab_scores`; bad ``top_k``.

    References:
        Geva et al., EMNLP 2022; Lee et al., ICML 2024, Table 1.

    Examples:
        >>> import jax
        >>> model = lm.random_llama(jax.random.key(0))
        >>> vocab_projection(model, model.embed[9:10], top_k=3, measure="cosine").token_ids[0, 0].item()
        9
    """
    s = vocab_scores(model, vectors, measure=measure)
    k = check_int(top_k, "top_k", minimum=1, maximum=model.config.vocab_size)
    val, idx = jax.lax.top_k(s, k)
    return VocabProjection(idx.astype(jnp.int32), val)


def value_vector_change(before: lm.Llama, after: lm.Llama, layers: Int[Array, " k"],
                        indices: Int[Array, " k"]) -> ValueVectorChange:
    """Cosine and norm ratio of chosen value vectors between two models of one configuration.

    Args:
        before, after: :class:`jaxcore.lm.Llama` s (e.g. the base model and its DPO fine-tune).
        layers, indices: ``[k]`` int value-vector coordinates (e.g. a :class:`ValueVectorRanking`).

    Returns:
        A :class:`ValueVectorChange`.

    Raises:
        TypeError, ValueError: models of different configurations, bad indices.

    References:
        Lee et al., ICML 2024, Section 6 (value vectors barely change under DPO).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> m = lm.random_llama(jax.random.key(0))
        >>> value_vector_change(m, m, jnp.array([0]), jnp.array([3])).cosine.round(4).tolist()
        [1.0]
    """
    lm.model.check_model(before)
    lm.model.check_model(after)
    if before.config != after.config:
        raise ValueError(expected("after", "a Llama with the configuration of before", after.config, raw=True))
    la, ia = _check_neurons(before, layers, indices)
    return _change_jit(before, after, la, ia)


@eqx.filter_jit
def _change_jit(before, after, la, ia):
    a, b = value_vectors(before)[la, ia], value_vectors(after)[la, ia]
    na, nb = jnp.linalg.norm(a, axis=1), jnp.linalg.norm(b, axis=1)
    return ValueVectorChange(jnp.sum(a * b, axis=1) / jnp.maximum(na * nb, 1e-30), nb / jnp.maximum(na, 1e-30))
