"""jaxcore.acoustics: a differentiable image-source simulator and a self-supervised neural acoustic field.

:func:`image_source_rir` renders shoebox room impulse responses (RIRs) by the image-source method,
differentiable in positions, room size and wall reflection coefficients; its ``lut`` mode equals
pyroomacoustics to 5e-5 and its ``habets`` mode rir-generator to 1e-13. The signal kernels
(:func:`fft_convolve`, :func:`multi_resolution_stft_loss`, :func:`schroeder_decay`,
:func:`acoustic_metrics`, :func:`highpass`) are jitted and batch over leading axes.
:class:`AcousticField` is a neural room-acoustics field in the spirit of DeepNeRAP (He et al., ICML
2024): reciprocal by construction, with a feature grid shared by the room, trained by
:func:`train_field` from probe recordings only (:func:`simulate_probing`), never from RIRs.

The main workflow, on a simulated office:

>>> import jax, numpy as np
>>> from jaxcore import acoustics as ac
>>> room = ac.Room([5.0, 4.0, 3.0], absorption=0.3, fs=8000.0)
>>> s, r = ac.random_pairs(jax.random.key(0), room, 2)
>>> h = ac.image_source_rir(room, s, r, order=24, num_samples=2048)       # [2, 2048] RIRs
>>> bool(np.allclose(ac.image_source_rir(room, r, s, order=24, num_samples=2048), h, atol=1e-6))  # reciprocity
True
>>> t60 = ac.acoustic_metrics(h, 8000.0).t60                              # Schroeder + line fit
>>> bool(abs(float(t60[0]) / float(ac.sabine_t60(room)) - 1) < 0.35)
True
>>> data = ac.simulate_probing(jax.random.key(1), room, s, r, order=4, num_samples=64, probe_length=32)
>>> field = ac.AcousticField(room.dims, 64, key=jax.random.key(0), width=16, depth=1, fs=8000.0, env_hop=16)
>>> res = ac.train_field(jax.random.key(3), field, s, r, data.recordings, probe=data.probe, num_steps=3,
...                      batch_size=2)                                    # recordings only
>>> ac.predict_rir(res.field, s, r).shape
(2, 64)

References:
    Y. He, A. Cherian, G. Wichern, A. Markham. "Deep Neural Room Acoustics Primitive." ICML 2024.
    J. B. Allen, D. A. Berkley. "Image method for efficiently simulating small-room acoustics." JASA 1979.
"""

from .field import AcousticField, FieldResult, predict_rir, train_field
from .interpolation import RIRErrors, inverse_distance_rir, nearest_neighbour_rir, rir_errors
from .room import Room, eyring_t60, image_source_rir, num_images, sabine_t60
from .signals import AcousticMetrics, acoustic_metrics, clarity, definition, direct_to_reverberant_ratio, \
    early_decay_time, fft_convolve, highpass, multi_resolution_stft_loss, reverberation_time, schroeder_decay, \
    stft_error, stft_magnitude
from .synthetic import ProbeData, random_pairs, simulate_probing, wiener_deconvolve

__all__ = [
    "AcousticField",
    "AcousticMetrics",
    "FieldResult",
    "ProbeData",
    "RIRErrors",
    "Room",
    "acoustic_metrics",
    "clarity",
    "definition",
    "direct_to_reverberant_ratio",
    "early_decay_time",
    "eyring_t60",
    "fft_convolve",
    "highpass",
    "image_source_rir",
    "inverse_distance_rir",
    "multi_resolution_stft_loss",
    "nearest_neighbour_rir",
    "num_images",
    "predict_rir",
    "random_pairs",
    "reverberation_time",
    "rir_errors",
    "sabine_t60",
    "schroeder_decay",
    "simulate_probing",
    "stft_error",
    "stft_magnitude",
    "train_field",
    "wiener_deconvolve",
]
