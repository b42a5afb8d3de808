"""Configuration files and overrides."""

import pathlib

import pytest

from benchmarks.config import DEFAULTS, ConfigError, bench_overrides, load_config

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / "configs"


@pytest.mark.parametrize("name", ["smoke", "default", "full"])
def test_shipped_configs_load(name):
    cfg = load_config(CONFIGS / f"{name}.yaml")
    assert set(cfg.keys()) == set(DEFAULTS)


def test_smoke_is_quick_and_default_is_not():
    assert load_config(CONFIGS / "smoke.yaml").quick is True
    assert load_config(CONFIGS / "default.yaml").quick is False


def test_precedence_file_then_quick_then_overrides(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("repeats: 9\nbenchmarks:\n  core.matmul: {sizes: [{n: 8}]}\n")
    cfg = load_config(f)
    assert cfg.repeats == 9
    assert bench_overrides(cfg, "core.matmul") == {"sizes": [{"n": 8}]}
    cfg = load_config(f, ["repeats=2", "benchmarks.core.logsumexp.sizes=[{n: 4, d: 2}]"], quick=True)
    assert cfg.repeats == 2 and cfg.quick is True
    assert bench_overrides(cfg, "core.logsumexp") == {"sizes": [{"n": 4, "d": 2}]}
    assert bench_overrides(cfg, "core.unknown") == {}


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("repets: 3\n")
    with pytest.raises(ConfigError, match=r"unknown keys \['repets'\]"):
        load_config(bad)
    with pytest.raises(ConfigError, match="unknown keys"):
        load_config(None, ["nonsense=1"])
    with pytest.raises(ConfigError, match="repeats must be >= 1"):
        load_config(None, ["repeats=0"])
