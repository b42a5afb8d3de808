"""The jaxcore cache folder and cached NumPy arrays (shared by datasets and the families)."""

from __future__ import annotations

import os
import pathlib
import tempfile
import uuid
import zipfile
from collections.abc import Callable

import numpy as np

__all__ = ["DataUnavailableError", "cache_dir", "cached_arrays", "shareable"]


class DataUnavailableError(RuntimeError):
    """A real data file could not be found or fetched; the message says how to get it."""


def cache_dir() -> pathlib.Path:
    """The jaxcore cache folder, created if needed.

    ``$JAXCORE_CACHE`` overrides; otherwise ``$XDG_CACHE_HOME/jaxcore`` or
    ``~/.cache/jaxcore``.

    Raises:
        DataUnavailableError: the folder cannot be created (the message says to point
            ``JAXCORE_CACHE`` at a writable folder).
    """
    env = os.environ.get("JAXCORE_CACHE")
    if env:
        path = pathlib.Path(env).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = pathlib.Path(base) / "jaxcore"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataUnavailableError(
            f"cannot create the jaxcore cache folder {str(path)!r} ({exc.strerror or exc}); "
            "point JAXCORE_CACHE at a writable folder"
        ) from exc
    return path


_MANIFEST = "__jaxcore_keys__"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def shareable(path: str | os.PathLike) -> None:
    """Give a file jaxcore wrote the permissions of an ordinary file (``0666 & ~umask``).

    Temporary files are created ``0600``; renamed into a shared cache they would be unreadable
    to the rest of a group sharing it.
    """
    os.chmod(path, 0o666 & ~_umask())


def _unwritable(folder: pathlib.Path, exc: OSError) -> DataUnavailableError:
    return DataUnavailableError(
        f"cannot write to the jaxcore cache folder {str(folder)!r} ({exc.strerror or exc}); "
        "point JAXCORE_CACHE at a writable folder"
    )


def _valid(arrays: dict[str, np.ndarray], keys: tuple[str, ...] | None, allow_nonfinite: bool) -> str | None:
    """None if a loaded entry is sound, else what is wrong with it."""
    manifest = arrays.pop(_MANIFEST, None)
    if manifest is None:
        return "it has no key manifest (written by an older jaxcore or by hand)"
    listed = sorted(str(k) for k in np.asarray(manifest).ravel())
    if listed != sorted(arrays):
        return f"its arrays {sorted(arrays)} differ from its manifest {listed}"
    if keys is not None and sorted(keys) != sorted(arrays):
        return f"its arrays {sorted(arrays)} are not the expected {sorted(keys)}"
    if not allow_nonfinite:
        for k, a in arrays.items():
            if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
                return f"its array {k!r} holds NaN or inf"
    return None


def cached_arrays(
    name: str,
    build: Callable[[], dict[str, np.ndarray]],
    *,
    version: str = "1",
    folder: str = "arrays",
    keys: tuple[str, ...] | None = None,
    allow_nonfinite: bool = False,
) -> dict[str, np.ndarray]:
    """Load ``name`` from the cache as a dict of arrays, building it once.

    ``build()`` makes the arrays; its result is written atomically to
    ``cache_dir()/<folder>/<name>-v<version>.npz`` with a manifest of its keys, readable by the
    group (``0666 & ~umask``). Bump ``version`` when the conversion changes. An entry that is
    unreadable, lacks its manifest, has other keys than the manifest (or than ``keys``) or holds
    NaN/inf (unless ``allow_nonfinite``) is deleted and rebuilt.

    Raises:
        DataUnavailableError: the cache folder cannot be written (names the folder and
            ``JAXCORE_CACHE``), or ``build()`` returned NaN/inf where ``allow_nonfinite`` is False.
    """
    path = cache_dir() / folder / f"{name}-v{version}.npz"
    if path.exists():
        problem = None
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
            problem = _valid(arrays, keys, allow_nonfinite)
        except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError) as exc:
            problem = f"it cannot be read ({type(exc).__name__})"
        if problem is None:
            return arrays
        try:
            path.unlink(missing_ok=True)  # a corrupt, stale or tampered entry: rebuild it
        except OSError as exc:
            raise _unwritable(path.parent, exc) from exc
    arrays = {k: np.asarray(v) for k, v in build().items()}
    if _MANIFEST in arrays:
        raise ValueError(f"build: expected array names other than {_MANIFEST!r}, got {sorted(arrays)}")
    if not allow_nonfinite:
        for k, a in arrays.items():
            if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
                raise DataUnavailableError(f"the source of {name!r} gave NaN or inf in {k!r}; not caching it")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npz", delete=False) as tmp:
            np.savez(tmp, **arrays, **{_MANIFEST: np.asarray(sorted(arrays))})
        shareable(tmp.name)
        os.replace(tmp.name, path)
    except OSError as exc:
        raise _unwritable(path.parent, exc) from exc
    return arrays


def _host_cpu_tag() -> str:
    """``<machine>-<12 hex digits>``: the architecture and a digest of the CPU's model and feature flags."""
    import hashlib
    import platform

    facts = [platform.machine(), platform.processor()]
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip() and len(facts) > 2:
                    break  # the first processor's block describes the host
                if line.split(":", 1)[0].strip() in ("flags", "Features", "model name", "CPU implementer", "CPU part"):
                    facts.append(line.strip())
    except OSError:
        pass  # not Linux: the architecture and platform.processor() alone
    digest = hashlib.sha256("\n".join(facts).encode()).hexdigest()[:12]
    return f"{platform.machine() or 'cpu'}-{digest}"


