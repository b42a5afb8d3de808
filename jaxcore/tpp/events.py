"""Padded batches of marked event sequences on observation windows [0, T].

A batch of ``B`` sequences is stored as fixed-shape arrays so that every kernel
is ``jit``-compiled once: ``times [B, L]``, ``marks [B, L]``, ``mask [B, L]``
and the window ends ``T [B]``. Padding positions (``mask == False``) repeat the
last real event time of their sequence (0 for an empty sequence) and carry mark
0, so that every inter-event gap at a padding position is exactly zero and a
padded event changes no likelihood, compensator or solver state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxcore._util import check_int, default_float, expected
from jaxcore.datasets import event_splits


class EventBatch(eqx.Module):
    """A padded batch of marked event sequences, each observed on ``[0, T_b]``.

    Attributes:
        times: event times ``[batch, max_events]`` (same unit as ``T``), sorted
            within each sequence; padding repeats the last real time.
        marks: event types ``[batch, max_events]`` int32 in ``0..num_marks-1``
            (0 at padding positions).
        mask: ``[batch, max_events]`` bool, True at real events. Real events
            come first in each row.
        T: window ends ``[batch]``; every real time lies in ``[0, T_b]``.
        num_marks: number of event types ``K`` (static).

    Examples:
        >>> from jaxcore.tpp import EventBatch
        >>> batch = EventBatch.from_sequences([[0.5, 1.0, 2.5], [0.2]], [[0, 1, 1], [1]], T=3.0)
        >>> batch.times.shape, batch.num_marks, batch.num_events.tolist()
        ((2, 3), 2, [3, 1])
        >>> batch.times[1].tolist()  # padding repeats the last real time
        [0.2..., 0.2..., 0.2...]
    """

    times: Float[Array, "batch length"]
    marks: Int[Array, "batch length"]
    mask: Bool[Array, "batch length"]
    T: Float[Array, " batch"]
    num_marks: int = eqx.field(static=True, default=1)

    @property
    def num_sequences(self) -> int:
        """Number of sequences ``B``."""
        return self.times.shape[0]

    @property
    def max_events(self) -> int:
        """Padded length ``L``."""
        return self.times.shape[1]

    @property
    def num_events(self) -> Int[Array, " batch"]:
        """Number of real events per sequence, ``[batch]`` int32."""
        return jnp.sum(self.mask, axis=1, dtype=jnp.int32)

    @classmethod
    def from_sequences(
        cls,
        times: Sequence[Any],
        marks: Sequence[Any] | None = None,
        T: float | Sequence[float] | None = None,
        *,
        num_marks: int | None = None,
        max_events: int | None = None,
        dtype: Any = None,
    ) -> EventBatch:
        """Build a padded, validated batch from a list of variable-length sequences.

        Args:
            times: list of ``B`` 1-D array-likes of event times (sorted, finite,
                non-negative).
            marks: optional list of ``B`` integer array-likes of the same lengths
                (default: all events of type 0).
            T: window end per sequence (scalar or ``B`` values). Default: the
                last event time of each sequence (0 if it is empty).
            num_marks: number of event types ``K`` (default: max mark + 1).
            max_events: padded length ``L`` (default: the longest sequence).
            dtype: float dtype of ``times``/``T`` (default float32, float64
                under x64).

        Returns:
            An :class:`EventBatch`.

        Raises:
            TypeError: if ``times`` is not a list of sequences.
            ValueError: naming the sequence and position of the first bad
                value (non-finite, negative, unsorted or after ``T`` time;
                mark out of ``[0, num_marks)``), on length mismatches, or if a
                sequence is longer than ``max_events``.
        """
        if isinstance(times, (np.ndarray, jax.Array)) and np.ndim(times) == 1:
            raise TypeError("times: expected a list of 1-D sequences (one per event sequence), got one 1-D array; "
                            "wrap it in a list: [times]")
        if not isinstance(times, (list, tuple)) and not (isinstance(times, np.ndarray) and times.ndim == 2):
            raise TypeError(f"times: expected a list of 1-D sequences, got {type(times).__name__}")
        seqs = [np.asarray(t, dtype=np.float64).reshape(-1) if np.ndim(t) <= 1 else None for t in times]
        for b, s in enumerate(seqs):
            if s is None:
                raise ValueError(f"times[{b}]: expected a 1-D sequence of event times, got shape {np.shape(times[b])}")
        B = len(seqs)
        if marks is None:
            mark_seqs = [np.zeros(len(s), np.int64) for s in seqs]
        else:
            if len(marks) != B:
                raise ValueError(f"marks: expected {B} sequences (one per times sequence), got {len(marks)}")
            mark_seqs = []
            for b, m in enumerate(marks):
                m = np.asarray(m)
                if m.ndim != 1 and m.size != 0:
                    raise ValueError(f"marks[{b}]: expected a 1-D sequence, got shape {m.shape}")
                m = m.reshape(-1)
                if m.size and not np.issubdtype(m.dtype, np.integer):
                    if not np.all(np.isfinite(m)) or not np.all(m == np.round(m)):
                        raise TypeError(f"marks[{b}]: expected integer event types, got dtype {m.dtype}")
                if len(m) != len(seqs[b]):
                    raise ValueError(
                        f"marks[{b}]: expected {len(seqs[b])} marks (the length of times[{b}]), got {len(m)}")
                mark_seqs.append(m.astype(np.int64))
        if T is None:
            Ts = np.array([s[-1] if len(s) else 0.0 for s in seqs], np.float64)
        else:
            Ts = np.broadcast_to(np.asarray(T, np.float64), (B,)) if np.ndim(T) == 0 else np.asarray(T, np.float64)
            if Ts.shape != (B,):
                raise ValueError(f"T: expected a scalar or {B} window ends, got shape {Ts.shape}")
        if num_marks is None:
            num_marks = int(max([int(m.max()) + 1 for m in mark_seqs if m.size] or [1]))
        if not isinstance(num_marks, (int, np.integer)) or num_marks < 1:
            raise ValueError(f"num_marks: expected a positive integer, got {num_marks!r}")
        longest = max([len(s) for s in seqs] or [0])
        L = longest if max_events is None else int(max_events)
        if L < longest:
            b = int(np.argmax([len(s) for s in seqs]))
            raise ValueError(f"max_events: expected at least {longest} (times[{b}] has {longest} events), got {L}")
        L = max(L, 1)
        for b in range(B):
            validate_sequence(seqs[b], mark_seqs[b], Ts[b], num_marks, index=b)
        t_arr = np.zeros((B, L), np.float64)
        m_arr = np.zeros((B, L), np.int32)
        k_arr = np.zeros((B, L), bool)
        for b, (s, m) in enumerate(zip(seqs, mark_seqs)):
            n = len(s)
            t_arr[b, :n] = s
            t_arr[b, n:] = s[-1] if n else 0.0
            m_arr[b, :n] = m
            k_arr[b, :n] = True
        dtype = dtype or default_float()
        return cls(jnp.asarray(t_arr, dtype), jnp.asarray(m_arr), jnp.asarray(k_arr), jnp.asarray(Ts, dtype),
                   int(num_marks))

    def to_sequences(self) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
        """The real events as lists of NumPy arrays: ``(times, marks, T)``."""
        t, m, k = np.asarray(self.times), np.asarray(self.marks), np.asarray(self.mask)
        return [t[b][k[b]] for b in range(len(t))], [m[b][k[b]] for b in range(len(t))], np.asarray(self.T)

    def trim(self, multiple: int = 1) -> EventBatch:
        """The same sequences with the padding cut to the longest one, rounded up to ``multiple``.

        Solver cost grows with the padded length, so trim buffers sized for simulation;
        a common ``multiple`` lets batches of similar lengths share one compilation.

        Raises:
            ValueError: ``multiple`` is not a positive int.
        """
        multiple = check_int(multiple, "multiple", minimum=1)
        longest = int(np.max(np.asarray(self.num_events), initial=0))
        length = min(max(-(-longest // multiple) * multiple, 1), self.max_events)
        return EventBatch(self.times[:, :length], self.marks[:, :length], self.mask[:, :length], self.T,
                          self.num_marks)

    def __getitem__(self, index: Any) -> EventBatch:
        """Select sequences along the batch axis (an int keeps a batch of one)."""
        if isinstance(index, (int, np.integer)):
            index = slice(int(index), int(index) + 1)
        return EventBatch(self.times[index], self.marks[index], self.mask[index], self.T[index], self.num_marks)


def validate_sequence(times: np.ndarray, marks: np.ndarray, T: float, num_marks: int, *, index: int = 0) -> None:
    """Check one sequence: finite, non-negative, sorted times inside ``[0, T]``; marks in range.

    Args:
        times: ``[n]`` float event times; marks: ``[n]`` int event types.
        T: the window end; num_marks: number of event types ``K``.
        index: the sequence's position, used in messages.

    Returns:
        None.

    Raises:
        ValueError: naming ``times[index][position]`` (or ``marks[...]``, ``T[index]``)
            and the offending and expected values.

    Examples:
        >>> import numpy as np
        >>> from jaxcore.tpp import validate_sequence
        >>> validate_sequence(np.array([0.5, 0.2]), np.zeros(2, int), 1.0, 1, index=3)
        Traceback (most recent call last):
        ValueError: times[3][1]: expected event times sorted in non-decreasing order (a time >= times[3][0] = 0.5), got 0.2
    """
    if not np.isfinite(T) or T < 0:
        raise ValueError(f"T[{index}]: expected a finite, non-negative window end, got {T}")
    bad = np.flatnonzero(~np.isfinite(times))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"times[{index}][{i}]: expected a finite event time, got {times[i]}")
    bad = np.flatnonzero(times < 0)
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"times[{index}][{i}]: expected a time in [0, T={T}], got {times[i]}")
    bad = np.flatnonzero(np.diff(times) < 0)
    if bad.size:
        i = int(bad[0]) + 1
        raise ValueError(f"times[{index}][{i}]: expected event times sorted in non-decreasing order (a time >= "
                         f"times[{index}][{i - 1}] = {times[i - 1]}), got {times[i]}")
    bad = np.flatnonzero(times > T)
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"times[{index}][{i}]: expected a time in [0, T={T}], got {times[i]}")
    bad = np.flatnonzero((marks < 0) | (marks >= num_marks))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"marks[{index}][{i}]: expected an event type in [0, {num_marks}), got {marks[i]}")


def check_batch(batch: Any, name: str = "batch") -> EventBatch:
    """Raise ``TypeError`` unless ``batch`` is an :class:`EventBatch` (public-boundary check)."""
    if not isinstance(batch, EventBatch):
        raise TypeError(expected(name, "a jaxcore.tpp.EventBatch (build one with EventBatch.from_sequences)",
                                 type(batch).__name__, raw=True))
    return batch


def check_marks(batch: EventBatch, num_marks: int, name: str = "batch") -> None:
    """Raise ``ValueError`` if the batch's number of marks differs from the model's."""
    if batch.num_marks != num_marks:
        raise ValueError(f"{name}.num_marks: expected {num_marks} (the model's number of event types), "
                         f"got {batch.num_marks}")


class EventSplits(NamedTuple):
    """A real data set as padded train/validation/test batches (:func:`event_batches`).

    Attributes:
        train, valid, test: :class:`EventBatch` es, all padded to the same length.
        num_marks: number of event types ``K``.
        mark_names: ``K`` names of the event types.
        unit: the time unit and windowing of the set (text).

    Examples:
        >>> from jaxcore.tpp import EventSplits
        >>> EventSplits._fields
        ('train', 'valid', 'test', 'num_marks', 'mark_names', 'unit')
    """

    train: EventBatch
    valid: EventBatch
    test: EventBatch
    num_marks: int
    mark_names: tuple[str, ...]
    unit: str


def event_batches(name: str, *, period: int = 10, dtype: Any = None) -> EventSplits:
    """Load a real event data set (``jaxcore.datasets.event_splits``) as padded :class:`EventBatch` es.

    The windows of each split are built with :meth:`EventBatch.from_sequences`, all padded to
    the longest window of the whole set (so the three splits share compiled programs).

    Args:
        name: ``"coal"``, ``"neuro"``, ``"tweets"`` or ``"grasshopper"``
            (``jaxcore.datasets.EVENT_DATASETS``).
        period: split period (10: 80/10/10 interleaved).
        dtype: float dtype of the times (default float32, float64 under x64).

    Returns:
        An :class:`EventSplits` ``(train, valid, test, num_marks, mark_names, unit)``.

    Raises:
        ValueError: unknown ``name``.
        DataUnavailableError: the package holding the data is not installed.

    References:
        R. G. Jarrett, Biometrika 66(1), 1979 (coal); Ventura et al., Biostatistics 3(1), 2002
        (neuro); Rokem et al., J. Neurophysiol. 95, 2006 (grasshopper).

    Examples:
        >>> from jaxcore.tpp import event_batches
        >>> coal = event_batches("coal")
        >>> coal.train.num_sequences, coal.test.num_sequences, coal.num_marks
        (24, 2, 1)
    """
    s = event_splits(name, period=period)
    batches = [EventBatch.from_sequences(s[split]["times"], s[split]["marks"], s["T"], num_marks=s["num_marks"],
                                         max_events=s["max_events"], dtype=dtype)
               for split in ("train", "valid", "test")]
    return EventSplits(*batches, s["num_marks"], tuple(s["mark_names"]), s["unit"])
