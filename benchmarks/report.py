"""Rendering a results document: Markdown report, terminal table, PNG plots."""

from __future__ import annotations

import math
import pathlib
from typing import Any

from .stats import fmt_seconds, fmt_si


def _cell(x: Any) -> str:
    if isinstance(x, (list, tuple)) and len(x) == 2 and all(isinstance(v, (int, float)) or v is None for v in x):
        m, s = x
        if m is None:
            return "-"
        return f"{_num(m)} ± {_num(s)}" if s is not None else _num(m)
    if isinstance(x, float):
        return _num(x)
    return "-" if x is None else str(x)


def _num(x: float | None) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    if isinstance(x, int):
        return str(x)
    if x != 0 and (abs(x) >= 1e5 or abs(x) < 1e-3):
        return f"{x:.3e}"
    return f"{x:.4g}"


def _size(size: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in size.items())


def _throughput(rec: dict[str, Any]) -> str:
    if not rec.get("throughput"):
        return "-"
    unit = rec.get("work_unit") or "units"
    # SI units attach to the prefix (GB/s, GFLOP/s); counted things keep a space (M events/s)
    return fmt_si(rec["throughput"], f"{unit}/s" if unit in ("B", "FLOP") else f" {unit}/s").replace("  ", " ")


def _bytes_cell(k: dict[str, Any]) -> str:
    """bytes/s of peak; "(XLA)" marks XLA's bytes-accessed count (operand traffic, see the legend)."""
    if k.get("bytes_frac") is None:
        return "-"
    return f"{100 * k['bytes_frac']:.1f}%" + ("" if k.get("bytes_source") == "analytic" else " (XLA)")


def speed_rows(doc: dict[str, Any]) -> list[dict[str, str]]:
    """One display row per (benchmark, size, baseline) of the speed records."""
    rows = []
    for rec in doc.get("results", []):
        if rec.get("kind") != "speed":
            continue
        k = rec.get("kernel", {})
        base = {
            "benchmark": rec["name"], "size": _size(rec.get("size", {})), "status": rec.get("status", "?"),
            "compile": fmt_seconds(k.get("compile_s")) + (" (cache)" if k.get("compile_cached") else ""),
            "kernel": (f"{fmt_seconds(k.get('median_s'))} ± {fmt_seconds(k.get('iqr_s'))}"
                       + (" (host callback)" if k.get("host_callbacks") else "")
                       if k.get("median_s") else "-"),
            "flops": f"{100 * k['flops_frac']:.1f}%" if k.get("flops_frac") is not None else "-",
            "bw": _bytes_cell(k),
            "mem": (fmt_si(k["memory"].get("temp_size_in_bytes"), "B")
                    if k.get("memory", {}).get("temp_size_in_bytes") is not None else "-"),
            "throughput": _throughput(rec),
        }
        if rec.get("status") != "ok":
            rows.append({**base, "baseline": "-", "speedup": "-", "target": "-",
                         "note": (rec.get("error") or "").splitlines()[0][:120] if rec.get("error") else ""})
            continue
        if not rec.get("baselines"):
            rows.append({**base, "baseline": "-", "speedup": "-", "target": "-", "note": ""})
        for name, b in rec.get("baselines", {}).items():
            if b.get("status") == "ok":
                sp = f"{b['speedup']:.3g}x [{b.get('speedup_iqr', 0):.2g}]"
                tgt = "-"
                note = b.get("note", "")
                if "floor" in b:  # a target restated from a proven floor: the floor, the target and why
                    was = b["floor"].get("target")
                    tgt = (f"{'met' if b['target_met'] else 'MISSED'} at floor (>= {b['target']:g}x"
                           + (f"; target {was:g}x)" if was is not None else ")"))
                    note = f"floor: {b['floor']['reason']}" + (f"; {note}" if note else "")
                elif "target" in b:
                    tgt = f"{'met' if b['target_met'] else 'MISSED'} (>= {b['target']:g}x)"
            else:
                sp, tgt = b.get("status", "?").upper(), "-"
                note = (b.get("error") or "")[:160]
            rows.append({**base, "baseline": f"{name} ({fmt_seconds(b.get('median_s'))})" if b.get("median_s")
                         else name, "speedup": sp, "target": tgt, "note": note})
    return rows


