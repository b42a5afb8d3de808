"""causal's batch axes on 4 faked devices: DAGs scored, MCMC chains, bootstrap replicates.

What shards: the ``[n, d]`` parent sets given to ``dag_log_scores`` (input and output split; the score
table replicated); the chains of ``order_mcmc`` / ``structure_mcmc`` and the replicates of
``bootstrap_map_dags``. The samplers draw their chains (resamples) from one key inside the program, so
they have no batch input: their chains shard when the caller asks for sharded results
(``jax.jit(..., out_shardings=NamedSharding(mesh, P(axis)))``: every leaf of the result leads with
chains or draws, chain-major), and each device then runs its chains alone: the compiled programs hold
no collective at all. ``structure_mcmc``'s ``init`` is checked for acyclicity on the host, so a
traced ``init`` is refused: pass a concrete one (its chains still shard as above).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

from jaxcore import causal
from jaxcore.datasets.causal_data import sample_linear_gaussian_network

from . import _sharding as S


def _data(d=4):
    net = causal.random_linear_gaussian_network(0, d, 0.5)
    x = sample_linear_gaussian_network(net, 50, seed=0)
    x = ((x - x.mean(0)) / x.std(0)).astype(np.float32)
    return x, causal.bge_local_scores(x) + causal.erdos_renyi_prior_table(d, 0.5)


def test_dag_log_scores_shard_dags():
    x, table = _data()
    parents = jnp.asarray(causal.enumerate_dags(4).parents[:24], jnp.int32)
    run = S.check_sharded(lambda t, p: causal.dag_log_scores(t, p), (table, parents), 24, (False, True),
                          max_memory_ratio=0.5, collectives_allowed=False, rtol=1e-5, atol=1e-4)
    assert len(np.unique(np.asarray(run.many))) > 12  # distinct DAGs, distinct scores


def _sharded_sampler(fn, *args):
    mesh = S.mesh(4)
    c4 = jax.jit(fn, out_shardings=NamedSharding(mesh, PartitionSpec(S.AXIS))).lower(*args).compile()
    c1 = jax.jit(fn).lower(*args).compile()
    S.assert_no_collectives(c4.as_text())
    S.assert_memory_shrinks(c1, c4, max_ratio=0.75)  # tiny chains: the replicated table is a good part
    one, many = c1(*args), c4(*args)
    for a, b in zip(jax.tree.leaves(many), jax.tree.leaves(one), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5)
    return many


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["order_mcmc", "structure_mcmc"])
def test_mcmc_chains_shard_through_out_shardings(sampler):
    _, table = _data()
    fn = lambda k, t: getattr(causal, sampler)(k, t, num_chains=8, num_samples=16, thin=1, burn_in=4)  # noqa: E731
    res = _sharded_sampler(fn, jax.random.key(0), table)
    S.assert_batch_sharded((res.acceptance_rate, res.log_scores), 8, 4)
    S.assert_batch_sharded(res.samples.adjacency, 8 * 16, 4)  # chain-major draws: two chains per device
    assert len(np.unique(np.asarray(res.log_scores)[:, -1])) > 1  # the chains differ


@pytest.mark.slow
def test_bootstrap_replicates_shard_through_out_shardings():
    x, _ = _data()
    res = _sharded_sampler(lambda k: causal.bootstrap_map_dags(k, x, num_bootstrap=8), jax.random.key(0))
    S.assert_batch_sharded((res.log_scores, res.samples.adjacency), 8, 4)
