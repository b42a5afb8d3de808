"""End-to-end behaviour of ``python -m benchmarks`` on planted benchmarks."""

import json
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import cli, registry
from benchmarks import results as results_mod
from benchmarks.registry import (
    Baseline, BaselineNotRun, Case, QualityBenchmark, QualityResult, Scaling, SpeedBenchmark, Table, register,
)

FAST = ["repeats=2", "max_time_s=0.5", "ceilings.matmul_n=64", "ceilings.copy_mib=1", "ceilings.repeats=1"]


def _setup(size, key):
    return Case(args=(jnp.arange(size["n"], dtype=jnp.float32),), work=size["n"], work_unit="elements")


def _boom(x):
    raise RuntimeError("planted failure")


@pytest.fixture
def planted(monkeypatch):
    """Replace the registry by planted benchmarks for the duration of a test."""
    saved, saved_rep = registry.registry(), registry.reproductions()
    registry.clear()
    monkeypatch.setattr(cli, "discover_suites", lambda: (["fake"], {}))
    yield register
    registry.clear()
    registry._REGISTRY.update(saved)
    registry._REPRODUCTIONS.update(saved_rep)  # a suite imported before this test keeps its reproduction


def _run(tmp_path, *argv):
    out = tmp_path / "out"
    code = cli.main(["--out", str(out), "--quick", *argv, *FAST])
    doc = json.loads((out / "results.json").read_text())
    return code, doc, out


def _by_name(doc):
    return {r["name"]: r for r in doc["results"]}


def test_good_kernel_is_timed_against_agreeing_baseline(planted, tmp_path):
    planted(SpeedBenchmark(
        name="fake.double", family="fake", kernel=lambda x: 2 * x, setup=_setup,
        sizes=[{"n": 64}], baselines=[Baseline("numpy", lambda x: 2 * x)],
        scaling=Scaling("n", [16, 64, 256]), target={"numpy": 1e-9},
    ))
    code, doc, out = _run(tmp_path, "--scaling")
    assert code == 0
    assert doc["status"] == "complete"
    rec = _by_name(doc)["fake.double"]
    assert rec["status"] == "ok"
    assert rec["kernel"]["compile_s"] > 0
    assert len(rec["kernel"]["times_s"]) == rec["repeats"] >= 2
    b = rec["baselines"]["numpy"]
    assert b["status"] == "ok" and b["speedup"] > 0 and b["target_met"] is True
    assert len(b["times_s"]) == len(rec["kernel"]["times_s"])  # interleaved pairs
    assert rec["throughput"] == pytest.approx(64 / rec["kernel"]["median_s"])
    assert doc["ceilings"]["matmul_flops_per_s"] > 0 and doc["ceilings"]["copy_bytes_per_s"] > 0
    [sc] = doc["scaling"]
    assert sc["status"] == "ok" and sc["values"] == [16, 64, 256] and sc["works"] == [16.0, 64.0, 256.0]
    assert np.isfinite(sc["slope"]) and sc["slope"] == pytest.approx(sc["slope_work"])
    assert (out / "report.md").read_text().count("fake.double") >= 2
    assert list((out / "plots").glob("*.png")), "no PNG written"
    for key in ("cpu_model", "cores", "backend", "device_kind", "device_count", "jax", "jaxlib", "python",
                "git_commit"):
        assert key in doc["machine"]


def test_raising_kernel_keeps_other_results_and_exits_nonzero(planted, tmp_path):
    planted(SpeedBenchmark(name="fake.a_boom", family="fake", kernel=_boom, setup=_setup, sizes=[{"n": 8}]))
    planted(SpeedBenchmark(name="fake.b_ok", family="fake", kernel=lambda x: x + 1, setup=_setup, sizes=[{"n": 8}]))
    code, doc, _ = _run(tmp_path)
    assert code == 1
    recs = _by_name(doc)
    assert recs["fake.a_boom"]["status"] == "error"
    assert "planted failure" in recs["fake.a_boom"]["error"]
    assert recs["fake.b_ok"]["status"] == "ok" and recs["fake.b_ok"]["kernel"]["median_s"] > 0
    assert doc["status"] == "failed"


