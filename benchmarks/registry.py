"""The benchmark registry: what a family's suite module declares.

A suite module ``benchmarks/suites/<family>.py`` declares its benchmarks at
import time with :func:`register`. Two kinds exist:

- :class:`SpeedBenchmark`: a jaxcore kernel at stated sizes, timed against zero
  or more :class:`Baseline` implementations of the same computation. Before
  anything is timed, the kernel's output is checked against every baseline's
  output; a disagreeing pair is reported as wrong and never timed.
- :class:`QualityBenchmark`: a function that runs the method on real data and
  returns :class:`Table` s of result metrics (and writes figures).

Example (a complete speed benchmark)::

    import numpy as np, jax, jax.numpy as jnp
    from benchmarks.registry import Baseline, Case, SpeedBenchmark, register

    def setup(size, key):
        x = jax.random.normal(key, (size["n"],))
        return Case(args=(x,), work=size["n"])

    register(SpeedBenchmark(
        name="core.cumsum", family="core",
        kernel=jnp.cumsum,
        setup=setup,
        sizes=[{"n": 10_000}, {"n": 1_000_000}],
        quick_sizes=[{"n": 10_000}],
        baselines=[Baseline("numpy", np.cumsum)],
        rtol=1e-4, atol=1e-4,
        scaling=Scaling("n", [10_000, 100_000, 1_000_000]),
    ))

Sizes are dicts of named integers/floats so that YAML configs can override
them (``benchmarks: {core.cumsum: {sizes: [{n: 100}]}}``).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

Size = Mapping[str, Any]


class BaselineNotRun(Exception):
    """Raise from a baseline to report it as not run at this size (status ``"not run"``, the message as reason).

    For a peer that cannot finish at a size (e.g. past the run's time limit): the row keeps its other
    baselines and the run does not count it as a failure, unlike a baseline that raises anything else."""


@dataclasses.dataclass
class Case:
    """Inputs for one size of a speed benchmark, built by ``setup(size, key)``.

    Attributes:
        args: positional arguments (arrays / pytrees) of the kernel. The kernel
            is compiled as ``jax.jit(partial(kernel, **static))`` on these.
        static: keyword arguments bound before compilation (Python scalars,
            strings, modules' static config). Passed to baselines too.
        baseline_args: per-baseline positional arguments, keyed by baseline
            name (e.g. the same data as torch tensors). A baseline without an
            entry receives ``args`` converted to NumPy arrays (leaves only).
        work: the amount of work this size represents (events, pixels, DAGs
            ...), used as the x axis of scaling fits and for throughput
            (``work / second``). Defaults to ``None`` (no throughput column).
        work_unit: unit of ``work`` for the report ("events", "DAGs", ...).
        flops: analytic FLOP count of one kernel call, used when XLA's cost
            analysis cannot see the work (e.g. inside ``while`` loops). If
            ``None``, XLA's figure is used.
        bytes: analytic bytes moved by one call, same convention as ``flops``.
    """

    args: tuple
    static: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    baseline_args: Mapping[str, tuple] = dataclasses.field(default_factory=dict)
    work: float | None = None
    work_unit: str = ""
    flops: float | None = None
    bytes: float | None = None


@dataclasses.dataclass
class Baseline:
    """Another implementation of the same computation as the kernel.

    Attributes:
        name: short label in the report ("numpy", "torch", "pot", "pgmpy"...).
        fn: called as ``fn(*baseline_args, **static)``; returns a pytree of
            arrays (NumPy, JAX or torch tensors) matching the kernel's output
            as far as ``output`` (below) makes it comparable.
        is_jax: if True the baseline is a JAX function; it is jit-compiled
            ahead of time like the kernel and its compile time is reported.
        output: optional map from the baseline's raw output to the kernel's
            output structure before the agreement check (e.g. pick a field).
        requires: names of importable modules the baseline needs; if one is
            missing the baseline is reported as "unavailable" with the pip
            command, and the kernel is still timed alone.
        note: free text printed in the report beside the ratio.
    """

    name: str
    fn: Callable[..., Any]
    is_jax: bool = False
    output: Callable[[Any], Any] | None = None
    requires: Sequence[str] = ()
    note: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.requires, str):
            raise TypeError(f"Baseline {self.name!r}: requires must be a sequence of module names, "
                            f"got the string {self.requires!r} (write requires=({self.requires!r},))")


@dataclasses.dataclass
class Scaling:
    """Size sweep for ``--scaling``: vary ``param`` over ``values``.

    The other size parameters are taken from the benchmark's first size.
    The report fits log(time) = slope * log(param) + c by least squares (the
    growth exponent in the swept parameter) and, when the setup states its
    ``work``, the same against the work.
    """

    param: str
    values: Sequence[Any]


@dataclasses.dataclass(frozen=True)
class Floor:
    """A speed target restated from a floor proven by measurement, at some sizes of a benchmark.

    Where a kernel cannot reach its registered ``target`` over a baseline for a reason that a
    measurement proves (two gradients per step where the baseline computes one; a step whose time is
    its random draws), the target is restated from that floor: the row is judged against
    ``speedup`` instead, and the report prints the floor, the original target and ``reason`` beside
    the ratio (``met at floor (>= 0.4x; target 0.476x)``), never a bare MISSED.

    Attributes:
        baseline: the baseline's name (a key of the benchmark's ``target`` or any baseline).
        speedup: the restated minimum speed-up over that baseline (> 0).
        reason: the measurement that proves the floor, with its figures (printed in the report).
        size: the sizes it applies to: every item must equal the row's size parameter
            (``{"width": 128}``); empty: every size.
    """

    baseline: str
    speedup: float
    reason: str
    size: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.speedup, (int, float)) or not np.isfinite(self.speedup) or self.speedup <= 0:
            raise ValueError(f"Floor.speedup: expected a finite number > 0, got {self.speedup!r}")
        if not self.reason.strip():
            raise ValueError(f"Floor.reason: expected the measurement that proves the floor, got {self.reason!r}")

    def applies(self, baseline: str, size: Mapping[str, Any]) -> bool:
        """Whether this floor judges ``baseline`` at ``size``."""
        return baseline == self.baseline and all(size.get(k) == v for k, v in self.size.items())


def floor_for(bench: "SpeedBenchmark", baseline: str, size: Mapping[str, Any]) -> Floor | None:
    """The first of ``bench.floors`` that applies to ``baseline`` at ``size``, or None."""
    for f in bench.floors:
        if f.applies(baseline, size):
            return f
    return None


@dataclasses.dataclass
class SpeedBenchmark:
    """A timed kernel with its baselines (see the module docstring).

    Attributes:
        name: "<family>.<what>", unique, e.g. "tpp.hawkes_loglik".
        family: the suite name ("core", "tpp", "causal", ...).
        kernel: the jaxcore callable; traced with ``jax.jit``.
        setup: ``setup(size, key) -> Case``; builds inputs (not timed).
        sizes: default sizes (the bare ``python -m benchmarks`` run).
        quick_sizes: sizes under ``--quick`` (defaults to the first size).
        baselines: other implementations, timed interleaved with the kernel.
        check: optional ``check(kernel_out, baseline_out, case) -> None`` that
            raises ``AssertionError`` with a message on disagreement. If None,
            every leaf is compared with ``np.allclose(rtol, atol)``.
        rtol, atol: tolerances of the default check.
        scaling: optional size sweep for ``--scaling``.
        target: optional minimum speed-up over a baseline, e.g.
            ``{"torch": 10.0}``; the report marks whether it is met.
        floors: :class:`Floor` s: targets restated from a proven floor at some sizes (they replace
            ``target`` for their baseline and sizes; the report prints the floor and its reason).
        description: one line for ``--list`` and the report.
        allow_nonfinite: if False (default), a kernel output holding NaN or
            inf marks the record "wrong" and nothing is timed.
        batch_param: the size parameter that is the kernel's batch axis
            (``"batch"``, ``"chains"``, ``"images"``...): ``--scaling devices``
            shards every array argument whose leading axis has that length over
            1, 2, 4 ... devices (strong and weak scaling). None: no device sweep.
        zero_sizes: size parameters for which 0 is a meaningful value (a sentinel such as
            ``n_dags: 0`` for "all"); any other numeric size must be > 0 (checked at
            configuration time, with its declared sizes' kind: int or float).
    """

    name: str
    family: str
    kernel: Callable[..., Any]
    setup: Callable[[Size, Any], Case]
    sizes: Sequence[Size]
    quick_sizes: Sequence[Size] | None = None
    baselines: Sequence[Baseline] = ()
    check: Callable[[Any, Any, Case], None] | None = None
    rtol: float = 1e-5
    atol: float = 1e-6
    scaling: Scaling | None = None
    target: Mapping[str, float] = dataclasses.field(default_factory=dict)
    floors: Sequence[Floor] = ()
    description: str = ""
    allow_nonfinite: bool = False
    batch_param: str | None = None
    zero_sizes: Sequence[str] = ()

    kind = "speed"


@dataclasses.dataclass
class Table:
    """A table of quality results in the paper's format.

    Attributes:
        title: caption, e.g. "Split-Digits: average accuracy (5 seeds)".
        columns: column headers.
        rows: list of rows; cells are str, int, float, or ``(mean, std)``
            tuples which the report renders as "mean ± std".
        note: text printed under the table (data source, protocol).
    """

    title: str
    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]
    note: str = ""


@dataclasses.dataclass
class QualityResult:
    """What a quality benchmark returns.

    Attributes:
        tables: the result tables.
        figures: paths (relative to the run's output folder) of PNGs written.
        metrics: flat name -> number map, kept in the JSON for ``--compare``
            and for closing notes (e.g. {"njdtpp.hawkes.test_nll": 0.61}).
        notes: free text lines for the report (what was skipped and why).
    """

    tables: Sequence[Table] = ()
    figures: Sequence[str] = ()
    metrics: Mapping[str, float] = dataclasses.field(default_factory=dict)
    notes: Sequence[str] = ()


@dataclasses.dataclass
class QualityContext:
    """Handed to a quality benchmark's ``run``.

    Attributes:
        params: the benchmark's ``params`` merged with ``quick_params`` under
            ``--quick`` and with the config's ``quality.<name>`` overrides.
        out_dir: folder (``pathlib.Path``) to write figures into.
        key: a ``jax.random`` key (from the config's seed).
        quick: True under ``--quick``.
        progress: ``progress(message)`` to report what is running.
    """

    params: Mapping[str, Any]
    out_dir: Any
    key: Any
    quick: bool
    progress: Callable[[str], None]


@dataclasses.dataclass
class QualityBenchmark:
    """A run of the method on real data producing tables of metrics.

    Attributes:
        name: "<family>.<what>", unique, e.g. "tpp.fit_real".
        family: the suite name.
        run: ``run(ctx: QualityContext) -> QualityResult``.
        params: default parameters (the bare run's sizes); every key may be
            overridden in YAML under ``quality: {<name>: {...}}``.
        quick_params: overrides applied under ``--quick`` / the smoke config.
        description: one line for ``--list`` and the report.
        timed: True when its tables report wall-clock times (per query, per method, ...): it then runs
            alone, like the speed benchmarks; the others may run beside each other on worker
            processes (``quality_workers``, :mod:`benchmarks.parallel`).
    """

    name: str
    family: str
    run: Callable[[QualityContext], QualityResult]
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    quick_params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    description: str = ""
    timed: bool = False

    kind = "quality"


Benchmark = SpeedBenchmark | QualityBenchmark


#: the verdicts a reproduction may reach
VERDICTS = ("reproduced", "reproduced in kind", "not reproduced", "incomplete")


@dataclasses.dataclass(frozen=True)
class Reproduction:
    """How a family's paper claim is judged from its reproduction cells (``--reproduce <family>``).

    The cells themselves (which quality benchmark, which parameters, the expected seconds) live in
    ``configs/reproduce/<family>.yaml``; this object holds what the code decides.

    Attributes:
        family: the suite name.
        paper: authors, title, venue and year.
        claim: the paper's central claim, one sentence.
        verdict: ``verdict(cells) -> (verdict, evidence)`` where ``cells`` maps each finished cell's name to
            its metrics (``QualityResult.metrics``); ``verdict`` is one of :data:`VERDICTS` and ``evidence``
            is Markdown: the figures that decide it, and where not reproduced, why.
        setup: Markdown: the data, sizes, seeds and how the settings were chosen (on validation data).
    """

    family: str
    paper: str
    claim: str
    verdict: Callable[[Mapping[str, Mapping[str, float]]], tuple[str, str]]
    setup: str = ""


_REPRODUCTIONS: dict[str, Reproduction] = {}


def register_reproduction(rep: Reproduction) -> Reproduction:
    """Register a family's reproduction verdict (one per family).

    Raises:
        TypeError: ``rep`` is not a :class:`Reproduction`.
        ValueError: the family already has one, or the claim is empty.
    """
    if not isinstance(rep, Reproduction):
        raise TypeError(f"rep: expected a Reproduction, got {type(rep).__name__}")
    if not rep.claim.strip():
        raise ValueError(f"rep.claim: expected the paper's claim in one sentence, got {rep.claim!r}")
    if rep.family in _REPRODUCTIONS:
        raise ValueError(f"rep.family: the family {rep.family!r} already has a reproduction")
    _REPRODUCTIONS[rep.family] = rep
    return rep


def reproductions() -> dict[str, Reproduction]:
    """The registered reproductions by family (suites must be imported first)."""
    return dict(_REPRODUCTIONS)


_REGISTRY: dict[str, Benchmark] = {}


def register(bench: Benchmark) -> Benchmark:
    """Add a benchmark to the registry; names must be unique.

    Raises:
        ValueError: if the name is taken or does not start with its family.
    """
    if not isinstance(bench, (SpeedBenchmark, QualityBenchmark)):
        raise TypeError(f"register() expects a SpeedBenchmark or QualityBenchmark, got {type(bench).__name__}")
    if not bench.name.startswith(bench.family + "."):
        raise ValueError(f"benchmark name {bench.name!r} must start with its family {bench.family!r} + '.'")
    if bench.name in _REGISTRY:
        raise ValueError(f"benchmark {bench.name!r} is registered twice")
    _REGISTRY[bench.name] = bench
    return bench


def registry() -> dict[str, Benchmark]:
    """The registered benchmarks by name (suites must be imported first)."""
    return dict(_REGISTRY)


def clear() -> None:
    """Empty the registry and the reproductions (for the harness's own tests)."""
    _REGISTRY.clear()
    _REPRODUCTIONS.clear()


def to_numpy(tree: Any) -> Any:
    """Convert every leaf of a pytree (JAX, NumPy, torch, scalar) to NumPy."""
    import jax

    def conv(x: Any) -> Any:
        if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch tensor
            return x.detach().cpu().numpy()
        return np.asarray(x)

    return jax.tree_util.tree_map(conv, tree)


def on_gpu() -> bool:
    """Whether JAX's default backend (the kernels' device) is a GPU."""
    import jax

    return jax.default_backend() == "gpu"


def torch_device() -> str:
    """Where a PyTorch baseline runs: ``"cuda"`` when JAX's default backend is a GPU and
    PyTorch sees one, else ``"cpu"``; the reference runs on the kernel's device.

    The harness waits for CUDA work as it waits for JAX arrays (:func:`benchmarks.runner.block`),
    so a timed baseline call includes its kernels.
    """
    import torch

    return "cuda" if on_gpu() and torch.cuda.is_available() else "cpu"


#: Agreement tolerance on a GPU, in relative Euclidean norm per output leaf. At its default
#: precision XLA runs float32 matrix products and convolutions there in TF32 (10-bit mantissas),
#: as PyTorch does its cuDNN convolutions (its matrix products stay float32): outputs agree to
#: about 1e-3 of their norm, not to float32 rounding.
GPU_REL_TOL = 1e-2


def check_rel_norm(kernel_out: Any, baseline_out: Any, tol: float = GPU_REL_TOL) -> None:
    """Raise ``AssertionError`` unless every leaf has ``||k - b|| / ||b|| <= tol`` (and ``k`` is finite)."""
    import jax

    k_leaves = jax.tree_util.tree_flatten_with_path(to_numpy(kernel_out))[0]
    b_leaves = jax.tree_util.tree_leaves(to_numpy(baseline_out))
    if len(k_leaves) != len(b_leaves):
        raise AssertionError(f"outputs have {len(k_leaves)} and {len(b_leaves)} leaves")
    for (path, k), b in zip(k_leaves, b_leaves):
        k, b = np.asarray(k, np.float64), np.asarray(b, np.float64)
        where = jax.tree_util.keystr(path) or "output"
        if k.shape != b.shape:
            raise AssertionError(f"{where}: shapes differ: {k.shape} vs {b.shape}")
        if not np.all(np.isfinite(k)):
            raise AssertionError(f"{where}: kernel output is not finite")
        rel = float(np.linalg.norm(k - b) / max(float(np.linalg.norm(b)), 1e-30))
        if rel > tol:
            raise AssertionError(f"{where}: relative norm of the difference {rel:.2e} > {tol:g}")


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run a PyTorch baseline on ``n`` intra-op threads, restoring the previous count afterwards.

    Baselines made of many small operations are fastest on one thread here: the
    harness makes OpenMP wait passively (``benchmarks/__main__.py``), so every
    operation on more threads pays a thread wake-up.
    """
    import torch

    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(n)
        yield
    finally:
        torch.set_num_threads(previous)
