"""Minibatch training over rows that may be split across devices: the schedule and the device-local take.

A training loop that draws a random minibatch of rows from data split over ``D`` devices makes XLA
assemble the minibatch on every device (the rows of a random index set live anywhere), so every device
then runs the whole minibatch. The stratified schedule here draws the same number of rows from each of
``D`` equal blocks of consecutive rows, so each device can take its share from its own block
(``jax.shard_map``) and nothing of the data moves; the mean gradient over such a minibatch is still
unbiased for the mean over all rows.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .checks import check_auto_mesh, expected


class BatchMesh(NamedTuple):
    """Where a batch of rows is split: the mesh, the axis name(s) of its leading dimension, their size."""

    mesh: Mesh
    axis: str | tuple[str, ...]
    num_shards: int


def minibatch_schedule(key, num_rows: int, batch_size: int, num_steps: int, num_shards: int = 1):
    """``[num_steps, batch_size]`` int32 row indices of every step's minibatch (traceable).

    The rows are ``num_shards`` equal blocks of consecutive rows (a batch split over that many
    devices); each step takes ``batch_size / num_shards`` rows from every block, block ``s``'s in
    columns ``s b .. (s + 1) b - 1``, drawing them from a fresh permutation of the block every block
    epoch (each row once per epoch). ``num_shards = 1``: one permutation of all rows per epoch.
    """
    m, b = num_rows // num_shards, batch_size // num_shards
    num_epochs = -(-(num_steps * b) // m)
    keys = jax.random.split(key, num_epochs * num_shards).reshape(num_epochs, num_shards)
    perms = jax.vmap(jax.vmap(lambda k: jax.random.permutation(k, m)))(keys)  # [epochs, shards, m]
    local = jnp.swapaxes(perms, 0, 1).reshape(num_shards, -1)[:, : num_steps * b].reshape(num_shards, num_steps, b)
    rows = local + (m * jnp.arange(num_shards))[:, None, None]
    return jnp.swapaxes(rows, 0, 1).reshape(num_steps, batch_size).astype(jnp.int32)


def _axis_size(mesh, axis) -> int:
    names = axis if isinstance(axis, tuple) else (axis,)
    return math.prod(mesh.shape[a] for a in names)


def batch_mesh(mesh: Any, rows: Any, num_rows: int, batch_size: int, *, data_name: str) -> BatchMesh | None:
    """The mesh a minibatch loop splits its rows over, or None (one-device sampling).

    ``mesh`` given: a ``jax.sharding.Mesh`` whose first axis must divide ``num_rows`` and
    ``batch_size`` (``ValueError``/``TypeError`` otherwise, naming ``mesh``). ``mesh`` None: the
    ``NamedSharding`` of the concrete array ``rows`` (the data's leading axis) if it splits that axis
    over more than one device and the split divides both counts; otherwise None. Under an outer
    ``jit`` (``rows`` a tracer) the placement is not known: None.
    """
    check_auto_mesh(rows, data_name)
    if mesh is not None:
        if not isinstance(mesh, Mesh):
            raise TypeError(expected("mesh", "a jax.sharding.Mesh or None", type(mesh).__name__, raw=True))
        check_auto_mesh(mesh, "mesh")
        axis = mesh.axis_names[0]
        d = mesh.shape[axis]
        for name, count in ((data_name, num_rows), ("batch_size", batch_size)):
            if count % d:
                raise ValueError(expected("mesh", f"a first axis ({axis!r}) whose size divides {name} ({count})",
                                          f"size {d}", raw=True))
        return BatchMesh(mesh, axis, d)
    sharding = getattr(rows, "sharding", None) if isinstance(rows, jax.Array) and not isinstance(
        rows, jax.core.Tracer) else None
    if not isinstance(sharding, NamedSharding) or not sharding.spec or sharding.spec[0] is None:
        return None
    axis = sharding.spec[0]
    axis = tuple(axis) if isinstance(axis, (tuple, list)) else axis
    d = _axis_size(sharding.mesh, axis)
    if d <= 1 or num_rows % d or batch_size % d:
        return None
    return BatchMesh(sharding.mesh, axis, d)


def take_local(where: BatchMesh, tree: Any, rows: Any, num_rows: int) -> Any:
    """Rows ``rows`` (``[batch_size]``, from :func:`minibatch_schedule` with ``where.num_shards``) of
    every leaf of ``tree`` (each ``[num_rows, ...]``), each device taking its share from its own block.

    The result is split along its leading axis like the data: device ``s`` holds the minibatch's
    columns ``s b .. (s + 1) b - 1``, all drawn from its block of ``num_rows / D`` rows.
    """
    d = where.num_shards
    b = rows.shape[0] // d
    local = rows - (num_rows // d) * (jnp.arange(rows.shape[0]) // b)  # block-local row numbers
    spec = PartitionSpec(where.axis)
    return jax.shard_map(lambda t, i: jax.tree.map(lambda a: a[i], t), mesh=where.mesh, in_specs=(spec, spec),
                         out_specs=spec)(tree, local.astype(jnp.int32))


def minibatch_draw(key, num_rows, batch_size: int, *, replace: bool | None = True):
    """``[batch_size]`` row indices of one step's minibatch, drawn independently of every other step (traceable).

    The other way of drawing minibatches, next to the epoch schedule of :func:`minibatch_schedule`:
    ``replace=True`` draws i.i.d. uniform rows (``jax.random.randint``; ``num_rows`` may be traced,
    e.g. the valid rows of padded data); ``replace=False`` distinct rows within the step, and
    ``replace=None`` distinct rows when the batch fits, i.i.d. rows when ``batch_size > num_rows``
    (both ``jax.random.choice``, ``num_rows`` static). The index dtype is JAX's default int.
    """
    if replace is True:
        return jax.random.randint(key, (batch_size,), 0, num_rows)
    if replace is False or replace is None:
        return jax.random.choice(key, num_rows, (batch_size,), replace=replace is None and batch_size > num_rows)
    raise TypeError(expected("replace", "True, False or None", type(replace).__name__, raw=True))
