"""effects' data sets on 4 faked devices: ATE estimators over a ``[B, N, D]`` batch of data sets.

What shards: the data sets (covariates, treatments, outcomes, masks) and each one's estimate and
standard error; the batched SMO of kernel balancing runs each device's data sets alone (its stopping
test, a scalar, is all-reduced).
"""

import numpy as np
import pytest

from jaxcore import effects

from . import _sharding as S


def _data(b=8, n=20):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(b, n, 3)).astype(np.float32)
    t = rng.uniform(size=(b, n)) < 0.5
    t[:, 0], t[:, 1] = True, False  # both arms in every data set
    return effects.effect_data(x, t, (x[..., 0] + t).astype(np.float32))


def test_difference_in_means_shards_data_sets():
    run = S.check_sharded(lambda d: effects.difference_in_means(d), (_data(),), 8, (True,), max_memory_ratio=0.5,
                          collectives_allowed=False)
    assert len(np.unique(np.asarray(run.many.estimate))) == 8


@pytest.mark.slow
def test_balancing_ate_shards_data_sets():
    S.check_sharded(lambda d: effects.balancing_ate(d, lam=1.0), (_data(),), 8, (True,), max_memory_ratio=0.5,
                    rtol=1e-4, atol=1e-5)
