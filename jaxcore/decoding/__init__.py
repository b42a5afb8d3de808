"""jaxcore.decoding: controlled decoding (CD-FUDGE, CD-Q, blockwise CD, best-of-K) on ``jaxcore.lm``.

A prefix scorer on the frozen model's hidden states (:class:`ValueHead` for CD-FUDGE, :class:`QHead`
for CD-Q) is trained on base-model samples (:func:`rollouts`, :func:`fit_fudge`, :func:`fit_cdq`);
decoding then tilts each next-token distribution by ``exp(lambda Q)`` (:class:`CDQ`,
:class:`CDFudge` processors of :func:`jaxcore.lm.generate`) or keeps the best of K blocks
(:func:`blockwise_generate`); :func:`combine` sums scorers of several rewards.

On the exact tabular toy model (V = 3 tokens, T = 4 steps), where the value function is known:

>>> import jax, jax.numpy as jnp
>>> from jaxcore.decoding import CDQ, QHead, fit_cdq, random_toy_lm, toy_rollouts, toy_sample, toy_values
>>> toy = random_toy_lm(jax.random.key(0))
>>> reward = jnp.linspace(0.0, 1.0, 81)                      # r(y) of the 81 sequences
>>> head = fit_cdq(jax.random.key(1), QHead(toy.num_nodes, 3), toy_rollouts(toy, reward),
...                num_steps=300, learning_rate=0.1).head
>>> q_star = toy_values(toy, reward).q                       # the exact Q of the base model
>>> bool(jnp.abs(head(toy.hidden(jnp.arange(40))) - q_star).max() < 0.05)
True
>>> toy_sample(jax.random.key(2), toy, 8, processor=CDQ(head, 4.0)).tokens.shape
(8, 4)

On a language model (``model, tok = jaxcore.lm.load_smollm2()``): ``base = lm.generate(key, model,
prompt, mask, max_new_tokens=N)``, ``data = rollouts(model, prompt, mask, base, reward)``,
``head = fit_cdq(key, QHead(d, V), data, num_steps=...).head``, then
``lm.generate(key, model, prompt, mask, max_new_tokens=N, processor=CDQ(head, lam))``.

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
