"""causal: Bayesian causal discovery (jaxcore.causal).

Speed: scoring every DAG on d = 5 and 6 nodes (local-score table + one gather
and sum per DAG) against a NumPy/SciPy table implementation on the same work,
and on subsamples of DAGs against a direct per-DAG NumPy/SciPy BGe scorer and
against pgmpy's structure-score API (BDeu, discrete data): those two baselines
score each DAG from scratch, so they are timed on the same random subsample of
DAGs as the kernel (equal work, stated in the report). Structure/order MCMC
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
    Scaling,
    SpeedBenchmark,
    Table,
    register,
)

FAMILY = "causal"


# --------------------------------------------------------------------------- shared pieces


def _random_dag(rng, d, p):
    a = np.triu((rng.random((d, d)) < p).astype(np.int32), 1)
    perm = rng.permutation(d)
    return a[np.ix_(perm, perm)]


def _linear_data(rng, adj, n, setting):
    """Linear SEM data: weights ±U(0.5, 2); noise per ``setting`` (equal / unequal variances, laplace)."""
    d = adj.shape[0]
    w = adj * rng.uniform(0.5, 2.0, adj.shape) * rng.choice([-1.0, 1.0], adj.shape)
    sd = np.ones(d) if setting in ("equal", "laplace") else np.sqrt(rng.uniform(0.25, 2.0, d))
    from jaxcore.causal.graphs import topological_order

    x = np.zeros((n, d))
    for j in np.asarray(topological_order(adj)):
        e = rng.laplace(size=n) / np.sqrt(2.0) if setting == "laplace" else rng.normal(size=n)
        x[:, j] = x @ w[:, j] + sd[j] * e
    return x


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
    from jaxcore.causal.posterior import dag_log_scores
    from jaxcore.causal.scores import bge_local_scores

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
    d = size["d"]
    adj = _random_dag(rng, d, 0.5)
    return _standardize(_linear_data(rng, adj, size.get("n", 200), "equal")).astype(np.float32)


def _setup_score_all(size, key):
    from jaxcore.causal.enumerate import enumerate_dags

    x = _dag_data(size)
    dags = enumerate_dags(size["d"])
    return Case(args=(jnp.asarray(x), jnp.asarray(dags.parents, jnp.int32)), work=dags.parents.shape[0], work_unit="DAGs")


def _setup_score_subsample(size, key):
    from jaxcore.causal.enumerate import enumerate_dags

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
                        note="NumPy/SciPy BGe table (slogdet per parent set) + fancy-index gather-sum over every DAG")],
    rtol=2e-4, atol=1e-2,
    description="BGe log score of every DAG on d nodes (29281 at d=5, 3781503 at d=6): table + gather + sum",
))

register(SpeedBenchmark(
    name="causal.score_dags_direct", family=FAMILY,
    kernel=_score_dags_bge, setup=_setup_score_subsample,
    sizes=[{"d": 5, "n": 200, "n_dags": 300}, {"d": 6, "n": 200, "n_dags": 300}],
    quick_sizes=[{"d": 5, "n": 200, "n_dags": 100}],
    baselines=[Baseline("numpy-direct", _numpy_direct_scores,
                        note="per-DAG NumPy/SciPy BGe (no shared table); same random subsample of DAGs as the kernel")],
    rtol=2e-4, atol=1e-2, target={"numpy-direct": 100.0},
    description="BGe scores of a random subsample of DAGs, equal work for kernel and per-DAG baseline",
))


def _asia_data(d, n=1000):
    from jaxcore.datasets.causal_data import load_pgmpy_network, sample_discrete_network

    net = load_pgmpy_network("asia")
    x = sample_discrete_network(net, n, seed=0)
    return x[:, :d], [net["names"][i] for i in range(d)], tuple(int(a) for a in net["arities"][:d])


def _score_dags_bdeu(data, parents, arities=()):
    from jaxcore.causal.posterior import dag_log_scores
    from jaxcore.causal.scores import bdeu_local_scores

    return dag_log_scores(bdeu_local_scores(data, arities, equivalent_sample_size=1.0), parents)


def _pgmpy_bdeu(scorer, models, arities=()):
    return np.array([scorer.score(m) for m in models])


def _setup_bdeu(size, key):
    import warnings

    from jaxcore.causal.enumerate import enumerate_dags

    d = size["d"]
    x, names, arities = _asia_data(d)
    dags = enumerate_dags(d)
    idx = np.random.default_rng(2).choice(dags.parents.shape[0], size["n_dags"], replace=False)
    par = dags.parents[idx]
    base = {}
    try:
        import pandas as pd
        from pgmpy.models import DiscreteBayesianNetwork
        from pgmpy.structure_score import BDeu

        df = pd.DataFrame(x, columns=names)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scorer = BDeu(df, equivalent_sample_size=1.0, state_names={n: list(range(a)) for n, a in zip(names, arities)})
        models = []
        for p in par:
            m = DiscreteBayesianNetwork()
            m.add_nodes_from(names)
            m.add_edges_from([(names[i], names[j]) for j in range(d) for i in range(d) if (int(p[j]) >> i) & 1])
            models.append(m)
        base["pgmpy"] = (scorer, models)
    except ImportError:
        pass
    return Case(args=(jnp.asarray(x, jnp.int32), jnp.asarray(par, jnp.int32)), static={"arities": arities},
                baseline_args=base, work=size["n_dags"], work_unit="DAGs")


register(SpeedBenchmark(
    name="causal.score_dags_bdeu", family=FAMILY,
    kernel=_score_dags_bdeu, setup=_setup_bdeu,
    sizes=[{"d": 5, "n_dags": 100}, {"d": 6, "n_dags": 100}],
    quick_sizes=[{"d": 5, "n_dags": 30}],
    baselines=[Baseline("pgmpy", _pgmpy_bdeu, requires=["pgmpy", "pandas"],
                        note="pgmpy.structure_score.BDeu(...).score(model) per DAG; same random subsample of DAGs")],
    rtol=2e-4, atol=1e-2, target={"pgmpy": 100.0},
    description="BDeu scores of DAGs on asia's first d nodes (1000 rows sampled from pgmpy's network)",
))


# --------------------------------------------------------------------------- speed: MCMC, DP


def _setup_mcmc(size, key):
    from jaxcore.causal.scores import bge_local_scores

    table = bge_local_scores(jnp.asarray(_dag_data({"d": size["d"], "n": 200})))
    return Case(args=(key, table), static={"n_chains": size["chains"], "n_steps": size["steps"]},
                work=size["chains"] * size["steps"], work_unit="MCMC steps")


def _structure_kernel(key, table, n_chains=4, n_steps=1000):
    from jaxcore.causal.mcmc import _structure

    d = table.shape[0]
    return _structure(key, table, jnp.zeros((n_chains, d), jnp.int32), n_chains, n_steps // 10, 10, 0)[0]


def _order_kernel(key, table, n_chains=4, n_steps=1000):
    from jaxcore.causal.mcmc import _order

    return _order(key, table, n_chains, n_steps // 10, 10, 0)[0]


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
    sizes=[{"d": 5, "chains": 16, "steps": 5000}, {"d": 10, "chains": 16, "steps": 5000}],
    quick_sizes=[{"d": 5, "chains": 4, "steps": 1000}],
    description="order MCMC steps/s (one exact DAG draw per 10 steps), chains vmapped",
))


def _setup_dp(size, key):
    from jaxcore.causal.scores import bge_local_scores, order_modular_prior_table

    d = size["d"]
    table = bge_local_scores(jnp.asarray(_dag_data({"d": d, "n": 200})), max_parents=size.get("k", 3))
    table = table + order_modular_prior_table(d).astype(table.dtype)
    table.block_until_ready()
    return Case(args=(table,), work=float(d * d * 2**d), work_unit="d^2 2^d")


def _dp_kernel(table):
    from jaxcore.causal.dp import _dp

    return _dp(table).edge_marginals


register(SpeedBenchmark(
    name="causal.dp_edge_marginals", family=FAMILY,
    kernel=_dp_kernel, setup=_setup_dp,
    sizes=[{"d": 10, "k": 3}, {"d": 15, "k": 3}],
    quick_sizes=[{"d": 10, "k": 3}],
    scaling=Scaling("d", [8, 10, 12, 14, 16, 18, 20]),
    description="Koivisto-Sood exact edge marginals (in-degree <= k), O(d^2 2^d) log-space DP",
))
