"""An independent NumPy float64 Llama forward (the oracle of the tiny-model tests)."""

import numpy as np


def _rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _rope(x, pos, base):
    # x [L, heads, h], rotate-half layout: pairs (i, i + h/2) rotate by pos * base^(-2i/h)
    h = x.shape[-1]
    freq = base ** (-np.arange(h // 2) * 2.0 / h)
    ang = pos[:, None] * freq[None]
    c, s = np.cos(ang)[:, None], np.sin(ang)[:, None]
    a, b = x[..., : h // 2], x[..., h // 2:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def reference_logits(model, tokens):
    """float64 logits [L, V] of one unpadded sequence, looping over layers and heads."""
    c = model.config
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    emb = f64(model.embed)
    nh, nk, h, f = c.num_heads, c.num_kv_heads, c.head_dim, c.hidden_dim
    x = emb[np.asarray(tokens)]
    length = x.shape[0]
    pos = np.arange(length, dtype=np.float64)
    for lay in model.layers:
        xn = _rms(x, f64(lay.attn_norm), c.norm_eps)
        w = f64(lay.wqkv)
        q = (xn @ w[:, : nh * h]).reshape(length, nh, h)
        k = (xn @ w[:, nh * h: (nh + nk) * h]).reshape(length, nk, h)
        v = (xn @ w[:, (nh + nk) * h:]).reshape(length, nk, h)
        q, k = _rope(q, pos, c.rope_base), _rope(k, pos, c.rope_base)
        out = np.zeros((length, nh, h))
        for head in range(nh):
            kv = head // (nh // nk)
            s = q[:, head] @ k[:, kv].T / np.sqrt(h)
            s = np.where(np.tril(np.ones((length, length), bool)), s, -np.inf)
            p = np.exp(s - s.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            out[:, head] = p @ v[:, kv]
        x = x + out.reshape(length, nh * h) @ f64(lay.wo)
        xn = _rms(x, f64(lay.mlp_norm), c.norm_eps)
        gu = xn @ f64(lay.w_gate_up)
        g, u = gu[:, :f], gu[:, f:]
        x = x + (g / (1 + np.exp(-g)) * u) @ f64(lay.w_down)
    xn = _rms(x, f64(model.final_norm), c.norm_eps)
    return xn @ emb.T


def log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))
