"""A differentiable shoebox image-source method (ISM): room impulse responses from geometry.

The sound field of a point source in a rectangular room with rigid, frequency-independent walls is
the free-field Green's function summed over the source's mirror images (Allen & Berkley 1979). The
image with reflection indices ``n = (n_x, n_y, n_z)`` (integers; ``|n_x| + |n_y| + |n_z|`` is its
reflection order) sits at

    x_n = n_x L_x + (L_x - s_x if n_x odd else s_x)       (and the same along y, z)

and arrives at receiver ``r`` after ``d_n = |x_n - r| / c`` seconds with amplitude

    a_n = prod_w beta_w^{k_w(n)} / (4 pi |x_n - r|)

where ``beta_w`` is wall ``w``'s pressure reflection coefficient and ``k_w(n)`` the number of times
the path hits it (``n_x > 0``: ``floor(n_x/2)`` times the wall x=0 and ``ceil(n_x/2)`` times x=L_x;
mirrored for ``n_x < 0``). Every image of order <= ``order`` is kept (the L1 ball of the integer
lattice: ``(2N+1)(2N^2+2N+3)/3`` images, 1,561 at order 10, 11,521 at order 20); all are visible in a
shoebox. Each arrival is rendered as a fractional delay by a windowed sinc:

- ``mode="lut"`` (default, fast): pyroomacoustics' filter: 81 taps ``hann[k] sinc(k - 40 - frac)``
  anchored on the integer sample, the sinc read by linear interpolation from a table of step
  ``1/lut_granularity`` (built in float32 exactly as pyroomacoustics' C++ builds it). Because the
  interpolation is linear in the table coordinate, the sum over images is a sum over the
  ``lut_granularity + 2`` table nodes of (node weights scattered on the sample grid) convolved with
  the node's fixed 81-tap filter: two scatters per image and one FFT convolution per node, instead
  of 81 scattered taps per image.
- ``mode="sinc"``: the same window with the exact sinc (81 scattered taps per image): smooth
  gradients in the positions.
- ``mode="habets"``: rir-generator's filter (Habets 2006): ``Tw = 2 round(0.004 fs)`` taps of a Hann
  window centred on the exact arrival times ``sinc``.

pyroomacoustics scales an arrival by ``1/d`` (no ``4 pi``); this kernel, like rir-generator, by
``1/(4 pi d)``. With the ``lut``/``sinc`` modes the output is delayed by ``latency`` samples (default
40, pyroomacoustics' convention, so that the filter is causal): sample ``m`` is time
``(m - latency) / fs``.

References:
    J. B. Allen, D. A. Berkley. "Image method for efficiently simulating small-room acoustics."
    JASA 65(4), 1979.
    R. Scheibler, E. Bezzam, I. Dokmanic. "Pyroomacoustics: a Python package for audio room
    simulation and array processing algorithms." ICASSP 2018.
    E. A. P. Habets. "Room impulse response generator." Technical report, TU Eindhoven, 2006.
"""

from __future__ import annotations

import functools
import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxcore._util import as_float_array, check_choice, check_int, check_scalar, check_shape, error_if, \
    expected, is_concrete

__all__ = ["Room", "eyring_t60", "image_source_rir", "num_images", "sabine_t60"]

Mode = Literal["lut", "sinc", "habets"]
_MODES = ("lut", "sinc", "habets")
WALLS = ("x=0", "x=Lx", "y=0", "y=Ly", "z=0", "z=Lz")


