"""Tests of jaxcore.ipm.two_sample: permutation p-values with HIPM / WoW / lower-bound statistics."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.ipm import dlip, lower_bound, pad_atoms, permutation_test, pool, wow


@pytest.mark.parametrize("statistic", ["lower_bound", "wow", "dlip"])
def test_statistic_and_null_match_direct_computation(x64, statistic):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.random((6, 5)))
    y = jnp.asarray(rng.random((4, 5)) ** 2)
    key = jax.random.key(1)
    kw = dict(statistic=statistic, num_permutations=5, interval=(0.0, 1.0), num_grid=20, num_starts=2,
              max_steps=200)
    res = permutation_test(key, x, y, **kw)
    pooled = jnp.concatenate([x, y])
    perms = jax.vmap(lambda k: jax.random.permutation(k, 10))(jax.random.split(key, 5))

    def direct(a, b):
        if statistic == "lower_bound":
            return lower_bound(a, b)
        if statistic == "wow":
            return wow(a, b, 1.0).value
        return dlip(a, b, interval=(0.0, 1.0), num_grid=20, num_starts=2, max_steps=200).value

    np.testing.assert_allclose(res.statistic, direct(x, y), rtol=1e-9)
    # d_lip is a local ascent: rounding-level differences in the features (computed once on the
    # pooled sample) can send it to a neighbouring local maximum, hence the looser tolerance
    rtol = 1e-2 if statistic == "dlip" else 1e-9
    for b in range(5):
        xb, yb = pooled[perms[b, :6]], pooled[perms[b, 6:]]
        np.testing.assert_allclose(res.null_statistics[b], direct(xb, yb), rtol=rtol, atol=1e-12)
    count = np.sum(np.asarray(res.null_statistics) >= float(res.statistic) * (1 - 1e-6))
    assert float(res.p_value) == pytest.approx((1 + count) / 6)


def test_identical_samples_give_p_one_and_shifted_give_min_p():
    x = jnp.asarray(np.random.default_rng(2).uniform(0.0, 0.5, (10, 8)), jnp.float32)
    res = permutation_test(jax.random.key(0), x, x, statistic="wow", num_permutations=20)
    assert float(res.statistic) == 0.0 and float(res.p_value) == 1.0
    res = permutation_test(jax.random.key(0), x, x + 0.5, statistic="dlip", num_permutations=19,
                           interval=(0.0, 1.0), num_grid=20, num_starts=3, max_steps=200)
    assert float(res.statistic) == pytest.approx(0.5, rel=1e-5)
    assert float(res.p_value) == pytest.approx(1 / 20)


def test_validation_errors():
    x = np.zeros((3, 4))
    with pytest.raises(ValueError, match="statistic: expected one of 'dlip', 'wow', 'lower_bound', got 'mmd'"):
        permutation_test(jax.random.key(0), x, x, statistic="mmd")
    with pytest.raises(ValueError, match="interval: expected .*statistic='dlip' needs it"):
        permutation_test(jax.random.key(0), x, x, statistic="dlip")
    with pytest.raises(ValueError, match="num_permutations"):
        permutation_test(jax.random.key(0), x, x, statistic="wow", num_permutations=0)
    with pytest.raises(TypeError, match="num_grid: expected an int"):
        permutation_test(jax.random.key(0), x, x, statistic="dlip", interval=(0.0, 1.0), num_grid=2.5)
    with pytest.raises(ValueError, match="num_starts: expected an int >= 1"):
        permutation_test(jax.random.key(0), x, x, statistic="dlip", interval=(0.0, 1.0), num_starts=0)
    with pytest.raises(TypeError, match=r"key: expected a jax.random.key\(...\) array, got int"):
        permutation_test(0, x, x, statistic="wow")


def test_pool_stacks_and_pads(x64):
    rng = np.random.default_rng(3)
    x, y = rng.random((3, 4)), rng.random((2, 6))
    from jaxcore.ipm import two_sample as two_sample_module

    s = pool(x, y)
    chex.assert_shape([s.atoms, s.weights], (5, 6))
    assert not s.uniform
    size = two_sample_module._pool_jit._cache_size()
    pool(x ** 2, y * 0.5)  # the same shapes: no new compilation
    assert two_sample_module._pool_jit._cache_size() == size
    np.testing.assert_allclose(s.means(), np.concatenate([x.mean(1), y.mean(1)]), rtol=1e-12)
    np.testing.assert_allclose(s.weights[:3, 4:], 0.0)
    np.testing.assert_allclose(s.atoms[:2], pad_atoms(x, 6).atoms[:2])
    with pytest.raises(ValueError, match="sample1, sample2: expected measures in the same dimension"):
        pool(np.zeros((2, 3, 2)), np.zeros((2, 3)))


def test_second_call_with_same_shapes_does_not_recompile():
    from jaxcore.ipm import two_sample as two_sample_module

    x = jnp.array([[0.0, 0.1], [0.2, 0.3], [0.1, 0.2]])  # the doctest's shapes: compilation shared
    program = two_sample_module._permutation_core
    permutation_test(jax.random.key(0), x, x + 0.5, statistic="lower_bound", num_permutations=19)
    size = program._cache_size()
    permutation_test(jax.random.key(1), x ** 3, x, statistic="lower_bound", num_permutations=19)
    assert program._cache_size() == size


def test_permutation_test_progress_reports_chunks_and_keeps_the_null():
    import numpy as np

    from jaxcore.ipm import permutation_test

    x = jnp.array([[0.0, 0.1], [0.2, 0.3], [0.1, 0.2], [0.4, 0.1]])
    seen = []
    kw = dict(statistic="lower_bound", num_permutations=23)
    plain = permutation_test(jax.random.key(0), x, x + 0.3, **kw)
    shown = permutation_test(jax.random.key(0), x, x + 0.3, progress=lambda done, m: seen.append(done), **kw)
    np.testing.assert_array_equal(shown.null_statistics, plain.null_statistics)
    assert float(shown.p_value) == float(plain.p_value)
    assert seen == [2 * i for i in range(1, 12)] + [23]  # 12 chunks of 2 relabellings, the last one short
    with pytest.raises(TypeError, match="progress: expected a bool or a callable"):
        permutation_test(jax.random.key(0), x, x, progress=1.5, **kw)
