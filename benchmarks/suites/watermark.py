"""jaxcore.watermark: speed of detection and watermarked decoding; DiPmark's experiments on SmolLM2.

Speed:

- ``watermark.detect``: DiPmark detection (context hash, O(1) Feistel position, already-seen
  contexts, green count) of 256 texts x 200 tokens at V = 49,152, vmapped, against the per-token
  Python loop a user of the reference writes (for each token: hash the context, look up the
  token's position, skip a repeated context, count). Target >= 20x.
- ``watermark.detect_reference``: the same detection against the reference's design in PyTorch:
  for each token the whole vocabulary permutation is built (the reference calls ``torch.randperm``;
  here the same keyed network evaluated on all V indices in torch, so that the answers agree) and
  the token looked up. Default 2 x 100 tokens (one materialised permutation per token costs a few
  milliseconds, and the harness calls the loop about ten times); the full configuration runs
  256 x 200. Target >= 20x.
- ``watermark.decode_overhead``: ``jaxcore.lm.generate`` with the DiPmark processor against plain
  ``generate`` (same model, key and sizes), batch 8. The ratio is plain / watermarked time, so the
  issue's "<= 10% overhead" is a target of >= 0.91. Default: batch 8, 16 prompt and 16 new
  tokens (the full configuration: 32 and 64). The agreement check verifies that the
  watermarked tokens carry the watermark and the plain ones do not (they are different samples).

Quality:

- ``watermark.bias``: DiPmark's preservation error E_h[P_W] - P at V = 49,152 for the Feistel
  family (2 and 6 rounds by default, 2, 4, 6, 8 in the full configuration) against true uniform
  permutations (``jax.random.permutation``), on a Zipf(1.1) next-token distribution over the token
  ids (:func:`jaxcore.watermark.permutation_bias`). 128 context hashes by default (8,192 in the full
  configuration): 2 rounds still stand out there (position chi2/dof 2.8 against 1.04 for 6 rounds
  and 1.01 for uniform permutations, whose spread is sqrt(2 / 1023) = 0.044; run of 2026-12-01).
- ``watermark.smollm2``: prompts are the first tokens of English paragraphs from scikit-learn's
  dataset descriptions (:func:`jaxcore.datasets.english_prose`); SmolLM2-135M-Instruct samples
  continuations (temperature 1, no truncation) with no watermark, DiPmark alpha in {0.3, 0.45, 0.5}
  and KGW (gamma = 1/2) delta in {1, 2}, all with a context key of the previous 2 tokens. Tables:
  perplexity of the generations under the base model (mean and 95% interval over texts, and the
  difference to no watermark with its Welch interval); detection rate at the exact binomial
  test's 1% level vs generation length, with the empirical false-positive rate on the
  unwatermarked generations; detection under random substitution eps in {0.1, 0.2, 0.3}. A figure.
  Default: 8 prompts x 2 samples, 32 new tokens (six generations of 16 texts, two compiled
  generation programs, no watermark being KGW with delta = 0, bit for bit plain sampling: about half of the family's default run on 2 cores; detection rates move in steps of
  1/16 and the perplexity intervals are wide at that count); the full configuration: 50 x 4, 128 tokens. The smoke run uses
  the tiny random Llama (V = 512) instead of SmolLM2.

All times were measured on a shared machine under load: ratios between interleaved runs carry
over, absolute times do not.
"""

from __future__ import annotations

import functools
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.registry import (
    Baseline,
    Case,
    QualityBenchmark,
    QualityResult,
    Reproduction,
    SpeedBenchmark,
    Table,
    register,
    register_reproduction,
)
from jaxcore import lm
from jaxcore.datasets import english_prose
from jaxcore.watermark import (
    KGW,
    DiPmark,
    detect,
    detection_rates,
    permutation_bias,
    secret_words,
    substitution_attack,
)

FAMILY = "watermark"
V_SMOLLM2 = 49152
SECRET = 20240721  # the watermark key of every benchmark (jax.random.key(SECRET))

# ----------------------------------------------------------------------------- reference-style loops

_M32 = 0xFFFFFFFF
_PHI = 0x9E3779B9


def _mix(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x7FEB352D) & _M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & _M32
    return x ^ (x >> 16)


def _key_words(wm) -> tuple[int, int]:
    w = np.asarray(secret_words(wm.key)).tolist()
    return int(w[0]), int(w[1])


