"""How close does MCMC get to the exact posterior over causal graphs? Sachs protein signalling.

On the observational rows of the Sachs et al. (2005) flow-cytometry data (853 cells, shipped in
the ``cdt`` wheel), restricted to five proteins of the Raf-Mek-Erk / Akt-PKA pathway, the BGe
posterior over all 29,281 DAGs is computed exactly by enumeration, then approximated by structure
MCMC (add/delete/reverse moves) and order MCMC. The script prints the total-variation distance
of each approximation to its exact target, the error of its edge marginals and how well the
edge marginals recover the consensus network (AUROC), and plots the exact and sampled edge
marginals with the TV distance against the number of draws.

Run::

    python examples/causal.py           # about 30 s on 2 CPU cores
    python examples/causal.py --small   # four proteins, short chains (CI)
"""

import argparse
import os

import jax
import jax.numpy as jnp
import matplotlib
import matplotlib.ticker
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import jaxcore  # noqa: E402
from jaxcore import causal  # noqa: E402
from jaxcore.datasets import load_sachs  # noqa: E402


def main(small: bool, out: str, seed: int) -> None:
    proteins = ["praf", "pmek", "p44/42", "pakts473"] + ([] if small else ["PKA"])
    num_chains, num_samples = (4, 200) if small else (4, 2000)
    sachs = load_sachs()
    idx = [sachs["names"].index(p) for p in proteins]
    x = np.log(sachs["observational"][:, idx])
    x = ((x - x.mean(0)) / x.std(0)).astype(np.float32)
    truth = sachs["consensus"][np.ix_(idx, idx)]
    d = len(proteins)

    table = causal.bge_local_scores(jnp.asarray(x)) + causal.uniform_prior_table(d)
    dags = causal.enumerate_dags(d)
    exact = {  # structure MCMC targets the uniform DAG prior, order MCMC the order-modular one
        "structure MCMC": causal.exact_posterior(table, dags),
        "order MCMC": causal.exact_posterior(table, dags, log_weights=causal.log_num_orders(dags.parents)),
    }
    key_structure, key_order = jax.random.split(jax.random.key(seed))
    runs = {
        "structure MCMC": causal.structure_mcmc(key_structure, table, num_chains=num_chains,
                                                num_samples=num_samples, thin=10, burn_in=1000),
        "order MCMC": causal.order_mcmc(key_order, table, num_chains=num_chains, num_samples=num_samples,
                                        thin=5, burn_in=500),
    }
    print(f"Sachs, {x.shape[0]} observational cells, proteins {', '.join(proteins)}: "
          f"{dags.parents.shape[0]} DAGs")
    print(f"  exact posterior entropy {float(exact['structure MCMC'].entropy):.2f} nats, "
          f"edge AUROC vs consensus {float(causal.edge_auroc(exact['structure MCMC'].edge_marginals, truth)):.3f}")

    num_draws = np.unique(np.geomspace(10, num_samples, 8).astype(int))
    tv_curves = {}
    for name, res in runs.items():
        p = np.exp(np.asarray(exact[name].log_prob, np.float64))
        p /= p.sum()
        q = causal.dag_distribution(res.samples, dags)
        edges = causal.edge_marginals_from_samples(res.samples)
        err = float(jnp.max(jnp.abs(edges - exact[name].edge_marginals)))
        print(f"  {name:15s} TV to exact {float(causal.total_variation(q, p)):.3f}  "
              f"KL(q || p) {float(causal.kl_divergence(q, p, log_q=exact[name].log_prob)):.3f} nats  "
              f"max |edge error| {err:.3f}  acceptance {float(res.acceptance_rate.mean()):.2f}  "
              f"E-SHD {float(causal.expected_shd(res.samples, truth)):.2f}")
        # The first n draws of every chain (draws are chain-major), as weights: one shape, one compilation.
        draw = np.tile(np.arange(num_samples), num_chains)
        tv_curves[name] = [float(causal.total_variation(causal.dag_distribution(
            causal.make_samples(res.samples.adjacency, (draw < n).astype(np.float32)), dags), p))
            for n in num_draws]

    fig, axes = plt.subplots(1, 4, figsize=(15, 3.8), layout="constrained")
    panels = [("exact (uniform prior)", exact["structure MCMC"].edge_marginals),
              ("structure MCMC", causal.edge_marginals_from_samples(runs["structure MCMC"].samples)),
              ("order MCMC", causal.edge_marginals_from_samples(runs["order MCMC"].samples))]
    for ax, (title, em) in zip(axes[:3], panels):
        im = ax.imshow(np.asarray(em), vmin=0, vmax=1, cmap="viridis")
        ii, jj = np.nonzero(truth)
        ax.scatter(jj, ii, marker="s", s=200, facecolors="none", edgecolors="r")
        ax.set_xticks(range(d), proteins, rotation=60, fontsize=8)
        ax.set_yticks(range(d), proteins, fontsize=8)
        ax.set(title=title, xlabel="child", ylabel="parent")
    fig.colorbar(im, ax=axes[:3], shrink=0.8)
    for name, tv in tv_curves.items():
        axes[3].loglog(num_chains * num_draws, tv, "o-", label=name)
    axes[3].set(xlabel="draws (all chains)", ylabel="TV to exact posterior", title="Convergence")
    axes[3].xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes[3].legend(fontsize=8)
    fig.suptitle(f"Sachs, {d} proteins: posterior edge marginals (red squares: consensus edges, Sachs et al. 2005)",
                 fontsize=10)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "causal_sachs.png")
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="four proteins, short chains (CI)")
    parser.add_argument("--out", default="results/examples/causal", help="folder for the figure")
    parser.add_argument("--seed", type=int, default=0, help="PRNG seed of the chains")
    args = parser.parse_args()
    jaxcore.enable_compilation_cache()   # keep compiled programs on disk (see examples/README.md)
    main(args.small, args.out, args.seed)
