"""``python -m benchmarks --reproduce <family>``: a paper's central claim at the scale that can show it.

A reproduction is a list of *cells*, each one run of a registered quality benchmark with its own
parameters, read from ``configs/reproduce/<family>.yaml``::

    cells:                              # run in order
      pairs-64:
        benchmark: alignment.toxicity   # a registered quality benchmark of the family
        params: {num_pairs: 64}         # overrides of its params (the bare run's sizes otherwise)
        expected_s: 600                 # the cell's measured cost on the 2-core CPU, for the ETA
        timeout_s: 3600                 # optional hard limit of the cell
    gpu:                                # optional: these cells instead when the backend is a GPU
      cells: {...}

Each cell's record is written as soon as it finishes (``<out>/<cell>.json``, by default under
``results/reproduce/<family>/``): a rerun skips every cell already finished with the same benchmark and
parameters, so a reproduction can run in pieces and an interrupted one loses at most the cell it was in.
After every cell the family's report is rewritten (``docs/reproductions/<family>.md`` in a checkout,
else ``<out>/<family>.md``): the claim, the setup, each cell's tables and figures, and the verdict that the
family's :class:`~benchmarks.registry.Reproduction` draws from the finished cells' metrics ("incomplete"
while cells are missing). ``docs/reproductions/README.md`` indexes every family's file.
"""

from __future__ import annotations

import json
import math
import pathlib
import shutil
import time
import zlib
from typing import Any

from . import results
from .config import PACKAGED_CONFIGS, REPO_CONFIGS

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
#: where the reports go in a checkout (``docs/`` beside ``benchmarks/``)
REPO_DOCS = REPO_ROOT / "docs" / "reproductions"
_META = "<!-- reproduction: "


class ReproductionError(Exception):
    """A reproduction that cannot start (no such family, a malformed cell file); exit status 2."""


def config_path(family: str) -> pathlib.Path:
    """The cell file of ``family``: ``configs/reproduce/<family>.yaml`` in a checkout or as installed.

    Raises:
        ReproductionError: no such file (the message lists the families that have one).
    """
    for folder in (REPO_CONFIGS / "reproduce", PACKAGED_CONFIGS / "reproduce"):
        p = folder / f"{family}.yaml"
        if p.is_file():
            return p
    raise ReproductionError(f"--reproduce: expected one of the families with a reproduction "
                            f"({', '.join(available()) or 'none'}), got {family!r}")


def available() -> list[str]:
    """The families that ship a ``configs/reproduce/<family>.yaml``."""
    found: set[str] = set()
    for folder in (REPO_CONFIGS / "reproduce", PACKAGED_CONFIGS / "reproduce"):
        if folder.is_dir():
            found.update(p.stem for p in folder.glob("*.yaml"))
    return sorted(found)


def load_cells(family: str, backend: str) -> tuple[dict[str, dict[str, Any]], str]:
    """The cells of ``family`` for ``backend`` (its ``gpu:`` section on a GPU when present), and which.

    Returns:
        ``({cell: {"benchmark", "params", "expected_s", "timeout_s"}}, "cpu" | "gpu")``.

    Raises:
        ReproductionError: the file is not a mapping with ``cells``, or a cell lacks ``benchmark``.
    """
    from omegaconf import OmegaConf

    path = config_path(family)
    raw = OmegaConf.to_container(OmegaConf.load(path)) or {}
    section, which = raw, "cpu"
    if backend == "gpu" and isinstance(raw.get("gpu"), dict) and raw["gpu"].get("cells"):
        section, which = raw["gpu"], "gpu"
    cells = section.get("cells")
    if not isinstance(cells, dict) or not cells:
        raise ReproductionError(f"{path}: expected a mapping 'cells: {{name: {{benchmark: ..., params: ...}}}}', "
                                f"got {cells!r}")
    out = {}
    for name, cell in cells.items():
        if not isinstance(cell, dict) or not isinstance(cell.get("benchmark"), str):
            raise ReproductionError(f"{path}: cells.{name}: expected a mapping with 'benchmark: <family>.<name>', "
                                    f"got {cell!r}")
        if not cell["benchmark"].startswith(family + "."):
            raise ReproductionError(f"{path}: cells.{name}.benchmark: expected a benchmark of {family!r}, "
                                    f"got {cell['benchmark']!r}")
        params = cell.get("params") or {}
        if not isinstance(params, dict):
            raise ReproductionError(f"{path}: cells.{name}.params: expected a mapping, got {params!r}")
        out[str(name)] = {"benchmark": cell["benchmark"], "params": params,
                          "expected_s": float(cell.get("expected_s", 60.0)),
                          "timeout_s": cell.get("timeout_s")}
    return out, which


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def _fmt_s(s: float) -> str:
    s = max(0.0, float(s))
    return f"{s / 60:.1f} min" if s >= 90 else f"{s:.0f} s"


