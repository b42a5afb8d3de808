"""Real data shipped inside PyPI packages, found without importing them, verified and cached.

Families add loaders here (one module per source). Nothing here ever falls back
to synthetic data: a missing package raises :class:`DataUnavailableError`
naming the ``pip install`` command.
"""

from ._files import (
    DataUnavailableError,
    cache_dir,
    cached_arrays,
    package_file,
    sha256,
    verify,
    wheel_file,
)
from .digits import load_digits
from .images import NATURAL_IMAGES, load_image
from .mnist import load_mnist

__all__ = [
    "DataUnavailableError",
    "NATURAL_IMAGES",
    "cache_dir",
    "cached_arrays",
    "load_digits",
    "load_image",
    "load_mnist",
    "package_file",
    "sha256",
    "verify",
    "wheel_file",
]
