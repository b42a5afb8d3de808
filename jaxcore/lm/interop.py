"""The same weights in HF transformers (the peer that tests and benchmarks compare against)."""

from __future__ import annotations

import numpy as np

from .._util.checks import check_choice
from .model import Llama, check_model

__all__ = ["to_transformers"]


def to_transformers(model: Llama, *, dtype: str = "float32"):
    """A ``transformers.LlamaForCausalLM`` holding ``model``'s weights (PyTorch, eval mode).

    Splits the fused Q|K|V and gate|up matrices and transposes them back to PyTorch's
    ``[out, in]`` layout; both use the rotate-half RoPE layout, so logits agree to float32 rounding.

    Args:
        model: a :class:`Llama`.
        dtype: ``"float32"`` or ``"bfloat16"`` torch parameters.

    Returns:
        The torch model (attention implementation ``sdpa``; no BOS/EOS/pad ids set, so ``generate``
        runs ``max_new_tokens`` unless told an ``eos_token_id``).

    Raises:
        TypeError: ``model`` is not a Llama. ValueError: ``dtype`` is not float32 or bfloat16.
        ImportError: torch or transformers is not installed (``pip install torch transformers``).

    Examples:
        >>> import jax
        >>> hf = to_transformers(random_llama(jax.random.key(0)))  # doctest: +SKIP
        >>> hf.config.num_hidden_layers  # doctest: +SKIP
        2
    """
    check_model(model)
    check_choice(dtype, "dtype", ("float32", "bfloat16"))
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise ImportError("to_transformers needs torch and transformers; run: pip install torch transformers") from exc
    c = model.config
    tdt = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    cfg = transformers.LlamaConfig(
        vocab_size=c.vocab_size, hidden_size=c.dim, intermediate_size=c.hidden_dim, num_hidden_layers=c.num_layers,
        num_attention_heads=c.num_heads, num_key_value_heads=c.num_kv_heads, rms_norm_eps=c.norm_eps,
        rope_theta=c.rope_base, max_position_embeddings=c.max_positions, tie_word_embeddings=c.tie_embeddings,
        head_dim=c.head_dim, hidden_act="silu", attention_bias=False, mlp_bias=False,
        bos_token_id=None, eos_token_id=None, pad_token_id=None,  # a Llama carries no special ids
    )
    try:
        cfg.rope_parameters = {"rope_type": "default", "rope_theta": float(c.rope_base)}
    except Exception:  # noqa: BLE001 - older transformers read rope_theta
        pass
    cfg._attn_implementation = "sdpa"
    with torch.device("meta"):  # no random initialisation of 135M parameters (seconds) to overwrite
        hf = transformers.LlamaForCausalLM(cfg)
    hf = hf.to_empty(device="cpu")
    hf.model.rotary_emb = type(hf.model.rotary_emb)(config=cfg)  # its buffers were not materialised
    f32 = lambda a: torch.from_numpy(np.asarray(a, np.float32).copy())  # noqa: E731
    nh, nk, h, f = c.num_heads, c.num_kv_heads, c.head_dim, c.hidden_dim
    sd = {"model.embed_tokens.weight": f32(model.embed), "model.norm.weight": f32(model.final_norm)}
    for i, blk in enumerate(model.layers):
        p = f"model.layers.{i}."
        wqkv, wgu = np.asarray(blk.wqkv, np.float32), np.asarray(blk.w_gate_up, np.float32)
        sd[p + "input_layernorm.weight"] = f32(blk.attn_norm)
        sd[p + "post_attention_layernorm.weight"] = f32(blk.mlp_norm)
        sd[p + "self_attn.q_proj.weight"] = f32(wqkv[:, : nh * h].T)
        sd[p + "self_attn.k_proj.weight"] = f32(wqkv[:, nh * h: (nh + nk) * h].T)
        sd[p + "self_attn.v_proj.weight"] = f32(wqkv[:, (nh + nk) * h:].T)
        sd[p + "self_attn.o_proj.weight"] = f32(np.asarray(blk.wo, np.float32).T)
        sd[p + "mlp.gate_proj.weight"] = f32(wgu[:, :f].T)
        sd[p + "mlp.up_proj.weight"] = f32(wgu[:, f:].T)
        sd[p + "mlp.down_proj.weight"] = f32(np.asarray(blk.w_down, np.float32).T)
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"] if model.head is None else f32(np.asarray(model.head).T)
    missing, unexpected = hf.load_state_dict(sd, strict=False)
    assert not unexpected and all(k == "lm_head.weight" for k in missing), (missing, unexpected)
    if c.tie_embeddings:
        hf.tie_weights()
    hf = hf.to(tdt)
    hf.generation_config.bos_token_id = hf.generation_config.eos_token_id = None
    hf.generation_config.pad_token_id = None
    hf.eval()
    return hf
