"""The Llama decoder (RMSNorm, rotary attention with grouped KV heads, SwiGLU MLP, tied head).

Parameters are a pytree: the embedding, a tuple of per-layer :class:`LlamaBlock` s, the final norm.
The layers are separate buffers, not one array stacked for ``lax.scan``: on the CPU, XLA copies the
slice a scan over stacked weights reads at every step, which doubled the weight traffic (a
30-layer matrix chain took 0.23 s scanned over stacked weights vs 0.10 s over separate ones,
measured under load), and decoding is bound by that traffic. Q and K are stored in the "rotate-half" layout of HF transformers (the GGUF reader
undoes llama.cpp's interleaved-pair permutation when it loads a file).
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Bool, Float, Int

from .._util.checks import check_auto_mesh, check_finite, check_int, check_scalar, error_if, expected
from .._util.keys import check_key

__all__ = [
    "ForwardResult",
    "Intervention",
    "Llama",
    "LlamaConfig",
    "LlamaBlock",
    "forward",
    "forward_hidden",
    "random_llama",
]

_NEG = -1e30  # additive mask value (finite, so a fully masked row gives a uniform softmax, not NaN)


class LlamaConfig(eqx.Module):
    """Static hyperparameters of a Llama decoder.

    Args:
        vocab_size: number of tokens V.
        dim: residual width d.
        hidden_dim: MLP width (SwiGLU) f.
        num_layers: number of decoder blocks.
        num_heads: query heads H (``dim`` is a multiple of it; head size ``dim // num_heads``).
        num_kv_heads: key/value heads (a divisor of ``num_heads``; grouped-query attention).
        rope_base: RoPE frequency base theta.
        norm_eps: RMSNorm epsilon.
        max_positions: the longest sequence (prompt plus generated tokens) the model accepts.
        tie_embeddings: the output head is the token embedding (transposed).

    Examples:
        >>> LlamaConfig.tiny().head_dim
        8
    """

    vocab_size: int = eqx.field(static=True)
    dim: int = eqx.field(static=True)
    hidden_dim: int = eqx.field(static=True)
    num_layers: int = eqx.field(static=True)
    num_heads: int = eqx.field(static=True)
    num_kv_heads: int = eqx.field(static=True)
    rope_base: float = eqx.field(static=True, default=10000.0)
    norm_eps: float = eqx.field(static=True, default=1e-5)
    max_positions: int = eqx.field(static=True, default=8192)
    tie_embeddings: bool = eqx.field(static=True, default=True)

    def __check_init__(self):
        for name in ("vocab_size", "dim", "hidden_dim", "num_layers", "num_heads", "num_kv_heads", "max_positions"):
            check_int(getattr(self, name), name, minimum=1)
        if self.dim % self.num_heads:
            raise ValueError(expected("dim", f"a multiple of num_heads={self.num_heads}", self.dim))
        if self.num_heads % self.num_kv_heads:
            raise ValueError(expected("num_kv_heads", f"a divisor of num_heads={self.num_heads}", self.num_kv_heads))
        if (self.dim // self.num_heads) % 2:
            raise ValueError(expected("dim", "an even head size dim // num_heads (RoPE rotates pairs)",
                                      self.dim // self.num_heads))
        check_scalar(self.rope_base, "rope_base", positive=True)
        check_scalar(self.norm_eps, "norm_eps", positive=True)

    @property
    def head_dim(self) -> int:
        """Size of one attention head, ``dim // num_heads``."""
        return self.dim // self.num_heads

    @classmethod
    def tiny(cls, vocab_size: int = 64, *, num_layers: int = 2, dim: int = 32, max_positions: int = 256) -> LlamaConfig:
        """A tiny configuration for tests and smoke runs (4 heads, 2 KV heads, MLP width ``3 * dim``)."""
        return cls(vocab_size=vocab_size, dim=dim, hidden_dim=3 * dim, num_layers=num_layers, num_heads=4,
                   num_kv_heads=2, rope_base=10000.0, norm_eps=1e-5, max_positions=max_positions)

    @classmethod
    def smollm2_135m(cls) -> LlamaConfig:
        """SmolLM2-135M: 30 layers, d = 576, f = 1536, 9 heads / 3 KV heads, theta = 1e5, V = 49,152."""
        return cls(vocab_size=49152, dim=576, hidden_dim=1536, num_layers=30, num_heads=9, num_kv_heads=3,
                   rope_base=100000.0, norm_eps=1e-5, max_positions=8192)


class LlamaBlock(eqx.Module):
    """One decoder block's weights.

    Shapes: ``attn_norm, mlp_norm [d]``; ``wqkv [d, (H + 2 K) h]`` (queries, keys, values in one
    fused matrix); ``wo [H h, d]``; ``w_gate_up [d, 2 f]`` (gate then up); ``w_down [f, d]``.
    Inputs multiply from the left (``x @ w``).
    """

    attn_norm: Float[Array, " d"]
    wqkv: Float[Array, "d qkv"]
    wo: Float[Array, "hd d"]
    mlp_norm: Float[Array, " d"]
    w_gate_up: Float[Array, "d ff2"]
    w_down: Float[Array, "ff d"]


class Llama(eqx.Module):
    """A Llama decoder: token embedding ``[V, d]``, a tuple of :class:`LlamaBlock`, final norm, (tied) head.

    Build one with :func:`random_llama` or :func:`load_smollm2`; run it with :func:`forward`,
    :func:`generate` or :func:`sequence_logprob`. The arrays may be float32 or bfloat16 (norms,
    softmax and logits are always computed in float32).
    """

    config: LlamaConfig = eqx.field(static=True)
    embed: Float[Array, "V d"]
    layers: tuple[LlamaBlock, ...]
    final_norm: Float[Array, " d"]
    head: Float[Array, "d V"] | None = None

    @property
    def dtype(self):
        """The storage dtype of the weights."""
        return self.embed.dtype

    def astype(self, dtype) -> Llama:
        """The same model with its weight matrices stored in ``dtype`` (norm scales float32, or float64 with it)."""
        dtype = jnp.dtype(dtype)
        if dtype not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16),
                         jnp.dtype(jnp.float64)):
            raise ValueError(expected("dtype", "float32, bfloat16, float16 or float64", str(dtype)))
        mats = lambda a: None if a is None else a.astype(dtype)  # noqa: E731
        norms = lambda a: a.astype(_acc(dtype))  # noqa: E731
        layers = tuple(LlamaBlock(norms(b.attn_norm), mats(b.wqkv), mats(b.wo), norms(b.mlp_norm),
                                  mats(b.w_gate_up), mats(b.w_down)) for b in self.layers)
        return Llama(self.config, mats(self.embed), layers, norms(self.final_norm), mats(self.head))


