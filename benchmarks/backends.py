"""The JAX backend of a run: which backends exist, the one chosen, and the XLA flags set before JAX starts."""

from __future__ import annotations

import sys

from .plan import UsageError

__all__ = ["BACKENDS", "available_backends", "select_backend"]

BACKENDS = ("cpu", "gpu", "tpu")


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


def _fake_cpu_devices(count: int, backend: str | None) -> None:
    """On CPU, make ``count`` devices visible (XLA's host-platform device count) for a device sweep.

    Only before JAX has started its backends; a GPU/TPU run uses the devices it has."""
    import os

    if backend not in (None, "cpu") or count <= 1:
        return
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={count}".strip()


def _backends_started() -> bool:
    """Whether this process has started JAX's backends (after which XLA_FLAGS no longer apply)."""
    xb = sys.modules.get("jax._src.xla_bridge")
    return bool(xb is not None and getattr(xb, "_backends", None))


def _fast_quality_compile(backend: str | None) -> bool:
    """Compile the run's programs with XLA:CPU's fast code generation; the speed rows opt out.

    Compiling is most of a cold CPU run (the report's first table). LLVM at -O1 without its expensive
    passes (XLA's ``xla_backend_optimization_level=1``, ``xla_llvm_disable_expensive_passes``)
    compiles the quality benchmarks' programs in about a third less time: it changes how XLA's
    fusions are lowered to machine code, not the HLO; results agree to float32 rounding (the order of
    a vectorised sum or a fused multiply-add may differ), as between two CPUs. The speed
    benchmarks' kernels and JAX baselines are compiled with XLA's default options passed per
    program (:data:`runner.FULL_COMPILE_OPTIONS`), so their times are unaffected. Only on CPU, and
    only when ``XLA_FLAGS`` does not already set these flags; before JAX starts its backends.
    """
    import importlib.util
    import os

    if backend not in (None, "cpu"):
        return False
    if backend is None and any(importlib.util.find_spec(m) is not None
                               for m in ("jax_cuda12_plugin", "jax_cuda13_plugin", "libtpu", "jax_rocm60_plugin")):
        return False  # an accelerator's plugin: keep its default code generation
    flags = os.environ.get("XLA_FLAGS", "")
    add = [f for f in ("--xla_backend_optimization_level=1", "--xla_llvm_disable_expensive_passes=true")
           if f.split("=")[0] not in flags]
    if add:
        os.environ["XLA_FLAGS"] = " ".join([flags, *add]).strip()
    from . import runner

    runner.FULL_COMPILE_OPTIONS.update({"xla_backend_optimization_level": 3, "xla_llvm_disable_expensive_passes": False})
    return True


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