def peak_device_memory(doc: dict[str, Any], family: str) -> tuple[str, str, dict[str, int]] | None:
    """The speed program of ``family`` with the largest device memory in XLA's memory analysis.

    Device memory of one program = arguments + outputs + temporaries (``memory_analysis()``; donated
    or aliased buffers counted twice, so an upper bound). Returns ``(benchmark, size, fields)`` or None.
    """
    best, best_total = None, -1
    for rec in doc.get("results", []):
        if rec.get("kind") != "speed" or rec.get("family") != family:
            continue
        mem = rec.get("kernel", {}).get("memory") or {}
        parts = [mem.get(f) for f in ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes")]
        if any(v is None for v in parts):
            continue
        if sum(parts) > best_total:
            best, best_total = (rec["name"], _size(rec.get("size", {})), mem), sum(parts)
    return best


SPEED_COLUMNS = [
    ("benchmark", "benchmark"), ("size", "size"), ("status", "status"), ("compile", "compile"),
    ("kernel", "kernel median ± IQR"), ("baseline", "baseline (median)"), ("speedup", "speed-up [IQR]"),
    ("target", "target"), ("flops", "FLOP/s of peak"), ("bw", "bytes/s of peak"), ("mem", "XLA temp memory"),
    ("throughput", "throughput"),
    ("note", "note"),
]


def time_budget_rows(doc: dict[str, Any]) -> list[list[str]]:
    """Rows (family, tasks, wall, compiling, share, programs) summed over ``results`` and ``scaling``.

    Empty when no record carries ``wall_s``; compile columns read "-" for records made before the
    harness recorded ``compile_time``.
    """
    acc: dict[str, list[float]] = {}
    seen_compile: set[str] = set()
    for rec in list(doc.get("results", [])) + list(doc.get("scaling", [])):
        if rec.get("wall_s") is None:
            continue
        a = acc.setdefault(rec.get("family", "?"), [0, 0.0, 0.0, 0])
        a[0] += 1
        a[1] += float(rec["wall_s"])
        ct = rec.get("compile_time")
        if ct:
            seen_compile.add(rec.get("family", "?"))
            a[2] += float(ct.get("backend_s", 0.0)) + float(ct.get("lowering_s", 0.0)) + float(ct.get("tracing_s", 0.0))
            a[3] += int(ct.get("programs", 0))
    rows = []
    total = [0, 0.0, 0.0, 0]
    for fam in sorted(acc, key=lambda f: -acc[f][1]):
        n, wall, comp, progs = acc[fam]
        total = [total[0] + n, total[1] + wall, total[2] + comp, total[3] + progs]
        has = fam in seen_compile
        rows.append([fam, str(n), fmt_seconds(wall), fmt_seconds(comp) if has else "-",
                     f"{comp / wall:.0%}" if has and wall > 0 else "-", str(progs) if has else "-"])
    if rows:
        has = bool(seen_compile)
        rows.append(["**all**", str(total[0]), fmt_seconds(total[1]), fmt_seconds(total[2]) if has else "-",
                     f"{total[2] / total[1]:.0%}" if has and total[1] > 0 else "-", str(total[3]) if has else "-"])
    return rows


def _md_table(columns: list[str], rows: list[list[str]]) -> str:
    esc = [[str(c).replace("|", "\\|").replace("\n", " ") for c in r] for r in rows]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(r) + " |" for r in esc]
    return "\n".join(lines)


