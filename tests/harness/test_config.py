"""Configuration files and overrides."""

import pathlib

import pytest
from omegaconf import OmegaConf

from benchmarks.config import DEFAULTS, QUICK, ConfigError, flatten_overrides, load_config

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / "configs"
KNOWN = ["core.matmul", "core.logsumexp", "tpp.fit"]


@pytest.mark.parametrize("name", ["smoke", "default", "full"])
def test_shipped_configs_load(name):
    cfg = load_config(CONFIGS / f"{name}.yaml")
    assert set(cfg.keys()) == set(DEFAULTS)


def test_default_yaml_equals_embedded_defaults():
    """A bare run without the repository's configs/ folder runs the same configuration."""
    assert OmegaConf.to_container(load_config(CONFIGS / "default.yaml")) == OmegaConf.to_container(load_config())


def test_smoke_is_quick_and_refines_quick_settings():
    smoke = load_config(CONFIGS / "smoke.yaml")
    assert smoke.quick is True and smoke.repeats == 3
    assert smoke.max_time_s == 2.0  # the file's own value wins over QUICK's
    assert load_config(CONFIGS / "default.yaml").quick is False


def test_quick_flag_wins_over_file_but_not_overrides():
    cfg = load_config(CONFIGS / "full.yaml", quick=True)
    assert cfg.quick is True and cfg.repeats == QUICK["repeats"] and cfg.max_time_s == QUICK["max_time_s"]
    cfg = load_config(CONFIGS / "full.yaml", ["repeats=5"], quick=True)
    assert cfg.repeats == 5


def test_precedence_and_nested_overrides(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("repeats: 9\nbenchmarks:\n  core.matmul: {sizes: [{n: 8}]}\n")
    cfg = load_config(f)
    assert cfg.repeats == 9
    cfg = load_config(f, ["repeats=2", "benchmarks.core.logsumexp.sizes=[{n: 4, d: 2}]"])
    assert cfg.repeats == 2
    flat = flatten_overrides(OmegaConf.to_container(cfg.benchmarks), KNOWN)
    assert flat == {"core.matmul": {"sizes": [{"n": 8}]}, "core.logsumexp": {"sizes": [{"n": 4, "d": 2}]}}


def test_unknown_benchmark_in_overrides_is_named():
    with pytest.raises(ConfigError, match="unknown benchmark 'core.matmull'; known in core: core.logsumexp"):
        flatten_overrides({"core": {"matmull": {"sizes": []}}}, KNOWN)
    # a family whose suite failed to import is ignored rather than fatal
    assert flatten_overrides({"bnp.x": {"a": 1}}, KNOWN, ignore_families=["bnp"]) == {}
    with pytest.raises(ConfigError, match="must be a mapping"):
        flatten_overrides({"core.matmul": 3}, KNOWN)


@pytest.mark.parametrize("override, message", [
    ("repeats", "KEY=VALUE"),
    ("repeats=abc", "invalid configuration"),
    ("x64=maybe", "invalid configuration"),
    ("repeats=2.5", "invalid configuration"),
    ("suites=core", "invalid configuration"),
    ("ceilings=3", "invalid configuration"),
    ("nonsense=1", "invalid configuration"),
    ("repeats=0", "repeats must be >= 1"),
    ("timeout_s=-1", "must be positive"),
])
def test_bad_overrides_are_named(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="is not a file"):
        load_config(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("repets: 3\n")
    with pytest.raises(ConfigError, match="repets"):
        load_config(bad)
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(bad)
    bad.write_text("a: [1\n")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(bad)
