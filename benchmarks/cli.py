"""``python -m benchmarks``: run jaxcore's speed and quality benchmarks.

Exit status: 0 when every selected benchmark ran and agreed with its
baselines; 1 when any failed, disagreed or timed out (the others still ran
and every result is in the JSON); 2 for usage errors (bad flag, unknown suite,
absent backend, invalid config); 130 on Ctrl-C (results so far are kept).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import json
import os
import pathlib
import pkgutil
import sys
import time
import traceback
from typing import Any

BACKENDS = ("cpu", "gpu", "tpu")


class UsageError(Exception):
    """A command-line error reported with exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Speed and quality benchmarks of jaxcore's kernels against their baselines.",
        epilog="Overrides: trailing KEY=VALUE pairs (OmegaConf dot-list), e.g. repeats=3 "
               "'benchmarks.core.matmul.sizes=[{n: 512}]'.",
    )
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="configuration overrides")
    p.add_argument("--list", action="store_true", help="list the registered benchmarks and exit")
    p.add_argument("--suite", metavar="NAME[,NAME]", help="run only these families (e.g. core,tpp)")
    p.add_argument("--config", metavar="FILE", help="YAML run configuration (default: configs/default.yaml)")
    p.add_argument("--backend", choices=None, metavar="cpu|gpu|tpu", help="JAX backend to run on (default: JAX's)")
    p.add_argument("--x64", action="store_true", help="enable 64-bit JAX arrays")
    p.add_argument("--repeats", type=int, metavar="N", help="timed repeats per size")
    p.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    p.add_argument("--scaling", action="store_true", help="also run each benchmark's size sweep")
    p.add_argument("--out", metavar="DIR", help="output folder (default: results/<timestamp>)")
    p.add_argument("--compare", metavar="PREVIOUS.json", help="flag kernels slower than in this earlier run")
    p.add_argument("--format", choices=("table", "json", "markdown"), default="table",
                   help="what to print at the end (files are always written)")
    return p


def discover_suites() -> tuple[list[str], dict[str, str]]:
    """Import every module in ``benchmarks.suites``; returns (imported, {name: error})."""
    from . import suites

    ok, errors = [], {}
    for mod in sorted(pkgutil.iter_modules(suites.__path__), key=lambda m: (m.name != "core", m.name)):
        if mod.name.startswith("_"):
            continue
        try:
            importlib.import_module(f"benchmarks.suites.{mod.name}")
            ok.append(mod.name)
        except Exception as exc:
            errors[mod.name] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
    return ok, errors


def available_backends() -> list[str]:
    import jax

    found = []
    for b in BACKENDS:
        try:
            if jax.devices(b):
                found.append(b)
        except RuntimeError:
            pass
    return found


def select_backend(name: str | None) -> str:
    """Make ``name`` JAX's default backend; return the backend in use.

    Raises:
        UsageError: the backend is unknown or absent on this machine; the
            message lists the available ones.
    """
    import jax

    if name is None:
        return jax.default_backend()
    name = name.lower()
    if name not in BACKENDS:
        raise UsageError(f"--backend must be one of {', '.join(BACKENDS)}, got {name!r}")
    avail = available_backends()
    if name not in avail:
        hint = {"gpu": "pip install -U 'jax[cuda12]'", "tpu": "pip install -U 'jax[tpu]'"}.get(name, "")
        raise UsageError(
            f"--backend {name}: no {name.upper()} backend on this machine; available: {', '.join(avail) or 'none'}"
            + (f" (for {name.upper()} support: {hint})" if hint else "")
        )
    jax.config.update("jax_default_device", jax.devices(name)[0])
    return name


class Run:
    """One benchmark run: its document, output folder and incremental writes."""

    def __init__(self, out_dir: pathlib.Path, doc: dict[str, Any]):
        self.out_dir = out_dir
        self.doc = doc
        self.json_path = out_dir / "results.json"
        self.md_path = out_dir / "report.md"

    def save(self) -> None:
        from . import report, results, runner

        self.doc["updated"] = results.now()
        self.doc["peak_rss_mib"] = runner.peak_rss_mib()
        results.write_json_atomic(self.json_path, self.doc)
        results.write_text_atomic(self.md_path, report.markdown(self.doc))

    def add(self, rec: dict[str, Any], section: str = "results") -> None:
        self.doc[section].append(rec)
        self.save()


