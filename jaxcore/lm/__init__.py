"""jaxcore.lm: a language-model substrate (Llama / SmolLM2-135M in JAX).

GGUF reading with vectorised dequantisation, the tokenizer rebuilt from the GGUF metadata, a
Llama forward with layers stacked for ``lax.scan`` (optional per-layer internals and
interventions), KV-cache decoding in one ``lax.scan`` with a logits-processor hook, sequence
log-probabilities and perplexity. Families (watermarking, DPO, controlled decoding) import it.

The main workflow::

    >>> import jax, jax.numpy as jnp
    >>> from jaxcore import lm
    >>> model = lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny())   # or lm.load_smollm2()
    >>> prompt = jnp.array([[0, 5, 6, 7], [1, 2, 3, 4]]); mask = prompt > 0    # left-padded
    >>> out = lm.generate(jax.random.key(1), model, prompt, mask, max_new_tokens=8,
    ...                   processor=lm.chain(lm.TopK(20)), temperature=0.8, top_p=0.95)
    >>> out.tokens.shape, lm.perplexity(model, prompt, mask).shape
    ((2, 8), (2,))
"""

from .decoding import GenerateResult, generate
from .model import (
    ForwardResult,
    Intervention,
    Llama,
    LlamaConfig,
    LlamaLayers,
    forward,
    forward_hidden,
    random_llama,
)
from .processors import Chain, LogitsProcessor, Temperature, TopK, TopP, chain
from .scoring import perplexity, sequence_logprob, token_logprobs

__all__ = [
    "Chain",
    "ForwardResult",
    "GenerateResult",
    "Intervention",
    "Llama",
    "LlamaConfig",
    "LlamaLayers",
    "LogitsProcessor",
    "Temperature",
    "TopK",
    "TopP",
    "chain",
    "forward",
    "forward_hidden",
    "generate",
    "perplexity",
    "random_llama",
    "sequence_logprob",
    "token_logprobs",
]
