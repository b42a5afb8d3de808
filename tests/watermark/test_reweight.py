import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.watermark import dip_reweight, kgw_reweight

from . import _oracle

PERMS = np.array(list(itertools.permutations(range(6))))  # perm[i] = token at position i (720)
POSITIONS = np.argsort(PERMS, axis=1)  # positions[t] = place of token t
ALPHAS = [0.0, 0.1, 0.3, 0.45, 0.5]


def _dists(rng):
    yield rng.dirichlet(np.full(6, 0.5))
    yield rng.dirichlet(np.full(6, 5.0))
    yield np.array([0.5, 0.5, 0, 0, 0, 0])  # zeros in P
    yield np.array([1.0, 0, 0, 0, 0, 0])  # a point mass
    yield np.array([0.3, 0.2, 0.2, 0.15, 0.1, 0.05])  # F hits alpha = 0.5 and 0.3 exactly at some positions


def test_average_over_all_720_permutations_is_the_original_distribution(x64):
    rng = np.random.default_rng(0)
    for p in _dists(rng):
        probs = jnp.asarray(np.tile(p, (720, 1)))
        for alpha in ALPHAS:
            out = np.asarray(dip_reweight(probs, jnp.asarray(POSITIONS), alpha))
            assert out.dtype == np.float64
            np.testing.assert_allclose(out.mean(0), p, rtol=0, atol=1e-12)
            assert np.all(out >= 0)
            np.testing.assert_allclose(out.sum(1), 1.0, rtol=0, atol=1e-12)


def test_matches_the_papers_cumulative_form(x64):
    rng = np.random.default_rng(1)
    for _ in range(20):
        p = rng.dirichlet(np.full(6, 0.7))
        i = rng.integers(720)
        alpha = float(rng.uniform(0, 0.5))
        got = np.asarray(dip_reweight(jnp.asarray(p), jnp.asarray(POSITIONS[i]), alpha))
        np.testing.assert_allclose(got, _oracle.dip_reweight(p.tolist(), PERMS[i].tolist(), alpha), atol=1e-14)


def test_alpha_zero_is_the_identity_and_a_single_permutation_is_not(x64):
    p = np.random.default_rng(2).dirichlet(np.ones(6))
    out = np.asarray(dip_reweight(jnp.asarray(p), jnp.asarray(POSITIONS[17]), 0.0))
    np.testing.assert_allclose(out, p, rtol=4e-16, atol=0)  # exp(log p): one rounding
    assert np.abs(np.asarray(dip_reweight(jnp.asarray(p), jnp.asarray(POSITIONS[17]), 0.5)) - p).max() > 1e-3


def test_float32_full_vocabulary_is_a_distribution_with_tiny_tail_precision():
    """V = 49,152 in float32: non-negative, sums to 1, and tokens of mass 1e-30 keep it (slope 0, 1 or 2)."""
    from jaxcore.watermark import vocab_positions

    logits = 4.0 * jax.random.normal(jax.random.key(0), (2, 49152))
    logits = logits.at[:, :10].set(-40.0)  # P ~ 1e-30, far below float32 resolution near F ~ 0.5
    p = jax.nn.softmax(logits)
    pos = vocab_positions(jax.random.key(1), jnp.array([1, 2], jnp.uint32), 49152)
    out = np.asarray(dip_reweight(p, pos, 0.45))
    assert np.all(out >= 0) and np.allclose(out.sum(1), 1.0, atol=2e-5)
    ratio = out[:, :10] / np.asarray(p[:, :10])
    assert np.all(np.isin(np.round(ratio, 4), [0.0, 1.0, 2.0]))


def test_kgw_multiplies_green_odds_by_e_delta():
    logits = jnp.log(jnp.array([0.1, 0.2, 0.3, 0.4]))
    green = jnp.array([True, False, True, False])
    q = np.asarray(jax.nn.softmax(kgw_reweight(logits, green, 2.0)))
    raw = np.array([0.1 * np.e**2, 0.2, 0.3 * np.e**2, 0.4])
    np.testing.assert_allclose(q, raw / raw.sum(), rtol=1e-5)


def test_bad_arguments():
    p = jnp.full(4, 0.25)
    with pytest.raises(ValueError, match=r"alpha: expected a number in \[0, 0.5\], got 0.6"):
        dip_reweight(p, jnp.arange(4), 0.6)
    with pytest.raises(ValueError, match="positions: expected shape"):
        dip_reweight(p, jnp.arange(3), 0.3)
    with pytest.raises(TypeError, match="positions: expected an integer array"):
        dip_reweight(p, jnp.arange(4.0), 0.3)
    with pytest.raises(ValueError, match="probs: expected finite non-negative probabilities"):
        dip_reweight(jnp.array([0.5, -0.5, 0.5, 0.5]), jnp.arange(4), 0.3)
    with pytest.raises(ValueError, match="alpha: expected"):
        dip_reweight(p, jnp.arange(4), float("nan"))
    with pytest.raises(ValueError, match="delta: expected a finite number >= 0"):
        kgw_reweight(jnp.zeros(4), jnp.ones(4, bool), -1.0)
    with pytest.raises(TypeError, match="green: expected a bool array"):
        kgw_reweight(jnp.zeros(4), jnp.ones(4), 1.0)


@pytest.mark.parametrize("positions", [[0, 0, 1, 2], [0, 1, 2, 9], [0, -1, 1, 2]])
def test_dip_reweight_refuses_positions_that_are_not_a_permutation(positions):
    from jaxcore.watermark import dip_reweight

    with pytest.raises(ValueError, match="positions: expected a permutation of 0..3"):
        dip_reweight(jnp.array([0.1, 0.2, 0.3, 0.4]), jnp.array(positions), 0.3)


@pytest.mark.parametrize("probs, what", [([0.5] * 4, "rows summing to 1"), ([0.1, 0.2, 0.3, jnp.inf], "finite"),
                                         ([0.1, 0.2, jnp.nan, 0.4], "finite")])
def test_dip_reweight_refuses_unnormalised_or_non_finite_probabilities(probs, what):
    from jaxcore.watermark import dip_reweight

    with pytest.raises(ValueError, match=f"probs: expected .*{what}"):
        dip_reweight(jnp.array(probs), jnp.arange(4), 0.3)


def test_kgw_reweight_converts_float16_rather_than_overflowing():
    # issue 48 item 16: float16 logits 65000 + delta 1000 overflowed to inf.
    logits = jnp.array([64992.0, 0.0, -64992.0], jnp.float16)  # exact in float16
    out = kgw_reweight(logits, jnp.array([True, True, False]), 1000.0)
    assert out.dtype == jnp.float32
    np.testing.assert_array_equal(out, [65992.0, 1000.0, -64992.0])
    assert kgw_reweight(jnp.zeros(2, jnp.bfloat16), jnp.array([True, False]), 2.0).dtype == jnp.bfloat16
    with pytest.raises(ValueError, match="^delta: expected"):
        kgw_reweight(logits, jnp.array([True, True, False]), float("inf"))
