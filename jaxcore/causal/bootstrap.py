"""Nonparametric bootstrap of the exact MAP-DAG estimator, resampled data sets ``vmap``-ed."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxcore._util import check_choice, check_int, check_key, expected

from .dynamic_programming import _map_dag
from .graphs import _parents_to_adj
from .samples import DAGSamples
from .scores import ScoreTable, _check_max_parents, as_score_table, bge_local_scores, check_data, nig_local_scores

__all__ = ["BootstrapResult", "bootstrap_map_dags"]

_SCORES = {"bge": bge_local_scores, "nig": nig_local_scores}


class BootstrapResult(NamedTuple):
    """Result of :func:`bootstrap_map_dags`.

    Attributes:
        samples: :class:`DAGSamples` of the ``num_bootstrap`` MAP DAGs, equally weighted.
        log_scores: ``[num_bootstrap]`` each MAP DAG's log score on its own resample (nats).

    Examples:
        >>> from jaxcore.causal import BootstrapResult
        >>> BootstrapResult._fields  # doctest: +ELLIPSIS
        (...)
    """

    samples: DAGSamples
    log_scores: Float[Array, " num_bootstrap"]


@functools.partial(jax.jit, static_argnames=("num_bootstrap", "score", "max_parents"))
def _boot(key, data, prior_table, num_bootstrap, score, max_parents):
    n = data.shape[0]
    idx = jax.random.randint(key, (num_bootstrap, n), 0, n)

    def one(ix):
        table = _SCORES[score](data[ix], max_parents=max_parents).table + prior_table
        return _map_dag(table)

    parents, scores = jax.vmap(one)(idx)
    adj = _parents_to_adj(parents)
    return BootstrapResult(DAGSamples(adj, jnp.full((num_bootstrap,), 1.0 / num_bootstrap, data.dtype)), scores)


def bootstrap_map_dags(
    key: jax.Array,
    data: Float[Array, "N d"],
    *,
    num_bootstrap: int = 100,
    score: str = "bge",
    prior_table: ScoreTable | None = None,
    max_parents: int | None = None,
) -> BootstrapResult:
    """Bootstrap posterior: the exact MAP DAG of each of ``num_bootstrap`` resampled data sets.

    Data sets of ``N`` rows drawn with replacement; each is scored (``score`` = ``"bge"`` or
    ``"nig"``, default hyper-parameters) and its highest-scoring DAG found exactly by
    :func:`~jaxcore.causal.exact_map_dag`; all in one ``vmap`` inside one jitted program.

    Args:
        key: PRNG key (``jax.random.key``).
        data: ``[N, d]`` float data (no NaN), ``d <= ~14``.
        num_bootstrap: number of resamples.
        score: ``"bge"`` or ``"nig"``.
        prior_table: optional :class:`ScoreTable` of local log priors on the same ``d``.
        max_parents: in-degree bound.

    Returns:
        :class:`BootstrapResult`: ``num_bootstrap`` equally weighted DAGs and their MAP scores.

    Raises:
        TypeError: ``key`` is not a PRNG key; ``prior_table`` not a :class:`ScoreTable`.
        ValueError: bad data, unknown ``score``, ``num_bootstrap < 1``, a prior of another ``d``.

    References:
        N. Friedman, M. Goldszmidt, A. Wyner, "Data analysis with Bayesian networks: a
        bootstrap approach", UAI 1999.

    Examples:
        >>> import jax, numpy as np
        >>> from jaxcore.causal import bootstrap_map_dags
        >>> x = np.random.default_rng(0).normal(size=(40, 3)).astype(np.float32)
        >>> res = bootstrap_map_dags(jax.random.key(0), x, num_bootstrap=4)
        >>> res.samples.adjacency.shape, res.log_scores.shape
        ((4, 3, 3), (4,))
    """
    check_key(key)
    x = check_data(data)
    score = check_choice(score, "score", sorted(_SCORES))
    num_bootstrap = check_int(num_bootstrap, "num_bootstrap", 1)
    d = x.shape[1]
    _check_max_parents(max_parents, d)
    if prior_table is None:
        pt = jnp.zeros((d, 1 << (d - 1)))
    else:
        p = as_score_table(prior_table, "prior_table")
        if p.d != d:
            raise ValueError(expected("prior_table", f"a ScoreTable on the data's d={d} nodes", f"d={p.d}", raw=True))
        pt = p.table
    xj = jnp.asarray(x)
    if not jnp.issubdtype(xj.dtype, jnp.floating):
        xj = xj.astype(jnp.result_type(float))
    return _boot(key, xj, pt.astype(xj.dtype), num_bootstrap, score, max_parents)
