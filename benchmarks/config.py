"""Run configuration: YAML files through OmegaConf, with ``key=value`` overrides.

A configuration file holds only what differs from :data:`DEFAULTS`; the
benchmarks' own sizes (declared in each suite module) are the defaults for
``benchmarks`` and ``quality``. Layout::

    seed: 0
    repeats: 7            # timed (kernel, baseline) pairs per size
    max_time_s: 20        # soft time budget per size; stops repeating past it
    timeout_s: 600        # hard limit per benchmark (SIGALRM)
    quick: false          # use quick_sizes / quick_params
    scaling: false        # run each benchmark's size sweep
    suites: null          # list of families, or null for all
    ceilings: {matmul_n: 2048, copy_mib: 256, repeats: 5}
    benchmarks:           # per speed benchmark: sizes, quick_sizes, scaling, repeats, skip
      core.logsumexp: {sizes: [{n: 4096, d: 256}]}
    quality:              # per quality benchmark: any of its params, or skip
      tpp.fit: {epochs: 50}
"""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

DEFAULTS: dict[str, Any] = {
    "seed": 0,
    "repeats": 7,
    "min_repeats": 2,
    "max_time_s": 20.0,
    "timeout_s": 600.0,
    "quick": False,
    "scaling": False,
    "x64": False,
    "suites": None,
    "ceilings": {"matmul_n": 2048, "copy_mib": 256, "repeats": 5},
    "benchmarks": {},
    "quality": {},
}

#: Settings that ``--quick`` applies on top of the file (fewer repeats).
QUICK: dict[str, Any] = {
    "quick": True,
    "repeats": 3,
    "max_time_s": 5.0,
    "ceilings": {"matmul_n": 1024, "copy_mib": 64, "repeats": 3},
}

REPO_CONFIGS = pathlib.Path(__file__).resolve().parent.parent / "configs"


class ConfigError(ValueError):
    """A configuration file or override is invalid."""


def load_config(
    path: str | pathlib.Path | None = None,
    overrides: Sequence[str] = (),
    *,
    quick: bool = False,
) -> DictConfig:
    """Build the run configuration.

    Order of precedence (later wins): :data:`DEFAULTS`, the YAML file (the
    repository's ``configs/default.yaml`` when ``path`` is None and it exists),
    :data:`QUICK` if ``quick``, then the ``key=value`` overrides
    (OmegaConf dot-list syntax, e.g. ``repeats=3`` or
    ``"benchmarks.core.matmul.sizes=[{n: 256}]"``).

    Raises:
        ConfigError: the file is missing or not a mapping, a key is unknown, or
            an override is malformed.
    """
    base = OmegaConf.create(DEFAULTS)
    layers = []
    if path is None:
        default = REPO_CONFIGS / "default.yaml"
        path = default if default.exists() else None
    if path is not None:
        path = pathlib.Path(path)
        if not path.exists():
            raise ConfigError(f"--config: no such file {str(path)!r}")
        loaded = OmegaConf.load(path)
        if not isinstance(loaded, DictConfig):
            raise ConfigError(f"--config: {path} must hold a YAML mapping, got {type(loaded).__name__}")
        unknown = set(loaded.keys()) - set(DEFAULTS)
        if unknown:
            raise ConfigError(f"--config: unknown keys {sorted(unknown)} in {path}; known: {sorted(DEFAULTS)}")
        layers.append(loaded)
    try:
        if overrides:
            dot = OmegaConf.from_dotlist(list(overrides))
            unknown = set(dot.keys()) - set(DEFAULTS)
            if unknown:
                raise ConfigError(f"override: unknown keys {sorted(unknown)}; known: {sorted(DEFAULTS)}")
            layers.append(dot)
        cfg = OmegaConf.merge(base, *layers)
        if quick or cfg.quick:
            # quick settings sit under the file and the overrides, which may refine them
            cfg = OmegaConf.merge(base, OmegaConf.create(QUICK), *layers)
            cfg.quick = True
    except ConfigError:
        raise
    except Exception as exc:  # omegaconf raises several types
        raise ConfigError(f"invalid configuration: {exc}") from exc
    if int(cfg.repeats) < 1:
        raise ConfigError(f"repeats must be >= 1, got {cfg.repeats}")
    return cfg


def to_container(cfg: DictConfig) -> dict[str, Any]:
    """Plain dict of the configuration (for the results JSON)."""
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


def bench_overrides(cfg: DictConfig, name: str, section: str = "benchmarks") -> dict[str, Any]:
    """The ``benchmarks.<name>`` (or ``quality.<name>``) overrides as a dict.

    Benchmark names contain dots, so both the nested form
    (``benchmarks: {core: {matmul: {...}}}``) and the quoted flat form
    (``benchmarks: {"core.matmul": {...}}``) are accepted.
    """
    sec = OmegaConf.to_container(cfg[section], resolve=True) or {}
    if name in sec:
        return dict(sec[name])
    node: Any = sec
    for part in name.split("."):
        if not isinstance(node, dict) or part not in node:
            return {}
        node = node[part]
    return dict(node) if isinstance(node, dict) else {}
