"""Effect of the NSW job-training programme on its participants from observational controls (LaLonde data).

The 185 Dehejia-Wahba treated are compared with PSID survey controls; the randomised experiment's
estimate (1,794 USD) is the benchmark, an effect on the treated (ATT), so every estimator here is
asked for the ATT (``estimand="att"``): the treated keep weight 1/n1 and the controls are reweighted
to the treated. Kernel balancing solves that balancing problem; single-data-set CInA reaches the
same weights by training the attention layer without outcomes; zero-shot CInA is a network trained on
unit subsamples of varied sizes of the observational samples (covariates and treatment only) that
gives the weights in one forward pass. Each estimate is printed with the controls' effective sample
size (Kish): how many controls it rests on.

Run: python examples/effects.py [--small] [--out DIR] [--seed N]
"""

from __future__ import annotations

import argparse
import os

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import jaxcore  # noqa: E402

from jaxcore.datasets import load_lalonde
from jaxcore.effects import (CInA, aipw, balancing_ate, cina_weights, difference_in_means, effect_data,  # noqa: E402
                             effective_sample_size, fit_cina, fit_cina_multi, ipw, resample_datasets, weighted_ate)


def _smd(x, t, w):
    """Standardised mean difference of each covariate between the weighted arms."""
    sd = x.std(0) + 1e-12
    m1 = (w * t) @ x / (w * t).sum()
    m0 = (w * (1 - t)) @ x / (w * (1 - t)).sum()
    return (m1 - m0) / sd


def main(small: bool = False, out: str = "results/examples/effects", seed: int = 0) -> None:
    d = load_lalonde("psid3" if small else "psid1")
    data = effect_data(d["x"], d["treatment"], d["outcome"])
    print(f"NSW treated vs {d['source'][-1]} controls: {len(d['outcome'])} units, benchmark {d['benchmark']:.0f} USD")
    results = {
        "difference in means": difference_in_means(data),
        "IPW": ipw(data, estimand="att"),
        "AIPW": aipw(data, estimand="att"),
        "kernel balancing": balancing_ate(data, estimand="att"),
        "CInA, single data set": weighted_ate(
            data, fit_cina(data, num_steps=200 if small else 1000, estimand="att").weights),
    }
    train = resample_datasets(jax.random.key(seed), data, 32 if small else 256, 128 if small else 256,
                              min_units=64 if small else 128, shift=0.5)
    model = CInA(data.num_features, hidden=16 if small else 32, num_heads=2, estimand="att",
                 key=jax.random.key(seed + 1))
    fit = fit_cina_multi(jax.random.key(seed + 2), model, train, num_steps=30 if small else 300, learning_rate=3e-3)
    results["CInA, zero-shot"] = weighted_ate(data, cina_weights(fit.model, data).weights)
    n0 = int((1 - d["treatment"]).sum())
    for name, r in results.items():
        est, se = float(r.estimate[0]), float(r.std_error[0])
        ess = float(effective_sample_size(data, r.weights)[0, 0])
        print(f"{name:24s} {est:7.0f} +- {se:5.0f}   error {est - d['benchmark']:+7.0f}   "
              f"ESS {ess:6.1f} of {n0} controls")
    x, t = d["x"], d["treatment"].astype(float)
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, name in enumerate(["difference in means", "IPW", "kernel balancing", "CInA, zero-shot"]):
        smd = _smd(x, t, np.asarray(results[name].weights[0]))
        ax.barh(np.arange(len(d["names"])) + 0.2 * i - 0.3, np.abs(smd), height=0.2, label=name)
    ax.set_yticks(range(len(d["names"])), d["names"])
    ax.set(xlabel="|standardised mean difference| between the weighted arms", title="Covariate balance")
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "effects_balance.png")
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="PSID-3 controls and short training (CI)")
    parser.add_argument("--out", default="results/examples/effects", help="folder for the figure")
    parser.add_argument("--seed", type=int, default=0, help="PRNG seed (training subsamples, network init)")
    args = parser.parse_args()
    jaxcore.enable_compilation_cache()   # later runs reload the compiled programs from disk
    main(args.small, args.out, args.seed)
