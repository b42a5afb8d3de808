"""Fixtures of the sam tests: counting XLA compilations (no recompile on a second call)."""

import contextlib

import pytest
from jax import monitoring

_COMPILES = []


def _listener(event, duration, **kwargs):
    if event.endswith("backend_compile_duration"):
        _COMPILES.append(event)


monitoring.register_event_duration_secs_listener(_listener)


@pytest.fixture
def compiles():
    """``with compiles() as n: ...`` then ``n()`` is the number of XLA compilations inside the block."""

    @contextlib.contextmanager
    def block():
        start = len(_COMPILES)
        count = {"n": None}
        yield lambda: (len(_COMPILES) - start) if count["n"] is None else count["n"]
        count["n"] = len(_COMPILES) - start

    return block
