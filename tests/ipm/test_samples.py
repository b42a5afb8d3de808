"""Tests of jaxcore.ipm.samples: construction, validation errors, grouping."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxcore.ipm import (
    HierarchicalSample,
    from_groups,
    hierarchical_sample,
    hipm_features,
    inner_cost_matrix,
    pad_atoms,
)


def test_uniform_default_and_flag():
    s = hierarchical_sample(np.zeros((3, 4), np.float32))
    assert isinstance(s, HierarchicalSample)
    assert s.n == 3 and s.m == 4 and s.dim == 1 and s.uniform
    np.testing.assert_allclose(s.weights, 0.25)
    w = np.full((3, 4), 0.25)
    assert hierarchical_sample(np.zeros((3, 4)), w).uniform
    w2 = np.array([[0.5, 0.5, 0, 0]] * 3)
    assert not hierarchical_sample(np.zeros((3, 4)), w2).uniform


def test_means_and_dims():
    atoms = np.array([[0.0, 1.0], [2.0, 4.0]])
    w = np.array([[0.25, 0.75], [0.5, 0.5]])
    s = hierarchical_sample(atoms, w)
    np.testing.assert_allclose(s.means(), [0.75, 3.0], rtol=1e-6)
    s3 = hierarchical_sample(np.ones((2, 5, 3)))
    assert s3.dim == 3 and s3.means().shape == (2, 3)
    assert hierarchical_sample(np.ones((2, 5), np.int32)).atoms.dtype == jnp.result_type(float)


@pytest.mark.parametrize(
    "atoms, weights, kwargs, exc, match",
    [
        (np.zeros(4), None, {}, ValueError, "shape \\[n, m\\]"),
        (np.zeros((2, 3, 4, 5)), None, {}, ValueError, "shape \\[n, m\\]"),
        (np.zeros((0, 3)), None, {}, ValueError, "non-empty"),
        ("abc", None, {}, TypeError, "array"),
        (np.zeros((2, 3), bool), None, {}, TypeError, "real-valued atoms"),
        (np.array([[0.0, np.nan]]), None, {}, ValueError, "finite"),
        (np.zeros((2, 3)), np.full((2, 4), 0.25), {}, ValueError, "weights of shape"),
        (np.zeros((2, 2)), np.array([[1.5, -0.5], [0.5, 0.5]]), {}, ValueError, "non-negative"),
        (np.zeros((2, 2)), np.array([[0.6, 0.6], [0.5, 0.5]]), {}, ValueError, "sum to one, got row 0 sums to 1.2"),
        (np.array([[0.0, 2.0]]), None, {"interval": (0.0, 1.0)}, ValueError, "lie in the interval"),
        (np.zeros((2, 2)), None, {"interval": (1.0, 0.0)}, ValueError, "a < b"),
        (np.zeros((2, 2, 3)), None, {"max_dim": 1}, ValueError, "d <= 1"),
    ],
)
def test_validation_errors(atoms, weights, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        hierarchical_sample(atoms, weights, **kwargs)


def test_interval_ignores_zero_weight_padding():
    atoms = np.array([[0.5, 7.0]])
    s = hierarchical_sample(atoms, np.array([[1.0, 0.0]]), interval=(0.0, 1.0))
    assert s.n == 1


def test_traced_validation_raises_at_runtime():
    f = jax.jit(lambda a, w: hierarchical_sample(a, w).weights)
    f(jnp.zeros((2, 2)), jnp.full((2, 2), 0.5))  # fine
    with pytest.raises(Exception, match="sum to one"):
        jax.block_until_ready(f(jnp.zeros((2, 2)), jnp.full((2, 2), 0.7)))


def test_from_groups_pads_with_zero_weights():
    values = np.array([1.0, 2.0, 3.0, 10.0, 20.0])
    groups = np.array(["b", "a", "b", "a", "b"])
    s, labels = from_groups(values, groups)
    assert list(labels) == ["a", "b"] and s.atoms.shape == (2, 3)
    np.testing.assert_allclose(s.weights.sum(1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(s.means(), [6.0, 8.0], rtol=1e-6)
    np.testing.assert_allclose(s.weights[0], [0.5, 0.5, 0.0])
    with pytest.raises(ValueError, match="same length"):
        from_groups(values, groups[:3])


def test_pad_atoms_keeps_the_measures(x64):
    rng = np.random.default_rng(5)
    x, y = rng.random((4, 3)), rng.random((5, 6))
    px = pad_atoms(x, 6)
    assert px.atoms.shape == (4, 6) and not px.uniform
    np.testing.assert_allclose(px.weights.sum(1), 1.0)
    np.testing.assert_allclose(px.atoms[:, 3:], np.repeat(x[:, :1], 3, axis=1))
    np.testing.assert_allclose(px.means(), x.mean(1), rtol=1e-12)
    # the d_lip features (which determine d_lip) and the inner costs (which determine WoW) are unchanged
    np.testing.assert_allclose(hipm_features(px, interval=(0.0, 1.0), num_grid=7),
                               hipm_features(x, interval=(0.0, 1.0), num_grid=7), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(inner_cost_matrix(px, y), inner_cost_matrix(x, y), rtol=1e-12)
    from jaxcore.ipm import samples as samples_module

    size = samples_module._pad_jit._cache_size()
    pad_atoms(x ** 2, 6)  # the same shapes: no new compilation
    assert samples_module._pad_jit._cache_size() == size
    s = hierarchical_sample(x)
    same = pad_atoms(s, 3)
    assert same.uniform and np.array_equal(same.atoms, s.atoms) and np.array_equal(same.weights, s.weights)
    with pytest.raises(ValueError, match="num_atoms: expected an int >= 3, got 2"):
        pad_atoms(x, 2)


@settings(max_examples=12)
@given(st.floats(-10, 10, width=32), st.floats(-10, 10, width=32))
def test_property_interval_validation(a, b):
    """An interval (a, b) is accepted exactly when a < b; atoms inside it pass, atoms outside fail."""
    atoms = np.array([[0.0, 0.0]])
    inside = a <= 0.0 <= b
    if not a < b:
        with pytest.raises(ValueError, match="interval: expected a finite interval"):
            hierarchical_sample(atoms, interval=(a, b))
    elif inside:
        assert hierarchical_sample(atoms, interval=(a, b)).n == 1
    else:
        with pytest.raises(ValueError, match="sample: expected atoms that lie in the interval"):
            hierarchical_sample(atoms, interval=(a, b))


def test_hierarchical_sample_subsets():
    import jax

    from jaxcore.ipm import HierarchicalSample, hierarchical_sample

    rng = np.random.default_rng(0)
    s = hierarchical_sample(rng.normal(size=(5, 3)), rng.dirichlet(np.ones(3), size=5))
    np.testing.assert_array_equal(np.asarray(s[1:3].atoms), np.asarray(s.atoms[1:3]))
    sub = s[np.array([4, 0, 4, -1])]
    assert isinstance(sub, HierarchicalSample) and sub.n == 4 and sub.uniform == s.uniform
    np.testing.assert_array_equal(np.asarray(sub.means()), np.asarray(s.means())[[4, 0, 4, 4]])
    mask = np.array([True, False, True, False, False])
    np.testing.assert_array_equal(np.asarray(s[mask].weights), np.asarray(s.weights)[mask])
    assert s[2].n == 1 and s[-5].means().tolist() == s[0].means().tolist()
    # under jit: integer indices, checked at run time
    pick = jax.jit(lambda smp, i: smp[i].means())
    np.testing.assert_allclose(np.asarray(pick(s, jnp.array([1, 3]))), np.asarray(s.means())[[1, 3]])
    with pytest.raises(Exception, match=r"index: expected indices in \[-5, 5\)"):
        jax.block_until_ready(pick(s, jnp.array([1, 7])))
    with pytest.raises(IndexError, match=r"index: expected indices in \[-5, 5\)"):
        s[np.array([5])]
    with pytest.raises(IndexError, match=r"index: expected a boolean mask of shape \[5\]"):
        s[np.array([True, False])]
    with pytest.raises(TypeError, match="index: expected an int, a slice"):
        s[1.5]
    with pytest.raises(TypeError, match="index: expected an int, a slice"):
        s[0, 1]
