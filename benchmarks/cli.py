"""``python -m benchmarks``: run jaxcore's speed and quality benchmarks.

Exit status: 0 when every selected benchmark ran and agreed with its
baselines; 1 when any failed, disagreed or timed out (the others still ran
and every result is in the JSON); 2 for usage errors (bad flag, unknown suite,
absent backend, invalid config); 130 on Ctrl-C (results so far are kept).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import pathlib
import sys
from typing import Any

from .backends import (  # noqa: F401  (re-exported: the command line's public names)
    BACKENDS,
    _backends_started,
    _fake_cpu_devices,
    _fast_quality_compile,
    available_backends,
    select_backend,
)
from .plan import (  # noqa: F401
    UsageError,
    _check_size_keys,
    _check_size_value,
    _plan,
    _sizes,
    discover_suites,
    select,
    task_key,
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Speed and quality benchmarks of jaxcore's kernels against their baselines.",
        epilog="Overrides: trailing KEY=VALUE pairs (OmegaConf dot-list), e.g. repeats=3 "
               "'benchmarks.core.matmul.sizes=[{n: 512}]'.",
    )
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="configuration overrides")
    p.add_argument("--list", action="store_true", help="list the registered benchmarks and exit")
    p.add_argument("--suite", metavar="NAME[,NAME]",
                   help="run only these families, benchmarks or globs (e.g. tpp,causal.order_mcmc,'sam.step_*')")
    p.add_argument("--config", metavar="NAME|FILE",
                   help="run configuration: smoke, default or full (shipped), or a YAML file (default: default)")
    p.add_argument("--backend", metavar="cpu|gpu|tpu", help="JAX backend to run on (default: JAX's)")
    p.add_argument("--x64", action="store_true", help="enable 64-bit JAX arrays")
    p.add_argument("--no-compile-cache", action="store_true",
                   help="do not use JAX's persistent compilation cache (measure cold compile times)")
    p.add_argument("--repeats", type=int, metavar="N", help="timed repeats per size")
    p.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    p.add_argument("--scaling", nargs="?", const="sizes", metavar="sizes|devices",
                   help="also run each benchmark's size sweep (sizes, the default) or its device sweep (devices: "
                        "the batch axis sharded over 1, 2, 4 ... devices, strong and weak scaling)")
    p.add_argument("--devices", type=int, metavar="N",
                   help="run each benchmark's sharded form on N devices (beside 1); with --scaling devices, the "
                        "largest count of the sweep. On CPU the N devices are faked (they share the cores)")
    p.add_argument("--out", metavar="DIR", help="output folder (default: results/<timestamp>)")
    p.add_argument("--compare", metavar="PREVIOUS.json", help="flag kernels slower than in this earlier run")
    p.add_argument("--reproduce", metavar="FAMILY",
                   help="run FAMILY's paper claim at the scale that can show it (cells from "
                        "configs/reproduce/FAMILY.yaml, resumable) and write docs/reproductions/FAMILY.md")
    p.add_argument("--doc", metavar="FILE.md",
                   help="with --reproduce: where to write the report (default docs/reproductions/FAMILY.md)")
    p.add_argument("--format", choices=("table", "json", "markdown"), default="table",
                   help="what to print at the end (files are always written)")
    return p


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
        try:
            text = report.markdown(self.doc)
        except Exception as exc:  # the JSON is the record; a rendering bug must not stop the run
            text = f"# jaxcore benchmark report\n\nThe report could not be rendered ({type(exc).__name__}: {exc}); " \
                   f"every result is in {self.json_path.name}.\n"
        results.write_text_atomic(self.md_path, text)

    def add(self, rec: dict[str, Any], section: str = "results") -> None:
        self.doc[section].append(rec)
        self.save()


def _list_console() -> Any:
    """A console as wide as the terminal (``COLUMNS`` when set; 100 columns for a pipe)."""
    import shutil

    from rich.console import Console

    return Console(width=shutil.get_terminal_size((100, 24)).columns)


def _list(console: Any, reg: dict[str, Any], errors: dict[str, str]) -> None:
    from rich.markup import escape

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
        console.print(f"[red]suite {escape(repr(mod))} failed to import:[/red] {escape(err.splitlines()[0])}")


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    err_console = Console(stderr=True)
    # a pipe or CI log gets a wide table instead of rich's 80-column default
    out_console = Console(width=None if sys.stdout.isatty() else 200)
    args = build_parser().parse_args(argv)
    if args.scaling not in (None, "sizes", "devices"):
        if "=" in args.scaling:  # `--scaling repeats=3`: the word after a bare --scaling is an override
            args.overrides.insert(0, args.scaling)
            args.scaling = "sizes"
        else:
            err_console.print(f"error: --scaling: expected sizes or devices, got {args.scaling!r}")
            return 2
    try:
        if args.reproduce is not None:
            return _reproduce(args, err_console)
        if args.doc is not None:
            raise UsageError("--doc: only with --reproduce FAMILY")
        return _main(args, err_console, out_console)
    except UsageError as exc:
        from rich.markup import escape

        err_console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    except KeyboardInterrupt:  # before the run's file exists (start-up): nothing to keep
        err_console.print("[yellow]interrupted before any benchmark ran[/yellow]")
        return 130


def _reproduce(args: argparse.Namespace, console: Any) -> int:
    """``--reproduce FAMILY``: the family's reproduction cells (:mod:`benchmarks.reproduce`)."""
    from . import reproduce

    ignored = [flag for flag, on in (("--suite", args.suite), ("--config", args.config), ("--list", args.list),
                                      ("--quick", args.quick), ("--scaling", args.scaling),
                                      ("--devices", args.devices), ("--compare", args.compare),
                                      ("--repeats", args.repeats), ("KEY=VALUE overrides", args.overrides)) if on]
    if ignored:
        raise UsageError(f"--reproduce: the cells come from configs/reproduce/{args.reproduce}.yaml; "
                         f"expected no {', '.join(ignored)}")
    try:
        reproduce.config_path(args.reproduce)
    except reproduce.ReproductionError as exc:
        raise UsageError(str(exc)) from exc
    import jax

    if not _backends_started():
        _fast_quality_compile(args.backend)
    if args.x64:
        jax.config.update("jax_enable_x64", True)
    backend = select_backend(args.backend)
    if not args.no_compile_cache:
        from jaxcore import enable_compilation_cache

        try:
            enable_compilation_cache()
        except Exception as exc:  # an unwritable cache folder must not stop a run
            console.print(f"compilation cache off ({exc})")
    try:
        return reproduce.run(args.reproduce, backend=backend, out_dir=pathlib.Path(args.out) if args.out else None,
                             doc_path=pathlib.Path(args.doc) if args.doc else None, seed=0, console=console)
    except reproduce.ReproductionError as exc:
        raise UsageError(str(exc)) from exc


