"""jaxcore.lm: a language-model substrate (Llama / SmolLM2-135M in JAX).

GGUF reading with vectorised dequantisation, the tokenizer rebuilt from the GGUF metadata, a
Llama forward (optional per-layer internals and interventions), KV-cache decoding in one
``lax.scan`` with a logits-processor hook, sequence log-probabilities and perplexity, and an
offline toxicity scorer (:func:`load_toxicity_scorer`, alt-profanity-check's model as arrays).
Families (watermarking, DPO, controlled decoding) import it.

The main workflow::

    >>> import jax, jax.numpy as jnp
    >>> from jaxcore import lm
    >>> model = lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny())   # or: model, tok = lm.load_smollm2()
    >>> prompt = jnp.array([[1, 2, 3]])              # [B, P] left-padded ids (tok.encode_batch(texts))
    >>> out = lm.generate(jax.random.key(1), model, prompt, max_new_tokens=4, top_k=5)
    >>> out.tokens.shape, out.logprobs.shape         # processor=... hooks in a logits processor
    ((1, 4), (1, 4))
    >>> lm.perplexity(model, prompt).shape           # also sequence_logprob, forward, forward_hidden
    (1,)
"""

from .generation import GenerateResult, generate
from .grammar import (
    GrammarConstraint,
    GrammarState,
    TokenFSM,
    compile_regex,
    token_bytes,
)
from .patterns import answer_regex, json_regex, number_regex
from .head import model_logprobs, next_token_logprobs
from .interop import to_transformers
from .model import (
    ForwardResult,
    Intervention,
    Llama,
    LlamaConfig,
    LlamaBlock,
    forward,
    forward_hidden,
    random_llama,
)
from .processors import Chain, LogitsProcessor, Temperature, TopK, TopP, chain
from .scoring import perplexity, sequence_logprob, token_logprobs
from .smollm2 import load_smollm2
from .tokenizer import Tokenizer
from .toxicity import ToxicityFeatures, ToxicityScorer, load_toxicity_scorer, profanity_words
from .weights import (
    GGUF_TYPES,
    dequantize,
    gguf_arrays,
    gguf_metadata,
    llama_config_from_gguf,
    llama_from_arrays,
    llama_from_gguf,
    metadata_of,
)

__all__ = [
    "Chain",
    "ForwardResult",
    "GGUF_TYPES",
    "GenerateResult",
    "GrammarConstraint",
    "GrammarState",
    "Intervention",
    "Llama",
    "LlamaConfig",
    "LlamaBlock",
    "LogitsProcessor",
    "Temperature",
    "TokenFSM",
    "Tokenizer",
    "ToxicityFeatures",
    "ToxicityScorer",
    "TopK",
    "TopP",
    "answer_regex",
    "chain",
    "compile_regex",
    "dequantize",
    "forward",
    "forward_hidden",
    "generate",
    "gguf_arrays",
    "gguf_metadata",
    "json_regex",
    "llama_config_from_gguf",
    "llama_from_arrays",
    "llama_from_gguf",
    "load_smollm2",
    "load_toxicity_scorer",
    "metadata_of",
    "model_logprobs",
    "next_token_logprobs",
    "number_regex",
    "perplexity",
    "profanity_words",
    "random_llama",
    "sequence_logprob",
    "to_transformers",
    "token_bytes",
    "token_logprobs",
]
