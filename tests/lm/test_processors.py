"""Temperature, top-k, top-p and chains against direct NumPy computations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import lm

RNG = np.random.default_rng(0)
Z = RNG.normal(size=(3, 50)).astype(np.float32) * 2


def _probs(z):
    z = np.asarray(z, np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_temperature():
    out, st = lm.Temperature(0.25)((), jnp.asarray(Z), None)
    np.testing.assert_allclose(out, Z / 0.25, rtol=1e-6)
    assert st == ()


@pytest.mark.parametrize("k", [1, 7, 50, 80])
def test_top_k_keeps_the_k_largest(k):
    out = np.asarray(lm.TopK(k)((), jnp.asarray(Z), None)[0])
    for row, z in zip(out, Z):
        kept = np.flatnonzero(np.isfinite(row))
        np.testing.assert_array_equal(np.sort(kept), np.sort(np.argsort(-z)[:min(k, 50)]))
        np.testing.assert_array_equal(row[kept], z[kept])


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_top_k_threshold_is_lax_top_k_with_ties_and_infinities(dtype):
    # the threshold is a bitwise bisection; it must equal lax.top_k's k-th value for every k, ties
    # (rounded logits, +0 and -0), -inf (masked tokens) and +inf included
    z = np.round(RNG.normal(size=(4, 40)) * 2).astype(np.float32)
    z[1, ::3] = -np.inf
    z[2, :] = 0.0
    z[2, ::2] = -0.0
    z[3, 5] = np.inf
    zj = jnp.asarray(z, dtype)
    ks = (1, 3, 13, 39, 40)
    both = jax.jit(lambda z: [(lm.TopK(k)((), z, None)[0], jax.lax.top_k(z, k)[0][:, -1:]) for k in ks])
    for out, kth in both(zj):
        np.testing.assert_array_equal(np.asarray(out), np.where(np.asarray(zj >= kth), np.asarray(zj), -np.inf))


@pytest.mark.parametrize("p", [0.05, 0.5, 0.9, 0.999, 1.0])
def test_top_p_keeps_the_smallest_nucleus(p):
    out = np.asarray(lm.TopP(p)((), jnp.asarray(Z), None)[0])
    for row, z in zip(out, Z):
        order = np.argsort(-z)
        probs = _probs(z)[order]
        n_keep = max(1, int(np.sum(np.cumsum(probs) - probs < p)))
        np.testing.assert_array_equal(np.sort(np.flatnonzero(np.isfinite(row))), np.sort(order[:n_keep]))
        assert probs[:n_keep].sum() >= min(p, 1.0) - 1e-6  # the kept mass reaches p
        assert n_keep == 1 or probs[:n_keep - 1].sum() < p  # and is the smallest such set


def test_chain_applies_in_order_and_slices_context():
    class Last(lm.LogitsProcessor):
        context_size = 2

        def __call__(self, state, logits, context):
            assert context.shape[1] == 2
            return logits.at[:, 0].add(100.0), state

    c = lm.chain(lm.Temperature(2.0), Last(), lm.TopK(1))
    assert c.context_size == 2
    out, st = c(c.init(3), jnp.asarray(Z), jnp.zeros((3, 5), jnp.int32))
    assert np.isfinite(np.asarray(out)[:, 0]).all() and np.isinf(np.asarray(out)[:, 1:]).all()
    assert st == ((), (), ())


def test_processor_refusals():
    with pytest.raises(ValueError, match="^temperature: expected"):
        lm.Temperature(0.0)
    with pytest.raises(ValueError, match="^k: expected"):
        lm.TopK(0)
    with pytest.raises(ValueError, match="^p: expected"):
        lm.TopP(1.5)
    with pytest.raises(TypeError, match=r"^processors\[1\]: expected"):
        lm.chain(lm.TopK(1), "x")
