"""Between families the harness drops JAX's compiled programs, unmapping their code (a bare run once ran
out of memory mappings, vm.max_map_count, in its last family)."""

import sys

import jax
import jax.numpy as jnp
import pytest

from benchmarks import runner


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/maps is Linux's")
def test_release_compiled_unmaps_the_programs_code():
    before = runner.memory_maps()
    fns = [jax.jit(lambda x, i=i: jnp.sin(x) * i + jnp.cos(x) ** i) for i in range(60)]
    for f in fns:
        f(jnp.ones(3)).block_until_ready()
    grown = runner.memory_maps()
    assert grown > before  # every compiled program maps its code
    runner.release_compiled()
    released = runner.memory_maps()
    assert released < grown - (grown - before) // 2
