"""The results document: versioned schema, atomic incremental writes, comparison.

Schema ``jaxcore-benchmarks`` version 1::

    {
      "schema": "jaxcore-benchmarks", "schema_version": 1,
      "run_id": str, "created": ISO time, "updated": ISO time,
      "status": "running" | "complete" | "interrupted" | "failed",
      "pid": int (the process writing the run; a "running" document whose process is gone
              on this host reads as "killed": :func:`run_status`),
      "machine": {hostname, cpu_model, cores, memory_gib, backend, device_kind,
                  device_count, python, jax, jaxlib, numpy, packages{}, git_commit, git_dirty},
      "config": {...},
      "ceilings": {"matmul_flops_per_s": float, "copy_bytes_per_s": float, ...},
      "results": [speed or quality records],
      "scaling": [sweep records],
      "comparison": [...]  (only with --compare),
      "peak_rss_mib": float
    }

A speed record: ``{"kind": "speed", "name", "family", "size", "status"
("ok" | "wrong" | "error" | "timeout"), "kernel": {...}, "baselines": {name:
{...}}, "work", "work_unit", "error"}``. A quality record: ``{"kind":
"quality", "name", "family", "status", "params", "tables", "figures",
"metrics", "notes", "elapsed_s", "error"}``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import importlib.metadata
import json
import math
import os
import pathlib
import platform
import subprocess
import tempfile
from typing import Any

from . import stats

SCHEMA = "jaxcore-benchmarks"
SCHEMA_VERSION = 1


class SchemaError(ValueError):
    """A results file is not a jaxcore benchmark document of a known version."""


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return None


def _git() -> tuple[str | None, bool | None]:
    root = pathlib.Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        ).stdout.strip() or None
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain"],
                cwd=root, capture_output=True, text=True, timeout=10,
            ).stdout.strip()
        )
        return commit, dirty if commit else None
    except (OSError, subprocess.SubprocessError):
        return None, None


def machine_info(backend: str) -> dict[str, Any]:
    """Facts about the machine, the JAX backend and the software versions."""
    import jax

    devices = jax.devices(backend)
    packages = {}
    for dist in ("equinox", "diffrax", "optax", "numpyro", "flax", "chex", "ott-jax", "torch", "pot", "scipy"):
        try:
            packages[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    commit, dirty = _git()
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    return {
        "hostname": platform.node(),
        "os": platform.platform(),
        "cpu_model": _cpu_model(),
        "cores": affinity,
        "memory_gib": _memory_gib(),
        "backend": backend,
        "device_kind": devices[0].device_kind,
        "device_count": len(devices),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": importlib.metadata.version("jaxlib"),
        "numpy": importlib.metadata.version("numpy"),
        "x64": bool(jax.config.jax_enable_x64),
        "packages": packages,
        "git_commit": commit,
        "git_dirty": dirty,
    }


def _clean(obj: Any) -> Any:
    """Make a value JSON-safe: NaN/inf -> None, numpy scalars -> Python."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and getattr(obj, "ndim", 1) == 0:
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over ``path``.

    A reader (or a crash) never sees a half-written file; the temporary file is
    removed if writing fails.
    """
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False)
    try:
        with tmp:
            tmp.write(text)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.chmod(tmp.name, 0o666 & ~_umask())  # NamedTemporaryFile makes 0600; results are for sharing
        os.replace(tmp.name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp.name)
        raise


def write_json_atomic(path: str | os.PathLike, doc: dict[str, Any]) -> None:
    """JSON of ``doc`` (NaN/inf written as null) with :func:`write_text_atomic`."""
    write_text_atomic(path, json.dumps(_clean(doc), indent=1, allow_nan=False))


def new_document(run_id: str, machine: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "created": now(),
        "updated": now(),
        "status": "running",
        "pid": os.getpid(),
        "machine": machine,
        "config": config,
        "ceilings": {},
        "results": [],
        "scaling": [],
        "peak_rss_mib": None,
    }


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists (another user's) or cannot tell
    return True


def run_status(doc: dict[str, Any]) -> str:
    """The run's status, with ``"killed"`` for a ``"running"`` document whose process is gone.

    A run killed by SIGKILL (or a machine's OOM killer) cannot write its final status; its
    document keeps ``"running"``. On the host that wrote it, the recorded ``pid`` tells a live run
    from a dead one (a pid reused by a later process reads as alive). Elsewhere, or for documents
    without a pid, the status is returned as written; ``updated`` says when it last wrote.
    """
    status = doc.get("status")
    if status != "running":
        return status
    pid = doc.get("pid")
    host = (doc.get("machine") or {}).get("hostname")
    if isinstance(pid, int) and not isinstance(pid, bool) and host == platform.node() and not _alive(pid):
        return "killed"
    return status


def load(path: str | os.PathLike) -> dict[str, Any]:
    """Read a results JSON and check its schema.

    A ``"running"`` document whose writing process is gone reads with ``status`` ``"killed"``
    (:func:`run_status`).

    Raises:
        SchemaError: not JSON, not a jaxcore results document, a newer schema
            version, or a required field missing or of the wrong type.
        OSError: the file cannot be read.
    """
    try:
        with open(path) as f:
            doc = json.load(f)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise SchemaError(f"{path} is not a JSON object")
    if doc.get("schema") != SCHEMA:
        raise SchemaError(f"{path} is not a jaxcore benchmark results file (schema field {doc.get('schema')!r})")
    version = doc.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise SchemaError(f"{path} has schema_version {version!r}; this jaxcore reads versions <= {SCHEMA_VERSION}")
    for key, typ in (("machine", dict), ("config", dict), ("results", list)):
        if not isinstance(doc.get(key), typ):
            raise SchemaError(f"{path}: the field {key!r} is missing or not a {typ.__name__}")
    for i, rec in enumerate(doc["results"]):
        _check_record(rec, f"{path}: results[{i}]")
    doc["status"] = run_status(doc)
    return doc


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_record(rec: Any, where: str) -> None:
    """Raise SchemaError if a record that :func:`compare` would read is malformed."""
    if not isinstance(rec, dict):
        raise SchemaError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    if rec.get("kind") != "speed" or rec.get("status") != "ok":
        return
    name = rec.get("name")
    if not isinstance(name, str):
        raise SchemaError(f"{where}: expected a string 'name', got {name!r}")
    if "size" in rec and not isinstance(rec["size"], dict):
        raise SchemaError(f"{where} ({name}): expected 'size' to be an object, got {rec['size']!r}")
    k = rec.get("kernel")
    if not isinstance(k, dict):
        raise SchemaError(f"{where} ({name}): expected a 'kernel' object, got {k!r}")
    if not (_number(k.get("median_s")) and k["median_s"] > 0):
        raise SchemaError(f"{where} ({name}): expected kernel.median_s a number > 0, got {k.get('median_s')!r}")
    iqr = k.get("iqr_s")
    if iqr is not None and not (_number(iqr) and iqr >= 0):
        raise SchemaError(f"{where} ({name}): expected kernel.iqr_s a number >= 0, got {iqr!r}")
    times = k.get("times_s")
    if times is not None and not (isinstance(times, list) and all(_number(t) for t in times)):
        raise SchemaError(f"{where} ({name}): expected kernel.times_s a list of numbers, got {times!r}")


def _key(rec: dict[str, Any]) -> str:
    return str(rec.get("name")) + " " + json.dumps(rec.get("size", {}), sort_keys=True, default=str)


def _timed(rec: Any) -> bool:
    if not isinstance(rec, dict) or rec.get("kind") != "speed" or rec.get("status") != "ok" or "name" not in rec:
        return False
    k = rec.get("kernel")
    if not isinstance(k, dict):
        return False
    med, iqr = k.get("median_s"), k.get("iqr_s") or 0.0
    return isinstance(med, (int, float)) and med > 0 and isinstance(iqr, (int, float)) and iqr >= 0


def compare(previous: dict[str, Any], current: dict[str, Any], *, rel_floor: float = 0.10) -> list[dict[str, Any]]:
    """Compare kernel medians of two runs, size by size.

    Returns one row per speed record timed in both runs (malformed records are
    skipped): ``{"name", "size", "old_s", "new_s", "ratio", "band", "verdict"}``
    where ``verdict`` is "slower" / "faster" / "same" from
    :func:`benchmarks.stats.regression_verdict` with each run's sample count.
    """
    old = {_key(r): r for r in previous.get("results", []) if _timed(r)}
    rows = []
    for rec in current.get("results", []):
        if not _timed(rec):
            continue
        prev = old.get(_key(rec))
        if prev is None:
            continue
        k0, k1 = prev["kernel"], rec["kernel"]
        verdict, ratio, band = stats.regression_verdict(
            k0["median_s"], k0.get("iqr_s") or 0.0, k1["median_s"], k1.get("iqr_s") or 0.0,
            n_old=max(1, len(k0.get("times_s") or [0])), n_new=max(1, len(k1.get("times_s") or [0])),
            rel_floor=rel_floor,
        )
        rows.append({
            "name": rec["name"], "size": rec.get("size", {}), "old_s": k0["median_s"], "new_s": k1["median_s"],
            "ratio": ratio, "band": band, "verdict": verdict,
        })
    return rows


def comparable(previous: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Warnings when two runs differ in what makes times comparable (backend, device, precision, CPU)."""
    warnings = []
    m0, m1 = previous.get("machine", {}), current.get("machine", {})
    for key in ("backend", "device_kind", "device_count", "x64", "cpu_model", "cores"):
        if m0.get(key) != m1.get(key):
            warnings.append(f"the runs differ in {key}: {m0.get(key)!r} before, {m1.get(key)!r} now")
    return warnings
