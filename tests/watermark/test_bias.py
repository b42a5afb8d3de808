import jax
import jax.numpy as jnp
import pytest

from jaxcore.watermark import permutation_bias


def _zipf(v):
    r = 1.0 / (jnp.arange(v, dtype=jnp.float32) + 1.0) ** 1.1
    return r / r.sum()


def test_two_rounds_are_detectably_biased_six_are_not_at_this_resolution():
    p = _zipf(512)
    two = permutation_bias(jax.random.key(0), p, num_samples=512, num_rounds=2, num_groups=16)
    six = permutation_bias(jax.random.key(0), p, num_samples=512, num_rounds=6, num_groups=16)
    true = permutation_bias(jax.random.key(0), p, num_samples=512, method="shuffle", num_groups=16)
    assert float(two.position_chi2_per_dof) > 1.3
    for r in (six, true):
        assert 0.7 < float(r.position_chi2_per_dof) < 1.3
        assert 0.7 < float(r.chi2_per_dof) < 1.3


@pytest.mark.slow
def test_full_vocabulary_feistel_is_within_monte_carlo_error():
    p = _zipf(49152)
    six = permutation_bias(jax.random.key(1), p, num_samples=512, num_rounds=6)
    assert 0.8 < float(six.chi2_per_dof) < 1.2
    assert 0.8 < float(six.position_chi2_per_dof) < 1.2


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_samples: expected a multiple of chunk_size = 64"):
        permutation_bias(jax.random.key(0), _zipf(8), num_samples=200, num_groups=2)
    with pytest.raises(ValueError, match="probs: expected a \\[V\\] distribution"):
        permutation_bias(jax.random.key(0), jnp.ones((2, 4)) / 4)
