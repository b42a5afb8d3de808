import numpy as np
import pytest

from jaxcore.datasets import events as ev


def test_coal_mining():
    t, (a, b) = ev.load_coal_mining()
    assert t.shape == (191,) and np.all(np.diff(t) >= 0)
    assert a <= t[0] < 1851.3 and 1962.0 < t[-1] < b


def test_neuron_trials():
    trials, (a, b) = ev.load_neuron_trials()
    assert len(trials) == 469
    assert all(np.all(np.diff(x) > 0) and np.all((x >= a) & (x <= b)) for x in trials)
    assert max(len(x) for x in trials) <= 6


def test_tweets_marks():
    t, m, names = ev.load_tweets()
    assert t.shape == m.shape == (20761,) and np.all(np.diff(t) >= 0)
    assert names[:3] == ev.TWEET_SOURCES and np.bincount(m)[0] == 10718  # Twitter Web Client
    assert 0.0 <= t[0] and t[-1] < 3200  # 2009-05-04 .. 2018-01-01


def test_grasshopper():
    g = ev.load_grasshopper()
    assert [len(x) for x in g] == [929, 868]
    assert all(np.all(np.diff(x) >= 0) and x[-1] < 1e7 for x in g)


@pytest.mark.parametrize("name", sorted(ev.EVENT_DATASETS))
def test_splits_cover_all_windows(name):
    s = ev.event_splits(name)
    num = {k: len(s[k]["times"]) for k in ("train", "valid", "test")}
    total = sum(num.values())
    assert num["test"] >= 1 and num["valid"] >= 1
    assert num["train"] > num["test"]
    for k in ("train", "valid", "test"):  # plain arrays on [0, T], one marks array per times array
        assert len(s[k]["marks"]) == num[k]
        assert all(isinstance(t, np.ndarray) and t.dtype == np.float64 for t in s[k]["times"])
        assert all(len(t) == len(m) and np.all((t >= 0) & (t <= s["T"])) for t, m in zip(s[k]["times"], s[k]["marks"]))
        assert all(np.all((m >= 0) & (m < s["num_marks"])) for m in s[k]["marks"])
    assert s["max_events"] == max(len(t) for k in num for t in s[k]["times"])
    if name == "coal":
        assert total == 28 and sum(len(t) for k in num for t in s[k]["times"]) == 191
    if name == "neuro":
        assert total == 469


def test_cut_and_split_helpers():
    ts, ms, T = ev.cut_stream(np.array([0.5, 1.5, 2.2, 3.9]), np.array([0, 1, 1, 0]), 0.0, 4.0, 2.0)
    assert T == 2.0 and len(ts) == 2
    np.testing.assert_allclose(ts[1], [0.2, 1.9])
    np.testing.assert_array_equal(ms[1], [1, 0])
    sp = ev.interleaved_split(20)
    assert list(sp["test"]) == [9, 19] and list(sp["valid"]) == [8, 18] and len(sp["train"]) == 16
    with pytest.raises(ValueError, match="name: expected one of"):
        ev.event_splits("nope")


def test_datasets_is_a_leaf():
    # datasets imports no family: the synthetic generators live with their models (jaxcore.tpp)
    import jaxcore.datasets as ds

    assert not any(n.startswith("synthetic_") for n in ds.__all__)
    assert not hasattr(ev, "synthetic_hawkes")
    import pathlib

    src = pathlib.Path(ev.__file__).read_text()
    assert "jaxcore.tpp" not in src and "..tpp" not in src
