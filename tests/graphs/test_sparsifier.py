"""Sparsifier: kept weights unbiased (Monte Carlo within its standard error), resampling and rebuild rules."""

import jax
import numpy as np
import pytest

from jaxcore.graphs import add_edges, sbm_graph, sparsify, update_sparsifier

G, _ = sbm_graph(jax.random.key(0), [30, 30], 0.5, 0.05)
C = 0.5


def _probs(g, c):
    n, m = int(g.num_vertices), int(g.num_edges)
    deg = np.asarray(g.degree, np.float64)[:n]
    p = np.minimum(1.0, c * np.log(n) / deg)
    s, d = np.asarray(g.src)[:m], np.asarray(g.dst)[:m]
    return p, p[s] + p[d] - p[s] * p[d]


def _unbiased(draws, pe):
    """Every edge's mean kept weight is 1 within 5 standard errors; the grand total within 4."""
    n = draws.shape[0]
    var = 1.0 / pe - 1.0
    z = (draws.mean(0) - 1.0) / np.sqrt(np.maximum(var, 1e-12) / n)
    assert np.max(np.abs(z[var > 0])) < 5.0
    total = (draws.sum() - draws.size) / np.sqrt(n * var.sum())
    assert abs(total) < 4.0
    np.testing.assert_array_equal(draws[:, var == 0], 1.0)   # p_e = 1: always kept at weight 1


def test_kept_weights_unbiased_and_probabilities():
    p, pe = _probs(G, C)
    m = int(G.num_edges)
    draws = np.stack([np.asarray(sparsify(jax.random.key(i), G, sampling_constant=C).weight)[:m]
                      for i in range(300)])
    assert 0.1 < pe.min() < pe.max() < 0.9           # a real subsample
    kept = draws > 0
    np.testing.assert_allclose(draws[kept], np.broadcast_to(1.0 / pe, draws.shape)[kept], rtol=1e-5)
    _unbiased(draws, pe)
    h = sparsify(jax.random.key(0), G, sampling_constant=C)
    np.testing.assert_allclose(np.asarray(h.prob)[:60], p, rtol=1e-5)


def test_resampling_rule_and_unbiased_after_update():
    h = sparsify(jax.random.key(0), G, sampling_constant=C, rebuild_fraction=0.5)
    star = np.arange(60, 460)
    g2 = add_edges(G, np.zeros(400, np.int32), star)   # vertex 0: p_0 falls by more than 10x; 400 new vertices
    h2 = update_sparsifier(jax.random.key(1), h, g2, 400)
    assert int(h2.num_resampled) == 1 and int(h2.num_rebuilds) == 0
    p, pe = _probs(g2, C)
    assert float(h2.prob[0]) == pytest.approx(p[0], rel=1e-5)
    m = int(g2.num_edges)
    draws = np.stack([np.asarray(update_sparsifier(jax.random.key(i), h, g2, 400).weight)[:m]
                      for i in range(300)])
    s, d = np.asarray(g2.src)[:m], np.asarray(g2.dst)[:m]
    at0 = (s == 0) | (d == 0)
    _unbiased(draws[:, at0], pe[at0])                  # vertex 0's edges: drawn at its new degree
    w_old = np.asarray(h.weight)[:m]
    np.testing.assert_array_equal(draws[:, ~at0 & (np.arange(m) < int(G.num_edges))],
                                  np.broadcast_to(w_old[~at0 & (np.arange(m) < int(G.num_edges))],
                                                  (300, int((~at0[:int(G.num_edges)]).sum()))))


def test_rebuild_rule():
    h = sparsify(jax.random.key(0), G, sampling_constant=C, rebuild_fraction=0.002)
    g2 = add_edges(G, np.zeros(400, np.int32), np.arange(60, 460))
    h2 = update_sparsifier(jax.random.key(1), h, g2, 400)
    assert int(h2.num_rebuilds) == 1                   # one flagged vertex >= max(1, 0.002 n)
    p, _ = _probs(g2, C)
    np.testing.assert_allclose(np.asarray(h2.prob)[:460], p, rtol=1e-5)


def test_refusals():
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        sparsify(1, G)
    with pytest.raises(ValueError, match="sampling_constant: expected a finite number > 0"):
        sparsify(jax.random.key(0), G, sampling_constant=-1.0)
    with pytest.raises(ValueError, match="resample_factor: expected a number in"):
        sparsify(jax.random.key(0), G, resample_factor=1.0)
    h = sparsify(jax.random.key(0), G)
    with pytest.raises(ValueError, match="num_new: expected an int in"):
        update_sparsifier(jax.random.key(0), h, G, int(G.num_edges) + 1)
