"""Targets restated from a proven floor (``registry.Floor``): judged against the floor at its sizes, the
original target and the reason printed beside the ratio, never a bare MISSED."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import report, runner
from benchmarks.registry import Baseline, Case, Floor, SpeedBenchmark, floor_for


def _setup(size, key):
    return Case(args=(jnp.arange(size["n"], dtype=jnp.float32),))


def _bench(floors):
    return SpeedBenchmark(
        name="fake.double", family="fake", kernel=lambda x: 2 * x, setup=_setup,
        sizes=[{"n": 16}, {"n": 32}], baselines=[Baseline("numpy", lambda x: 2 * x)],
        target={"numpy": 1e9},  # out of reach: MISSED unless a floor restates it
        floors=floors)


def _rec(bench, n):
    return runner.run_speed_size(bench, {"n": n}, jax.random.key(0), repeats=2, min_repeats=2, max_time_s=0.2,
                                 ceilings=None)


def test_a_floor_restates_the_target_at_its_sizes_only():
    bench = _bench([Floor("numpy", 1e-9, reason="planted: two passes where numpy makes one", size={"n": 16})])
    at_floor, plain = _rec(bench, 16), _rec(bench, 32)
    b = at_floor["baselines"]["numpy"]
    assert b["target"] == 1e-9 and b["target_met"] is True
    assert b["floor"] == {"speedup": 1e-9, "reason": "planted: two passes where numpy makes one", "target": 1e9}
    c = plain["baselines"]["numpy"]
    assert c["target"] == 1e9 and c["target_met"] is False and "floor" not in c
    rows = {r["size"]: r for r in report.speed_rows({"results": [at_floor, plain]})}
    assert rows["n=16"]["target"] == "met at floor (>= 1e-09x; target 1e+09x)"
    assert rows["n=16"]["note"].startswith("floor: planted: two passes where numpy makes one")
    assert rows["n=32"]["target"] == "MISSED (>= 1e+09x)"


def test_a_floor_missed_is_still_missed_and_says_so():
    bench = _bench([Floor("numpy", 1e12, reason="planted")])  # every size
    rec = _rec(bench, 16)
    assert rec["baselines"]["numpy"]["target_met"] is False
    [row] = report.speed_rows({"results": [rec]})
    assert row["target"] == "MISSED at floor (>= 1e+12x; target 1e+09x)"


def test_floor_for_takes_the_first_matching_floor_and_validates():
    a = Floor("torch", 3.0, reason="w64", size={"width": 64})
    b = Floor("torch", 2.0, reason="any width")
    bench = SpeedBenchmark(name="fake.x", family="fake", kernel=lambda x: x, setup=_setup, sizes=[{"n": 1}],
                           floors=[a, b])
    assert floor_for(bench, "torch", {"width": 64, "S": 10}) is a
    assert floor_for(bench, "torch", {"width": 128}) is b
    assert floor_for(bench, "numpy", {"width": 64}) is None
    with pytest.raises(ValueError, match="Floor.speedup: expected a finite number > 0, got 0"):
        Floor("torch", 0, reason="r")
    with pytest.raises(ValueError, match="Floor.speedup"):
        Floor("torch", float(np.nan), reason="r")
    with pytest.raises(ValueError, match="Floor.reason: expected the measurement"):
        Floor("torch", 1.0, reason=" ")