def run(family: str, *, backend: str, out_dir: pathlib.Path | None, doc_path: pathlib.Path | None,
        seed: int, console: Any) -> int:
    """Run (or resume) ``family``'s reproduction; write its cells and report. Returns the exit status.

    0 when every cell has finished ok (now or in an earlier run), 1 when a cell failed (the others
    still ran), 130 on Ctrl-C (finished cells are kept and the report is written).

    Raises:
        ReproductionError: no cell file, no registered reproduction, or a cell naming an unknown
            benchmark or parameter.
    """
    import jax
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from . import cli, registry, runner

    cells, which = load_cells(family, backend)
    cli.discover_suites()
    rep = registry.reproductions().get(family)
    if rep is None:
        raise ReproductionError(f"--reproduce {family}: the suite benchmarks/suites/{family}.py registers no "
                                f"Reproduction (register_reproduction)")
    reg = registry.registry()
    for name, cell in cells.items():
        b = reg.get(cell["benchmark"])
        if b is None or b.kind != "quality":
            raise ReproductionError(f"cells.{name}.benchmark: expected a quality benchmark of {family} "
                                    f"({', '.join(n for n, x in reg.items() if x.family == family and x.kind == 'quality')}), "
                                    f"got {cell['benchmark']!r}")
        unknown = set(cell["params"]) - set(b.params)
        if unknown:
            raise ReproductionError(f"cells.{name}.params: unknown parameters {sorted(unknown)} of "
                                    f"{b.name}; known: {sorted(b.params)}")

    out_dir = pathlib.Path(out_dir) if out_dir else pathlib.Path("results") / "reproduce" / family
    out_dir.mkdir(parents=True, exist_ok=True)
    if doc_path is None:
        doc_path = (REPO_DOCS / f"{family}.md") if (REPO_ROOT / "docs").is_dir() else out_dir / f"{family}.md"
    doc_path = pathlib.Path(doc_path)
    machine = results.machine_info(backend)
    key = jax.random.key(int(seed))

    def load_done(name: str, cell: dict[str, Any]) -> dict[str, Any] | None:
        p = out_dir / f"{name}.json"
        if not p.is_file():
            return None
        try:
            rec = json.loads(p.read_text())
        except (OSError, ValueError):
            return None
        if rec.get("status") != "ok" or rec.get("name") != cell["benchmark"] or \
                not _same(rec.get("cell_params"), cell["params"]):
            return None
        return rec

    done = {n: r for n, c in cells.items() if (r := load_done(n, c)) is not None}
    todo = [n for n in cells if n not in done]
    total_expected = sum(cells[n]["expected_s"] for n in todo)
    console.print(f"reproduce {family} ({which} cells): {len(done)} of {len(cells)} cells already finished, "
                  f"{len(todo)} to run, expected {_fmt_s(total_expected)}; cells in {escape(str(out_dir))}/, "
                  f"report {escape(str(doc_path))}")
    write_report(family, rep, cells, done, which, doc_path, out_dir, machine)
    status, interrupted = 0, False
    elapsed_ratio: list[float] = []  # actual / expected seconds of the cells run now, for the ETA
    try:
        with Progress(TextColumn("{task.description}", markup=False), BarColumn(), TextColumn("{task.fields[eta]}"),
                      TimeElapsedColumn(), console=console, transient=False) as progress:
            bar = progress.add_task(f"reproduce {family}", total=max(total_expected, 1e-9), eta="")
            remaining = total_expected
            for name in todo:
                cell = cells[name]
                b = reg[cell["benchmark"]]
                ratio = sum(elapsed_ratio) / len(elapsed_ratio) if elapsed_ratio else 1.0
                progress.update(bar, description=f"{family}: {name}"[:60],
                                eta=f"ETA {_fmt_s(remaining * ratio)}")
                params = dict(b.params)
                params.update(cell["params"])
                cell_dir = out_dir / name
                cell_dir.mkdir(parents=True, exist_ok=True)
                sub = jax.random.fold_in(key, zlib.crc32(f"{family}/{name}".encode()) % 2**31)
                ctx = registry.QualityContext(
                    params=params, out_dir=cell_dir, key=sub, quick=False,
                    progress=lambda msg, _n=name: progress.update(bar, description=f"{family}: {_n}: {msg}"[:60]))
                t0 = time.perf_counter()
                try:
                    with runner.hard_timeout(cell["timeout_s"]):
                        rec = runner.run_quality(b, ctx)
                except KeyboardInterrupt:
                    raise
                except Exception as exc:  # the cell fails; the others still run
                    import traceback

                    rec = {"kind": "quality", "name": b.name, "family": family, "status": "error",
                           "error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"}
                    status = 1
                    console.print(f"[red]{escape(name)}: error[/red] {escape(str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__)}")
                wall = time.perf_counter() - t0
                rec.update({"cell": name, "cell_params": cell["params"], "wall_s": wall,
                            "expected_s": cell["expected_s"], "finished": results.now(),
                            "commit": machine.get("git_commit"), "dirty": machine.get("git_dirty")})
                results.write_json_atomic(out_dir / f"{name}.json", rec)
                if rec["status"] == "ok":
                    done[name] = rec
                elapsed_ratio.append(wall / max(cell["expected_s"], 1e-9))
                remaining -= cell["expected_s"]
                progress.advance(bar, cell["expected_s"])
                write_report(family, rep, cells, done, which, doc_path, out_dir, machine)
                runner.release_compiled()
    except KeyboardInterrupt:
        interrupted = True
        console.print("[yellow]interrupted: the finished cells are kept; a rerun resumes from the next one[/yellow]")
    verdict = write_report(family, rep, cells, done, which, doc_path, out_dir, machine)
    console.print(f"{family}: {verdict} ({len(done)} of {len(cells)} cells); report {escape(str(doc_path))}")
    if interrupted:
        return 130
    return status if len(done) == len(cells) else (status or 1)


