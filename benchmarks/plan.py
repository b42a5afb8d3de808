"""What a run will do: the suites discovered, the benchmarks ``--suite`` selects, their tasks with the
configuration's overrides applied and checked, and each task's PRNG key.

Imported by the command line (:mod:`benchmarks.cli`) and by the quality worker processes
(:mod:`benchmarks.parallel`), which must derive the same task keys; it imports neither.
"""

from __future__ import annotations

import fnmatch
import importlib
import json
import pkgutil
import traceback
import zlib
from typing import Any

__all__ = ["UsageError", "discover_suites", "select", "task_key"]


class UsageError(Exception):
    """A command-line error reported with exit status 2."""


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


def task_key(key: Any, name: str, what: str, arg: Any) -> Any:
    """The PRNG key of one task: ``key`` folded with a checksum of the benchmark's name, the
    task kind and (for a size) the size, so that a benchmark draws the same data whichever other
    benchmarks run beside it (``--suite``, skips) and in whatever order."""
    import jax

    ident = name + "/" + what
    if what == "size":  # NumPy scalars as Python numbers, so np.int64(64) and 64 give one key
        ident += "/" + json.dumps(dict(arg), sort_keys=True, default=lambda v: v.item() if hasattr(v, "item") else str(v))
    return jax.random.fold_in(key, zlib.crc32(ident.encode()) % 2**31)


def select(reg: dict[str, Any], wanted: list[str] | None, families: list[str]) -> list[Any]:
    """The benchmarks ``--suite`` names: whole families (``tpp``), single benchmarks
    (``tpp.hawkes_loglik``) or shell-style globs over benchmark names (``'causal.*mcmc*'``).

    Raises:
        UsageError: an entry matches no family and no benchmark (the message lists the families).
    """
    if wanted is None:
        return list(reg.values())
    chosen: dict[str, Any] = {}
    for item in wanted:
        hits = [b for b in reg.values() if b.family == item or fnmatch.fnmatchcase(b.name, item)]
        if not hits and item not in families:  # a family whose suite failed to import has no benchmarks
            raise UsageError(f"--suite: expected a family ({', '.join(families)}), a benchmark name or a glob "
                             f"over benchmark names such as 'causal.*mcmc*', got {item!r} (matches nothing)")
        chosen.update((b.name, b) for b in hits)
    return list(chosen.values())


def _sizes(value: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(s, dict) for s in value):
        raise UsageError(f"{where} must be a list of mappings like [{{n: 256}}], got {value!r}")
    return [dict(s) for s in value]


def _check_size_keys(b: Any, sizes: list[dict[str, Any]]) -> None:
    """UsageError unless every size gives the parameters all of the benchmark's declared sizes share.

    (Extra parameters are allowed: some setups read optional ones, e.g. ``in_features``.)
    """
    declared = [set(s) for s in list(b.sizes) + list(b.quick_sizes or [])]
    if not declared:
        return
    required = set.intersection(*declared)
    for s in sizes:
        missing = required - set(s)
        if missing:
            raise UsageError(f"benchmarks.{b.name}: expected sizes with the parameters {sorted(required)}, "
                             f"got {s!r} (missing {sorted(missing)})")
        for key, value in s.items():
            _check_size_value(b, key, value, f"benchmarks.{b.name}.sizes: {key}")


