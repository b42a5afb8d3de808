import numpy as np
import pytest

from jaxcore.causal import is_dag, random_linear_gaussian_network
from jaxcore.datasets.causal_data import sample_linear_gaussian_network


def test_random_network_draw_order_and_covariance():
    rng = np.random.default_rng(3)
    net = random_linear_gaussian_network(rng, 5, 0.5, noise_variances="unequal")
    # the documented draw order, replayed by hand
    ref = np.random.default_rng(3)
    a = np.triu((ref.random((5, 5)) < 0.5).astype(np.int32), 1)
    perm = ref.permutation(5)
    adj = a[np.ix_(perm, perm)]
    w = adj * ref.uniform(0.5, 2.0, adj.shape) * ref.choice([-1.0, 1.0], adj.shape)
    var = ref.uniform(0.25, 2.0, 5)
    np.testing.assert_array_equal(net["adjacency"], adj)
    np.testing.assert_array_equal(net["weights"], w)
    np.testing.assert_array_equal(net["variance"], var)
    assert bool(is_dag(net["adjacency"]))
    nz = np.abs(net["weights"][net["adjacency"] == 1])
    assert np.all((nz >= 0.5) & (nz <= 2.0)) and np.all(net["weights"][net["adjacency"] == 0] == 0)
    x = sample_linear_gaussian_network(net, 40000, seed=rng)
    inv = np.linalg.inv(np.eye(5) - net["weights"])
    cov = inv.T @ np.diag(net["variance"]) @ inv  # closed form of the SEM's covariance
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.05 * np.abs(cov).max())


def test_random_network_bad_inputs():
    assert random_linear_gaussian_network(0, 3, 0.0)["adjacency"].sum() == 0
    assert random_linear_gaussian_network(0, 4, 1.0)["adjacency"].sum() == 6
    np.testing.assert_array_equal(random_linear_gaussian_network(0, 3, 0.5)["variance"], 1.0)
    with pytest.raises(ValueError, match="edge_probability"):
        random_linear_gaussian_network(0, 3, 1.5)
    with pytest.raises(ValueError, match="noise_variances"):
        random_linear_gaussian_network(0, 3, 0.5, noise_variances="laplace")