def _table_md(t: dict[str, Any]) -> str:
    from .report import _cell

    lines = [f"**{t['title']}**", "", "| " + " | ".join(t["columns"]) + " |",
             "|" + "|".join("---" for _ in t["columns"]) + "|"]
    lines += ["| " + " | ".join(_cell(x) for x in row) + " |" for row in t["rows"]]
    if t.get("note"):
        lines += ["", t["note"]]
    return "\n".join(lines)


def write_report(family: str, rep: Any, cells: dict[str, dict[str, Any]], done: dict[str, dict[str, Any]],
                 which: str, doc_path: pathlib.Path, out_dir: pathlib.Path, machine: dict[str, Any]) -> str:
    """Write ``doc_path`` (and the index beside it) from the finished cells; returns the verdict."""
    metrics = {n: dict(done[n].get("metrics", {})) for n in cells if n in done}
    try:
        verdict, evidence = rep.verdict(metrics) if metrics else ("incomplete", "No cell has finished yet.")
    except Exception as exc:  # a verdict that cannot be drawn from partial cells
        verdict, evidence = "incomplete", f"The verdict could not be drawn yet ({type(exc).__name__}: {exc})."
    from .registry import VERDICTS

    if verdict not in VERDICTS:
        verdict, evidence = "incomplete", f"The verdict function returned {verdict!r}, not one of {VERDICTS}.\n\n{evidence}"
    missing = [n for n in cells if n not in done]
    shown = verdict
    if missing and verdict != "incomplete":
        shown, evidence = "incomplete", (f"Provisional, from {len(done)} of {len(cells)} cells: **{verdict}**.\n\n"
                                         + evidence)
    wall = sum(float(done[n].get("wall_s", 0.0)) for n in done)
    command = f"python -m benchmarks --reproduce {family}" + (" --backend gpu" if which == "gpu" else "")
    commits = sorted({str(done[n].get("commit")) for n in done if done[n].get("commit")})
    meta = {"family": family, "claim": rep.claim, "verdict": shown, "wall_s": round(wall, 1), "command": command,
            "cells": f"{len(done)}/{len(cells)}"}
    fig_dir = doc_path.parent / family
    parts = [_META + json.dumps(meta) + " -->", f"# Reproduction: {family}", "",
             f"**Paper.** {rep.paper}", "", f"**Claim.** {rep.claim}", "",
             f"**Verdict: {shown}.**", "", evidence.strip(), "",
             f"**Command.** `{command}` ({which} cells; {len(done)} of {len(cells)} finished, "
             f"{_fmt_s(wall)} of cell wall time on {machine.get('cpu_model', '?')}, {machine.get('cores', '?')} "
             f"cores, backend {machine.get('backend', '?')}; commit {', '.join(c[:10] for c in commits) or 'none yet'}). Resumable: a rerun skips the "
             f"finished cells, kept in `results/reproduce/{family}/`.", ""]
    if rep.setup:
        parts += ["## Setup", "", rep.setup.strip(), ""]
    parts += ["## Cells", "", "| cell | benchmark | parameters | status | wall time | expected |",
              "|---|---|---|---|---|---|"]
    for n, c in cells.items():
        rec = done.get(n)
        params = ", ".join(f"{k}={v}" for k, v in c["params"].items()) or "defaults"
        parts.append(f"| {n} | {c['benchmark']} | {params} | {'ok' if rec else 'not run'} | "
                     f"{_fmt_s(rec['wall_s']) if rec else '-'} | {_fmt_s(c['expected_s'])} |")
    parts.append("")
    for n in cells:
        rec = done.get(n)
        if rec is None:
            continue
        parts += [f"## {n}", ""]
        for t in rec.get("tables", []):
            parts += [_table_md(t), ""]
        for f in rec.get("figures", []):
            src = out_dir / n / f
            if src.is_file():
                fig_dir.mkdir(parents=True, exist_ok=True)
                dst = fig_dir / f"{n}-{pathlib.Path(f).name}"
                shutil.copyfile(src, dst)
                parts += [f"![{n}: {pathlib.Path(f).stem}]({family}/{dst.name})", ""]
        for note in rec.get("notes", []):
            parts += [f"- {note}"]
        if rec.get("notes"):
            parts.append("")
        if rec.get("metrics"):
            parts += ["<details><summary>metrics</summary>", "", "| metric | value |", "|---|---|"]
            parts += [f"| {k} | {v:.6g} |" if isinstance(v, (int, float)) and math.isfinite(v) else f"| {k} | {v} |"
                      for k, v in sorted(rec["metrics"].items())]
            parts += ["", "</details>", ""]
    doc_path.parent.mkdir(parents=True, exist_ok=True)
    results.write_text_atomic(doc_path, "\n".join(parts).rstrip() + "\n")
    write_index(doc_path.parent)
    return shown


