"""Shared pytest fixtures for jaxcore's tests."""

import os

# Fake 4 CPU devices so sharding / shard_map tests can run on one host.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

import jax  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture
def x64():
    """Run the test body with 64-bit JAX arrays (oracle tests); restored afterwards."""
    with jax.enable_x64(True):
        yield


@pytest.fixture
def key():
    """A fixed PRNG key."""
    return jax.random.key(0)