def test_disagreeing_baseline_is_reported_wrong_and_nothing_is_timed(planted, tmp_path):
    planted(SpeedBenchmark(
        name="fake.sum", family="fake", kernel=lambda x: jnp.sum(x), setup=_setup, sizes=[{"n": 10}],
        baselines=[Baseline("off_by_one", lambda x: np.sum(x) + 1.0), Baseline("right", lambda x: np.sum(x)),
                   Baseline("absent", lambda x: x, requires=("no_such_module_xyz",))],
    ))
    planted(SpeedBenchmark(name="fake.z_ok", family="fake", kernel=lambda x: x, setup=_setup, sizes=[{"n": 4}],
                           baselines=[Baseline("right", lambda x: x)]))
    code, doc, out = _run(tmp_path)
    assert code == 1
    rec = _by_name(doc)["fake.sum"]
    assert rec["status"] == "wrong"
    assert "median_s" not in rec["kernel"], "a kernel that disagrees with a baseline must not be timed"
    wrong = rec["baselines"]["off_by_one"]
    assert wrong["status"] == "wrong" and "median_s" not in wrong
    assert "45" in wrong["error"] and "46" in wrong["error"]  # the values that disagree are shown
    assert "median_s" not in rec["baselines"]["right"]
    absent = rec["baselines"]["absent"]
    assert absent["status"] == "unavailable" and "pip install" in absent["error"]
    assert _by_name(doc)["fake.z_ok"]["status"] == "ok"
    assert "**wrong**" in (out / "report.md").read_text()


def test_nonfinite_kernel_is_wrong_and_not_timed(planted, tmp_path):
    planted(SpeedBenchmark(name="fake.nan", family="fake", kernel=lambda x: jnp.log(x - 1.0), setup=_setup,
                           sizes=[{"n": 4}]))
    planted(SpeedBenchmark(name="fake.inf_ok", family="fake", kernel=lambda x: jnp.log(x), setup=_setup,
                           sizes=[{"n": 4}], allow_nonfinite=True))
    code, doc, _ = _run(tmp_path)
    recs = _by_name(doc)
    assert code == 1
    assert recs["fake.nan"]["status"] == "wrong" and "not finite" in recs["fake.nan"]["error"]
    assert "median_s" not in recs["fake.nan"]["kernel"]
    assert recs["fake.inf_ok"]["status"] == "ok"  # log(0) = -inf is declared legitimate


def test_structure_and_complex_outputs_are_compared_exactly(planted, tmp_path):
    planted(SpeedBenchmark(name="fake.cplx", family="fake", kernel=lambda x: x + 1j * x, setup=_setup,
                           sizes=[{"n": 4}], baselines=[Baseline("conj", lambda x: x - 1j * x)]))
    planted(SpeedBenchmark(name="fake.tree", family="fake", kernel=lambda x: {"a": 2 * x, "b": 3 * x},
                           setup=_setup, sizes=[{"n": 4}],
                           baselines=[Baseline("list", lambda x: [2 * x, 3 * x]),
                                      Baseline("dict", lambda x: {"b": 3 * x, "a": 2 * x})]))
    planted(SpeedBenchmark(name="fake.tuple", family="fake", kernel=lambda x: (x, 2 * x), setup=_setup,
                           sizes=[{"n": 4}], baselines=[Baseline("list", lambda x: [x, 2 * x])]))
    code, doc, _ = _run(tmp_path)
    recs = _by_name(doc)
    assert recs["fake.cplx"]["baselines"]["conj"]["status"] == "wrong"
    assert "structures differ" in recs["fake.tree"]["baselines"]["list"]["error"]
    assert recs["fake.tree"]["baselines"]["dict"]["status"] == "ok"
    assert recs["fake.tuple"]["status"] == "ok"  # lists and tuples are interchangeable


def test_custom_check_is_used(planted, tmp_path):
    def check(k, b, case):
        assert float(k) == pytest.approx(float(b), rel=0.5), "too far"

    planted(SpeedBenchmark(
        name="fake.loose", family="fake", kernel=lambda x: jnp.sum(x), setup=_setup, sizes=[{"n": 10}],
        baselines=[Baseline("close", lambda x: np.sum(x) * 1.2)], check=check,
    ))
    code, doc, _ = _run(tmp_path)
    assert code == 0
    assert _by_name(doc)["fake.loose"]["baselines"]["close"]["status"] == "ok"


