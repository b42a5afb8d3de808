"""FALCON training: recovery of separable fine classes, the result's contents, refused input."""

import jax
import numpy as np
import pytest

from jaxcore import finegrained as fg

GROUPS = [[0, 1], [2, 3]]


@pytest.fixture(scope="module")
def blobs():
    return fg.coarse_blobs(jax.random.key(0), 30, GROUPS, 8, separation=12.0)


def test_blobs_recovered_exactly(blobs):
    x, fine, coarse, ftc = blobs
    reports = []
    r = fg.fit(jax.random.key(1), x, coarse, 4, num_steps=600, num_neighbors=5, width=32, depth=2,
               learning_rate=1e-2, batch_size=64, beta=0.05, balance_steps=600,
               progress=lambda step, m: reports.append(step))
    pred = np.asarray(fg.predict(r.teacher, x))
    assert fg.cluster_accuracy(np.asarray(fine), pred) == 1.0
    assert fg.map_accuracy(np.asarray(fine), pred, np.asarray(ftc), np.asarray(r.fine_to_coarse)) == 1.0
    m = np.asarray(r.assignment)
    assert np.all(m.sum(1) == 1) and np.all(m.sum(0) >= 1)
    assert r.neighbors.shape == (120, 5) and np.all(np.asarray(coarse)[np.asarray(r.neighbors)]
                                                    == np.asarray(coarse)[:, None])
    assert set(r.history) == {"total", "coarse", "fine", "consistency", "entropy_gap", "tau"}
    assert all(v.shape == (600,) for v in r.history.values())
    assert float(r.history["tau"][0]) == 1.0 and float(r.history["tau"][-1]) == 0.0
    assert float(r.history["total"][-50:].mean()) < float(r.history["total"][:50].mean())
    assert reports[-1] == 600 and len(reports) == 20  # one report per solve_every=30 steps
    assert fg.embed(r.teacher, x).shape == (120, 32)


def test_fixed_assignment_is_kept(blobs):
    x, fine, coarse, ftc = blobs
    m = np.eye(2, dtype=np.float32)[[1, 1, 0, 0]]  # a wrong hierarchy: fine 0, 1 under coarse 1
    r = fg.fit(jax.random.key(1), x, coarse, 4, num_steps=600, num_neighbors=5, width=32, depth=2,
               learning_rate=1e-2, batch_size=64, beta=0.05, balance_steps=600, assignment=m)
    assert np.array_equal(np.asarray(r.assignment), m) and np.asarray(r.fine_to_coarse).tolist() == [1, 1, 0, 0]
    pred = np.asarray(fg.predict(r.teacher, x))
    # the coarse labels are still honoured: coarse-0 samples go to fine classes 2, 3
    assert np.all(np.isin(pred[np.asarray(coarse) == 0], [2, 3]))


def test_bad_input(blobs):
    x, _, coarse, _ = blobs
    k = jax.random.key(0)
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        fg.fit(0, x, coarse, 4)
    with pytest.raises(ValueError, match="num_fine: expected"):
        fg.fit(k, x, coarse, 1)
    with pytest.raises(ValueError, match="coarse_labels: expected length"):
        fg.fit(k, x, coarse[:-1], 4)
    with pytest.raises(TypeError, match="coarse_labels: expected an int array"):
        fg.fit(k, x, np.asarray(coarse, float), 4)
    with pytest.raises(ValueError, match="features: expected finite"):
        fg.fit(k, np.where(np.arange(120)[:, None] == 0, np.nan, x),
               coarse, 4)
    with pytest.raises(ValueError, match="neighbors: expected indices"):
        fg.fit(k, x, coarse, 4, neighbors=np.full((120, 2), 500))
    with pytest.raises(ValueError, match="ema_decay: expected"):
        fg.fit(k, x, coarse, 4, ema_decay=1.0)
    with pytest.raises(ValueError, match="model: expected a FalconMLP with"):
        fg.fit(k, x, coarse, 4, model=fg.FalconMLP(8, 3, key=k))
    with pytest.raises(ValueError, match="assignment: expected"):
        fg.fit(k, x, coarse, 4, assignment=np.ones((4, 2)))
    with pytest.raises(ValueError, match="features: expected 8 columns"):
        fg.predict(fg.FalconMLP(8, 3, key=k), np.ones((2, 7)))


def test_more_neighbours_than_the_smallest_coarse_class_allows_is_said_not_silent():
    x = np.random.default_rng(0).normal(size=(12, 3)).astype(np.float32)
    coarse = np.array([0] * 9 + [1] * 3)
    with pytest.warns(UserWarning, match="num_neighbors: 5 asked, but the smallest coarse class holds 3"):
        r = fg.fit(jax.random.key(1), x, coarse, 3, num_steps=2, num_neighbors=5, width=8, depth=1, batch_size=4)
    assert r.neighbors.shape[1] == 2