def write_index(folder: pathlib.Path) -> pathlib.Path:
    """Rewrite ``folder/README.md``: one row per reproduction file (family, claim, verdict, wall time, command)."""
    rows = []
    for p in sorted(folder.glob("*.md")):
        if p.name == "README.md":
            continue
        first = p.read_text().split("\n", 1)[0]
        if not first.startswith(_META):
            continue
        try:
            meta = json.loads(first[len(_META):].rsplit("-->", 1)[0])
        except ValueError:
            continue
        rows.append(f"| [{meta['family']}]({p.name}) | {meta['claim']} | {meta['verdict']} | "
                    f"{_fmt_s(meta.get('wall_s', 0))} ({meta.get('cells', '?')} cells) | `{meta['command']}` |")
    text = "\n".join([
        "# Reproductions", "",
        "Each family's paper claim, run at the scale that can show it by `python -m benchmarks --reproduce "
        "<family>` (cells from `configs/reproduce/<family>.yaml`; at most 90 minutes on the 2-core CPU; "
        "resumable cell by cell). Verdicts: reproduced, reproduced in kind (the effect's direction and rough size on "
        "a smaller model or data set), not reproduced (with the evidence why), incomplete (cells still to run).",
        "", "| family | claim | verdict | wall time | command |", "|---|---|---|---|---|", *rows, ""])
    out = folder / "README.md"
    results.write_text_atomic(out, text)
    return out