def test_timeout_is_recorded_and_run_continues(planted, tmp_path):
    def slow_setup(size, key):
        time.sleep(5)
        return _setup(size, key)

    planted(SpeedBenchmark(name="fake.a_slow", family="fake", kernel=lambda x: x, setup=slow_setup, sizes=[{"n": 4}]))
    planted(SpeedBenchmark(name="fake.b_ok", family="fake", kernel=lambda x: x, setup=_setup, sizes=[{"n": 4}]))
    code, doc, _ = _run(tmp_path, "timeout_s=1")
    assert code == 1
    recs = _by_name(doc)
    assert recs["fake.a_slow"]["status"] == "timeout"
    assert recs["fake.b_ok"]["status"] == "ok"


def test_interrupt_keeps_results(planted, tmp_path):
    def interrupt(size, key):
        raise KeyboardInterrupt

    planted(SpeedBenchmark(name="fake.a_ok", family="fake", kernel=lambda x: x, setup=_setup, sizes=[{"n": 4}]))
    planted(SpeedBenchmark(name="fake.b_int", family="fake", kernel=lambda x: x, setup=interrupt, sizes=[{"n": 4}]))
    code, doc, _ = _run(tmp_path)
    assert code == 130
    assert doc["status"] == "interrupted"
    assert _by_name(doc)["fake.a_ok"]["status"] == "ok"


def test_quality_benchmark_tables_are_kept(planted, tmp_path):
    def run(ctx):
        assert ctx.quick and ctx.params["epochs"] == 1 and ctx.params["lr"] == 0.5
        return QualityResult(tables=[Table("acc", ["method", "accuracy"], [["a", (0.9, 0.01)], ["b", 0.8]])],
                             metrics={"a.acc": 0.9})

    planted(QualityBenchmark(name="fake.q", family="fake", run=run, params={"epochs": 10, "lr": 0.1},
                             quick_params={"epochs": 1}))
    code, doc, out = _run(tmp_path, "quality.fake.q.lr=0.5")
    assert code == 0
    rec = _by_name(doc)["fake.q"]
    assert rec["tables"][0]["rows"][0] == ["a", [0.9, 0.01]]
    assert rec["metrics"] == {"a.acc": 0.9}
    assert "0.9 ± 0.01" in (out / "report.md").read_text()