def random_llama(key, config: LlamaConfig | None = None, *, dtype=jnp.float32, scale: float = 1.0) -> Llama:
    """A Llama with random weights (the tiny model of tests and smoke benchmarks).

    Weights are normal with standard deviation ``scale / sqrt(fan_in)`` (embedding: ``scale / sqrt(d)``, so tied logits are O(1)),
    norm scales ``1 + 0.1 N(0, 1)`` so that the norms are not trivially the identity.

    Args:
        key: a ``jax.random.key``.
        config: the hyperparameters (default :meth:`LlamaConfig.tiny`).
        dtype: storage dtype of the weight matrices.
        scale: multiplies every weight's standard deviation (a larger scale gives peakier logits).

    Returns:
        A :class:`Llama`.

    Raises:
        TypeError: ``key`` is not a PRNG key.

    Examples:
        >>> import jax
        >>> model = random_llama(jax.random.key(0))
        >>> len(model.layers), model.layers[0].wqkv.shape
        (2, (32, 64))
    """
    check_key(key)
    config = LlamaConfig.tiny() if config is None else config
    if not isinstance(config, LlamaConfig):
        raise TypeError(expected("config", "a LlamaConfig", type(config).__name__, raw=True))
    check_scalar(scale, "scale", positive=True)
    try:
        dtype = jnp.dtype(dtype)
    except TypeError as exc:
        raise TypeError(expected("dtype", "float32, bfloat16, float16 or float64", repr(dtype), raw=True)) from exc
    return _random_llama_jit(key, config, float(scale), dtype.name)


