import jax
import numpy as np
import pytest

from jaxcore.ipm import dirichlet_process_stick_breaking, permutation_test, permutation_test_power, uniform_base

TEST = {"statistic": "lower_bound", "num_permutations": 19}


def _pair(low2, high2):
    def draw(k, n):
        k1, k2 = jax.random.split(k)
        return (dirichlet_process_stick_breaking(k1, uniform_base(), 1.0, n, 20),
                dirichlet_process_stick_breaking(k2, uniform_base(low2, high2), 1.0, n, 20))
    return draw


def test_equals_the_loop_it_documents():
    draw, key = _pair(0.0, 1.0), jax.random.key(4)
    res = permutation_test_power(key, draw, [6, 10], num_datasets=3, level=0.3, **TEST)
    assert res.num_measures.tolist() == [6, 10] and res.p_values.shape == (2, 3)
    for i, n in enumerate([6, 10]):
        for r in range(3):
            kd, kt = jax.random.split(jax.random.fold_in(jax.random.fold_in(key, n), r))
            assert float(res.p_values[i, r]) == float(permutation_test(kt, *draw(kd, n), **TEST).p_value)
        assert float(res.rejection_rate[i]) == pytest.approx(np.mean(np.asarray(res.p_values[i]) <= 0.3))


def test_size_under_the_null_and_power_against_a_shifted_base():
    """Same law on both sides: the permutation test is exact, the rejection rate is about the level (0.2 here,
    p-values on a 1/20 grid); bases U[0, 1] vs U[1/2, 3/2] (means 1/2 apart): every data set rejected."""
    null = permutation_test_power(jax.random.key(0), _pair(0.0, 1.0), [8], num_datasets=60, level=0.2, **TEST)
    assert abs(float(null.rejection_rate[0]) - 0.2) <= 3 * np.sqrt(0.2 * 0.8 / 60)
    alt = permutation_test_power(jax.random.key(1), _pair(0.5, 1.5), [8], num_datasets=5, level=0.2, **TEST)
    assert alt.rejection_rate.tolist() == [1.0]


def test_bad_arguments():
    draw = _pair(0.0, 1.0)
    with pytest.raises(TypeError, match="key: expected"):
        permutation_test_power(0, draw, [4], num_datasets=1, **TEST)
    with pytest.raises(TypeError, match="draw_pair: expected a function"):
        permutation_test_power(jax.random.key(0), None, [4], num_datasets=1, **TEST)
    with pytest.raises(ValueError, match=r"num_measures\[1\]: expected"):
        permutation_test_power(jax.random.key(0), draw, [4, 0], num_datasets=1, **TEST)
    with pytest.raises(TypeError, match="num_measures: expected"):
        permutation_test_power(jax.random.key(0), draw, 4, num_datasets=1, **TEST)
    with pytest.raises(ValueError, match="num_measures: expected"):
        permutation_test_power(jax.random.key(0), draw, [], num_datasets=1, **TEST)
    with pytest.raises(ValueError, match="num_datasets: expected"):
        permutation_test_power(jax.random.key(0), draw, [4], num_datasets=0, **TEST)
    with pytest.raises(ValueError, match="level: expected"):
        permutation_test_power(jax.random.key(0), draw, [4], num_datasets=1, level=1.0, **TEST)
