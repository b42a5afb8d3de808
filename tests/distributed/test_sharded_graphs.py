"""graphs' points on 4 faked devices: ``kmeans`` with the ``[N, d]`` points (spectral embeddings) split.

What shards: the points and their labels; each device assigns its points, and the centroid sums,
counts and k-means++ draws (sizes ``k x d``, never ``N``) are all-reduced. Replicated: the centres.
The dynamic clustering itself works on one graph in padded buffers: it has no batch axis.
"""

import jax
import numpy as np
import pytest

from jaxcore import graphs

from . import _sharding as S


@pytest.mark.slow  # 30 s (bnp) / 23 s (graphs) under load: beyond the default run's share
def test_kmeans_shards_points():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=(32, 2)) + c for c in ([0, 0], [6, 6], [0, 6])]).astype(np.float32)
    run = S.check_sharded(lambda k, x: graphs.kmeans(k, x, 3, num_init=2), (jax.random.key(0), x), 96,
                          (False, True), select=lambda r: r.labels, max_memory_ratio=0.7, rtol=1e-5, atol=1e-4)
    labels = np.asarray(run.many.labels)
    assert [len(np.unique(labels[i:i + 32])) for i in (0, 32, 64)] == [1, 1, 1]  # the three blobs found
    assert len(np.unique(labels)) == 3
