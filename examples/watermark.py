"""Can you tell SmolLM2's watermarked text from its own? DiPmark against KGW's soft red list.

SmolLM2-135M-Instruct continues the opening words of English paragraphs from scikit-learn's
dataset descriptions three ways: unwatermarked, with DiPmark (alpha = 1/2: the distribution of
every next token is preserved on average over the key) and with KGW (delta = 2 on a green half of
the vocabulary). The detector sees only the tokens and the secret key: it prints each method's
z-score and exact p-value, the perplexity of the text under the unwatermarked model (DiPmark
should not move it; KGW does), and detection after 20% of the tokens are replaced at random.
The figure shows the z-score growing along the generation.

Run::

    python examples/watermark.py            # SmolLM2, 8 prompts x 64 new tokens; a few minutes on 2 CPU cores
    python examples/watermark.py --small    # a tiny random Llama on the same prompts' token ids (CI)
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
from jaxcore import lm  # noqa: E402
from jaxcore.datasets import english_prose  # noqa: E402
from jaxcore.watermark import KGW, DiPmark, detect, substitution_attack  # noqa: E402


def prompts(tok, vocab, num, length):
    """Left-padded token ids of the first ``length`` tokens of ``num`` English paragraphs."""
    ids = [tok.encode(p)[:length] for p in english_prose()[:num]]
    toks = np.zeros((num, length), np.int32)
    mask = np.zeros((num, length), bool)
    for r, i in enumerate(ids):
        toks[r, length - len(i):] = np.asarray(i) % vocab  # the tiny model's vocabulary is smaller
        mask[r, length - len(i):] = True
    return jnp.asarray(toks), jnp.asarray(mask)


def main(small: bool, out: str, seed: int) -> None:
    num, plen, new = (4, 12, 24) if small else (8, 24, 64)
    _, tok = lm.load_smollm2()
    if small:
        model = lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny(vocab_size=512, dim=64))
    else:
        model, _ = lm.load_smollm2()
    v = model.config.vocab_size
    prompt, pmask = prompts(tok, v, num, plen)
    secret = jax.random.key(seed + 1)  # the watermark key: the detector's only secret
    methods = {"none": None, "DiPmark a=0.5": DiPmark(v, key=secret, alpha=0.5, context_size=2),
               "KGW d=2": KGW(v, key=secret, delta=2.0, context_size=2)}
    detector = {**methods, "none": methods["DiPmark a=0.5"]}
    scored = jnp.concatenate([jnp.zeros_like(pmask), jnp.ones((num, new), bool)], axis=1)
    mask = jnp.concatenate([pmask, jnp.ones((num, new), bool)], axis=1)
    curves = {}
    print(f"{'method':<15} {'z':>6} {'p-value':>10} {'ppl':>7} {'z, 20% substituted':>20}")
    for name, wm in methods.items():
        res = lm.generate(jax.random.key(seed), model, prompt, pmask, max_new_tokens=new, processor=wm)
        text = jnp.concatenate([prompt, res.tokens], axis=1)
        d = detect(detector[name], text, mask, scored=scored)
        ppl = np.exp(-np.asarray(res.model_logprobs).mean(1))
        att = substitution_attack(jax.random.key(seed + 2), text, mask, 0.2, v, scored=scored)
        d_att = detect(detector[name], att, mask, scored=scored)
        print(f"{name:<15} {float(jnp.median(d.z_score)):6.2f} {float(jnp.median(d.p_value)):10.2e} "
              f"{float(np.mean(ppl)):7.2f} {float(jnp.median(d_att.z_score)):20.2f}")
        # the z-score along the generation: detection on the first n generated tokens
        lengths = list(range(4, new + 1, 4))
        curves[name] = [float(jnp.median(detect(detector[name], text, mask, scored=scored & (
            jnp.arange(plen + new)[None] < plen + n)).z_score)) for n in lengths]
        if not small:
            print("   ", repr(tok.decode(res.tokens[0])[:150]))

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, ys in curves.items():
        ax.plot(lengths, ys, marker="o", label=name)
    ax.axhline(2.33, ls="--", c="gray", lw=1)
    ax.set_xlabel("generated tokens scored")
    ax.set_ylabel("median z-score (DiPmark / KGW detector)")
    ax.legend()
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    fig.savefig(os.path.join(out, "watermark.png"), dpi=120)
    print("figure:", os.path.join(out, "watermark.png"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="tiny random Llama, 4 prompts x 24 tokens (CI)")
    parser.add_argument("--out", default="results/examples/watermark")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    jaxcore.enable_compilation_cache()
    main(args.small, args.out, args.seed)
