"""Quality benchmarks on worker processes, two at a time on a CPU run.

A cold CPU run spends about half of its time compiling, and XLA compiles a program on one
thread: while one quality benchmark compiles, the other core idles. The quality benchmarks that
time nothing (``QualityBenchmark.timed`` false) therefore run on ``quality_workers`` worker
processes at once, before the speed benchmarks and the timed quality benchmarks, which run alone
in the main process as before: no speed figure is measured beside other work.

A worker is ``python -m benchmarks.parallel``. It speaks JSON lines: the main process writes an
``init`` message and then one ``task`` at a time on the worker's stdin; the worker answers
``ready``, ``progress`` and ``done`` (the whole record) on a private copy of its stdout (what the
suites print goes to its log, ``<out>/workers/worker-<i>.log``). A worker uses the main process's
persistent compilation cache folder (``init["compile_cache"]``, none under ``--no-compile-cache``), so a
second run loads its programs instead of compiling them again. A benchmark draws the same keys
as in the main process (:func:`benchmarks.plan.task_key`), so its figures do not depend on where
it ran. A worker that dies (a crash, the hard time limit's watchdog, memory) costs the task it
was running, which is recorded as an error with the tail of its log; a new worker takes the rest.
"""

from __future__ import annotations

import json
import os
import pathlib
import selectors
import subprocess
import sys
import time
import traceback
import types
from collections.abc import Callable
from typing import Any

#: what a worker may go without a message before the main process ends it: the benchmark's hard
#: time limit plus the watchdog's grace (see :func:`benchmarks.runner.hard_timeout`) and a margin
def _silence_limit(timeout_s: float) -> float:
    return timeout_s + max(60.0, 0.5 * timeout_s) + 60.0


def run_task(b: Any, what: str, arg: Any, sub: Any, cfg: Any, ceilings: Any, out_dir: pathlib.Path,
             progress: Callable[[str], None]) -> dict[str, Any]:
    """Run one task under the hard time limit; return its record (errors recorded, not raised).

    ``cfg`` needs ``timeout_s``, ``repeats``, ``min_repeats``, ``max_time_s`` and ``quick``.
    KeyboardInterrupt propagates.
    """
    from . import runner
    from .registry import QualityContext

    t0 = time.perf_counter()
    c0 = runner.compile_totals()
    try:
        with runner.hard_timeout(float(cfg.timeout_s)):
            if what == "size":
                rec = runner.run_speed_size(
                    b, arg, sub, repeats=int(cfg.repeats), min_repeats=int(cfg.min_repeats),
                    max_time_s=float(cfg.max_time_s), ceilings=ceilings)
            elif what == "devices":
                rec = runner.run_device_scaling(b, arg["base"], sub, arg["counts"], arg["mode"],
                                                repeats=int(cfg.repeats), min_repeats=int(cfg.min_repeats),
                                                max_time_s=float(cfg.max_time_s))
            elif what == "scaling":
                rec = runner.run_scaling(b, arg["param"], arg["values"], arg["base"], sub,
                                         repeats=int(cfg.repeats), min_repeats=int(cfg.min_repeats),
                                         max_time_s=float(cfg.max_time_s))
            else:
                ctx = QualityContext(params=arg, out_dir=out_dir, key=sub, quick=bool(cfg.quick), progress=progress)
                rec = runner.run_quality(b, ctx)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        status = "timeout" if isinstance(exc, runner.BenchmarkTimeout) else "error"
        rec = {"kind": {"scaling": "scaling", "devices": "devices"}.get(what, b.kind), "name": b.name,
               "family": b.family, "status": status,
               "error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=10)}"}
        if what == "size":
            rec["size"] = arg
        elif what == "quality":
            rec["params"] = arg
        elif what == "scaling":
            rec["param"] = arg["param"]
    rec["wall_s"] = time.perf_counter() - t0
    rec["compile_time"] = runner.compile_time_since(c0)
    rec["peak_rss_mib"] = runner.peak_rss_mib()
    rec["memory_maps"] = runner.memory_maps()
    return rec


def shareable(b: Any, what: str) -> bool:
    """Whether a task may run on a worker beside another: a quality benchmark that times nothing,
    registered by a module of ``benchmarks.suites`` (which a worker imports; a benchmark registered
    elsewhere, by a test say, runs in the main process)."""
    if what != "quality" or getattr(b, "timed", False):
        return False
    return getattr(b.run, "__module__", "").startswith("benchmarks.suites.")