@eqx.filter_jit
def _random_llama_jit(key, c: LlamaConfig, scale: float, dtype: str) -> Llama:
    """One compiled program for all the draws (eager draws compiled one small program each)."""
    n, d, f, h = c.num_layers, c.dim, c.hidden_dim, c.head_dim
    qkv = (c.num_heads + 2 * c.num_kv_heads) * h
    shapes = [(n, d), (n, d, qkv), (n, c.num_heads * h, d), (n, d), (n, d, 2 * f), (n, f, d), (c.vocab_size, d),
              (d,)] + ([] if c.tie_embeddings else [(d, c.vocab_size)])
    sizes = [int(np.prod(sh)) for sh in shapes]
    flat = jax.random.normal(key, (sum(sizes),), jnp.float32)  # one draw: one threefry program to compile
    z = [p.reshape(sh) for p, sh in zip(jnp.split(flat, np.cumsum(sizes)[:-1]), shapes)]
    fan_in = [None, d, c.num_heads * h, None, d, f, d, None, d]  # None: a norm scale, 1 + 0.1 N(0, 1)
    w = [1.0 + 0.1 * zi if fi is None else (scale / np.sqrt(fi)) * zi for zi, fi in zip(z, fan_in)]
    layers = tuple(LlamaBlock(*(a[i] for a in w[:6])) for i in range(n))
    embed, final_norm = w[6], w[7]
    head = None if c.tie_embeddings else w[8]
    return Llama(c, embed, layers, final_norm, head).astype(dtype)


class Intervention(eqx.Module):
    """Edits of the forward pass: a vector added to the residual stream, per-neuron MLP scales.

    ``residual[l]`` (``[n, d]``) is added to the residual stream after block ``l`` (at every
    position); ``mlp_scale[l]`` (``[n, f]``) multiplies the MLP's hidden activations
    ``silu(x W_gate) * (x W_up)`` of block ``l`` (1 keeps a neuron, 0 ablates it). ``None`` leaves
    that part unchanged.

    Examples:
        >>> import jax.numpy as jnp
        >>> Intervention(mlp_scale=jnp.ones((2, 96))).residual is None
        True
    """

    residual: Float[Array, "n d"] | None = None
    mlp_scale: Float[Array, "n f"] | None = None


class ForwardResult(NamedTuple):
    """Logits and the per-layer internals of one forward pass.

    Attributes:
        logits: ``[B, L, V]`` float32 next-token logits.
        residual: ``[B, n + 1, L, d]`` float32 residual stream: the embeddings, then the stream after
            each block (after an intervention's added vector).
        mlp: ``[B, n, L, f]`` float32 MLP hidden activations of each block (after the scales).
    """

    logits: Float[Array, "B L V"]
    residual: Float[Array, "B n1 L d"]
    mlp: Float[Array, "B n L f"]


# --- the math -------------------------------------------------------------------------------


def _acc(dtype):
    """The compute dtype for storage ``dtype``: float64 stays float64, anything else is float32."""
    return jnp.promote_types(dtype, jnp.float32)


def _rms_norm(x, scale, eps):
    x32 = x.astype(_acc(x.dtype))
    inv = lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return x32 * inv * scale.astype(x32.dtype)


def _mm(x, w):
    """``x @ w`` with inputs in the weight dtype and float32 (float64) accumulation."""
    return jnp.matmul(x.astype(w.dtype), w, preferred_element_type=_acc(w.dtype))


