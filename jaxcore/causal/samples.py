"""The weighted-DAG-sample format returned by every approximate posterior in :mod:`jaxcore.causal`."""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxcore._util import check_int, error_if, expected, is_concrete

from ._checks import check_prob_vector, float_array, host_array
from .enumerate import DAGTable, _dag_keys
from .graphs import _adj_to_parents, _check_square, _is_dag_jit

__all__ = [
    "DAGSamples",
    "make_samples",
    "pad_samples",
    "edge_marginals_from_samples",
    "dag_distribution",
    "mec_distribution",
]


class DAGSamples(eqx.Module):
    """A weighted sample of DAGs (an approximate posterior).

    Build one with :func:`make_samples` (which checks acyclicity and normalises the weights);
    the samplers (:func:`~jaxcore.causal.structure_mcmc`, :func:`~jaxcore.causal.order_mcmc`,
    :func:`~jaxcore.causal.bootstrap_map_dags`, :func:`~jaxcore.causal.dibs_svi`) return one
    inside their ``*Result``. A pytree: pass it through ``jit`` and ``vmap``.

    Args:
        adjacency: ``[n, d, d]`` int32 0/1, ``[k, i, j] = 1`` for ``i -> j`` in sample ``k``.
        weights: ``[n]`` non-negative weights summing to 1 (``1/n`` for MCMC draws; zero for
            padding or discarded draws).

    Attributes:
        adjacency, weights: as above.

    Raises:
        ValueError: (checked when the fields are concrete; traced fields, as inside the samplers'
            ``jit`` programs, are stored as given) ``adjacency`` not ``[n, d, d]`` 0/1, ``weights``
            not ``[n]`` finite, non-negative and summing to 1 within ``max(1e-3, 16 eps)``, or a
            sample of positive weight with a directed cycle or self-loop (zero-weight cyclic draws
            are allowed: DiBS keeps them with weight 0). :func:`make_samples` normalises weights.

    References:
        A. Karimi Mamaghan et al., "Challenges and considerations in the evaluation of Bayesian causal discovery", ICML 2024.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import DAGSamples
        >>> s = DAGSamples(np.zeros((2, 3, 3), np.int32), np.array([0.5, 0.5]))
        >>> s.adjacency.shape, s.weights.tolist()
        ((2, 3, 3), [0.5, 0.5])
    """

    adjacency: Int[Array, "n d d"]
    weights: Float[Array, " n"]

    def __check_init__(self):
        if not is_concrete(self.adjacency, self.weights):
            return
        a = host_array(self.adjacency, "adjacency")
        if a.ndim != 3 or a.shape[1] != a.shape[2] or a.shape[0] < 1:
            raise ValueError(expected("adjacency", "shape [n, d, d] with n >= 1", f"shape {a.shape}", raw=True))
        _check_square(a, "adjacency")
        if not np.all((a == 0) | (a == 1)):
            raise ValueError(expected("adjacency", "0/1 entries", "other values", raw=True))
        w = check_prob_vector(self.weights, "weights", a.shape[0], "adjacency's n")
        ok = np.asarray(_is_dag_jit(jnp.asarray(a, jnp.int32))) | (np.asarray(w) == 0)
        if not ok.all():
            raise ValueError(expected(f"adjacency[{int(np.argmin(ok))}]", "a DAG (acyclic, no self-loop) where the weight is > 0",
                                      "a directed cycle or self-loop", raw=True))


