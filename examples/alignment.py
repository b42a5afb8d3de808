"""Does DPO remove SmolLM2's toxic value vectors, or route around them? Lee et al. (ICML 2024) in small.

SmolLM2-135M-Instruct continues provocative prompts (a small set written for jaxcore); the offline
toxicity scorer (alt-profanity-check's linear model as arrays) labels the continuations; a linear
probe on the last residual stream finds a toxicity direction; the MLP value vectors closest to it
are read through the unembedding; DPO on (least, most toxic) continuation pairs fine-tunes the
model; then the script prints toxicity and perplexity of the base model, the probe subtraction,
the DPO model and the DPO model with its top toxic keys scaled by 10 (un-aligned), how much the
value vectors changed (cosine) and how much their keys' activations dropped. A figure shows
toxicity per model and the key activations before and after.

Run::

    python examples/alignment.py            # SmolLM2, 32 pairs, 12 DPO steps: minutes on 2 CPU cores
    python examples/alignment.py --small    # a tiny random Llama with SmolLM2's tokenizer (CI)
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
from jaxcore.alignment import toxicity_study  # noqa: E402
from jaxcore.datasets import english_prose  # noqa: E402


def main(small: bool, out: str, seed: int) -> None:
    model, tok = lm.load_smollm2()
    if small:
        cfg = lm.LlamaConfig.tiny(vocab_size=tok.vocab_size, dim=64, num_layers=2, max_positions=512)
        model = lm.random_llama(jax.random.key(0), cfg)
        sizes = dict(num_train_prompts=8, num_samples=2, new_tokens=6, prompt_tokens=8, num_steps=3, batch_size=2,
                     learning_rate=1e-3, top_k=5, num_unaligned=3, prose_tokens=16)
    else:
        sizes = dict(num_train_prompts=32, num_samples=4, new_tokens=12, num_steps=12, batch_size=4)
    st = toxicity_study(jax.random.key(seed), model, tok, lm.load_toxicity_scorer(), prose=english_prose(),
                        words=lm.profanity_words(), progress=lambda m: print("...", m), **sizes)
    print(f"\n{'model':<16} {'toxicity':>9} {'share>0.5':>10} {'perplexity':>11}")
    for name, e in st.evaluations.items():
        print(f"{name:<16} {e.toxicity:9.4f} {e.toxic_share:10.3f} {e.perplexity:11.2f}")
    print(f"\nprobe: accuracy {float(st.probe.accuracy):.3f}, held-out AUC {st.probe_auc:.3f}; DPO loss "
          f"{float(st.dpo.history.loss[0]):.4f} -> {float(st.dpo.history.loss[-1]):.4f}")
    print("\nvalue vectors closest to the probe (layer.index, cosine, top token pieces | cos after DPO, key act. "
          "on toxic text before -> after)")
    ka = st.key_activations
    for i in range(len(st.ranking.layer)):
        print(f"L{int(st.ranking.layer[i])}.{int(st.ranking.index[i]):<5} {float(st.ranking.cosine[i]):.3f} "
              f"{' '.join(repr(t) for t in st.top_tokens['base'][i][:5]):<60} | {float(st.change.cosine[i]):.5f} "
              f"{ka['base'][0, i]:+.4f} -> {ka['DPO'][0, i]:+.4f}")

    fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
    names = list(st.evaluations)
    ax[0].bar(range(len(names)), [st.evaluations[n].toxicity for n in names], color="tab:red", alpha=0.7)
    ax[0].set_xticks(range(len(names)))
    ax[0].set_xticklabels(names, rotation=20, fontsize=8)
    ax[0].set_ylabel("mean toxicity")
    x = np.arange(len(st.ranking.layer))
    ax[1].bar(x - 0.2, ka["base"][0], width=0.4, label="base")
    ax[1].bar(x + 0.2, ka["DPO"][0], width=0.4, label="DPO")
    ax[1].set_xlabel("value vector (rank by cosine with the probe)")
    ax[1].set_ylabel("key activation on toxic text")
    ax[1].legend()
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    fig.savefig(os.path.join(out, "alignment.png"), dpi=120)
    print("figure:", os.path.join(out, "alignment.png"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="tiny random Llama with SmolLM2's tokenizer (CI)")
    parser.add_argument("--out", default="results/examples/alignment")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    jaxcore.enable_compilation_cache()
    main(args.small, args.out, args.seed)