def test_compare_flag_marks_regression(planted, tmp_path):
    def sleepy(x):
        # at least 20 ms per call, whatever the machine's load
        return jax.pure_callback(lambda v: (time.sleep(0.02), v)[1], jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    planted(SpeedBenchmark(name="fake.k", family="fake", kernel=sleepy, setup=_setup, sizes=[{"n": 32}]))
    previous = results_mod.new_document("prev", {"backend": "cpu"}, {})
    previous["results"] = [{"kind": "speed", "name": "fake.k", "family": "fake", "size": {"n": 32}, "status": "ok",
                            "kernel": {"median_s": 0.002, "iqr_s": 0.0001, "times_s": [0.002] * 5}}]
    prev_path = tmp_path / "prev.json"
    results_mod.write_json_atomic(prev_path, previous)
    out = tmp_path / "out"
    code = cli.main(["--out", str(out), "--quick", "--compare", str(prev_path), *FAST])
    doc = json.loads((out / "results.json").read_text())
    assert code == 0
    [row] = doc["comparison"]
    assert row["verdict"] == "slower" and row["ratio"] >= 10
    assert any("cpu_model" in w for w in doc["comparison_warnings"])  # the planted run names no CPU
    assert "SLOWER" in (out / "report.md").read_text()


def test_compare_file_is_checked_before_anything_runs(planted, tmp_path, capsys):
    planted(SpeedBenchmark(name="fake.k", family="fake", kernel=lambda x: x, setup=_setup, sizes=[{"n": 2}]))
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    out = tmp_path / "never"
    assert cli.main(["--out", str(out), "--compare", str(bad)]) == 2
    assert "--compare" in capsys.readouterr().err
    assert not out.exists()


def test_markup_in_messages_is_printed_verbatim(planted, tmp_path, capsys):
    def raises(x):
        raise ValueError("x must have shape [n], got [/n]")

    planted(SpeedBenchmark(name="fake.a", family="fake", kernel=raises, setup=_setup, sizes=[{"n": 2}]))
    planted(SpeedBenchmark(name="fake.b", family="fake", kernel=lambda x: x, setup=_setup, sizes=[{"n": 2}]))
    code, doc, _ = _run(tmp_path)
    assert code == 1 and _by_name(doc)["fake.b"]["status"] == "ok"
    assert "got [/n]" in capsys.readouterr().err


def test_a_baseline_that_declines_a_size_is_not_a_failure(planted, tmp_path):
    def declines(x):
        raise BaselineNotRun("not run above n = 8: too slow")

    planted(SpeedBenchmark(name="fake.declined", family="fake", kernel=lambda x: 2 * x, setup=_setup,
                           sizes=[{"n": 64}], baselines=[Baseline("numpy", lambda x: 2 * x),
                                                         Baseline("slow-peer", declines)]))
    code, doc, _ = _run(tmp_path)
    base = _by_name(doc)["fake.declined"]["baselines"]
    assert code == 0 and doc["status"] == "complete"
    assert base["slow-peer"]["status"] == "not run" and "n = 8" in base["slow-peer"]["error"]
    assert base["numpy"]["status"] == "ok" and base["numpy"]["speedup"] > 0
    planted(SpeedBenchmark(name="fake.raises", family="fake", kernel=lambda x: 2 * x, setup=_setup,
                           sizes=[{"n": 64}], baselines=[Baseline("broken", _boom)]))
    code, doc, _ = _run(tmp_path)  # any other exception from a baseline still fails the run
    assert code == 1 and _by_name(doc)["fake.raises"]["baselines"]["broken"]["status"] == "error"


def test_malformed_quality_result_is_an_error_not_a_crash(planted, tmp_path):
    planted(QualityBenchmark(name="fake.q1", family="fake", run=lambda ctx: QualityResult(
        tables=[Table("t", ["a", "b"], [[1]])])))
    planted(QualityBenchmark(name="fake.q2", family="fake", run=lambda ctx: None))
    planted(QualityBenchmark(name="fake.q3", family="fake", run=lambda ctx: QualityResult(
        tables=[Table("t", ["a"], [[np.float32(0.5)], [(np.float32(0.5), np.float32(0.1))]], note=5)],
        notes="one note", metrics={"m": float("nan")})))
    planted(SpeedBenchmark(name="fake.z", family="fake", kernel=lambda x: x, setup=_setup, sizes=[{"n": 2}]))
    code, doc, out = _run(tmp_path)
    recs = _by_name(doc)
    assert recs["fake.q1"]["status"] == "error" and "row 0 has 1 cells for 2 columns" in recs["fake.q1"]["error"]
    assert recs["fake.q2"]["status"] == "error" and "QualityResult" in recs["fake.q2"]["error"]
    q3 = recs["fake.q3"]
    assert q3["status"] == "ok" and q3["tables"][0]["rows"] == [[0.5], [[0.5, pytest.approx(0.1)]]]
    assert q3["notes"][0] == "one note" and "metric m is nan" in q3["notes"][1]
    assert recs["fake.z"]["status"] == "ok"
    assert "0.5 ± 0.1" in (out / "report.md").read_text()


def test_scaling_keeps_points_measured_before_a_failure(planted, tmp_path):
    def setup(size, key):
        if size["n"] > 64:
            raise MemoryError("too big")
        return _setup(size, key)

    planted(SpeedBenchmark(name="fake.s", family="fake", kernel=lambda x: x * 2, setup=setup, sizes=[{"n": 16}],
                           scaling=Scaling("n", [16, 32, 64, 128])))
    code, doc, _ = _run(tmp_path, "--scaling")
    [sc] = doc["scaling"]
    assert code == 1 and sc["status"] == "error" and "too big" in sc["error"]
    assert sc["values"] == [16, 32, 64] and len(sc["medians_s"]) == 3 and sc["slope"] is not None


def test_unwritable_out_is_a_usage_error(planted, tmp_path, capsys):
    planted(SpeedBenchmark(name="fake.k", family="fake", kernel=lambda x: x, setup=_setup, sizes=[{"n": 2}]))
    f = tmp_path / "file"
    f.write_text("")
    assert cli.main(["--out", str(f / "sub"), "--quick", *FAST]) == 2
    assert "--out: cannot write" in capsys.readouterr().err


def test_baseline_requires_must_be_a_sequence():
    with pytest.raises(TypeError, match="requires must be a sequence"):
        Baseline("b", lambda x: x, requires="scipy")


def test_backend_error_lists_available(capsys):
    code = cli.main(["--backend", "tpu", "--list"])
    err = capsys.readouterr().err
    assert code == 2
    assert "no TPU backend" in err and "available: cpu" in err


def test_unknown_suite_and_bad_flags(planted, capsys):
    planted(SpeedBenchmark(name="fake.k", family="fake", kernel=lambda x: x, setup=_setup, sizes=[{"n": 2}]))
    assert cli.main(["--suite", "nope", "--list"]) == 2
    assert cli.main(["--suite", ","]) == 2
    assert cli.main(["--suite", "nope"]) == 2
    assert "--suite: expected a family (fake), a benchmark name or a glob" in " ".join(capsys.readouterr().err.split())
    assert cli.main(["--repeats", "0"]) == 2
    assert cli.main(["--config", "/no/such.yaml"]) == 2
    assert cli.main(["not_a_key=3"]) == 2
    assert cli.main(["repeats=abc"]) == 2
    assert cli.main(["benchmarks.fake.k.sizes=[4]", "--quick"]) == 2
    assert cli.main(["benchmarks.fake.kk.sizes=[{n: 4}]"]) == 2
    assert "unknown benchmark 'fake.kk'" in capsys.readouterr().err


def test_suite_selects_benchmarks_and_globs(planted, tmp_path):
    for name in ("fake.alpha_one", "fake.alpha_two", "fake.beta"):
        planted(SpeedBenchmark(name=name, family="fake", kernel=lambda x: x, setup=_setup, sizes=[{"n": 2}]))
    names = lambda doc: sorted(r["name"] for r in doc["results"])  # noqa: E731
    assert names(_run(tmp_path, "--suite", "fake.beta")[1]) == ["fake.beta"]
    assert names(_run(tmp_path, "--suite", "fake.alpha_*")[1]) == ["fake.alpha_one", "fake.alpha_two"]
    assert names(_run(tmp_path, "--suite", "fake.beta,fake.*_two,fake.beta")[1]) == ["fake.alpha_two", "fake.beta"]
    assert names(_run(tmp_path, "--suite", "fake")[1]) == ["fake.alpha_one", "fake.alpha_two", "fake.beta"]
    assert cli.main(["--suite", "fake.gamma*", "--list"]) == 2


def test_config_by_name_from_any_directory(planted, tmp_path, monkeypatch, capsys):
    from benchmarks.config import PACKAGED_CONFIGS, REPO_CONFIGS, load_config, resolve_config

    monkeypatch.chdir(tmp_path)
    for name in ("smoke", "smoke.yaml", "configs/smoke.yaml"):
        assert resolve_config(name).resolve() == (REPO_CONFIGS / "smoke.yaml").resolve()
    assert load_config("smoke").quick is True and load_config("full").quick is False
    # the installed copy (package data) is the same file as the repository's
    assert (PACKAGED_CONFIGS / "smoke.yaml").read_text() == (REPO_CONFIGS / "smoke.yaml").read_text()
    (tmp_path / "smoke.yaml").write_text("repeats: 4\n")  # a file in the working directory wins
    assert load_config("smoke.yaml").repeats == 4
    assert cli.main(["--config", "nonsense", "--list"]) == 2
    assert "one of the shipped configurations default, full, smoke" in " ".join(capsys.readouterr().err.split())


def test_list_fits_the_terminal(planted, capsys, monkeypatch):
    planted(SpeedBenchmark(name="fake.listed_with_a_long_name", family="fake", kernel=lambda x: x, setup=_setup,
                           sizes=[{"n": 2, "m": 3, "batch": 4}], description="a planted kernel " * 6))
    monkeypatch.setenv("COLUMNS", "70")
    assert cli.main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and max(len(line) for line in lines) <= 70


def test_list_shows_registered(planted, capsys):
    planted(SpeedBenchmark(name="fake.listed", family="fake", kernel=lambda x: x, setup=_setup, sizes=[{"n": 2}],
                           description="a planted kernel"))
    assert cli.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "fake.listed" in out and "a planted kernel" in out


def test_register_validates_names(planted):
    with pytest.raises(ValueError, match="must start with its family"):
        register(SpeedBenchmark(name="other.k", family="fake", kernel=lambda x: x, setup=_setup, sizes=[]))
    register(SpeedBenchmark(name="fake.k", family="fake", kernel=lambda x: x, setup=_setup, sizes=[]))
    with pytest.raises(ValueError, match="registered twice"):
        register(SpeedBenchmark(name="fake.k", family="fake", kernel=lambda x: x, setup=_setup, sizes=[]))


def test_x64_flag_is_applied(planted, tmp_path):
    seen = {}

    def setup(size, key):
        seen["dtype"] = jnp.ones(1).dtype
        return _setup(size, key)

    planted(SpeedBenchmark(name="fake.k", family="fake", kernel=lambda x: x, setup=setup, sizes=[{"n": 2}]))
    try:
        code, doc, _ = _run(tmp_path, "--x64")
    finally:
        jax.config.update("jax_enable_x64", False)
    assert code == 0
    assert seen["dtype"] == jnp.float64 and doc["machine"]["x64"] is True


def test_module_entry_point_lists_core_suite():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--list"], capture_output=True, text=True,
                          timeout=300)
    assert "core.matmul" in proc.stdout and "core.logsumexp" in proc.stdout, proc.stderr[-2000:]


