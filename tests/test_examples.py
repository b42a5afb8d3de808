"""Every script in examples/ runs at its --small size and writes its figure (slow: one subprocess each)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))
TIMEOUT_S = 600  # cold compilation on a loaded 2-core machine; a warm run takes seconds


def test_examples_found():
    assert EXAMPLES, "examples/ holds no script"


@pytest.mark.slow
@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_small(script, tmp_path):
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)  # the test suite fakes 4 devices; the examples run as a user runs them
    env["MPLBACKEND"] = "Agg"
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(script), "--small", "--out", str(out)], cwd=script.parents[1],
                          env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"{script.name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert list(out.glob("*.png")), f"{script.name} wrote no PNG into {out}:\n{proc.stdout[-2000:]}"
    assert proc.stdout.strip(), f"{script.name} printed no results"
