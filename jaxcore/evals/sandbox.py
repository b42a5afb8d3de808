"""A sandboxed Python executor for agent-written code: a subprocess with resource limits and no network.

Each call of :func:`run_code` makes a fresh temporary folder, copies the task's tables into its ``work/``
subfolder (the code's working directory, also its ``HOME`` and ``TMPDIR``) and runs the code there in a new
Python process (isolated mode, no bytecode writing, one BLAS thread) with:

- ``resource`` limits, set by the child before the code runs: CPU seconds (``RLIMIT_CPU``; the kernel stops
  the process), address space (``RLIMIT_AS``; allocations fail with ``MemoryError``), the size of any file it
  writes (``RLIMIT_FSIZE``; this includes its captured output), no core files; and a wall-clock limit after
  which the whole process group is killed (code that sleeps uses no CPU);
- no network: a new user and network namespace (``unshare -rn``: only a loopback interface, down) where the
  platform allows it, and in every case a Python audit hook that refuses socket creation and connection;
  :data:`NETWORK_ISOLATION` says which applies here;
- an audit hook that refuses, with a ``PermissionError``, opening a file for writing, removing, renaming or
  creating a file or folder outside ``work/``, and starting processes (``subprocess``, ``os.system``,
  ``os.exec*``, ``os.fork``);
- its stdout and stderr captured into files outside ``work/`` and returned truncated at
  ``max_output_chars`` characters each (``truncated`` says so).

Every refusal or limit is recorded in the :class:`ExecResult` (``status``, ``refused``), never raised to the
harness. This contains mistakes of a weak model; it is NOT a security boundary against code written to
escape (an audit hook can be bypassed through ``ctypes``; use a container or a VM for untrusted code).
"""

from __future__ import annotations

import functools
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import NamedTuple

from jaxcore._util import check_int, check_scalar, expected

__all__ = ["ExecResult", "NETWORK_ISOLATION", "STATUSES", "network_isolation", "run_code"]

#: what :func:`run_code` may report in ``ExecResult.status``
STATUSES = ("ok", "error", "refused", "timeout", "cpu_limit", "memory_limit", "file_limit")

_MARK = "[sandbox refused]"

# The bootstrap run in the child: install the audit hook, then execute the code file in a fresh namespace.
_BOOT = r'''
import os, resource, sys
_CPU, _MEM, _FSIZE = %d, %d, %d
resource.setrlimit(resource.RLIMIT_CPU, (_CPU, _CPU + 1))
resource.setrlimit(resource.RLIMIT_AS, (_MEM, _MEM))
resource.setrlimit(resource.RLIMIT_FSIZE, (_FSIZE, _FSIZE))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
_WORK = os.path.realpath(os.getcwd())
_MARK = %r
_WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_ALLOWED = ("/dev/null",)

def _inside(path):
    try:
        p = os.fsdecode(path)
    except TypeError:
        return True
    p = os.path.realpath(os.path.join(_WORK, p))
    return p == _WORK or p.startswith(_WORK + os.sep) or p in _ALLOWED

def _refuse(event, detail):
    msg = f"{_MARK} {event}: {detail}"
    try:
        sys.__stderr__.write(msg + "\n")
        sys.__stderr__.flush()
    except Exception:
        pass
    raise PermissionError(msg)

def _hook(event, args):
    if event.startswith("socket.") and event != "socket.gethostname":
        _refuse(event, "no network in the sandbox")
    elif event == "open":
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
            (isinstance(flags, int) and flags & _WRITE)
        if writing and not isinstance(path, int) and not _inside(path):
            _refuse(event, f"writing outside the working directory: {path!r}")
    elif event in ("os.remove", "os.rename", "os.mkdir", "os.rmdir", "os.chmod", "os.truncate", "os.symlink",
                   "os.link", "shutil.rmtree", "shutil.move", "os.utime", "os.chown"):
        for a in args[:2]:
            if isinstance(a, (str, bytes, os.PathLike)) and not _inside(a):
                _refuse(event, f"outside the working directory: {a!r}")
    elif event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                   "os.forkpty", "pty.spawn"):
        _refuse(event, "no processes in the sandbox")

sys.addaudithook(_hook)
del _hook
_code = open(sys.argv[1], encoding="utf-8").read()
_g = {"__name__": "__main__", "__builtins__": __builtins__}
exec(compile(_code, "<agent code>", "exec"), _g)
'''