def test_check_rel_norm_per_leaf():
    """The GPU agreement check: relative Euclidean norm of the difference, leaf by leaf, named."""
    b = {"a": np.ones(100), "g": np.linspace(-1.0, 1.0, 50)}
    k = {"a": np.ones(100) * (1 + 5e-3), "g": b["g"].copy()}
    registry.check_rel_norm(k, b)  # 5e-3 <= 1e-2
    k["g"][3] += 0.2 * np.linalg.norm(b["g"])  # a relative error of 0.2 on leaf g
    with pytest.raises(AssertionError, match=r"\['g'\]: relative norm of the difference 2.00e-01"):
        registry.check_rel_norm(k, b)
    with pytest.raises(AssertionError, match="not finite"):
        registry.check_rel_norm({"a": np.full(100, np.nan), "g": b["g"]}, b)
    with pytest.raises(AssertionError, match="shapes differ"):
        registry.check_rel_norm({"a": np.ones(99), "g": b["g"]}, b)
    with pytest.raises(AssertionError, match="leaves"):
        registry.check_rel_norm({"a": np.ones(100)}, b)


def test_torch_baselines_run_on_the_kernel_device():
    pytest.importorskip("torch")
    import torch

    expected = "cuda" if jax.default_backend() == "gpu" and torch.cuda.is_available() else "cpu"
    assert registry.torch_device() == expected


