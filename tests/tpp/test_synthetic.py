import jax
import numpy as np
import pytest

from jaxcore.tpp import EventBatch, Hawkes, synthetic_hawkes, synthetic_poisson, synthetic_self_correcting


def test_synthetic_sets_are_named_generators():
    b = synthetic_hawkes(jax.random.key(0), num_sequences=4, T=20.0, max_events=100)
    assert isinstance(b, EventBatch) and b.num_sequences == 4 and b.num_marks == 1
    # the same draws as the model's own simulation with the paper's parameters
    ref, _ = Hawkes(0.2, 0.8, 1.0).simulate(jax.random.key(0), 20.0, 100, 4)
    np.testing.assert_array_equal(np.asarray(b.times), np.asarray(ref.times))
    with pytest.raises(ValueError, match="max_events: expected a buffer large enough .* got 2"):
        synthetic_poisson(jax.random.key(0), num_sequences=4, T=20.0, max_events=2)
    with pytest.raises(TypeError, match=r"key: expected a jax.random.key\(...\) array, got int"):
        synthetic_self_correcting(0, num_sequences=4)


def test_synthetic_counts_follow_the_models():
    # Poisson(1) on [0, 20]: N ~ Poisson(20); self-correcting mu=0.5, alpha=0.2: N(T) ~ mu T / alpha
    p = synthetic_poisson(jax.random.key(1), num_sequences=200, T=20.0, max_events=80)
    n = np.asarray(p.num_events)
    assert abs(n.mean() - 20.0) < 4 * np.sqrt(20.0 / 200)
    s = synthetic_self_correcting(jax.random.key(2), num_sequences=16, T=100.0, max_events=400)
    assert abs(np.asarray(s.num_events).mean() - 0.5 * 100.0 / 0.2) < 10.0
