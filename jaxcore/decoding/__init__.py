"""jaxcore.decoding: controlled decoding (CD-FUDGE, CD-Q, blockwise CD, best-of-K) on ``jaxcore.lm``.

A prefix scorer on the frozen model's hidden states (:class:`ValueHead` for CD-FUDGE, :class:`QHead`
for CD-Q) is trained on base-model samples (:func:`rollouts`, :func:`fit_fudge`, :func:`fit_cdq`);
decoding then tilts each next-token distribution by ``exp(lambda Q)`` (:class:`CDQ`,
:class:`CDFudge` processors of :func:`jaxcore.lm.generate`) or keeps the best of K blocks
(:func:`blockwise_generate`); :func:`combine` sums scorers of several rewards.

>>> import jax, jax.numpy as jnp
>>> from jaxcore import lm
>>> from jaxcore.decoding import CDQ, QHead, fit_cdq, keyword_reward, rollouts
>>> model = lm.random_llama(jax.random.key(0))          # or: model, tok = lm.load_smollm2()
>>> prompt = jnp.array([[1, 2, 3]] * 16)
>>> base = lm.generate(jax.random.key(1), model, prompt, max_new_tokens=8)
>>> data = rollouts(model, prompt, None, base, keyword_reward(base.tokens, jnp.array([7, 9])), top_k=16)
>>> head = fit_cdq(jax.random.key(2), QHead(32, 64), data, num_steps=30).head
>>> out = lm.generate(jax.random.key(3), model, prompt, max_new_tokens=8, processor=CDQ(head, 4.0))
>>> out.tokens.shape
(16, 8)

References:
    S. Mudgal, J. Lee, H. Ganapathy, Y. Li, T. Wang, Y. Huang, Z. Chen, H.-T. Cheng, M. Collins,
    T. Strohman, J. Chen, A. Beutel, A. Beirami. "Controlled Decoding from Language Models." ICML 2024.
"""

from .blockwise import (
    BestOfKResult,
    BlockwiseResult,
    best_of_k,
    best_of_k_kl,
    best_of_k_law,
    blockwise_generate,
    select_best,
)
from .losses import Rollouts, cdq_loss, fudge_loss, rollouts
from .rewards import brevity, keyword_ids, keyword_reward, non_toxicity
from .scorers import Combined, QHead, ValueHead, combine
from .tokenwise import CDQ, CDFudge, tilted_kl
from .toy import (
    ToyLM,
    ToySample,
    ToyValues,
    random_toy_lm,
    toy_logprob,
    toy_rollouts,
    toy_sample,
    toy_sequences,
    toy_tilted_kl,
    toy_tilted_logprob,
    toy_values,
)
from .training import FitResult, fit_cdq, fit_fudge

__all__ = [
    "BestOfKResult",
    "BlockwiseResult",
    "CDFudge",
    "CDQ",
    "Combined",
    "FitResult",
    "QHead",
    "Rollouts",
    "ToyLM",
    "ToySample",
    "ToyValues",
    "ValueHead",
    "best_of_k",
    "best_of_k_kl",
    "best_of_k_law",
    "blockwise_generate",
    "brevity",
    "cdq_loss",
    "combine",
    "fit_cdq",
    "fit_fudge",
    "fudge_loss",
    "keyword_ids",
    "keyword_reward",
    "non_toxicity",
    "random_toy_lm",
    "rollouts",
    "select_best",
    "tilted_kl",
    "toy_logprob",
    "toy_rollouts",
    "toy_sample",
    "toy_sequences",
    "toy_tilted_kl",
    "toy_tilted_logprob",
    "toy_values",
]
