"""Metrics for approximate DAG posteriors (weighted DAG samples) against a true graph or the exact posterior.

Graph-recovery metrics (need a ground-truth DAG): :func:`expected_shd`,
:func:`expected_cpdag_shd`, :func:`expected_edge_f1` (precision / recall / F1),
:func:`edge_auroc`, :func:`edge_auprc`. Distribution metrics (need the exact
posterior): :func:`kl_divergence`, :func:`total_variation`, :func:`hellinger`
over DAGs or equivalence classes, and :func:`mmd_hamming`. Predictive metrics
(need data): :func:`predictive_nll`, :func:`interventional_nll`.

References:
    A. Karimi Mamaghan, P. Tigas, K. H. Johansson, Y. Gal, Y. Annadani, S. Bongers,
    "Challenges and considerations in the evaluation of Bayesian causal discovery",
    ICML 2024 (the set of metrics and the study design).
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxcore._util.checks import describe
from jaxcore._util import check_bool, check_choice, check_finite, check_range, expected, is_concrete

from ._checks import check_acyclic, check_binary, check_log_prob, check_prob_vector, float_array, host_array
from .graphs import _adj_to_parents, _adjacency_array, _check_square, _compress, _cpdag, _shd
from .samples import DAGSamples
from .scores import bge_local_scores, check_data, nig_local_scores

__all__ = [
    "expected_shd",
    "expected_cpdag_shd",
    "expected_edge_f1",
    "edge_auroc",
    "edge_auprc",
    "mmd_hamming",
    "mmd_hamming_exact",
    "kl_divergence",
    "total_variation",
    "hellinger",
    "predictive_nll",
    "interventional_nll",
]


def _check_samples(samples, true_adjacency=None, name="samples"):
    if not isinstance(samples, DAGSamples):
        raise TypeError(expected(name, "a DAGSamples", type(samples).__name__, raw=True))
    d = _check_square(samples.adjacency, f"{name}.adjacency")
    if true_adjacency is not None:
        dt = _check_square(true_adjacency, "true_adjacency")
        if dt != d or np.ndim(true_adjacency) != 2:
            raise ValueError(expected("true_adjacency", f"shape [d, d] with the samples' d={d}",
                                      f"shape {np.shape(true_adjacency)} (d={dt})", raw=True))
    return d


def _truth(true_adjacency, dag=False):
    t = _adjacency_array(true_adjacency, "true_adjacency")
    if dag:
        check_acyclic(t, "true_adjacency")
    return t


@jax.jit
def _expected_shd(samples, truth):
    return jnp.sum(samples.weights * _shd(samples.adjacency, truth))


@jax.jit
def _expected_cpdag_shd(samples, truth):
    return jnp.sum(samples.weights * _shd(_cpdag(samples.adjacency), _cpdag(truth)))


@jax.jit
def _edge_f1(samples, truth):
    g = samples.adjacency.astype(jnp.float32)
    t = (truth != 0).astype(jnp.float32)
    tp = jnp.sum(g * t, axis=(1, 2))
    fp = jnp.sum(g * (1 - t), axis=(1, 2))
    fn = jnp.sum((1 - g) * t, axis=(1, 2))
    prec = jnp.where(tp + fp > 0, tp / jnp.maximum(tp + fp, 1), 0.0)
    rec = jnp.where(tp + fn > 0, tp / jnp.maximum(tp + fn, 1), 1.0)
    f1 = jnp.where(2 * tp + fp + fn > 0, 2 * tp / jnp.maximum(2 * tp + fp + fn, 1), 1.0)
    w = samples.weights
    return {"precision": jnp.sum(w * prec), "recall": jnp.sum(w * rec), "f1": jnp.sum(w * f1)}


def expected_shd(samples: DAGSamples, true_adjacency: Int[Array, "d d"]) -> jax.Array:
    """Expected structural Hamming distance ``E_q[SHD(G, G*)] = sum_k w_k SHD(G_k, G*)``.

    Args:
        samples: weighted DAG sample.
        true_adjacency: ``[d, d]`` ground-truth graph.

    Returns:
        scalar float (edges).

    Raises:
        TypeError: ``samples`` is not a :class:`DAGSamples`.
        ValueError: ``true_adjacency`` not ``[d, d]`` 0/1 with the samples' ``d``, or (expected SHD
            and CPDAG SHD, when concrete) with a directed cycle or self-loop.

    References:
        Karimi Mamaghan et al., ICML 2024, sec. 3 (E-SHD).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import expected_shd, make_samples
        >>> chain = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])
        >>> float(expected_shd(make_samples(np.stack([chain, 0 * chain])), chain))
        1.0
    """
    _check_samples(samples, true_adjacency)
    return _expected_shd(samples, _truth(true_adjacency, dag=True))


def expected_cpdag_shd(samples: DAGSamples, true_adjacency: Int[Array, "d d"]) -> jax.Array:
    """Expected SHD between CPDAGs: ``E_q[SHD(CPDAG(G), CPDAG(G*))]`` (invariant within equivalence classes).

    Args:
        samples: weighted DAG sample.
        true_adjacency: ``[d, d]`` ground-truth DAG.

    Returns:
        scalar float.

    Raises:
        TypeError: ``samples`` is not a :class:`DAGSamples`.
        ValueError: ``true_adjacency`` not ``[d, d]`` 0/1 with the samples' ``d``, or (expected SHD
            and CPDAG SHD, when concrete) with a directed cycle or self-loop.

    References:
        Karimi Mamaghan et al., ICML 2024, sec. 3; C. Meek, UAI 1995 (the CPDAG).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import expected_cpdag_shd, make_samples
        >>> chain = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])
        >>> float(expected_cpdag_shd(make_samples(chain.T[None]), chain))  # reversed chain: equivalent
        0.0
    """
    _check_samples(samples, true_adjacency)
    return _expected_cpdag_shd(samples, _truth(true_adjacency, dag=True))


def expected_edge_f1(samples: DAGSamples, true_adjacency: Int[Array, "d d"]) -> dict[str, jax.Array]:
    """Expected directed-edge precision, recall and F1 over the sample.

    Per graph: ``precision = TP / (TP + FP)``, ``recall = TP / (TP + FN)``,
    ``F1 = 2 TP / (2 TP + FP + FN)``; a ratio with zero denominator counts as 0
    (as 1 for recall when the true graph is empty). Then weighted means.

    Args:
        samples: weighted DAG sample.
        true_adjacency: ``[d, d]`` ground-truth graph.

    Returns:
        ``{"precision", "recall", "f1"}`` scalars in [0, 1].

    Raises:
        TypeError: ``samples`` is not a :class:`DAGSamples`.
        ValueError: ``true_adjacency`` not ``[d, d]`` 0/1 with the samples' ``d``, or (expected SHD
            and CPDAG SHD, when concrete) with a directed cycle or self-loop.

    References:
        Karimi Mamaghan et al., ICML 2024, sec. 3 (edge F1).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import expected_edge_f1, make_samples
        >>> chain = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])
        >>> float(expected_edge_f1(make_samples(chain[None]), chain)["f1"])
        1.0
    """
    _check_samples(samples, true_adjacency)
    return _edge_f1(samples, _truth(true_adjacency))


def _offdiag(x):
    d = x.shape[-1]
    mask = ~np.eye(d, dtype=bool)
    return x[..., mask]


def _check_edges(edge_probs, true_adjacency):
    d = _check_square(true_adjacency, "true_adjacency")
    if np.ndim(true_adjacency) != 2:
        raise ValueError(expected("true_adjacency", "shape [d, d]", f"shape {np.shape(true_adjacency)}", raw=True))
    check_binary(true_adjacency, "true_adjacency")
    truth = host_array(true_adjacency, "true_adjacency")  # a host mask: no eager device programs per call
    e = float_array(edge_probs, "edge_probs")
    if e.shape != (d, d):
        raise ValueError(expected("edge_probs", f"shape [d, d] like true_adjacency (d={d})",
                                  f"shape {tuple(e.shape)}", raw=True))
    check_finite(e, "edge_probs")
    return e, _offdiag(truth != 0)


def edge_auroc(edge_probs: Float[Array, "d d"], true_adjacency: Int[Array, "d d"]) -> jax.Array:
    """Area under the ROC curve of edge probabilities as a classifier of the true edges.

    The Mann-Whitney statistic over the ``d (d - 1)`` off-diagonal entries, ties counted 1/2:
    ``AUROC = P(s_pos > s_neg) + P(s_pos = s_neg) / 2``.

    Args:
        edge_probs: ``[d, d]`` scores (e.g. posterior edge marginals).
        true_adjacency: ``[d, d]`` 0/1 with at least one edge and one non-edge off the diagonal.

    Returns:
        scalar in [0, 1].

    Raises:
        ValueError: if the true graph has no edge or is complete (AUROC undefined), the shapes
            disagree, ``edge_probs`` has NaN / inf, or ``true_adjacency`` is not 0/1. Integer
            ``edge_probs`` are converted to float (float16 / bfloat16 to float32).

    References:
        H. B. Mann, D. R. Whitney, "On a test of whether one of two random variables is
        stochastically larger than the other", Ann. Math. Statist. 1947.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import edge_auroc
        >>> probs = np.array([[0, 0.9, 0.1], [0.2, 0, 0.3], [0.3, 0.05, 0]])
        >>> float(edge_auroc(probs, np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])))
        0.9375
    """
    e, t = _check_edges(edge_probs, true_adjacency)
    if t.all() or not t.any():
        raise ValueError(expected("true_adjacency", "at least one edge and one non-edge for AUROC",
                                  f"{int(t.sum())} of {t.size} off-diagonal edges", raw=True))
    return _auroc(e, t)


@jax.jit
def _auroc(edge_probs, t):
    s = _offdiag(edge_probs)
    pos = t[:, None] & ~t[None, :]
    diff = s[:, None] - s[None, :]
    wins = jnp.where(diff > 0, 1.0, jnp.where(diff == 0, 0.5, 0.0))
    return jnp.sum(jnp.where(pos, wins, 0.0)) / pos.sum()


def edge_auprc(edge_probs: Float[Array, "d d"], true_adjacency: Int[Array, "d d"]) -> jax.Array:
    """Area under the precision-recall curve as average precision (step-wise, tied scores grouped).

    ``AP = sum_k (R_k - R_{k-1}) P_k`` over the distinct thresholds in decreasing order, the
    definition of scikit-learn's ``average_precision_score``.

    Args:
        edge_probs: ``[d, d]`` scores.
        true_adjacency: ``[d, d]`` 0/1 with at least one edge off the diagonal.

    Returns:
        scalar in [0, 1].

    Raises:
        ValueError: if the true graph has no edge, the shapes disagree, ``edge_probs`` has NaN /
            inf, or ``true_adjacency`` is not 0/1. Integer ``edge_probs`` are converted to float.

    References:
        scikit-learn, ``sklearn.metrics.average_precision_score`` (the definition matched).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import edge_auprc
        >>> probs = np.array([[0, 0.9, 0.1], [0.2, 0, 0.3], [0.3, 0.05, 0]])
        >>> round(float(edge_auprc(probs, np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]]))), 4)
        0.8333
    """
    e, t = _check_edges(edge_probs, true_adjacency)
    if not t.any():
        raise ValueError(expected("true_adjacency", "at least one edge for AUPRC", "no edge", raw=True))
    return _auprc(e, t)


@jax.jit
def _auprc(edge_probs, t):
    s = _offdiag(edge_probs)
    tt = jnp.asarray(t, s.dtype)
    # at threshold s_k: predicted positive = {s >= s_k}
    ge = (s[None, :] >= s[:, None]).astype(s.dtype)  # [k, m]
    tp = ge @ tt
    npred = jnp.sum(ge, axis=1)
    prec = tp / npred
    rec = tp / jnp.sum(tt)
    # each distinct threshold counted once: recall increments from the next higher threshold
    order = jnp.argsort(-s)
    s_sorted, prec_s, rec_s = s[order], prec[order], rec[order]
    first = jnp.concatenate([jnp.ones((1,), bool), s_sorted[1:] != s_sorted[:-1]])
    # previous distinct recall: recall at the strictly greater threshold
    prev_rec = jnp.where(s[None, :] > s[:, None], 1.0, 0.0) @ tt / jnp.sum(tt)
    prev_rec_s = prev_rec[order]
    return jnp.sum(jnp.where(first, (rec_s - prev_rec_s) * prec_s, 0.0))


def mmd_hamming(
    samples_p: DAGSamples,
    samples_q: DAGSamples,
    *,
    exact_p: bool = False,
    exact_q: bool = False,
) -> jax.Array:
    """Squared MMD between two weighted DAG samples with the Hamming kernel, unbiased.

    ``k(G, G') = 1 - H(G, G') / (d (d - 1))`` with ``H`` the number of differing off-diagonal
    entries. The within-sample terms exclude the diagonal ``k = l`` and are renormalised by
    ``1 - sum_k w_k^2`` (the U-statistic ``1 / (n (n - 1)) sum_{k != l}`` for equal weights);
    the cross term ``sum_{k, l} w_k v_l k(G_k, G'_l)`` has no diagonal to exclude. A side
    flagged ``exact`` is a full distribution (e.g. all DAGs with their exact posterior
    probabilities) and keeps its diagonal. Because the kernel is affine in the edge indicators,
    everything reduces to weighted edge sums: ``O((n + m) d^2)``.

    Args:
        samples_p, samples_q: weighted DAG samples on the same ``d`` nodes (each side needs
            ``sum w^2 < 1``, i.e. two or more distinct samples, unless exact).
        exact_p, exact_q: treat that side as an exact distribution.

    Returns:
        scalar MMD^2 estimate (may be slightly negative: it is unbiased).

    Raises:
        TypeError: a side is not a :class:`DAGSamples`.
        ValueError: the two samples have different ``d``, or a non-exact side has ``sum w^2 = 1``
            (one draw carries all the weight: the unbiased within-sample term is undefined).

    References:
        A. Gretton et al., "A kernel two-sample test", JMLR 2012, eq. (3) (unbiased MMD^2_u).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import make_samples, mmd_hamming
        >>> a = make_samples(np.array([[[0, 1], [0, 0]], [[0, 0], [0, 0]]]))
        >>> float(mmd_hamming(a, a, exact_p=True, exact_q=True))  # a distribution against itself
        0.0
    """
    d = _check_samples(samples_p, name="samples_p")
    dq = _check_samples(samples_q, name="samples_q")
    if dq != d:
        raise ValueError(expected("samples_q", f"DAGs on samples_p's d={d} nodes", f"d={dq}", raw=True))
    exact_p = check_bool(exact_p, "exact_p")
    exact_q = check_bool(exact_q, "exact_q")
    if not exact_p:
        _check_spread(samples_p, "samples_p")
    if not exact_q:
        _check_spread(samples_q, "samples_q")
    return _mmd(samples_p, samples_q, exact_p, exact_q)


@functools.partial(jax.jit, static_argnames=("exact_p", "exact_q"))
def _mmd(samples_p, samples_q, exact_p, exact_q):
    d = samples_p.adjacency.shape[-1]
    m = d * (d - 1)

    def within(s, exact):
        x = _offdiag(s.adjacency).astype(s.weights.dtype)  # [n, m]
        w = s.weights
        mean = w @ x  # [m]
        size = w @ jnp.sum(x, axis=1)  # E|G|
        # sum_{k,l} w_k w_l k(G_k, G_l) with k = 1 - (|G|+|G'| - 2 <G, G'>)/m
        full = 1.0 - (2.0 * size - 2.0 * jnp.sum(mean * mean)) / m
        if exact:
            return full, mean, size
        w2 = jnp.sum(w * w)
        diag = w2 * 1.0  # k(G, G) = 1
        return (full - diag) / (1.0 - w2), mean, size

    kpp, mp, sp = within(samples_p, exact_p)
    kqq, mq, sq = within(samples_q, exact_q)
    kpq = 1.0 - (sp + sq - 2.0 * jnp.sum(mp * mq)) / m
    return kpp + kqq - 2.0 * kpq


def mmd_hamming_exact(samples: DAGSamples, edge_marginals: Float[Array, "d d"]) -> jax.Array:
    """Unbiased squared Hamming-kernel MMD between a weighted sample and an exact posterior.

    The Hamming kernel is affine in the edge indicators, so the exact side enters only through
    its edge marginals ``mu``: ``E_{p,p}[k] = 1 - (2 sum(mu) - 2 ||mu||^2) / (d (d - 1))`` (independent
    draws, diagonal included), and likewise for the cross term; equals
    ``mmd_hamming(samples, all_dags_with_exact_weights, exact_q=True)`` without enumerating.

    Args:
        samples: weighted DAG sample.
        edge_marginals: ``[d, d]`` exact posterior edge probabilities.

    Returns:
        scalar MMD^2 estimate.

    Raises:
        TypeError: ``samples`` is not a :class:`DAGSamples`.
        ValueError: ``edge_marginals`` not ``[d, d]`` probabilities in [0, 1]; ``sum w^2 = 1`` (a
            single draw: the unbiased within-sample term is undefined).

    References:
        A. Gretton et al., "A kernel two-sample test", JMLR 2012, eq. (3).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import make_samples, mmd_hamming_exact
        >>> a = make_samples(np.array([[[0, 1], [0, 0]], [[0, 0], [0, 0]]]))
        >>> round(float(mmd_hamming_exact(a, np.array([[0, 0.5], [0, 0]]))), 6)  # unbiased: may be < 0
        -0.25
    """
    d = _check_samples(samples)
    mu = float_array(edge_marginals, "edge_marginals")
    if mu.shape != (d, d):
        raise ValueError(expected("edge_marginals", f"shape [{d}, {d}]", f"shape {tuple(mu.shape)}",
                                  raw=True))
    check_range(mu, "edge_marginals", 0.0, 1.0)
    _check_spread(samples, "samples")
    return _mmd_exact(samples, mu)


@jax.jit
def _mmd_exact(samples, edge_marginals):
    d = samples.adjacency.shape[-1]
    mu = _offdiag(edge_marginals).astype(samples.weights.dtype)
    m = d * (d - 1)
    x = _offdiag(samples.adjacency).astype(samples.weights.dtype)
    w = samples.weights
    mean = w @ x
    size = w @ jnp.sum(x, axis=1)
    w2 = jnp.sum(w * w)
    kpp = (1.0 - (2.0 * size - 2.0 * jnp.sum(mean * mean)) / m - w2) / (1.0 - w2)
    kqq = 1.0 - (2.0 * jnp.sum(mu) - 2.0 * jnp.sum(mu * mu)) / m
    kpq = 1.0 - (size + jnp.sum(mu) - 2.0 * jnp.sum(mean * mu)) / m
    return kpp + kqq - 2.0 * kpq


def _check_spread(samples, name):
    """The unbiased within-sample term divides by ``1 - sum w^2``: refuse a single effective draw."""
    w = samples.weights
    if is_concrete(w) and float(np.sum(np.asarray(w, np.float64) ** 2)) >= 1.0 - 1e-6:
        raise ValueError(expected(f"{name}.weights", "two or more draws with positive weight (sum w^2 < 1), "
                                  "or flag the side exact", "all weight on one draw", raw=True))


def _check_probs(p, q):
    p = check_prob_vector(p, "p")
    q = check_prob_vector(q, "q", p.shape[0], "p")
    dtype = jnp.promote_types(p.dtype, q.dtype)
    return p.astype(dtype), q.astype(dtype)


@jax.jit
def _kl(p, lq):
    # xlogy form: 0 log 0 = 0, p log p kept in log space (finite for p down to the smallest normal)
    lp = jnp.log(jnp.where(p > 0, p, 1.0))
    return jnp.maximum(jnp.sum(jnp.where(p > 0, p * (lp - lq), 0.0)), 0.0)


@jax.jit
def _tv(p, q):
    return jnp.clip(0.5 * jnp.sum(jnp.abs(p - q)), 0.0, 1.0)


@jax.jit
def _hellinger(p, q):
    # H^2 = 1/2 sum (sqrt p - sqrt q)^2: no cancellation in 1 - BC, and sqrt(p) sqrt(q) never
    # underflows the way sqrt(p q) does for p, q ~ 1e-30 in float32
    h2 = 0.5 * jnp.sum(jnp.square(jnp.sqrt(p) - jnp.sqrt(q)))
    return jnp.sqrt(jnp.clip(h2, 0.0, 1.0))


def kl_divergence(p: Float[Array, " n"], q: Float[Array, " n"], *, log_q: Float[Array, " n"] | None = None) -> jax.Array:
    """``KL(p || q) = sum_i p_i log(p_i / q_i)`` (nats); ``+inf`` where ``p_i > 0 = q_i``.

    Typical use: ``kl_divergence(q_approx, p_exact, log_q=exact.log_prob)`` (finite: the exact
    posterior is positive everywhere; passing its log avoids underflow of tiny probabilities) or
    the other direction for mode coverage (infinite if the sample misses a DAG).

    Args:
        p, q: ``[n]`` probability vectors.
        log_q: optional ``[n]`` ``log q`` used instead of ``log(q)``.

    Returns:
        scalar (nats), ``>= 0``; ``+inf`` with a ``RuntimeWarning`` that says how much mass of ``p``
        lies where ``q`` is 0 (outside ``jit``).

    Raises:
        ValueError: shapes differ or are not 1-d; ``p`` or ``q`` is not a probability vector
            (NaN / inf / negative entries, or a sum off 1 by more than ``max(1e-3, 16 eps)``;
            integers are converted to float, float16 / bfloat16 computed in float32).

    References:
        S. Kullback, R. A. Leibler, "On information and sufficiency", Ann. Math. Statist. 1951.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import kl_divergence
        >>> round(float(kl_divergence(np.array([0.5, 0.5, 0.0]), np.array([0.25, 0.25, 0.5]))), 4)
        0.6931
    """
    p, q = _check_probs(p, q)
    if log_q is None:
        lq = jnp.log(q)
    else:
        lq = float_array(log_q, "log_q")
        if lq.shape != q.shape:
            raise ValueError(expected("log_q", f"shape {list(q.shape)} like q", f"shape {lq.shape}", raw=True))
        lq = check_log_prob(lq, "log_q", q.shape[0]).astype(p.dtype)
    out = _kl(p, lq)
    if is_concrete(out) and bool(jnp.isinf(out)):
        missed = int(jnp.sum((p > 0) & jnp.isneginf(lq)))
        warnings.warn(f"kl_divergence: p puts mass {float(jnp.sum(jnp.where(jnp.isneginf(lq), p, 0.0))):.3g} on "
                      f"{missed} entries where q is 0, so KL(p || q) = inf (for a sampler's estimate, the sample "
                      "missed those DAGs: compare in the direction KL(sample || exact), or use total_variation)",
                      RuntimeWarning, stacklevel=2)
    return out


def total_variation(p: Float[Array, " n"], q: Float[Array, " n"]) -> jax.Array:
    """Total variation distance ``TV(p, q) = 1/2 sum_i |p_i - q_i|`` in [0, 1].

    Args:
        p, q: ``[n]`` probability vectors.

    Returns:
        scalar in [0, 1].

    Raises:
        ValueError: shapes differ or are not 1-d; ``p`` or ``q`` is not a probability vector
            (NaN / inf / negative entries, or a sum off 1 by more than ``max(1e-3, 16 eps)``;
            integers are converted to float, float16 / bfloat16 computed in float32).

    References:
        Karimi Mamaghan et al., ICML 2024 (distance to the exact posterior).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import total_variation
        >>> float(total_variation(np.array([0.5, 0.5, 0.0]), np.array([0.25, 0.25, 0.5])))
        0.5
    """
    p, q = _check_probs(p, q)
    return _tv(p, q)


def hellinger(p: Float[Array, " n"], q: Float[Array, " n"]) -> jax.Array:
    """Hellinger distance ``sqrt(1 - sum_i sqrt(p_i q_i))`` in [0, 1].

    Args:
        p, q: ``[n]`` probability vectors.

    Returns:
        scalar in [0, 1].

    Raises:
        ValueError: shapes differ or are not 1-d; ``p`` or ``q`` is not a probability vector
            (NaN / inf / negative entries, or a sum off 1 by more than ``max(1e-3, 16 eps)``;
            integers are converted to float, float16 / bfloat16 computed in float32).

    References:
        E. Hellinger, "Neue Begründung der Theorie quadratischer Formen", J. reine angew. Math. 1909.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import hellinger
        >>> float(hellinger(np.array([0.5, 0.5]), np.array([0.5, 0.5])))
        0.0
    """
    p, q = _check_probs(p, q)
    return _hellinger(p, q)


_SCORES = {"bge": bge_local_scores, "nig": nig_local_scores}


def _sample_local_sums(table, samples, node_mask):
    d = table.shape[0]
    c = _compress(_adj_to_parents(samples.adjacency))  # [n, d]
    vals = table[jnp.arange(d), c]  # [n, d]
    return jnp.sum(jnp.where(node_mask, vals, 0.0), axis=1)


@jax.jit
def _nll(t_all, t_tr, samples, mask, num_rows):
    ll = _sample_local_sums(t_all, samples, mask) - _sample_local_sums(t_tr, samples, mask)
    return -jax.nn.logsumexp(ll, b=samples.weights) / num_rows


def predictive_nll(
    samples: DAGSamples,
    train: Float[Array, "N d"],
    test: Float[Array, "M d"],
    *,
    score: str = "bge",
) -> jax.Array:
    """Held-out negative log-likelihood of the Bayesian model average, per test row.

    ``-1/M log sum_k w_k p(D_test | G_k, D_train)`` with the exact posterior predictive
    ``log p(D_test | G, D_train) = log p(D_train ∪ D_test | G) - log p(D_train | G)`` under the
    conjugate score (BGe or NIG), a difference of two local-score tables gathered per sample.

    Args:
        samples: weighted DAG sample on d nodes.
        train: ``[N, d]`` data the posterior was computed from.
        test: ``[M, d]`` held-out data.
        score: ``"bge"`` or ``"nig"`` (NIG centres with the combined mean: use centred data).

    Returns:
        scalar nats per test row.

    Raises:
        TypeError: ``samples`` is not a :class:`DAGSamples`.
        ValueError: bad data, NaN, mismatched d, unknown score.

    References:
        Karimi Mamaghan et al., ICML 2024 (held-out predictive likelihood).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import make_samples, predictive_nll
        >>> rng = np.random.default_rng(0)
        >>> s = make_samples(np.zeros((1, 2, 2)))
        >>> bool(np.isfinite(predictive_nll(s, rng.normal(size=(20, 2)), rng.normal(size=(5, 2)))))
        True
    """
    d = _check_samples(samples)
    tr = check_data(train, "train")
    te = check_data(test, "test")
    for nm, a in (("train", tr), ("test", te)):
        if a.shape[1] != d:
            raise ValueError(expected(nm, f"d={d} columns like the samples", f"{a.shape[1]} columns", raw=True))
    score = check_choice(score, "score", sorted(_SCORES))
    f = _SCORES[score]
    both = np.concatenate([tr, te])
    kw = {"center": False} if score == "nig" else {}
    t_all = f(jnp.asarray(both), **kw).table
    t_tr = f(jnp.asarray(tr), **kw).table
    mask = jnp.ones((d,), bool)
    return _nll(t_all, t_tr, samples, mask, te.shape[0])


def interventional_nll(
    samples: DAGSamples,
    train: Float[Array, "N d"],
    interventional: Float[Array, "M d"],
    targets: Int[Array, " d"],
    *,
    score: str = "bge",
) -> jax.Array:
    """Negative log-likelihood of interventional data, per row, under the Bayesian model average.

    Under a perfect intervention on the nodes in ``targets``, their mechanisms are replaced and
    the others keep their conditional posterior predictive:
    ``log p(D_int | G, D_train) = sum_{j not in targets} [s_j(pa_j; D_train ∪ D_int) - s_j(pa_j; D_train)]``
    (parameter modularity of the conjugate scores).

    Args:
        samples: weighted DAG sample.
        train: ``[N, d]`` observational data.
        interventional: ``[M, d]`` rows measured under the intervention.
        targets: ``[d]`` 0/1 mask of intervened nodes.
        score: ``"bge"`` or ``"nig"``.

    Returns:
        scalar nats per interventional row.

    Raises:
        TypeError: ``samples`` is not a :class:`DAGSamples`.
        ValueError: bad data, mismatched d, ``targets`` not a ``[d]`` 0/1 mask, unknown score.

    References:
        Karimi Mamaghan et al., ICML 2024 (interventional NLL); D. Heckerman, D. Geiger,
        D. M. Chickering, Machine Learning 1995 (parameter modularity).

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import interventional_nll, make_samples
        >>> rng = np.random.default_rng(0)
        >>> s = make_samples(np.zeros((1, 2, 2)))
        >>> float(interventional_nll(s, rng.normal(size=(20, 2)), rng.normal(size=(5, 2)), np.ones(2)))
        -0.0
    """
    d = _check_samples(samples)
    tr = check_data(train, "train")
    te = check_data(interventional, "interventional")
    for nm, a in (("train", tr), ("interventional", te)):
        if a.shape[1] != d:
            raise ValueError(expected(nm, f"d={d} columns like the samples", f"{a.shape[1]} columns", raw=True))
    if targets is None:
        raise TypeError(expected("targets", f"a 0/1 mask of shape [{d}]", "None", raw=True))
    tg = np.asarray(targets)
    if tg.shape != (d,):
        raise ValueError(expected("targets", f"shape [{d}]", f"shape {tg.shape}", raw=True))
    if tg.dtype.kind not in "biuf" or not np.all((tg == 0) | (tg == 1)):
        raise ValueError(expected("targets", "a 0/1 mask of intervened nodes", describe(tg), raw=True))
    score = check_choice(score, "score", sorted(_SCORES))
    f = _SCORES[score]
    kw = {"center": False} if score == "nig" else {}
    t_all = f(jnp.asarray(np.concatenate([tr, te])), **kw).table
    t_tr = f(jnp.asarray(tr), **kw).table
    mask = jnp.asarray(tg == 0)
    return _nll(t_all, t_tr, samples, mask, te.shape[0])