def _out_dir(arg: str | None, run_id: str) -> pathlib.Path:
    """The output folder, created; a fresh one per run unless ``--out`` names one."""
    if arg:
        out = pathlib.Path(arg)
    else:
        out = pathlib.Path("results") / run_id
        i = 2
        while out.exists():
            out = pathlib.Path("results") / f"{run_id}-{i}"
            i += 1
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"--out: cannot write results to {str(out)!r}: {exc.strerror or exc}") from exc
    return out


def _main(args: argparse.Namespace, console: Any, out_console: Any) -> int:
    from rich.markup import escape

    from .config import ConfigError, load_config, to_container

    overrides = list(args.overrides)
    if args.repeats is not None:
        if args.repeats < 1:
            raise UsageError(f"--repeats must be >= 1, got {args.repeats}")
        overrides.append(f"repeats={args.repeats}")
    if args.scaling == "sizes":
        overrides.append("scaling=true")
    if args.devices is not None and args.devices < 1:
        raise UsageError(f"--devices: expected an integer >= 1, got {args.devices}")
    if args.scaling == "devices" or args.devices is not None:
        overrides.append("device_scaling=true")
        if args.devices is not None:
            counts = [1, args.devices] if args.scaling != "devices" else \
                sorted({1, args.devices} | {2 ** i for i in range(1, 12) if 2 ** i < args.devices})
            overrides.append(f"device_counts={counts}")
    if args.x64:
        overrides.append("x64=true")
    try:
        cfg = load_config(args.config, overrides, quick=args.quick)
    except ConfigError as exc:
        raise UsageError(str(exc)) from exc

    from . import results

    previous = None
    if args.compare:
        try:
            previous = results.load(args.compare)
        except (OSError, ValueError) as exc:
            raise UsageError(f"--compare: {exc}") from exc

    # XLA reads XLA_FLAGS when its backends start: in a process where they already run (a test calling
    # main()) the flags would not apply here and would leak into its child processes, so they are not set.
    fast_quality = (cfg.quality_compile == "fast" and not _backends_started()
                    and _fast_quality_compile(args.backend))
    import jax

    if cfg.x64:
        jax.config.update("jax_enable_x64", True)
    if cfg.device_scaling:
        _fake_cpu_devices(max(cfg.device_counts), args.backend)
    backend = select_backend(args.backend)
    compile_cache = None
    if not args.no_compile_cache:
        from jaxcore import enable_compilation_cache

        try:
            folder = enable_compilation_cache()  # None under JAXCORE_COMPILE_CACHE=0
            compile_cache = str(folder) if folder is not None else None
        except Exception as exc:  # an unwritable cache folder must not stop a run: it runs cold
            console.print(f"[yellow]compilation cache off ({escape(str(exc))})[/yellow]")

    from . import registry as registry_mod

    imported, import_errors = discover_suites()
    reg = registry_mod.registry()
    families = sorted({b.family for b in reg.values()} | set(import_errors))
    wanted = None
    if args.suite is not None:
        wanted = [s.strip() for s in args.suite.split(",") if s.strip()]
        if not wanted:
            raise UsageError(f"--suite: give one or more of {', '.join(families)}, got {args.suite!r}")
    elif cfg.suites:
        wanted = list(cfg.suites)
    selected = select(reg, wanted, families)
    selected.sort(key=lambda b: (b.family != "core", b.family, b.kind != "speed", b.name))
    if args.list:
        _list(_list_console(), {b.name: b for b in selected},
              {m: e for m, e in import_errors.items() if wanted is None or m in wanted})
        return 1 if import_errors else 0
    tasks = _plan(selected, cfg, import_errors)

    run_id = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = _out_dir(args.out, run_id)
    doc = results.new_document(run_id, results.machine_info(backend), to_container(cfg))
    doc["compile_cache"] = compile_cache
    doc["quality_compile"] = "fast" if fast_quality else "full"
    run = Run(out_dir, doc)
    try:
        for mod, err in import_errors.items():
            if wanted is None or mod in wanted:
                run.doc["results"].append({"kind": "suite", "name": f"{mod}.<import>", "family": mod,
                                           "status": "error", "error": err})
                console.print(f"[red]suite {escape(mod)} failed to import:[/red] {escape(err.splitlines()[0])}")
        run.save()
        console.print(f"jaxcore benchmarks: {len(tasks)} tasks from {len(selected)} benchmarks, backend {backend}, "
                      f"writing to {escape(str(out_dir))}/")
        return _execute(run, tasks, cfg, previous, args, console, out_console)
    except KeyboardInterrupt:  # outside the benchmark loop (comparison, plots, report): keep the file valid
        run.doc["status"] = "interrupted"
        run.save()
        console.print("[yellow]interrupted: keeping the results measured so far[/yellow]")
        return 130


