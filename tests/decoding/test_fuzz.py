"""Hypothesis properties of jaxcore.decoding's small kernels (light profile: fixed shapes, few examples)."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from jaxcore.decoding import best_of_k_law, brevity, keyword_reward, select_best, tilted_kl

FLOATS = st.floats(-5.0, 5.0, allow_nan=False, width=32)


@given(hnp.arrays(np.float32, (3, 6), elements=FLOATS), hnp.arrays(np.float32, (3, 6), elements=FLOATS),
       st.sampled_from([0.0, 0.5, 3.0]))
def test_tilted_kl_is_the_kl_of_the_tilted_softmax(z, q, lam):
    got = np.asarray(tilted_kl(z, q, lam), np.float64)
    z64, q64 = z.astype(np.float64), q.astype(np.float64)
    lp = z64 - np.log(np.exp(z64 - z64.max(1, keepdims=True)).sum(1, keepdims=True)) - z64.max(1, keepdims=True)
    t = lp + lam * q64
    lpi = t - np.log(np.exp(t - t.max(1, keepdims=True)).sum(1, keepdims=True)) - t.max(1, keepdims=True)
    want = np.sum(np.exp(lpi) * (lpi - lp), axis=1)
    assert (got >= 0).all()
    np.testing.assert_allclose(got, want, atol=2e-4 * (1 + lam))


@given(hnp.arrays(np.int8, (4, 5), elements=st.integers(0, 3)))
def test_select_best_is_the_first_maximum(r):
    got = np.asarray(select_best(jnp.asarray(r, jnp.float32)))
    for row, i in zip(r, got):
        assert row[i] == row.max() and (row[:i] < row.max()).all()


@given(hnp.arrays(np.float64, (6,), elements=st.floats(0.05, 1.0)),
       hnp.arrays(np.int8, (6,), elements=st.integers(0, 2)), st.integers(1, 5))
def test_best_of_k_law_is_a_distribution(w, r, k):
    p = w / w.sum()
    law = np.asarray(best_of_k_law(jnp.log(jnp.asarray(p, jnp.float32)), jnp.asarray(r, jnp.float32), k))
    assert law.sum() == pytest.approx(1.0, abs=1e-5)
    assert (law >= -1e-7).all()
    if k == 1:
        np.testing.assert_allclose(law, p, atol=1e-5)


@given(hnp.arrays(np.int32, (3, 6), elements=st.integers(0, 9)))
def test_rewards_are_fractions(t):
    kw = np.asarray(keyword_reward(jnp.asarray(t), jnp.array([1, 2])))
    np.testing.assert_allclose(kw, np.isin(t, [1, 2]).mean(1), atol=1e-6)
    br = np.asarray(brevity(jnp.asarray(t), 0))
    first = np.array([(np.flatnonzero(row == 0)[0] + 1) if (row == 0).any() else 6 for row in t])
    np.testing.assert_allclose(br, 1 - first / 6, atol=1e-6)
