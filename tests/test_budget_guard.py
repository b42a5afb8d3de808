"""The default run's time guard and its per-test durations (tests/conftest.py, tests/README.md "Budgets")."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_a_default_test_over_the_limit_fails_and_durations_are_written(tmp_path):
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_planted.py").write_text(
        "import time, pytest\n"
        "def test_quick():\n    pass\n"
        "def test_slow_default():\n    time.sleep(1.5)\n"
        "@pytest.mark.slow\ndef test_marked_slow():\n    time.sleep(1.5)\n")
    env = dict(os.environ, JAXCORE_TEST_LIMIT_S="1", JAXCORE_TEST_DURATIONS=str(tmp_path / "d"),
               JAXCORE_COMPILE_CACHE="0")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q",
                           "-m", "slow or not slow", "-o", "markers=slow: x", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "1 failed, 2 passed" in out and "time guard: this default test took 1.5 s" in out, out
    doc = json.loads((tmp_path / "d" / "tests-default.json").read_text())
    by_name = {k.split("::")[-1]: v for k, v in doc["durations_s"].items()}
    assert 1.5 <= by_name["test_slow_default"] < 10 and by_name["test_quick"] < 1.0
    assert doc["outcomes"]["test_planted.py::test_slow_default"] == "failed"
    assert doc["outcomes"]["test_planted.py::test_marked_slow"] == "passed"