def _quality_workers(cfg: Any, backend: str | None, tasks: list[tuple[Any, str, Any]]) -> int:
    """How many worker processes run the shareable quality benchmarks (1: none, all in this process).

    ``quality_workers`` of the config, at most the CPU count; only on the CPU backend (an
    accelerator's memory is not shared between processes), at most one a family (a family's tasks
    run on one worker), and only for two or more families.
    """
    from . import parallel

    n = int(cfg.quality_workers)
    if n <= 1 or backend != "cpu":
        return 1
    n = min(n, os.cpu_count() or 1)
    families = {b.family for b, what, _ in tasks if parallel.shareable(b, what)}  # a family runs on one worker
    return min(n, len(families)) if len(families) >= 2 else 1


def _execute(run: Run, tasks: list[tuple[Any, str, Any]], cfg: Any, previous: Any, args: argparse.Namespace,
             console: Any, out_console: Any) -> int:
    import jax
    from rich.markup import escape

    from . import parallel, report, results, runner

    out_dir = run.out_dir
    key = jax.random.key(int(cfg.seed))
    interrupted = False
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    try:
        with Progress(TextColumn("{task.description}", markup=False), BarColumn(),
                      TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                      console=console, transient=False) as progress:
            ceil_task = progress.add_task("machine ceilings", total=1)
            try:
                cc = cfg.ceilings
                run.doc["ceilings"] = runner.measure_ceilings(int(cc.matmul_n), int(cc.copy_mib), int(cc.repeats))
            except Exception as exc:  # keep going without ceilings
                run.doc["ceilings"] = {"error": f"{type(exc).__name__}: {exc}"}
            progress.advance(ceil_task)
            run.save()
            bar = progress.add_task("benchmarks", total=len(tasks))

            def failure(name: str, rec: dict[str, Any]) -> None:  # a record that is not ok: its first line
                if rec.get("status") != "ok":
                    first = (rec.get("error") or "").strip().splitlines()
                    console.print(f"[red]{escape(name)}: {rec.get('status')}[/red] "
                                  f"{escape(first[0][:300] if first else '')}")

            order = list(range(len(tasks)))
            workers = _quality_workers(cfg, run.doc.get("machine", {}).get("backend"), tasks)
            if workers > 1:
                shared = [i for i in order if parallel.shareable(tasks[i][0], tasks[i][1])]
                expected = parallel.expected_seconds()
                per_family: dict[str, float] = {}
                for i in shared:
                    b = tasks[i][0]
                    per_family[b.family] = per_family.get(b.family, 0.0) + expected.get(b.name, 60.0)
                shared.sort(key=lambda i: -per_family[tasks[i][0].family])  # the longest families first
                run.doc["quality_workers"] = workers
                init = {"seed": int(cfg.seed), "quick": bool(cfg.quick), "timeout_s": float(cfg.timeout_s),
                        "repeats": int(cfg.repeats), "min_repeats": int(cfg.min_repeats),
                        "max_time_s": float(cfg.max_time_s), "x64": bool(cfg.x64), "out_dir": str(out_dir),
                        "compile_cache": run.doc.get("compile_cache")}  # None: off (--no-compile-cache)

                def record(j: int, rec: dict[str, Any]) -> None:
                    failure(tasks[shared[j]][0].name, rec)
                    run.add(rec)
                    progress.advance(bar)

                back = parallel.run_pool(
                    [tasks[i] for i in shared], workers=workers, init=init, out_dir=out_dir, on_record=record,
                    on_progress=lambda text: progress.update(bar, description=f"[{workers} workers] {text}"[:60]))
                done = set(shared) - {shared[j] for j in back}
                order = [i for i in order if i not in done]
            previous_family = None
            for i in order:
                b, what, arg = tasks[i]
                if previous_family is not None and previous_family != b.family:
                    runner.release_compiled()  # a family's programs, unmapped before the next family's
                previous_family = b.family
                sub = task_key(key, b.name, what, arg)
                label = f"{b.name} {'' if what != 'size' else ', '.join(f'{k}={v}' for k, v in arg.items())}"
                progress.update(bar, description=label[:60])
                rec = parallel.run_task(b, what, arg, sub, cfg, run.doc["ceilings"], out_dir,
                                        lambda msg, _l=b.name: progress.update(bar, description=f"{_l}: {msg}"[:60]))
                failure(b.name, rec)
                run.add(rec, "scaling" if what in ("scaling", "devices") else "results")
                progress.advance(bar)
    except KeyboardInterrupt:
        interrupted = True
        console.print("[yellow]interrupted: keeping the results measured so far[/yellow]")

    if previous is not None:
        run.doc["comparison"] = results.compare(previous, run.doc)
        run.doc["comparison_warnings"] = results.comparable(previous, run.doc)
        for w in run.doc["comparison_warnings"]:
            console.print(f"[yellow]--compare:[/yellow] {escape(w)}")
    try:
        run.doc["plots"] = report.plots(run.doc, out_dir)
    except Exception as exc:
        run.doc["plots_error"] = f"{type(exc).__name__}: {exc}"
    failed = [r for r in run.doc["results"] + run.doc["scaling"] if r.get("status") != "ok"]
    bad_baselines = [(r["name"], n) for r in run.doc["results"] if r.get("kind") == "speed"
                     for n, bb in r.get("baselines", {}).items() if bb.get("status") in ("wrong", "error")]
    run.doc["status"] = "interrupted" if interrupted else ("failed" if failed or bad_baselines else "complete")
    run.save()

    if args.format == "json":
        print(run.json_path.read_text())
    elif args.format == "markdown":
        print(run.md_path.read_text())
    else:
        report.print_table(run.doc, out_console)
    console.print(f"results: {escape(str(run.json_path))}  report: {escape(str(run.md_path))}  "
                  f"plots: {escape(str(out_dir / 'plots'))}/", soft_wrap=True)
    if failed or bad_baselines:
        names = sorted({r["name"] for r in failed} | {w[0] for w in bad_baselines})
        console.print(f"[red]{len(failed)} benchmark(s) failed or disagreed and {len(bad_baselines)} baseline(s) "
                      f"disagreed or raised:[/red] " + escape(", ".join(names)))
    if interrupted:
        return 130
    return 1 if (failed or bad_baselines) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
