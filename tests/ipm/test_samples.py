"""Tests of jaxcore.ipm.samples: construction, validation errors, grouping."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.ipm import HierarchicalSample, from_groups, hierarchical_sample


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
        (np.zeros((2, 3), bool), None, {}, TypeError, "real numbers"),
        (np.array([[0.0, np.nan]]), None, {}, ValueError, "finite"),
        (np.zeros((2, 3)), np.full((2, 4), 0.25), {}, ValueError, "weights must have shape"),
        (np.zeros((2, 2)), np.array([[1.5, -0.5], [0.5, 0.5]]), {}, ValueError, "non-negative"),
        (np.zeros((2, 2)), np.array([[0.6, 0.6], [0.5, 0.5]]), {}, ValueError, "sum to one, row 0 sums to 1.2"),
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
