"""Property tests: positions inside the room give finite, reciprocal RIRs; outside ones are refused."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jaxcore.acoustics import Room, image_source_rir

ROOM = Room([4.0, 3.0, 2.5], absorption=0.3, fs=8000.0)
coord = st.tuples(st.floats(0.01, 0.99), st.floats(0.01, 0.99), st.floats(0.01, 0.99))


@given(coord, coord)
def test_inside_positions_give_finite_reciprocal_rirs(u, v):
    s, r = np.array(u) * [4.0, 3.0, 2.5], np.array(v) * [4.0, 3.0, 2.5]
    if np.linalg.norm(s - r) < 1e-3:
        return
    h = np.asarray(image_source_rir(ROOM, s[None], r[None], order=1, num_samples=64))
    g = np.asarray(image_source_rir(ROOM, r[None], s[None], order=1, num_samples=64))
    assert np.all(np.isfinite(h))
    np.testing.assert_allclose(h, g, atol=1e-6 * max(1.0, np.abs(h).max()))


@given(st.sampled_from([-0.5, 0.0, 4.0, 9.0, float("nan"), float("inf")]), st.integers(0, 2))
def test_outside_positions_refused(value, axis):
    s = np.array([1.0, 1.0, 1.0])
    s[axis] = value
    with pytest.raises(ValueError, match="sources: expected positions strictly inside the room"):
        image_source_rir(ROOM, s[None], np.array([[2.0, 2.0, 1.0]]), order=1, num_samples=64)