def make_samples(adjacency: Int[Array, "n d d"], weights: Float[Array, " n"] | None = None) -> DAGSamples:
    """Build a :class:`DAGSamples`, normalising ``weights`` (uniform if None).

    Args:
        adjacency: ``[n, d, d]`` 0/1 (nonzero = edge) adjacency matrices, each acyclic.
        weights: optional ``[n]`` non-negative weights with a positive sum.

    Returns:
        :class:`DAGSamples` with int32 0/1 adjacency and weights summing to 1.

    Raises:
        ValueError: if ``adjacency`` is not ``[n, d, d]``, a sample is cyclic (checked when the
            input is concrete, not under ``jit``), or weights have the wrong length / are
            negative / sum to zero.

    References:
        A. Karimi Mamaghan et al., "Challenges and considerations in the evaluation of Bayesian causal discovery", ICML 2024.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import make_samples
        >>> s = make_samples(np.zeros((2, 3, 3)), np.array([1.0, 3.0]))
        >>> s.weights.tolist()
        [0.25, 0.75]
    """
    if adjacency is None:
        raise TypeError(expected("adjacency", "an array [n, d, d]", "None", raw=True))
    a = adjacency if isinstance(adjacency, jax.Array) else jnp.asarray(host_array(adjacency, "adjacency"))
    if a.ndim != 3 or a.shape[1] != a.shape[2] or a.shape[0] < 1:
        raise ValueError(expected("adjacency", "shape [n, d, d] with n >= 1", f"shape {a.shape}", raw=True))
    _check_square(a)
    if is_concrete(a) and not np.all(np.isfinite(np.asarray(a, np.float64))):
        raise ValueError(expected("adjacency", "finite entries (nonzero = edge)", "NaN or inf", raw=True))
    a = (a != 0).astype(jnp.int32)
    if is_concrete(a):
        ok = np.asarray(_is_dag_jit(a))
        if not ok.all():
            raise ValueError(expected("adjacency", "DAGs",
                                      f"sample {int(np.argmin(ok))} has a directed cycle or self-loop", raw=True))
    if weights is None:
        w = jnp.full((a.shape[0],), 1.0 / a.shape[0])
    else:
        w = float_array(weights, "weights")
        if w.shape != (a.shape[0],):
            raise ValueError(expected("weights", f"shape [{a.shape[0]}]", f"shape {w.shape}", raw=True))
        if is_concrete(w):
            wn = np.asarray(w, np.float64)
            if np.any(~np.isfinite(wn)) or np.any(wn < 0) or wn.sum() <= 0 or not np.isfinite(wn.sum()):
                raise ValueError(expected("weights", "finite, non-negative values that sum to > 0",
                                          f"sum {wn.sum()!r}", raw=True))
            w = jnp.asarray(wn / wn.sum(), w.dtype)  # normalised in float64: no overflow of the sum
        else:  # traced: checked at run time (once, not in a loop)
            w = error_if(w, jnp.any(~jnp.isfinite(w) | (w < 0)) | ~(jnp.sum(w) > 0), "weights",
                         "finite, non-negative values that sum to > 0")
            w = w / jnp.sum(w)
    return DAGSamples(a, w)


def _check_samples(samples, name="samples"):
    if not isinstance(samples, DAGSamples):
        raise TypeError(expected(name, "a DAGSamples", type(samples).__name__, raw=True))
    return _check_square(samples.adjacency, f"{name}.adjacency")


@functools.partial(jax.jit, static_argnames="num_samples")
def _pad(samples, num_samples):
    n, d, _ = samples.adjacency.shape
    adj = jnp.concatenate([samples.adjacency, jnp.zeros((num_samples - n, d, d), samples.adjacency.dtype)])
    w = jnp.concatenate([samples.weights, jnp.zeros((num_samples - n,), samples.weights.dtype)])
    return DAGSamples(adj, w)


def pad_samples(samples: DAGSamples, num_samples: int) -> DAGSamples:
    """Pad a sample with zero-weight empty graphs to exactly ``num_samples`` entries.

    Every metric is a weighted sum, so a zero-weight draw changes nothing; padding every
    approximation to one size makes the metrics compile once for all of them.

    Args:
        samples: :class:`DAGSamples` with ``n <= num_samples`` entries.
        num_samples: the padded size.

    Returns:
        :class:`DAGSamples` ``[num_samples, d, d]``; the first ``n`` entries are ``samples``,
        the rest empty graphs of weight 0 (weights keep their dtype).

    Raises:
        TypeError: ``samples`` is not a :class:`DAGSamples`.
        ValueError: ``num_samples < n``.

    References:
        A. Karimi Mamaghan et al., "Challenges and considerations in the evaluation of Bayesian causal discovery", ICML 2024.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import make_samples, pad_samples
        >>> s = pad_samples(make_samples(np.zeros((2, 3, 3))), 4)
        >>> s.adjacency.shape, s.weights.tolist()
        ((4, 3, 3), [0.5, 0.5, 0.0, 0.0])
    """
    _check_samples(samples)
    n = samples.adjacency.shape[0]
    num_samples = check_int(num_samples, "num_samples", n)
    return _pad(samples, num_samples)


@jax.jit
def _edge_marginals(samples):
    w = samples.weights
    return jnp.einsum("n,nij->ij", w, samples.adjacency.astype(w.dtype))


def edge_marginals_from_samples(samples: DAGSamples) -> Float[Array, "d d"]:
    """Edge probabilities of a weighted sample: ``P(i -> j) = sum_k w_k adjacency[k, i, j]``.

    The sample's counterpart of :func:`~jaxcore.causal.edge_marginals_from_posterior`; feed it
    to :func:`~jaxcore.causal.edge_auroc` / :func:`~jaxcore.causal.edge_auprc`.

    Args:
        samples: :class:`DAGSamples` on ``d`` nodes.

    Returns:
        ``[d, d]`` probabilities in the weights' dtype (zero diagonal).

    Raises:
        TypeError: ``samples`` is not a :class:`DAGSamples`.

    References:
        A. Karimi Mamaghan et al., "Challenges and considerations in the evaluation of Bayesian causal discovery", ICML 2024.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import edge_marginals_from_samples, make_samples
        >>> a = np.array([[[0, 1], [0, 0]], [[0, 0], [1, 0]], [[0, 1], [0, 0]], [[0, 0], [0, 0]]])
        >>> edge_marginals_from_samples(make_samples(a)).tolist()
        [[0.0, 0.5], [0.25, 0.0]]
    """
    _check_samples(samples)
    return _edge_marginals(samples)


