"""Device memory of the full configuration's speed programs, from XLA's memory analysis (nothing is run).

    python scripts/full_memory.py                        # every speed benchmark of configs/full.yaml
    python scripts/full_memory.py --family lm alignment  # some families
    python scripts/full_memory.py --bench lm.prefill --out docs/benchmarks/full_memory.md

For each chosen speed benchmark, its largest size in the configuration (the last one listed; a
benchmark the configuration does not size keeps its suite's default sizes) is built by the suite's own
``setup(size, key)``, every array argument is replaced by a ``jax.ShapeDtypeStruct`` of its shape,
dtype and sharding, and ``jax.jit(kernel).lower(*abstract).compile().memory_analysis()`` is read: the
bytes of the arguments, outputs and temporaries one device holds while the program runs (their sum
is an upper bound: donated or aliased buffers count twice). The inputs are built once on the host
(the suites' setups hold NumPy/JAX arrays and their baselines' tensors), never copied to a device
for the compile. Each benchmark runs in a child process of its own (``--timeout`` seconds,
``--max-host-gb`` of resident host memory, default 70% of the machine's; a setup or compile that fails
or passes a limit is a row saying so), so one large size cannot take the others (or the machine) down.

The compile targets the default backend (``--backend cpu`` on a machine without an accelerator):
XLA:CPU's buffer assignment is not XLA:GPU's (other fusions, other scratch space), so a CPU figure
sizes a GPU program to within a small factor, not exactly; run the script on the accelerator to
check. The Markdown table goes to ``--out`` (default: print only); ``--json`` keeps the raw rows.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
GB = 1e9


def _largest_sizes(config: str) -> dict[str, dict[str, Any]]:
    """{benchmark name: its largest size} for every registered speed benchmark under ``config``."""
    from omegaconf import OmegaConf

    from benchmarks.cli import discover_suites
    from benchmarks.config import flatten_overrides, load_config
    from benchmarks.registry import registry

    _, errors = discover_suites()
    cfg = load_config(config)
    ov = flatten_overrides(OmegaConf.to_container(cfg.benchmarks) or {}, list(registry()), list(errors))
    out = {}
    for name, bench in registry().items():
        if bench.kind != "speed" or ov.get(name, {}).get("skip"):
            continue
        sizes = ov.get(name, {}).get("sizes") or list(bench.sizes)
        out[name] = {"family": bench.family, "size": dict(sizes[-1]), "sized": "sizes" in ov.get(name, {})}
    return out


def _abstract(tree: Any) -> Any:
    """Every array leaf of ``tree`` as a ``jax.ShapeDtypeStruct`` (shape, dtype, sharding); the rest as is."""
    import jax
    import numpy as np

    def one(leaf: Any) -> Any:
        if isinstance(leaf, jax.Array):
            return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=leaf.sharding)
        if isinstance(leaf, np.ndarray):
            return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype)
        return leaf

    return jax.tree.map(one, tree)


def _child(name: str, size: dict[str, Any]) -> dict[str, Any]:
    """Build ``name``'s inputs at ``size``, compile on abstract inputs, return the memory analysis."""
    import functools
    import resource

    import jax

    from benchmarks.cli import discover_suites
    from benchmarks.registry import registry

    discover_suites()
    bench = registry()[name]
    row: dict[str, Any] = {"name": name, "family": bench.family, "size": size, "backend": jax.default_backend()}
    t0 = time.perf_counter()
    case = bench.setup(size, jax.random.key(0))
    row["setup_s"] = time.perf_counter() - t0
    abstract = _abstract(case.args)
    row["host_input_bytes"] = int(sum(getattr(x, "nbytes", 0) for x in jax.tree.leaves(case.args)))
    static = dict(case.static)
    del case  # the concrete inputs and the baselines' tensors: not needed for the compile
    t0 = time.perf_counter()
    compiled = jax.jit(functools.partial(bench.kernel, **static)).lower(*abstract).compile()
    row["compile_s"] = time.perf_counter() - t0
    ma = compiled.memory_analysis()
    for f in ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes", "alias_size_in_bytes",
              "generated_code_size_in_bytes"):
        row[f] = int(getattr(ma, f, 0) or 0)
    row["device_bytes"] = row["argument_size_in_bytes"] + row["output_size_in_bytes"] + row["temp_size_in_bytes"]
    row["host_peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    row["status"] = "ok"
    return row


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _run_one(name: str, size: dict[str, Any], timeout: float, backend: str | None,
             max_host_bytes: float) -> dict[str, Any]:
    """One child process: its JSON row, or a row saying why there is none (time, host memory, error)."""
    env = dict(os.environ)
    if backend:
        env["JAX_PLATFORMS"] = backend
    cmd = [sys.executable, __file__, "--child", name, json.dumps(size)]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env, cwd=ROOT)
        why = None
        while proc.poll() is None:
            if time.perf_counter() - t0 > timeout:
                why = f"not finished in {timeout:.0f} s (setup + compile)"
            elif _rss_bytes(proc.pid) > max_host_bytes:  # stop it before the machine's OOM killer does
                why = f"setup + compile needed more than {max_host_bytes / GB:.0f} GB of host memory here"
            if why:
                proc.kill()
                proc.wait()
                return {"name": name, "size": size, "status": why}
            time.sleep(0.25)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    for line in reversed(stdout.splitlines()):
        if line.startswith("{") and '"status"' in line:
            row = json.loads(line)
            row["wall_s"] = time.perf_counter() - t0
            return row
    tail = (stderr or stdout).strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
    return {"name": name, "size": size, "status": f"failed: {tail[0][:160]}"}


