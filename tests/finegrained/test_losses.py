"""FALCON's loss terms against NumPy written from the formulas, float64, on fixed logits."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import finegrained as fg

N, F, C, K = 6, 5, 2, 3


def _data():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(N, F)) * 2
    t = rng.normal(size=(N, F)) * 2
    nbr = rng.normal(size=(N, K, F))
    m = np.zeros((F, C))
    m[[0, 1, 2], 0] = 1
    m[[3, 4], 1] = 1
    y = np.array([0, 1, 0, 1, 1, 0])
    return z, t, nbr, m, y


def _softmax(a):
    e = np.exp(a - a.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _np_coarse(z, m, y):
    p = _softmax(z)
    return -np.mean([np.log(sum(p[n, f] for f in range(F) if m[f, y[n]] == 1)) for n in range(N)])


def _np_targets(t, m, y, temp, tau):
    out = np.zeros((N, F))
    for n in range(N):
        fs = [f for f in range(F) if m[f, y[n]] == 1]
        e = np.exp(t[n, fs] / temp - (t[n, fs] / temp).max())
        q = e / e.sum()
        hard = np.zeros(len(fs))
        hard[np.argmax(q)] = 1
        out[n, fs] = tau * q + (1 - tau) * hard
    return out


def test_coarse_cross_entropy(x64):
    z, _, _, m, y = _data()
    got = fg.coarse_cross_entropy(jnp.asarray(z), jnp.asarray(y), jnp.asarray(m))
    np.testing.assert_allclose(float(got), _np_coarse(z, m, y), rtol=1e-12)
    # a coarse class without fine classes has probability 0
    m2 = np.zeros((F, C))
    m2[:, 0] = 1
    lp = fg.coarse_log_probs(jnp.asarray(z), jnp.asarray(m2))
    assert np.all(np.isneginf(np.asarray(lp[:, 1]))) and np.allclose(np.asarray(lp[:, 0]), 0.0)


@pytest.mark.parametrize("tau", [0.0, 0.3, 1.0])
def test_fine_targets_and_cross_entropy(x64, tau):
    z, t, _, m, y = _data()
    want = _np_targets(t, m, y, 0.9, tau)
    got = fg.fine_targets(jnp.asarray(t), jnp.asarray(y), jnp.asarray(m), 0.9, tau)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-12)
    ce = fg.fine_cross_entropy(jnp.asarray(z), got)
    logp = np.log(_softmax(z))
    np.testing.assert_allclose(float(ce), -np.mean((want * logp).sum(-1)), rtol=1e-12)


def test_neighbour_consistency(x64):
    z, _, nbr, _, _ = _data()
    r = _softmax(nbr)
    p = _softmax(z)
    want = -np.mean([[np.log(p[n] @ r[n, k]) for k in range(K)] for n in range(N)])
    got = fg.neighbour_consistency(jnp.asarray(z), jnp.log(jnp.asarray(r)))
    np.testing.assert_allclose(float(got), want, rtol=1e-12)


def test_entropy_gap_and_total(x64):
    z, t, nbr, m, y = _data()
    pbar = _softmax(z).mean(0)
    gap = np.log(F) + (pbar * np.log(pbar)).sum()
    np.testing.assert_allclose(float(fg.entropy_gap(jnp.asarray(z))), gap, rtol=1e-12)
    r = jax.nn.log_softmax(jnp.asarray(nbr))
    terms = fg.falcon_loss(jnp.asarray(z), jnp.asarray(t), r, jnp.asarray(y), jnp.asarray(m), tau=0.3,
                           temperature=0.9, weights=(0.2, 0.7, 1.1))
    fine = -np.mean((_np_targets(t, m, y, 0.9, 0.3) * np.log(_softmax(z))).sum(-1))
    cons = float(fg.neighbour_consistency(jnp.asarray(z), r))
    want = 0.2 * _np_coarse(z, m, y) + 0.7 * (fine + cons) + 1.1 * gap
    np.testing.assert_allclose(float(terms.total), want, rtol=1e-12)
    # no gradient flows through the teacher's outputs
    g = jax.jit(jax.grad(
        lambda tt: fg.falcon_loss(jnp.asarray(z), tt, r, jnp.asarray(y), jnp.asarray(m), tau=0.3).total))(
        jnp.asarray(t))
    assert np.all(np.asarray(g) == 0)
    # the gradient in the student logits is finite despite the masked -inf entries
    gz = jax.jit(jax.grad(lambda zz: fg.falcon_loss(zz, jnp.asarray(t), r, jnp.asarray(y), jnp.asarray(m)).total))(
        jnp.asarray(z))
    assert np.all(np.isfinite(np.asarray(gz)))
