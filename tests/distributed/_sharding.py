"""Reusable assertions for the sharded-path tests (``tests/distributed/test_sharded_<family>.py``).

A batch axis "shards" when a program given its batch on a ``NamedSharding`` over several devices
(1) gives the one-device answer, (2) returns its batched outputs still split over the devices,
(3) compiles to HLO with no all-gather of the full batch (a program that silently replicates its
batch passes (1) and may pass (2) after a final re-slice, but not this), and (4) needs less memory per
device (XLA's memory analysis of the compiled program) as the device count grows. ``check_sharded``
runs all four on one function; each is also an assertion of its own. ``tests/conftest.py`` fakes
4 CPU devices (``XLA_FLAGS=--xla_force_host_platform_device_count=4``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

AXIS = "batch"
NUM_DEVICES = 4

_COLLECTIVE = re.compile(r"=\s*(\(?[^=]*?\)?)\s+(all-gather|all-gather-start|all-reduce|all-reduce-start|"
                         r"all-to-all|collective-permute|collective-permute-start|reduce-scatter)\(")
_SHAPE = re.compile(r"[a-z]+[0-9]*\[([0-9,]*)\]")
_DIMS = re.compile(r"dimensions=\{([0-9,]*)\}")


def mesh(num_devices: int = NUM_DEVICES, axis: str = AXIS) -> Mesh:
    """A one-axis mesh over the first ``num_devices`` devices (skips the test if there are fewer)."""
    import pytest

    devices = jax.devices()
    if len(devices) < num_devices:
        pytest.skip(f"{num_devices} devices needed, {len(devices)} present (XLA_FLAGS not applied?)")
    return Mesh(np.asarray(devices[:num_devices]), (axis,))


def place(tree: Any, on: Mesh, batch: int | None, axis: str = AXIS) -> Any:
    """``tree`` on ``on``: array leaves whose leading axis has length ``batch`` split along it, the
    rest replicated (``batch=None``: everything replicated). Non-array leaves stay as they are."""
    split, whole = NamedSharding(on, PartitionSpec(axis)), NamedSharding(on, PartitionSpec())

    def put(leaf: Any) -> Any:
        if not isinstance(leaf, (jax.Array, np.ndarray)):
            return leaf
        if batch is not None and leaf.ndim >= 1 and leaf.shape[0] == batch:
            return jax.device_put(leaf, split)
        return jax.device_put(leaf, whole)

    return jax.tree.map(put, tree)


def place_args(args: Sequence[Any], on: Mesh, batch: int, batched: Sequence[bool], axis: str = AXIS) -> tuple:
    """``args`` placed on ``on``: the arguments flagged in ``batched`` split along their batch axis."""
    if len(batched) != len(args):
        raise ValueError(f"batched: expected one flag per argument ({len(args)}), got {len(batched)}")
    return tuple(place(a, on, batch if b else None, axis) for a, b in zip(args, batched))


def assert_batch_sharded(out: Any, batch: int, num_devices: int, *, select: Callable[[Any], Any] | None = None,
                         axis: int = 0) -> None:
    """Every array leaf of ``select(out)`` (default: all leaves whose axis ``axis`` has length ``batch``)
    is split over ``num_devices`` devices along that axis: each device holds ``batch / num_devices`` rows."""
    leaves = [x for x in jax.tree.leaves(select(out) if select else out) if isinstance(x, jax.Array)]
    if select is None:
        leaves = [x for x in leaves if x.ndim > axis and x.shape[axis] == batch]
    assert leaves, "no output leaf carries the batch axis"
    for x in leaves:
        assert x.shape[axis] == batch, f"output leaf of shape {x.shape}: axis {axis} is not the batch ({batch})"
        local = x.sharding.shard_shape(x.shape)
        assert local[axis] == batch // num_devices, (
            f"output leaf {x.shape} is not split over {num_devices} devices along axis {axis}: each device "
            f"holds {local} ({x.sharding})")
        assert len(x.sharding.device_set) == num_devices, x.sharding


class Collective(NamedTuple):
    """One collective of a compiled HLO module: its op, output shapes and (all-gather) gathered dimensions."""

    op: str
    shapes: list[tuple[int, ...]]
    dimensions: tuple[int, ...]
    line: str


def collectives(hlo: str) -> list[Collective]:
    """The cross-device collectives (all-gather, all-reduce, all-to-all, collective-permute,
    reduce-scatter) of an optimised HLO module's text (``compiled.as_text()``)."""
    found = []
    for line in hlo.splitlines():
        m = _COLLECTIVE.search(line)
        if not m:
            continue
        shapes = [tuple(int(d) for d in s.split(",") if d) for s in _SHAPE.findall(m.group(1))]
        dims = _DIMS.search(line)
        found.append(Collective(m.group(2), shapes, tuple(int(d) for d in dims.group(1).split(",") if d)
                                if dims else (), line.strip()[:300]))
    return found


