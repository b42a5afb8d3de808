"""Natural images shipped inside scikit-image (read without importing skimage)."""

from __future__ import annotations

import numpy as np

from ._files import cached_arrays, package_file

#: Bundled natural (photographic) images, by name -> file in ``skimage/data``.
#: "camera", "astronaut", "coffee", "chelsea", "rocket", "motorcycle_left",
#: "retina", "hubble_deep_field" are photographs; the rest of skimage's bundle
#: are textures or synthetic test patterns.
NATURAL_IMAGES: dict[str, str] = {
    "camera": "camera.png",
    "astronaut": "astronaut.png",
    "coffee": "coffee.png",
    "chelsea": "chelsea.png",
    "rocket": "rocket.jpg",
    "motorcycle_left": "motorcycle_left.png",
    "retina": "retina.jpg",
    "hubble_deep_field": "hubble_deep_field.jpg",
    "horse": "horse.png",
    "moon": "moon.png",
    "coins": "coins.png",
    "page": "page.png",
    "grass": "grass.png",
    "gravel": "gravel.png",
    "brick": "brick.png",
}


def load_image(name: str, *, gray: bool = False) -> np.ndarray:
    """A bundled scikit-image picture as float32 in [0, 1].

    Args:
        name: a key of :data:`NATURAL_IMAGES` ("camera", "astronaut", ...).
        gray: convert RGB to luminance (ITU-R BT.601 weights 0.299, 0.587, 0.114).

    Returns:
        ``[H, W, C]`` float32 array in [0, 1], C = 1 (grayscale) or 3 (RGB);
        an alpha channel, if any, is dropped.

    Raises:
        ValueError: unknown ``name`` (the message lists the names).
        DataUnavailableError: scikit-image is not installed (names the pip command).
    """
    if name not in NATURAL_IMAGES:
        raise ValueError(f"name must be one of {sorted(NATURAL_IMAGES)}, got {name!r}")
    path = package_file("skimage", f"data/{NATURAL_IMAGES[name]}", pip_name="scikit-image")

    def build() -> dict[str, np.ndarray]:
        from PIL import Image

        with Image.open(path) as im:
            arr = np.asarray(im)
        if arr.dtype == np.bool_:
            arr = arr.astype(np.uint8) * 255
        arr = arr.astype(np.float32)
        arr = arr / (65535.0 if arr.max() > 255 else 255.0)
        if arr.ndim == 2:
            arr = arr[..., None]
        return {"image": arr[..., :3]}

    img = cached_arrays(f"skimage-{name}", build)["image"]
    if gray and img.shape[-1] == 3:
        img = (img @ np.array([0.299, 0.587, 0.114], np.float32))[..., None]
    return img
