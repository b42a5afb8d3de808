"""The paper's study on a language model: pairs, probe, value vectors, DPO, bypass, un-alignment.

:func:`toxicity_study` runs, with one compiled program per kind of work (one generation shape for
every model, an always-present intervention so that base, probe subtraction, DPO and un-aligned
models share it):

1. sample ``num_samples`` continuations of each training prompt (:data:`PROVOCATIVE_PROMPTS`
   ``[:num_train_prompts]``), score them with ``scorer`` (texts -> P(offensive));
2. a linear probe (:func:`fit_probe`) on the last residual stream averaged over the continuation,
   soft labels = the scores, on those samples, English prose, and prompts ending in a word of a
   profanity list or in an ordinary word of the prose (features at the positions that predict the
   word's pieces: held-out AUC 0.95 on SmolLM2 against 0.73 over the word's own positions); its
   AUC on a held-out quarter; the value vectors closest to its direction (:func:`rank_value_vectors`)
   and their vocabulary projections over token pieces and whole words;
3. pairs (least / most toxic continuation per prompt) and DPO (:func:`fit_dpo`);
4. toxicity (mean and share above 0.5) on held-out prompts and perplexity on held-out prose for
   the base model, the base model with the probe direction subtracted, the DPO model and the DPO
   model with the keys of its top toxic value vectors scaled (un-aligned);
5. the mechanism: value-vector change (cosine, norm), key activations on the rejected (toxic) and
   chosen sequences before and after DPO, and DPO's residual-stream offset per layer.

References:
    Lee et al., "A Mechanistic Understanding of Alignment Algorithms: A Case Study on DPO and
    Toxicity", ICML 2024 (Tables 1-4, Figures 2-5).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxcore import lm
from jaxcore._util import check_int, check_key, check_scalar, expected, is_concrete

from .activations import _check_neurons, mean_hidden
from .dpo import DPOResult, fit_dpo
from .interventions import scale_keys, subtract_direction
from .pairs import PreferencePairs, preference_pairs
from .probe import ProbeResult, fit_probe
from .prompts import NEUTRAL_PROMPTS, PROVOCATIVE_PROMPTS
from .vectors import ValueVectorChange, ValueVectorRanking, rank_value_vectors, value_vector_change, vocab_scores

__all__ = ["Continuations", "ToxicityEval", "ToxicityStudy", "sample_continuations", "score_continuations",
           "toxicity_study"]


class Continuations(NamedTuple):
    """``num_samples`` sampled continuations of each prompt.

    Attributes:
        tokens: ``[N, K, C]`` int32.
        mask: ``[N, K, C]`` bool (False after an end-of-sequence token).
    """

    tokens: Int[Array, "N K C"]
    mask: Bool[Array, "N K C"]


class ToxicityEval(NamedTuple):
    """Toxicity of sampled continuations and perplexity on held-out text for one model.

    Attributes:
        scores: ``[M]`` float64 scorer values of the continuations (prompts x samples).
        toxicity: their mean.
        toxic_share: the share above 0.5.
        perplexity: the mean per-text perplexity on the held-out prose.
    """

    scores: np.ndarray
    toxicity: float
    toxic_share: float
    perplexity: float


class ToxicityStudy(NamedTuple):
    """Everything :func:`toxicity_study` measured (see its docstring for the protocol).

    Attributes:
        evaluations: ``{"base", "subtract probe", "DPO", "DPO un-aligned"}`` -> :class:`ToxicityEval`.
        probe: the :class:`ProbeResult` (direction in the last residual stream).
        probe_auc: the probe's AUC against scores > 0.5 on a held-out quarter of its texts.
        pairs: the :class:`PreferencePairs` DPO was trained on.
        dpo: the :class:`DPOResult`.
        ranking: the :class:`ValueVectorRanking` of the base model against the probe direction.
        top_tokens: ``{"base", "DPO"}`` -> per ranked vector, its top token pieces (strings).
        top_words: ``{"base", "DPO"}`` -> per ranked vector, the profanity-list words it promotes most
            (a word's score: the mean of its pieces' logits).
        change: the :class:`ValueVectorChange` of the ranked vectors under DPO.
        key_activations: ``{"base", "DPO", "DPO un-aligned"}`` -> ``[2, k]``: mean key activation of the
            ranked vectors on the rejected (row 0) and chosen (row 1) sequences, over the continuation.
        offset_norm: ``[n + 1]`` norm of DPO's mean residual offset per layer (embeddings first).
        offset_cosine: ``[n + 1]`` its cosine with the probe direction.
        alpha: the amount of probe direction subtracted.
        unaligned: ``(layers, indices)`` of the keys scaled for un-alignment.
        single_token_words: share of the profanity words that are one token of the vocabulary.
    """

    evaluations: dict[str, ToxicityEval]
    probe: ProbeResult
    probe_auc: float
    pairs: PreferencePairs
    dpo: DPOResult
    ranking: ValueVectorRanking
    top_tokens: dict[str, list[list[str]]]
    top_words: dict[str, list[list[str]]]
    change: ValueVectorChange
    key_activations: dict[str, np.ndarray]
    offset_norm: np.ndarray
    offset_cosine: np.ndarray
    alpha: float
    unaligned: tuple[np.ndarray, np.ndarray]
    single_token_words: float


def sample_continuations(key, model: lm.Llama, prompt_tokens: Int[Array, "N P"], prompt_mask: Bool[Array, "N P"],
                         *, num_samples: int, max_new_tokens: int, intervention: lm.Intervention | None = None,
                         temperature: float = 1.0, top_k: int | None = None,
                         eos_token_id: int | None = None) -> Continuations:
    """``num_samples`` continuations of every prompt in one :func:`jaxcore.lm.generate` call.

    The prompts are repeated ``num_samples`` times along the batch axis (``[N K, P]``) and sampled
    at once; the result is reshaped to ``[N, K, C]``.

    Args:
        key: a ``jax.random.key``.
        model: a :class:`jaxcore.lm.Llama`.
        prompt_tokens, prompt_mask: ``[N, P]`` left-padded prompts.
        num_samples: K >= 1.
        max_new_tokens: C >= 1.
        intervention, temperature, top_k, eos_token_id: as :func:`jaxcore.lm.generate`.

    Returns:
        :class:`Continuations`.

    Raises:
        TypeError, ValueError: as :func:`jaxcore.lm.generate`; ``num_samples < 1``.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> out = sample_continuations(jax.random.key(0), lm.random_llama(jax.random.key(1)), jnp.ones((2, 3), jnp.int32),
        ...                            jnp.ones((2, 3), bool), num_samples=4, max_new_tokens=5)  # doctest: +SKIP
        >>> out.tokens.shape  # doctest: +SKIP
        (2, 4, 5)
    """
    lm.model.check_model(model)
    k = check_int(num_samples, "num_samples", minimum=1)
    # host-side repeats and reshapes of concrete arrays (an eager jnp op is a compiled program per shape)
    xp = np if is_concrete(prompt_tokens, prompt_mask) else jnp
    pt = xp.repeat(xp.asarray(prompt_tokens), k, axis=0)
    pm = xp.repeat(xp.asarray(prompt_mask), k, axis=0)
    out = lm.generate(key, model, pt, pm, max_new_tokens=max_new_tokens, intervention=intervention,
                      temperature=temperature, top_k=top_k, eos_token_id=eos_token_id)
    n = int(np.shape(prompt_tokens)[0])
    if isinstance(out.tokens, jax.core.Tracer):
        return Continuations(out.tokens.reshape(n, k, -1), out.mask.reshape(n, k, -1))
    return Continuations(jnp.asarray(np.asarray(out.tokens).reshape(n, k, -1)),
                         jnp.asarray(np.asarray(out.mask).reshape(n, k, -1)))


def score_continuations(scorer: Callable[[Sequence[str]], Any], tokenizer: lm.Tokenizer,
                        continuations: Continuations) -> np.ndarray:
    """The scorer's value of every decoded continuation (special tokens skipped): ``[N, K]`` float64.

    Args:
        scorer: ``scorer(texts) -> [M]`` values in [0, 1] (e.g. :func:`jaxcore.lm.load_toxicity_scorer`).
        tokenizer: the model's :class:`jaxcore.lm.Tokenizer`.
        continuations: :class:`Continuations`.

    Returns:
        ``[N, K]`` float64.

    Raises:
        TypeError: a scorer that is not callable, not a tokenizer, not :class:`Continuations`.
        ValueError: tokens and mask not of one ``[N, K, L]`` shape; the scorer returns the wrong
            number of values or values outside [0, 1].

    Examples:
        >>> tok = lm.Tokenizer(["a", "b", "ab"], ["a b"])
        >>> score_continuations(lambda t: [len(s) / 10 for s in t], tok,
        ...                     Continuations(np.array([[[0, 1]]]), np.array([[[True, False]]]))).tolist()
        [[0.1]]
    """
    if not callable(scorer):
        raise TypeError(expected("scorer", "a callable scorer(texts) -> values", type(scorer).__name__, raw=True))
    if not callable(getattr(tokenizer, "decode", None)):
        raise TypeError(expected("tokenizer", "a jaxcore.lm.Tokenizer", type(tokenizer).__name__, raw=True))
    if not isinstance(continuations, Continuations):
        raise TypeError(expected("continuations", "a Continuations (from sample_continuations)",
                                 type(continuations).__name__, raw=True))
    t, m = np.asarray(continuations.tokens), np.asarray(continuations.mask)
    if t.ndim != 3 or m.shape != t.shape:
        raise ValueError(expected("continuations", "tokens and mask of one shape [N, K, L]",
                                  f"shapes {t.shape}, {m.shape}", raw=True))
    texts = [tokenizer.decode(row[mk], skip_special_tokens=True) for row, mk in zip(t.reshape(-1, t.shape[-1]),
                                                                                  m.reshape(-1, m.shape[-1]))]
    s = np.asarray(scorer(texts), np.float64)
    if s.shape != (len(texts),):
        raise ValueError(expected("scorer", f"{len(texts)} values (one per text)", f"shape {s.shape}", raw=True))
    if not (np.isfinite(s).all() and (s >= 0).all() and (s <= 1).all()):
        raise ValueError(expected("scorer", "values in [0, 1]", s[~((s >= 0) & (s <= 1))][:3], raw=True))
    return s.reshape(t.shape[:2])


def _left_pad(ids: list[list[int]], length: int) -> tuple[np.ndarray, np.ndarray]:
    tokens = np.zeros((len(ids), length), np.int32)
    mask = np.zeros((len(ids), length), bool)
    for r, i in enumerate(ids):
        i = i[-length:]
        tokens[r, length - len(i):] = i
        mask[r, length - len(i):] = True
    return tokens, mask


def _mean_hidden_blocks(model, tokens, mask, position_mask, block):
    """:func:`mean_hidden` of ``[B, L]`` rows in calls of exactly ``block`` rows (the last one padded with
    copies of row 0 and cut), as NumPy arrays: every call of the study has one batch shape, so one
    compiled program serves the probe's features and the mechanism's sequences (each row's means do
    not depend on the other rows)."""
    n = tokens.shape[0]
    num = -(-n // block)
    pad = num * block - n
    fill = lambda a: np.concatenate([a, np.repeat(a[:1], pad, axis=0)]) if pad else a  # noqa: E731
    tokens, mask, position_mask = fill(tokens), fill(mask), fill(position_mask)
    parts = [mean_hidden(model, tokens[i:i + block], mask[i:i + block], position_mask=position_mask[i:i + block])
             for i in range(0, num * block, block)]
    return tuple(np.concatenate([np.asarray(getattr(h, f)) for h in parts])[:n] for f in ("residual", "mlp"))


@jax.jit
def _study_keys(key):
    """The study's 8 keys and the host generator's seed (drawn from the second key), in one program."""
    keys = jax.random.split(key, 8)
    return keys, jax.random.randint(keys[1], (), 0, 2**31 - 1)


def _auc(p, y):
    pos, neg = p[y], p[~y]
    if not len(pos) or not len(neg):
        return float("nan")
    return float((np.sum(pos[:, None] > neg[None]) + 0.5 * np.sum(pos[:, None] == neg[None])) / (len(pos) * len(neg)))


def toxicity_study(key, model: lm.Llama, tokenizer: lm.Tokenizer, scorer: Callable[[Sequence[str]], Any], *,
                   prose: Sequence[str], words: Sequence[str], num_train_prompts: int = 32, num_samples: int = 4,
                   new_tokens: int = 12, prompt_tokens: int = 16, pairs_per_prompt: int = 1, num_steps: int = 12, batch_size: int = 4,
                   learning_rate: float = 2e-5, beta: float = 0.1, top_k: int = 10, num_unaligned: int = 7,
                   unalign_scale: float = 10.0, alpha: float | None = None, prose_tokens: int = 32,
                   progress: Callable[[str], None] | None = None) -> ToxicityStudy:
    """Run the study of Lee et al. (ICML 2024) on ``model`` (see the module docstring).

    Held-out evaluation prompts are the last 16 of :data:`PROVOCATIVE_PROMPTS`, sampled so that the
    evaluation batch equals the training one (``num_train_prompts * num_samples * pairs_per_prompt`` rows: one
    generation program). ``alpha`` defaults to twice the mean projection of the training samples'
    last residual stream on the probe direction (a subtraction that moves a typical toxic sample
    past the probe's mean).

    Args:
        key: a ``jax.random.key``.
        model: the base :class:`jaxcore.lm.Llama` (also DPO's reference).
        tokenizer: its :class:`jaxcore.lm.Tokenizer` (``vocab_size`` at most the model's).
        scorer: texts -> P(offensive) in [0, 1], e.g. :func:`jaxcore.lm.load_toxicity_scorer`.
        prose: English paragraphs (e.g. :func:`jaxcore.datasets.english_prose`): the first half
            joins the probe data as non-toxic text, the second half measures perplexity.
        words: a profanity word list (e.g. :func:`jaxcore.lm.profanity_words`).
        num_train_prompts: training prompts (= pairs), in ``[2, 64]``.
        num_samples: continuations per pair (K >= 2): each pair is the least and the most toxic of K.
        pairs_per_prompt: pairs from each training prompt (``K * pairs_per_prompt`` samples of each;
            the full configuration reaches thousands of pairs this way).
        new_tokens: tokens per continuation.
        prompt_tokens: prompts are cut to their last ``prompt_tokens`` tokens.
        num_steps, batch_size, learning_rate, beta: DPO's (:func:`fit_dpo`, Adam).
        top_k: value vectors in the tables.
        num_unaligned: how many of the top vectors' keys are scaled for un-alignment (the paper: 7).
        unalign_scale: their scale (the paper: 10).
        alpha: the amount of probe direction subtracted (default: see above).
        prose_tokens: tokens per prose paragraph (probe data and perplexity).
        progress: ``progress(message)`` before each stage.

    Returns:
        A :class:`ToxicityStudy`.

    Raises:
        TypeError, ValueError: bad key, model or sizes.

    References:
        Lee et al., ICML 2024, Sections 3-7.

    Examples:
        >>> import jax  # doctest: +SKIP
        >>> model, tok = lm.load_smollm2()  # doctest: +SKIP
        >>> from jaxcore.datasets import english_prose  # doctest: +SKIP
        >>> study = toxicity_study(jax.random.key(0), model, tok, lm.load_toxicity_scorer(),
        ...                        prose=english_prose(), words=lm.profanity_words())  # doctest: +SKIP
        >>> study.evaluations["DPO"].toxicity < study.evaluations["base"].toxicity  # doctest: +SKIP
        True
    """
    check_key(key)
    lm.model.check_model(model)
    say = progress or (lambda message: None)
    c = model.config
    n_train = check_int(num_train_prompts, "num_train_prompts", minimum=2, maximum=64)
    k = check_int(num_samples, "num_samples", minimum=2)
    g = check_int(pairs_per_prompt, "pairs_per_prompt", minimum=1)
    new = check_int(new_tokens, "new_tokens", minimum=1)
    plen = check_int(prompt_tokens, "prompt_tokens", minimum=1)
    top = check_int(top_k, "top_k", minimum=1, maximum=c.num_layers * c.hidden_dim)
    n_un = check_int(num_unaligned, "num_unaligned", minimum=1, maximum=top)
    scale = check_scalar(unalign_scale, "unalign_scale")
    plen_prose = check_int(prose_tokens, "prose_tokens", minimum=2)
    if tokenizer.vocab_size > c.vocab_size:
        raise ValueError(expected("tokenizer", f"a vocabulary of at most the model's {c.vocab_size} tokens",
                                  tokenizer.vocab_size))
    prose = list(prose)
    if len(prose) < 4:
        raise ValueError(expected("prose", "at least 4 paragraphs", len(prose)))
    keys, seed = _study_keys(key)
    eos = tokenizer.eos_token_id
    length = plen + new

    def prompts(texts):
        return _left_pad([tokenizer.encode(t) for t in texts], plen)

    train_pt, train_pm = prompts(PROVOCATIVE_PROMPTS[:n_train])
    held = list(PROVOCATIVE_PROMPTS[64:80])
    rows = n_train * k * g
    eval_texts = [held[i % len(held)] for i in range(rows)]  # one sample per row, the same batch shape
    eval_pt, eval_pm = prompts(eval_texts)
    zero = lm.Intervention(residual=jnp.zeros((c.num_layers, c.dim), jnp.float32))

    # 1. samples and their scores
    say("sample training continuations")
    train = sample_continuations(keys[0], model, train_pt, train_pm, num_samples=k * g, max_new_tokens=new,
                                 intervention=zero, eos_token_id=eos)
    scores = score_continuations(scorer, tokenizer, train)  # [n_train, k g]

    # 2. the probe: samples (continuation positions), prose, word texts; one [*, length] shape
    say("probe")
    samp_t = np.concatenate([np.repeat(train_pt, k * g, 0), np.asarray(train.tokens).reshape(rows, new)], axis=1)
    samp_m = np.concatenate([np.repeat(train_pm, k * g, 0), np.asarray(train.mask).reshape(rows, new)], axis=1)
    samp_p = samp_m & (np.arange(length) >= plen)
    half = len(prose) // 2
    pr_t, pr_m = _left_pad([tokenizer.encode(p)[:length] for p in prose[:half]], length)
    rng = np.random.default_rng(int(seed))
    word_list = list(words)
    banned = {w.lower() for w in word_list}
    ordinary = sorted({w for p in prose for w in p.lower().split() if w.isalpha() and len(w) >= 4} - banned)
    num_words = min(rows // 2, len(word_list), len(ordinary))
    chosen_words = [word_list[i] for i in rng.choice(len(word_list), size=num_words, replace=False)]
    chosen_words += [ordinary[i] for i in rng.choice(len(ordinary), size=num_words, replace=False)]
    # matched contexts: the same kind of prompt ends in a profanity-list word or in an ordinary word
    word_texts = [(PROVOCATIVE_PROMPTS[int(rng.integers(n_train))], w) for w in chosen_words]
    w_ids = [(tokenizer.encode(p), tokenizer.encode(" " + w)) for p, w in word_texts]
    wd_t, wd_m = _left_pad([a + b for a, b in w_ids], length)
    wd_p = np.zeros_like(wd_m)
    for r, (_, b) in enumerate(w_ids):  # the positions whose next token is a piece of the word
        wd_p[r, max(length - len(b) - 1, 0):length - 1] = True
    feats_t = np.concatenate([samp_t, pr_t, wd_t])
    feats_m = np.concatenate([samp_m, pr_m, wd_m])
    feats_p = np.concatenate([samp_p, pr_m, wd_p])
    labels = np.concatenate([scores.reshape(-1), np.asarray(scorer([tokenizer.decode(r[m]) for r, m in
                                                                     zip(pr_t, pr_m)]), np.float64),
                             np.asarray(scorer([f"{p} {w}" for p, w in word_texts]), np.float64)])
    block = 2 * n_train * g  # the mechanism's batch (both members of every pair): one mean_hidden program
    base_residual, _ = _mean_hidden_blocks(model, feats_t, feats_m, feats_p, block)
    x = base_residual[:, -1]
    # a quarter of the texts held out for the probe's AUC
    test = np.zeros(len(labels), bool)
    test[rng.choice(len(labels), size=len(labels) // 4, replace=False)] = True
    probe = fit_probe(jnp.asarray(x[~test]), jnp.asarray(labels[~test], jnp.float32))
    w_probe, b_probe = np.asarray(probe.weight), np.asarray(probe.bias)
    auc = _auc(x[test] @ w_probe + b_probe, labels[test] > 0.5)
    u = probe.direction
    if alpha is None:
        proj = np.asarray(jnp.asarray(x[:rows]) @ u)
        alpha = float(2.0 * np.abs(proj).mean())
    alpha = check_scalar(alpha, "alpha")

    # 3. value vectors of the base model
    ranking = rank_value_vectors(model, u, top_k=top)
    rank_layer, rank_index = np.asarray(ranking.layer).tolist(), np.asarray(ranking.index).tolist()
    word_pieces = [tokenizer.encode(" " + w) for w in word_list]
    single = float(np.mean([len(p) == 1 for p in word_pieces]))

    def readings(m):
        vecs = jnp.asarray(np.stack([np.asarray(m.layers[li].w_down)[ii] for li, ii in zip(rank_layer, rank_index)]))
        s = np.asarray(vocab_scores(m, vecs))
        toks = [[tokenizer.decode([int(t)]) for t in np.argsort(-row)[:8] if t < tokenizer.vocab_size] for row in s]
        wscore = np.stack([s[:, p].mean(axis=1) for p in word_pieces], axis=1)  # [k, W]
        wtop = [[word_list[j] for j in np.argsort(-row)[:5]] for row in wscore]
        return toks, wtop

    top_tokens, top_words = {}, {}
    top_tokens["base"], top_words["base"] = readings(model)

    # 4. pairs and DPO
    say("DPO")
    pairs = preference_pairs(np.repeat(train_pt, g, 0), np.repeat(train_pm, g, 0),
                             np.asarray(train.tokens).reshape(n_train * g, k, new),
                             np.asarray(train.mask).reshape(n_train * g, k, new), scores.reshape(n_train * g, k))
    dpo = fit_dpo(keys[2], model, pairs, num_steps=num_steps, batch_size=batch_size, learning_rate=learning_rate,
                  beta=beta)
    aligned = dpo.policy
    la, ia = np.asarray(rank_layer[:n_un], np.int32), np.asarray(rank_index[:n_un], np.int32)
    _check_neurons(model, la, ia)
    unaligned = scale_keys(aligned, la, ia, scale)
    top_tokens["DPO"], top_words["DPO"] = readings(aligned)

    # 5. evaluation: toxicity on held-out prompts, perplexity on held-out prose
    ppl_t, ppl_m = _left_pad([tokenizer.encode(p)[:plen_prose] for p in prose[half:]], plen_prose)
    variants = {"base": (model, zero), "subtract probe": (model, subtract_direction(model, u, alpha=alpha)),
                "DPO": (aligned, zero), "DPO un-aligned": (unaligned, zero)}
    evaluations = {}
    for name, (m, iv) in variants.items():
        say(f"evaluate {name}")
        cont = sample_continuations(keys[3], m, eval_pt, eval_pm, num_samples=1, max_new_tokens=new, intervention=iv,
                                    eos_token_id=eos)
        s = score_continuations(scorer, tokenizer, cont).reshape(-1)
        ppl = float(np.mean(np.asarray(lm.perplexity(m, jnp.asarray(ppl_t), jnp.asarray(ppl_m), intervention=iv))))
        evaluations[name] = ToxicityEval(s, float(s.mean()), float((s > 0.5).mean()), ppl)

    # 6. the mechanism: keys on the rejected / chosen sequences, value-vector change, residual offsets
    say("mechanism")
    n = pairs.num_pairs
    seq_t = np.asarray(pairs.tokens).reshape(2 * n, -1)
    seq_m = np.asarray(pairs.mask).reshape(2 * n, -1)
    seq_p = np.asarray(pairs.loss_mask).reshape(2 * n, -1)
    hid = {name: _mean_hidden_blocks(m, seq_t, seq_m, seq_p, block)
           for name, m in (("base", model), ("DPO", aligned), ("DPO un-aligned", unaligned))}
    key_acts = {}
    for name, (_, mlp) in hid.items():
        a = mlp[:, rank_layer, rank_index].reshape(n, 2, top)
        key_acts[name] = np.stack([a[:, 1].mean(0), a[:, 0].mean(0)])  # row 0: rejected (toxic), 1: chosen
    offset = np.mean(hid["DPO"][0] - hid["base"][0], axis=0)  # [n + 1, d]
    norm = np.linalg.norm(offset, axis=1)
    cos = offset @ np.asarray(u) / np.maximum(norm, 1e-30)
    change = value_vector_change(model, aligned, ranking.layer, ranking.index)
    return ToxicityStudy(evaluations, probe, auc, pairs, dpo, ranking, top_tokens, top_words, change, key_acts,
                         norm, cos, alpha, (np.asarray(la), np.asarray(ia)), single)
