"""Fixtures of the inverse tests: counting XLA compilations (the no-recompile checks)."""

import contextlib

import jax
import pytest


@contextlib.contextmanager
def _compiles():
    """Yield a list that collects one entry per backend compilation inside the block."""
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
    """``with compiles() as c: ...`` then ``len(c)`` is the number of XLA compilations in the block."""
    return _compiles
