"""causal: Bayesian causal discovery (jaxcore.causal).

Speed: scoring every DAG on d = 5 and 6 nodes (local-score table + one gather
and sum per DAG) against the same algorithm in NumPy/SciPy (same work; float64
NumPy vs float32 jit), and on random subsamples of DAGs against a direct per-DAG
NumPy/SciPy BGe scorer (recomputes d local scores per DAG, no cache) and against
pgmpy's structure-score API (BDeu, discrete data; pgmpy caches local scores
within a call). Those two baselines are timed on the same DAGs and return the
same scores as the kernel, but the kernel builds the whole local-score table
once and gathers, so their ratios include that algorithmic saving (stated in
the baseline notes). Structure/order MCMC
steps per second with chains vmapped; Koivisto-Sood DP edge marginals at
d = 10, 15 (20 in the full config) with the fitted growth exponent.

Quality: the study of Karimi Mamaghan et al. (ICML 2024) on synthetic linear
data (equal / unequal noise variances, non-Gaussian noise; d in {4, 5}; N from
10 to 1000): exact posterior, approximate posteriors, every metric, and the
Spearman rank correlation of each metric with the distance to the exact
posterior, beside the exact posterior's entropy; the Sachs flow-cytometry data
(observational 853 rows, exact posteriors on protein subsets, DP on all 11);
semi-synthetic data from pgmpy's linear-Gaussian and discrete networks.
"""

from __future__ import annotations

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
    Scaling,
    SpeedBenchmark,
    Table,
    register,
    register_reproduction,
)
from jaxcore.causal import (
    DAGSamples,
    bdeu_local_scores,
    bge_local_scores,
    bootstrap_map_dags,
    cpdag_shd,
    dag_distribution,
    dag_log_scores,
    dibs_svi,
    edge_auprc,
    edge_auroc,
    edge_marginals_from_samples,
    enumerate_dags,
    exact_edge_marginals,
    exact_map_dag,
    exact_posterior,
    expected_cpdag_shd,
    expected_edge_f1,
    expected_shd,
    hellinger,
    is_dag,
    kl_divergence,
    make_samples,
    mec_distribution,
    mec_log_posterior,
    mmd_hamming_exact,
    order_mcmc,
    order_modular_prior_table,
    pad_samples,
    parents_to_adjacency,
    predictive_nll,
    random_linear_gaussian_network,
    shd,
    structure_mcmc,
    total_variation,
)
from jaxcore.datasets import (
    DataUnavailableError,
    load_pgmpy_network,
    load_sachs,
    sample_discrete_network,
    sample_linear_gaussian_network,
)

FAMILY = "causal"


# --------------------------------------------------------------------------- shared pieces


def _network_data(rng, d, p, n, setting):
    """A random linear SEM (weights ±U(0.5, 2); equal / unequal variances; gaussian / laplace noise) and its data.

    Both come from the public generators (``causal.random_linear_gaussian_network``,
    ``datasets.causal_data.sample_linear_gaussian_network``), drawing from the one generator ``rng``.
    """
    net = random_linear_gaussian_network(rng, d, p, noise_variances="unequal" if setting == "unequal" else "equal")
    x = sample_linear_gaussian_network(net, n, seed=rng, noise="laplace" if setting == "laplace" else "gaussian")
    return net["adjacency"], x


def _standardize(x, ref=None):
    ref = x if ref is None else ref
    return (x - ref.mean(0)) / ref.std(0)


def _np_compress(parents):
    parents = np.asarray(parents).astype(np.int64)
    j = np.arange(parents.shape[-1])
    return (parents & ((1 << j) - 1)) | ((parents >> (j + 1)) << j)


def _np_bge_tn(x, am=1.0, aw=None):
    n, d = x.shape
    aw = d + 2.0 if aw is None else aw
    t = am * (aw - d - 1) / (am + 1)
    xb = x.mean(0)
    xc = x - xb
    tn = t * np.eye(d) + xc.T @ xc + (n * am / (n + am)) * np.outer(xb, xb)
    return tn, t, am, aw


def _np_bge_local(tn, t, am, aw, n, d, j, pa):
    from scipy.special import gammaln

    l = len(pa)
    a = aw - d + l
    y = list(pa) + [j]
    ld_y = np.linalg.slogdet(tn[np.ix_(y, y)])[1]
    ld_p = np.linalg.slogdet(tn[np.ix_(pa, pa)])[1] if l else 0.0
    return (0.5 * math.log(am / (n + am)) - 0.5 * n * math.log(math.pi) + gammaln((n + a + 1) / 2)
            - gammaln((a + 1) / 2) + (aw - d + 2 * l + 1) / 2 * math.log(t) + (n + a) / 2 * ld_p
            - (n + a + 1) / 2 * ld_y)


def _np_bge_table(x):
    """NumPy/SciPy BGe local-score table, one slogdet pair per (node, parent set)."""
    n, d = x.shape
    tn, t, am, aw = _np_bge_tn(x)
    table = np.empty((d, 1 << (d - 1)))
    for j in range(d):
        others = [i for i in range(d) if i != j]
        for c in range(1 << (d - 1)):
            pa = [others[b] for b in range(d - 1) if (c >> b) & 1]
            table[j, c] = _np_bge_local(tn, t, am, aw, n, d, j, pa)
    return table


# --------------------------------------------------------------------------- speed: scoring DAGs


def _score_dags_bge(data, parents):
    return dag_log_scores(bge_local_scores(data), parents)


def _numpy_table_scores(data, parents):
    table = _np_bge_table(np.asarray(data, np.float64))
    c = _np_compress(parents)
    return table[np.arange(table.shape[0]), c].sum(1)


def _numpy_direct_scores(data, parents):
    """Each DAG scored from scratch: d BGe local scores (two slogdets each) per DAG."""
    x = np.asarray(data, np.float64)
    n, d = x.shape
    tn, t, am, aw = _np_bge_tn(x)
    out = np.empty(len(parents))
    for k, par in enumerate(np.asarray(parents)):
        out[k] = sum(_np_bge_local(tn, t, am, aw, n, d, j, [i for i in range(d) if (par[j] >> i) & 1])
                     for j in range(d))
    return out


