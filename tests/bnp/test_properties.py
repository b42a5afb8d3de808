"""Hypothesis properties of the bnp family: KL divergences are >= 0 (0 at equal arguments), the
stick-breaking weights are non-increasing, and every validator answers in the one error dialect."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jaxcore.bnp import (
    IndianBuffetProcess,
    StickBreakingBetaProcess,
    kl_beta,
    kl_normal,
    stick_breaking_log_weights,
)
from jaxcore.bnp import processes as processes_module
from jaxcore.bnp import sampling as sampling_module
from jaxcore.bnp import kl as kl_module

positive = st.floats(min_value=0.05, max_value=50.0, allow_nan=False)
real = st.floats(min_value=-10.0, max_value=10.0, allow_nan=False)
scale = st.floats(min_value=0.05, max_value=10.0, allow_nan=False)


@given(positive, positive, positive, positive)
def test_kl_beta_nonnegative_and_zero_at_equality(a1, b1, a2, b2):
    kl = float(kl_beta(a1, b1, a2, b2))
    size = kl_module._kl_beta_jit._cache_size()
    assert np.isfinite(kl) and kl >= -1e-5 * (1.0 + abs(kl))
    assert abs(float(kl_beta(a1, b1, a1, b1))) < 1e-5
    assert kl_module._kl_beta_jit._cache_size() == size  # scalars: one compilation for every example


@given(real, scale, real, scale)
def test_kl_normal_nonnegative_and_zero_at_equality(m1, s1, m2, s2):
    kl = float(kl_normal(m1, s1, m2, s2))
    size = kl_module._kl_normal_jit._cache_size()
    assert np.isfinite(kl) and kl >= -1e-6 * (1.0 + abs(kl))
    assert abs(float(kl_normal(m1, s1, m1, s1))) < 1e-6
    assert kl_module._kl_normal_jit._cache_size() == size


@given(st.lists(st.floats(min_value=1e-3, max_value=1.0), min_size=4, max_size=4))
def test_stick_breaking_weights_non_increasing(nu):
    lw = np.asarray(stick_breaking_log_weights(jnp.asarray(nu, jnp.float32)))
    size = processes_module._stick_breaking_log_weights_jit._cache_size()
    assert np.all(np.isfinite(lw)) and np.all(np.diff(lw) <= 1e-6) and lw[0] <= 1e-6
    np.testing.assert_allclose(np.exp(lw), np.cumprod(np.asarray(nu, np.float32)), rtol=1e-5)
    stick_breaking_log_weights(jnp.asarray(nu[::-1], jnp.float32))
    assert processes_module._stick_breaking_log_weights_jit._cache_size() == size


@given(st.one_of(st.floats(max_value=0.0), st.just(float("nan")), st.just(float("inf"))))
def test_validators_refuse_in_the_one_dialect(bad):
    with pytest.raises(ValueError, match=r"^concentration1: expected finite values > 0, got "):
        StickBreakingBetaProcess(bad, 1.0, 3)
    with pytest.raises(ValueError, match=r"^alpha: expected finite values > 0, got "):
        IndianBuffetProcess(bad, 3, 4)
    with pytest.raises(ValueError, match=r"^b2: expected finite values > 0, got "):
        kl_beta(1.0, 1.0, 1.0, bad)


@given(st.integers(min_value=-3, max_value=0))
def test_integer_sizes_refused_in_the_one_dialect(n):
    with pytest.raises(ValueError, match=r"^truncation: expected an int >= 1, got "):
        StickBreakingBetaProcess(1.0, 1.0, n)
    with pytest.raises(TypeError, match=r"^key: expected a jax.random.key\(...\) array, got int"):
        processes_module.ibp_sample(n, 1.0, 3, 4)


def test_samplers_do_not_recompile():
    from jaxcore.bnp import gamma_rsample, ibp_sample

    gamma_rsample(jax.random.key(0), 2.0, (16,))
    ibp_sample(jax.random.key(0), 2.0, 5, 8)
    sizes = (sampling_module._gamma_rsample_jit._cache_size(), processes_module._ibp_sample_jit._cache_size())
    gamma_rsample(jax.random.key(1), 3.0, (16,))
    ibp_sample(jax.random.key(1), 4.0, 5, 8)
    assert (sampling_module._gamma_rsample_jit._cache_size(),
            processes_module._ibp_sample_jit._cache_size()) == sizes
