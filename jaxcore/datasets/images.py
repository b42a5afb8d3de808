"""Natural images shipped inside scikit-image (read without importing skimage)."""

from __future__ import annotations

import numpy as np

from ._files import cached_arrays, package_file

#: Bundled images, by name -> (file in ``skimage/data``, its SHA-256 in scikit-image 0.26).
#: "camera", "astronaut", "coffee", "chelsea", "rocket", "motorcycle_left",
#: "retina", "hubble_deep_field" are photographs; the rest of skimage's bundle
#: are textures or synthetic test patterns.
NATURAL_IMAGES: dict[str, tuple[str, str]] = {
    "camera": ("camera.png", "b0793d2adda0fa6ae899c03989482bff9a42d3d5690fc7e3648f2795d730c23a"),
    "astronaut": ("astronaut.png", "88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5"),
    "coffee": ("coffee.png", "cc02f8ca188b167c775a7101b5d767d1e71792cf762c33d6fa15a4599b5a8de7"),
    "chelsea": ("chelsea.png", "596aa1e7cb875eb79f437e310381d26b338a81c2da23439704a73c4651e8c4bb"),
    "rocket": ("rocket.jpg", "c2dd0de7c538df8d111e479619b129464d0269d0ae5fd18ca91d33a7fdfea95c"),
    "motorcycle_left": ("motorcycle_left.png", "db18e9c4157617403c3537a6ba355dfeafe9a7eabb6b9b94cb33f6525dd49179"),
    "retina": ("retina.jpg", "38a07f36f27f095e818aea7b96d34202c05176d30253c66733f2e00379e9e0e6"),
    "hubble_deep_field": ("hubble_deep_field.jpg", "3a19c5dd8a927a9334bb1229a6d63711b1c0c767fb27e2286e7c84a3e2c2f5f4"),
    "horse": ("horse.png", "c7fb60789fe394c485f842291ea3b21e50d140f39d6dcb5fb9917cc178225455"),
    "moon": ("moon.png", "78739619d11f7eb9c165bb5d2efd4772cee557812ec847532dbb1d92ef71f577"),
    "coins": ("coins.png", "f8d773fc9cfa6f4d8e5942dc34d0a0788fcaed2a4fefbbed0aef5398d7ef4cba"),
    "page": ("page.png", "341a6f0a61557662b02734a9b6e56ec33a915b2c41886b97509dedf2a43b47a3"),
    "grass": ("grass.png", "b6b6022426b38936c43a4ac09635cd78af074e90f42ffa8227ac8b7452d39f89"),
    "gravel": ("gravel.png", "c48615b451bf1e606fbd72c0aa9f8cc0f068ab7111ef7d93bb9b0f2586440c12"),
    "brick": ("brick.png", "7966caf324f6ba843118d98f7a07746d22f6a343430add0233eca5f6eaaa8fcf"),
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
        DataUnavailableError: the file's checksum differs from the pinned one.
        DataUnavailableError: scikit-image is not installed (names the pip command).
    """
    if name not in NATURAL_IMAGES:
        raise ValueError(f"name: expected one of {sorted(NATURAL_IMAGES)}, got {name!r}")
    filename, digest = NATURAL_IMAGES[name]
    path = package_file("skimage", f"data/{filename}", pip_name="scikit-image", expected_sha256=digest)

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
