import jax
import numpy as np
import pytest

from jaxcore.causal import adjacency_to_parents, bge_local_scores, bootstrap_map_dags, exact_map_dag


def test_bootstrap_each_draw_is_the_map_of_its_resample():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 4)).astype(np.float32)
    x[:, 1] += x[:, 0]
    key = jax.random.key(3)
    res = bootstrap_map_dags(key, x, num_bootstrap=5)
    s = res.samples
    idx = np.asarray(jax.random.randint(key, (5, 30), 0, 30))
    got = np.asarray(adjacency_to_parents(s.adjacency))
    for b in range(5):
        table = bge_local_scores(x[idx[b]])
        _, best = exact_map_dag(table)
        mine = float(np.sum(np.asarray(table.table)[np.arange(4), [int(c) for c in _compress(got[b])]]))
        np.testing.assert_allclose(mine, float(best), rtol=1e-5)
        np.testing.assert_allclose(float(res.log_scores[b]), float(best), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(s.weights), 0.2, rtol=1e-6)


def _compress(p):
    return [(m & ((1 << j) - 1)) | ((m >> (j + 1)) << j) for j, m in enumerate(p)]


def test_errors():
    with pytest.raises(ValueError, match="score"):
        bootstrap_map_dags(jax.random.key(0), np.zeros((5, 2)), score="bic")
    with pytest.raises(ValueError, match="NaN"):
        bootstrap_map_dags(jax.random.key(0), np.full((5, 2), np.nan))