def enable_compilation_cache(path: str | os.PathLike | None = None, *,
                             min_compile_time_s: float = 0.0) -> pathlib.Path | None:
    """Turn on JAX's persistent compilation cache, so a program compiled once reloads in later processes.

    jaxcore's kernels are compile-bound on first call (a few seconds each on CPU); with the cache a second
    process that runs the same shapes loads the compiled program from disk instead (a 2 s compile reloads
    in about 0.1 s). The benchmark harness and jaxcore's test suite call this by default; call it once at
    the top of your own scripts. Set it before the first compilation: it applies to programs compiled after.
    ``JAXCORE_COMPILE_CACHE=0`` in the environment makes every call a no-op (to measure cold starts).

    The default folder has one sub-folder per host CPU (its architecture and instruction-set flags): XLA
    compiles CPU programs for the host's instruction set, and JAX's cache key does not name it, so a home
    folder shared by different machines (a cluster, a CI pool) would otherwise hand a program built with,
    say, AVX-512 to a CPU without it, which dies of an illegal instruction instead of recompiling.

    Several processes may share the folder (pytest-xdist workers, two scripts at once): JAX writes a cache
    entry in place (its file lock is used only with a size limit, whose eviction scans the whole folder on
    every write), so a process could read a program another was still writing and XLA then aborts the
    process (a half-written executable). jaxcore makes every write go to a temporary file in the folder that
    is renamed into place (``os.replace``, atomic on one file system): a reader sees a complete entry or none.

    JAX does not write programs that contain host callbacks to the cache; jaxcore's run-time argument checks
    under ``jit`` (``equinox.error_if``) are such callbacks, so the main programs of several routines
    (``tpp.fit_mle``, the ``inverse`` methods, ``sam.train``, ``bnp`` training, ``ipm.permutation_test``)
    still compile in every new process.

    Args:
        path: the cache folder (default: ``cache_dir() / "xla" / <host CPU tag>``, i.e. under
            ``$JAXCORE_CACHE``; see above).
        min_compile_time_s: programs that compile faster than this are not written (seconds, >= 0).

    Returns:
        The cache folder, or None when ``JAXCORE_COMPILE_CACHE=0`` turned the cache off.

    Raises:
        ValueError: ``min_compile_time_s`` negative or not finite.
        DataUnavailableError: the folder cannot be created.

    Examples:
        >>> import jaxcore
        >>> folder = jaxcore.enable_compilation_cache()   # None under JAXCORE_COMPILE_CACHE=0
        >>> folder is None or folder.parent.name == "xla"
        True
    """
    import math

    import jax

    from .checks import expected

    try:
        t = float(min_compile_time_s)
    except (TypeError, ValueError):
        raise ValueError(expected("min_compile_time_s", "a finite number of seconds >= 0", min_compile_time_s)) from None
    if not math.isfinite(t) or t < 0:
        raise ValueError(expected("min_compile_time_s", "a finite number of seconds >= 0", min_compile_time_s))
    if os.environ.get("JAXCORE_COMPILE_CACHE", "1") == "0":
        return None
    folder = pathlib.Path(path).expanduser() if path is not None else cache_dir() / "xla" / _host_cpu_tag()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataUnavailableError(f"cannot create the compilation cache folder {str(folder)!r} "
                                   f"({exc.strerror or exc})") from exc
    _atomic_cache_writes()
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", t)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder


def _atomic_cache_writes() -> bool:
    """Make JAX's persistent-cache writes atomic: each entry written to a temporary sibling, then renamed.

    JAX's file cache (``jax._src.lru_cache.LRUCache``) writes ``<key>-cache`` in place and takes a
    lock only when a size limit is set; a concurrent reader can then deserialize a truncated
    executable, which aborts the process (seen as a lost pytest-xdist worker). The wrapped ``put``
    keeps JAX's behaviour (an existing entry is kept; with a size limit JAX's own locked path runs) and
    changes only how the bytes reach the file. Returns whether the wrapper is installed (False when
    this JAX's cache class does not look as expected; the cache then works as JAX ships it).
    """
    try:
        from jax._src import lru_cache
    except ImportError:  # pragma: no cover - a JAX without the file cache module
        return False
    cls = getattr(lru_cache, "LRUCache", None)
    suffix = getattr(lru_cache, "_CACHE_SUFFIX", None)
    if cls is None or not isinstance(suffix, str) or not callable(getattr(cls, "put", None)):
        return False
    if getattr(cls.put, "_jaxcore_atomic", False):
        return True
    jax_put = cls.put

    def put(self, key: str, value: bytes) -> None:
        folder = str(getattr(self, "path", ""))
        if getattr(self, "eviction_enabled", True) or not folder or "://" in folder:
            return jax_put(self, key, value)  # JAX's locked path, or a remote (gs://...) folder
        if not key:
            raise ValueError("key cannot be empty")
        folder = pathlib.Path(folder)
        final = folder / f"{key}{suffix}"
        if final.exists():
            return
        tmp = folder / f".{key}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
        try:
            tmp.write_bytes(value)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                tmp.unlink()

    put._jaxcore_atomic = True
    put.__doc__ = jax_put.__doc__
    cls.put = put
    return True