class Room(eqx.Module):
    """A shoebox room: dimensions, six wall reflection coefficients, sampling rate, speed of sound.

    ``reflection`` holds the pressure reflection coefficients ``beta`` of the walls in the order
    x=0, x=Lx, y=0, y=Ly, z=0, z=Lz; the energy absorption is ``alpha = 1 - beta^2`` (the
    pyroomacoustics / Sabine convention). Build with exactly one of ``reflection`` or ``absorption``
    (a scalar applies to all six walls). Arrays may be traced (gradients flow to ``dims`` and
    ``reflection``) and batched under ``vmap``.

    Args:
        dims: ``[3]`` room size in metres (> 0).
        reflection: ``[6]`` or scalar, in [0, 1].
        absorption: ``[6]`` or scalar energy absorption in [0, 1].
        fs: sampling rate in Hz (> 0, static).
        c: speed of sound in m/s (> 0, static; 343 as pyroomacoustics).

    Raises:
        ValueError: bad sizes, values out of range, or both/neither of reflection/absorption.
        TypeError: non-numeric input.

    Examples:
        >>> room = Room([6.0, 5.0, 3.0], absorption=0.2, fs=16000.0)
        >>> [round(float(b), 4) for b in room.reflection[:2]], room.fs
        ([0.8944, 0.8944], 16000.0)
    """

    dims: Float[Array, "3"]
    reflection: Float[Array, "6"]
    fs: float = eqx.field(static=True)
    c: float = eqx.field(static=True)

    def __init__(self, dims, reflection=None, *, absorption=None, fs: float = 16000.0, c: float = 343.0):
        self.fs = check_scalar(fs, "fs", positive=True)
        self.c = check_scalar(c, "c", positive=True)
        dims = as_float_array(dims, "dims")
        check_shape(dims, "dims", (3,), "a [3] array of room sizes in metres")
        if is_concrete(dims) and not np.all(np.isfinite(np.asarray(dims)) & (np.asarray(dims) > 0)):
            raise ValueError(expected("dims", "three finite sizes > 0 (metres)", dims))
        if (reflection is None) == (absorption is None):
            raise ValueError(expected("reflection", "exactly one of reflection= or absorption=",
                                      "both" if reflection is not None else "neither", raw=True))
        name = "reflection" if reflection is not None else "absorption"
        v = as_float_array(reflection if reflection is not None else absorption, name, dtype=dims.dtype)
        if v.ndim == 0:
            v = jnp.broadcast_to(v, (6,))
        check_shape(v, name, (6,), f"a scalar or a [6] array (walls {', '.join(WALLS)})")
        if is_concrete(v):
            a = np.asarray(v)
            if not np.all((a >= 0) & (a <= 1)):
                raise ValueError(expected(name, "values in [0, 1]", v))
        self.dims = dims
        self.reflection = v if reflection is not None else jnp.sqrt(1.0 - v)

    @property
    def absorption(self) -> Float[Array, "6"]:
        """``[6]`` energy absorption ``1 - beta^2`` of the walls."""
        return 1.0 - self.reflection**2

    @property
    def volume(self) -> Float[Array, ""]:
        """Volume in cubic metres."""
        return jnp.prod(self.dims)

    @property
    def wall_areas(self) -> Float[Array, "6"]:
        """``[6]`` wall areas in square metres (walls in :class:`Room` order)."""
        lx, ly, lz = self.dims[0], self.dims[1], self.dims[2]
        return jnp.stack([ly * lz, ly * lz, lx * lz, lx * lz, lx * ly, lx * ly])


def sabine_t60(room: Room) -> Float[Array, ""]:
    """Sabine's reverberation time ``T60 = 24 ln(10) V / (c sum_w S_w alpha_w)`` in seconds.

    Args:
        room: a :class:`Room`.

    Returns:
        scalar T60 (s); ``inf`` for a room without absorption.

    References:
        W. C. Sabine. "Collected papers on acoustics." 1922.

    Examples:
        >>> round(float(sabine_t60(Room([6.0, 5.0, 3.0], absorption=0.2))), 3)
        0.575
    """
    return 24.0 * math.log(10.0) * room.volume / (room.c * jnp.sum(room.wall_areas * room.absorption))


def eyring_t60(room: Room) -> Float[Array, ""]:
    """Eyring's reverberation time ``T60 = 24 ln(10) V / (-c S ln(1 - mean alpha))`` in seconds.

    ``mean alpha`` is the area-weighted mean absorption and ``S`` the total wall area.

    Args:
        room: a :class:`Room`.

    Returns:
        scalar T60 (s).

    References:
        C. F. Eyring. "Reverberation time in 'dead' rooms." JASA 1, 1930.

    Examples:
        >>> round(float(eyring_t60(Room([6.0, 5.0, 3.0], absorption=0.2))), 3)
        0.516
    """
    s = room.wall_areas
    mean = jnp.sum(s * room.absorption) / jnp.sum(s)
    return 24.0 * math.log(10.0) * room.volume / (-room.c * jnp.sum(s) * jnp.log1p(-mean))