def expected_seconds() -> dict[str, float]:
    """Each benchmark's wall time in the reference run (``docs/benchmarks/results.json`` of a
    checkout), to start the longest quality benchmarks first; empty when there is none."""
    path = pathlib.Path(__file__).resolve().parent.parent / "docs" / "benchmarks" / "results.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    out: dict[str, float] = {}
    for r in doc.get("results", []):
        if isinstance(r, dict) and isinstance(r.get("wall_s"), (int, float)):
            out[str(r.get("name"))] = out.get(str(r.get("name")), 0.0) + float(r["wall_s"])
    return out


# --------------------------------------------------------------------------- the main process's side


class _Worker:
    def __init__(self, index: int, init: dict[str, Any], log_dir: pathlib.Path, command: list[str] | None):
        self.index = index
        self.log_path = log_dir / f"worker-{index}.log"
        self.log = open(self.log_path, "ab")  # noqa: SIM115 (lives as long as the worker)
        env = dict(os.environ)
        env["JAX_PLATFORMS"] = "cpu"  # workers run only in CPU runs
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        self.proc = subprocess.Popen(command or [sys.executable, "-m", "benchmarks.parallel"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     env=env, cwd=str(pathlib.Path(__file__).resolve().parent.parent))
        self.buffer = b""
        self.ready = False
        self.task: int | None = None
        self.queue: list[int] = []  # the rest of the family it runs
        self.last_heard = time.monotonic()
        self.send({"init": {**init, "index": index}})

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def log_tail(self, chars: int = 1500) -> str:
        try:
            self.log.flush()
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def close(self, kill: bool = False) -> None:
        try:
            if kill:
                self.proc.kill()
            elif self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
        self.log.close()


def run_pool(tasks: list[tuple[Any, str, Any]], *, workers: int, init: dict[str, Any], out_dir: pathlib.Path,
             on_record: Callable[[int, dict[str, Any]], None], on_progress: Callable[[str], None],
             command: list[str] | None = None, max_restarts: int = 4) -> list[int]:
    """Run ``tasks`` (shareable quality tasks) on ``workers`` worker processes.

    A family's tasks run on one worker, one after the other in the given order, so that they share
    the programs they compile (as in one process); families are handed out in the order of their
    first task, so put the longest first.

    ``on_record(i, rec)`` gets the record of ``tasks[i]`` as it arrives; ``on_progress(text)`` a line
    naming what the workers run. Returns the indices of the tasks that no worker could take (every
    worker failed to start, or a worker did not know the benchmark): the caller runs those itself.
    A worker's death is the error record of its current task. KeyboardInterrupt ends the workers
    and propagates.
    """
    if not tasks:
        return []
    log_dir = out_dir / "workers"
    log_dir.mkdir(parents=True, exist_ok=True)
    silence = _silence_limit(float(init.get("timeout_s", 600.0)))
    jobs: dict[str, list[int]] = {}
    for i, (b, _, _) in enumerate(tasks):
        jobs.setdefault(b.family, []).append(i)
    pending = list(jobs.values())  # of families' task lists
    handed_back: list[int] = []
    sel = selectors.DefaultSelector()
    pool: list[_Worker] = []
    started = 0

    def start() -> None:
        nonlocal started
        w = _Worker(started, init, log_dir, command)
        started += 1
        pool.append(w)
        assert w.proc.stdout is not None
        os.set_blocking(w.proc.stdout.fileno(), False)
        sel.register(w.proc.stdout, selectors.EVENT_READ, w)

    def retire(w: _Worker, why: str | None) -> None:
        sel.unregister(w.proc.stdout)
        pool.remove(w)
        if w.queue:  # the rest of its family goes to the next free worker
            pending.insert(0, w.queue)
            w.queue = []
        if w.task is not None:
            b, what, arg = tasks[w.task]
            rec = {"kind": b.kind, "name": b.name, "family": b.family, "status": "error", "params": arg,
                   "error": f"WorkerDied: {why}; the end of its log ({w.log_path}):\n{w.log_tail()}"}
            on_record(w.task, rec)
            w.task = None
        w.close(kill=True)

    def describe() -> None:
        running = [tasks[w.task][0].name for w in pool if w.task is not None]
        on_progress(" | ".join(running) if running else "starting workers")

    def hand_out(w: _Worker) -> None:
        if not w.ready or w.task is not None:
            return
        if not w.queue and pending:
            w.queue = pending.pop(0)
        if w.queue:
            i = w.queue.pop(0)
            b, what, arg = tasks[i]
            w.task = i
            w.last_heard = time.monotonic()
            w.send({"task": i, "name": b.name, "module": b.run.__module__, "params": arg})
            describe()

    try:
        for _ in range(min(workers, len(pending))):
            start()
        describe()
        while pending or any(w.task is not None or w.queue for w in pool):
            if not pool:
                if started - workers >= max_restarts:  # workers keep dying: the main process runs the rest
                    handed_back += [i for job in pending for i in job]
                    pending.clear()
                    break
                start()
            for key, _ in sel.select(timeout=5.0):
                w = key.data
                try:
                    chunk = os.read(key.fd, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    code = w.proc.poll()
                    if code is None:
                        try:
                            code = w.proc.wait(timeout=5)
                        except subprocess.TimeoutExpired:
                            code = "unknown"
                    retire(w, f"worker {w.index} ended with exit status {code}")
                    continue
                w.buffer += chunk
                w.last_heard = time.monotonic()
                *lines, w.buffer = w.buffer.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    msg = json.loads(line)
                    if "ready" in msg:
                        w.ready = True
                    elif "progress" in msg:
                        on_progress(f"{tasks[msg['progress']][0].name}: {msg['msg']}")
                    elif "unknown" in msg:  # the worker's suites do not register it
                        handed_back.append(msg["unknown"])
                        w.task = None
                    elif "done" in msg:
                        on_record(msg["done"], msg["record"])
                        w.task = None
                    hand_out(w)
            now = time.monotonic()
            for w in list(pool):
                if w.task is not None and now - w.last_heard > silence:
                    retire(w, f"worker {w.index} sent nothing for {now - w.last_heard:.0f} s")
            for w in pool:
                hand_out(w)
    finally:
        for w in list(pool):
            w.close(kill=bool(pending) or any(x.task is not None or x.queue for x in pool))
        sel.close()
    return handed_back


# --------------------------------------------------------------------------- the worker's side


def _enable_compile_cache(folder: str | None) -> str | None:
    """Switch the persistent compilation cache on in a worker, in the folder the main process uses
    (``init["compile_cache"]``; None when the main process runs without it, ``--no-compile-cache`` or
    ``JAXCORE_COMPILE_CACHE=0``), before the worker compiles anything. Returns the folder, or None."""
    if not folder:
        return None
    from jaxcore import enable_compilation_cache

    try:
        got = enable_compilation_cache(folder)
    except Exception as exc:  # noqa: BLE001 - an unwritable folder: the worker runs cold, as the main process would
        print(f"compilation cache off ({exc})", file=sys.stderr, flush=True)
        return None
    return str(got) if got is not None else None


def worker_main() -> int:
    """A worker's loop (``python -m benchmarks.parallel``); see the module docstring."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what the suites print goes to the log, not into the protocol
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)

    def say(msg: dict[str, Any]) -> None:
        from .results import _clean

        proto.write(json.dumps(_clean(msg), allow_nan=False) + "\n")
        proto.flush()

    first = json.loads(sys.stdin.readline() or "{}")
    init = first.get("init")
    if init is None:
        return 2
    import jax

    if init.get("x64"):
        jax.config.update("jax_enable_x64", True)
    cache = _enable_compile_cache(init.get("compile_cache"))
    from . import runner
    import importlib

    from .plan import task_key
    from .registry import registry

    settings = types.SimpleNamespace(**init)
    out_dir = pathlib.Path(init["out_dir"])
    key = jax.random.key(int(init["seed"]))
    family = None
    say({"ready": True, "compile_cache": cache})
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        i, name, params = msg["task"], msg["name"], msg["params"]
        module = str(msg.get("module", ""))
        b = None
        if module.startswith("benchmarks.suites."):
            try:  # a family's suite, imported when its first task comes (not every suite: their imports cost)
                importlib.import_module(module)
                b = registry().get(name)
            except Exception:
                traceback.print_exc()
        if b is None or b.kind != "quality":
            say({"unknown": i})
            continue
        if family is not None and family != b.family:
            runner.release_compiled()
        family = b.family
        print(f"--- {name} ({time.strftime('%H:%M:%S')})", file=sys.stderr, flush=True)
        rec = run_task(b, "quality", params, task_key(key, name, "quality", params), settings, None, out_dir,
                       lambda m, _i=i: say({"progress": _i, "msg": str(m)}))
        rec["worker"] = int(init.get("index", 0))
        say({"done": i, "record": rec})
    return 0


if __name__ == "__main__":  # pragma: no cover
    code = worker_main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as benchmarks/__main__.py: no interpreter teardown under a possibly running compile
