"""jaxcore.watermark: DiPmark, the distribution-preserving LLM watermark, and KGW's soft red list.

Generation reweights each next-token distribution with a permutation of the vocabulary seeded by a
keyed hash of the previous k tokens (:class:`DiPmark`, :class:`KGW`: logits processors of
:func:`jaxcore.lm.generate`); detection needs only the tokens and the key (:func:`detect`: green
counts, DiPmark's score, z-scores and exact binomial p-values, vmapped over texts). The permutation
is a keyed Feistel bijection with O(1) lookup of one token's position (:func:`token_positions`),
not bit-compatible with the reference's SHA-256 + ``torch.randperm`` (see :mod:`.context`).

>>> import jax, jax.numpy as jnp
>>> from jaxcore.watermark import DiPmark, detect, substitution_attack
>>> wm = DiPmark(1000, key=jax.random.key(42), alpha=0.5, context_size=2)
>>> text = jax.random.randint(jax.random.key(0), (4, 64), 0, 1000)   # human text: not watermarked
>>> bool(jnp.all(detect(wm, text).p_value > 1e-3))
True

With a model: ``jaxcore.lm.generate(key, model, prompt, prompt_mask, max_new_tokens=64,
processor=wm)``, then ``detect(wm, result.tokens)``; ``substitution_attack`` is the paper's
robustness attack, :func:`detection_rates` the detection-versus-length curve
(with the false-positive rate on unwatermarked texts), and :func:`permutation_bias` measures how far the Feistel permutations are from
uniform ones in the reweighted distribution.

References:
    Y. Wu, Z. Hu, J. Guo, H. Zhang, H. Huang. "A Resilient and Accessible Distribution-Preserving
    Watermark for Large Language Models." ICML 2024.
    J. Kirchenbauer, J. Geiping, Y. Wen, J. Katz, I. Miers, T. Goldstein. "A Watermark for Large
    Language Models." ICML 2023.
"""

from .attacks import substitution_attack
from .bias import BiasResult, permutation_bias
from .context import context_hash, context_windows, secret_words
from .detection import DetectionResult, binomial_sf, detect, green_mask
from .evaluation import DetectionRates, detection_rates
from .permutation import PERMUTATION_METHODS, token_positions, vocab_positions
from .processors import KGW, DiPmark, WatermarkState
from .reweight import dip_reweight, kgw_reweight

__all__ = [
    "KGW",
    "BiasResult",
    "PERMUTATION_METHODS",
    "DetectionRates",
    "DetectionResult",
    "DiPmark",
    "WatermarkState",
    "binomial_sf",
    "context_hash",
    "context_windows",
    "detect",
    "detection_rates",
    "dip_reweight",
    "green_mask",
    "kgw_reweight",
    "permutation_bias",
    "secret_words",
    "substitution_attack",
    "token_positions",
    "vocab_positions",
]