def _dag_data(size, seed=0):
    rng = np.random.default_rng(seed)
    _, x = _network_data(rng, size["d"], 0.5, size.get("n", 200), "equal")
    return _standardize(x).astype(np.float32)


def _setup_score_all(size, key):
    x = _dag_data(size)
    dags = enumerate_dags(size["d"])
    return Case(args=(jnp.asarray(x), jnp.asarray(dags.parents, jnp.int32)), work=dags.parents.shape[0], work_unit="DAGs")


def _setup_score_subsample(size, key):
    x = _dag_data(size)
    dags = enumerate_dags(size["d"])
    idx = np.random.default_rng(1).choice(dags.parents.shape[0], size["n_dags"], replace=False)
    return Case(args=(jnp.asarray(x), jnp.asarray(dags.parents[idx], jnp.int32)), work=size["n_dags"], work_unit="DAGs")


register(SpeedBenchmark(
    name="causal.score_all_dags", family=FAMILY,
    kernel=_score_dags_bge, setup=_setup_score_all,
    sizes=[{"d": 5, "n": 200}, {"d": 6, "n": 200}],
    quick_sizes=[{"d": 5, "n": 200}],
    baselines=[Baseline("numpy-table", _numpy_table_scores,
                        note="same algorithm in NumPy/SciPy float64: BGe table (Python loop, 2 slogdets per (node, parent set)) + "
                             "one fancy-index gather and sum over every DAG; kernel: float32 jit")],
    rtol=2e-4, atol=1e-2,
    description="BGe log score of every DAG on d nodes (29281 at d=5, 3781503 at d=6): table + gather + sum",
))

register(SpeedBenchmark(
    name="causal.score_dags_direct", family=FAMILY,
    kernel=_score_dags_bge, setup=_setup_score_subsample,
    sizes=[{"d": 5, "n": 200, "n_dags": 300}, {"d": 6, "n": 200, "n_dags": 300}],
    quick_sizes=[{"d": 5, "n": 200, "n_dags": 100}],
    batch_param="n_dags",
    baselines=[Baseline("numpy-direct", _numpy_direct_scores,
                        note="per-DAG NumPy/SciPy BGe: for each DAG, d local scores from scratch (2 slogdets each, float64), "
                             "no cache; same random subsample of DAGs and same output as the kernel. The kernel instead "
                             "builds the full d*2^(d-1) local-score table once (80 / 192 entries at d = 5 / 6 vs "
                             "1500 / 1800 local scores for 300 DAGs) and gathers: the ratio includes that algorithmic saving")],
    rtol=2e-4, atol=1e-2, target={"numpy-direct": 100.0},
    description="BGe scores of a random subsample of DAGs: same DAGs and outputs for kernel (table + gather) and per-DAG baseline",
))


def _asia_data(d, n=1000):
    net = load_pgmpy_network("asia")
    x = sample_discrete_network(net, n, seed=0)
    return x[:, :d], [net["names"][i] for i in range(d)], tuple(int(a) for a in net["arities"][:d])


def _score_dags_bdeu(data, parents, arities=()):
    return dag_log_scores(bdeu_local_scores(data, arities, equivalent_sample_size=1.0), parents)


def _pgmpy_bdeu(df, state_names, models, arities=()):
    """A fresh pgmpy BDeu scorer per call (its local-score cache starts cold, then fills), every DAG scored."""
    import warnings

    from pgmpy.structure_score import BDeu

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scorer = BDeu(df, equivalent_sample_size=1.0, state_names=state_names)
        return np.array([scorer.score(m) for m in models])


def _setup_bdeu(size, key):
    d = size["d"]
    x, names, arities = _asia_data(d)
    dags = enumerate_dags(d)
    n_all = dags.parents.shape[0]
    n_dags = n_all if not size.get("n_dags") else min(size["n_dags"], n_all)
    idx = np.sort(np.random.default_rng(2).choice(n_all, n_dags, replace=False)) if n_dags < n_all else np.arange(n_all)
    par = dags.parents[idx]
    base = {}
    try:
        import pandas as pd
        from pgmpy.models import DiscreteBayesianNetwork

        df = pd.DataFrame(x, columns=names)
        models = []
        for p in par:
            m = DiscreteBayesianNetwork()
            m.add_nodes_from(names)
            m.add_edges_from([(names[i], names[j]) for j in range(d) for i in range(d) if (int(p[j]) >> i) & 1])
            models.append(m)
        base["pgmpy"] = (df, {n: list(range(a)) for n, a in zip(names, arities)}, models)
    except ImportError:
        pass
    return Case(args=(jnp.asarray(x, jnp.int32), jnp.asarray(par, jnp.int32)), static={"arities": arities},
                baseline_args=base, work=n_dags, work_unit="DAGs")


register(SpeedBenchmark(
    name="causal.score_dags_bdeu", family=FAMILY,
    kernel=_score_dags_bdeu, setup=_setup_bdeu,
    sizes=[{"d": 5, "n_dags": 2000}, {"d": 6, "n_dags": 2000}],
    quick_sizes=[{"d": 4, "n_dags": 200}],
    batch_param="n_dags", zero_sizes=("n_dags",),  # n_dags: 0 scores every DAG
    baselines=[Baseline("pgmpy", _pgmpy_bdeu, requires=["pgmpy", "pandas"],
                        note="fresh pgmpy.structure_score.BDeu per call, .score(model) per DAG (its local-score cache "
                             "fills during the call); both score the same random subsample of n_dags DAGs (n_dags=0: every DAG; "
                             "the full config runs every DAG at d=5 and 20000 at d=6)")],
    rtol=2e-4, atol=1e-2, target={"pgmpy": 100.0},
    description="BDeu scores of DAGs on asia's first d nodes (1000 rows sampled from pgmpy's network) vs pgmpy",
))


# --------------------------------------------------------------------------- speed: MCMC, DP