def _radices(v: int) -> tuple[int, int]:
    best = None
    for u in range(min(2, v - 1), math.isqrt(v - 1) + 2):
        w = -(-v // u)
        if 4 * u * u >= v and (best is None or (u * w - v, abs(w - u), u) < best[0]):
            best = ((u * w - v, abs(w - u), u), u, w)
    return best[1], best[2]


def _hash_context(s0: int, s1: int, ctx: list[int]) -> int:
    h = _mix(s0)
    for j, c in enumerate(ctx):
        h = _mix(h ^ ((_mix((c & _M32) ^ s1) + (j + 1) * _PHI) & _M32))
    return h


def _round_keys(s0: int, s1: int, h: int, rounds: int) -> list[int]:
    return [_mix((h + _mix((_mix(s0 ^ (((i + 1) * _PHI) & _M32)) + s1) & _M32)) & _M32) for i in range(rounds)]


def _position(token: int, keys: list[int], u: int, w: int, v: int) -> int:
    x = token
    while True:
        a, b = divmod(x, w)
        ra, rb = u, w
        for k in keys:
            f = ((_mix(b ^ k) >> 16) * ra) >> 16
            a, b = b, (a + f) % ra
            ra, rb = rb, ra
        x = a * rb + b
        if x < v:
            return x


def _python_loop(tokens, wm, threshold):
    """Per token: hash its context, look the token's position up, skip repeated contexts, count."""
    s0, s1 = _key_words(wm)
    v, k = wm.vocab_size, wm.context_size
    u, w = _radices(v)
    out = []
    for row in np.asarray(tokens).tolist():
        seen, green, n = set(), 0, 0
        for i, t in enumerate(row):
            h = _hash_context(s0, s1, [row[j] if j >= 0 else -1 for j in range(i - k, i)])
            if h in seen:
                continue
            seen.add(h)
            green += _position(t, _round_keys(s0, s1, h, wm.num_rounds), u, w, v) >= threshold
            n += 1
        out.append((green, n))
    return np.array(out, np.int32).T


def _torch_permutation(keys, u, w, v, torch):
    """The position of every token, the network evaluated on all of arange(V) in torch (int64)."""
    x = torch.arange(v, dtype=torch.int64)
    todo = torch.ones(v, dtype=torch.bool)
    y = x.clone()
    while bool(todo.any()):
        a, b = torch.div(y, w, rounding_mode="floor"), y % w
        ra, rb = u, w
        for kk in keys:
            z = b ^ kk
            z = z ^ (z >> 16)
            z = (z * 0x7FEB352D) & _M32
            z = z ^ (z >> 15)
            z = (z * 0x846CA68B) & _M32
            z = z ^ (z >> 16)
            f = ((z >> 16) * ra) >> 16
            a, b = b, (a + f) % ra
            ra, rb = rb, ra
        y = torch.where(todo, a * rb + b, y)
        todo = y >= v
    return y


def _torch_loop(tokens, wm, threshold):
    """The reference's design: per token, hash, build the whole permutation (torch), look up."""
    import torch

    s0, s1 = _key_words(wm)
    v, k = wm.vocab_size, wm.context_size
    u, w = _radices(v)
    out = []
    for row in np.asarray(tokens).tolist():
        seen, green, n = set(), 0, 0
        for i, t in enumerate(row):
            h = _hash_context(s0, s1, [row[j] if j >= 0 else -1 for j in range(i - k, i)])
            if h in seen:
                continue
            seen.add(h)
            pos = _torch_permutation(_round_keys(s0, s1, h, wm.num_rounds), u, w, v, torch)
            green += int(pos[t]) >= threshold
            n += 1
        out.append((green, n))
    return np.array(out, np.int32).T


# ----------------------------------------------------------------------------- detection speed


def _detect_kernel(tokens, wm):
    res = detect(wm, tokens)
    return jnp.stack([res.num_green, res.num_scored])


def _detect_setup(size, key):
    v = int(size.get("vocab", V_SMOLLM2))
    wm = DiPmark(v, key=jax.random.key(SECRET), context_size=int(size.get("context", 2)))
    n, length = int(size["texts"]), int(size["length"])
    tokens = jax.random.randint(key, (n, length), 0, v)
    return Case(args=(tokens,), static={"wm": wm}, work=n * length, work_unit="tokens")


def _python_baseline(tokens, wm):
    return _python_loop(tokens, wm, wm.vocab_size // 2)


def _torch_baseline(tokens, wm):
    return _torch_loop(tokens, wm, wm.vocab_size // 2)


register(SpeedBenchmark(
    name="watermark.detect",
    family=FAMILY,
    kernel=_detect_kernel,
    setup=_detect_setup,
    sizes=[{"texts": 256, "length": 200}],
    quick_sizes=[{"texts": 8, "length": 50}],
    baselines=[Baseline("python-loop", _python_baseline,
                        note="per token: keyed hash, O(1) network lookup, seen-set, count (pure Python)")],
    rtol=0, atol=0,
    target={"python-loop": 20.0},
    description="DiPmark detection (green count, already-seen contexts) of texts at V = 49,152, vmapped",
))

register(SpeedBenchmark(
    name="watermark.detect_reference",
    family=FAMILY,
    kernel=_detect_kernel,
    setup=_detect_setup,
    sizes=[{"texts": 2, "length": 100}],
    quick_sizes=[{"texts": 2, "length": 20}],
    baselines=[Baseline("torch-loop", _torch_baseline, requires=("torch",),
                        note="per token: hash, the whole V-permutation in torch (as torch.randperm), lookup")],
    rtol=0, atol=0,
    target={"torch-loop": 20.0},
    description="DiPmark detection against the reference's per-token materialised permutation",
))


# ----------------------------------------------------------------------------- decoding overhead


@functools.lru_cache(maxsize=2)
def _model(name: str):
    """(model, tokenizer or None): SmolLM2-135M-Instruct, or the tiny random Llama of the smoke run."""
    if name == "tiny":
        cfg = lm.LlamaConfig.tiny(vocab_size=512, dim=64, num_layers=2, max_positions=512)
        return lm.random_llama(jax.random.key(0), cfg), None
    return lm.load_smollm2()


def _prompts(name, tok, vocab, num, length, seed=0):
    """Left-padded prompt prefixes: the first ``length`` tokens of English paragraphs (real model)."""
    if tok is None:
        rng = np.random.default_rng(seed)
        return rng.integers(3, vocab, size=(num, length)).astype(np.int32), np.ones((num, length), bool)
    paras = english_prose()
    texts = [paras[i % len(paras)] for i in range(num)]
    ids = [tok.encode(t)[:length] for t in texts]
    toks = np.zeros((num, length), np.int32)
    mask = np.zeros((num, length), bool)
    for r, i in enumerate(ids):
        toks[r, length - len(i):] = i
        mask[r, length - len(i):] = True
    return toks, mask


def _decode_kernel(key, model, prompt, mask, wm, new):
    return lm.generate(key, model, prompt, mask, max_new_tokens=new, processor=wm, check_logits=False).tokens


def _decode_plain(key, model, prompt, mask, wm, new):
    return lm.generate(key, model, prompt, mask, max_new_tokens=new, check_logits=False).tokens


def _decode_setup(size, key):
    model, tok = _model(size["model"])
    v = model.config.vocab_size
    prompt, mask = _prompts(size["model"], tok, v, int(size["batch"]), int(size["prompt"]))
    wm = DiPmark(v, key=jax.random.key(SECRET), alpha=0.5, context_size=2)
    new = int(size["new"])
    return Case(args=(key, model, jnp.asarray(prompt), jnp.asarray(mask)), static={"wm": wm, "new": new},
                work=int(size["batch"]) * new, work_unit="tokens")


def _decode_check(kernel_out, baseline_out, case):
    wm = case.static["wm"]
    k, b = np.asarray(kernel_out), np.asarray(baseline_out)
    if k.shape != b.shape:
        raise AssertionError(f"token shapes differ: {k.shape} vs {b.shape}")
    zk = float(np.mean(np.asarray(detect(wm, jnp.asarray(k)).z_score)))
    zb = float(np.mean(np.asarray(detect(wm, jnp.asarray(b)).z_score)))
    if not zk > zb + 1.0:
        raise AssertionError(f"the watermarked tokens are not detected (mean z {zk:.2f} vs plain {zb:.2f})")


register(SpeedBenchmark(
    name="watermark.decode_overhead",
    family=FAMILY,
    kernel=_decode_kernel,
    setup=_decode_setup,
    sizes=[{"model": "smollm2", "batch": 8, "prompt": 16, "new": 16}],
    quick_sizes=[{"model": "tiny", "batch": 8, "prompt": 8, "new": 16}],
    baselines=[Baseline("plain", _decode_plain, is_jax=True, note="jaxcore.lm.generate without a processor")],
    check=_decode_check,
    target={"plain": 0.91},
    description="generate with DiPmark (alpha = 1/2, k = 2) vs plain generate, batch 8",
))


# ----------------------------------------------------------------------------- bias of the permutation


def _zipf(v: int, s: float = 1.1) -> jax.Array:
    r = 1.0 / (jnp.arange(v, dtype=jnp.float32) + 1.0) ** s
    return r / r.sum()


def _bias_run(ctx):
    p = ctx.params
    v, s = int(p["vocab"]), int(p["num_samples"])
    probs = _zipf(v)
    rows, metrics = [], {}
    variants = [("feistel", r) for r in p["rounds"]] + [("shuffle", None)]
    for method, rounds in variants:
        ctx.progress(f"bias {method} {rounds}")
        t0 = time.perf_counter()
        res = permutation_bias(ctx.key, probs, alpha=0.5, num_samples=s, method=method,
                               num_rounds=rounds or 6, chunk_size=int(p["chunk_size"]))
        jax.block_until_ready(res)
        dt = time.perf_counter() - t0
        label = f"Feistel, {rounds} rounds" if method == "feistel" else "uniform (jax.random.permutation)"
        rows.append([label, float(res.l1), float(res.chi2_per_dof), float(res.position_chi2_per_dof), dt])
        tag = f"{method}{rounds or ''}"
        metrics[f"watermark.bias.{tag}.chi2_per_dof"] = float(res.chi2_per_dof)
        metrics[f"watermark.bias.{tag}.position_chi2_per_dof"] = float(res.position_chi2_per_dof)
    table = Table(
        title=f"Preservation error of DiPmark (alpha = 1/2) at V = {v}, {s} random context hashes",
        columns=["permutation", "||E[P_W] - P||_1", "chi2/dof (reweighted)", "chi2/dof (positions)", "time (s)"],
        rows=rows,
        note=("P: Zipf(1.1) over token ids. chi2/dof is about 1 when the Monte Carlo average cannot tell the "
              "family from uniform permutations (positions: slightly below 1 for true permutations, counts "
              "drawn without replacement); the uniform row is the reference at the same sample size. "
              "Times under load."),
    )
    return QualityResult(tables=[table], metrics=metrics)


register(QualityBenchmark(
    name="watermark.bias",
    family=FAMILY,
    run=_bias_run,
    params={"vocab": V_SMOLLM2, "num_samples": 128, "rounds": [2, 6], "chunk_size": 32},
    quick_params={"vocab": 1024, "num_samples": 64, "rounds": [2, 6], "chunk_size": 32},
    description="preservation error of the Feistel permutations vs uniform permutations at V = 49,152",
    timed=True,  # its tables report wall-clock times: runs alone
))


# ----------------------------------------------------------------------------- SmolLM2 experiments


def _mean_ci(x):
    x = np.asarray(x, np.float64)
    m = float(x.mean())
    h = 1.96 * float(x.std(ddof=1)) / math.sqrt(len(x)) if len(x) > 1 else float("nan")
    return m, h


def _welch(x, y):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    d = float(x.mean() - y.mean())
    h = 1.96 * math.sqrt(x.var(ddof=1) / len(x) + y.var(ddof=1) / len(y))
    return d, h


def _quality_run(ctx):
    p = ctx.params
    model, tok = _model(p["model"])
    v = model.config.vocab_size
    num, new, k = int(p["num_prompts"]) * int(p["samples_per_prompt"]), int(p["new_tokens"]), int(p["context_size"])
    prompt, pmask = _prompts(p["model"], tok, v, int(p["num_prompts"]), int(p["prompt_tokens"]))
    prompt = jnp.asarray(np.repeat(prompt, int(p["samples_per_prompt"]), axis=0))
    pmask = jnp.asarray(np.repeat(pmask, int(p["samples_per_prompt"]), axis=0))
    secret = jax.random.key(SECRET)
    methods = [("no watermark", None)]
    methods += [(f"DiPmark alpha={a}", DiPmark(v, key=secret, alpha=a, context_size=k)) for a in p["alphas"]]
    methods += [(f"KGW delta={d}", KGW(v, key=secret, gamma=0.5, delta=d, context_size=k)) for d in p["deltas"]]
    detector_of = {name: wm for name, wm in methods}
    gen_key = jax.random.fold_in(ctx.key, 1)
    # no watermark: KGW with delta = 0 adds exactly 0 to every logit, so its samples are plain sampling's bit
    # for bit (the same keys), and it reuses the KGW rows' compiled program (one generation program fewer)
    plain = KGW(v, key=secret, gamma=0.5, delta=0.0, context_size=k)
    gens = {}
    for name, wm in methods:
        ctx.progress(f"generate: {name}")
        out = lm.generate(gen_key, model, prompt, pmask, max_new_tokens=new, processor=plain if wm is None else wm)
        gens[name] = out
    full_mask = lambda out: jnp.concatenate([pmask, out.mask], axis=1)  # noqa: E731

    # perplexity of the generations under the base model
    ppl = {}
    for name, out in gens.items():
        m = np.asarray(out.mask)
        nll = -(np.asarray(out.model_logprobs) * m).sum(1) / np.maximum(m.sum(1), 1)
        ppl[name] = np.exp(nll)
    base = ppl["no watermark"]
    rows = []
    metrics = {}
    for name in gens:
        mean, half = _mean_ci(ppl[name])
        d, dh = _welch(ppl[name], base) if name != "no watermark" else (0.0, 0.0)
        # paired: every method samples the same prompts with the same keys, so the per-text difference
        # cancels most of the text-to-text spread (the Welch interval keeps it)
        pd, ph = _mean_ci(ppl[name] - base) if name != "no watermark" else (0.0, 0.0)
        sig = "" if name == "no watermark" else ("yes" if abs(pd) > ph else "no")
        rows.append([name, (mean, half), f"{d:+.3f} ± {dh:.3f}", f"{pd:+.3f} ± {ph:.3f}", sig])
        key_name = name.replace(' ', '_')
        metrics[f"watermark.smollm2.ppl.{key_name}"] = mean
        if name != "no watermark":
            metrics[f"watermark.smollm2.ppl_diff.{key_name}"] = pd
            metrics[f"watermark.smollm2.ppl_diff_half.{key_name}"] = ph
    metrics["watermark.smollm2.num_texts"] = float(num)
    t_ppl = Table(title=f"Perplexity of {num} generations ({new} new tokens) under the base model",
                  columns=["method", "perplexity (mean ± 95% CI)", "difference to no watermark (Welch 95%)",
                           "paired difference (95%)", "significant (paired)"], rows=rows,
                  note=("Temperature 1, no truncation; each text's perplexity over its generated tokens. Every "
                        "method samples the same prompts with the same sampling keys (a paired design): the "
                        "paired interval is the smallest difference this run can resolve."))

    # detection vs length (exact binomial test at level 1%; detection over the generated tokens only)
    lengths = [n for n in p["lengths"] if n <= new]
    gen_only = jnp.concatenate([jnp.zeros_like(pmask), jnp.ones_like(pmask[:, :1]).repeat(new, 1)], axis=1)
    null = gens["no watermark"]
    null_tokens = jnp.concatenate([prompt, null.tokens], axis=1)
    det_rows, curves = [], {}
    for name, out in gens.items():
        wm = detector_of[name]
        if wm is None:
            continue
        tokens = jnp.concatenate([prompt, out.tokens], axis=1)
        tpr = detection_rates(wm, tokens, full_mask(out), lengths=lengths, scored=gen_only, level=0.01).rate
        fpr = detection_rates(wm, null_tokens, full_mask(null), lengths=lengths, scored=gen_only, level=0.01).rate
        rates = [(float(a), float(b)) for a, b in zip(np.asarray(tpr), np.asarray(fpr))]
        curves[name] = [a for a, _ in rates]
        det_rows.append([name] + [f"{a:.2f} (FPR {b:.2f})" for a, b in rates])
        metrics[f"watermark.smollm2.tpr.{name.replace(' ', '_')}"] = rates[-1][0]
        metrics[f"watermark.smollm2.fpr.{name.replace(' ', '_')}"] = rates[-1][1]
    t_det = Table(title="Detection rate at the exact binomial test's 1% level vs generated length",
                  columns=["method"] + [f"{n} tokens" for n in lengths], rows=det_rows,
                  note=("FPR: the same detector on the unwatermarked generations. DiPmark detects on the last "
                        "half of each permutation (gamma = 1/2); KGW on its green list (gamma = 1/2)."))

    # robustness: random substitution of a fraction eps of the generated tokens
    rob_rows = []
    eps_list = [0.0] + list(p["eps"])
    for name, out in gens.items():
        wm = detector_of[name]
        if wm is None:
            continue
        tokens = jnp.concatenate([prompt, out.tokens], axis=1)
        sc = full_mask(out) & gen_only
        cells = []
        for i, eps in enumerate(eps_list):
            att = substitution_attack(jax.random.fold_in(ctx.key, 100 + i), tokens, full_mask(out), eps, v, scored=sc)
            r = detection_rates(wm, att, full_mask(out), lengths=[new], scored=gen_only, level=0.01)
            rate = float(r.rate[0])
            cells.append(f"{rate:.2f} (z {np.median(np.asarray(r.z_score[0])):.1f})")
            metrics[f"watermark.smollm2.robust.{name.replace(' ', '_')}.eps_{eps}"] = rate
        rob_rows.append([name] + cells)
    t_rob = Table(title=f"Detection rate at 1% under random substitution ({new} tokens), median z",
                  columns=["method"] + [f"eps = {e}" for e in eps_list], rows=rob_rows,
                  note="Each substituted token is uniform over the other V - 1 tokens; the prompt is not attacked.")

    figures = []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
        names = list(gens)
        means = [_mean_ci(ppl[n])[0] for n in names]
        halves = [_mean_ci(ppl[n])[1] for n in names]
        ax[0].errorbar(range(len(names)), means, yerr=halves, fmt="o", capsize=4)
        ax[0].set_xticks(range(len(names)))
        ax[0].set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        ax[0].set_ylabel("perplexity under the base model")
        ax[0].set_title("quality (95% CI)")
        for name, ys in curves.items():
            ax[1].plot(lengths, ys, marker="o", label=name)
        ax[1].set_xlabel("generated tokens")
        ax[1].set_ylabel("detection rate at 1% (exact test)")
        ax[1].set_ylim(-0.02, 1.02)
        ax[1].legend(fontsize=7)
        ax[1].set_title("detection vs length")
        fig.tight_layout()
        path = ctx.out_dir / "watermark_smollm2.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        figures.append(path.name)
    except ImportError:
        pass
    src = "SmolLM2-135M-Instruct" if p["model"] != "tiny" else "the tiny random Llama (smoke)"
    return QualityResult(tables=[t_ppl, t_det, t_rob], figures=figures, metrics=metrics,
                         notes=[f"Model: {src}; prompts: English prose from scikit-learn's dataset descriptions "
                                f"(first {p['prompt_tokens']} tokens of each paragraph)."])


register(QualityBenchmark(
    name="watermark.smollm2",
    family=FAMILY,
    run=_quality_run,
    params={"model": "smollm2", "num_prompts": 6, "samples_per_prompt": 2, "prompt_tokens": 24,
            "new_tokens": 32, "context_size": 2, "alphas": [0.3, 0.45, 0.5], "deltas": [1.0, 2.0],
            "lengths": [8, 16, 32], "eps": [0.1, 0.2, 0.3]},
    quick_params={"model": "tiny", "num_prompts": 4, "samples_per_prompt": 2, "prompt_tokens": 8,
                  "new_tokens": 24, "lengths": [8, 16, 24]},
    description="DiPmark vs KGW on SmolLM2: perplexity, detection vs length, robustness to substitution",
))


# ----------------------------------------------------------------------------- reproduction (--reproduce watermark)


def _pooled(cells, metric):
    """Mean over cells of a per-cell estimate and the 95% half-width of that mean (equal-size cells)."""
    vals = [c[metric] for c in cells.values() if metric in c]
    halves = [c[metric.replace("ppl_diff.", "ppl_diff_half.")] for c in cells.values() if metric in c]
    if not vals:
        raise KeyError(metric)
    return float(np.mean(vals)), float(math.sqrt(sum(h * h for h in halves)) / len(halves))


def _watermark_verdict(cells):
    pre = "watermark.smollm2."
    cut = len(pre + "ppl_diff.")
    dip = sorted({k[cut:] for c in cells.values() for k in c if k.startswith(pre + "ppl_diff.DiPmark")})
    kgw = sorted({k[cut:] for c in cells.values() for k in c if k.startswith(pre + "ppl_diff.KGW")})
    texts = sum(c.get(pre + "num_texts", 0.0) for c in cells.values())
    lines = [f"Paired perplexity differences to unwatermarked sampling over {texts:.0f} texts (95% intervals):", ""]
    preserved, degraded = True, False
    for name in dip + kgw:
        d, h = _pooled(cells, pre + "ppl_diff." + name)
        sig = abs(d) > h
        lines.append(f"- {name.replace('_', ' ')}: {d:+.3f} ± {h:.3f}{' (significant)' if sig else ''}")
        if name in dip and sig:
            preserved = False
        if name in kgw and sig and d > 0:
            degraded = True
    tpr = {n: float(np.mean([c[pre + "tpr." + n] for c in cells.values() if pre + "tpr." + n in c])) for n in dip + kgw}
    fpr = {n: float(np.mean([c[pre + "fpr." + n] for c in cells.values() if pre + "fpr." + n in c])) for n in dip + kgw}
    best = max(dip, key=lambda n: tpr[n]) if dip else None
    lines += ["", "Detection at the exact test's 1% level at the longest length: " + ", ".join(
        f"{n.replace('_', ' ')} {tpr[n]:.2f} (FPR {fpr[n]:.2f})" for n in dip + kgw) + "."]
    rob = {}
    if best is not None:
        for c in cells.values():
            for k, v in c.items():
                if k.startswith(pre + f"robust.{best}.eps_"):
                    rob.setdefault(k.rsplit("eps_", 1)[1], []).append(v)
        lines.append(f"Under random substitution, {best.replace('_', ' ')}: " + ", ".join(
            f"eps {e}: {np.mean(v):.2f}" for e, v in sorted(rob.items())) + ".")
    detectable = best is not None and tpr[best] >= 0.9 and fpr[best] <= 0.05
    base = float(np.mean([c[pre + "ppl.no_watermark"] for c in cells.values() if pre + "ppl.no_watermark" in c]))
    worst = max(_pooled(cells, pre + "ppl_diff." + n)[1] for n in dip) if dip else float("inf")
    lines += ["", f"Unwatermarked perplexity {base:.2f}; the widest DiPmark interval is ± {worst:.3f} "
                  f"({worst / base:.1%} of it): the smallest difference this run resolves."]
    if not preserved:
        return "not reproduced", "\n".join(lines + ["", "A DiPmark setting changes perplexity beyond its interval: "
                                                      "the distribution is not preserved at this resolution."])
    if not detectable:
        return "not reproduced", "\n".join(lines + ["", "DiPmark is not reliably detected at the longest length."])
    if degraded:
        return "reproduced", "\n".join(lines + ["", "DiPmark leaves perplexity unchanged within the paired interval "
                                                  "and is detected, while KGW measurably raises perplexity: the "
                                                  "paper's contrast."])
    if worst > 0.1 * base:
        return "not reproduced", "\n".join(lines + ["", "Too few texts: the intervals are wider than a tenth of the "
                                                      "perplexity, so neither preservation nor KGW's cost is tested."])
    return "reproduced in kind", "\n".join(lines + ["", "DiPmark is unbiased within the interval and detected; KGW's "
                                                      "quality cost is not resolved at this size."])


register_reproduction(Reproduction(
    family=FAMILY,
    paper=("Wu, Hu, Guo, Huang, Zhou, Chen, Huang, 'A Resilient and Accessible Distribution-Preserving Watermark '"
           "'for Large Language Models' (DiPmark), ICML 2024"),
    claim=("DiPmark watermarks a language model's samples without changing their distribution (no quality cost, "
           "unlike KGW's green-list bias), while remaining detectable from the text and a key alone and resilient "
           "to moderate token substitution."),
    setup=("SmolLM2-135M-Instruct (the one causal LM that ships offline), temperature 1, no truncation. Prompts: the "
           "first 24 tokens of English paragraphs (scikit-learn's dataset descriptions, 48 prompts x 2 samples a "
           "cell); 128 new tokens per text. Every method (no watermark, DiPmark alpha 0.3 / 0.45 / 0.5, KGW "
           "gamma 1/2 with delta 1 / 2) samples the same prompts with the same sampling keys, so per-text "
           "perplexity differences to unwatermarked sampling are paired. Detection: the exact binomial test at "
           "level 1% on the generated tokens, with the unwatermarked texts as the null (FPR); robustness: a "
           "fraction eps of the generated tokens replaced uniformly at random. Nothing is tuned: alpha, delta and "
           "gamma are the paper's settings."),
    verdict=_watermark_verdict,
))