def test_task_keys_do_not_depend_on_the_selection(planted, tmp_path):
    """A benchmark draws the same random data whether it runs alone or after others."""

    def run(ctx):
        draw = float(jax.random.uniform(ctx.key))
        return QualityResult(tables=[Table("draw", ["value"], [[draw]])], metrics={"draw": draw})

    planted(QualityBenchmark(name="fake.a", family="fake", run=run))
    planted(QualityBenchmark(name="fake.b", family="fake", run=run))
    _, both, _ = _run(tmp_path / "both")
    _, alone, _ = _run(tmp_path / "alone", "quality.fake.a.skip=true")
    assert "fake.a" not in _by_name(alone)
    b_both, b_alone = _by_name(both)["fake.b"]["metrics"]["draw"], _by_name(alone)["fake.b"]["metrics"]["draw"]
    assert b_both == b_alone
    assert _by_name(both)["fake.a"]["metrics"]["draw"] != b_both
    k1 = cli.task_key(jax.random.key(0), "x.y", "size", {"n": 1, "m": 2})
    k2 = cli.task_key(jax.random.key(0), "x.y", "size", {"m": 2, "n": 1})
    k3 = cli.task_key(jax.random.key(0), "x.y", "size", {"n": 2, "m": 2})
    assert np.array_equal(jax.random.key_data(k1), jax.random.key_data(k2))
    assert not np.array_equal(jax.random.key_data(k1), jax.random.key_data(k3))


