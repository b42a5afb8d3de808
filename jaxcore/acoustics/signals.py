"""Signal kernels of room acoustics: FFT convolution, STFT losses, Schroeder decay and room metrics.

Every kernel takes arrays with any leading batch shape and works on the last axis (time, in samples);
each is one module-level jitted program.

- :func:`fft_convolve`: linear convolution ``(x * h)[t] = sum_k x[t - k] h[k]`` by zero-padded FFTs.
- :func:`stft_magnitude`, :func:`multi_resolution_stft_loss` (spectral convergence plus log-magnitude
  L1 summed over resolutions; Yamamoto et al. 2020) and :func:`stft_error` (mean absolute difference
  of log10 magnitudes, an evaluation metric).
- :func:`schroeder_decay`: the energy decay curve ``EDC(t) = 10 log10(sum_{u >= t} h[u]^2 / sum_u h[u]^2)``.
- :func:`reverberation_time` (T60 from a least-squares line through the EDC between -5 dB and
  ``-5 - decay_db``, extrapolated to -60 dB: pyroomacoustics' ``measure_rt60`` procedure),
  :func:`early_decay_time` (EDT: the line between 0 and -10 dB, times 6),
  :func:`clarity` (C50 in dB), :func:`definition` (D50), :func:`direct_to_reverberant_ratio` (DRR);
  :func:`acoustic_metrics` returns all five.

References:
    M. R. Schroeder. "New method of measuring reverberation time." JASA 37, 1965.
    ISO 3382-1:2009, Acoustics: measurement of room acoustic parameters.
    R. Yamamoto, E. Song, J.-M. Kim. "Parallel WaveGAN." ICASSP 2020 (multi-resolution STFT loss).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxcore._util import as_float_array, check_finite, check_int, check_ndim, check_scalar, expected

__all__ = ["AcousticMetrics", "acoustic_metrics", "clarity", "definition", "direct_to_reverberant_ratio",
           "early_decay_time", "fft_convolve", "highpass", "multi_resolution_stft_loss", "reverberation_time",
           "schroeder_decay", "stft_error", "stft_magnitude"]

DEFAULT_RESOLUTIONS = ((256, 64), (128, 32), (64, 16))


def _fft_len(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@jax.jit
def _convolve(x, h):
    n = x.shape[-1] + h.shape[-1] - 1
    nfft = _fft_len(n)
    y = jnp.fft.irfft(jnp.fft.rfft(x, nfft) * jnp.fft.rfft(h, nfft), nfft)
    return y[..., :n].astype(jnp.result_type(x, h))


def fft_convolve(x: Float[Array, "... T"], h: Float[Array, "... N"]) -> Float[Array, "... T+N-1"]:
    """Full linear convolution of ``x`` with ``h`` on the last axis (leading axes broadcast).

    Args:
        x: ``[..., T]`` signal (e.g. a probe).
        h: ``[..., N]`` impulse response.

    Returns:
        ``[..., T + N - 1]`` ``(x * h)[t] = sum_k x[t - k] h[k]``.

    Raises:
        ValueError: a 0-d input.

    Examples:
        >>> import numpy as np
        >>> np.asarray(fft_convolve(np.array([1.0, 2.0]), np.array([1.0, 0.0, -1.0]))).round(6).tolist()
        [1.0, 2.0, -1.0, -2.0]
    """
    x = as_float_array(x, "x")
    h = as_float_array(h, "h")
    if x.ndim == 0 or h.ndim == 0:
        raise ValueError(expected("x", "arrays with a time axis", f"shapes {x.shape}, {h.shape}", raw=True))
    return _convolve(x, h)


@jax.jit
def _highpass(h, fs, cutoff):
    n = h.shape[-1]
    nfft = _fft_len(2 * n)
    f = jnp.fft.rfftfreq(nfft, 1 / fs)
    q = (f / cutoff) ** 4
    return jnp.fft.irfft(jnp.fft.rfft(h, nfft) * (q / (1 + q)), nfft)[..., :n].astype(h.dtype)


def highpass(h: Float[Array, "... N"], fs: float, cutoff_hz: float) -> Float[Array, "... N"]:
    """Zero-phase high-pass filter: the gain of a 2nd-order Butterworth applied forward and backward.

    ``H(f) = (f/f_c)^4 / (1 + (f/f_c)^4)`` (the magnitude of ``filtfilt`` with a 2nd-order Butterworth
    high-pass, no phase), applied by FFT with 2x zero padding. It removes the slowly varying positive
    offset of image-source RIRs (every arrival is positive), which pyroomacoustics removes by default
    with ``sosfiltfilt`` at 10 Hz (``rir_hpf_enable``).

    Args:
        h: ``[..., N]`` signals.
        fs: sampling rate (Hz).
        cutoff_hz: the -6 dB frequency ``f_c`` (Hz, > 0).

    Returns:
        ``[..., N]`` filtered signals.

    Raises:
        ValueError: ``fs`` or ``cutoff_hz`` not positive.

    Examples:
        >>> x = jnp.ones(1000)
        >>> bool(jnp.abs(highpass(x, 8000.0, 30.0)[400:600]).max() < 0.01)
        True
    """
    h = as_float_array(h, "h")
    check_ndim(h, "h", tuple(range(1, 8)), "an array with a time axis")
    fs = check_scalar(fs, "fs", positive=True)
    cutoff = check_scalar(cutoff_hz, "cutoff_hz", positive=True)
    return _highpass(h, fs, cutoff)


def _stft(x, n_fft, hop):
    pad = n_fft // 2
    xp = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(pad, pad)])
    num = 1 + (xp.shape[-1] - n_fft) // hop
    idx = jnp.arange(num)[:, None] * hop + jnp.arange(n_fft)[None, :]
    win = 0.5 - 0.5 * jnp.cos(2 * jnp.pi * jnp.arange(n_fft) / n_fft)
    return jnp.abs(jnp.fft.rfft(xp[..., idx] * win.astype(x.dtype), axis=-1))


@functools.partial(jax.jit, static_argnames=("n_fft", "hop"))
def _stft_program(x, n_fft, hop):
    return _stft(x, n_fft, hop)


def stft_magnitude(x: Float[Array, "... T"], n_fft: int = 256, hop: int = 64) -> Float[Array, "... F K"]:
    """Magnitude STFT with a periodic Hann window, frames centred (zero padding of ``n_fft // 2``).

    Args:
        x: ``[..., T]`` signal.
        n_fft: frame length (static).
        hop: frame step (static).

    Returns:
        ``[..., 1 + T // hop, n_fft // 2 + 1]`` magnitudes.

    Examples:
        >>> stft_magnitude(jnp.zeros(256), 64, 16).shape
        (17, 33)
    """
    n_fft = check_int(n_fft, "n_fft", minimum=2)
    hop = check_int(hop, "hop", minimum=1)
    x = as_float_array(x, "x")
    check_ndim(x, "x", tuple(range(1, 8)), "an array with a time axis")
    return _stft_program(x, n_fft, hop)


@functools.partial(jax.jit, static_argnames=("resolutions",))
def _mrstft(pred, target, resolutions):
    total = 0.0
    for n_fft, hop in resolutions:
        p = _stft(pred, n_fft, hop)
        t = _stft(target, n_fft, hop)
        sc = jnp.sqrt(jnp.sum((t - p) ** 2, (-2, -1))) / (jnp.sqrt(jnp.sum(t**2, (-2, -1))) + 1e-12)
        mag = jnp.mean(jnp.abs(jnp.log(t + 1e-7) - jnp.log(p + 1e-7)), (-2, -1))
        total = total + sc + mag
    return total / len(resolutions)


def multi_resolution_stft_loss(
    pred: Float[Array, "... T"], target: Float[Array, "... T"], resolutions=DEFAULT_RESOLUTIONS
) -> Float[Array, "..."]:
    """Multi-resolution STFT loss: the mean over resolutions of spectral convergence plus log-magnitude L1.

    ``L = mean_r [ ||S_r(t) - S_r(p)||_F / ||S_r(t)||_F + mean |log(S_r(t) + eps) - log(S_r(p) + eps)| ]``
    with ``S_r`` the magnitude STFT at resolution ``r = (n_fft, hop)`` and ``eps = 1e-7``.

    Args:
        pred, target: ``[..., T]`` signals of the same shape.
        resolutions: tuple of ``(n_fft, hop)`` pairs (static).

    Returns:
        ``[...]`` the loss per signal (0 iff equal spectrograms).

    Raises:
        ValueError: shapes differ.

    References:
        Yamamoto, Song, Kim. "Parallel WaveGAN." ICASSP 2020, Eq. 4-6.

    Examples:
        >>> x = jnp.sin(jnp.arange(512) * 0.3)
        >>> float(multi_resolution_stft_loss(x, x))
        0.0
    """
    pred = as_float_array(pred, "pred")
    target = as_float_array(target, "target")
    if pred.shape != target.shape or pred.ndim == 0:
        raise ValueError(expected("pred", f"the shape of target {target.shape}", f"shape {pred.shape}", raw=True))
    res = tuple((check_int(a, "resolutions"), check_int(b, "resolutions")) for a, b in resolutions)
    return _mrstft(pred, target, res)


@functools.partial(jax.jit, static_argnames=("n_fft", "hop"))
def _stft_err(pred, target, n_fft, hop):
    p = _stft(pred, n_fft, hop)
    t = _stft(target, n_fft, hop)
    eps = 1e-4 * jnp.max(t, axis=(-2, -1), keepdims=True) + 1e-30
    return jnp.mean(jnp.abs(jnp.log10(p + eps) - jnp.log10(t + eps)), (-2, -1))


def stft_error(pred: Float[Array, "... N"], target: Float[Array, "... N"], n_fft: int = 128,
               hop: int = 32) -> Float[Array, "..."]:
    """Mean absolute log10-magnitude STFT difference (an RIR evaluation metric, phase-blind).

    ``mean |log10(|P| + eps) - log10(|T| + eps)|`` with ``eps = 1e-4 max |T|`` (80 dB below the
    target's peak bin), so a silent prediction scores finite.

    Args:
        pred, target: ``[..., N]`` RIRs of the same shape.
        n_fft, hop: STFT frame length and step (static).

    Returns:
        ``[...]`` the error per RIR (0 iff equal magnitudes).

    Examples:
        >>> import jax
        >>> x = jnp.exp(-jnp.arange(400) / 100.0) * jax.random.normal(jax.random.key(0), (400,))
        >>> round(float(stft_error(x, x)), 6), round(float(stft_error(0 * x, x)), 2)
        (0.0, 2.94)
    """
    pred = as_float_array(pred, "pred")
    target = as_float_array(target, "target")
    if pred.shape != target.shape or pred.ndim == 0:
        raise ValueError(expected("pred", f"the shape of target {target.shape}", f"shape {pred.shape}", raw=True))
    return _stft_err(pred, target, check_int(n_fft, "n_fft", minimum=2), check_int(hop, "hop", minimum=1))


def _edc(h):
    e = jnp.cumsum(jnp.flip(h**2, -1), -1)
    e = jnp.flip(e, -1)
    tiny = jnp.finfo(h.dtype).tiny
    return 10 * jnp.log10(jnp.maximum(e, tiny) / jnp.maximum(e[..., :1], tiny)), e > 0


@jax.jit
def _edc_program(h):
    return _edc(h)[0]


def schroeder_decay(h: Float[Array, "... N"]) -> Float[Array, "... N"]:
    """Schroeder's backward-integrated energy decay curve in dB, 0 at the start.

    ``EDC[t] = 10 log10( sum_{u >= t} h[u]^2 / sum_u h[u]^2 )`` (the floor of the dtype where the
    remaining energy is 0).

    Args:
        h: ``[..., N]`` impulse responses.

    Returns:
        ``[..., N]`` non-increasing decay curves (dB).

    References:
        Schroeder, JASA 1965.

    Examples:
        >>> np_h = jnp.array([1.0, 1.0, 0.0, 0.0])
        >>> schroeder_decay(np_h).round(3).tolist()[:2]
        [0.0, -3.01]
    """
    h = as_float_array(h, "h")
    check_ndim(h, "h", tuple(range(1, 8)), "an array with a time axis")
    return _edc_program(h)


def _line_slope(t, y, mask):
    w = mask.astype(y.dtype)
    n = jnp.maximum(jnp.sum(w, -1), 1)
    tm = jnp.sum(w * t, -1) / n
    ym = jnp.sum(w * y, -1) / n
    cov = jnp.sum(w * (t - tm[..., None]) * (y - ym[..., None]), -1)
    var = jnp.sum(w * (t - tm[..., None]) ** 2, -1)
    return cov / jnp.where(var > 0, var, 1)


def _first(cond, n):
    """Index of the first True on the last axis (``n`` if none)."""
    idx = jnp.arange(cond.shape[-1])
    return jnp.min(jnp.where(cond, idx, n), -1)


def _t60(h, fs, decay_db):
    edb, valid = _edc(h)
    n = h.shape[-1]
    idx = jnp.arange(n)
    t = idx / fs
    lowest = -jnp.min(jnp.where(valid, edb, 0.0), -1)
    decay = jnp.where(lowest - 5 < decay_db, lowest, decay_db)
    i5 = _first((edb < -5.0) & valid, n)
    e5 = jnp.take_along_axis(edb, jnp.minimum(i5, n - 1)[..., None], -1)[..., 0]
    idecay = _first((edb < (e5 - decay)[..., None]) & valid, n)
    nvalid = jnp.sum(valid, -1)
    idecay = jnp.minimum(idecay, nvalid)
    mask = (idx >= i5[..., None]) & (idx < idecay[..., None])
    slope = _line_slope(t, edb, mask)
    return jnp.where(i5 < n, -60.0 / slope, 0.0)


def _edt(h, fs):
    edb, valid = _edc(h)
    n = h.shape[-1]
    idx = jnp.arange(n)
    iend = jnp.maximum(_first((edb < -10.0) & valid, n), 2)
    slope = _line_slope(idx / fs, edb, idx < iend[..., None])
    return -60.0 / slope


def _energy_split(h, fs, ms, window):
    e = h**2
    onset = jnp.argmax(jnp.abs(h), -1)
    idx = jnp.arange(h.shape[-1])
    if window:  # direct: |m - onset| <= ms
        inner = jnp.abs(idx - onset[..., None]) <= jnp.round(ms * 1e-3 * fs)
    else:       # early: m < onset + ms
        inner = idx < onset[..., None] + jnp.round(ms * 1e-3 * fs)
    a = jnp.sum(jnp.where(inner, e, 0), -1)
    return a, jnp.sum(e, -1) - a


@jax.jit
def _metrics(h, fs, decay_db):
    early, late = _energy_split(h, fs, 50.0, False)
    direct, rest = _energy_split(h, fs, 2.5, True)
    tiny = jnp.finfo(h.dtype).tiny
    return AcousticMetrics(
        t60=_t60(h, fs, decay_db), edt=_edt(h, fs),
        c50=10 * jnp.log10(jnp.maximum(early, tiny) / jnp.maximum(late, tiny)),
        d50=early / jnp.maximum(early + late, tiny),
        drr=10 * jnp.log10(jnp.maximum(direct, tiny) / jnp.maximum(rest, tiny)))


class AcousticMetrics(NamedTuple):
    """Room-acoustic parameters of impulse responses (each ``[...]``).

    Attributes:
        t60: reverberation time (s), line fit from -5 dB to ``-5 - decay_db`` extrapolated to -60 dB.
        edt: early decay time (s): the line fit from 0 to -10 dB, extrapolated to -60 dB.
        c50: clarity (dB): energy before onset + 50 ms over energy after.
        d50: definition in [0, 1]: energy before onset + 50 ms over the total.
        drr: direct-to-reverberant ratio (dB): energy within 2.5 ms of the onset over the rest.
    """

    t60: Float[Array, "..."]
    edt: Float[Array, "..."]
    c50: Float[Array, "..."]
    d50: Float[Array, "..."]
    drr: Float[Array, "..."]


def acoustic_metrics(h: Float[Array, "... N"], fs: float, *, decay_db: float = 30.0) -> AcousticMetrics:
    """T60, EDT, C50, D50 and DRR of impulse responses (the onset is the peak ``argmax |h|``).

    Args:
        h: ``[..., N]`` impulse responses.
        fs: sampling rate in Hz.
        decay_db: the decay range of the T60 line fit (30 gives T30, pyroomacoustics' 60 the full
            range; shortened to the available range, as pyroomacoustics does).

    Returns:
        :class:`AcousticMetrics` of ``[...]`` arrays.

    Raises:
        ValueError: ``fs`` or ``decay_db`` not positive, a NaN/inf sample.

    References:
        ISO 3382-1:2009; Schroeder, JASA 1965.

    Examples:
        >>> t = jnp.arange(8000) / 8000.0
        >>> h = jnp.exp(-6.9078 * t / 0.5) * jnp.cos(2000.0 * t)  # a 60 dB decay in 0.5 s
        >>> m = acoustic_metrics(h, 8000.0)
        >>> round(float(m.t60), 2), round(float(m.edt), 2)
        (0.5, 0.5)
    """
    h = as_float_array(h, "h")
    check_ndim(h, "h", tuple(range(1, 8)), "an array with a time axis")
    check_finite(h, "h")
    fs = check_scalar(fs, "fs", positive=True)
    decay_db = check_scalar(decay_db, "decay_db", positive=True)
    return _metrics(h, fs, decay_db)


def reverberation_time(h: Float[Array, "... N"], fs: float, *, decay_db: float = 30.0) -> Float[Array, "..."]:
    """T60 (s) by Schroeder integration and a line fit (pyroomacoustics' ``measure_rt60`` procedure).

    See :func:`acoustic_metrics` (its ``t60``).

    Examples:
        >>> t = jnp.arange(8000) / 8000.0
        >>> round(float(reverberation_time(jnp.exp(-6.9078 * t / 0.3) * jnp.cos(900.0 * t), 8000.0)), 2)
        0.3
    """
    return acoustic_metrics(h, fs, decay_db=decay_db).t60


def early_decay_time(h: Float[Array, "... N"], fs: float) -> Float[Array, "..."]:
    """EDT (s): the line fit to the Schroeder curve from 0 to -10 dB, extrapolated to -60 dB.

    Examples:
        >>> t = jnp.arange(8000) / 8000.0
        >>> round(float(early_decay_time(jnp.exp(-6.9078 * t / 0.3) * jnp.cos(900.0 * t), 8000.0)), 2)
        0.3
    """
    return acoustic_metrics(h, fs).edt


def clarity(h: Float[Array, "... N"], fs: float) -> Float[Array, "..."]:
    """C50 (dB): ``10 log10(E[onset, onset + 50 ms) / E[onset + 50 ms, end))``.

    Examples:
        >>> h = jnp.zeros(1600).at[10].set(1.0).at[1000].set(1.0)
        >>> float(clarity(h, 8000.0))
        0.0
    """
    return acoustic_metrics(h, fs).c50


def definition(h: Float[Array, "... N"], fs: float) -> Float[Array, "..."]:
    """D50 in [0, 1]: the fraction of the energy in the first 50 ms after the onset.

    Examples:
        >>> h = jnp.zeros(1600).at[10].set(1.0).at[1000].set(1.0)
        >>> float(definition(h, 8000.0))
        0.5
    """
    return acoustic_metrics(h, fs).d50


def direct_to_reverberant_ratio(h: Float[Array, "... N"], fs: float) -> Float[Array, "..."]:
    """DRR (dB): energy within 2.5 ms of the onset over the rest.

    Examples:
        >>> h = jnp.zeros(1600).at[10].set(2.0).at[1000].set(1.0)
        >>> round(float(direct_to_reverberant_ratio(h, 8000.0)), 3)
        6.021
    """
    return acoustic_metrics(h, fs).drr
