"""scikit-learn's bundled 8x8 handwritten digits (UCI optdigits test set, 1797 images)."""

from __future__ import annotations

import gzip

import numpy as np

from ._files import cached_arrays, package_file

DIGITS_SHA256 = "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22"


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """The 1797 scikit-learn digits, read from the file sklearn ships (not importing sklearn).

    Returns:
        ``(images, labels)``: images ``[1797, 8, 8]`` float32 in [0, 1]
        (raw grey levels 0..16 divided by 16); labels ``[1797]`` int32 in 0..9.

    Raises:
        DataUnavailableError: scikit-learn is not installed (names the pip command).
    """
    path = package_file("sklearn", "datasets/data/digits.csv.gz", pip_name="scikit-learn",
                        expected_sha256=DIGITS_SHA256)

    def build() -> dict[str, np.ndarray]:
        with gzip.open(path, "rt") as f:
            raw = np.loadtxt(f, delimiter=",", dtype=np.float64)
        if raw.shape != (1797, 65):
            raise ValueError(f"digits.csv.gz: expected shape (1797, 65), got {raw.shape}")
        return {
            "images": (raw[:, :64] / 16.0).reshape(-1, 8, 8).astype(np.float32),
            "labels": raw[:, 64].astype(np.int32),
        }

    arrays = cached_arrays("sklearn-digits", build)
    return arrays["images"], arrays["labels"]
