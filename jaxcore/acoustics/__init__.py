from .field import AcousticField, FieldResult, predict_rir, train_field
from .interpolation import RIRErrors, inverse_distance_rir, nearest_neighbour_rir, rir_errors
from .room import Room, eyring_t60, image_source_rir, num_images, sabine_t60
from .signals import AcousticMetrics, acoustic_metrics, clarity, definition, direct_to_reverberant_ratio, \
    early_decay_time, fft_convolve, highpass, multi_resolution_stft_loss, reverberation_time, schroeder_decay, stft_error, \
    stft_magnitude
from .synthetic import ProbeData, random_pairs, simulate_probing, wiener_deconvolve