def test_malformed_compare_record_is_a_usage_error_before_the_run(planted, tmp_path, capsys):
    planted(SpeedBenchmark(name="fake.k", family="fake", kernel=lambda x: x, setup=_setup, sizes=[{"n": 2}]))
    previous = results_mod.new_document("prev", {"backend": "cpu"}, {})
    previous["results"] = [{"kind": "speed", "name": "fake.k", "family": "fake", "size": {"n": 2}, "status": "ok",
                            "kernel": {"median_s": 0.002, "iqr_s": 0.0, "times_s": 5}}]
    prev_path = tmp_path / "prev.json"
    results_mod.write_json_atomic(prev_path, previous)
    out = tmp_path / "never"
    assert cli.main(["--out", str(out), "--compare", str(prev_path), *FAST]) == 2
    err = capsys.readouterr().err
    assert "times_s" in err and "results[0]" in err
    assert not out.exists()


def test_unknown_size_parameter_is_a_usage_error(planted, tmp_path, capsys):
    planted(SpeedBenchmark(name="fake.k", family="fake", kernel=lambda x: x, setup=_setup, sizes=[{"n": 2}]))
    out = tmp_path / "never"
    code = cli.main(["--out", str(out), *FAST, "benchmarks.fake.k.sizes=[{m: 64}]"])
    assert code == 2
    err = capsys.readouterr().err
    assert "fake.k" in err and "'n'" in err
    assert not out.exists()


