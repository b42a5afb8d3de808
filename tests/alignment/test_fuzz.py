"""Hypothesis properties of the DPO loss and refusals of the validators (light profile: fixed shapes)."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jaxcore.alignment import dpo_loss, fit_probe, preference_pairs

finite = st.floats(-50, 50, allow_nan=False, width=32)
vec = st.lists(finite, min_size=5, max_size=5).map(lambda v: jnp.asarray(v, jnp.float32))


@given(vec, vec, vec, vec, st.floats(0.01, 2.0))
def test_dpo_loss_is_positive_and_antisymmetric_in_the_pair(pc, pr, rc, rr, beta):
    loss = float(dpo_loss(pc, pr, rc, rr, beta=beta))
    swapped = float(dpo_loss(pr, pc, rr, rc, beta=beta))
    margin = beta * ((np.asarray(pc) - np.asarray(rc)) - (np.asarray(pr) - np.asarray(rr)))
    assert loss >= 0 and np.isfinite(loss)
    # -log sigma(m) + log sigma(-m) = -m
    assert loss - swapped == pytest.approx(-float(np.mean(margin)), abs=1e-3 * (1 + float(np.abs(margin).max())))
    # shifting policy and reference log-probs together changes nothing
    assert float(dpo_loss(pc + 3.0, pr, rc + 3.0, rr, beta=beta)) == pytest.approx(loss, rel=1e-4, abs=1e-4)


@given(st.sampled_from([float("nan"), float("inf"), -1.0, 1.5]), st.integers(0, 5))
def test_fit_probe_refuses_bad_labels_anywhere(bad, where):
    y = np.full(6, 0.5)
    y[where] = bad
    with pytest.raises(ValueError, match="labels: expected values in"):
        fit_probe(np.ones((6, 2)), y)


@given(st.sampled_from([float("nan"), float("inf"), -float("inf")]), st.integers(0, 2), st.integers(0, 2))
def test_preference_pairs_refuses_non_finite_scores(bad, i, j):
    s = np.zeros((3, 3))
    s[i, j] = bad
    with pytest.raises(ValueError, match="scores: expected finite values"):
        preference_pairs(np.ones((3, 2), np.int32), np.ones((3, 2), bool), np.ones((3, 3, 2), np.int32),
                         np.ones((3, 3, 2), bool), s)
