"""Progress reporting from inside compiled loops (DESIGN rule 8).

A long routine takes ``progress: bool | Callable = False``. ``False`` adds nothing to the
program; ``True`` draws a rich progress bar; a callable is called on the host as
``progress(step, metrics)`` with ``step`` a Python int (1-based, steps done) and ``metrics`` a
dict of floats. Reports go through ``jax.debug.callback`` at most every ``every`` steps and at
the last step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Union

import jax
import jax.numpy as jnp
import numpy as np

from .checks import expected

__all__ = ["Progress", "ProgressArg", "check_progress", "report_every"]

ProgressArg = Union[bool, Callable[[int, Mapping[str, float]], Any]]


def check_progress(progress: Any, name: str = "progress") -> ProgressArg:
    """Return ``progress`` if it is a bool or a callable; else TypeError."""
    if isinstance(progress, (bool, np.bool_)) or callable(progress):
        return progress if callable(progress) else bool(progress)
    raise TypeError(expected(name, "a bool or a callable progress(step, metrics)", type(progress).__name__, raw=True))


def report_every(num_steps: int, every: int | None = None) -> int:
    """How often to report: about 100 reports per run, at most every step, at least every 500."""
    if every is not None:
        return max(1, int(every))
    return int(min(500, max(1, num_steps // 100)))


class _RichBar:
    def __init__(self, total: int, description: str):
        self.total, self.description = total, description
        self._bar = None
        self._task = None

    def __call__(self, step: int, metrics: Mapping[str, float]) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, \
            TimeElapsedColumn, TimeRemainingColumn

        if self._bar is None:
            self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[info]}"))
            self._bar.start()
            self._task = self._bar.add_task(self.description, total=self.total, info="")
        info = "  ".join(f"{k}={v:.4g}" for k, v in metrics.items())
        self._bar.update(self._task, completed=step, info=info)
        if step >= self.total:
            self._bar.stop()
            self._bar = None


class Progress:
    """Host-side sink for one run's reports; call :meth:`update` from traced code.

    Args:
        progress: ``False`` (nothing), ``True`` (a rich bar) or ``fn(step, metrics)``.
        num_steps: the loop's length.
        description: the bar's label.
        every: report period in steps (default :func:`report_every`).
    """

    def __init__(self, progress: ProgressArg, num_steps: int, description: str = "", every: int | None = None):
        progress = check_progress(progress)
        self.enabled = progress is not False
        self.num_steps = int(num_steps)
        self.every = report_every(self.num_steps, every)
        if progress is True:
            self._sink = _RichBar(self.num_steps, description)
        elif callable(progress):
            self._sink = progress
        else:
            self._sink = None

    def _host(self, step, metrics):
        self._sink(int(step), {k: float(np.asarray(v)) for k, v in metrics.items()})

    def report(self, step: int, metrics: Mapping[str, Any] | None = None) -> None:
        """Report from the host (a Python loop over compiled calls): ``step`` is 1-based, steps done."""
        if self.enabled:
            self._host(step, dict(metrics or {}))

    def update(self, step: jax.Array, metrics: Mapping[str, jax.Array] | None = None) -> None:
        """Report ``step`` (0-based index of the step just done) from inside a traced loop."""
        if not self.enabled:
            return
        metrics = dict(metrics or {})
        done = jnp.asarray(step) + 1
        due = (done % self.every == 0) | (done == self.num_steps)

        def report(d, m):
            jax.debug.callback(self._host, d, m)

        jax.lax.cond(due, report, lambda d, m: None, done, metrics)
