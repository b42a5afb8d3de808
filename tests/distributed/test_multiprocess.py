"""Two local CPU processes joined by ``jaxcore.initialize_distributed`` run sharded kernels of two families.

Each process holds one CPU device and half of each batch; the sharded results must equal the whole batch
computed in one process. Slow: two fresh interpreters import JAX and compile (about 20 s on 2 cores).
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxcore

WORKER = Path(__file__).with_name("_worker.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_match_one(tmp_path):
    out, port = tmp_path / "result.npz", _free_port()
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # one CPU device per process
    env["JAX_PLATFORMS"] = "cpu"
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(i), str(port), str(out)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=300)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("the two-process run did not finish in 300 s")
    for i, (p, log) in enumerate(zip(procs, logs)):
        assert p.returncode == 0, f"process {i} failed:\n{log[-3000:]}"
        assert f"process {i} of 2: ok" in log
    r = np.load(out)
    spec = str(r["inverse_sharding_spec"])
    assert spec.split(",")[0] in ("P('batch'", "PartitionSpec('batch'"), spec  # the output kept the image layout
    assert r["inverse_sharded"].shape == (2, 2, 16, 16, 1)  # [images, seeds, H, W, C]
    np.testing.assert_allclose(r["inverse_sharded"], r["inverse_local"], atol=1e-5)
    assert not np.allclose(r["inverse_sharded"][0], r["inverse_sharded"][1])  # two different images
    np.testing.assert_allclose(r["sam_sharded"], r["sam_local"], rtol=1e-5, atol=1e-6)


def test_initialize_distributed_refuses_bad_arguments(monkeypatch):
    with pytest.raises(ValueError, match="coordinator_address: expected 'host:port'"):
        jaxcore.initialize_distributed("localhost", 2, 0)
    with pytest.raises(TypeError, match="coordinator_address: expected"):
        jaxcore.initialize_distributed(1234, 2, 0)
    with pytest.raises(ValueError, match="num_processes: expected"):
        jaxcore.initialize_distributed("127.0.0.1:1", 0, 0)
    with pytest.raises(ValueError, match=r"process_id: expected an index in \[0, 2\)"):
        jaxcore.initialize_distributed("127.0.0.1:1", 2, 2)
    monkeypatch.setenv("JAXCORE_NUM_PROCESSES", "two")
    with pytest.raises(ValueError, match=r"num_processes: expected an integer in \$JAXCORE_NUM_PROCESSES"):
        jaxcore.initialize_distributed("127.0.0.1:1", None, 0)
