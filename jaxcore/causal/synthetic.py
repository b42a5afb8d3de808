"""Random linear-Gaussian structural equation models (the synthetic setting of Karimi Mamaghan et al. 2024).

:func:`random_linear_gaussian_network` draws a random DAG, edge weights and noise variances and
returns them in the network format of :func:`jaxcore.datasets.causal_data.load_pgmpy_network`,
so that :func:`jaxcore.datasets.causal_data.sample_linear_gaussian_network` samples data from it.
Host-side NumPy (data generation, not a kernel).
"""

from __future__ import annotations

import numpy as np

from jaxcore._util import check_choice, check_int, check_scalar, expected

__all__ = ["random_linear_gaussian_network"]


def random_linear_gaussian_network(
    seed: int | np.random.Generator,
    d: int,
    edge_probability: float,
    *,
    weight_range: tuple[float, float] = (0.5, 2.0),
    noise_variances: str = "equal",
    variance_range: tuple[float, float] = (0.25, 2.0),
) -> dict:
    """A random linear-Gaussian SEM: Erdős-Rényi DAG, weights ``±U(weight_range)``, noise variances.

    The DAG keeps each edge ``i -> j`` of a random node order with probability ``p``
    (``triu(U < p)`` permuted by a random permutation); nonzero weights are
    ``w_ij = s_ij u_ij`` with ``u_ij ~ U(weight_range)`` and random signs ``s_ij``;
    variances are 1 (``"equal"``) or ``U(variance_range)`` per node (``"unequal"``). Draws, in
    this order: the edge indicators ``[d, d]``, the permutation, the weight magnitudes ``[d, d]``,
    the signs ``[d, d]`` and (unequal) the variances ``[d]``.

    Args:
        seed: a NumPy seed or a ``numpy.random.Generator`` (used and advanced in place, so
            that one generator can draw the network and then its data).
        d: number of nodes, ``>= 1``.
        edge_probability: ``p`` in ``[0, 1]``.
        weight_range: ``(low, high)`` of the weight magnitudes, ``0 <= low <= high``.
        noise_variances: ``"equal"`` or ``"unequal"``.
        variance_range: ``(low, high)`` of the unequal variances, ``0 < low <= high``.

    Returns:
        dict in the Gaussian-network format: ``kind = "gaussian"``, ``names``,
        ``adjacency [d, d]`` int32, ``weights [d, d]`` float64
        (``x_j = intercept_j + sum_i weights[i, j] x_i + N(0, variance_j)``), ``intercept [d]``
        (zeros), ``variance [d]``.

    Raises:
        ValueError / TypeError: bad ``d``, probability, ranges or noise setting.

    References:
        A. Karimi Mamaghan et al., "Challenges and considerations in the evaluation of Bayesian
        causal discovery", ICML 2024, sec. 5 (the synthetic linear settings).

    Examples:
        >>> from jaxcore.causal import is_dag, random_linear_gaussian_network
        >>> from jaxcore.datasets.causal_data import sample_linear_gaussian_network
        >>> net = random_linear_gaussian_network(0, 4, 0.5)
        >>> bool(is_dag(net["adjacency"])), sample_linear_gaussian_network(net, 10, seed=0).shape
        (True, (10, 4))
    """
    d = check_int(d, "d", 1)
    p = check_scalar(edge_probability, "edge_probability", low=0.0, high=1.0)
    lo, hi = (check_scalar(v, "weight_range", nonnegative=True) for v in weight_range)
    if lo > hi:
        raise ValueError(expected("weight_range", "(low, high) with low <= high", tuple(weight_range)))
    noise_variances = check_choice(noise_variances, "noise_variances", ("equal", "unequal"))
    vlo, vhi = (check_scalar(v, "variance_range", positive=True) for v in variance_range)
    if vlo > vhi:
        raise ValueError(expected("variance_range", "(low, high) with low <= high", tuple(variance_range)))
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer, np.random.Generator)):
        raise TypeError(expected("seed", "an int or a numpy Generator", type(seed).__name__, raw=True))
    if not isinstance(seed, np.random.Generator):
        seed = check_int(seed, "seed", 0)
    rng = np.random.default_rng(seed)
    a = np.triu((rng.random((d, d)) < p).astype(np.int32), 1)
    perm = rng.permutation(d)
    adj = a[np.ix_(perm, perm)]
    w = adj * rng.uniform(lo, hi, adj.shape) * rng.choice([-1.0, 1.0], adj.shape)
    var = np.ones(d) if noise_variances == "equal" else rng.uniform(vlo, vhi, d)
    return {"kind": "gaussian", "names": [f"x{j}" for j in range(d)], "adjacency": adj, "weights": w,
            "intercept": np.zeros(d), "variance": var}
