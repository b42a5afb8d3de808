"""jaxcore.alignment: DPO and the mechanism of toxicity (Lee et al., ICML 2024) on jaxcore.lm.

A linear probe finds a toxicity direction in the last residual stream; the MLP value vectors
closest to it promote toxic tokens; DPO on (least, most toxic) continuation pairs lowers toxicity
by routing around those vectors (their keys fire less) rather than changing them; scaling the keys
back up un-aligns the model. Every kernel is one compiled program, batched over sequences.

>>> import jax, jax.numpy as jnp
>>> from jaxcore import lm
>>> from jaxcore.alignment import fit_dpo, preference_pairs, rank_value_vectors, scale_keys
>>> model = lm.random_llama(jax.random.key(0))          # or: model, tok = lm.load_smollm2()
>>> prompt, pmask = jnp.ones((4, 3), jnp.int32), jnp.ones((4, 3), bool)
>>> samples = jax.random.randint(jax.random.key(1), (4, 2, 5), 0, 64)  # sample_continuations(key, model, ...)
>>> scores = jax.random.uniform(jax.random.key(2), (4, 2))   # lm.load_toxicity_scorer() of the decoded texts
>>> pairs = preference_pairs(prompt, pmask, samples, jnp.ones((4, 2, 5), bool), scores)
>>> res = fit_dpo(jax.random.key(3), model, pairs, num_steps=2, batch_size=2)  # doctest: +SKIP
>>> top = rank_value_vectors(model, jnp.ones(32), top_k=3)  # direction: fit_probe(features, labels).direction
>>> unaligned = scale_keys(model, top.layer, top.index, 10.0)  # in the paper: the DPO model's top 7 keys x 10
>>> pairs.tokens.shape, top.layer.shape
((4, 2, 8), (3,))

The whole study on SmolLM2 (pairs, probe, DPO, value-vector tables, un-alignment):
:func:`toxicity_study`; ``python -m benchmarks --suite alignment`` runs it.

On SmolLM2-135M-Instruct (the one causal LM shipped offline) two things differ from the paper's
GPT2-medium: the model is instruction-tuned, so its continuations of provocative prompts are
already mostly mild and DPO starts from an aligned model (less to remove, and a "base" row that
is not an untuned model); and many profanities are several tokens of its vocabulary, so a value
vector promotes pieces (read over pieces and whole words: :class:`ToxicityStudy`).

References:
    A. Lee, X. Bai, I. Pres, M. Wattenberg, J. K. Kummerfeld, R. Mihalcea. "A Mechanistic
    Understanding of Alignment Algorithms: A Case Study on DPO and Toxicity." ICML 2024.
    R. Rafailov, A. Sharma, E. Mitchell, S. Ermon, C. D. Manning, C. Finn. "Direct Preference
    Optimization: Your Language Model is Secretly a Reward Model." NeurIPS 2023.
"""

from .activations import HiddenMeans, key_activations, mean_hidden, residual_features
from .dpo import DPOMetrics, DPOResult, DPOState, dpo_init, dpo_loss, dpo_step, fit_dpo
from .interventions import residual_offset, scale_keys, subtract_direction
from .logprobs import sequence_log_probs
from .pairs import PreferencePairs, preference_pairs
from .probe import ProbeResult, fit_probe
from .prompts import NEUTRAL_PROMPTS, PROVOCATIVE_PROMPTS
from .study import (
    Continuations,
    ToxicityEval,
    ToxicityStudy,
    sample_continuations,
    score_continuations,
    toxicity_study,
)
from .vectors import (
    ValueVectorChange,
    ValueVectorRanking,
    VocabProjection,
    rank_value_vectors,
    value_vector_change,
    value_vectors,
    vocab_projection,
    vocab_scores,
)

__all__ = [
    "Continuations",
    "ToxicityEval",
    "ToxicityStudy",
    "DPOMetrics",
    "DPOResult",
    "DPOState",
    "HiddenMeans",
    "NEUTRAL_PROMPTS",
    "PROVOCATIVE_PROMPTS",
    "PreferencePairs",
    "ProbeResult",
    "ValueVectorChange",
    "ValueVectorRanking",
    "VocabProjection",
    "dpo_init",
    "dpo_loss",
    "dpo_step",
    "fit_dpo",
    "fit_probe",
    "key_activations",
    "mean_hidden",
    "preference_pairs",
    "rank_value_vectors",
    "residual_features",
    "residual_offset",
    "sample_continuations",
    "scale_keys",
    "score_continuations",
    "sequence_log_probs",
    "subtract_direction",
    "toxicity_study",
    "value_vector_change",
    "value_vectors",
    "vocab_projection",
    "vocab_scores",
]