def num_images(order: int) -> int:
    """Number of image sources of reflection order <= ``order`` in a shoebox: ``(2N+1)(2N^2+2N+3)/3``.

    Examples:
        >>> num_images(10), num_images(20)
        (1561, 11521)
    """
    n = check_int(order, "order", minimum=0)
    return (2 * n + 1) * (2 * n * n + 2 * n + 3) // 3


@functools.lru_cache(maxsize=32)
def _lattice(order: int) -> tuple[np.ndarray, np.ndarray]:
    """Reflection indices ``[I, 3]`` (L1 ball) and wall hit counts ``[I, 6]``."""
    r = np.arange(-order, order + 1)
    n = np.stack(np.meshgrid(r, r, r, indexing="ij"), -1).reshape(-1, 3)
    n = n[np.abs(n).sum(1) <= order]
    low = np.where(n > 0, n // 2, (1 - n) // 2)   # hits of the wall at 0
    high = np.where(n > 0, (n + 1) // 2, (-n) // 2)  # hits of the wall at L
    counts = np.stack([low[:, 0], high[:, 0], low[:, 1], high[:, 1], low[:, 2], high[:, 2]], 1)
    return n.astype(np.int32), counts.astype(np.int32)


@functools.lru_cache(maxsize=8)
def _pra_filters(num_taps: int, granularity: int) -> np.ndarray:
    """``[granularity + 2, num_taps]`` node filters ``hann[k] * lut[p + k g]`` (pyroomacoustics' table).

    The table is built as pyroomacoustics' C++ builds it in float32: ``n`` starts at ``-(K-1)/2 - 1``
    and is incremented by ``1/g`` in float32 (the accumulated rounding is kept on purpose).
    """
    half = (num_taps - 1) // 2
    size = (num_taps + 2) * granularity
    n = np.float32(-half - 1)
    delta = np.float32(1.0) / np.float32(granularity)
    lut = np.empty(size, np.float64)
    for i in range(size):
        x = float(n)
        lut[i] = 1.0 if x == 0.0 else math.sin(math.pi * x) / (math.pi * x)
        n = np.float32(n + delta)
    k = np.arange(num_taps)
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * k / (num_taps - 1))
    p = np.arange(granularity + 2)
    return hann[None, :] * lut[p[:, None] + k[None, :] * granularity]


def _fast_len(n: int) -> int:
    """Smallest 2^a 3^b 5^c >= n (an FFT size the backends do fast)."""
    best = 1 << max(0, (n - 1).bit_length())
    p5 = 1
    while p5 < 2 * n:
        p35 = p5
        while p35 < 2 * n:
            m = p35
            while m < n:
                m *= 2
            best = min(best, m)
            p35 *= 3
        p5 *= 5
    return best


def _arrivals(room: Room, src, rcv, order: int):
    """Distances ``[I]`` (m) and reflection gains ``[I]`` of every image for one pair."""
    n, counts = _lattice(order)
    dt = room.dims.dtype
    nf = jnp.asarray(n, dt)
    odd = jnp.asarray(n % 2 == 1)
    # image minus receiver, written so that swapping source and receiver gives the same distances
    # bit for bit (odd: (n+1) L - (s + r); even: n L + (s - r), whose negation is the image -n's)
    diff = jnp.where(odd, (nf + 1) * room.dims - (src + rcv), nf * room.dims + (src - rcv))
    dist = jnp.sqrt(jnp.sum(diff**2, axis=-1))
    beta = room.reflection.astype(dt)
    powers = [jnp.ones_like(beta)]
    for _ in range(order):
        powers.append(powers[-1] * beta)
    table = jnp.stack(powers, axis=1)  # [6, order + 1]
    gain = table[0, counts[:, 0]]
    for w in range(1, 6):
        gain = gain * table[w, counts[:, w]]
    return dist, gain


def _rir_lut(room, src, rcv, order, num_samples, num_taps, granularity, latency):
    dist, gain = _arrivals(room, src, rcv, order)
    dt = dist.dtype
    amp = gain / (4 * jnp.pi * dist)
    tau = dist * (room.fs / room.c) + latency
    ip = jnp.floor(tau)
    fp = tau - ip
    u = (1.0 - fp) * granularity
    p = jnp.floor(u)
    xo = u - p
    half = (num_taps - 1) // 2
    length = num_samples + half
    nodes = granularity + 2
    idx = jnp.where(ip < length, ip, length).astype(jnp.int32)
    p = jnp.clip(p.astype(jnp.int32), 0, granularity)
    grid = jnp.zeros((nodes, length), dt)
    grid = grid.at[p, idx].add(amp * (1.0 - xo), mode="drop")
    grid = grid.at[p + 1, idx].add(amp * xo, mode="drop")
    return grid


def _rir_direct(room, src, rcv, order, num_samples, mode, num_taps, latency):
    dist, gain = _arrivals(room, src, rcv, order)
    amp = gain / (4 * jnp.pi * dist)
    tau = dist * (room.fs / room.c) + latency
    ip = jnp.floor(tau)
    k = jnp.arange(num_taps)
    if mode == "sinc":
        half = (num_taps - 1) // 2
        m = ip[:, None] + (k - half)
        t = m - tau[:, None]
        win = 0.5 - 0.5 * jnp.cos(2 * jnp.pi * k / (num_taps - 1))
    else:  # habets
        m = ip[:, None] + (k - num_taps // 2 + 1)
        t = m - tau[:, None]
        win = 0.5 * (1.0 + jnp.cos(2 * jnp.pi * t / num_taps))
    vals = amp[:, None] * win * jnp.sinc(t)
    idx = jnp.where((m >= 0) & (m < num_samples), m, num_samples).astype(jnp.int32)
    return jnp.zeros((num_samples,), dist.dtype).at[idx.ravel()].add(vals.ravel(), mode="drop")


@eqx.filter_jit
def _rir_program(room, sources, receivers, order, num_samples, mode, num_taps, granularity, latency, check):
    if check:
        inside = lambda x: jnp.all((x > 0) & (x < room.dims)) & jnp.all(jnp.isfinite(x))  # noqa: E731
        sources = error_if(sources, ~inside(sources), "sources", "positions strictly inside the room")
        receivers = error_if(receivers, ~inside(receivers), "receivers", "positions strictly inside the room")
        gap = jnp.sqrt(jnp.sum((sources - receivers) ** 2, -1))
        sources = error_if(sources, jnp.any(gap <= 0), "sources", "a source distinct from its receiver")
    if mode != "lut":
        return jax.vmap(lambda s, r: _rir_direct(room, s, r, order, num_samples, mode, num_taps, latency))(
            sources, receivers)
    grids = jax.vmap(lambda s, r: _rir_lut(room, s, r, order, num_samples, num_taps, granularity, latency))(
        sources, receivers)  # [P, nodes, N + half]
    half = (num_taps - 1) // 2
    filters = jnp.asarray(_pra_filters(num_taps, granularity), grids.dtype)
    nfft = _fast_len(grids.shape[-1] + num_taps - 1)
    spec = jnp.einsum("pgf,gf->pf", jnp.fft.rfft(grids, nfft), jnp.fft.rfft(filters, nfft))
    return jnp.fft.irfft(spec, nfft)[:, half:half + num_samples].astype(grids.dtype)


def image_source_rir(
    room: Room,
    sources: Float[Array, "P 3"],
    receivers: Float[Array, "P 3"],
    *,
    order: int,
    num_samples: int,
    mode: Mode = "lut",
    num_taps: int | None = None,
    lut_granularity: int = 20,
    latency: int | None = None,
    check_positions: bool = True,
) -> Float[Array, "P num_samples"]:
    """Room impulse responses of ``P`` source-receiver pairs by the shoebox image-source method.

    ``h_p[m] = sum_{|n|_1 <= order} a_n(s_p, r_p) f(m - latency - fs d_n(s_p, r_p))`` with ``a_n`` the
    reflection gains over ``4 pi`` times the distance, ``d_n`` the arrival time and ``f`` the
    windowed-sinc fractional delay of ``mode`` (module docstring). Differentiable in ``room.dims``,
    ``room.reflection``, ``sources`` and ``receivers`` (``lut`` mode: the table interpolation is
    piecewise linear in the delay, its derivative piecewise constant; ``sinc``: smooth). Vmapped over
    pairs; vmap over rooms with ``jax.vmap`` (a batched :class:`Room`); shards over the pair axis.

    Args:
        room: the :class:`Room`.
        sources, receivers: ``[P, 3]`` (or ``[3]``) positions in metres, strictly inside the room.
        order: maximum reflection order (static, >= 0).
        num_samples: RIR length ``N`` in samples (static); arrivals after it are cut off.
        mode: ``"lut"`` | ``"sinc"`` | ``"habets"`` (module docstring).
        num_taps: filter length: 81 for ``lut``/``sinc`` (odd), ``2 round(0.004 fs)`` for ``habets``.
        lut_granularity: table points per sample (``lut`` mode; pyroomacoustics' default 20).
        latency: samples added to every delay: ``(num_taps - 1) // 2`` for ``lut``/``sinc``
            (pyroomacoustics), 0 for ``habets`` (rir-generator).
        check_positions: check (also under ``jit``) that the positions lie inside the room and a
            pair's source and receiver differ.

    Returns:
        ``[P, N]`` RIRs (``[N]`` for ``[3]`` positions), in the dtype of ``room.dims``.

    Raises:
        ValueError: positions outside the room, coincident pair, bad shapes, order/num_samples < 0,
            an even ``num_taps`` for ``lut``/``sinc``.
        TypeError: non-integer ``order`` / ``num_samples``.

    References:
        Allen & Berkley, JASA 1979; Scheibler et al., ICASSP 2018 (pyroomacoustics); Habets 2006.

    Examples:
        >>> import numpy as np
        >>> room = Room([6.0, 5.0, 3.0], absorption=0.3, fs=16000.0)
        >>> h = image_source_rir(room, [1.0, 1.0, 1.0], [4.0, 3.0, 1.5], order=0, num_samples=256)
        >>> r = np.sqrt(9 + 4 + 0.25)
        >>> int(np.argmax(h)) == round(16000 * r / 343 + 40), bool(abs(h.sum() - 1 / (4 * np.pi * r)) < 1e-3)
        (True, True)
    """
    mode = check_choice(mode, "mode", _MODES)
    order = check_int(order, "order", minimum=0, maximum=200)
    num_samples = check_int(num_samples, "num_samples", minimum=1)
    granularity = check_int(lut_granularity, "lut_granularity", minimum=1)
    if num_taps is None:
        num_taps = 2 * int(math.floor(0.004 * room.fs + 0.5)) if mode == "habets" else 81
    num_taps = check_int(num_taps, "num_taps", minimum=1)
    if mode != "habets" and num_taps % 2 == 0:
        raise ValueError(expected("num_taps", f"an odd filter length for mode {mode!r}", num_taps))
    if latency is None:
        latency = 0 if mode == "habets" else (num_taps - 1) // 2
    latency = check_int(latency, "latency", minimum=0)
    if not isinstance(room, Room):
        raise TypeError(expected("room", "a Room", type(room).__name__, raw=True))
    dt = room.dims.dtype
    src = as_float_array(sources, "sources", dtype=dt)
    rcv = as_float_array(receivers, "receivers", dtype=dt)
    single = src.ndim == 1 and rcv.ndim == 1
    if src.ndim == 1:
        src = src[None]
    if rcv.ndim == 1:
        rcv = rcv[None]
    check_shape(src, "sources", (None, 3), "a [P, 3] array of positions")
    check_shape(rcv, "receivers", (src.shape[0], 3), f"a [{src.shape[0]}, 3] array of positions (one per source)")
    check = bool(check_positions)
    if check and is_concrete(src, rcv, room.dims):
        dims = np.asarray(room.dims)
        for x, name in ((src, "sources"), (rcv, "receivers")):
            a = np.asarray(x)
            bad = ~(np.isfinite(a) & (a > 0) & (a < dims))
            if bad.any():
                i = tuple(int(j) for j in np.argwhere(bad)[0])
                raise ValueError(expected(name, f"positions strictly inside the room {dims.tolist()} m",
                                          f"{a[i[0]].tolist()} at index {i[0]}", raw=True))
        gap = np.linalg.norm(np.asarray(src) - np.asarray(rcv), axis=-1)
        if np.any(gap <= 0):
            raise ValueError(expected("sources", "a source distinct from its receiver",
                                      f"coincident positions at pair {int(np.argmin(gap))}", raw=True))
        check = False
    out = _rir_program(room, src, rcv, order, num_samples, mode, num_taps, granularity, latency, check)
    return out[0] if single else out
