import jax
import numpy as np
import pytest

from jaxcore.causal import dibs_svi, is_dag


def test_dibs_svi_finds_chain_skeleton():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 3))
    x[:, 1] += 1.5 * x[:, 0]
    x[:, 2] -= 1.2 * x[:, 1]
    x = (x - x.mean(0)) / x.std(0)
    res = dibs_svi(jax.random.key(0), x, num_steps=600, num_particles=128)
    s = res.samples
    w = np.asarray(s.weights)
    np.testing.assert_allclose(w.sum(), 1.0, rtol=1e-5)
    acyclic = np.asarray(is_dag(s.adjacency))
    assert np.all(w[~acyclic] == 0) and acyclic.any()
    loss = np.asarray(res.losses)
    assert loss.shape == (600,) and 0 < float(res.acyclic_fraction) <= 1
    assert loss[-50:].mean() < loss[:50].mean()  # the ELBO improved
    em = np.einsum("n,nij->ij", w, np.asarray(s.adjacency))
    skel = em + em.T
    assert skel[0, 1] > 0.8 and skel[1, 2] > 0.8 and skel[0, 2] < 0.3


def test_errors():
    with pytest.raises(ValueError, match="weighting"):
        dibs_svi(jax.random.key(0), np.zeros((5, 2)), weighting="x")
    with pytest.raises(ValueError, match="NaN"):
        dibs_svi(jax.random.key(0), np.full((5, 2), np.nan))


def test_dibs_svi_progress_callback_and_result():
    seen = []
    x = np.random.default_rng(1).normal(size=(20, 2)).astype(np.float32)
    res = dibs_svi(jax.random.key(1), x, num_steps=6, num_particles=8, weighting="uniform",
                   progress=lambda step, m: seen.append((step, m["loss"])))
    jax.effects_barrier()
    assert [s for s, _ in seen] == [1, 2, 3, 4, 5, 6]
    np.testing.assert_allclose([v for _, v in seen], np.asarray(res.losses), rtol=1e-6)
    with pytest.raises(TypeError, match="key"):
        dibs_svi(0, x, num_steps=2)
    with pytest.raises(ValueError, match="num_steps"):
        dibs_svi(jax.random.key(0), x, num_steps=0)
