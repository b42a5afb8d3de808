"""A neural acoustic field trained by probing: DeepNeRAP's principles (He et al., ICML 2024) as built here.

The paper learns a continuous field ``(source, receiver) -> RIR`` over a room, trained without RIR
ground truth from two agents, one emitting a known sound and one recording it, and designed from two
physical principles: reciprocity (swapping source and receiver leaves the RIR unchanged) and
globality (acoustic primitives are shared by the whole room). Its code is not public and its full
text was not available here; the construction below is designed from those two principles and the
abstract, and is this library's, not the paper's:

- Globality: a learned grid of features ``G in R^{g x g x g x C}`` spanning the room, read by
  trilinear interpolation at both positions (``G(s)``, ``G(r)``): every training pair updates the
  primitives near both of its ends, and every query reads the same grid.
- Position encoding ``e(x) = [x / L, sin/cos(2^k pi x / L)_{k < F}, G(x)]``.
- Reciprocity by construction: the network sees ``[e(s) + e(r), e(s) * e(r), phi(|s - r|)]``, a
  symmetric function of the pair (float addition and multiplication commute, so
  ``field(s, r) == field(r, s)`` bit for bit); ``reciprocal=False`` feeds ``[e(s), e(r), phi]``
  instead (an ablation of the same width).
- Output: a fixed-length RIR waveform (not an STFT) built by a physical decoder (see
  :class:`AcousticField`): the free-field direct arrival, known from the two positions, plus band-limited
  noise carriers shaped by an MLP-predicted log-envelope over time frames and frequency bands.
- Self-supervised training (:func:`train_field` with ``probe``): the probe convolved with the predicted
  RIR is compared with the recording through band energies of their STFTs (128-sample frames, hop 32,
  8 equal bands): ``L = mean |log(E(probe * h) + sigma_p^2) - log E(y)| + mean |log C(probe * h) - log C(y)|``
  with ``C`` the per-band backward cumulative sum of ``E`` (a Schroeder curve; it matches arithmetic
  energy, which ``C50`` and the decay times depend on) and ``sigma_p^2`` a learned white-noise level per
  recording (the recording model's noise: without it the field fits the noise floor and its T60 runs
  long). The RIR itself is never read. A multi-resolution STFT loss (``resolutions=``) and a waveform
  MSE (``waveform_weight=``) can be added. Without ``probe`` the same loss is applied to RIR targets
  directly (the supervised upper bound of the benchmark).

References:
    Y. He, A. Cherian, G. Wichern, A. Markham. "Deep Neural Room Acoustics Primitive." ICML 2024.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import Progress, as_float_array, check_finite, check_int, check_key, check_progress, \
    check_scalar, check_shape, expected
from jaxcore._util.minibatch import minibatch_draw

from .signals import DEFAULT_RESOLUTIONS, _convolve, _stft

__all__ = ["AcousticField", "FieldResult", "predict_rir", "train_field"]


def _trilinear(grid, u):
    """Read ``grid [g, g, g, C]`` at ``u in [0, 1]^3``."""
    g = grid.shape[0]
    x = jnp.clip(u, 0.0, 1.0) * (g - 1)
    i0 = jnp.clip(jnp.floor(x).astype(jnp.int32), 0, g - 2)
    f = x - i0
    out = 0.0
    for dx in (0, 1):
        for dy in (0, 1):
            for dz in (0, 1):
                w = (f[0] if dx else 1 - f[0]) * (f[1] if dy else 1 - f[1]) * (f[2] if dz else 1 - f[2])
                out = out + w * grid[i0[0] + dx, i0[1] + dy, i0[2] + dz]
    return out


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4))
def _init(key, grid_shape, sizes, carrier_shape, dtype):
    """All initial parameters from one uniform draw (one random program): grid ~ U(+-0.1 sqrt 3) (std 0.1),
    layers ~ U(+-1/sqrt(fan_in)) (equinox's rule), the last layer scaled by 0.1; and the band carriers."""
    shapes = [grid_shape, carrier_shape] + [s for a, b in zip(sizes[:-1], sizes[1:]) for s in ((a, b), (b,))]
    total = sum(int(np.prod(s)) for s in shapes)
    u = jax.random.uniform(key, (total,), dtype, -1.0, 1.0)
    out, at = [], 0
    for s in shapes:
        n = int(np.prod(s))
        out.append(u[at:at + n].reshape(s))
        at += n
    grid = out[0] * (0.1 * np.sqrt(3.0))
    num_bands, n = carrier_shape
    spec = jnp.fft.rfft(out[1][0] * np.sqrt(3.0))
    edges = np.linspace(0, spec.shape[0], num_bands + 1).round().astype(int)
    bands = np.zeros((num_bands, spec.shape[0]))
    for i in range(num_bands):
        bands[i, edges[i]:edges[i + 1]] = 1.0
    carrier = jnp.fft.irfft(spec[None] * bands, n)
    carrier = carrier / jnp.sqrt(jnp.mean(carrier**2, -1, keepdims=True))
    ws = [w / np.sqrt(w.shape[0]) for w in out[2::2]]
    bs = [b / np.sqrt(w.shape[0]) for w, b in zip(out[2::2], out[3::2])]
    ws[-1], bs[-1] = 0.1 * ws[-1], 0.1 * bs[-1]
    return grid, carrier, tuple(ws), tuple(bs)


class AcousticField(eqx.Module):
    """A neural room acoustic field: ``(source, receiver) -> RIR [N]`` (module docstring).

    The decoder: ``h(t) = direct(t) + 1[t >= tau] sum_b exp(A_b(t)) c_b(t)`` where ``direct`` is the
    free-field arrival ``hann * sinc(t - tau) / (4 pi d)`` at ``tau = d fs / c + latency`` (known from the
    two positions; ``direct_path=False`` drops it), ``A = MLP(features) + prior`` a log-envelope on
    ``K = N / env_hop + 1`` frames by ``B`` frequency bands (linear in time between frames), and
    ``c_b`` fixed unit-power white noise band-limited to band ``b`` (shared by all pairs: the field
    learns energy in time and frequency, not the phase of the diffuse tail).

    Args:
        dims: room size ``[3]`` in metres (positions are scaled by it).
        num_samples: RIR length ``N``.
        key: PRNG key (keyword-only, equinox's convention).
        fs: sampling rate (Hz); c: speed of sound (m/s); latency: samples added to every delay (40
            as :func:`~jaxcore.acoustics.image_source_rir`).
        grid_size: grid points per axis ``g`` (>= 2); grid_channels: features per grid point ``C``.
        num_frequencies: Fourier octaves ``F`` of the position encoding.
        width, depth: the MLP's hidden width and number of hidden layers.
        num_bands: ``B``; env_hop: samples per envelope frame.
        reciprocal: symmetric pair encoding (reciprocity by construction).
        shared_grid: use the learned grid (globality); False drops it (ablation).
        direct_path: add the analytic direct arrival.
        prior_t60: the log-envelope's initial decay (s): ``prior(t) = log(0.003) - 3 ln(10) t / prior_t60``.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> f = AcousticField([5.0, 4.0, 3.0], 64, key=jax.random.key(0), width=16, depth=1, fs=8000.0, env_hop=16)
        >>> s, r = jnp.array([[1.0, 1.0, 1.0]]), jnp.array([[3.0, 2.0, 1.5]])
        >>> h = predict_rir(f, s, r)
        >>> h.shape, bool(jnp.all(h == predict_rir(f, r, s)))
        ((1, 64), True)
    """

    grid: Float[Array, "g g g C"] | None
    carrier: Float[Array, "B N"]
    weights: tuple[Float[Array, "a b"], ...]
    biases: tuple[Float[Array, " b"], ...]
    dims: tuple[float, float, float] = eqx.field(static=True)
    num_samples: int = eqx.field(static=True)
    fs: float = eqx.field(static=True)
    c: float = eqx.field(static=True)
    latency: int = eqx.field(static=True)
    num_frequencies: int = eqx.field(static=True)
    env_hop: int = eqx.field(static=True)
    reciprocal: bool = eqx.field(static=True)
    direct_path: bool = eqx.field(static=True)
    prior_t60: float = eqx.field(static=True)

    def __init__(self, dims, num_samples: int, *, key: PRNGKeyArray, fs: float = 8000.0, c: float = 343.0,
                 latency: int = 40, grid_size: int = 8, grid_channels: int = 16, num_frequencies: int = 4,
                 width: int = 256, depth: int = 3, num_bands: int = 8, env_hop: int = 32,
                 reciprocal: bool = True, shared_grid: bool = True, direct_path: bool = True,
                 prior_t60: float = 0.3):
        key = check_key(key)
        d = np.asarray(dims, dtype=np.float64)
        if d.shape != (3,) or not np.all(np.isfinite(d) & (d > 0)):
            raise ValueError(expected("dims", "three finite room sizes > 0 (metres)", dims))
        self.dims = tuple(float(v) for v in d)
        self.num_samples = check_int(num_samples, "num_samples", minimum=2)
        self.fs = check_scalar(fs, "fs", positive=True)
        self.c = check_scalar(c, "c", positive=True)
        self.latency = check_int(latency, "latency", minimum=0)
        grid_size = check_int(grid_size, "grid_size", minimum=2)
        grid_channels = check_int(grid_channels, "grid_channels", minimum=1)
        self.num_frequencies = check_int(num_frequencies, "num_frequencies", minimum=0)
        width = check_int(width, "width", minimum=1)
        depth = check_int(depth, "depth", minimum=0)
        num_bands = check_int(num_bands, "num_bands", minimum=1, maximum=self.num_samples // 2)
        self.env_hop = check_int(env_hop, "env_hop", minimum=1, maximum=self.num_samples)
        self.reciprocal = bool(reciprocal)
        self.direct_path = bool(direct_path)
        self.prior_t60 = check_scalar(prior_t60, "prior_t60", positive=True)
        enc = 3 + 6 * self.num_frequencies + (grid_channels if shared_grid else 0)
        frames = -(-self.num_samples // self.env_hop) + 1
        sizes = (2 * enc + 2 + 2 * self.num_frequencies,) + (width,) * depth + (frames * num_bands,)
        grid, self.carrier, self.weights, self.biases = _init(
            key, (grid_size,) * 3 + (grid_channels,), sizes, (num_bands, self.num_samples), jnp.zeros(()).dtype)
        self.grid = grid if shared_grid else None

    def encode(self, x: Float[Array, "3"]) -> Float[Array, " E"]:
        """The position encoding ``e(x)`` (module docstring)."""
        u = x / jnp.asarray(self.dims, x.dtype)
        parts = [u]
        for k in range(self.num_frequencies):
            parts += [jnp.sin((2.0**k) * jnp.pi * u), jnp.cos((2.0**k) * jnp.pi * u)]
        if self.grid is not None:
            parts.append(_trilinear(self.grid, u))
        return jnp.concatenate(parts)

    def features(self, s: Float[Array, "3"], r: Float[Array, "3"]) -> Float[Array, " D"]:
        """The pair features: symmetric in ``(s, r)`` when ``reciprocal``."""
        es, er = self.encode(s), self.encode(r)
        diag = float(np.linalg.norm(self.dims))
        d = jnp.sqrt(jnp.sum((s - r) ** 2)) / diag
        phi = [d[None], jnp.log(d + 1e-3)[None]]
        for k in range(self.num_frequencies):
            phi += [jnp.sin((2.0**k) * jnp.pi * d)[None], jnp.cos((2.0**k) * jnp.pi * d)[None]]
        pair = [es + er, es * er] if self.reciprocal else [es, er]
        return jnp.concatenate(pair + phi)

    def log_envelope(self, s: Float[Array, "3"], r: Float[Array, "3"]) -> Float[Array, "K B"]:
        """The log-envelope ``A [K, B]`` of one pair (natural log of the band amplitudes)."""
        x = self.features(s, r)
        for w, b in zip(self.weights[:-1], self.biases[:-1]):
            x = jax.nn.gelu(x @ w + b)
        out = (x @ self.weights[-1] + self.biases[-1]).reshape(-1, self.carrier.shape[0])
        t = jnp.arange(out.shape[0]) * (self.env_hop / self.fs)
        prior = np.log(0.003) - 3 * np.log(10.0) * t / self.prior_t60
        return out + prior[:, None]

    def __call__(self, s: Float[Array, "3"], r: Float[Array, "3"]) -> Float[Array, " N"]:
        """The RIR ``[N]`` of one pair (positions in metres)."""
        n = self.num_samples
        a = self.log_envelope(s, r)
        m = jnp.arange(n)
        k0 = m // self.env_hop
        frac = (m % self.env_hop / self.env_hop).astype(a.dtype)[:, None]
        env = jnp.exp((1 - frac) * a[k0] + frac * a[k0 + 1])  # [N, B]
        late = jnp.sum(env * jax.lax.stop_gradient(self.carrier).T, -1)
        dist = jnp.sqrt(jnp.sum((s - r) ** 2))
        tau = dist * (self.fs / self.c) + self.latency
        late = late * jax.nn.sigmoid(m - tau)
        if not self.direct_path:
            return late
        t = m - tau
        near = jnp.abs(m - jnp.floor(tau)) <= 40
        win = 0.5 + 0.5 * jnp.cos(jnp.pi * (m - jnp.floor(tau)) / 41)
        return late + jnp.where(near, win * jnp.sinc(t), 0.0) / (4 * jnp.pi * dist)


@eqx.filter_jit
def _predict(field, s, r):
    return jax.vmap(field)(s, r)


def predict_rir(field: AcousticField, sources: Float[Array, "P 3"], receivers: Float[Array, "P 3"]
                ) -> Float[Array, "P N"]:
    """The field's RIRs for ``P`` pairs.

    Args:
        field: an :class:`AcousticField`.
        sources, receivers: ``[P, 3]`` positions (m).

    Returns:
        ``[P, N]``.

    Raises:
        ValueError: shapes not ``[P, 3]``.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> f = AcousticField([5.0, 4.0, 3.0], 64, key=jax.random.key(0), width=16, depth=1, fs=8000.0, env_hop=16)
        >>> predict_rir(f, jnp.ones((2, 3)), 2 * jnp.ones((2, 3))).shape
        (2, 64)
    """
    if not isinstance(field, AcousticField):
        raise TypeError(expected("field", "an AcousticField", type(field).__name__, raw=True))
    s = as_float_array(sources, "sources")
    r = as_float_array(receivers, "receivers", dtype=s.dtype)
    check_shape(s, "sources", (None, 3), "a [P, 3] array of positions")
    check_shape(r, "receivers", (s.shape[0], 3), f"a [{s.shape[0]}, 3] array of positions")
    return _predict(field, s, r)


class FieldResult(NamedTuple):
    """What :func:`train_field` returns.

    Attributes:
        field: the trained :class:`AcousticField`.
        history: ``[num_steps]`` the minibatch loss at each step.
    """

    field: AcousticField
    history: Float[Array, " num_steps"]


ENVELOPE_STFT = (128, 32)


def _band_energy(x, num_bands=8):
    """STFT power (``ENVELOPE_STFT``) pooled into ``num_bands`` equal frequency bands: ``[..., frames, bands]``."""
    n_fft, hop = ENVELOPE_STFT
    p = _stft(x, n_fft, hop) ** 2
    k = (p.shape[-1] - 1) // num_bands * num_bands
    return p[..., :k].reshape(p.shape[:-1] + (num_bands, -1)).mean(-1)


def _loss(field, log_noise, s, r, y, ey, probe, waveform_weight, envelope_weight, resolutions, sc_weight):
    h = jax.vmap(field)(s, r)
    pred = _convolve(probe, h)[..., : y.shape[-1]] if probe is not None else h
    sigma2 = jnp.exp(log_noise) / (0.375 * ENVELOPE_STFT[0])  # white noise: a band cell's power is sigma^2 sum(hann^2)
    loss = 0.0
    for n_fft, hop in resolutions:   # multi-resolution STFT loss of probe * h + noise against y
        sp = jnp.sqrt(_stft(pred, n_fft, hop) ** 2 + (0.375 * n_fft) * sigma2[:, None, None])
        sy = _stft(y, n_fft, hop)
        sc = jnp.sqrt(jnp.sum((sy - sp) ** 2, (-2, -1))) / (jnp.sqrt(jnp.sum(sy**2, (-2, -1))) + 1e-12)
        mag = jnp.mean(jnp.abs(jnp.log(sy + 1e-7) - jnp.log(sp + 1e-7)), (-2, -1))
        loss = loss + jnp.mean(sc_weight * sc + mag) / len(resolutions)
    if envelope_weight > 0:
        floor = 1e-10 * jnp.max(ey, (-2, -1), keepdims=True) + 1e-30
        ep = _band_energy(pred) + jnp.exp(log_noise)[:, None, None]
        loss = loss + envelope_weight * jnp.mean(jnp.abs(jnp.log(ep + floor) - jnp.log(ey + floor)))
        # per-band Schroeder decay curves (arithmetic energy sums: no bias from the spiky early part)
        cy = jnp.flip(jnp.cumsum(jnp.flip(ey, -2), -2), -2)
        cp = jnp.flip(jnp.cumsum(jnp.flip(ep, -2), -2), -2)
        loss = loss + envelope_weight * jnp.mean(jnp.abs(jnp.log(cp + floor) - jnp.log(cy + floor)))
    if waveform_weight > 0:
        loss = loss + waveform_weight * jnp.mean(jnp.sum((pred - y) ** 2, -1) / jnp.sum(y**2, -1))
    return loss


@eqx.filter_jit
def _train(key, field, s, r, y, probe, num_steps, batch_size, learning_rate, waveform_weight, envelope_weight,
           resolutions, sc_weight, progress):
    sched = optax.cosine_decay_schedule(learning_rate, num_steps, alpha=0.05)
    opt = optax.adam(sched)
    params, static = eqx.partition(field, eqx.is_inexact_array)
    prog = Progress(progress, num_steps, "acoustics.train_field")
    n = s.shape[0]
    # the recording model's noise: one learned white-noise level per recording (self-supervised only),
    # started 30 dB below the recording's mean band energy; RIR targets get a floor fixed far below
    ey_all = _band_energy(y)   # the targets' band energies, once (they do not depend on the parameters)
    start = jnp.log(jnp.mean(ey_all, (-2, -1)))
    noise = start - (np.log(1e3) if probe is not None else np.log(1e9))
    learn_noise = probe is not None

    def step(carry, inp):
        (p, nz), st = carry
        t, k = inp
        idx = minibatch_draw(k, n, batch_size, replace=None)

        def objective(pn):
            pp, nzz = pn
            nzz = nzz if learn_noise else jax.lax.stop_gradient(nzz)
            return _loss(eqx.combine(pp, static), nzz[idx], s[idx], r[idx], y[idx], ey_all[idx], probe,
                         waveform_weight, envelope_weight, resolutions, sc_weight)

        val, g = eqx.filter_value_and_grad(objective)((p, nz))
        upd, st = opt.update(g, st, (p, nz))
        p, nz = eqx.apply_updates((p, nz), upd)
        prog.update(t, {"loss": val})
        return ((p, nz), st), val

    keys = jax.random.split(key, num_steps)
    init = (params, noise)
    ((params, _), _), hist = jax.lax.scan(step, (init, opt.init(init)), (jnp.arange(num_steps), keys))
    return FieldResult(eqx.combine(params, static), hist)


def train_field(
    key: PRNGKeyArray,
    field: AcousticField,
    sources: Float[Array, "P 3"],
    receivers: Float[Array, "P 3"],
    targets: Float[Array, "P L"],
    *,
    probe: Float[Array, " T"] | None = None,
    num_steps: int = 1000,
    batch_size: int = 16,
    learning_rate: float = 1e-3,
    waveform_weight: float = 0.0,
    envelope_weight: float = 1.0,
    spectral_convergence_weight: float = 1.0,
    resolutions: tuple[tuple[int, int], ...] = (),
    progress: bool | Callable = False,
) -> FieldResult:
    """Train an :class:`AcousticField` with Adam (cosine-decayed step) on probing recordings or RIRs.

    Self-supervised (``probe`` given, ``targets`` the recordings ``[P, T + N - 1]``): each step draws
    ``batch_size`` pairs and minimises the noise-aware band-energy and band-Schroeder-curve loss between
    ``probe * h(s, r)`` and ``y`` (module docstring; each recording's noise level is learned alongside),
    plus optionally ``MRSTFT`` and ``w * relMSE(probe * h, y)``; the RIRs are never read. Supervised
    (``probe=None``, ``targets`` the RIRs ``[P, N]``): the same loss on ``h`` itself (noise levels fixed
    90 dB below).

    Args:
        key: PRNG key (minibatch draws).
        field: the initial field.
        sources, receivers: ``[P, 3]`` positions (m).
        targets: recordings or RIRs (above).
        probe: the emitted signal ``[T]`` or None.
        num_steps, batch_size, learning_rate: Adam settings.
        waveform_weight: ``w``, the weight of the relative waveform MSE (0: magnitude-only loss).
        envelope_weight: the weight of the band-energy and band-Schroeder terms.
        spectral_convergence_weight: the weight of the spectral-convergence part of the MRSTFT loss.
        resolutions: the MRSTFT loss's ``(n_fft, hop)`` pairs (default none: no MRSTFT term).
        progress: False, True (a bar) or ``fn(step, metrics)``.

    Returns:
        :class:`FieldResult`.

    Raises:
        TypeError: ``key`` not a PRNG key, ``field`` not an AcousticField.
        ValueError: shapes inconsistent with the field's ``N`` / the probe length, bad settings.

    References:
        He, Cherian, Wichern, Markham. "Deep Neural Room Acoustics Primitive." ICML 2024.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> f = AcousticField([5.0, 4.0, 3.0], 64, key=jax.random.key(0), width=16, depth=1, fs=8000.0, env_hop=16)
        >>> s = jnp.array([[1.0, 1.0, 1.0], [2.0, 1.0, 1.0]]); r = s[::-1] + 1.0
        >>> probe = jax.random.normal(jax.random.key(1), (32,))
        >>> y = jax.random.normal(jax.random.key(2), (2, 95)) * 0.01
        >>> res = train_field(jax.random.key(3), f, s, r, y, probe=probe, num_steps=3, batch_size=2)
        >>> res.history.shape
        (3,)
    """
    key = check_key(key)
    if not isinstance(field, AcousticField):
        raise TypeError(expected("field", "an AcousticField", type(field).__name__, raw=True))
    progress = check_progress(progress)
    s = as_float_array(sources, "sources")
    r = as_float_array(receivers, "receivers", dtype=s.dtype)
    y = as_float_array(targets, "targets", dtype=s.dtype)
    check_shape(s, "sources", (None, 3), "a [P, 3] array of positions")
    p = s.shape[0]
    check_shape(r, "receivers", (p, 3), f"a [{p}, 3] array of positions")
    n = field.num_samples
    if probe is not None:
        probe = as_float_array(probe, "probe", dtype=s.dtype)
        check_shape(probe, "probe", (None,), "a [T] probe signal")
        check_shape(y, "targets", (p, probe.shape[0] + n - 1), f"[{p}, T + N - 1] recordings")
    else:
        check_shape(y, "targets", (p, n), f"[{p}, {n}] RIRs (no probe given)")
    for x, nm in ((s, "sources"), (r, "receivers"), (y, "targets")):
        check_finite(x, nm)
    if probe is not None:
        check_finite(probe, "probe")
    num_steps = check_int(num_steps, "num_steps", minimum=1)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    learning_rate = check_scalar(learning_rate, "learning_rate", positive=True)
    waveform_weight = check_scalar(waveform_weight, "waveform_weight", nonnegative=True)
    envelope_weight = check_scalar(envelope_weight, "envelope_weight", nonnegative=True)
    sc_weight = check_scalar(spectral_convergence_weight, "spectral_convergence_weight", nonnegative=True)
    res = tuple((check_int(a, "resolutions", minimum=2), check_int(b, "resolutions", minimum=1))
                for a, b in resolutions)
    return _train(key, field, s, r, y, probe, num_steps, batch_size, learning_rate, waveform_weight,
                  envelope_weight, res, sc_weight, progress)
