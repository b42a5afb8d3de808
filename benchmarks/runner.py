"""Running one benchmark: agreement check, compile, cost model, interleaved timing.

Everything here returns plain records (dicts) that :mod:`benchmarks.results`
writes; nothing here prints.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import importlib.util
import math
import resource
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import stats
from .registry import (Baseline, BaselineNotRun, Case, QualityBenchmark, QualityContext, QualityResult, SpeedBenchmark, Table,
                       floor_for, to_numpy)

# a single timed sample aims to last at least this long (repeat fast calls): samples are interleaved
# kernel, baseline, kernel, ..., so the first call of each sample finds caches and thread pools left by
# the other side; 50 ms of back-to-back calls measures the steady state a training loop sees (at 2 ms,
# bnp.svi_step's 5 ms kernel ran at 8.6 ms, one call per sample, against 7.1 ms)
MIN_SAMPLE_S = 5e-2
MAX_NUMBER = 1000
# a call whose first (agreement) run took this long is timed one call per sample without calibration
# calls: with SmolLM2-sized steps (1-5 s a call) the three calibration calls of each side cost more
# than the timed samples, and no first-call overhead turns a 50 ms call into a 0.5 s one
LONG_CALL_S = 10 * MIN_SAMPLE_S


class BenchmarkTimeout(Exception):
    """A benchmark ran past its hard time limit."""


class Disagreement(AssertionError):
    """Kernel and baseline outputs differ."""


@contextlib.contextmanager
def hard_timeout(seconds: float | None) -> Iterator[None]:
    """Raise :class:`BenchmarkTimeout` after ``seconds`` (main thread, POSIX only).

    The signal is handled when control returns to Python, so a single long
    XLA call finishes before the timeout fires. A thread blocked inside C++
    never returns (a hang seen once in XLA:CPU's execution semaphore): after a
    further grace period (``max(60 s, seconds / 2)``) a watchdog prints every
    thread's Python stack to stderr and ends the process with status 1. The
    results of the benchmarks finished so far are already on disk.
    """
    if not seconds or not hasattr(signal, "SIGALRM"):
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise BenchmarkTimeout(f"exceeded the time limit of {seconds:.0f} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:  # needs a real file descriptor (not the case under some notebook or capture setups)
        faulthandler.dump_traceback_later(seconds + max(60.0, 0.5 * seconds), exit=True, file=sys.__stderr__)
        watchdog = True
    except (AttributeError, OSError, RuntimeError, ValueError):
        watchdog = False
    try:
        yield
    finally:
        if watchdog:
            faulthandler.cancel_dump_traceback_later()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def memory_maps() -> int | None:
    """Memory mappings of this process (Linux ``/proc/self/maps``; None elsewhere).

    Every compiled XLA:CPU program maps its code; the kernel refuses new mappings past
    ``vm.max_map_count`` (65,530 by default), and LLVM then aborts the process ("Unable to allocate
    section memory"). A bare run that kept every family's programs reached it in its last family.
    """
    try:
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return None


def release_compiled() -> None:
    """Drop JAX's compiled programs (``jax.clear_caches``) and collect them, unmapping their code.

    Called between families: programs are rarely shared across families, and with the persistent
    compilation cache a later need reloads one in a fraction of its compile time.
    """
    import gc

    jax.clear_caches()
    gc.collect()


def block(tree: Any) -> Any:
    """Wait for every JAX array in a pytree, and for PyTorch's CUDA work where PyTorch has used CUDA."""
    out = jax.block_until_ready(tree)
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()
    return out


# --------------------------------------------------------------------------- ceilings


def measure_ceilings(matmul_n: int = 2048, copy_mib: int = 256, repeats: int = 5) -> dict[str, Any]:
    """The machine's achievable FLOP/s and bytes/s on the default JAX backend.

    FLOP/s: a float32 ``n x n`` matrix product (``2 n^3`` FLOPs), best of ``repeats``.
    Bytes/s: ``x + 1`` on a float32 array of ``copy_mib`` MiB (read + write = 2x
    its size), best of ``repeats``. The best, not the median, is the ceiling.
    """
    key = jax.random.key(0)
    a = jax.random.normal(key, (matmul_n, matmul_n), jnp.float32)
    b = jax.random.normal(jax.random.fold_in(key, 1), (matmul_n, matmul_n), jnp.float32)
    mm = jax.jit(jnp.matmul).lower(a, b).compile()
    block(mm(a, b))
    best_mm = min(_time_once(mm, (a, b)) for _ in range(repeats))
    n_copy = copy_mib * 2**20 // 4
    x = jnp.ones((n_copy,), jnp.float32)
    cp = jax.jit(lambda v: v + 1.0).lower(x).compile()
    block(cp(x))
    best_cp = min(_time_once(cp, (x,)) for _ in range(repeats))
    return {
        "matmul_n": matmul_n,
        "matmul_s": best_mm,
        "matmul_flops_per_s": 2.0 * matmul_n**3 / best_mm,
        "copy_mib": copy_mib,
        "copy_s": best_cp,
        "copy_bytes_per_s": 2.0 * n_copy * 4 / best_cp,
    }


def _time_once(fn: Callable[..., Any], args: tuple, number: int = 1) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        out = fn(*args)
    block(out)
    return (time.perf_counter() - t0) / number


def _calibrate(fn: Callable[..., Any], args: tuple, first_s: float | None = None) -> int:
    """How many calls make one sample last ``MIN_SAMPLE_S``.

    ``first_s``: the time of a call already made (the agreement run); at least ``LONG_CALL_S``
    means one call per sample with no further call. A call of at least twice ``MIN_SAMPLE_S``
    ends the calibration after one call; shorter ones take the best of three.
    """
    if first_s is not None and first_s >= LONG_CALL_S:
        return 1
    t = _time_once(fn, args)
    if t >= 2 * MIN_SAMPLE_S:
        return 1
    t = min([t] + [_time_once(fn, args) for _ in range(2)])
    if t >= MIN_SAMPLE_S:
        return 1
    return int(min(MAX_NUMBER, math.ceil(MIN_SAMPLE_S / max(t, 1e-7))))


# --------------------------------------------------------------------------- agreement


def _canonical(tree: Any) -> Any:
    """Lists become tuples so that a baseline returning a list matches a kernel's tuple."""
    if isinstance(tree, list):
        return tuple(_canonical(t) for t in tree)
    if type(tree) is tuple:
        return tuple(_canonical(t) for t in tree)
    if isinstance(tree, dict):
        return {k: _canonical(v) for k, v in tree.items()}
    return tree


def nonfinite_leaves(tree: Any) -> list[str]:
    """Descriptions of the floating/complex leaves of a pytree that hold NaN or inf."""
    bad = []
    for i, leaf in enumerate(jax.tree_util.tree_leaves(to_numpy(tree))):
        arr = np.asarray(leaf)
        if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
            bad.append(f"leaf {i} {arr.shape}: {int(np.sum(~np.isfinite(arr)))} non-finite values")
    return bad


def default_check(kernel_out: Any, baseline_out: Any, rtol: float, atol: float) -> None:
    """Compare two pytrees leaf by leaf with ``np.allclose``; raise :class:`Disagreement`.

    The tree structures must match (lists and tuples are interchangeable);
    complex leaves are compared as complex numbers; NaN never agrees.
    """
    k_leaves, k_def = jax.tree_util.tree_flatten(_canonical(to_numpy(kernel_out)))
    b_leaves, b_def = jax.tree_util.tree_flatten(_canonical(to_numpy(baseline_out)))
    if k_def != b_def:
        raise Disagreement(f"output structures differ: kernel {k_def}, baseline {b_def} "
                           "(map the baseline's output with Baseline(output=...))")
    for i, (k, b) in enumerate(zip(k_leaves, b_leaves)):
        k, b = np.asarray(k), np.asarray(b)
        if k.shape != b.shape:
            raise Disagreement(f"leaf {i}: shapes differ, kernel {k.shape} vs baseline {b.shape}")
        dtype = np.complex128 if (k.dtype.kind == "c" or b.dtype.kind == "c") else np.float64
        k, b = k.astype(dtype), b.astype(dtype)
        if not np.allclose(k, b, rtol=rtol, atol=atol, equal_nan=False):
            err = np.abs(k - b)
            err = np.where(np.isnan(err), np.inf, err)
            j = int(np.argmax(err - rtol * np.abs(b)))
            raise Disagreement(
                f"leaf {i}: max |kernel - baseline| = {err.max():.3g} (rtol={rtol}, atol={atol}); "
                f"at flat index {j}: kernel {k.flat[j]:.6g} vs baseline {b.flat[j]:.6g}"
            )


def _cost(compiled: Any) -> dict[str, float | None]:
    out: dict[str, float | None] = {"flops": None, "bytes": None}
    try:
        ca = compiled.cost_analysis()
        if isinstance(ca, (list, tuple)):
            ca = ca[0] if ca else {}
        if ca:
            flops = ca.get("flops")
            out["flops"] = float(flops) if flops is not None and flops >= 0 else None
            nbytes = ca.get("bytes accessed")
            out["bytes"] = float(nbytes) if nbytes is not None and nbytes >= 0 else None
    except Exception:  # cost analysis is best effort on every backend
        pass
    return out


def _memory(compiled: Any) -> dict[str, int | None]:
    try:
        ma = compiled.memory_analysis()
    except Exception:
        return {}
    if ma is None:
        return {}
    fields = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes", "generated_code_size_in_bytes")
    return {f: int(getattr(ma, f)) for f in fields if hasattr(ma, f)}


def has_host_callbacks(compiled: Any) -> bool | None:
    """Whether a compiled program holds a host callback (``jax.pure_callback``, ``jax.debug``, the
    run-time checks of ``equinox.error_if``); None when its text cannot be read.

    JAX dispatches such a program through its Python path instead of the C++ fast path, which costs
    about 0.15-0.25 ms per call on this CPU: a millisecond kernel's row then measures that too.
    """
    try:
        text = compiled.as_text()
    except Exception:  # noqa: BLE001 - a backend without HLO text
        return None
    return "python_cpu_callback" in text or "python_gpu_callback" in text


def _missing(requires: tuple[str, ...] | list[str]) -> list[str]:
    return [m for m in requires if importlib.util.find_spec(m) is None]


_CACHE_HITS = [0]


def _count_cache_hit(name: str, **kwargs: Any) -> None:
    if name == "/jax/compilation_cache/cache_hits":
        _CACHE_HITS[0] += 1
        _COMPILE_TOTALS["cache_hits"] += 1


jax.monitoring.register_event_listener(_count_cache_hit)

# JAX's own compile events, summed over a run: a task's record carries the difference across it
# (`compile_time`), so a report tells compile-bound tasks from compute-bound ones.
_COMPILE_EVENTS = {
    "/jax/core/compile/backend_compile_duration": "backend_s",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lowering_s",
    "/jax/core/compile/jaxpr_trace_duration": "tracing_s",
}
_COMPILE_TOTALS = {"backend_s": 0.0, "lowering_s": 0.0, "tracing_s": 0.0, "programs": 0, "cache_hits": 0,
                   "saved_s": 0.0}


def _count_compile_time(name: str, duration: float, **kwargs: Any) -> None:
    if name == "/jax/compilation_cache/compile_time_saved_sec":  # a persistent-cache load: what it saved
        _COMPILE_TOTALS["saved_s"] += float(duration)
        return
    field = _COMPILE_EVENTS.get(name)
    if field is not None:
        _COMPILE_TOTALS[field] += float(duration)
        if field == "backend_s":
            _COMPILE_TOTALS["programs"] += 1


jax.monitoring.register_event_duration_secs_listener(_count_compile_time)


def compile_totals() -> dict[str, float]:
    """Seconds JAX has spent compiling in this process so far, and how many programs it compiled.

    ``backend_s`` is XLA's compile (or a persistent-cache load), ``lowering_s`` jaxpr -> StableHLO,
    ``tracing_s`` Python tracing; ``programs`` counts backend compiles, ``cache_hits`` those of them
    that the persistent compilation cache served, ``saved_s`` the compile seconds those loads saved (the
    program's compile time when it was written, less the load). Take the difference of two calls to
    charge a stretch of work (:func:`compile_time_since`).
    """
    return dict(_COMPILE_TOTALS)


def compile_time_since(start: dict[str, float]) -> dict[str, float]:
    """What :func:`compile_totals` gained since ``start`` (seconds rounded to ms; ``programs`` an int)."""
    now = compile_totals()
    out: dict[str, float] = {k: round(now[k] - start.get(k, 0.0), 3)
                             for k in ("backend_s", "lowering_s", "tracing_s", "saved_s")}
    for k in ("programs", "cache_hits"):
        out[k] = int(now[k] - start.get(k, 0))
    return out


#: Compiler options every timed program (a speed benchmark's kernel, its JAX baselines) is compiled
#: with. Empty: XLA's defaults. A run whose quality programs use XLA:CPU's fast code generation
#: (``quality_compile: fast``, set in XLA_FLAGS) fills it with XLA's default levels, so the timed
#: programs still compile at full optimisation.
FULL_COMPILE_OPTIONS: dict[str, Any] = {}


def _compile(fn: Callable[..., Any], case: Case, args: tuple) -> tuple[Any, float]:
    """Ahead-of-time compile ``fn`` (with ``case.static`` bound) for ``args``; returns (executable, seconds)."""
    compiled, seconds, _ = _compile_cached(fn, case, args)
    return compiled, seconds


def _compile_cached(fn: Callable[..., Any], case: Case, args: tuple) -> tuple[Any, float, bool]:
    """:func:`_compile`, and whether the persistent compilation cache served the program."""
    jitted = jax.jit(functools.partial(fn, **case.static))
    hits = _CACHE_HITS[0]
    t0 = time.perf_counter()
    lowered = jitted.lower(*args)
    compiled = lowered.compile(dict(FULL_COMPILE_OPTIONS)) if FULL_COMPILE_OPTIONS else lowered.compile()
    return compiled, time.perf_counter() - t0, _CACHE_HITS[0] > hits


# --------------------------------------------------------------------------- speed


def run_speed_size(
    bench: SpeedBenchmark,
    size: Mapping[str, Any],
    key: Any,
    *,
    repeats: int,
    min_repeats: int,
    max_time_s: float,
    ceilings: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Check, compile, and time ``bench`` at one size against its baselines.

    Returns a speed record (see :mod:`benchmarks.results`). Exceptions from
    the kernel propagate (the caller records them); a baseline that raises or
    disagrees is recorded on that baseline alone, and is not timed.
    """
    rec: dict[str, Any] = {
        "kind": "speed", "name": bench.name, "family": bench.family, "size": dict(size),
        "status": "running", "baselines": {},
    }
    case = bench.setup(dict(size), key)
    if not isinstance(case, Case):
        raise TypeError(f"{bench.name}: setup must return a Case, got {type(case).__name__}")
    rec["work"], rec["work_unit"] = case.work, case.work_unit

    compiled, compile_s, cache_hit = _compile_cached(bench.kernel, case, case.args)
    t_first = time.perf_counter()
    kernel_out = block(compiled(*case.args))
    first_s = time.perf_counter() - t_first
    cost = _cost(compiled)
    flops = case.flops if case.flops is not None else cost["flops"]
    nbytes = case.bytes if case.bytes is not None else cost["bytes"]
    kernel = {"compile_s": compile_s, "compile_cached": cache_hit, "flops": flops, "bytes": nbytes,
              "flops_source": "analytic" if case.flops is not None else "xla",
              "bytes_source": "analytic" if case.bytes is not None else "xla",
              "memory": _memory(compiled), "host_callbacks": has_host_callbacks(compiled)}
    rec["kernel"] = kernel
    bad = [] if bench.allow_nonfinite else nonfinite_leaves(kernel_out)
    if bad:
        rec["status"] = "wrong"
        rec["error"] = "kernel output is not finite, not timed: " + "; ".join(bad[:5])
        return rec

    # baselines: availability, agreement, then into the timing rotation
    timed: list[tuple[Baseline, Callable[..., Any], tuple]] = []
    base_first_s: list[float] = []
    for base in bench.baselines:
        brec: dict[str, Any] = {"note": base.note}
        rec["baselines"][base.name] = brec
        missing = _missing(list(base.requires))
        if missing:
            brec["status"] = "unavailable"
            brec["error"] = f"needs {', '.join(missing)}: pip install 'jaxcore[baselines]'"
            continue
        bargs = case.baseline_args.get(base.name)
        if bargs is None:
            bargs = to_numpy(case.args) if not base.is_jax else case.args
        try:
            if base.is_jax:
                bfn, bcompile = _compile(base.fn, case, bargs)
                brec["compile_s"] = bcompile
            else:
                bfn = functools.partial(base.fn, **case.static)
            t_first = time.perf_counter()
            bout = block(bfn(*bargs))
            t_first = time.perf_counter() - t_first
            if base.output is not None:
                bout = base.output(bout)
            if bench.check is not None:
                bench.check(kernel_out, bout, case)
            else:
                default_check(kernel_out, bout, bench.rtol, bench.atol)
        except AssertionError as exc:
            brec["status"] = "wrong"
            brec["error"] = f"disagrees with the kernel: {exc}"
            continue
        except BenchmarkTimeout:
            raise
        except BaselineNotRun as exc:
            brec["status"] = "not run"
            brec["error"] = str(exc)
            continue
        except Exception as exc:
            brec["status"] = "error"
            brec["error"] = f"{type(exc).__name__}: {exc}"
            brec["traceback"] = traceback.format_exc(limit=8)
            continue
        brec["status"] = "ok"
        timed.append((base, bfn, bargs))
        base_first_s.append(t_first)

    wrong = [n for n, b in rec["baselines"].items() if b.get("status") == "wrong"]
    if wrong:
        rec["status"] = "wrong"
        rec["error"] = (f"kernel and baseline(s) {', '.join(wrong)} disagree; nothing was timed: "
                        + rec["baselines"][wrong[0]]["error"])
        return rec

    # interleaved timing: kernel, b1, b2, ..., kernel, b1, b2, ...
    numbers = [_calibrate(compiled, case.args, first_s)] + [
        _calibrate(f, a, t) for (_, f, a), t in zip(timed, base_first_s)]
    samples: list[list[float]] = [[] for _ in numbers]
    t_start = time.perf_counter()
    for r in range(repeats):
        samples[0].append(_time_once(compiled, case.args, numbers[0]))
        for i, (_, f, a) in enumerate(timed, start=1):
            samples[i].append(_time_once(f, a, numbers[i]))
        if r + 1 >= min_repeats and time.perf_counter() - t_start > max_time_s:
            break
    med, iqr = stats.median_iqr(samples[0])
    kernel.update({"median_s": med, "iqr_s": iqr, "times_s": samples[0], "number": numbers[0]})
    if flops:
        kernel["flops_per_s"] = flops / med
        if ceilings and ceilings.get("matmul_flops_per_s"):
            kernel["flops_frac"] = kernel["flops_per_s"] / ceilings["matmul_flops_per_s"]
    if nbytes:
        kernel["bytes_per_s"] = nbytes / med
        if ceilings and ceilings.get("copy_bytes_per_s"):
            kernel["bytes_frac"] = kernel["bytes_per_s"] / ceilings["copy_bytes_per_s"]
    if case.work:
        rec["throughput"] = case.work / med
    for i, (base, _, _) in enumerate(timed, start=1):
        brec = rec["baselines"][base.name]
        bmed, biqr = stats.median_iqr(samples[i])
        speedup, speedup_iqr = stats.paired_speedup(samples[0], samples[i])
        brec.update({"median_s": bmed, "iqr_s": biqr, "times_s": samples[i], "number": numbers[i],
                     "speedup": speedup, "speedup_iqr": speedup_iqr})
        floor = floor_for(bench, base.name, size)
        if floor is not None:  # the target restated from a proven floor: judged against it, the reason beside
            brec["target"] = float(floor.speedup)
            brec["target_met"] = bool(speedup >= floor.speedup)
            brec["floor"] = {"speedup": float(floor.speedup), "reason": floor.reason,
                             "target": bench.target.get(base.name)}
        elif base.name in bench.target:
            brec["target"] = bench.target[base.name]
            brec["target_met"] = bool(speedup >= bench.target[base.name])
    rec["repeats"] = len(samples[0])
    rec["status"] = "ok"
    return rec


def run_scaling(
    bench: SpeedBenchmark,
    param: str,
    values: list[Any],
    base_size: Mapping[str, Any],
    key: Any,
    *,
    repeats: int,
    min_repeats: int,
    max_time_s: float,
) -> dict[str, Any]:
    """Time the kernel alone over ``values`` of ``param`` and fit log-log slopes.

    Two slopes are reported: against the swept parameter itself
    (``slope``: time ~ param^slope) and against the case's ``work``
    (``slope_work``, when the setup states the work). Each point's output is
    checked for finiteness. If a point fails, the points measured so far are
    kept, the record's status is "error" and the slope is fitted on what exists.
    """
    rec: dict[str, Any] = {"kind": "scaling", "name": bench.name, "family": bench.family, "param": param,
                           "values": [], "works": [], "work_unit": "", "medians_s": [], "iqrs_s": [],
                           "status": "running"}
    try:
        for v in values:
            size = dict(base_size)
            size[param] = v
            case = bench.setup(size, key)
            compiled, _ = _compile(bench.kernel, case, case.args)
            out = block(compiled(*case.args))
            bad = [] if bench.allow_nonfinite else nonfinite_leaves(out)
            if bad:
                raise Disagreement(f"{param}={v}: kernel output is not finite: {'; '.join(bad[:3])}")
            number = _calibrate(compiled, case.args)
            samples = []
            t0 = time.perf_counter()
            for r in range(repeats):
                samples.append(_time_once(compiled, case.args, number))
                if r + 1 >= min_repeats and time.perf_counter() - t0 > max_time_s:
                    break
            med, iqr = stats.median_iqr(samples)
            rec["values"].append(v)
            rec["works"].append(float(case.work) if case.work else None)
            rec["work_unit"] = case.work_unit
            rec["medians_s"].append(med)
            rec["iqrs_s"].append(iqr)
        rec["status"] = "ok"
    except BenchmarkTimeout:
        raise
    except Exception as exc:
        rec["status"] = "error"
        rec["error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
    finally:
        _fit(rec)
    return rec


def shard_batch(args: tuple, batch: int, devices: list[Any], axis_name: str = "batch") -> tuple:
    """``args`` with every array leaf whose leading axis has length ``batch`` placed on a
    ``NamedSharding`` over ``devices`` along that axis; every other leaf replicated on them."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.asarray(devices), (axis_name,))
    split, whole = NamedSharding(mesh, PartitionSpec(axis_name)), NamedSharding(mesh, PartitionSpec())

    def place(leaf: Any) -> Any:
        if not isinstance(leaf, (jax.Array, np.ndarray)):
            return leaf  # Python scalars and static fields stay as they are
        if leaf.ndim >= 1 and leaf.shape[0] == batch:  # (a coincidental match is still correct, only split)
            return jax.device_put(leaf, split)
        return jax.device_put(leaf, whole)

    return jax.tree.map(place, args)


def run_device_scaling(
    bench: SpeedBenchmark,
    base_size: Mapping[str, Any],
    key: Any,
    counts: list[int],
    mode: str,
    *,
    repeats: int,
    min_repeats: int,
    max_time_s: float,
) -> dict[str, Any]:
    """Time the kernel with its batch axis (``bench.batch_param``) sharded over 1, 2, 4 ... devices.

    ``mode="strong"``: the same total batch at every device count; parallel efficiency
    ``t_1 / (n t_n)``. ``mode="weak"``: the batch grows with the devices (``n`` times the base);
    efficiency ``t_1 / t_n``. At each count the output is checked against the one-device output
    (strong) and for finiteness, the layout of the output's leaves is recorded (a program that
    silently gathers the batch shows a replicated output), and so is XLA's per-device memory.
    """
    param = bench.batch_param
    rec: dict[str, Any] = {"kind": "devices", "name": bench.name, "family": bench.family, "param": param,
                           "mode": mode, "devices": [], "medians_s": [], "iqrs_s": [], "efficiency": [],
                           "output_sharded": [], "temp_bytes_per_device": [], "skipped": [], "status": "running",
                           "device_kind": jax.devices()[0].device_kind}
    try:
        if param is None:
            raise ValueError(f"{bench.name} declares no batch_param: nothing to shard")
        available = jax.devices()
        reference = None
        for n in counts:
            if n > len(available):
                raise ValueError(f"{n} devices asked, {len(available)} available (on CPU: --devices {n} or "
                                 f"XLA_FLAGS=--xla_force_host_platform_device_count={n})")
            size = dict(base_size)
            if mode == "weak":
                size[param] = int(base_size[param]) * n
            batch = int(size[param])
            if batch % n:  # strong scaling of a batch the devices do not divide: that count is left out
                rec.setdefault("skipped", []).append(f"{n} devices: {param}={batch} is not divisible by {n}")
                continue
            case = bench.setup(size, key)
            args = shard_batch(case.args, batch, available[:n])
            compiled, _ = _compile(bench.kernel, case, args)
            out = block(compiled(*args))
            bad = [] if bench.allow_nonfinite else nonfinite_leaves(out)
            if bad:
                raise Disagreement(f"{n} devices: kernel output is not finite: {'; '.join(bad[:3])}")
            host = jax.tree.map(np.asarray, out)
            if mode == "strong":
                if reference is None:
                    reference = host
                else:
                    for a, b in zip(jax.tree.leaves(host), jax.tree.leaves(reference)):
                        if not np.allclose(a, b, rtol=max(bench.rtol, 1e-4), atol=max(bench.atol, 1e-5)):
                            raise Disagreement(f"{n} devices: the output differs from one device's")
            leaves = [x for x in jax.tree.leaves(out) if isinstance(x, jax.Array) and x.ndim >= 1]
            rec["output_sharded"].append(bool(leaves) and any(not x.sharding.is_fully_replicated for x in leaves))
            mem = _memory(compiled)
            rec["temp_bytes_per_device"].append(mem.get("temp_size_in_bytes"))
            number = _calibrate(compiled, args)
            samples = []
            t0 = time.perf_counter()
            for r in range(repeats):
                samples.append(_time_once(compiled, args, number))
                if r + 1 >= min_repeats and time.perf_counter() - t0 > max_time_s:
                    break
            med, iqr = stats.median_iqr(samples)
            rec["devices"].append(n)
            rec["medians_s"].append(med)
            rec["iqrs_s"].append(iqr)
            t1 = rec["medians_s"][0]
            rec["efficiency"].append(t1 / (n * med) if mode == "strong" else t1 / med)
        rec["status"] = "ok"
    except BenchmarkTimeout:
        raise
    except Exception as exc:
        rec["status"] = "error"
        rec["error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
    return rec


def _fit(rec: dict[str, Any]) -> None:
    try:
        rec["slope"], rec["intercept"] = stats.loglog_fit([float(v) for v in rec["values"]], rec["medians_s"])
    except (ValueError, TypeError):
        rec["slope"] = rec["intercept"] = None
    works = rec["works"]
    if works and all(w for w in works):
        try:
            rec["slope_work"], rec["intercept_work"] = stats.loglog_fit(works, rec["medians_s"])
        except ValueError:
            pass


# --------------------------------------------------------------------------- quality


def _cell(x: Any) -> Any:
    """A JSON-ready table cell: numbers, strings, None, or [mean, std]."""
    if isinstance(x, (list, tuple)):
        if len(x) == 2:
            return [_cell(x[0]), _cell(x[1])]
        raise ValueError(f"a table cell may be a (mean, std) pair, got a sequence of length {len(x)}: {x!r}")
    if hasattr(x, "item") and getattr(x, "ndim", 1) == 0:
        x = x.item()
    if x is None or isinstance(x, (str, bool, int, float)):
        return x
    raise ValueError(f"a table cell must be a number, string, None or (mean, std), got {type(x).__name__}")


def run_quality(bench: QualityBenchmark, ctx: QualityContext) -> dict[str, Any]:
    """Run a quality benchmark and validate what it returns.

    Returns a quality record. Raises ``TypeError``/``ValueError`` (recorded by
    the caller) when the result is malformed: not a ``QualityResult``, a row
    whose length differs from the columns, a cell that is not a number,
    string, None or (mean, std) pair.
    """
    t0 = time.perf_counter()
    result = bench.run(ctx)
    if not isinstance(result, QualityResult):
        raise TypeError(f"{bench.name}: run() must return a QualityResult, got {type(result).__name__}")
    tables = []
    for t in result.tables:
        if not isinstance(t, Table):
            raise TypeError(f"{bench.name}: tables must hold Table objects, got {type(t).__name__}")
        columns = [str(c) for c in t.columns]
        rows = []
        for i, r in enumerate(t.rows):
            if len(r) != len(columns):
                raise ValueError(f"{bench.name}: table {t.title!r} row {i} has {len(r)} cells for "
                                 f"{len(columns)} columns")
            rows.append([_cell(x) for x in r])
        tables.append({"title": str(t.title), "columns": columns, "rows": rows, "note": str(t.note or "")})
    notes = [result.notes] if isinstance(result.notes, str) else [str(n) for n in result.notes]
    metrics = {}
    for name, value in dict(result.metrics).items():
        value = float(value)
        if not math.isfinite(value):
            notes.append(f"metric {name} is {value}")
        metrics[str(name)] = value
    figures = [result.figures] if isinstance(result.figures, str) else [str(f) for f in result.figures]
    return {
        "kind": "quality", "name": bench.name, "family": bench.family, "status": "ok",
        "params": dict(ctx.params), "tables": tables, "figures": figures,
        "metrics": metrics, "notes": notes, "elapsed_s": time.perf_counter() - t0,
    }
