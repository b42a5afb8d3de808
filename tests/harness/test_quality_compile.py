"""The quality benchmarks compile with XLA:CPU's fast code generation; the timed programs do not."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import cli, runner
from benchmarks.config import ConfigError, load_config
from benchmarks.registry import Case


def test_quality_compile_defaults_to_fast_and_refuses_other_values():
    assert load_config().quality_compile == "fast"
    assert load_config(None, ["quality_compile=full"]).quality_compile == "full"
    with pytest.raises(ConfigError, match="quality_compile: expected 'fast' or 'full'"):
        load_config(None, ["quality_compile=quick"])


def test_fast_flags_go_into_xla_flags_on_cpu_only_and_the_timed_programs_opt_out(monkeypatch):
    monkeypatch.setattr(runner, "FULL_COMPILE_OPTIONS", {})
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    assert cli._fast_quality_compile("gpu") is False
    assert runner.FULL_COMPILE_OPTIONS == {}
    assert "optimization_level" not in __import__("os").environ["XLA_FLAGS"]
    assert cli._fast_quality_compile("cpu") is True
    flags = __import__("os").environ["XLA_FLAGS"].split()
    assert flags == ["--xla_force_host_platform_device_count=4", "--xla_backend_optimization_level=1",
                     "--xla_llvm_disable_expensive_passes=true"]
    assert runner.FULL_COMPILE_OPTIONS == {"xla_backend_optimization_level": 3,
                                           "xla_llvm_disable_expensive_passes": False}
    # a user's own setting of a flag is kept, not doubled
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=2")
    assert cli._fast_quality_compile("cpu") is True
    assert __import__("os").environ["XLA_FLAGS"].split() == [
        "--xla_backend_optimization_level=2", "--xla_llvm_disable_expensive_passes=true"]


def test_timed_programs_compile_with_the_full_options(monkeypatch):
    seen = []
    real = jax.stages.Lowered.compile

    def spy(self, compiler_options=None, **kw):
        seen.append(compiler_options)
        return real(self, compiler_options, **kw)

    monkeypatch.setattr(jax.stages.Lowered, "compile", spy)
    x = np.arange(6.0, dtype=np.float32)
    case = Case(args=(x,))
    monkeypatch.setattr(runner, "FULL_COMPILE_OPTIONS", {})
    compiled, _, _ = runner._compile_cached(lambda v: jnp.sin(v) * 2.0, case, case.args)
    np.testing.assert_allclose(compiled(x), np.sin(x) * 2.0, rtol=1e-6)
    full = {"xla_backend_optimization_level": 3, "xla_llvm_disable_expensive_passes": False}
    monkeypatch.setattr(runner, "FULL_COMPILE_OPTIONS", dict(full))
    compiled, _, _ = runner._compile_cached(lambda v: jnp.cos(v) * 2.0, case, case.args)
    np.testing.assert_allclose(compiled(x), np.cos(x) * 2.0, rtol=1e-6)
    assert seen == [None, full]


def test_backends_started_is_seen_so_a_test_process_keeps_its_flags():
    jax.devices()  # this process's backends run
    assert cli._backends_started() is True