def _setup_mcmc(size, key):
    table = bge_local_scores(jnp.asarray(_dag_data({"d": size["d"], "n": 200})))
    return Case(args=(key, table), static={"num_chains": size["chains"], "num_steps": size["steps"]},
                work=size["chains"] * size["steps"], work_unit="MCMC steps")


def _structure_kernel(key, table, num_chains=4, num_steps=1000):
    """The public sampler from empty graphs, no burn-in, a draw kept every 10 steps."""
    return structure_mcmc(key, table, num_chains=num_chains, num_samples=num_steps // 10, thin=10,
                          burn_in=0).samples.adjacency


def _order_kernel(key, table, num_chains=4, num_steps=1000):
    return order_mcmc(key, table, num_chains=num_chains, num_samples=num_steps // 10, thin=10,
                      burn_in=0).samples.adjacency


register(SpeedBenchmark(
    name="causal.structure_mcmc", family=FAMILY,
    kernel=_structure_kernel, setup=_setup_mcmc,
    sizes=[{"d": 5, "chains": 16, "steps": 5000}, {"d": 10, "chains": 16, "steps": 5000}],
    quick_sizes=[{"d": 5, "chains": 4, "steps": 1000}],
    scaling=Scaling("chains", [1, 4, 16, 64]),
    description="structure MCMC (add/delete/reverse, BGe table) steps/s, lax.scan chains vmapped over chains",
))

register(SpeedBenchmark(
    name="causal.order_mcmc", family=FAMILY,
    kernel=_order_kernel, setup=_setup_mcmc,
    # one default size: each size is a separate ~10 s CPU compile on 2 cores (d = 5 is in the full config)
    sizes=[{"d": 10, "chains": 16, "steps": 1000}],
    quick_sizes=[{"d": 5, "chains": 4, "steps": 1000}],
    description="order MCMC steps/s (one exact DAG draw per 10 steps), chains vmapped",
))


def _setup_dp(size, key):
    d = size["d"]
    table = bge_local_scores(jnp.asarray(_dag_data({"d": d, "n": 200})), max_parents=size.get("k", 3))
    table = table + order_modular_prior_table(d)
    table.table.block_until_ready()
    return Case(args=(table,), work=float(d * d * 2**d), work_unit="d^2 2^d")


def _dp_kernel(table):
    return exact_edge_marginals(table).edge_marginals


register(SpeedBenchmark(
    name="causal.dp_edge_marginals", family=FAMILY,
    kernel=_dp_kernel, setup=_setup_dp,
    sizes=[{"d": 10, "k": 3}, {"d": 15, "k": 3}],
    quick_sizes=[{"d": 8, "k": 3}],
    scaling=Scaling("d", [8, 10, 12, 14, 16, 18, 20]),
    description="Koivisto-Sood exact edge marginals (in-degree <= k), O(d^2 2^d) log-space DP",
))


# --------------------------------------------------------------------------- quality: shared evaluation

METRICS = ("kl_dag", "tv_dag", "hellinger_dag", "kl_mec", "tv_mec", "e_shd", "e_cpdag_shd", "edge_f1",
           "auroc", "auprc", "mmd", "pred_nll")
# metrics that measure recovery of the true graph / data fit, correlated with the distance (tv_dag)
RANKED = ("e_shd", "e_cpdag_shd", "edge_f1", "auroc", "auprc", "mmd", "pred_nll", "kl_mec")


def _edge_independent(rng, edge_probs, n):
    """Mean-field approximation: independent Bernoulli edges with the exact marginals, cyclic draws rejected."""
    d = edge_probs.shape[0]
    draws = (rng.random((4 * n, d, d)) < np.asarray(edge_probs)[None]).astype(np.int32)
    ok = np.asarray(is_dag(draws))
    keep = draws[ok][:n]
    if keep.shape[0] == 0:
        keep = np.zeros((1, d, d), np.int32)
    return make_samples(keep)


PAD = 2048  # every approximation is padded to PAD weighted DAGs (zero weights) so metrics compile once


