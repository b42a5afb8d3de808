"""Synthetic probing data: two agents at random positions in a simulated shoebox room.

One agent emits a known probe (white Gaussian noise), the other records ``probe * h + noise`` with
``h`` the image-source RIR of the pair (:func:`~jaxcore.acoustics.image_source_rir`) and white noise
at a stated SNR (per recording, relative to the power of ``probe * h``). The RIRs are returned for
evaluation only; a self-supervised learner sees ``probe`` and ``recordings``.
:func:`wiener_deconvolve` estimates RIRs back from the recordings (what the interpolation baselines
are given, so that every method sees the same information).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import as_float_array, check_int, check_key, check_scalar, check_shape, expected

from .room import Room, image_source_rir
from .signals import fft_convolve, highpass

__all__ = ["ProbeData", "random_pairs", "simulate_probing", "wiener_deconvolve"]


class ProbeData(NamedTuple):
    """Probing recordings of ``P`` source-receiver pairs in one room.

    Attributes:
        sources, receivers: ``[P, 3]`` positions (m).
        probe: ``[T]`` the emitted signal.
        recordings: ``[P, T + N - 1]`` ``probe * rir + noise``.
        rirs: ``[P, N]`` the true RIRs (for evaluation only).
        snr_db: the recording SNR (dB).
    """

    sources: Float[Array, "P 3"]
    receivers: Float[Array, "P 3"]
    probe: Float[Array, " T"]
    recordings: Float[Array, "P L"]
    rirs: Float[Array, "P N"]
    snr_db: float


def random_pairs(key: PRNGKeyArray, room: Room, num_pairs: int, *, margin: float = 0.3,
                 min_distance: float = 0.5) -> tuple[Float[Array, "P 3"], Float[Array, "P 3"]]:
    """Uniform source and receiver positions at least ``margin`` from the walls and ``min_distance`` apart.

    Pairs closer than ``min_distance`` are redrawn (a fixed number of rounds; the distance is then
    enforced by moving the receiver along the pair's axis).

    Args:
        key: PRNG key.
        room: the :class:`Room`.
        num_pairs: ``P``.
        margin: distance to the walls (m).
        min_distance: minimum source-receiver distance (m).

    Returns:
        ``(sources, receivers)``, each ``[P, 3]``.

    Raises:
        ValueError: the margin leaves no room.

    Examples:
        >>> import jax
        >>> s, r = random_pairs(jax.random.key(0), Room([5.0, 4.0, 3.0], absorption=0.3), 8)
        >>> s.shape, bool(jnp.all(jnp.linalg.norm(s - r, axis=-1) >= 0.5))
        ((8, 3), True)
    """
    key = check_key(key)
    num_pairs = check_int(num_pairs, "num_pairs", minimum=1)
    margin = check_scalar(margin, "margin", nonnegative=True)
    min_distance = check_scalar(min_distance, "min_distance", nonnegative=True)
    lo = margin
    hi = room.dims - margin
    if not bool(jnp.all(hi > lo)):
        raise ValueError(expected("margin", "a margin smaller than half of each room size", margin))

    def draw(k):
        ks, kr = jax.random.split(k)
        u = jax.random.uniform(ks, (num_pairs, 3), room.dims.dtype)
        v = jax.random.uniform(kr, (num_pairs, 3), room.dims.dtype)
        return lo + u * (hi - lo), lo + v * (hi - lo)

    s, r = draw(key)
    for i in range(20):
        bad = jnp.linalg.norm(s - r, axis=-1) < min_distance
        if not bool(jnp.any(bad)):
            break
        s2, r2 = draw(jax.random.fold_in(key, i + 1))
        s = jnp.where(bad[:, None], s2, s)
        r = jnp.where(bad[:, None], r2, r)
    return s, r


def simulate_probing(key: PRNGKeyArray, room: Room, sources, receivers, *, order: int, num_samples: int,
                     probe_length: int = 1024, snr_db: float = 30.0,
                     highpass_hz: float | None = None) -> ProbeData:
    """Record a white-noise probe emitted at each source at its receiver, through the ISM RIR, plus noise.

    ``recording = probe * h + n`` with ``probe ~ N(0, 1)^T`` (one probe for all pairs) and white
    Gaussian ``n`` of power ``mean((probe * h)^2) 10^(-snr_db / 10)`` per recording.

    Args:
        key: PRNG key.
        room: the :class:`Room`.
        sources, receivers: ``[P, 3]`` positions (m).
        order: ISM reflection order.
        num_samples: RIR length ``N``.
        probe_length: ``T``.
        snr_db: recording SNR (dB).
        highpass_hz: if set, the RIRs are high-passed first (:func:`~jaxcore.acoustics.highpass`): the
            image-source method's positive offset is an artefact of the model, absent from real rooms.

    Returns:
        :class:`ProbeData`.

    Examples:
        >>> import jax
        >>> room = Room([5.0, 4.0, 3.0], absorption=0.3, fs=8000.0)
        >>> s, r = random_pairs(jax.random.key(0), room, 4)
        >>> d = simulate_probing(jax.random.key(1), room, s, r, order=4, num_samples=256, probe_length=128)
        >>> d.recordings.shape, d.rirs.shape
        ((4, 383), (4, 256))
    """
    key = check_key(key)
    probe_length = check_int(probe_length, "probe_length", minimum=1)
    snr_db = check_scalar(snr_db, "snr_db")
    rirs = image_source_rir(room, sources, receivers, order=order, num_samples=num_samples)
    if highpass_hz is not None:
        rirs = highpass(rirs, room.fs, highpass_hz)
    kp, kn = jax.random.split(key)
    probe = jax.random.normal(kp, (probe_length,), rirs.dtype)
    clean = fft_convolve(probe, rirs)
    power = jnp.mean(clean**2, -1, keepdims=True)
    noise = jax.random.normal(kn, clean.shape, rirs.dtype) * jnp.sqrt(power * 10 ** (-snr_db / 10))
    return ProbeData(jnp.asarray(sources, rirs.dtype), jnp.asarray(receivers, rirs.dtype), probe, clean + noise,
                     rirs, snr_db)


@jax.jit
def _wiener(recordings, probe, reg):
    size = recordings.shape[-1]
    nfft = 1 << (size - 1).bit_length()
    y = jnp.fft.rfft(recordings, nfft)
    p = jnp.fft.rfft(probe, nfft)
    h = jnp.fft.irfft(y * jnp.conj(p) / (jnp.abs(p) ** 2 + reg), nfft)
    return h


def wiener_deconvolve(recordings: Float[Array, "P L"], probe: Float[Array, " T"], num_samples: int, *,
                      snr_db: float = 30.0) -> Float[Array, "P N"]:
    """Estimate RIRs from recordings of a known probe: ``H = Y conj(P) / (|P|^2 + lambda)``.

    ``lambda = mean |P|^2 10^(-snr_db/10)`` (the noise-to-signal ratio of a white RIR).

    Args:
        recordings: ``[P, L]``.
        probe: ``[T]``.
        num_samples: ``N`` taps kept.
        snr_db: the assumed SNR.

    Returns:
        ``[P, N]`` RIR estimates.

    Raises:
        ValueError: ``num_samples`` longer than the recordings.

    Examples:
        >>> p = jnp.array([1.0, -0.5, 0.25])
        >>> y = fft_convolve(p, jnp.array([0.0, 1.0, 0.5]))
        >>> wiener_deconvolve(y[None], p, 3, snr_db=120.0).round(4).tolist()
        [[0.0, 1.0, 0.5]]
    """
    recordings = as_float_array(recordings, "recordings")
    probe = as_float_array(probe, "probe", dtype=recordings.dtype)
    check_shape(recordings, "recordings", (None, None), "a [P, L] array")
    check_shape(probe, "probe", (None,), "a [T] array")
    num_samples = check_int(num_samples, "num_samples", minimum=1, maximum=recordings.shape[-1])
    snr_db = check_scalar(snr_db, "snr_db")
    nfft = 1 << (recordings.shape[-1] - 1).bit_length()
    reg = jnp.mean(jnp.abs(jnp.fft.rfft(probe, nfft)) ** 2) * 10 ** (-snr_db / 10)
    return _wiener(recordings, probe, reg)[:, :num_samples]
