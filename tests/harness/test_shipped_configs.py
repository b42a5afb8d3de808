"""The shipped configurations name only registered benchmarks and parameters they accept."""

import pathlib

import pytest

from benchmarks import cli, registry
from benchmarks.config import load_config

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / "configs"


@pytest.fixture(scope="module")
def suites():
    imported, errors = cli.discover_suites()
    assert not errors, f"suites failed to import: {errors}"
    return registry.registry()


@pytest.mark.parametrize("name", ["smoke", "default", "full"])
def test_config_plans_every_family(name, suites):
    cfg = load_config(CONFIGS / f"{name}.yaml")
    tasks = cli._plan(list(suites.values()), cfg, {})
    families = {b.family for b, _, _ in tasks}
    assert families == {b.family for b in suites.values()}
    for b, what, arg in tasks:
        if what == "size":
            assert isinstance(arg, dict) and arg, f"{b.name}: empty size"