def _approximations(key, table, x, post, rng, quick, dibs=False, bootstrap=True):
    """Five approximations of different quality; one compile of each sampler per d."""
    k1, k3, k4, k5 = jax.random.split(key, 4)
    n_per_chain = 250 if quick else 500
    s = structure_mcmc(k1, table, num_chains=4, num_samples=n_per_chain, thin=10, burn_in=0).samples
    adj = s.adjacency.reshape(4, n_per_chain, *s.adjacency.shape[1:])
    out = {
        # the first 20 draws of one chain from the empty graph: an unconverged run
        "struct-MCMC short": make_samples(adj[0, :20]),
        "struct-MCMC long": make_samples(adj[:, n_per_chain // 5:].reshape(-1, *adj.shape[2:])),
        "order-MCMC": order_mcmc(k3, table, num_chains=4, num_samples=100, thin=5, burn_in=50).samples,
        "edge-independent": _edge_independent(rng, post.edge_marginals, 200),
    }
    if bootstrap:  # compiles once per data shape (N, d)
        out["bootstrap MAP"] = bootstrap_map_dags(k4, x, num_bootstrap=30).samples
    if dibs:
        out["numpyro DiBS+ SVI"] = dibs_svi(k5, x, num_steps=300 if quick else 1500, num_particles=256).samples
    return out


def _pad_host(samples, num_samples):
    """``pad_samples`` done in NumPy: the same zero-weight empty graphs, without one padding program per draw count."""
    a, w = np.asarray(samples.adjacency), np.asarray(samples.weights)
    k = num_samples - a.shape[0]
    if k < 0:
        return pad_samples(samples, num_samples)  # its error
    return DAGSamples(jnp.asarray(np.concatenate([a, np.zeros((k,) + a.shape[1:], a.dtype)])),
                      jnp.asarray(np.concatenate([w, np.zeros((k,), w.dtype)])))


def _evaluate(samples, post, dags, truth, x_train, x_test, log_pm=None):
    samples = _pad_host(samples, PAD)
    n_true = int(np.asarray(truth).sum())  # host count: no eager reduction / comparison programs
    log_pm = mec_log_posterior(post.log_prob, dags) if log_pm is None else log_pm
    p = jnp.exp(post.log_prob)
    q = dag_distribution(samples, dags)
    pm, qm = post.mec_prob, mec_distribution(q, dags)
    edge_q = edge_marginals_from_samples(samples)
    f1 = expected_edge_f1(samples, truth)
    out = {
        "kl_dag": kl_divergence(q, p, log_q=post.log_prob), "tv_dag": total_variation(q, p), "hellinger_dag": hellinger(q, p),
        "kl_mec": kl_divergence(qm, pm, log_q=log_pm), "tv_mec": total_variation(qm, pm),
        "e_shd": expected_shd(samples, truth), "e_cpdag_shd": expected_cpdag_shd(samples, truth),
        "edge_f1": f1["f1"],
        "auroc": edge_auroc(edge_q, truth) if 0 < n_true < truth.shape[0] * (truth.shape[0] - 1) else np.nan,
        "auprc": edge_auprc(edge_q, truth) if n_true > 0 else np.nan,
        "mmd": mmd_hamming_exact(samples, post.edge_marginals),
        "pred_nll": predictive_nll(samples, x_train, x_test),
    }
    return {k: float(v) for k, v in out.items()}


def _spearman(a, b):
    from scipy.stats import spearmanr

    a, b = np.asarray(a, float), np.asarray(b, float)
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3 or np.ptp(a[ok]) == 0 or np.ptp(b[ok]) == 0:
        return float("nan")
    return float(spearmanr(a[ok], b[ok]).statistic)


def _fmt(v, nd=3):
    """Rounded cell; None (rendered "-") where a metric is undefined, never the string "nan"."""
    return None if v is None or not np.isfinite(v) else round(float(v), nd)


# --------------------------------------------------------------------------- quality: the study


def _run_study(ctx):
    P = ctx.params
    records = []
    key = ctx.key
    for d in P["ds"]:
        dags = enumerate_dags(d)
        for setting in P["settings"]:
            for n in P["ns"]:
                for seed in range(P["seeds"]):
                    ctx.progress(f"study d={d} {setting} N={n} seed={seed}")
                    rng = np.random.default_rng(1000 * d + 100 * seed + n)
                    truth, raw = _network_data(rng, d, P["edge_p"], n + P["n_test"], setting)
                    x = _standardize(raw[:n], raw[:n]).astype(np.float32)
                    xt = _standardize(raw[n:], raw[:n]).astype(np.float32)
                    table = bge_local_scores(x)
                    post = exact_posterior(table, dags)
                    key, sub = jax.random.split(key)
                    log_pm = mec_log_posterior(post.log_prob, dags)
                    for method, s in _approximations(sub, table, x, post, rng, ctx.quick, P.get("dibs", False),
                                                      P.get("bootstrap", False)).items():
                        m = _evaluate(s, post, dags, jnp.asarray(truth), x, xt, log_pm)
                        m.update(d=d, setting=setting, n=n, seed=seed, method=method,
                                 entropy=float(post.entropy), mec_entropy=float(post.mec_entropy))
                        records.append(m)
    # rank correlations per (d, setting, N), pooled over seeds x methods
    rows, corr = [], {}
    for d in P["ds"]:
        for setting in P["settings"]:
            for n in P["ns"]:
                g = [r for r in records if r["d"] == d and r["setting"] == setting and r["n"] == n]
                ent = np.mean([r["entropy"] for r in g if r["method"] == "struct-MCMC long"])
                rho = {m: _spearman([r[m] for r in g], [r["tv_dag"] for r in g]) for m in RANKED}
                corr[(d, setting, n)] = rho
                rows.append([d, setting, n, round(ent, 2)] + [_fmt(rho[m], 2) for m in RANKED])
    t1 = Table(
        title="Spearman rank correlation of each metric with TV(q, exact posterior) over DAGs",
        columns=["d", "noise", "N", "H[p(G|D)] (nats)"] + list(RANKED),
        rows=rows,
        note=(f"{P['seeds']} seeds x the approximations per row (struct-MCMC short = first 20 draws of one chain, struct-MCMC long, "
              "order-MCMC (order-modular target), edge-independent = exact marginals with independent edges; "
              "bootstrap MAP and numpyro DiBS+ SVI when the params bootstrap / dibs are true); BGe score, uniform DAG prior; data standardised; E-SHD/E-CPDAG-SHD vs the true DAG. "
              "A good proxy for closeness to the exact posterior would have |rho| near 1 (positive for "
              "losses, negative for F1/AUROC/AUPRC)."),
    )
    mrows = []
    for method in dict.fromkeys(r["method"] for r in records):
        g = [r for r in records if r["method"] == method]
        mrows.append([method] + [(float(np.nanmean([r[m] for r in g])), float(np.nanstd([r[m] for r in g])))
                                 for m in ("tv_dag", "kl_dag", "kl_mec", "e_shd", "edge_f1", "auroc", "mmd", "pred_nll")])
    t2 = Table(title="Approximate posteriors: mean ± std over all study settings",
               columns=["method", "TV dag", "KL(q||p) dag", "KL mec", "E-SHD", "edge F1", "AUROC", "MMD", "pred NLL"],
               rows=mrows)
    figs = []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(P["settings"]) + 1, figsize=(4.2 * (len(P["settings"]) + 1), 3.6))
        for ax, setting in zip(axes, P["settings"]):
            for m in ("e_shd", "edge_f1", "auroc", "mmd", "pred_nll"):
                ys = [np.nanmean([corr[(d, setting, n)][m] for d in P["ds"]]) for n in P["ns"]]
                ax.plot(P["ns"], ys, marker="o", label=m)
            ax.set_xscale("log")
            ax.axhline(0, color="k", lw=0.5)
            ax.set_title(f"noise: {setting}")
            ax.set_xlabel("N")
            ax.set_ylabel("Spearman rho with TV")
        axes[0].legend(fontsize=7)
        ax = axes[-1]
        for setting in P["settings"]:
            for d in P["ds"]:
                ys = [np.mean([r["entropy"] for r in records if r["d"] == d and r["setting"] == setting
                               and r["n"] == n and r["method"] == "struct-MCMC long"]) for n in P["ns"]]
                ax.plot(P["ns"], ys, marker="o", label=f"{setting} d={d}")
        ax.set_xscale("log")
        ax.set_xlabel("N")
        ax.set_ylabel("entropy of exact posterior (nats)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = ctx.out_dir / "causal_study.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        figs.append(path.name)
    except ImportError:
        pass
    metrics = {}
    for (d, setting, n), rho in corr.items():
        for m in RANKED:
            metrics[f"causal.study.rho_{m}.d{d}.{setting}.N{n}"] = rho[m]
        g = [r for r in records if r["d"] == d and r["setting"] == setting and r["n"] == n]
        metrics[f"causal.study.points.d{d}.{setting}.N{n}"] = float(len(g))
        metrics[f"causal.study.entropy.d{d}.{setting}.N{n}"] = float(np.mean([r["entropy"] for r in g]))
    for r in mrows:
        metrics[f"causal.study.tv_dag.{r[0]}"] = r[1][0]
    return QualityResult(tables=[t1, t2], figures=figs, metrics=metrics)


register(QualityBenchmark(
    name="causal.study", family=FAMILY, run=_run_study,
    # default: d = 5 only (its compilations are shared with the Sachs / pgmpy-network runs), one seed:
    # ~3.5 s CPU per data set warm on 2 cores; the full config adds d = 4, more N and seeds, bootstrap, DiBS
    params={"ds": [5], "settings": ["equal", "unequal", "laplace"], "ns": [10, 100, 1000], "seeds": 1,
            "edge_p": 0.5, "n_test": 200, "dibs": False, "bootstrap": False},
    quick_params={"ds": [4], "settings": ["equal"], "ns": [100], "seeds": 1},
    description="Karimi Mamaghan et al. (ICML 2024) study: metrics vs distance to the exact posterior, with entropy",
))


# --------------------------------------------------------------------------- quality: Sachs


def _methods_on(key, x, truth, rng, quick, xt, dibs=False):
    """Exact posterior + approximations + metrics on one data set (d <= 6); rows per method."""
    d = x.shape[1]
    dags = enumerate_dags(d)
    table = bge_local_scores(jnp.asarray(x))
    post = exact_posterior(table, dags)
    log_pm = mec_log_posterior(post.log_prob, dags)
    truth = jnp.asarray(truth)
    results = {}
    # argmax, edge count and dtype casts on the host (same first-maximum index): no eager programs
    imap = int(np.argmax(np.asarray(post.log_prob)))
    map_adj = parents_to_adjacency(jnp.asarray(dags.parents[imap].astype(np.int32)))
    n_true = int(np.asarray(truth).sum())
    has_edges = 0 < n_true < d * (d - 1)
    row = {
        "auroc": float(edge_auroc(post.edge_marginals, truth)) if has_edges else np.nan,
        "auprc": float(edge_auprc(post.edge_marginals, truth)) if n_true else np.nan,
        "tv_dag": 0.0, "kl_mec": 0.0, "mmd": 0.0,
    }
    if d <= 5:  # expectations over every DAG (3.8M CPDAGs at d = 6 would dominate the run)
        exact = DAGSamples(parents_to_adjacency(jnp.asarray(dags.parents.astype(np.int32))), jnp.exp(post.log_prob))
        row.update(e_shd=float(expected_shd(exact, truth)), e_cpdag_shd=float(expected_cpdag_shd(exact, truth)),
                   edge_f1=float(expected_edge_f1(exact, truth)["f1"]), pred_nll=float(predictive_nll(exact, x, xt)))
    results["exact posterior"] = row
    results["MAP DAG"] = {"e_shd": float(shd(map_adj, truth)), "e_cpdag_shd": float(cpdag_shd(map_adj, truth))}
    for method, s in _approximations(key, table, x, post, rng, quick, dibs).items():
        results[method] = _evaluate(s, post, dags, truth, x, xt, log_pm)
    return post, results


def _run_sachs(ctx):
    P = ctx.params
    try:
        s = load_sachs()
    except DataUnavailableError as e:
        return QualityResult(notes=[f"Sachs data unavailable: {e}"])
    names = s["names"]
    obs = np.log(s["observational"])
    rng = np.random.default_rng(0)
    perm = rng.permutation(obs.shape[0])
    n_tr = int(0.8 * obs.shape[0])
    tr, te = obs[perm[:n_tr]], obs[perm[n_tr:]]
    notes = [f"cdt 0.6.0 cyto_full_data.csv: {s['data'].shape[0]} rows; observational block = first 853 rows "
             f"(mean-shift change point detected at row {s['change_point']}); log-transformed, standardised; "
             f"{n_tr} train / {obs.shape[0] - n_tr} held-out rows for predictive NLL. Truth: the 17-edge consensus DAG "
             "(bnlearn/pgmpy sachs.bif); cdt's own cyto_full_target.csv has 18 edges and the cycle plcg->PIP2->PIP3->plcg."]
    rows, metrics = [], {}
    key = ctx.key
    for sub in P["subsets"]:
        idx = [names.index(n) for n in sub]
        ctx.progress(f"sachs exact posterior on {sub}")
        x = _standardize(tr[:, idx]).astype(np.float32)
        xt = _standardize(te[:, idx], tr[:, idx]).astype(np.float32)
        truth = s["consensus"][np.ix_(idx, idx)]
        key, sub_key = jax.random.split(key)
        post, res = _methods_on(sub_key, x, truth, rng, ctx.quick, xt, dibs=P.get("dibs", False))
        label = ",".join(sub)
        for method, r in res.items():
            rows.append([label, len(sub), round(float(post.entropy), 2), method]
                        + [_fmt(r.get(m, np.nan)) for m in ("tv_dag", "kl_mec", "e_shd", "e_cpdag_shd", "edge_f1",
                                                             "auroc", "auprc", "mmd", "pred_nll")])
            if np.isfinite(r.get("tv_dag", np.nan)):
                metrics[f"causal.sachs.d{len(sub)}.{method}.tv_dag"] = float(r["tv_dag"])
    t1 = Table(title="Sachs (observational): exact posterior over DAGs on protein subsets vs approximations",
               columns=["proteins", "d", "H[p] (nats)", "method", "TV dag", "KL mec", "E-SHD", "E-CPDAG-SHD",
                        "edge F1", "AUROC", "AUPRC", "MMD", "pred NLL"],
               rows=rows, note="BGe (alpha_mu = 1, alpha_w = d + 2), uniform DAG prior; graph metrics vs the "
                               "consensus subgraph induced on the subset. 'exact posterior' row: expectations over "
                               "every DAG; its E-SHD, E-CPDAG-SHD, edge F1 and pred NLL are left blank ('-') at d = 6 "
                               "because those expectations need a CPDAG / a predictive density for each of the 3,781,503 "
                               "DAGs, which would dominate the run (they are computed at d <= 5); TV/KL/MMD are 0 by "
                               "definition. 'MAP DAG': the single best DAG (distribution metrics undefined, shown as '-'). "
                               "'-' in AUROC/AUPRC: the induced true subgraph has no edge (undefined).")
    ctx.progress("sachs DP edge marginals on all 11 proteins")
    x11 = _standardize(obs).astype(np.float32)
    table = bge_local_scores(jnp.asarray(x11), max_parents=P["max_parents"]) + order_modular_prior_table(11)
    t0 = time.perf_counter()
    dp = exact_edge_marginals(table)
    em = np.asarray(dp.edge_marginals)
    dp_s = time.perf_counter() - t0
    rows2 = []
    for tname in ("consensus", "cdt_target"):
        t = s[tname]
        und = ((t + t.T) > 0).astype(int)
        emu = em + em.T
        rows2.append([tname, int(t.sum()), _fmt(float(edge_auroc(em, t))), _fmt(float(edge_auprc(em, t))),
                      _fmt(float(edge_auroc(emu, und))), _fmt(float(edge_auprc(emu, und)))])
        metrics[f"causal.sachs.dp11.auroc_{tname}"] = float(edge_auroc(em, t))
    t2 = Table(title="Sachs, all 11 proteins: exact edge marginals by DP (order-modular prior, in-degree <= "
                     f"{P['max_parents']}) as edge classifiers",
               columns=["truth", "edges", "AUROC directed", "AUPRC directed", "AUROC skeleton", "AUPRC skeleton"],
               rows=rows2, note=f"853 observational rows, BGe; DP wall time {dp_s:.2f} s (first call in this process).")
    figs = []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 5.2))
        im = ax.imshow(em, cmap="viridis", vmin=0, vmax=1)
        ii, jj = np.nonzero(s["consensus"])
        ax.scatter(jj, ii, marker="s", s=80, facecolors="none", edgecolors="r", label="consensus edge")
        ax.set_xticks(range(11), names, rotation=90, fontsize=7)
        ax.set_yticks(range(11), names, fontsize=7)
        ax.set_xlabel("child")
        ax.set_ylabel("parent")
        ax.set_title("Sachs: DP posterior edge marginals P(i -> j)")
        fig.colorbar(im, ax=ax)
        ax.legend(loc="upper right", fontsize=7)
        fig.tight_layout()
        path = ctx.out_dir / "causal_sachs_edges.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        figs.append(path.name)
    except ImportError:
        pass
    return QualityResult(tables=[t1, t2], figures=figs, metrics=metrics, notes=notes)


