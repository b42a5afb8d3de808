"""Steer SmolLM2 towards a topic with controlled decoding: CD-Q and CD-FUDGE against best-of-K.

SmolLM2-135M-Instruct continues the opening words of English paragraphs from scikit-learn's dataset
descriptions. A topic reward (the fraction of generated tokens among the single-token words of a
medicine topic) scores 64 base-model samples; a CD-FUDGE value head and a CD-Q head are trained on
the frozen model's hidden states; then fresh continuations are decoded with each at a few strengths
lambda, and best-of-K picks by the reward itself. The script prints reward, KL to the base model and
non-toxicity (1 - P(offensive) under the offline alt-profanity-check scorer) of each, an example
text, and draws the reward-KL frontier.

Run::

    python examples/decoding.py            # SmolLM2, 4 prompts, 16 new tokens; a few minutes on 2 CPU cores
    python examples/decoding.py --small    # a tiny random Llama on the same prompts' token ids (CI)
"""

import argparse
import os

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import jaxcore  # noqa: E402
from jaxcore import decoding as cd  # noqa: E402
from jaxcore import lm  # noqa: E402
from jaxcore.datasets import english_prose  # noqa: E402

MEDICINE = ["cell", "cells", "cancer", "tumor", "tumors", "patient", "patients", "breast", "diagnosis", "medical",
            "clinical", "tissue", "malignant", "benign", "nuclei", "nucleus", "disease", "health", "blood", "doctor",
            "hospital", "biopsy", "needle", "body", "gene", "genes", "protein", "treatment", "surgery", "organ",
            "skin", "mass", "images", "image", "biology", "biological", "life", "human", "brain", "heart"]


def prompts(tok, vocab, num, length):
    """Left-padded token ids of the first ``length`` tokens of ``num`` English paragraphs."""
    ids = [tok.encode(p)[:length] for p in english_prose()[:num]]
    toks = np.zeros((num, length), np.int32)
    mask = np.zeros((num, length), bool)
    for r, i in enumerate(ids):
        toks[r, length - len(i):] = np.asarray(i) % vocab  # the tiny model's vocabulary is smaller
        mask[r, length - len(i):] = True
    return toks, mask


def main(small: bool, out: str, seed: int) -> None:
    num, plen, new, steps = (4, 8, 8, 30) if small else (4, 12, 16, 60)
    lr = 0.03 if small else 2e-3  # Adam moves a unit-norm-feature head by about lr * sqrt(d) per step
    _, tok = lm.load_smollm2()
    if small:
        model = lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny(vocab_size=512, dim=64))
    else:
        model, _ = lm.load_smollm2()
    c = model.config
    ids = cd.keyword_ids(tok, MEDICINE)
    ids = jnp.asarray(ids[ids < c.vocab_size] if not small else np.arange(8, c.vocab_size, 10))
    reward = lambda t, m=None: cd.keyword_reward(t, ids, m)  # noqa: E731
    p0, m0 = prompts(tok, c.vocab_size, num, plen)
    tp, tm = jnp.asarray(np.repeat(p0, 16, 0)), jnp.asarray(np.repeat(m0, 16, 0))
    base = lm.generate(jax.random.key(seed), model, tp, tm, max_new_tokens=new)
    data = cd.rollouts(model, tp, tm, base, reward(base.tokens, base.mask), top_k=32)
    v = cd.fit_fudge(jax.random.key(seed + 1), cd.ValueHead(c.dim), data, num_steps=steps, learning_rate=lr).head
    q = cd.fit_cdq(jax.random.key(seed + 2), cd.QHead(c.dim, c.vocab_size), data, num_steps=steps,
                   learning_rate=lr).head
    scorer = lm.load_toxicity_scorer()
    ep, em = jnp.asarray(np.repeat(p0, 4, 0)), jnp.asarray(np.repeat(m0, 4, 0))
    ek = jax.random.key(seed + 3)
    rows = {}

    def report(name, tokens, mask, kl):
        texts = [tok.decode(t) for t in np.asarray(tokens)] if not small else ["x"] * len(tokens)
        nontox = float(np.mean(cd.non_toxicity(texts, scorer)))
        r = float(reward(tokens, mask).mean())
        rows.setdefault(name.split(" ")[0], []).append((kl, r))
        print(f"{name:<22} {r:8.3f} {kl:9.2f} {nontox:11.3f}   {texts[0][:70]!r}" if not small
              else f"{name:<22} {r:8.3f} {kl:9.2f}")

    print(f"{'method':<22} {'reward':>8} {'KL (nats)':>9} {'non-toxic':>11}   example")
    out0 = lm.generate(ek, model, ep, em, max_new_tokens=new)
    report("base", out0.tokens, out0.mask, 0.0)
    for lam in (10.0, 40.0):
        for name, proc in (("CD-Q", cd.CDQ(q, lam)), ("CD-FUDGE", cd.CDFudge(v, lam, 8))):
            o = lm.generate(ek, model, ep, em, max_new_tokens=new, processor=proc)
            kl = float(jnp.mean(jnp.sum(o.logprobs - o.model_logprobs, axis=1)))
            report(f"{name} lambda={lam:g}", o.tokens, o.mask, kl)
    for k in (2, 4, 8):
        b = cd.best_of_k(jax.random.key(seed + 4), model, ep, em, reward_fn=reward, num_candidates=k,
                         max_new_tokens=new)
        report(f"best-of-{k} (reward)", b.tokens, b.mask, cd.best_of_k_kl(k))

    fig, ax = plt.subplots(figsize=(5, 3.5))
    base_pt = rows.pop("base")[0]
    for name, pts in rows.items():
        xs, ys = zip(*([base_pt] + sorted(pts)))
        ax.plot(xs, ys, marker="o", label=name)
    ax.set_xlabel("KL to the base model (nats; best-of-K: its bound)")
    ax.set_ylabel("topic reward")
    ax.legend()
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    fig.savefig(os.path.join(out, "decoding.png"), dpi=120)
    print("figure:", os.path.join(out, "decoding.png"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="tiny random Llama, 4 prompts x 8 tokens (CI)")
    parser.add_argument("--out", default="results/examples/decoding")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    jaxcore.enable_compilation_cache()
    main(args.small, args.out, args.seed)