@jax.jit
def _dag_index(adjacency, table_keys):
    keys = _dag_keys(_adj_to_parents(adjacency))
    idx = jnp.clip(jnp.searchsorted(table_keys, keys), 0, table_keys.shape[0] - 1)
    return idx, table_keys[idx] == keys


@functools.partial(jax.jit, static_argnames="num_segments")
def _segment_sum(values, idx, num_segments):
    return jax.ops.segment_sum(values, idx, num_segments=num_segments)


def dag_distribution(samples: DAGSamples, dags: DAGTable) -> Float[Array, " num_dags"]:
    """The sample's distribution over the enumerated DAGs (weights summed per DAG).

    Args:
        samples: :class:`DAGSamples` on ``d <= 6`` nodes (every sample with positive weight
            are expected to be acyclic).
        dags: ``enumerate_dags(d)``.

    Returns:
        ``[num_dags]`` probabilities aligned with ``dags.parents``.

    Raises:
        ValueError: if ``d`` differs from the table's or a sample with positive weight is not
            among the enumerated DAGs (e.g. cyclic); checked when the input is concrete (under
            ``jit`` such a sample would be counted on a wrong DAG, so validate with
            :func:`make_samples` first).

    References:
        A. Karimi Mamaghan et al., "Challenges and considerations in the evaluation of Bayesian causal discovery", ICML 2024.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import dag_distribution, enumerate_dags, make_samples
        >>> dags = enumerate_dags(2)
        >>> q = dag_distribution(make_samples(np.zeros((1, 2, 2))), dags)
        >>> q.tolist()  # all mass on the empty graph (key 0, first)
        [1.0, 0.0, 0.0]
    """
    d = _check_samples(samples)
    if not isinstance(dags, DAGTable):
        raise TypeError(expected("dags", "a DAGTable (from enumerate_dags)", type(dags).__name__, raw=True))
    if dags.parents.shape[1] != d:
        raise ValueError(expected("dags", f"an enumeration of DAGs on the samples' d={d} nodes",
                                  f"d={dags.parents.shape[1]}", raw=True))
    idx, found = _dag_index(samples.adjacency, jnp.asarray(dags.keys))
    if is_concrete(idx, samples.weights):
        ok = np.asarray(found | (samples.weights == 0))  # zero-weight (e.g. DiBS cyclic) draws ignored
        if not ok.all():
            raise ValueError(expected(f"samples.adjacency[{int(np.argmin(ok))}]", f"a DAG on d={d} nodes",
                                      "a graph that is not among the enumerated DAGs (not a DAG)", raw=True))
    return _segment_sum(samples.weights, idx, num_segments=int(dags.keys.shape[0]))


def mec_distribution(dag_probs: Float[Array, " num_dags"], dags: DAGTable) -> Float[Array, " num_mecs"]:
    """Sum a distribution over DAGs into one over Markov equivalence classes.

    Args:
        dag_probs: ``[num_dags]`` probabilities aligned with ``dags.parents``.
        dags: ``enumerate_dags(d)``.

    Returns:
        ``[num_mecs]`` probabilities.

    Raises:
        TypeError: ``dags`` is not a :class:`DAGTable`.
        ValueError: ``dag_probs`` has the wrong length or is not a probability vector (finite,
            ``>= 0``, summing to 1 within ``max(1e-3, 16 eps)``; integers are converted to float),
            or ``dags.mec`` holds a class id outside ``[0, num_mecs)`` (never dropped).

    References:
        A. Karimi Mamaghan et al., "Challenges and considerations in the evaluation of Bayesian causal discovery", ICML 2024.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.causal import enumerate_dags, mec_distribution
        >>> sorted(mec_distribution(np.full(3, 1 / 3), enumerate_dags(2)).tolist())  # doctest: +NUMBER
        [0.333, 0.667]
    """
    from .posterior import _check_dags

    dags = _check_dags(dags)
    p = check_prob_vector(dag_probs, "dag_probs", dags.parents.shape[0], "dags.parents")
    return _segment_sum(p, jnp.asarray(dags.mec), num_segments=int(dags.num_mecs))