register(QualityBenchmark(
    name="causal.sachs", family=FAMILY, run=_run_sachs,
    params={"subsets": [["praf", "pmek", "p44/42", "pakts473", "PKA"],
                        ["plcg", "PIP2", "PIP3", "PKC", "praf", "pmek"]], "max_parents": 3, "dibs": False},
    quick_params={"subsets": [["praf", "pmek", "p44/42", "pakts473"]], "max_parents": 2, "dibs": False},
    description="Sachs flow cytometry (cdt): exact posteriors on protein subsets, DP edge marginals on all 11",
    timed=True,  # its tables report wall-clock times: runs alone
))


# --------------------------------------------------------------------------- quality: pgmpy networks


def _connected_subset(adj, k):
    und = (adj + adj.T) > 0
    start = int(np.argmax(und.sum(1)))
    chosen, frontier = [start], [start]
    while frontier and len(chosen) < k:
        nxt = []
        for v in frontier:
            for u in np.nonzero(und[v])[0]:
                if u not in chosen and len(chosen) < k:
                    chosen.append(int(u))
                    nxt.append(int(u))
        frontier = nxt
    return sorted(chosen)


def _run_networks(ctx):
    P = ctx.params
    rows, rows2, metrics, notes = [], [], {}, []
    key = ctx.key
    rng = np.random.default_rng(0)
    for name in P["gaussian"]:
        try:
            net = load_pgmpy_network(name)
        except DataUnavailableError as e:
            notes.append(f"{name}: {e}")
            continue
        idx = _connected_subset(net["adjacency"], P["d"])
        sub = {"kind": "gaussian", "adjacency": net["adjacency"][np.ix_(idx, idx)],
               "weights": net["weights"][np.ix_(idx, idx)], "intercept": net["intercept"][idx],
               "variance": net["variance"][idx]}
        for n in P["ns"]:
            ctx.progress(f"{name} sub-network d={P['d']} N={n}")
            raw = sample_linear_gaussian_network(sub, n + 200, seed=n)
            x = _standardize(raw[:n]).astype(np.float32)
            xt = _standardize(raw[n:], raw[:n]).astype(np.float32)
            key, k = jax.random.split(key)
            post, res = _methods_on(k, x, sub["adjacency"], rng, ctx.quick, xt)
            for method, r in res.items():
                rows.append([name, ",".join(net["names"][i] for i in idx), n, round(float(post.entropy), 2), method]
                            + [_fmt(r.get(m, np.nan)) for m in ("tv_dag", "kl_mec", "e_shd", "e_cpdag_shd",
                                                                 "edge_f1", "auroc", "mmd")])
                if np.isfinite(r.get("tv_dag", np.nan)):
                    metrics[f"causal.networks.{name}.N{n}.{method}.tv_dag"] = float(r["tv_dag"])
    t1 = Table(title=f"pgmpy linear-Gaussian networks: induced {P['d']}-node sub-networks, exact posterior vs approximations",
               columns=["network", "nodes", "N", "H[p] (nats)", "method", "TV dag", "KL mec", "E-SHD", "E-CPDAG-SHD",
                        "edge F1", "AUROC", "MMD"],
               rows=rows, note="Semi-synthetic: data sampled from the sub-network's own linear equations and noise "
                               "variances as shipped in pgmpy's JSON; BGe, uniform DAG prior.")
    for name in P["discrete"]:
        try:
            net = load_pgmpy_network(name)
        except DataUnavailableError as e:
            notes.append(f"{name}: {e}")
            continue
        d = len(net["names"])
        k = P["max_parents_large"] if d > 12 else P["max_parents"]
        ctx.progress(f"{name} (d={d}) BDeu + DP, in-degree <= {k}")
        x = sample_discrete_network(net, P["n_discrete"], seed=1)
        table = bdeu_local_scores(jnp.asarray(x), tuple(int(a) for a in net["arities"]), equivalent_sample_size=1.0,
                                  max_parents=k)
        t0 = time.perf_counter()
        dp = exact_edge_marginals(table + order_modular_prior_table(d))
        em = np.asarray(dp.edge_marginals)
        parents, _ = exact_map_dag(table)
        map_adj = parents_to_adjacency(parents)
        secs = time.perf_counter() - t0
        truth = jnp.asarray(net["adjacency"])
        rows2.append([name, d, int(net["adjacency"].sum()), k, P["n_discrete"], _fmt(float(edge_auroc(em, truth))),
                      _fmt(float(edge_auprc(em, truth))), int(shd(map_adj, truth)), int(cpdag_shd(map_adj, truth)),
                      round(secs, 2)])
        metrics[f"causal.networks.{name}.dp_auroc"] = float(edge_auroc(em, truth))
    t2 = Table(title="pgmpy discrete networks: DP edge marginals (BDeu, ess = 1) and the exact MAP DAG",
               columns=["network", "d", "edges", "max parents", "N", "AUROC", "AUPRC", "MAP SHD", "MAP CPDAG-SHD",
                        "seconds"],
               rows=rows2, note="Semi-synthetic: rows sampled ancestrally from the network's CPDs.")
    return QualityResult(tables=[t1, t2], metrics=metrics, notes=notes)


