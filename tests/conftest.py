"""Shared pytest fixtures for jaxcore's tests."""

import os

# Fake 4 CPU devices so sharding / shard_map tests can run on one host.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

import jax  # noqa: E402
import pytest  # noqa: E402

# Warm starts: compiled programs persist across test runs (and between the two xdist workers) in JAX's
# persistent compilation cache under the jaxcore cache. JAXCORE_COMPILE_CACHE=0 runs cold (budgets are cold).
import jaxcore  # noqa: E402

jaxcore.enable_compilation_cache()


@pytest.fixture
def x64():
    """Run the test body with 64-bit JAX arrays (oracle tests); restored afterwards."""
    with jax.enable_x64(True):
        yield


@pytest.fixture
def key():
    """A fixed PRNG key."""
    return jax.random.key(0)


# Hypothesis profiles (DESIGN "Tests"): "light" by default (few examples drawn from small fixed shape
# sets, so examples do not recompile); "deep" for the slow run (HYPOTHESIS_PROFILE=deep).
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "light", max_examples=12, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "deep", max_examples=200, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "light"))


import contextlib  # noqa: E402


@contextlib.contextmanager
def _count_compiles():
    events = []

    def listener(name, duration, **kwargs):
        if name == "/jax/core/compile/backend_compile_duration":
            events.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield events
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


@pytest.fixture
def compiles():
    """``with compiles() as c: ...``; then ``len(c)`` is the number of XLA compilations in the block."""
    return _count_compiles


# Findings of the deep fuzzing profile (pytest -m slow, 40 examples) on the commit that added it, not yet
# fixed: each is a real refusal gap that the light profile does not reach. Marked here, in one place, as
# non-strict xfails with what was found, so the slow run reports them (XFAIL/XPASS) until they are fixed.
KNOWN_DEEP_FUZZ_FINDINGS: dict[str, str] = {}  # all eight findings of the first deep run are fixed


def pytest_collection_modifyitems(config, items):
    for item in items:
        reason = KNOWN_DEEP_FUZZ_FINDINGS.get(item.nodeid)
        if reason is not None:
            item.add_marker(pytest.mark.xfail(reason=f"known deep-fuzz finding: {reason}", strict=False))