def markdown(doc: dict[str, Any]) -> str:
    """The Markdown report of a results document."""
    m = doc.get("machine", {})
    c = doc.get("ceilings", {})
    out = [f"# jaxcore benchmark report ({doc.get('run_id', '')})", ""]
    from .results import run_status

    status = run_status(doc)
    gone = f" (process {doc.get('pid')} is gone: the results below are those written before it died)" \
        if status == "killed" else ""
    out.append(f"Status: **{status}**{gone}; updated {doc.get('updated')}.")
    out.append("")
    out.append(
        f"Machine: {m.get('cpu_model')}, {m.get('cores')} cores, {_num(m.get('memory_gib'))} GiB; "
        f"backend {m.get('backend')} ({m.get('device_count')} x {m.get('device_kind')}); "
        f"python {m.get('python')}, jax {m.get('jax')}, jaxlib {m.get('jaxlib')}, x64={m.get('x64')}; "
        f"commit {str(m.get('git_commit'))[:10]}{' (dirty)' if m.get('git_dirty') else ''}."
    )
    if c:
        out.append("")
        out.append(
            f"Ceilings measured in this run: matrix product {fmt_si(c.get('matmul_flops_per_s'), 'FLOP/s')} "
            f"(float32, n={c.get('matmul_n')}); copy {fmt_si(c.get('copy_bytes_per_s'), 'B/s')} "
            f"({c.get('copy_mib')} MiB)."
        )
    if doc.get("peak_rss_mib"):
        out.append(f"Peak resident memory of the run: {doc['peak_rss_mib']:.0f} MiB.")
    if doc.get("quality_compile") == "fast":
        out.append("Quality benchmarks' programs were compiled with XLA:CPU's fast code generation (LLVM -O1 "
                   "without its expensive passes: less compile time, results equal to float32 rounding); speed benchmarks' "
                   "kernels and JAX baselines at XLA's default optimisation (`quality_compile: full` for both).")
    out += ["", "How to read: *speed-up* is the median over interleaved repeats of baseline time / kernel time "
            "(above 1: jaxcore is faster), with its interquartile range in brackets. Compile time is measured "
            "apart (ahead-of-time lower + compile); *(cache)* marks a program JAX's persistent compilation "
            "cache served (`--no-compile-cache` measures cold). *FLOP/s of peak* and *bytes/s of peak* "
            "compare the kernel's "
            "XLA-counted (or analytic) work per second with the ceilings above. A bytes figure marked *(XLA)* is "
            "XLA's bytes-accessed count: the operands and outputs of every HLO operation summed, re-reads of "
            "data already in cache included, so it is operand traffic, not DRAM traffic, and can exceed the "
            "copy ceiling (above 100%: the kernel works from cache); unmarked figures are the suite's analytic "
            "byte model (inputs, outputs and unavoidable intermediates). A baseline marked WRONG "
            "disagreed with the kernel and was not timed. A kernel marked *(host callback)* holds a host "
            "callback (a traced argument's run-time check, `equinox.error_if`): JAX calls such a program "
            "through its Python dispatch path, about 0.15-0.25 ms more per call on a CPU, which the time "
            "includes.", ""]

    families = sorted({r["family"] for r in doc.get("results", [])}, key=lambda f: (f != "core", f))
    budget = time_budget_rows(doc)
    if budget:
        out += ["## Where the run's time went", "",
                "Per family: the wall time of its tasks, and of that the seconds JAX spent compiling (XLA's "
                "backend compile or a persistent-cache load, plus lowering and tracing) and how many programs it "
                "compiled. Compile-bound families gain most from the persistent compilation cache.", "",
                _md_table(["family", "tasks", "wall", "compiling", "share", "programs"], budget), ""]
    for fam in families:
        out += [f"## {fam}", ""]
        sub = {**doc, "results": [r for r in doc["results"] if r["family"] == fam]}
        rows = speed_rows(sub)
        if rows:
            out += ["### Speed", "", _md_table([h for _, h in SPEED_COLUMNS],
                                               [[r[k] for k, _ in SPEED_COLUMNS] for r in rows]), ""]
            peak = peak_device_memory(doc, fam)
            if peak is not None:
                name, size, mem = peak
                a, o, t = (mem[f] for f in ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes"))
                out += [f"Largest device memory of the family's programs in this run: {name} ({size}), "
                        f"{fmt_si(a + o + t, 'B')} per device (arguments {fmt_si(a, 'B')}, outputs {fmt_si(o, 'B')}, "
                        f"temporaries {fmt_si(t, 'B')}; XLA's memory analysis of the compiled program, an upper "
                        "bound where buffers are donated).", ""]
        dev = [s for s in doc.get("scaling", []) if s.get("family") == fam and s.get("kind") == "devices"]
        if dev:
            out += ["### Device scaling", "",
                    "The batch axis sharded over n devices (`--scaling devices`): *strong* keeps the total batch, "
                    "efficiency t1 / (n tn); *weak* grows the batch with n, efficiency t1 / tn. *sharded out* says "
                    "whether the output kept the batch layout (a replicated output means the program gathered the "
                    "batch). Faked CPU devices share the same cores, so a CPU efficiency near 1/n is expected; the "
                    "same command on a multi-GPU host gives the real figure.", ""]
            drows = []
            for s in dev:
                pts = ", ".join(f"{n}: {fmt_seconds(t)} ({e:.0%})" for n, t, e in
                                zip(s.get("devices", []), s.get("medians_s", []), s.get("efficiency", [])))
                if s.get("skipped"):
                    pts += " (left out: " + "; ".join(s["skipped"]) + ")"
                if s.get("status") != "ok":
                    lines = (s.get("error") or "").strip().splitlines()
                    pts += f" **{s.get('status', '?').upper()}**: {lines[0][:160] if lines else ''}"
                mem = [m for m in s.get("temp_bytes_per_device", []) if m is not None]
                drows.append([s["name"], s.get("param") or "-", s.get("mode", "-"), pts or "-",
                              ", ".join("yes" if x else "no" for x in s.get("output_sharded", [])) or "-",
                              " -> ".join(f"{m / 2**20:.1f}" for m in mem) or "-"])
            out += [_md_table(["benchmark", "batch axis", "mode", "devices: median (efficiency)", "sharded out",
                               "temp MiB per device"], drows), ""]
        scal = [s for s in doc.get("scaling", []) if s.get("family") == fam and s.get("kind") != "devices"]
        if scal:
            out += ["### Scaling", ""]
            srows = []
            for s in scal:
                pts = ", ".join(f"{s['param']}={v}: {fmt_seconds(t)}"
                                for v, t in zip(s.get("values", []), s.get("medians_s", [])))
                slope = f"{s['slope']:.2f}" if s.get("slope") is not None else "-"
                slope_w = f"{s['slope_work']:.2f}" if s.get("slope_work") is not None else "-"
                err = ""
                if s.get("status") != "ok":
                    lines = (s.get("error") or "").strip().splitlines()
                    err = f" **{s.get('status', '?').upper()}**: {lines[0][:160] if lines else ''}"
                srows.append([s["name"], s.get("param", "-"), slope,
                              f"{slope_w} (per {s.get('work_unit') or 'unit of work'})", pts + err])
            out += [_md_table(["benchmark", "swept", "slope in swept", "slope in work", "median time"], srows), ""]
        for rec in sub["results"]:
            if rec.get("kind") != "quality":
                continue
            out += [f"### Quality: {rec['name']}", ""]
            if rec.get("status") != "ok":
                out += [f"**{rec.get('status', '?').upper()}**: {(rec.get('error') or '').splitlines()[0][:300]}", ""]
                continue
            for t in rec.get("tables", []):
                out += [f"**{t['title']}**", "", _md_table(list(t["columns"]), [[_cell(x) for x in r] for r in t["rows"]])]
                if t.get("note"):
                    out += ["", t["note"]]
                out.append("")
            for note in rec.get("notes", []):
                out.append(f"- {note}")
            if rec.get("notes"):
                out.append("")
            for fig in rec.get("figures", []):
                out += [f"![{fig}]({fig})", ""]
            out.append(f"_{rec['name']} took {rec.get('elapsed_s', 0):.1f} s._")
            out.append("")
        for fig in doc.get("plots", {}).get(fam, []):
            out += [f"![{fig}]({fig})", ""]

    failures = [r for r in doc.get("results", []) if r.get("status") not in ("ok",)]
    failures += [s for s in doc.get("scaling", []) if s.get("status") != "ok"]
    if failures:
        out += ["## Failures", ""]
        for r in failures:
            first = (r.get("error") or "").strip().splitlines()
            out.append(f"- `{r['name']}` {_size(r.get('size', {}))}: **{r.get('status')}** "
                       f"{first[-1] if first else ''}")
        out.append("")
    if doc.get("comparison") is not None:
        out += ["## Comparison with the previous run", ""]
        out += [f"- warning: {w}" for w in doc.get("comparison_warnings", [])]
        out += ["", "A kernel is SLOWER when new/old exceeds 1 + the noise band (two combined standard errors of "
                "the medians, at least 10%).", ""]
    if doc.get("comparison"):
        out += [
                _md_table(["benchmark", "size", "old", "new", "new/old", "noise band", "verdict"],
                          [[c["name"], _size(c["size"]), fmt_seconds(c["old_s"]), fmt_seconds(c["new_s"]),
                            f"{c['ratio']:.2f}", f"±{100 * c['band']:.0f}%",
                            "**SLOWER**" if c["verdict"] == "slower" else c["verdict"]]
                           for c in doc["comparison"]]), ""]
    return "\n".join(out) + "\n"


def print_table(doc: dict[str, Any], console: Any) -> None:
    """The speed table (and quality tables) on a rich console."""
    from rich.table import Table as RichTable

    rows = speed_rows(doc)
    if rows:
        t = RichTable(title="jaxcore speed", show_lines=False)
        keys = [k for k, _ in SPEED_COLUMNS if k not in ("bw", "status", "mem")]
        for k, h in SPEED_COLUMNS:
            if k in keys:
                t.add_column(h, overflow="fold", max_width=48 if k == "note" else None)
        for r in rows:
            style = None if r["status"] == "ok" and "WRONG" not in r["speedup"] else "red"
            t.add_row(*[r[k] for k in keys], style=style)
        console.print(t)
    for rec in doc.get("results", []):
        if rec.get("kind") != "quality":
            continue
        if rec.get("status") != "ok":
            lines = (rec.get("error") or "").strip().splitlines()
            console.print(f"{rec['name']}: {rec.get('status')} {lines[0] if lines else ''}", markup=False, style="red")
            continue
        for tab in rec.get("tables", []):
            t = RichTable(title=tab["title"])
            for col in tab["columns"]:
                t.add_column(str(col))
            for r in tab["rows"]:
                t.add_row(*[_cell(x) for x in r])
            console.print(t)
    for s in doc.get("scaling", []):
        if s.get("kind") == "devices" and s.get("efficiency"):
            eff = ", ".join(f"{n}: {e:.0%}" for n, e in zip(s["devices"], s["efficiency"]))
            console.print(f"devices {s['name']} ({s['mode']}): efficiency {eff} ({s.get('status')})", markup=False)
        if s.get("slope") is not None:
            extra = f", {s['slope_work']:.2f} in work" if s.get("slope_work") is not None else ""
            console.print(f"scaling {s['name']}: time ~ {s['param']}^{s['slope']:.2f}{extra} ({s.get('status')})",
                          markup=False)
    for c in doc.get("comparison", []) or []:
        if c["verdict"] != "same":
            console.print(f"{'SLOWER' if c['verdict'] == 'slower' else 'faster'} {c['name']} "
                          f"{_size(c['size'])}: {c['ratio']:.2f}x the previous time (noise band ±{100 * c['band']:.0f}%)",
                          markup=False, style="red" if c["verdict"] == "slower" else None)


def plots(doc: dict[str, Any], out_dir: pathlib.Path) -> dict[str, list[str]]:
    """Write PNGs: per family, speed-ups by benchmark; per sweep, the scaling curve.

    Returns ``{family: [relative paths]}``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made: dict[str, list[str]] = {}
    plot_dir = out_dir / "plots"
    plot_dir.mkdir(parents=True, exist_ok=True)
    fams = sorted({r["family"] for r in doc.get("results", [])})
    for fam in fams:
        bars = []
        for rec in doc["results"]:
            if rec["family"] != fam or rec.get("kind") != "speed" or rec.get("status") != "ok":
                continue
            for name, b in rec.get("baselines", {}).items():
                if b.get("status") == "ok":
                    bars.append((f"{rec['name'].split('.', 1)[1]}\n{_size(rec['size'])}\nvs {name}",
                                 b["speedup"], b.get("target")))
        if not bars:
            continue
        fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(bars) + 1), 3.6))
        xs = range(len(bars))
        ax.bar(xs, [b[1] for b in bars], color=["tab:green" if b[1] >= 1 else "tab:red" for b in bars])
        for x, b in zip(xs, bars):
            if b[2]:
                ax.plot([x - 0.4, x + 0.4], [b[2], b[2]], "k--", lw=1)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_yscale("log")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([b[0] for b in bars], fontsize=6)
        ax.set_ylabel("speed-up over baseline (x)")
        ax.set_title(f"{fam}: jaxcore vs baselines (dashed: target)")
        fig.tight_layout()
        rel = f"plots/{fam}_speedup.png"
        fig.savefig(out_dir / rel, dpi=110)
        plt.close(fig)
        made.setdefault(fam, []).append(rel)
    for s in doc.get("scaling", []):
        if s.get("slope") is None or len(s.get("values", [])) < 2:
            continue
        import numpy as np

        fig, ax = plt.subplots(figsize=(4.2, 3.4))
        x = np.asarray(s["values"], dtype=float)
        ax.loglog(x, s["medians_s"], "o-", label="measured")
        ax.loglog(x, np.exp(s["intercept"]) * x ** s["slope"], "k--", lw=1, label=f"fit: slope {s['slope']:.2f}")
        ax.set_xlabel(s["param"])
        ax.set_ylabel("median time (s)")
        ax.set_title(s["name"], fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        rel = f"plots/scaling_{s['name'].replace('.', '_')}.png"
        fig.savefig(out_dir / rel, dpi=110)
        plt.close(fig)
        made.setdefault(s["family"], []).append(rel)
    return made