register(QualityBenchmark(
    name="causal.networks", family=FAMILY, run=_run_networks,
    params={"gaussian": ["ecoli70", "magic-niab"], "d": 5, "ns": [30, 300], "discrete": ["asia", "sachs"],
            "n_discrete": 1000, "max_parents": 3, "max_parents_large": 2},
    quick_params={"gaussian": ["ecoli70"], "d": 4, "ns": [100], "discrete": ["asia"], "max_parents": 2},
    description="semi-synthetic data from pgmpy's linear-Gaussian (exact posterior) and discrete (DP) networks",
    timed=True,  # its tables report wall-clock times: runs alone
))


# --------------------------------------------------------------------------- reproduction verdict

#: metrics against the true graph (what papers report), and metrics against the exact posterior / held-out data
_TRUTH_METRICS = ("e_shd", "e_cpdag_shd", "edge_f1", "auroc", "auprc")
_OTHER_METRICS = ("mmd", "kl_mec", "pred_nll")
_HIGHER_BETTER = ("edge_f1", "auroc", "auprc")
_STRONG = 0.7


def _study_groups(cells):
    """{(d, setting, N): {"entropy": H, "points": k, metric: sign-adjusted rho}} from the cells' metrics."""
    out = {}
    for m in cells.values():
        for k, v in m.items():
            if not k.startswith("causal.study."):
                continue
            parts = k.split(".")
            if len(parts) != 6:
                continue
            what, d, setting, n = parts[2], parts[3], parts[4], parts[5]
            g = out.setdefault((int(d[1:]), setting, int(n[1:])), {})
            if what.startswith("rho_"):
                name = what[4:]
                g[name] = -v if name in _HIGHER_BETTER else v
            elif what in ("entropy", "points"):
                g[what] = v
    return out