def test_interrupt_during_startup_is_clean(planted, tmp_path, capsys, monkeypatch):
    def interrupt():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "discover_suites", interrupt)
    assert cli.main(["--out", str(tmp_path / "o"), *FAST]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_interrupt_after_the_loop_leaves_status_interrupted(planted, tmp_path, monkeypatch):
    from benchmarks import report

    def interrupt(*a, **k):
        raise KeyboardInterrupt

    planted(SpeedBenchmark(name="fake.a_ok", family="fake", kernel=lambda x: x, setup=_setup, sizes=[{"n": 4}]))
    monkeypatch.setattr(report, "plots", interrupt)
    code, doc, _ = _run(tmp_path)
    assert code == 130
    assert doc["status"] == "interrupted"
    assert _by_name(doc)["fake.a_ok"]["status"] == "ok"


def test_results_files_are_group_readable(tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        results_mod.write_text_atomic(tmp_path / "r.md", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.md").stat().st_mode) == 0o644


def test_compile_cache_is_on_by_default_and_recorded(planted, tmp_path, monkeypatch):
    monkeypatch.delenv("JAXCORE_COMPILE_CACHE", raising=False)
    planted(SpeedBenchmark(name="fake.cached", family="fake", kernel=lambda x: jnp.cumsum(x) * 2.0, setup=_setup,
                           sizes=[{"n": 3}], baselines=[Baseline("numpy", lambda x: np.cumsum(x) * 2.0)]))
    code, doc, _ = _run(tmp_path, "--no-compile-cache")
    assert code == 0 and doc["compile_cache"] is None
    code, doc, out = _run(tmp_path)
    assert code == 0 and pathlib.Path(doc["compile_cache"]).parent.name == "xla"  # one folder per host CPU
    assert isinstance(_by_name(doc)["fake.cached"]["kernel"]["compile_cached"], bool)
    assert "--no-compile-cache" in (out / "report.md").read_text()


def test_device_scaling_shards_the_batch_and_reports_efficiency(planted, tmp_path):
    if len(jax.devices()) < 4:
        pytest.skip("needs 4 (fake) devices from tests/conftest.py")

    def setup(size, key):
        x = jax.random.normal(key, (size["batch"], 8))
        return Case(args=(x, jnp.ones((8,))), work=size["batch"], work_unit="rows")

    planted(SpeedBenchmark(name="fake.rows", family="fake", kernel=lambda x, w: jnp.tanh(x) @ w, setup=setup,
                           sizes=[{"batch": 16}], batch_param="batch"))
    planted(SpeedBenchmark(name="fake.nobatch", family="fake", kernel=lambda x, w: x @ w, setup=setup,
                           sizes=[{"batch": 16}]))
    code, doc, out = _run(tmp_path, "--scaling", "devices")
    assert code == 0, doc
    dev = {s["mode"]: s for s in doc["scaling"] if s["kind"] == "devices"}
    assert set(dev) == {"strong", "weak"} and all(s["name"] == "fake.rows" for s in dev.values())
    assert dev["strong"]["devices"] == [1, 2, 4] and dev["strong"]["output_sharded"][1:] == [True, True]
    assert dev["strong"]["efficiency"][0] == pytest.approx(1.0)
    assert all(e > 0 for e in dev["weak"]["efficiency"])
    assert "### Device scaling" in (out / "report.md").read_text()
    code, doc, _ = _run(tmp_path, "--devices", "2")
    assert code == 0 and [s["devices"] for s in doc["scaling"]] == [[1, 2], [1, 2]]
    assert cli.main(["--devices", "0", "--list"]) == 2
    assert cli.main(["--scaling", "nodes", "--list"]) == 2


def test_compile_cache_switch_in_the_environment(monkeypatch):
    import jaxcore

    monkeypatch.setenv("JAXCORE_COMPILE_CACHE", "0")
    assert jaxcore.enable_compilation_cache() is None
    with pytest.raises(ValueError, match="min_compile_time_s: expected"):
        monkeypatch.delenv("JAXCORE_COMPILE_CACHE")
        jaxcore.enable_compilation_cache(min_compile_time_s=-1.0)


def test_size_values_are_checked_at_config_time(planted, tmp_path, capsys):
    # issue 48 item 20: sizes=[{mib: -4}] and mib: abc failed inside the run (MLIRError / int()); mib: 0
    # ran "ok" with no work.
    planted(SpeedBenchmark(name="fake.k", family="fake", kernel=lambda x: x, setup=_setup, sizes=[{"n": 8}],
                           scaling=Scaling("n", [4, 8])))
    planted(SpeedBenchmark(name="fake.z", family="fake", kernel=lambda x: x, setup=_setup,
                           sizes=[{"n": 8}], zero_sizes=("n",)))
    out = str(tmp_path / "out")
    for value, what in (("-4", "-4"), ("abc", "'abc'"), ("0", "0"), ("2.5", "2.5"), (".nan", "nan")):
        assert cli.main(["--out", out, "--suite", "fake.k", f"benchmarks.fake.k.sizes=[{{n: {value}}}]"]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"benchmarks.fake.k.sizes: n: expected an int > 0, got {what}" in err, err
    assert not (tmp_path / "out" / "results.json").exists()  # refused before the run started
    assert cli.main(["--out", out, "--suite", "fake.k", "--scaling", "benchmarks.fake.k.scaling={param: n, values: [4, -1]}"]) == 2
    assert "benchmarks.fake.k.scaling.values: n: expected an int > 0, got -1" in " ".join(capsys.readouterr().err.split())
    # a declared sentinel 0 is allowed, a negative is not; valid sizes still run
    assert cli.main(["--out", out, "--suite", "fake.z", "benchmarks.fake.z.sizes=[{n: -1}]"]) == 2
    assert "expected an int >= 0, got -1" in " ".join(capsys.readouterr().err.split())
    code, doc, _ = _run(tmp_path, "--suite", "fake.k", "benchmarks.fake.k.quick_sizes=[{n: 4}]")
    assert code == 0 and [r["size"] for r in doc["results"]] == [{"n": 4}]
