"""The image-source kernel against pyroomacoustics and rir-generator, by hand, under swaps and finite differences."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.acoustics import Room, eyring_t60, image_source_rir, num_images, sabine_t60

DIMS = [6.0, 5.0, 3.0]
ALPHA = np.array([0.1, 0.2, 0.3, 0.15, 0.25, 0.35])
SRC = np.array([1.2, 1.1, 1.3])
MICS = np.array([[4.1, 3.2, 1.5], [2.5, 4.0, 2.2]])
N = 2000


@pytest.fixture(scope="module")
def pra_rirs():
    pra = pytest.importorskip("pyroomacoustics")
    hpf = pra.constants.get("rir_hpf_enable")
    pra.constants.set("rir_hpf_enable", False)
    try:
        walls = ["west", "east", "south", "north", "floor", "ceiling"]
        mats = {w: pra.Material(energy_absorption=float(a)) for w, a in zip(walls, ALPHA)}
        room = pra.ShoeBox(DIMS, fs=16000, materials=mats, max_order=10, air_absorption=False)
        room.add_source(SRC)
        room.add_microphone_array(MICS.T)
        room.compute_rir()
        assert room.sources[0].images.shape[1] == num_images(10)
        return np.stack([room.rir[m][0][:N] for m in range(2)]) / (4 * np.pi)  # pyroomacoustics omits 4 pi
    finally:
        pra.constants.set("rir_hpf_enable", hpf)


def _rel(a, b):
    return float(np.linalg.norm(np.asarray(a) - b) / np.linalg.norm(b))


def test_lut_mode_equals_pyroomacoustics(x64, pra_rirs):
    """Order 10, one band, no air absorption, HPF off: the table mode agrees to 1e-4 (measured 4.5e-5:
    pyroomacoustics computes delays and sums in float32)."""
    room = Room(jnp.asarray(DIMS), absorption=ALPHA, fs=16000.0)
    h = image_source_rir(room, np.stack([SRC, SRC]), MICS, order=10, num_samples=N)
    for m in range(2):
        assert _rel(h[m], pra_rirs[m]) < 1e-4


def test_exact_sinc_mode_gap_to_the_table(x64, pra_rirs):
    """The exact windowed sinc differs from pyroomacoustics' table by the table's error: about 1e-3."""
    room = Room(jnp.asarray(DIMS), absorption=ALPHA, fs=16000.0)
    h = image_source_rir(room, np.stack([SRC, SRC]), MICS, order=10, num_samples=N, mode="sinc")
    gaps = [_rel(h[m], pra_rirs[m]) for m in range(2)]
    assert all(3e-4 < g < 3e-3 for g in gaps), gaps


def test_habets_mode_equals_rir_generator(x64):
    rg = pytest.importorskip("rir_generator")
    beta = np.sqrt(1 - ALPHA)
    ref = rg.generate(c=343, fs=16000, r=MICS, s=SRC, L=DIMS, beta=beta, nsample=N, order=6, hp_filter=False)
    room = Room(jnp.asarray(DIMS), reflection=beta, fs=16000.0)
    h = image_source_rir(room, np.stack([SRC, SRC]), MICS, order=6, num_samples=N, mode="habets")
    # rir-generator drops an image whose integer delay is past the end; compare before the last filter width
    for m in range(2):
        assert _rel(h[m, : N - 128], ref[: N - 128, m]) < 1e-9


def test_reciprocity_float32():
    room = Room(DIMS, absorption=ALPHA, fs=16000.0)
    s = np.stack([SRC, SRC]).astype(np.float32)
    h = image_source_rir(room, s, MICS, order=10, num_samples=N)
    hs = image_source_rir(room, MICS, s, order=10, num_samples=N)
    assert h.dtype == jnp.float32
    for m in range(2):
        assert _rel(hs[m], np.asarray(h[m], np.float64)) < 1e-5


def test_direct_path_by_hand(x64):
    room = Room(jnp.asarray(DIMS), absorption=ALPHA, fs=16000.0)
    h = np.asarray(image_source_rir(room, SRC, MICS[0], order=0, num_samples=400, mode="sinc"))
    r = np.linalg.norm(SRC - MICS[0])
    tau = 16000 * r / 343.0 + 40
    ip = np.floor(tau)
    m = np.arange(400)
    k = m - ip + 40
    want = np.where((k >= 0) & (k <= 80), 0.5 - 0.5 * np.cos(2 * np.pi * k / 80), 0) * np.sinc(m - tau) / (4 * np.pi * r)
    np.testing.assert_allclose(h, want, atol=1e-15)
    assert np.argmax(h) == round(tau)
    assert abs(h.sum() * 4 * np.pi * r - 1) < 2e-3  # a windowed sinc sums to about 1


def _functional(mode):
    w = np.random.default_rng(0).normal(size=256)

    def f(src, rcv, refl):
        room = Room(jnp.asarray([4.0, 3.0, 2.5]), reflection=refl, fs=8000.0)
        h = image_source_rir(room, src[None], rcv[None], order=2, num_samples=256, mode=mode,
                             check_positions=False)
        return jnp.sum(h[0] * w)

    return f


@pytest.mark.parametrize("mode", ["sinc", "lut"])
def test_gradients_match_finite_differences(x64, mode):
    f = _functional(mode)
    x = (jnp.array([1.1, 0.9, 1.2]), jnp.array([2.9, 2.1, 1.4]), jnp.array([0.9, 0.8, 0.85, 0.7, 0.6, 0.95]))
    grads = jax.grad(f, argnums=(0, 1, 2))(*x)
    rng = np.random.default_rng(1)
    eps = 1e-6
    for a, g in enumerate(grads):   # a directional derivative per argument
        v = jnp.asarray(rng.normal(size=g.shape))
        xp, xm = list(x), list(x)
        xp[a], xm[a] = x[a] + eps * v, x[a] - eps * v
        fd = float((f(*xp) - f(*xm)) / (2 * eps))
        assert abs(float(g @ v) - fd) <= 1e-6 * max(1.0, abs(fd)), (mode, a, float(g @ v), fd)


def test_sabine_and_eyring_closed_forms():
    room = Room([6.0, 5.0, 3.0], absorption=0.2)
    v, s = 90.0, 2 * (30 + 18 + 15)
    assert abs(float(sabine_t60(room)) - 24 * np.log(10) * v / (343 * s * 0.2)) < 1e-5
    assert abs(float(eyring_t60(room)) - 24 * np.log(10) * v / (-343 * s * np.log(0.8))) < 1e-5


def test_bad_input_refused():
    room = Room(DIMS, absorption=0.2)
    with pytest.raises(ValueError, match="sources: expected positions strictly inside"):
        image_source_rir(room, [7.0, 1.0, 1.0], [1.0, 2.0, 1.0], order=1, num_samples=64)
    with pytest.raises(ValueError, match="receivers: expected positions strictly inside"):
        image_source_rir(room, [1.0, 1.0, 1.0], [1.0, float("nan"), 1.0], order=1, num_samples=64)
    with pytest.raises(ValueError, match="sources: expected a source distinct"):
        image_source_rir(room, [1.0, 1.0, 1.0], [1.0, 1.0, 1.0], order=1, num_samples=64)
    with pytest.raises(ValueError, match="receivers: expected a \\[1, 3\\]"):
        image_source_rir(room, [[1.0, 1.0, 1.0]], [[1.0, 2.0, 1.0], [2.0, 2.0, 1.0]], order=1, num_samples=64)
    with pytest.raises(TypeError, match="order: expected an int"):
        image_source_rir(room, [1.0, 1.0, 1.0], [1.0, 2.0, 1.0], order=1.5, num_samples=64)
    with pytest.raises(ValueError, match="mode: expected one of"):
        image_source_rir(room, [1.0, 1.0, 1.0], [1.0, 2.0, 1.0], order=1, num_samples=64, mode="cubic")
    with pytest.raises(ValueError, match="num_taps: expected an odd"):
        image_source_rir(room, [1.0, 1.0, 1.0], [1.0, 2.0, 1.0], order=1, num_samples=64, num_taps=80)
    with pytest.raises(ValueError, match="absorption: expected values in \\[0, 1\\]"):
        Room(DIMS, absorption=1.5)
    with pytest.raises(ValueError, match="dims: expected three finite sizes"):
        Room([6.0, -1.0, 3.0], absorption=0.2)
    with pytest.raises(ValueError, match="reflection: expected exactly one"):
        Room(DIMS, reflection=0.9, absorption=0.2)
    with pytest.raises(ValueError, match="fs: expected"):
        Room(DIMS, absorption=0.2, fs=float("nan"))


def test_traced_positions_checked_under_jit():
    room = Room(DIMS, absorption=0.2)
    f = jax.jit(lambda s: image_source_rir(room, s, jnp.array([[1.0, 2.0, 1.0]]), order=1, num_samples=64))
    with pytest.raises(Exception, match="sources: expected positions strictly inside the room"):
        jax.block_until_ready(f(jnp.array([[9.0, 1.0, 1.0]])))


def test_vmap_over_rooms_and_sharding_over_pairs():
    src, rcv = jnp.array([[1.1, 0.9, 1.2], [2.0, 1.0, 1.0]]), jnp.array([[2.9, 2.1, 1.4], [1.0, 2.0, 2.0]])

    def rir(alpha):
        room = Room(jnp.array([4.0, 3.0, 2.5]), absorption=alpha, fs=8000.0)
        return image_source_rir(room, src, rcv, order=2, num_samples=256)

    alphas = jnp.array([[0.1] * 6, [0.5] * 6])
    batched = jax.vmap(rir)(alphas)
    for i in range(2):
        np.testing.assert_allclose(batched[i], rir(alphas[i]), rtol=1e-5, atol=1e-8)
    # the pair axis under a NamedSharding over 2 (faked) devices gives the same RIRs
    devices = jax.devices()[:2]
    if len(devices) < 2:
        pytest.skip("needs 2 devices")
    mesh = jax.sharding.Mesh(np.array(devices), ("pairs",))
    spec = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("pairs"))
    room = Room(jnp.array([4.0, 3.0, 2.5]), absorption=0.1, fs=8000.0)
    out = jax.jit(lambda s, r: image_source_rir(room, s, r, order=2, num_samples=256, check_positions=False))(
        jax.device_put(src, spec), jax.device_put(rcv, spec))
    np.testing.assert_allclose(out, batched[0], rtol=1e-5, atol=1e-8)
