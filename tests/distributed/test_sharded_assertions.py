"""The sharded-path assertions of ``_sharding.py`` fail on the programs they exist to catch."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from . import _sharding as S


def test_the_assertions_catch_replication_gathers_and_flat_memory():
    x, w = np.ones((16, 8), np.float32), np.ones((8, 8), np.float32)
    run = S.check_sharded(lambda x, w: jnp.tanh(x @ w), (x, w), 16, (True, False), collectives_allowed=False)
    assert run.bytes_many < run.bytes_one
    # a cumulative sum over the batch needs the whole batch on every device: an all-gather
    with pytest.raises(AssertionError, match="gathers the full batch"):
        S.check_sharded(lambda x, w: jnp.cumsum(x @ w, axis=0), (x, w), 16, (True, False))
    # an output forced onto every device is not split
    def replicated(mesh, x, w):
        return jax.lax.with_sharding_constraint(x @ w, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec()))

    with pytest.raises(AssertionError, match="not split over 4 devices"):
        S.check_sharded(replicated, (x, w), 16, (True, False), max_memory_ratio=None, pass_mesh=True)
    # memory that does not shrink (only the replicated argument is used)
    c1, _ = S.compile_on(lambda x, w: w @ w, (x, w), S.mesh(1), 16, (True, False))
    c4, _ = S.compile_on(lambda x, w: w @ w, (x, w), S.mesh(4), 16, (True, False))
    with pytest.raises(AssertionError, match="did not shrink"):
        S.assert_memory_shrinks(c1, c4, max_ratio=0.2)
    # a batch-size all-reduce (a gather written as a sum) and any collective at all
    hlo = "%all-reduce.1 = f32[16,8]{1,0} all-reduce(%x), channel_id=1, to_apply=%add"
    with pytest.raises(AssertionError, match="gathers the full batch"):
        S.assert_no_batch_gather(hlo, 16)
    with pytest.raises(AssertionError, match="exchanges data"):
        S.assert_no_collectives(hlo)
    assert [c.op for c in S.collectives(hlo)] == ["all-reduce"]
