"""Quality benchmarks on worker processes (``quality_workers``, ``benchmarks.parallel``)."""

import json
import sys
import textwrap

import pytest

from benchmarks import cli, parallel
from benchmarks.registry import QualityBenchmark, QualityResult, registry

FAST = ["ceilings.matmul_n=64", "ceilings.copy_mib=1", "ceilings.repeats=1"]


def _quality(name, family="fake", timed=False):
    return QualityBenchmark(name=name, family=family, run=lambda ctx: QualityResult(), timed=timed)


def test_only_untimed_quality_benchmarks_of_the_suites_are_shareable():
    cli.discover_suites()
    reg = registry()
    assert parallel.shareable(reg["ipm.power"], "quality")
    assert not parallel.shareable(reg["ipm.timing"], "quality")  # reports times: runs alone
    assert not parallel.shareable(reg["ipm.wow"], "size")
    assert not parallel.shareable(_quality("fake.q"), "quality")  # defined here: a worker cannot import it


def test_quality_workers_is_validated(tmp_path, capsys):
    assert cli.main(["--out", str(tmp_path / "o"), "--suite", "core", "quality_workers=0"]) == 2
    assert "quality_workers must be >= 1, got 0" in capsys.readouterr().err


def _script(tmp_path, body):
    path = tmp_path / "worker.py"
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path)]


def test_workers_that_never_start_hand_every_task_back(tmp_path):
    cmd = _script(tmp_path, """
        import sys
        sys.stdin.readline()
        sys.exit(3)
    """)
    tasks = [(_quality(f"fake.q{i}", family=f"f{i}"), "quality", {}) for i in range(3)]
    records = {}
    back = parallel.run_pool(tasks, workers=2, init={"timeout_s": 60}, out_dir=tmp_path, command=cmd,
                             on_record=records.__setitem__, on_progress=lambda text: None, max_restarts=2)
    assert sorted(back) == [0, 1, 2]
    assert records == {}


def test_a_dying_worker_costs_its_task_with_the_log_and_the_rest_go_on(tmp_path):
    # a worker that answers its first task and dies, printing to its log, on its second
    cmd = _script(tmp_path, """
        import json, sys
        json.loads(sys.stdin.readline())
        print(json.dumps({"ready": True}), flush=True)
        for n, line in enumerate(sys.stdin):
            i = json.loads(line)["task"]
            if n == 1:
                print("planted crash in task", i, file=sys.stderr, flush=True)
                sys.exit(7)
            rec = {"kind": "quality", "name": json.loads(line)["name"], "status": "ok", "wall_s": 0.0}
            print(json.dumps({"progress": i, "msg": "half way"}), flush=True)
            print(json.dumps({"done": i, "record": rec}), flush=True)
    """)
    tasks = [(_quality(f"fake.q{i}"), "quality", {"i": i}) for i in range(4)]  # one family: one worker at a time
    records, seen = {}, []
    back = parallel.run_pool(tasks, workers=2, init={"timeout_s": 60}, out_dir=tmp_path, command=cmd,
                             on_record=records.__setitem__, on_progress=seen.append)
    assert back == []
    assert sorted(records) == [0, 1, 2, 3]
    assert [records[i]["status"] for i in range(4)] == ["ok", "error", "ok", "error"]
    assert "exit status 7" in records[1]["error"] and "planted crash in task 1" in records[1]["error"]
    assert records[1]["params"] == {"i": 1}
    assert any("half way" in s for s in seen)


def test_figures_are_the_same_on_workers_and_in_one_process(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "_quality_workers", lambda cfg, backend, tasks: int(cfg.quality_workers))
    def run(workers):
        out = tmp_path / f"w{workers}"
        code = cli.main(["--out", str(out), "--config", "smoke", "--suite", "ipm.power,ipm.dp_approximation",
                         f"quality_workers={workers}", *FAST])
        return code, json.loads((out / "results.json").read_text()), out

    code2, doc2, out2 = run(2)
    code1, doc1, _ = run(1)
    assert code1 == code2 == 0
    assert doc2["quality_workers"] == 2 and "quality_workers" not in doc1
    by1 = {r["name"]: r for r in doc1["results"]}
    by2 = {r["name"]: r for r in doc2["results"]}
    assert set(by2) == {"ipm.power", "ipm.dp_approximation"}
    for name, rec in by2.items():
        assert rec["status"] == "ok", rec.get("error")
        assert rec["worker"] in (0, 1)
        assert rec["metrics"] == by1[name]["metrics"] and rec["tables"] == by1[name]["tables"]
    assert {r["worker"] for r in by2.values()} == {0}  # one family: one worker, sharing its programs
    assert (out2 / "workers" / "worker-0.log").exists()


@pytest.mark.parametrize("backend, expected", [("cpu", 2), ("gpu", 1)])
def test_workers_only_on_cpu_and_for_two_tasks(backend, expected):
    cli.discover_suites()
    reg = registry()

    class Cfg:
        quality_workers = 4

    tasks = [(reg["ipm.power"], "quality", {}), (reg["ipm.rates"], "quality", {}), (reg["sam.digits"], "quality", {})]
    assert cli._quality_workers(Cfg, backend, tasks) == expected
    assert cli._quality_workers(Cfg, "cpu", tasks[:2]) == 1  # one family


@pytest.mark.slow  # a worker process importing JAX and the harness: ~3 CPU-s, beyond the harness's default budget
def test_a_worker_uses_the_main_process_compile_cache_folder(tmp_path):
    import subprocess

    folder = tmp_path / "xla"

    def ready(cache):
        init = {"init": {"seed": 0, "out_dir": str(tmp_path), "compile_cache": cache}}
        proc = subprocess.run([sys.executable, "-m", "benchmarks.parallel"], input=json.dumps(init) + "\n",
                              capture_output=True, text=True, timeout=120, cwd=str(parallel.pathlib.Path(
                                  parallel.__file__).resolve().parent.parent))
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout.splitlines()[0])

    assert ready(str(folder)) == {"ready": True, "compile_cache": str(folder)}
    assert folder.is_dir()
    assert parallel._enable_compile_cache(None) is None  # --no-compile-cache: the worker runs cold
