"""Run configuration: a typed OmegaConf schema, YAML files, ``key=value`` overrides.

The embedded default is :class:`RunConfig` itself (``configs/default.yaml``
restates it, and a test keeps the two equal), so an installed jaxcore without
the repository's ``configs/`` folder runs the same bare ``python -m
benchmarks``. A file holds only what differs from the defaults::

    seed: 0
    repeats: 7            # timed (kernel, baseline) pairs per size
    max_time_s: 5         # soft time budget per size; stops repeating past it
    timeout_s: 600        # hard limit per size, per sweep, per quality run (SIGALRM)
    quick: false          # use quick_sizes / quick_params
    scaling: false        # run each benchmark's size sweep
    device_scaling: false # shard each benchmark's batch axis over device_counts devices (strong + weak)
    device_counts: [1, 2, 4]
    quality_compile: fast # quality programs at XLA:CPU's fast code generation ("full": XLA's default)
    suites: null          # list of families, or null for all
    ceilings: {matmul_n: 2048, copy_mib: 256, repeats: 5}
    benchmarks:           # per speed benchmark: sizes, quick_sizes, scaling, skip
      core.logsumexp: {sizes: [{n: 4096, d: 256}]}
    quality:              # per quality benchmark: any of its params, or skip
      tpp.fit: {epochs: 50}

Values are type-checked (``repeats=abc`` or ``x64=maybe`` is an error).
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

REPO_CONFIGS = pathlib.Path(__file__).resolve().parent.parent / "configs"
#: the same YAML files installed with the harness (``benchmarks/configs`` links to ``configs/``)
PACKAGED_CONFIGS = pathlib.Path(__file__).resolve().parent / "configs"


def config_names() -> list[str]:
    """Names of the shipped run configurations (``smoke``, ``default``, ``full``)."""
    found = set()
    for folder in (REPO_CONFIGS, PACKAGED_CONFIGS):
        if folder.is_dir():
            found.update(p.stem for p in folder.glob("*.yaml"))
    return sorted(found)


def resolve_config(name: str | pathlib.Path) -> pathlib.Path:
    """The file of ``--config``: a path to a YAML file, or the name of a shipped configuration.

    ``"smoke"``, ``"smoke.yaml"`` and ``"configs/smoke.yaml"`` all name the shipped smoke configuration
    from any working directory; an existing file of that name in the working directory wins.

    Raises:
        ConfigError: no such file and no shipped configuration of that name (the message lists them).
    """
    path = pathlib.Path(name)
    if path.exists():
        return path
    stem = path.name[:-5] if path.name.endswith(".yaml") else path.name
    if str(path.parent) in (".", "configs") and stem:
        for folder in (REPO_CONFIGS, PACKAGED_CONFIGS):
            candidate = folder / f"{stem}.yaml"
            if candidate.is_file():
                return candidate
    if str(path.parent) not in (".", "configs"):
        raise ConfigError(f"--config: no such file {str(name)!r}")
    raise ConfigError(f"--config: expected a YAML file or one of the shipped configurations "
                      f"{', '.join(config_names()) or '(none found)'}, got {str(name)!r}")

#: keys a per-benchmark override may set
SPEED_OVERRIDE_KEYS = {"sizes", "quick_sizes", "scaling", "skip"}


@dataclasses.dataclass
class Ceilings:
    matmul_n: int = 2048
    copy_mib: int = 256
    repeats: int = 5


@dataclasses.dataclass
class RunConfig:
    """The typed schema of a run configuration (and the embedded defaults)."""

    seed: int = 0
    repeats: int = 7
    min_repeats: int = 2
    max_time_s: float = 5.0
    timeout_s: float = 600.0
    quick: bool = False
    scaling: bool = False
    device_scaling: bool = False
    device_counts: list[int] = dataclasses.field(default_factory=lambda: [1, 2, 4])
    x64: bool = False
    #: XLA:CPU code generation for the quality benchmarks' programs: "fast" (LLVM -O1 without its
    #: expensive passes: about a third less compile time, results equal to float32 rounding) or "full" (XLA's default).
    #: Speed benchmarks' kernels and JAX baselines always compile at XLA's default.
    quality_compile: str = "fast"
    #: Worker processes that run the quality benchmarks which time nothing, side by side, before the
    #: speed benchmarks and the timed quality benchmarks run alone (CPU backend only; 1: all in one process).
    quality_workers: int = 2
    suites: Optional[list[str]] = None  # noqa: UP045 (omegaconf needs typing.Optional)
    ceilings: Ceilings = dataclasses.field(default_factory=Ceilings)
    benchmarks: dict[str, Any] = dataclasses.field(default_factory=dict)
    quality: dict[str, Any] = dataclasses.field(default_factory=dict)


DEFAULTS: dict[str, Any] = dataclasses.asdict(RunConfig())

#: What ``--quick`` (or ``quick: true`` in a file) sets: fewer repeats, small ceilings.
QUICK: dict[str, Any] = {
    "quick": True,
    "repeats": 3,
    "max_time_s": 3.0,
    "ceilings": {"matmul_n": 1024, "copy_mib": 128, "repeats": 3},
}


class ConfigError(ValueError):
    """A configuration file or override is invalid."""


def _read(path: pathlib.Path) -> DictConfig:
    if not path.exists():
        raise ConfigError(f"--config: no such file {str(path)!r}")
    if not path.is_file():
        raise ConfigError(f"--config: {str(path)!r} is not a file")
    try:
        loaded = OmegaConf.load(path)
    except Exception as exc:  # yaml parser errors, non-mapping documents
        raise ConfigError(f"--config: cannot read {path} as a YAML mapping: {exc}") from exc
    if not isinstance(loaded, DictConfig):
        raise ConfigError(f"--config: {path} must hold a YAML mapping, got {type(loaded).__name__}")
    return loaded


def load_config(
    path: str | pathlib.Path | None = None,
    overrides: Sequence[str] = (),
    *,
    quick: bool = False,
) -> DictConfig:
    """Build the run configuration.

    Layers, later wins: the schema's defaults; for a file that sets
    ``quick: true``, :data:`QUICK` beneath the file (the file refines it); the
    file; :data:`QUICK` when ``quick`` (the ``--quick`` flag) is given; the
    ``key=value`` overrides (OmegaConf dot-list syntax, e.g. ``repeats=3`` or
    ``"benchmarks.core.matmul.sizes=[{n: 256}]"``).

    Raises:
        ConfigError: the file is missing, unreadable or not a mapping; a key is
            unknown; a value has the wrong type; an override lacks ``=``.
    """
    schema = OmegaConf.structured(RunConfig)
    layers: list[Any] = []
    file_cfg = _read(resolve_config(path)) if path is not None else None
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must have the form KEY=VALUE (e.g. repeats=3)")
    try:
        dot = OmegaConf.from_dotlist(list(overrides)) if overrides else None
    except Exception as exc:
        raise ConfigError(f"invalid override in {list(overrides)}: {exc}") from exc
    if file_cfg is not None:
        if file_cfg.get("quick"):
            layers.append(QUICK)
        layers.append(file_cfg)
    if quick:
        layers.append(QUICK)
    if dot is not None:
        layers.append(dot)
    try:
        cfg = OmegaConf.merge(schema, *layers)
    except Exception as exc:  # omegaconf's ConfigKeyError, ValidationError, ...
        msg = str(exc).split("\n")[0]
        raise ConfigError(f"invalid configuration: {msg}; known keys: {sorted(DEFAULTS)}") from exc
    if cfg.repeats < 1:
        raise ConfigError(f"repeats must be >= 1, got {cfg.repeats}")
    if cfg.quality_compile not in ("fast", "full"):
        raise ConfigError(f"quality_compile: expected 'fast' or 'full', got {cfg.quality_compile!r}")
    if cfg.quality_workers < 1:
        raise ConfigError(f"quality_workers must be >= 1, got {cfg.quality_workers}")
    if cfg.min_repeats < 1:
        raise ConfigError(f"min_repeats must be >= 1, got {cfg.min_repeats}")
    if cfg.max_time_s <= 0 or cfg.timeout_s <= 0:
        raise ConfigError(f"max_time_s and timeout_s must be positive, got {cfg.max_time_s} and {cfg.timeout_s}")
    if quick:
        cfg.quick = True
    return cfg


def to_container(cfg: DictConfig) -> dict[str, Any]:
    """Plain dict of the configuration (for the results JSON)."""
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


def flatten_overrides(
    section: Mapping[str, Any], known: Sequence[str], ignore_families: Sequence[str] = ()
) -> dict[str, dict[str, Any]]:
    """Per-benchmark overrides keyed by full name, from flat or nested YAML.

    Benchmark names contain dots, so ``{"core.matmul": {...}}`` (flat) and
    ``{"core": {"matmul": {...}}}`` (nested, what a dot-list override makes)
    are both accepted.

    Raises:
        ConfigError: an entry names no registered benchmark (the message lists
            the close names), or is not a mapping. Entries of ``ignore_families``
            (suites that failed to import) are dropped instead.
    """
    known_set = set(known)
    out: dict[str, dict[str, Any]] = {}

    def walk(prefix: str, node: Any) -> None:
        if prefix in known_set:
            if not isinstance(node, Mapping):
                raise ConfigError(f"override for {prefix!r} must be a mapping, got {node!r}")
            out.setdefault(prefix, {}).update(node)
            return
        if isinstance(node, Mapping) and any(k.startswith(prefix + ".") for k in known_set if prefix):
            for k, v in node.items():
                walk(f"{prefix}.{k}", v)
            return
        if not prefix:
            for k, v in node.items():
                walk(str(k), v)
            return
        family = prefix.split(".")[0]
        if family in ignore_families:
            return
        close = sorted(k for k in known_set if k.startswith(family + "."))
        raise ConfigError(f"configuration names an unknown benchmark {prefix!r}; "
                          f"known{' in ' + family if close else ''}: {', '.join(close or sorted(known_set))}")

    walk("", dict(section))
    return out
