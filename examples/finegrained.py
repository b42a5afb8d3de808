"""Can 5 coarse lineage labels reveal 10 blood-cell types? FALCON on real single-cell data.

700 peripheral blood cells (scanpy's pbmc68k_reduced, 765 scaled genes, read from scanpy's wheel) carry
only their coarse lineage (T cells, myeloid, B, NK, CD34+). FALCON (Gadetsky et al., ICML 2024)
trains a classifier over 10 unknown fine classes and, jointly, the fine-to-coarse map M, re-solved
exactly as a min-cost flow. Printed: Hungarian fine accuracy, NMI and map accuracy of FALCON beside
k-means on the genes and k-means inside each lineage given the true number of cell types; the
figure shows the loss terms over training and the confusion of FALCON's classes with the cell types.

Run::

    python examples/finegrained.py            # 2000 steps; about a minute on 2 CPU cores
    python examples/finegrained.py --small    # 100 steps (CI)
"""

import argparse
import os

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from sklearn.cluster import KMeans  # noqa: E402

import jaxcore  # noqa: E402
from jaxcore import finegrained as fg  # noqa: E402
from jaxcore.datasets import PBMC_FINE_NAMES, PBMC_FINE_TO_COARSE, load_pbmc68k  # noqa: E402


def main(small: bool, out: str, seed: int) -> None:
    x, fine, coarse = load_pbmc68k()
    steps = 100 if small else 2000
    r = fg.fit(jax.random.key(seed), x, coarse, 10, num_steps=steps)
    pred = np.asarray(fg.predict(r.teacher, x))
    ftc = np.asarray(r.fine_to_coarse)
    rows = [("FALCON (coarse labels only)", pred, ftc)]
    km = KMeans(10, n_init=10, random_state=seed).fit_predict(x)
    majority = np.array([np.bincount(coarse[km == j]).argmax() for j in range(10)])
    rows.append(("k-means on genes (10 clusters)", km, majority))
    within, wftc, off = np.zeros_like(fine), [], 0
    for c in range(5):
        k, m = int((PBMC_FINE_TO_COARSE == c).sum()), coarse == c
        within[m] = off + (KMeans(k, n_init=10, random_state=seed).fit_predict(x[m]) if k > 1 else 0)
        wftc += [c] * k
        off += k
    rows.append(("k-means within lineage (true counts)", within, np.array(wftc)))
    print(f"{len(fine)} cells, 10 cell types, 5 lineages; FALCON {steps} steps")
    print(f"{'method':40s} {'fine acc':>8s} {'NMI':>6s} {'map acc':>8s}")
    for name, p, f2c in rows:
        print(f"{name:40s} {fg.cluster_accuracy(fine, p):8.3f} {fg.normalized_mutual_info(fine, p):6.3f} "
              f"{fg.map_accuracy(fine, p, PBMC_FINE_TO_COARSE, f2c):8.3f}")
    print("fine classes per lineage: true", np.bincount(PBMC_FINE_TO_COARSE).tolist(),
          "FALCON's M", np.bincount(ftc, minlength=5).tolist())

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    for k in ("coarse", "fine", "consistency", "entropy_gap"):
        a1.plot(np.asarray(r.history[k]), label=k)
    a1.set_xlabel("step")
    a1.set_ylabel("nats")
    a1.set_title("FALCON loss terms")
    a1.legend()
    conf = np.zeros((10, 10))
    np.add.at(conf, (fine, pred), 1)
    a2.imshow(conf / conf.sum(1, keepdims=True), cmap="Blues")
    a2.set_yticks(range(10), [n[:18] for n in PBMC_FINE_NAMES], fontsize=7)
    a2.set_xlabel("FALCON class")
    a2.set_title("cell type vs discovered class (row-normalised)")
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "finegrained_pbmc.png")
    fig.savefig(path, dpi=110)
    print("figure:", path)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true", help="100 training steps (CI)")
    p.add_argument("--out", default="results/examples/finegrained")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    jaxcore.enable_compilation_cache()   # keep compiled programs on disk (see examples/README.md)
    main(a.small, a.out, a.seed)