def _rope(x, positions, base):
    """Rotary embedding, rotate-half layout. x: [B, L, heads, h]; positions: [B, L] int."""
    h = x.shape[-1]
    inv_freq = jnp.asarray(1.0 / (base ** (np.arange(0, h, 2, dtype=np.float64) / h)), x.dtype)
    ang = positions.astype(x.dtype)[..., None] * inv_freq  # [B, L, h/2]
    cos = jnp.cos(ang)[:, :, None, :]
    sin = jnp.sin(ang)[:, :, None, :]
    x1, x2 = x[..., : h // 2], x[..., h // 2:]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def _attend(q, k, v, bias):
    """Grouped-query attention. q [B, L, H, h]; k, v [B, T, K, h]; bias [B, L, T] additive."""
    b, l, nh, h = q.shape
    nk = k.shape[2]
    g = nh // nk
    q = q.reshape(b, l, nk, g, h) * (1.0 / np.sqrt(h))
    acc = _acc(q.dtype)
    s = jnp.einsum("blkgh,btkh->bkglt", q.astype(k.dtype), k, preferred_element_type=acc)
    s = s + bias[:, None, None, :, :].astype(acc)
    p = jax.nn.softmax(s, axis=-1)
    o = jnp.einsum("bkglt,btkh->blkgh", p.astype(v.dtype), v, preferred_element_type=acc)
    return o.reshape(b, l, nh * h)


def _block(c: LlamaConfig, lw, x, positions, k_all, v_all, bias, write, mlp_scale):
    """One decoder block.

    ``write(k_new, v_new) -> (k, v)`` places this call's keys/values into the attended keys/values
    (identity for a full forward; a cache update when decoding). Returns the new stream, the
    attended (k, v) and the MLP activations.
    """
    nh, nk, h, f = c.num_heads, c.num_kv_heads, c.head_dim, c.hidden_dim
    b, l, _ = x.shape
    xn = _rms_norm(x, lw.attn_norm, c.norm_eps)
    qkv = _mm(xn, lw.wqkv)
    q = qkv[..., : nh * h].reshape(b, l, nh, h)
    k = qkv[..., nh * h: (nh + nk) * h].reshape(b, l, nk, h)
    v = qkv[..., (nh + nk) * h:].reshape(b, l, nk, h)
    q = _rope(q, positions, c.rope_base)
    k = _rope(k, positions, c.rope_base)
    k_att, v_att = write(k, v, k_all, v_all)
    o = _attend(q, k_att, v_att, bias)
    x = x + _mm(o, lw.wo)
    xn = _rms_norm(x, lw.mlp_norm, c.norm_eps)
    gu = _mm(xn, lw.w_gate_up)
    act = jax.nn.silu(gu[..., :f]) * gu[..., f:]
    if mlp_scale is not None:
        act = act * mlp_scale.astype(act.dtype)
    x = x + _mm(act, lw.w_down)
    return x, k_att, v_att, act


def _head_weight(model: Llama):
    """The output head and its layout: ``(embed [V, d], True)`` when tied, else ``(head [d, V], False)``."""
    return (model.embed, True) if model.head is None else (model.head, False)


def _final_norm(model: Llama, x):
    return _rms_norm(x, model.final_norm, model.config.norm_eps)


def _head(model: Llama, x):
    xn = _final_norm(model, x)
    if model.head is None:
        return jnp.einsum("bld,vd->blv", xn.astype(model.embed.dtype), model.embed,
                          preferred_element_type=_acc(model.embed.dtype))
    return _mm(xn, model.head)


def _positions(mask):
    """Rotary positions of a left- (or right-) padded batch: 0 at the first real token."""
    return jnp.maximum(jnp.cumsum(mask.astype(jnp.int32), axis=1) - 1, 0)


def _causal_bias(mask):
    """[B, L, L] additive bias: causal, and padded keys masked."""
    l = mask.shape[1]
    causal = jnp.tril(jnp.ones((l, l), bool))
    ok = causal[None] & mask[:, None, :]
    return jnp.where(ok, 0.0, _NEG).astype(jnp.float32)


def _run_layers(model: Llama, tokens, mask, intervention, *, collect: bool, keep_kv: bool):
    """The full (uncached) forward, one block after another (separate weight buffers, see the module
    docstring). Returns the final stream, the embeddings, and per layer (k, v) and internals."""
    c = model.config
    x = jnp.take(model.embed, tokens, axis=0).astype(_acc(model.dtype))
    positions = _positions(mask)
    bias = _causal_bias(mask)
    res = None if intervention is None else intervention.residual
    scl = None if intervention is None else intervention.mlp_scale

    def ident(k, v, _ka, _va):
        return k, v

    x0 = x
    kv, xs, acts = [], [], []
    for i, lw in enumerate(model.layers):
        x, k, v, act = _block(c, lw, x, positions, None, None, bias, ident, None if scl is None else scl[i])
        if res is not None:
            x = x + res[i].astype(x.dtype)
        if keep_kv:
            kv.append((k.astype(model.dtype), v.astype(model.dtype)))
        if collect:
            xs.append(x)
            acts.append(act)
    return x, x0, {"kv": kv, "x": xs, "act": acts}


def _forward(model, tokens, mask, intervention):
    x, _, _ = _run_layers(model, tokens, mask, intervention, collect=False, keep_kv=False)
    return _head(model, x)


@eqx.filter_jit
def _forward_jit(model, tokens, mask, intervention):
    return _forward(model, tokens, mask, intervention)


@eqx.filter_jit
def _forward_hidden_jit(model, tokens, mask, intervention):
    x, x0, out = _run_layers(model, tokens, mask, intervention, collect=True, keep_kv=False)
    residual = jnp.stack([x0, *out["x"]], axis=1)
    return ForwardResult(_head(model, x), residual, jnp.stack(out["act"], axis=1))


# --- validation -----------------------------------------------------------------------------


def check_model(model) -> Llama:
    if not isinstance(model, Llama):
        raise TypeError(expected("model", "a jaxcore.lm.Llama", type(model).__name__, raw=True))
    return model


def check_tokens(model: Llama, tokens, mask, *, name: str = "tokens", mask_name: str = "mask",
                 check_ids: bool = True):
    """Tokens ``[B, L]`` int in [0, V) and a bool mask of the same shape (None: all ones).

    Concrete ids are range-checked on the host (``ValueError``). Traced ids (a caller's ``jit``) are
    checked at run time by an ``error_if`` when ``check_ids`` (a host callback in the compiled
    program, which makes JAX dispatch each call of it through its Python path); ``check_ids=False``
    leaves traced ids unchecked, for a caller that validated them once. Tokens on a mesh of Explicit
    axes are refused (``TypeError``).
    """
    check_auto_mesh(tokens, name)
    if isinstance(tokens, jax.core.Tracer):
        if not jnp.issubdtype(tokens.dtype, jnp.integer):
            raise TypeError(expected(name, "an integer array of token ids", f"dtype {tokens.dtype}", raw=True))
        v = model.config.vocab_size  # traced ids: checked at run time (a gather would fill NaN logits)
        t = tokens.astype(jnp.int32)
        if check_ids:
            t = error_if(t, (tokens < 0) | (tokens >= v), name, f"token ids in [0, {v})")
    else:
        a = np.asarray(tokens)
        if a.dtype.kind not in "iu":
            raise TypeError(expected(name, "an integer array of token ids", f"dtype {a.dtype}", raw=True))
        if a.ndim != 2:
            raise ValueError(expected(name, "a [batch, length] array", f"shape {a.shape}", raw=True))
        if a.size and (a.min() < 0 or a.max() >= model.config.vocab_size):
            bad = a[(a < 0) | (a >= model.config.vocab_size)][0]
            raise ValueError(expected(name, f"token ids in [0, {model.config.vocab_size})", int(bad)))
        t = jnp.asarray(a, jnp.int32)
    if t.ndim != 2:
        raise ValueError(expected(name, "a [batch, length] array", f"shape {tuple(t.shape)}", raw=True))
    if t.shape[0] < 1 or t.shape[1] < 1:
        raise ValueError(expected(name, "at least one sequence of at least one token", f"shape {t.shape}", raw=True))
    if t.shape[1] > model.config.max_positions:
        raise ValueError(expected(name, f"at most max_positions={model.config.max_positions} tokens",
                                  f"length {t.shape[1]}", raw=True))
    if mask is None:
        m = jnp.ones(t.shape, bool)
    else:
        if not isinstance(mask, jax.core.Tracer):
            ma = np.asarray(mask)
            if ma.dtype != np.bool_ and not (ma.dtype.kind in "iu" and np.isin(ma, (0, 1)).all()):
                raise TypeError(expected(mask_name, "a bool (or 0/1) array", f"dtype {ma.dtype}", raw=True))
            m = jnp.asarray(ma.astype(bool))
        else:
            m = mask.astype(bool)
        if tuple(m.shape) != tuple(t.shape):
            raise ValueError(expected(mask_name, f"the shape of {name} {tuple(t.shape)}", f"shape {tuple(m.shape)}",
                                      raw=True))
    return t, m


def check_intervention(model: Llama, intervention) -> Intervention | None:
    if intervention is None:
        return None
    if not isinstance(intervention, Intervention):
        raise TypeError(expected("intervention", "a jaxcore.lm.Intervention or None", type(intervention).__name__,
                                 raw=True))
    c = model.config
    for name, arr, shape in (("intervention.residual", intervention.residual, (c.num_layers, c.dim)),
                             ("intervention.mlp_scale", intervention.mlp_scale, (c.num_layers, c.hidden_dim))):
        if arr is not None and tuple(jnp.shape(arr)) != shape:
            raise ValueError(expected(name, f"shape {shape}", f"shape {tuple(jnp.shape(arr))}", raw=True))
        if arr is not None:
            check_finite(arr, name)  # TypeError for non-real data, ValueError for NaN/inf
    return intervention


def forward(model: Llama, tokens: Int[Array, "B L"], mask: Bool[Array, "B L"] | None = None, *,
            intervention: Intervention | None = None, check_ids: bool = True) -> Float[Array, "B L V"]:
    """Next-token logits of a (padded) batch of token sequences.

    ``logits[b, i]`` are the logits of the token after ``tokens[b, :i + 1]``: RMSNorm,
    rotary attention over the unmasked earlier tokens (positions count the unmasked tokens, so
    left padding does not shift them), SwiGLU MLP, tied head.

    Args:
        model: a :class:`Llama`.
        tokens: ``[B, L]`` int token ids in ``[0, V)``.
        mask: ``[B, L]`` bool, True at real tokens (default all True). Logits at masked positions
            are computed but meaningless.
        intervention: an optional :class:`Intervention`.
        check_ids: check traced ids (``forward`` inside the caller's ``jit``) at run time (default).
            ``False`` skips that check, whose host callback makes JAX dispatch each call of the
            enclosing program through its Python path (0.15-0.25 ms per call on CPU); only for ids
            validated beforehand (an out-of-range id then gives garbage logits). Concrete ids are
            always checked on the host, and the compiled forward holds no callback for them.

    Returns:
        ``[B, L, V]`` float32 logits.

    Raises:
        TypeError: ``model`` is not a Llama, tokens are not integers.
        ValueError: token ids out of range, mask shape differs, too long a sequence.

    References:
        Touvron et al., "LLaMA: Open and Efficient Foundation Language Models", arXiv 2023;
        Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", 2021.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> model = random_llama(jax.random.key(0))
        >>> forward(model, jnp.array([[1, 2, 3]])).shape
        (1, 3, 64)
    """
    check_model(model)
    tokens, mask = check_tokens(model, tokens, mask, check_ids=bool(check_ids))
    return _forward_jit(model, tokens, mask, check_intervention(model, intervention))


def forward_hidden(model: Llama, tokens: Int[Array, "B L"], mask: Bool[Array, "B L"] | None = None, *,
                   intervention: Intervention | None = None, check_ids: bool = True) -> ForwardResult:
    """:func:`forward` that also returns the residual stream and MLP activations of every layer.

    Args:
        model, tokens, mask, intervention, check_ids: as in :func:`forward`.

    Returns:
        A :class:`ForwardResult` (logits ``[B, L, V]``, residual ``[B, n + 1, L, d]``,
        mlp ``[B, n, L, f]``, all float32).

    Raises:
        TypeError, ValueError: as :func:`forward`.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> model = random_llama(jax.random.key(0))
        >>> forward_hidden(model, jnp.array([[1, 2, 3]])).residual.shape
        (1, 3, 3, 32)
    """
    check_model(model)
    tokens, mask = check_tokens(model, tokens, mask, check_ids=bool(check_ids))
    return _forward_hidden_jit(model, tokens, mask, check_intervention(model, intervention))