def assert_no_batch_gather(hlo: str, batch: int) -> None:
    """No collective in ``hlo`` assembles the full batch: no all-gather whose gathered dimension's output
    length is a multiple of ``batch`` (a batch axis gathered whole, or merged with another), no all-reduce
    of an array with such a dimension (a gather written as a sum of zero-padded parts), no all-to-all.
    Tests choose a batch size that no parameter dimension is a multiple of."""
    bad = []
    for c in collectives(hlo):
        if c.op.startswith("all-gather"):
            if any(d < len(s) and s[d] % batch == 0 for s in c.shapes for d in c.dimensions):
                bad.append(c.line)
        elif c.op.startswith("all-reduce"):  # the other way to assemble a batch: scatter into zeros, then sum
            if any(n >= batch and n % batch == 0 for s in c.shapes for n in s):
                bad.append(c.line)
        elif c.op == "all-to-all":
            bad.append(c.line)  # re-distributes the batch: never wanted for a vmapped batch axis
    assert not bad, f"the compiled program gathers the full batch ({batch}) on every device:\n" + "\n".join(bad[:4])


def assert_no_collectives(hlo: str, *, allow_scalar_reductions: bool = False) -> None:
    """``hlo`` exchanges nothing between devices (an embarrassingly parallel batch); with
    ``allow_scalar_reductions``, all-reduces of scalars (a mean loss over the batch) are allowed."""
    bad = [c.line for c in collectives(hlo)
           if not (allow_scalar_reductions and c.op.startswith("all-reduce") and all(s == () for s in c.shapes))]
    assert not bad, "the compiled program exchanges data between devices:\n" + "\n".join(bad[:4])


def device_bytes(compiled: Any) -> int:
    """Bytes one device holds while ``compiled`` runs: arguments + outputs + temporaries - aliased (XLA's
    memory analysis of the partitioned program)."""
    m = compiled.memory_analysis()
    return int(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes)


def assert_memory_shrinks(compiled_1: Any, compiled_n: Any, *, max_ratio: float = 0.6) -> tuple[int, int]:
    """The n-device program needs at most ``max_ratio`` of the one-device program's bytes per device.
    Returns ``(bytes_1, bytes_n)``."""
    one, many = device_bytes(compiled_1), device_bytes(compiled_n)
    assert many <= max_ratio * one, (f"per-device memory did not shrink with the devices: {many} bytes on each "
                                     f"of n devices vs {one} on one (ratio {many / one:.2f} > {max_ratio})")
    return one, many


class _Compiled(NamedTuple):
    """A compiled program over the array leaves of some arguments (the rest, static, closed over)."""

    compiled: Any

    def __call__(self, *arrays: Any) -> Any:
        return self.compiled(*arrays)

    def as_text(self) -> str:
        return self.compiled.as_text()

    def memory_analysis(self) -> Any:
        return self.compiled.memory_analysis()


def compile_on(fn: Callable[..., Any], args: Sequence[Any], on: Mesh, batch: int, batched: Sequence[bool]
               ) -> tuple[_Compiled, tuple]:
    """``jax.jit(fn)`` compiled for ``args`` placed on ``on`` (see ``place_args``); equinox modules and
    other pytrees with static fields are split into array leaves (traced) and the rest (closed over).
    Returns ``(compiled, arrays)``: call ``compiled(*arrays)``."""
    import equinox as eqx

    placed = place_args(args, on, batch, batched)
    arrays, static = eqx.partition(placed, eqx.is_array)
    jitted = jax.jit(lambda a: fn(*eqx.combine(a, static)))
    return _Compiled(jitted.lower(arrays).compile()), (arrays,)


