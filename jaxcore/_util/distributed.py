"""Multi-process runs: one call that joins this process to a JAX distributed runtime."""

from __future__ import annotations

import os
from typing import NamedTuple

from .checks import expected

#: environment variables read when an argument of :func:`initialize_distributed` is not given
ENV_COORDINATOR = "JAXCORE_COORDINATOR_ADDRESS"
ENV_NUM_PROCESSES = "JAXCORE_NUM_PROCESSES"
ENV_PROCESS_ID = "JAXCORE_PROCESS_ID"


class DistributedInfo(NamedTuple):
    """Where this process stands in a multi-process run.

    Attributes:
        process_id: this process's index, ``0 <= process_id < num_processes``.
        num_processes: the number of processes in the run.
        num_local_devices: devices this process drives.
        num_devices: devices of all processes together (what a global mesh spans).
    """

    process_id: int
    num_processes: int
    num_local_devices: int
    num_devices: int


def _from_env(value, name: str, env: str, kind):
    if value is not None:
        return value
    raw = os.environ.get(env)
    if raw is None or raw == "":
        return None
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(expected(name, f"{'an integer' if kind is int else 'a string'} in ${env}", raw)) from None


def initialize_distributed(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    local_device_ids: list[int] | None = None,
) -> DistributedInfo:
    """Join this process to a multi-process JAX run (``jax.distributed.initialize``), then return its place.

    Launch the same script once per process (one per host, or several on one host for testing), each with
    the coordinator's address, the process count and its own id -- as arguments or in the environment
    variables ``JAXCORE_COORDINATOR_ADDRESS``, ``JAXCORE_NUM_PROCESSES``, ``JAXCORE_PROCESS_ID``. Without
    either, JAX's own cluster detection applies (SLURM, Open MPI, Cloud TPU, Kubernetes). On CPU the
    collectives run over gloo. After the call ``jax.devices()`` lists the devices of every process: build a
    global mesh of Auto axes over them (``jax.make_mesh(shape, names, axis_types=(AxisType.Auto,) * n)``:
    jaxcore refuses arrays on a mesh of Explicit axes, ``jax.make_mesh``'s default), place each process's part of a batch with
    ``jax.make_array_from_process_local_data``, and call the jaxcore kernels under ``jax.jit`` as on one
    host. Call it first, before any JAX computation.

    Args:
        coordinator_address: ``"host:port"`` of process 0's coordinator service.
        num_processes: number of processes, >= 1.
        process_id: this process's index in ``[0, num_processes)``.
        local_device_ids: restrict this process to these local devices (default: all).

    Returns:
        A :class:`DistributedInfo`.

    Raises:
        TypeError: ``coordinator_address`` not a string; a count or id not an int.
        ValueError: ``coordinator_address`` not ``host:port``; ``num_processes < 1``; ``process_id`` outside
            ``[0, num_processes)``; an environment variable that does not parse.
        RuntimeError: JAX has already run a computation in this process (from JAX, with its message).

    Examples:
        Two processes on one machine (``python run.py 0`` and ``python run.py 1``)::

            import sys, jax, jaxcore
            info = jaxcore.initialize_distributed("127.0.0.1:12355", 2, int(sys.argv[1]))
            mesh = jax.make_mesh((info.num_devices,), ("batch",), axis_types=(jax.sharding.AxisType.Auto,))
    """
    import jax

    from .checks import check_int

    coordinator_address = _from_env(coordinator_address, "coordinator_address", ENV_COORDINATOR, str)
    num_processes = _from_env(num_processes, "num_processes", ENV_NUM_PROCESSES, int)
    process_id = _from_env(process_id, "process_id", ENV_PROCESS_ID, int)
    if coordinator_address is not None:
        if not isinstance(coordinator_address, str):
            raise TypeError(expected("coordinator_address", "a 'host:port' string", coordinator_address))
        host, _, port = coordinator_address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(expected("coordinator_address", "'host:port'", coordinator_address))
    if num_processes is not None:
        num_processes = check_int(num_processes, "num_processes", minimum=1)
    if process_id is not None:
        process_id = check_int(process_id, "process_id", minimum=0)
        if num_processes is not None and process_id >= num_processes:
            raise ValueError(expected("process_id", f"an index in [0, {num_processes})", process_id))
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU devices only; GPUs use NCCL
    jax.distributed.initialize(coordinator_address, num_processes, process_id, local_device_ids=local_device_ids)
    return DistributedInfo(jax.process_index(), jax.process_count(), jax.local_device_count(), jax.device_count())