def _list(console: Any, reg: dict[str, Any], errors: dict[str, str]) -> None:
    from rich.table import Table as RichTable

    t = RichTable(title="registered benchmarks")
    for col in ("name", "kind", "sizes", "baselines", "description"):
        t.add_column(col, overflow="fold")
    for name, b in reg.items():
        if b.kind == "speed":
            sizes = "; ".join(", ".join(f"{k}={v}" for k, v in s.items()) for s in b.sizes)
            bases = ", ".join(x.name for x in b.baselines) or "-"
        else:
            sizes, bases = ", ".join(f"{k}={v}" for k, v in b.params.items())[:80], "-"
        t.add_row(name, b.kind, sizes, bases, b.description)
    console.print(t)
    for mod, err in errors.items():
        console.print(f"[red]suite {mod!r} failed to import:[/red] {err.splitlines()[0]}")


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    err_console = Console(stderr=True)
    # a pipe or CI log gets a wide table instead of rich's 80-column default
    out_console = Console(width=None if sys.stdout.isatty() else 200)
    args = build_parser().parse_args(argv)
    try:
        return _main(args, err_console, out_console)
    except UsageError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        return 2


def _main(args: argparse.Namespace, console: Any, out_console: Any) -> int:
    from .config import ConfigError, bench_overrides, load_config, to_container

    overrides = list(args.overrides)
    if args.repeats is not None:
        if args.repeats < 1:
            raise UsageError(f"--repeats must be >= 1, got {args.repeats}")
        overrides.append(f"repeats={args.repeats}")
    if args.scaling:
        overrides.append("scaling=true")
    if args.x64:
        overrides.append("x64=true")
    try:
        cfg = load_config(args.config, overrides, quick=args.quick)
    except ConfigError as exc:
        raise UsageError(str(exc)) from exc

    import jax

    if cfg.x64:
        jax.config.update("jax_enable_x64", True)
    backend = select_backend(args.backend)

    from . import registry as registry_mod

    imported, import_errors = discover_suites()
    reg = registry_mod.registry()
    if args.list:
        _list(out_console, reg, import_errors)
        return 1 if import_errors else 0

    families = sorted({b.family for b in reg.values()} | set(import_errors))
    wanted = None
    if args.suite:
        wanted = [s.strip() for s in args.suite.split(",") if s.strip()]
    elif cfg.suites:
        wanted = list(cfg.suites)
    if wanted is not None:
        unknown = [s for s in wanted if s not in families]
        if unknown:
            raise UsageError(f"--suite: unknown suite(s) {', '.join(unknown)}; available: {', '.join(families)}")
    selected = [b for b in reg.values() if wanted is None or b.family in wanted]
    selected.sort(key=lambda b: (b.family != "core", b.family, b.kind != "speed", b.name))

    from . import report, results, runner
    from .registry import QualityContext

    run_id = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = pathlib.Path(args.out) if args.out else pathlib.Path("results") / run_id
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = results.new_document(run_id, results.machine_info(backend), to_container(cfg))
    run = Run(out_dir, doc)
    for mod, err in import_errors.items():
        if wanted is None or mod in wanted:
            run.doc["results"].append({"kind": "suite", "name": f"{mod}.<import>", "family": mod,
                                       "status": "error", "error": err})
    run.save()
    console.print(f"jaxcore benchmarks: {len(selected)} benchmarks, backend {backend}, writing to {out_dir}/")

    previous = None
    if args.compare:
        try:
            previous = results.load(args.compare)
        except (OSError, ValueError) as exc:
            raise UsageError(f"--compare: {exc}") from exc

    key = jax.random.key(int(cfg.seed))
    interrupted = False
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    tasks: list[tuple[Any, str, Any]] = []
    for b in selected:
        ov = bench_overrides(cfg, b.name, "benchmarks" if b.kind == "speed" else "quality")
        if ov.get("skip"):
            continue
        if b.kind == "speed":
            sizes = ov.get("quick_sizes" if cfg.quick else "sizes")
            if sizes is None:
                sizes = (b.quick_sizes or list(b.sizes)[:1]) if cfg.quick else b.sizes
            for s in sizes:
                tasks.append((b, "size", dict(s)))
            if cfg.scaling and (b.scaling or ov.get("scaling")):
                tasks.append((b, "scaling", ov.get("scaling")))
        else:
            params = dict(b.params)
            if cfg.quick:
                params.update(b.quick_params)
            params.update({k: v for k, v in ov.items() if k != "skip"})
            tasks.append((b, "quality", params))

    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                      TimeElapsedColumn(), console=console, transient=False) as progress:
            ceil_task = progress.add_task("machine ceilings", total=1)
            try:
                cc = cfg.ceilings
                run.doc["ceilings"] = runner.measure_ceilings(int(cc.matmul_n), int(cc.copy_mib), int(cc.repeats))
            except Exception as exc:  # keep going without ceilings
                run.doc["ceilings"] = {"error": f"{type(exc).__name__}: {exc}"}
            progress.advance(ceil_task)
            run.save()
            bar = progress.add_task("benchmarks", total=len(tasks))
            for i, (b, what, arg) in enumerate(tasks):
                sub = jax.random.fold_in(key, i)
                label = f"{b.name} {'' if what != 'size' else ', '.join(f'{k}={v}' for k, v in arg.items())}"
                progress.update(bar, description=label[:60])
                t0 = time.perf_counter()
                try:
                    with runner.hard_timeout(float(cfg.timeout_s)):
                        if what == "size":
                            rec = runner.run_speed_size(
                                b, arg, sub, repeats=int(cfg.repeats), min_repeats=int(cfg.min_repeats),
                                max_time_s=float(cfg.max_time_s), ceilings=run.doc["ceilings"])
                        elif what == "scaling":
                            sc = arg or {"param": b.scaling.param, "values": list(b.scaling.values)}
                            base_size = dict((b.quick_sizes or b.sizes)[0] if cfg.quick else b.sizes[0])
                            rec = runner.run_scaling(b, sc["param"], list(sc["values"]), base_size, sub,
                                                     repeats=int(cfg.repeats), max_time_s=float(cfg.max_time_s))
                        else:
                            ctx = QualityContext(params=arg, out_dir=out_dir, key=sub, quick=bool(cfg.quick),
                                                 progress=lambda msg, _l=b.name: progress.update(
                                                     bar, description=f"{_l}: {msg}"[:60]))
                            rec = runner.run_quality(b, ctx)
                except KeyboardInterrupt:
                    raise
                except Exception as exc:
                    status = "timeout" if isinstance(exc, runner.BenchmarkTimeout) else "error"
                    rec = {"kind": b.kind if what != "scaling" else "scaling", "name": b.name, "family": b.family,
                           "status": status, "error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=10)}"}
                    if what == "size":
                        rec["size"] = arg
                    elif what == "quality":
                        rec["params"] = arg
                    console.print(f"[red]{b.name}: {status}[/red] {type(exc).__name__}: {str(exc)[:300]}")
                rec["wall_s"] = time.perf_counter() - t0
                rec["peak_rss_mib"] = runner.peak_rss_mib()
                run.add(rec, "scaling" if what == "scaling" else "results")
                progress.advance(bar)
    except KeyboardInterrupt:
        interrupted = True
        console.print("[yellow]interrupted: keeping the results measured so far[/yellow]")

    if previous is not None:
        run.doc["comparison"] = results.compare(previous, run.doc)
    try:
        run.doc["plots"] = report.plots(run.doc, out_dir)
    except Exception as exc:
        run.doc["plots_error"] = f"{type(exc).__name__}: {exc}"
    failed = [r for r in run.doc["results"] + run.doc["scaling"] if r.get("status") != "ok"]
    wrong = [(r["name"], n) for r in run.doc["results"] if r.get("kind") == "speed"
             for n, bb in r.get("baselines", {}).items() if bb.get("status") in ("wrong", "error")]
    run.doc["status"] = "interrupted" if interrupted else ("failed" if failed or wrong else "complete")
    run.save()

    if args.format == "json":
        print(json.dumps(json.load(open(run.json_path)), indent=1))
    elif args.format == "markdown":
        print(run.md_path.read_text())
    else:
        report.print_table(run.doc, out_console)
    console.print(f"results: {run.json_path}  report: {run.md_path}  plots: {out_dir / 'plots'}/")
    if failed or wrong:
        console.print(f"[red]{len(failed)} benchmark(s) failed and {len(wrong)} baseline(s) disagreed or "
                      f"raised:[/red] " + ", ".join(sorted({r['name'] for r in failed} | {w[0] for w in wrong})))
    if interrupted:
        return 130
    return 1 if (failed or wrong) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
