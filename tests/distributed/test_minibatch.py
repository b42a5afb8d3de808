"""The device-local minibatch plumbing (``jaxcore/_util/minibatch.py``) that fit_dpo, fit_fudge and fit_cdq share.

``batch_mesh`` decides where a loop's rows are split (an explicit mesh, checked; or the data's own
``NamedSharding``); ``take_local`` takes a stratified schedule's rows on each device from its own block.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxcore._util.minibatch import batch_mesh, minibatch_schedule, take_local

from . import _sharding as S


def test_batch_mesh_reads_the_leading_split():
    on = S.mesh()
    rows = jax.device_put(jnp.zeros((12, 3)), NamedSharding(on, PartitionSpec(S.AXIS)))
    where = batch_mesh(None, rows, 12, 8, data_name="pairs")
    assert where is not None and where.mesh == on and where.axis == S.AXIS and where.num_shards == 4
    # a split that does not divide the minibatch, a replicated array, a split of another axis, NumPy: no mesh
    assert batch_mesh(None, rows, 12, 6, data_name="pairs") is None
    assert batch_mesh(None, jax.device_put(rows, NamedSharding(on, PartitionSpec())), 12, 8, data_name="pairs") is None
    by_col = jax.device_put(jnp.zeros((12, 4)), NamedSharding(on, PartitionSpec(None, S.AXIS)))
    assert batch_mesh(None, by_col, 12, 8, data_name="pairs") is None
    assert batch_mesh(None, np.zeros((12, 3)), 12, 8, data_name="pairs") is None
    # under jit the placement is unknown
    seen = []
    jax.jit(lambda r: seen.append(batch_mesh(None, r, 12, 8, data_name="pairs")) or r)(rows)
    assert seen == [None]


def test_batch_mesh_two_axis_split():
    devices = jax.devices()
    if len(devices) < 4:
        pytest.skip("4 devices needed")
    grid = Mesh(np.asarray(devices[:4]).reshape(2, 2), ("data", "model"))
    rows = jax.device_put(jnp.zeros((8, 2)), NamedSharding(grid, PartitionSpec(("data", "model"))))
    where = batch_mesh(None, rows, 8, 4, data_name="pairs")
    assert where.axis == ("data", "model") and where.num_shards == 4
    only_data = jax.device_put(jnp.zeros((8, 2)), NamedSharding(grid, PartitionSpec("data")))
    assert batch_mesh(None, only_data, 8, 2, data_name="pairs").num_shards == 2


def test_batch_mesh_checks_an_explicit_mesh():
    with pytest.raises(TypeError, match=r"^mesh: expected a jax.sharding.Mesh or None, got str"):
        batch_mesh("batch", None, 8, 4, data_name="pairs")
    on = S.mesh()
    with pytest.raises(ValueError, match=r"^mesh: expected a first axis \('batch'\) whose size divides pairs \(6\)"):
        batch_mesh(on, None, 6, 4, data_name="pairs")
    with pytest.raises(ValueError, match=r"^mesh: expected a first axis \('batch'\) whose size divides batch_size"):
        batch_mesh(on, None, 8, 2, data_name="pairs")
    assert batch_mesh(on, None, 8, 4, data_name="pairs").num_shards == 4


def test_take_local_takes_the_scheduled_rows_on_their_devices():
    # rows 0..19 split 5 per device; 2 of each device's rows per step: the taken rows are the schedule's,
    # in its column order, and each device's share comes from its own block (no all-gather)
    on = S.mesh()
    where = batch_mesh(on, None, 20, 8, data_name="data")
    data = {"x": jnp.arange(20.0)[:, None] * jnp.ones((1, 3)), "i": jnp.arange(20)}
    placed = S.place(data, on, 20)
    schedule = minibatch_schedule(jax.random.key(3), 20, 8, 4, 4)
    step = jax.jit(lambda d, r: take_local(where, d, r, 20))
    for rows in np.asarray(schedule):
        out = step(placed, jnp.asarray(rows))
        np.testing.assert_array_equal(np.asarray(out["i"]), rows)
        np.testing.assert_array_equal(np.asarray(out["x"]), np.asarray(data["x"])[rows])
        S.assert_batch_sharded(out, 8, 4)
    hlo = step.lower(placed, schedule[0]).compile().as_text()
    assert not S.collectives(hlo), [c.line for c in S.collectives(hlo)]
