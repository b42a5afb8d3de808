"""The jaxcore cache folder and cached NumPy arrays (shared by datasets and the families)."""

from __future__ import annotations

import os
import pathlib
import tempfile
import zipfile
from collections.abc import Callable

import numpy as np

__all__ = ["DataUnavailableError", "cache_dir", "cached_arrays"]


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


def cached_arrays(
    name: str,
    build: Callable[[], dict[str, np.ndarray]],
    *,
    version: str = "1",
    folder: str = "arrays",
) -> dict[str, np.ndarray]:
    """Load ``name`` from the cache as a dict of arrays, building it once.

    ``build()`` makes the arrays; its result is written atomically to
    ``cache_dir()/<folder>/<name>-v<version>.npz``. Bump ``version`` when the conversion
    changes. A corrupt cache file is deleted and rebuilt.
    """
    path = cache_dir() / folder / f"{name}-v{version}.npz"
    if path.exists():
        try:
            with np.load(path, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError):
            path.unlink(missing_ok=True)  # a corrupt or truncated cache entry: rebuild it
    arrays = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npz", delete=False) as tmp:
        np.savez(tmp, **arrays)
    os.replace(tmp.name, path)
    return arrays