class ShardedRun(NamedTuple):
    """What ``check_sharded`` measured: both outputs, both compiled programs, bytes per device."""

    one: Any
    many: Any
    compiled_one: Any
    compiled_many: Any
    bytes_one: int
    bytes_many: int
    hlo: str


def check_sharded(fn: Callable[..., Any], args: Sequence[Any], batch: int, batched: Sequence[bool], *,
                  num_devices: int = NUM_DEVICES, select: Callable[[Any], Any] | None = None, out_axis: int = 0,
                  rtol: float = 1e-5, atol: float = 1e-6, max_memory_ratio: float | None = 0.6,
                  collectives_allowed: bool = True, compare: bool = True, pass_mesh: bool = False) -> ShardedRun:
    """All four assertions on ``jax.jit(fn)(*args)``: args flagged in ``batched`` split along their
    leading ``batch`` axis over ``num_devices`` devices (the rest replicated) against one device.

    ``select(out)`` picks the outputs that carry the batch (default: every leaf whose ``out_axis`` has
    length ``batch``); ``collectives_allowed=False`` also requires an HLO free of every collective
    (scalar all-reduces aside); ``max_memory_ratio=None`` skips the memory assertion; ``pass_mesh``:
    ``fn(mesh, *args)`` gets the mesh (a kernel with a ``mesh=`` argument), of 1 device or of n.
    """
    one_mesh, many_mesh = mesh(1), mesh(num_devices)
    fn_one = functools.partial(fn, one_mesh) if pass_mesh else fn
    fn_many = functools.partial(fn, many_mesh) if pass_mesh else fn
    compiled_one, args_one = compile_on(fn_one, args, one_mesh, batch, batched)
    compiled_many, args_many = compile_on(fn_many, args, many_mesh, batch, batched)
    one = jax.block_until_ready(compiled_one(*args_one))
    many = jax.block_until_ready(compiled_many(*args_many))
    if compare:
        for a, b in zip(jax.tree.leaves(many), jax.tree.leaves(one), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)
    assert_batch_sharded(many, batch, num_devices, select=select, axis=out_axis)
    hlo = compiled_many.as_text()
    assert_no_batch_gather(hlo, batch)
    if not collectives_allowed:
        assert_no_collectives(hlo, allow_scalar_reductions=True)
    b1 = bn = 0
    if max_memory_ratio is not None:
        b1, bn = assert_memory_shrinks(compiled_one, compiled_many, max_ratio=max_memory_ratio)
    return ShardedRun(one, many, compiled_one, compiled_many, b1, bn, hlo)


@functools.cache
def runtime_checks_gather() -> bool:
    """True while jaxcore's run-time value checks gather a sharded array onto one device.

    ``jaxcore._util.checks.error_if`` (``equinox.error_if`` underneath) threads the checked array
    through a ``lax.cond`` whose error branch is a ``jax.pure_callback``; a callback runs on one
    device, so the partitioner gathers the array there and broadcasts it back. A kernel that checks
    its batch under ``jit`` then replicates it. Probed once on a tiny program (False on < 4 devices).
    """
    if len(jax.devices()) < NUM_DEVICES:
        return False
    import jax.numpy as jnp

    from jaxcore._util.checks import error_if

    x = jax.device_put(jnp.zeros((NUM_DEVICES * 2,)), NamedSharding(mesh(), PartitionSpec(AXIS)))
    out = jax.jit(lambda v: 2.0 * error_if(v, jnp.any(v < 0), "v", "values >= 0"))(x)
    return bool(out.sharding.is_fully_replicated)


CHECKS_GATHER = ("jaxcore._util.checks.error_if threads the checked batch through equinox's host callback, "
                 "which runs on one device: the batch is gathered there (fix: thread the check on a scalar)")


def xfail_while_checks_gather(test: Callable[..., Any] | None = None) -> Any:
    """Mark a test whose kernel checks its batch under ``jit``: expected to fail (strictly) while
    ``runtime_checks_gather()``; a plain test once the checks no longer gather. Without ``test``,
    the mark itself (for ``pytest.param(..., marks=...)``)."""
    import pytest

    mark = pytest.mark.xfail(runtime_checks_gather(), reason=CHECKS_GATHER, strict=True, raises=AssertionError)
    return mark if test is None else mark(test)