def _fmt_bytes(n: int | None) -> str:
    if n is None:
        return ""
    return f"{n / GB:.2f} GB" if n >= 0.1 * GB else f"{n / 1e6:.1f} MB"


def _size_text(size: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in size.items())


def markdown(rows: list[dict[str, Any]], config: str, budget_gb: float) -> str:
    """The table: one row per benchmark, the family's largest program in bold."""
    best: dict[str, tuple[int, str]] = {}
    for r in rows:
        if r.get("status") == "ok" and r["device_bytes"] > best.get(r["family"], (-1, ""))[0]:
            best[r["family"]] = (r["device_bytes"], r["name"])
    lines = ["| family | benchmark | size (largest in the config) | arguments | outputs | temporaries | "
             "total per device | status |", "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r.get("family", ""), r["name"])):
        ok = r.get("status") == "ok"
        mark = "**" if ok and best.get(r["family"], (0, ""))[1] == r["name"] else ""
        flag = " (over budget)" if ok and r["device_bytes"] > budget_gb * GB else ""
        lines.append(f"| {r.get('family', '')} | {mark}{r['name']}{mark} | {_size_text(r['size'])} | "
                     f"{_fmt_bytes(r.get('argument_size_in_bytes'))} | {_fmt_bytes(r.get('output_size_in_bytes'))} | "
                     f"{_fmt_bytes(r.get('temp_size_in_bytes'))} | {mark}{_fmt_bytes(r.get('device_bytes'))}{mark}"
                     f"{flag} | {'ok' if ok else r.get('status')} |")
    backend = next((r["backend"] for r in rows if r.get("backend")), "?")
    return (f"Compiled for `{backend}` from `{config}` by `python scripts/full_memory.py` (XLA's memory analysis; "
            f"nothing run). Bold: each family's largest program. Budget flag: above {budget_gb:g} GB.\n\n"
            + "\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        sys.path.insert(0, str(ROOT))
        print(json.dumps(_child(argv[1], json.loads(argv[2]))), flush=True)
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="configs/full.yaml")
    p.add_argument("--family", nargs="*", default=None, help="only these families")
    p.add_argument("--bench", nargs="*", default=None, help="only these benchmarks")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per benchmark (setup + compile)")
    p.add_argument("--backend", default=None, help="JAX_PLATFORMS for the children (e.g. cpu, cuda)")
    p.add_argument("--max-host-gb", type=float, default=None,
                   help="stop a child above this resident host memory (default: 70%% of the machine's memory)")
    p.add_argument("--budget-gb", type=float, default=100.0, help="flag programs above this many GB per device")
    p.add_argument("--out", default=None, help="write the Markdown table here")
    p.add_argument("--json", default=None, help="write the raw rows here")
    args = p.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    sizes = _largest_sizes(args.config)
    max_host = (args.max_host_gb * GB if args.max_host_gb else
                0.7 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    chosen = [n for n, s in sizes.items() if (args.family is None or s["family"] in args.family)
              and (args.bench is None or n in args.bench)]
    rows = []
    for name in chosen:
        row = _run_one(name, sizes[name]["size"], args.timeout, args.backend, max_host)
        row.setdefault("family", sizes[name]["family"])
        rows.append(row)
        print(f"{name:36s} {_size_text(row['size'])[:60]:60s} {_fmt_bytes(row.get('device_bytes')):>10s} "
              f"{row['status'][:60]}", flush=True)
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    table = markdown(rows, args.config, args.budget_gb)
    print(table)
    if args.out:
        pathlib.Path(args.out).write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