@functools.cache
def network_isolation() -> str:
    """``"namespace+audit-hook"`` when ``unshare -rn`` works on this machine, else ``"audit-hook"``."""
    exe = shutil.which("unshare")
    if exe is None or not sys.platform.startswith("linux"):
        return "audit-hook"
    try:
        ok = subprocess.run([exe, "-rn", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return "namespace+audit-hook" if ok else "audit-hook"


def __getattr__(name):  # NETWORK_ISOLATION is probed on first use
    if name == "NETWORK_ISOLATION":
        return network_isolation()
    raise AttributeError(name)


class ExecResult(NamedTuple):
    """What one sandboxed run did.

    Attributes:
        status: one of :data:`STATUSES`: ``"ok"`` (exit 0), ``"error"`` (an exception or a non-zero exit),
            ``"refused"`` (the audit hook refused an operation and the code did not recover),
            ``"timeout"`` (wall clock), ``"cpu_limit"``, ``"memory_limit"``, ``"file_limit"`` (a file or the
            output grew past ``file_mb``).
        returncode: the process's exit status (negative: the signal that ended it).
        stdout: its standard output, at most ``max_output_chars`` characters.
        stderr: its standard error, likewise.
        truncated: True if either was cut.
        seconds: wall-clock seconds of the run.
        refused: the operations the audit hook refused (``"socket.connect: ..."``), in order.
        network: how the network was cut (:func:`network_isolation`).
        files: the names of the files in the working folder afterwards (tables included), sorted.
    """

    status: str
    returncode: int
    stdout: str
    stderr: str
    truncated: bool
    seconds: float
    refused: tuple
    network: str
    files: tuple


def _read(path: pathlib.Path, limit: int) -> tuple[str, bool]:
    with open(path, "rb") as f:
        raw = f.read(4 * limit + 4)
    text = raw.decode("utf-8", errors="replace")
    cut = len(text) > limit or path.stat().st_size > len(raw)
    return (text[:limit] + "\n[... output truncated]" if cut else text), cut


def run_code(code: str, tables: Mapping[str, str | os.PathLike] | None = None, *, cpu_seconds: float = 10.0,
             wall_seconds: float = 30.0, memory_mb: int = 2048, file_mb: int = 16,
             max_output_chars: int = 4000) -> ExecResult:
    """Run Python ``code`` in a fresh sandbox (see the module docstring) and record what happened.

    Args:
        code: the program text.
        tables: ``{file name in the working folder: path of the file to copy there}`` (the task's CSVs).
        cpu_seconds: CPU-time limit (>= 1, rounded up to whole seconds).
        wall_seconds: wall-clock limit (> 0); the process group is killed after it.
        memory_mb: address-space limit in MiB (>= 256; Python with pandas needs about 1 GiB of it).
        file_mb: size limit in MiB of any file written, the captured output included (>= 1).
        max_output_chars: characters of stdout and of stderr returned (>= 16).

    Returns:
        An :class:`ExecResult`; a limit or refusal is a status, never an exception.

    Raises:
        TypeError: ``code`` is not a string.
        ValueError: a bad limit, or a table name with a folder part or a missing table file.

    Examples:
        >>> r = run_code("print(sum(range(10)))")
        >>> r.status, r.stdout
        ('ok', '45\\n')
        >>> run_code("import socket; socket.create_connection(('8.8.8.8', 53))").status
        'refused'
    """
    if not isinstance(code, str):
        raise TypeError(expected("code", "a string", type(code).__name__, raw=True))
    cpu = int(-(-check_scalar(cpu_seconds, "cpu_seconds", low=1.0) // 1))
    wall = check_scalar(wall_seconds, "wall_seconds", positive=True)
    memory = check_int(memory_mb, "memory_mb", minimum=256) << 20
    fsize = check_int(file_mb, "file_mb", minimum=1) << 20
    limit = check_int(max_output_chars, "max_output_chars", minimum=16)
    tables = dict(tables or {})
    for name, src in tables.items():
        if not isinstance(name, str) or pathlib.PurePath(name).name != name or name in ("", ".", ".."):
            raise ValueError(expected("tables", "plain file names as keys", name))
        if not pathlib.Path(src).is_file():
            raise ValueError(expected(f"tables[{name!r}]", "the path of an existing file", str(src)))
    isolation = network_isolation()
    root = pathlib.Path(tempfile.mkdtemp(prefix="jaxcore-sandbox-"))
    try:
        work = root / "work"
        work.mkdir()
        for name, src in tables.items():
            shutil.copyfile(src, work / name)
        (root / "boot.py").write_text(_BOOT % (cpu, memory, fsize, _MARK))
        (root / "code.py").write_text(code, encoding="utf-8")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work), "TMPDIR": str(work),
               "MPLCONFIGDIR": str(work), "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONIOENCODING": "utf-8", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "LANG": "C.UTF-8"}
        cmd = [sys.executable, "-I", "-B", str(root / "boot.py"), str(root / "code.py")]
        if isolation.startswith("namespace"):
            cmd = [shutil.which("unshare") or "unshare", "-rn", *cmd]
        t0 = time.perf_counter()
        with open(root / "stdout", "wb") as out, open(root / "stderr", "wb") as err:
            proc = subprocess.Popen(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    start_new_session=True)
            timed_out = False
            try:
                rc = proc.wait(timeout=wall)
            except subprocess.TimeoutExpired:
                timed_out = True
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                rc = proc.wait()
        seconds = time.perf_counter() - t0
        stdout, cut_out = _read(root / "stdout", limit)
        stderr_full, _ = _read(root / "stderr", 64 * limit)
        stderr, cut_err = _read(root / "stderr", limit)
        refused = tuple(line[len(_MARK):].strip() for line in stderr_full.splitlines() if line.startswith(_MARK))
        if timed_out:
            status = "timeout"
        elif rc in (-signal.SIGXCPU, -signal.SIGKILL):
            status = "cpu_limit"
        elif rc == -signal.SIGXFSZ or "File too large" in stderr_full:
            status = "file_limit"
        elif rc != 0 and "MemoryError" in stderr_full:
            status = "memory_limit"
        elif rc != 0 and refused:
            status = "refused"
        elif rc != 0:
            status = "error"
        else:
            status = "ok"
        files = tuple(sorted(p.name for p in work.iterdir()))
        return ExecResult(status, int(rc), stdout, stderr, cut_out or cut_err, seconds, refused, isolation, files)
    finally:
        shutil.rmtree(root, ignore_errors=True)