def _study_verdict(cells):
    """Weak correlation of the true-graph metrics with the distance to the exact posterior, worst at small N."""
    groups = _study_groups(cells)
    groups = {k: g for k, g in groups.items() if "entropy" in g}
    if not groups:
        return "incomplete", "No study cell finished."
    ns = sorted({k[2] for k in groups})
    lines = ["Spearman rho of each metric with TV(q, exact posterior), sign-adjusted so that +1 is a perfect proxy "
             "(F1 / AUROC / AUPRC negated); per N, the mean over the (d, noise) groups with a 95% interval "
             f"(t over groups); 'strong' means >= {_STRONG}.", "",
             "| N | groups | points per group | entropy (nats) | " + " | ".join(_TRUTH_METRICS + _OTHER_METRICS)
             + " | true-graph metrics strong |", "|---|---|---|---|" + "---|" * (len(_TRUTH_METRICS) + len(_OTHER_METRICS))
             + "---|"]
    from scipy.stats import spearmanr, t as student_t

    mean_truth, n_strong = {}, {}
    for n in ns:
        gs = [g for k, g in groups.items() if k[2] == n]
        cellv, means = [], {}
        for metric in _TRUTH_METRICS + _OTHER_METRICS:
            v = np.asarray([g.get(metric, np.nan) for g in gs], float)
            v = v[np.isfinite(v)]
            if v.size == 0:
                cellv.append("-")
                continue
            means[metric] = float(v.mean())
            half = float(student_t.ppf(0.975, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else float("nan")
            cellv.append(f"{v.mean():.2f} ± {half:.2f}")
        mean_truth[n] = float(np.mean([means[x] for x in _TRUTH_METRICS if x in means]))
        n_strong[n] = sum(means.get(x, -1) >= _STRONG for x in _TRUTH_METRICS)
        ent = np.mean([g["entropy"] for g in gs])
        pts = int(np.median([g.get("points", np.nan) for g in gs]))
        lines.append(f"| {n} | {len(gs)} | {pts} | {ent:.2f} | " + " | ".join(cellv)
                     + f" | {n_strong[n]} of {len(_TRUTH_METRICS)} |")
    # across every group: does the proxy quality fall as the exact posterior's entropy rises?
    ents = [g["entropy"] for g in groups.values()]
    qual = [np.nanmean([g.get(x, np.nan) for x in _TRUTH_METRICS]) for g in groups.values()]
    rho_ent = float(spearmanr(ents, qual).statistic) if len(ents) >= 3 else float("nan")
    lines += ["", f"Across the {len(groups)} (d, noise, N) groups, the Spearman correlation between the exact "
                  f"posterior's entropy and the mean sign-adjusted rho of the true-graph metrics is {rho_ent:.2f} "
                  "(negative: the metrics track the posterior worse where it is more uncertain)."]
    small, large = ns[: max(1, len(ns) // 2)], ns[len(ns) // 2 + len(ns) % 2:] or ns[-1:]
    # paired over (d, noise): the true-graph metrics' mean rho at the larger half of N minus the smaller half
    pairs = []
    for d, setting in sorted({k[:2] for k in groups}):
        def avg(which):
            v = [np.nanmean([groups[(d, setting, n)].get(x, np.nan) for x in _TRUTH_METRICS])
                 for n in which if (d, setting, n) in groups]
            return float(np.mean(v)) if v else float("nan")
        pairs.append(avg(large) - avg(small))
    pairs = np.asarray([x for x in pairs if np.isfinite(x)])
    if pairs.size > 1:
        half = float(student_t.ppf(0.975, pairs.size - 1) * pairs.std(ddof=1) / np.sqrt(pairs.size))
        lines += ["", f"Paired over the {pairs.size} (d, noise) settings, the true-graph metrics' mean rho is higher at "
                      f"N in {large} than at N in {small} by {pairs.mean():+.2f} (95% t interval "
                      f"[{pairs.mean() - half:+.2f}, {pairs.mean() + half:+.2f}])."]
    text = "\n".join(lines)
    weak_small = all(n_strong[n] <= len(_TRUTH_METRICS) // 2 for n in small)
    worse_small = np.mean([mean_truth[n] for n in small]) < np.mean([mean_truth[n] for n in large])
    if weak_small and worse_small and rho_ent < 0:
        return "reproduced", text + (
            f"\n\nAt N in {small} at most {max(n_strong[n] for n in small)} of the five true-graph metrics reach a "
            f"strong correlation (mean "
            f"sign-adjusted rho {np.mean([mean_truth[n] for n in small]):.2f}, against "
            f"{np.mean([mean_truth[n] for n in large]):.2f} at N in {large}), and the correlation falls as the exact "
            "posterior's entropy rises: the paper's finding."
            + (" The weak correlations are the clear part; the dependence on N is a trend whose paired interval "
               "includes zero at this number of seeds and settings." if pairs.size > 1 and pairs.mean() - half <= 0
               else ""))
    if weak_small:
        best = max(v for g in groups.values() for x, v in g.items() if x in _TRUTH_METRICS and np.isfinite(v))
        return "reproduced in kind", text + (
            f"\n\nThe weak correlations reproduce: no true-graph metric reaches a mean rho of {_STRONG} at any N "
            f"(the largest single-group rho is {best:.2f}). Their dependence on N and entropy does not clear the "
            "rule: the rho at small N is "
            + ("lower, by the paired figure above" if worse_small else "not lower")
            + f", but across groups it does not fall with the exact posterior's entropy (rho {rho_ent:+.2f}; "
            "d = 4 and 5 pooled, whose entropies differ in scale).")
    return "not reproduced", text + "\n\nMost true-graph metrics correlate strongly even at small N."


register_reproduction(Reproduction(
    family=FAMILY,
    paper="A. Karimi Mamaghan, P. Tigas, K. H. Johansson, Y. Gal, Y. Annadani, S. Bongers, 'Challenges and "
          "Considerations in the Evaluation of Bayesian Causal Discovery', ICML 2024",
    claim=("Many metrics used to evaluate Bayesian causal discovery (E-SHD, edge F1, AUROC and the like) correlate "
           "weakly with how close an approximate posterior is to the true one, above all at small sample sizes, "
           "where the true posterior's entropy is high."),
    setup=("The study's full grid: linear SEMs on random DAGs (edge probability 0.5) with d = 4 and 5 nodes, three "
           "noise settings (equal variances, unequal variances, Laplace), N = 10, 30, 100, 300, 1000 training rows "
           "(200 held out), 4 seeds per (d, noise, N); one cell per (d, noise). BGe score, uniform DAG prior, exact "
           "posterior by enumerating every DAG (543 at d = 4, 29,281 at d = 5). Approximations of graded quality: "
           "structure MCMC (the first 20 draws of one chain; 4 chains x 400 draws), order MCMC, independent edges "
           "with the exact marginals, so 16 (seed, approximation) points per correlation; bootstrap MAP and DiBS "
           "are left out (the bootstrap's compilations per data shape and DiBS's 1,500 SVI steps per data set do not "
           "fit a shared 2-core CPU's budget). Distance to the exact posterior: TV over DAGs; each metric's Spearman rho "
           "with it per (d, noise, N) over seeds x approximations. Nothing is tuned. Verdict rule, fixed before "
           f"the run: reproduced when at the smaller half of the N grid at most two of the five true-graph metrics "
           f"reach mean sign-adjusted rho >= {_STRONG}, their mean rho is lower there than at the larger half, and it "
           "falls with the exact posterior's entropy across groups."),
    verdict=_study_verdict,
))
