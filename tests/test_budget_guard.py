"""The default run's time guard and its per-test durations (tests/conftest.py, tests/README.md "Budgets")."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_a_default_test_over_the_cpu_limit_fails_a_sleeping_one_passes_and_durations_are_written(tmp_path):
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_planted.py").write_text(
        "import time, pytest\n"
        "def spin(s):\n    t = time.process_time()\n    while time.process_time() - t < s:\n        pass\n"
        "def test_quick():\n    pass\n"
        "def test_sleeps():\n    time.sleep(1.5)\n"
        "def test_slow_default():\n    spin(1.5)\n"
        "@pytest.mark.slow\ndef test_marked_slow():\n    spin(1.5)\n")
    env = dict(os.environ, JAXCORE_TEST_LIMIT_S="1", JAXCORE_TEST_DURATIONS=str(tmp_path / "d"),
               JAXCORE_COMPILE_CACHE="0")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q",
                           "-m", "slow or not slow", "-o", "markers=slow: x", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "1 failed, 3 passed" in out and "time guard: this default test used 1.5 s of CPU time" in out, out
    doc = json.loads((tmp_path / "d" / "tests-default.json").read_text())
    by_name = {k.split("::")[-1]: v for k, v in doc["durations_s"].items()}
    assert by_name["test_slow_default"] >= 1.5 and by_name["test_sleeps"] >= 1.5 and by_name["test_quick"] < by_name["test_sleeps"]
    assert doc["outcomes"]["test_planted.py::test_slow_default"] == "failed"
    assert doc["outcomes"]["test_planted.py::test_marked_slow"] == "passed"
