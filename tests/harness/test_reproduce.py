"""``python -m benchmarks --reproduce FAMILY`` on a planted family: cells, resumption, report, verdict, index."""

import json

import pytest

from benchmarks import cli, registry, reproduce
from benchmarks.registry import QualityBenchmark, QualityResult, Reproduction, Table, register, register_reproduction


@pytest.fixture
def planted(monkeypatch, tmp_path):
    saved, saved_rep = registry.registry(), registry.reproductions()
    registry.clear()
    monkeypatch.setattr(cli, "discover_suites", lambda: (["fake"], {}))
    configs = tmp_path / "configs"
    (configs / "reproduce").mkdir(parents=True)
    monkeypatch.setattr(reproduce, "REPO_CONFIGS", configs)
    monkeypatch.setattr(reproduce, "PACKAGED_CONFIGS", configs)
    calls = []

    def run(ctx):
        calls.append(dict(ctx.params))
        if ctx.params["size"] < 0:
            raise RuntimeError("planted failure")
        acc = 1.0 - 1.0 / ctx.params["size"]
        return QualityResult(tables=[Table("accuracy", ["size", "acc"], [[ctx.params["size"], (acc, 0.01)]])],
                             metrics={"acc": acc}, notes=["a note"])

    register(QualityBenchmark(name="fake.q", family="fake", run=run, params={"size": 2, "lr": 0.1}))

    def verdict(cells):
        best = max(m["acc"] for m in cells.values())
        return ("reproduced" if best > 0.9 else "not reproduced", f"best accuracy {best:.3f}")

    register_reproduction(Reproduction(family="fake", paper="A. Author, A paper, ICML 2024",
                                       claim="Bigger is better.", setup="Two sizes.", verdict=verdict))
    yield configs / "reproduce" / "fake.yaml", calls
    registry.clear()
    registry._REGISTRY.update(saved)
    registry._REPRODUCTIONS.update(saved_rep)


CELLS = """
cells:
  small: {benchmark: fake.q, params: {size: 4}, expected_s: 1}
  large: {benchmark: fake.q, params: {size: 20}, expected_s: 2}
gpu:
  cells:
    huge: {benchmark: fake.q, params: {size: 1000}}
"""


def _run(tmp_path, *extra):
    return cli.main(["--reproduce", "fake", "--out", str(tmp_path / "cells"), "--doc", str(tmp_path / "docs" / "fake.md"),
                     "--no-compile-cache", *extra])


def test_cells_run_report_and_index_then_a_rerun_skips_them(planted, tmp_path):
    path, calls = planted
    path.write_text(CELLS)
    assert _run(tmp_path) == 0
    assert [c["size"] for c in calls] == [4, 20] and calls[0]["lr"] == 0.1  # cell params over the defaults
    rec = json.loads((tmp_path / "cells" / "large.json").read_text())
    assert rec["status"] == "ok" and rec["metrics"] == {"acc": 0.95} and rec["cell_params"] == {"size": 20}
    doc = (tmp_path / "docs" / "fake.md").read_text()
    assert "**Verdict: reproduced.**" in doc and "best accuracy 0.950" in doc and "Bigger is better." in doc
    assert "0.95 ± 0.01" in doc and "a note" in doc and "python -m benchmarks --reproduce fake" in doc
    index = (tmp_path / "docs" / "README.md").read_text()
    assert "| [fake](fake.md) | Bigger is better. | reproduced |" in index
    assert _run(tmp_path) == 0 and len(calls) == 2  # resumed: nothing to run


def test_changed_params_rerun_that_cell_and_a_failed_cell_leaves_the_verdict_incomplete(planted, tmp_path):
    path, calls = planted
    path.write_text(CELLS)
    assert _run(tmp_path) == 0
    path.write_text(CELLS.replace("size: 20", "size: -1"))
    assert _run(tmp_path) == 1
    assert [c["size"] for c in calls] == [4, 20, -1]
    doc = (tmp_path / "docs" / "fake.md").read_text()
    assert "**Verdict: incomplete.**" in doc and "from 1 of 2 cells: **not reproduced**" in doc
    assert json.loads((tmp_path / "cells" / "large.json").read_text())["status"] == "error"
    path.write_text(CELLS)
    assert _run(tmp_path) == 0 and [c["size"] for c in calls][-1] == 20  # the failed cell runs again


def test_bad_cell_files_and_flags_are_usage_errors(planted, tmp_path, capsys):
    path, _ = planted
    assert _run(tmp_path) == 2
    assert "expected one of the families with a reproduction" in " ".join(capsys.readouterr().err.split())
    path.write_text("cells:\n  a: {benchmark: fake.q, params: {nope: 1}}\n")
    assert _run(tmp_path) == 2
    assert "unknown parameters ['nope']" in " ".join(capsys.readouterr().err.split())
    path.write_text("cells:\n  a: {benchmark: other.q}\n")
    assert _run(tmp_path) == 2
    assert "expected a benchmark of 'fake'" in " ".join(capsys.readouterr().err.split())
    path.write_text(CELLS)
    assert _run(tmp_path, "--suite", "fake") == 2
    assert "expected no --suite" in " ".join(capsys.readouterr().err.split())
    assert cli.main(["--doc", "x.md"]) == 2


def test_gpu_section_is_used_only_on_a_gpu(planted):
    path, _ = planted
    path.write_text(CELLS)
    assert list(reproduce.load_cells("fake", "cpu")[0]) == ["small", "large"]
    cells, which = reproduce.load_cells("fake", "gpu")
    assert which == "gpu" and list(cells) == ["huge"] and cells["huge"]["expected_s"] == 60.0


def test_every_shipped_cell_file_names_registered_benchmarks_and_parameters():
    cli.discover_suites()
    reg, reps = registry.registry(), registry.reproductions()
    for family in reproduce.available():
        assert family in reps, f"configs/reproduce/{family}.yaml has no registered Reproduction"
        for backend in ("cpu", "gpu"):
            cells, _ = reproduce.load_cells(family, backend)
            for name, cell in cells.items():
                b = reg[cell["benchmark"]]
                assert set(cell["params"]) <= set(b.params), (family, name)