def _check_size_value(b: Any, key: str, value: Any, where: str) -> None:
    """UsageError unless ``value`` fits the benchmark's declared values of ``key``.

    A parameter declared numeric takes a finite number of the same kind (an int where every declared
    value is an int) that is > 0, or >= 0 where the benchmark names it in ``zero_sizes`` or a
    declared size sets it to 0 (a sentinel such as ``n_dags: 0``); a negative, zero, NaN or non-numeric size fails here, at configuration time,
    not inside the run (an MLIR error, ``int('abc')``, or an "ok" record of no work).
    """
    import math

    known = [s[key] for s in list(b.sizes) + list(b.quick_sizes or []) if key in s]
    numeric = [v for v in known if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not known or len(numeric) != len(known):
        return  # a parameter only some setups read, or a non-numeric one (a model name, a dtype)
    integral = all(isinstance(v, int) for v in numeric)
    kind = "an int" if integral else "a number"
    ok_type = isinstance(value, (int, float)) and not isinstance(value, bool) and (
        isinstance(value, int) or not integral)
    low = 0 if key in getattr(b, "zero_sizes", ()) or any(v == 0 for v in numeric) else None
    bound = ">= 0" if low == 0 else "> 0"
    if not ok_type or not math.isfinite(value) or value < 0 or (low is None and value == 0):
        raise UsageError(f"{where}: expected {kind} {bound}, got {value!r}")


def _plan(selected: list[Any], cfg: Any, import_errors: dict[str, str]) -> list[tuple[Any, str, Any]]:
    """The (benchmark, what, argument) tasks of the run, with the config's overrides applied."""
    from omegaconf import OmegaConf

    from .config import SPEED_OVERRIDE_KEYS, ConfigError, flatten_overrides
    from .registry import registry

    names = list(registry())
    try:
        speed_ov = flatten_overrides(OmegaConf.to_container(cfg.benchmarks) or {}, names, list(import_errors))
        quality_ov = flatten_overrides(OmegaConf.to_container(cfg.quality) or {}, names, list(import_errors))
    except ConfigError as exc:
        raise UsageError(str(exc)) from exc
    tasks: list[tuple[Any, str, Any]] = []
    for b in selected:
        if b.kind == "speed":
            ov = speed_ov.get(b.name, {})
            bad = set(ov) - SPEED_OVERRIDE_KEYS
            if bad:
                raise UsageError(f"benchmarks.{b.name}: unknown keys {sorted(bad)}; "
                                 f"known: {sorted(SPEED_OVERRIDE_KEYS)}")
            if ov.get("skip"):
                continue
            if cfg.quick:
                sizes = ov.get("quick_sizes", ov.get("sizes"))
                sizes = _sizes(sizes, f"benchmarks.{b.name}.quick_sizes") if sizes is not None else (
                    list(b.quick_sizes or list(b.sizes)[:1]))
            else:
                sizes = _sizes(ov["sizes"], f"benchmarks.{b.name}.sizes") if "sizes" in ov else list(b.sizes)
            _check_size_keys(b, sizes)
            tasks += [(b, "size", dict(s)) for s in sizes]
            if cfg.device_scaling and b.batch_param is not None:
                if any(c < 1 for c in cfg.device_counts):
                    raise UsageError(f"device_counts: expected integers >= 1, got {list(cfg.device_counts)}")
                counts = sorted(set(int(c) for c in cfg.device_counts) | {1})
                base = dict(sizes[0]) if sizes else dict(b.sizes[0])
                tasks += [(b, "devices", {"mode": m, "counts": counts, "base": base}) for m in ("strong", "weak")]
            if cfg.scaling and (b.scaling or ov.get("scaling")):
                sc = ov.get("scaling") or {"param": b.scaling.param, "values": list(b.scaling.values)}
                if not isinstance(sc, dict) or "param" not in sc or "values" not in sc:
                    raise UsageError(f"benchmarks.{b.name}.scaling must be {{param: NAME, values: [...]}}, got {sc!r}")
                base = dict(sizes[0]) if sizes else dict(b.sizes[0])
                if sc["param"] not in base:
                    raise UsageError(f"benchmarks.{b.name}.scaling: expected param one of {sorted(base)}, "
                                     f"got {sc['param']!r}")
                for v in list(sc["values"]):
                    _check_size_value(b, sc["param"], v, f"benchmarks.{b.name}.scaling.values: {sc['param']}")
                tasks.append((b, "scaling", {"param": sc["param"], "values": list(sc["values"]), "base": base}))
        else:
            ov = dict(quality_ov.get(b.name, {}))
            if ov.pop("skip", False):
                continue
            params = dict(b.params)
            if cfg.quick:
                params.update(b.quick_params)
            unknown = set(ov) - set(params)
            if unknown:
                raise UsageError(f"quality.{b.name}: unknown parameters {sorted(unknown)}; known: {sorted(params)}")
            params.update(ov)
            tasks.append((b, "quality", params))
    return tasks
