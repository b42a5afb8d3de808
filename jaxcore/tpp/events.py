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

from jaxcore._util import check_int, default_float, expected, is_concrete

from ._checks import float_dtype
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

    def __check_init__(self):
        # concrete values are validated here, whichever way the batch was built; batches built
        # inside a compiled program (simulation, minibatches of train) hold tracers and are not
        check_batch_values(self.times, self.marks, self.mask, self.T, self.num_marks)

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
        t0: float | Sequence[float] = 0.0,
    ) -> EventBatch:
        """Build a padded, validated batch from a list of variable-length sequences.

        Data observed on a window ``[t0, T]`` that does not start at 0 (calendar years, a stimulus at
        -250 ms) are shifted on the way in: the batch holds ``times - t0`` on ``[0, T - t0]``, the frame
        every model of the family assumes (a Poisson rate or a Hawkes baseline is then per unit of
        the same clock, and log-likelihoods are unchanged by the shift).

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
                under x64). Integer and half-precision dtypes are refused, and so is
                a cast that merges distinct times or distorts a gap by more than half
                of itself (near t = 1e7 float32 has a spacing of 1): use float64
                (``jax.config.update("jax_enable_x64", True)``) or shift the origin.
            t0: window start per sequence (scalar or ``B`` values; same clock as ``times`` and ``T``),
                subtracted from both in float64 before the cast. Events before ``t0`` are refused.

        Returns:
            An :class:`EventBatch`.

        Raises:
            TypeError: if ``times`` is not a list of sequences.
            ValueError: naming the sequence and position of the first bad
                value (non-finite, negative, unsorted or after ``T`` time;
                mark out of ``[0, num_marks)``), on length mismatches, if a
                sequence is longer than ``max_events``, or if the times do not
                survive the cast to ``dtype``.
            TypeError: an integer or half-precision ``dtype``.
        """
        if isinstance(times, (np.ndarray, jax.Array)) and np.ndim(times) == 1:
            raise TypeError("times: expected a list of 1-D sequences (one per event sequence), got one 1-D array; "
                            "wrap it in a list: [times]")
        if not isinstance(times, (list, tuple)) and not (isinstance(times, np.ndarray) and times.ndim == 2):
            raise TypeError(f"times: expected a list of 1-D sequences, got {type(times).__name__}")
        dtype = float_dtype(default_float() if dtype is None else dtype)
        seqs = []
        for b, t in enumerate(times):
            if t is None:
                raise TypeError(f"times[{b}]: expected a 1-D sequence of event times, got None")
            try:
                a = np.asarray(t, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"times[{b}]: expected a 1-D sequence of real event times, got "
                                f"{type(t).__name__}") from exc
            seqs.append(a.reshape(-1) if a.ndim <= 1 else None)
        for b, s in enumerate(seqs):
            if s is None:
                raise ValueError(f"times[{b}]: expected a 1-D sequence of event times, got shape {np.shape(times[b])}")
        B = len(seqs)
        try:
            if isinstance(t0, (str, bytes)):
                raise TypeError
            t0_arr = np.asarray(t0, np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(expected("t0", "a real scalar or one window start per sequence",
                                     type(t0).__name__, raw=True)) from exc
        if t0_arr.ndim and t0_arr.shape != (B,):
            raise ValueError(f"t0: expected a scalar or {B} window starts, got shape {t0_arr.shape}")
        if not np.all(np.isfinite(t0_arr)):
            raise ValueError(expected("t0", "finite window starts", t0_arr))
        t0s = np.broadcast_to(t0_arr, (B,))
        if np.any(t0s != 0):
            for b, s in enumerate(seqs):
                if s.size and not (np.nanmin(s) >= t0s[b]):
                    raise ValueError(f"times[{b}]: expected events at or after the window start t0 = {t0s[b]:g}, "
                                     f"got {np.nanmin(s):g}")
            seqs = [s - t0s[b] for b, s in enumerate(seqs)]
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
            try:
                if isinstance(T, (str, bytes)):
                    raise TypeError
                T_arr = np.asarray(T, np.float64)
            except (TypeError, ValueError) as exc:
                raise TypeError(expected("T", "a real scalar or one window end per sequence",
                                         type(T).__name__, raw=True)) from exc
            Ts = np.broadcast_to(T_arr, (B,)) if T_arr.ndim == 0 else T_arr
            if Ts.shape != (B,):
                raise ValueError(f"T: expected a scalar or {B} window ends, got shape {Ts.shape}")
            Ts = Ts - t0s
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
        _check_cast(t_arr, k_arr, dtype)
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


def _check_cast(t_arr: np.ndarray, k_arr: np.ndarray, dtype: jnp.dtype) -> None:
    """Refuse a cast of the float64 times ``[B, L]`` to ``dtype`` that merges distinct times or
    distorts a gap by more than half of itself (rounding keeps the order, so this is what is lost)."""
    cast = t_arr.astype(dtype).astype(np.float64)
    gap, gap_cast = np.diff(t_arr, axis=1), np.diff(cast, axis=1)
    real = k_arr[:, 1:]
    bad = real & (gap > 0) & (np.abs(gap_cast - gap) > 0.5 * gap)
    if bad.any():
        b, i = (int(v) for v in np.argwhere(bad)[0])
        merged = ("become equal" if gap_cast[b, i] == 0
                  else f"become {float(cast[b, i])!r} and {float(cast[b, i + 1])!r}")
        raise ValueError(
            f"times[{b}][{i + 1}]: expected event times that survive the cast to dtype={np.dtype(dtype).name} "
            f"(times {float(t_arr[b, i])!r} and {float(t_arr[b, i + 1])!r} {merged}); use float64 "
            f"(jax.config.update('jax_enable_x64', True) and dtype=jnp.float64) or shift the time origin "
            f"closer to the events, got dtype={np.dtype(dtype).name}")


def check_batch_values(times: Any, marks: Any, mask: Any, T: Any, num_marks: Any) -> None:
    """The constructor's checks of an :class:`EventBatch` (types and shapes always; values when concrete)."""
    if isinstance(num_marks, (bool, np.bool_)) or not isinstance(num_marks, (int, np.integer)) or num_marks < 1:
        raise ValueError(expected("num_marks", "a positive int", num_marks))
    for name, x in (("times", times), ("marks", marks), ("mask", mask), ("T", T)):
        if not hasattr(x, "dtype") or not hasattr(x, "shape"):
            raise TypeError(expected(name, "an array", type(x).__name__, raw=True))
    for name, x in (("times", times), ("T", T)):
        if not jnp.issubdtype(x.dtype, jnp.floating):
            raise TypeError(expected(name, "a float32/float64 array (integer times would be truncated)",
                                     f"dtype {x.dtype}", raw=True))
        if jnp.dtype(x.dtype) in (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16)):
            raise TypeError(expected(name, "a float32/float64 array (half precision cannot hold event times "
                                           "faithfully)", f"dtype {x.dtype}", raw=True))
    if not jnp.issubdtype(marks.dtype, jnp.integer):
        raise TypeError(expected("marks", "an integer array of event types", f"dtype {marks.dtype}", raw=True))
    if mask.dtype != jnp.bool_:
        raise TypeError(expected("mask", "a bool array", f"dtype {mask.dtype}", raw=True))
    if len(times.shape) != 2:
        raise ValueError(expected("times", "shape [batch, length]", f"shape {tuple(times.shape)}", raw=True))
    for name, x in (("marks", marks), ("mask", mask)):
        if tuple(x.shape) != tuple(times.shape):
            raise ValueError(expected(name, f"the shape of times {tuple(times.shape)}", f"shape {tuple(x.shape)}",
                                      raw=True))
    if tuple(T.shape) != (times.shape[0],):
        raise ValueError(expected("T", f"shape [batch] = ({times.shape[0]},)", f"shape {tuple(T.shape)}", raw=True))
    if not is_concrete(times, marks, mask, T):
        return
    t, m, k, Tn = (np.asarray(x) for x in (times, marks, mask, T))
    t = t.astype(np.float64)
    Tn = Tn.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(Tn) | (Tn < 0))
    if bad.size:
        b = int(bad[0])
        raise ValueError(f"T[{b}]: expected a finite, non-negative window end, got {float(Tn[b])!r}")
    later = k[:, 1:] & ~k[:, :-1]
    if later.any():
        b, i = (int(v) for v in np.argwhere(later)[0])
        raise ValueError(f"mask[{b}][{i + 1}]: expected the real events first in each row (True after False), "
                         f"got True after mask[{b}][{i}] = False")
    checks = [
        (~np.isfinite(t), "times", "a finite event time"),
        (k & (t < 0), "times", "a time in [0, T]"),
        (k & (t > Tn[:, None]), "times", "a time in [0, T]"),
        (np.concatenate([np.zeros((t.shape[0], 1), bool), k[:, 1:] & (np.diff(t, axis=1) < 0)], axis=1),
         "times", "event times sorted in non-decreasing order"),
        ((m < 0) | (m >= num_marks), "marks", f"an event type in [0, {num_marks})"),
    ]
    for bad, name, what in checks:
        if bad.any():
            b, i = (int(v) for v in np.argwhere(bad)[0])
            got = t[b, i] if name == "times" else m[b, i]
            extra = f" (T[{b}] = {float(Tn[b])!r})" if "[0, T]" in what else ""
            raise ValueError(f"{name}[{b}][{i}]: expected {what}{extra}, got {np.asarray(got).item()!r}")


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
