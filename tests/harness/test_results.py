"""Results document: schema round trip, validation, and --compare."""

import json

import pytest

from benchmarks import results


def _speed(name, median, iqr, size=None):
    return {"kind": "speed", "name": name, "family": name.split(".")[0], "size": size or {"n": 1},
            "status": "ok", "kernel": {"median_s": median, "iqr_s": iqr}, "baselines": {}}


def _doc(records):
    doc = results.new_document("r", {"backend": "cpu"}, {"repeats": 3})
    doc["results"] = records
    return doc


def test_schema_round_trip(tmp_path):
    doc = _doc([_speed("core.a", 0.5, 0.01)])
    doc["ceilings"] = {"matmul_flops_per_s": float("nan")}  # non-finite becomes null, never invalid JSON
    path = tmp_path / "results.json"
    results.write_json_atomic(path, doc)
    back = results.load(path)
    assert back["schema"] == results.SCHEMA
    assert back["schema_version"] == results.SCHEMA_VERSION
    assert back["results"] == doc["results"]
    assert back["ceilings"]["matmul_flops_per_s"] is None
    assert not list(tmp_path.glob("*.tmp")), "the atomic write left a temporary file"


def test_load_rejects_foreign_and_newer_files(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"schema": "other"}))
    with pytest.raises(results.SchemaError, match="not a jaxcore"):
        results.load(p)
    doc = _doc([])
    doc["schema_version"] = results.SCHEMA_VERSION + 1
    p.write_text(json.dumps(doc))
    with pytest.raises(results.SchemaError, match="schema_version"):
        results.load(p)
    doc = _doc([])
    del doc["machine"]
    p.write_text(json.dumps(doc))
    with pytest.raises(results.SchemaError, match="machine"):
        results.load(p)


def test_compare_catches_planted_2x_regression_and_ignores_noise():
    old = _doc([_speed("f.slow", 1.0, 0.02), _speed("f.noisy", 1.0, 0.05), _speed("f.fast", 1.0, 0.01),
                _speed("f.gone", 1.0, 0.01)])
    new = _doc([_speed("f.slow", 2.0, 0.04), _speed("f.noisy", 1.07, 0.05), _speed("f.fast", 0.4, 0.01),
                _speed("f.new", 1.0, 0.01)])
    rows = {r["name"]: r for r in results.compare(old, new)}
    assert set(rows) == {"f.slow", "f.noisy", "f.fast"}
    assert rows["f.slow"]["verdict"] == "slower"
    assert rows["f.slow"]["ratio"] == pytest.approx(2.0)
    assert rows["f.noisy"]["verdict"] == "same"
    assert rows["f.fast"]["verdict"] == "faster"


def test_compare_matches_by_size():
    old = _doc([_speed("f.k", 1.0, 0.01, {"n": 1}), _speed("f.k", 10.0, 0.1, {"n": 10})])
    new = _doc([_speed("f.k", 1.0, 0.01, {"n": 1}), _speed("f.k", 30.0, 0.1, {"n": 10})])
    rows = results.compare(old, new)
    verdicts = {r["size"]["n"]: r["verdict"] for r in rows}
    assert verdicts == {1: "same", 10: "slower"}


def test_a_killed_run_reads_as_killed_and_a_live_one_as_running(tmp_path):
    # issue 48 item 20: SIGKILL left status "running" with nothing to tell it from a live run.
    import platform
    import signal
    import subprocess
    import sys

    from benchmarks import report

    doc = results.new_document("r", {"backend": "cpu", "hostname": platform.node()}, {})
    path = tmp_path / "results.json"
    results.write_json_atomic(path, doc)
    assert results.load(path)["status"] == "running"  # this process is alive
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    child.send_signal(signal.SIGKILL)
    child.wait()
    doc["pid"] = child.pid
    results.write_json_atomic(path, doc)
    assert results.load(path)["status"] == "killed"
    assert f"Status: **killed** (process {child.pid} is gone" in report.markdown(doc)
    doc["machine"]["hostname"] = platform.node() + "-elsewhere"  # cannot tell on another host
    assert results.run_status(doc) == "running"
    doc["status"] = "complete"
    assert results.run_status(doc) == "complete"
