"""jaxcore.enable_compilation_cache: atomic writes to JAX's persistent cache (a reader never sees half an entry)."""

import multiprocessing
import os
import pathlib

import numpy as np
import pytest
from jax._src import lru_cache

from jaxcore._util.cache import _atomic_cache_writes


def test_put_writes_a_temporary_file_then_renames_it(tmp_path, monkeypatch):
    assert _atomic_cache_writes()
    cache = lru_cache.LRUCache(str(tmp_path), max_size=-1)  # JAX's default: no size limit, no lock
    final = tmp_path / f"k{lru_cache._CACHE_SUFFIX}"
    written = []
    real = pathlib.Path.write_bytes

    def spy(self, data):
        written.append(self.name)
        assert not final.exists()  # nothing under the final name while the bytes are being written
        return real(self, data)

    monkeypatch.setattr(pathlib.Path, "write_bytes", spy)
    value = np.random.default_rng(0).bytes(1 << 20)
    cache.put("k", value)
    assert len(written) == 1 and written[0] != final.name and written[0].endswith(".tmp")
    assert final.read_bytes() == value
    assert sorted(p.name for p in tmp_path.iterdir()) == [final.name]  # no temporary left behind
    cache.put("k", b"other")  # an existing entry is kept, as JAX does
    assert cache.get("k") == value


def _reader(folder, n, out):
    cache = lru_cache.LRUCache(folder, max_size=-1)
    sizes = set()
    for _ in range(n):
        for i in range(8):
            v = cache.get(f"k{i}")
            if v is not None:
                sizes.add(len(v))
    out.put(sorted(sizes))


def test_a_concurrent_reader_sees_whole_entries_only(tmp_path):
    assert _atomic_cache_writes()
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    reader = ctx.Process(target=_reader, args=(str(tmp_path), 400, out))
    reader.start()
    cache = lru_cache.LRUCache(str(tmp_path), max_size=-1)
    size = 4 << 20
    for i in range(8):
        cache.put(f"k{i}", os.urandom(size))
    reader.join(60)
    assert reader.exitcode == 0
    assert set(out.get(timeout=10)) <= {size}


def test_a_size_limited_cache_keeps_jax_locked_path(tmp_path):
    pytest.importorskip("filelock")
    assert _atomic_cache_writes()
    cache = lru_cache.LRUCache(str(tmp_path), max_size=1 << 20)
    cache.put("k", b"abc")
    assert cache.get("k") == b"abc"
