"""watermark's texts on 4 faked devices: ``detect`` over a ``[B, L]`` batch of texts split over the devices.

What shards: the texts and every per-text statistic (green counts, scores, z-scores, p-values);
replicated: the watermark's key and vocabulary permutation parameters. No collective but scalar ones.
"""

import jax
import numpy as np

from jaxcore import watermark

from . import _sharding as S


def test_detect_shards_texts():
    wm = watermark.DiPmark(1000, key=jax.random.key(42), alpha=0.5, context_size=2)
    text = jax.random.randint(jax.random.key(0), (8, 64), 0, 1000)
    run = S.check_sharded(lambda w, t: watermark.detect(w, t), (wm, text), 8, (False, True), max_memory_ratio=0.5,
                          collectives_allowed=False)
    assert np.all(np.asarray(run.many.p_value) > 1e-3)  # random text: not watermarked
