import math

import numpy as np
import pytest
from scipy.special import gammaln, multigammaln

from jaxcore.causal import (
    dag_log_scores,
    enumerate_dags,
    bdeu_local_scores,
    bge_local_scores,
    erdos_renyi_prior_table,
    nig_local_scores,
    order_modular_prior_table,
    parent_set_list,
    sparsity_prior_table,
)


def _bge_set_direct(x, idx, am, aw):
    """log p(D_Y) for the Normal-Wishart marginal of the variables idx (Geiger & Heckerman 2002)."""
    n, d = x.shape
    l = len(idx)
    if l == 0:
        return 0.0
    t = am * (aw - d - 1) / (am + 1)
    xb = x.mean(0)
    xc = x - xb
    tn = t * np.eye(d) + xc.T @ xc + (n * am / (n + am)) * np.outer(xb, xb)
    a = aw - d + l  # degrees of freedom of the marginal Wishart
    t0 = t * np.eye(l)
    tnn = tn[np.ix_(idx, idx)]
    return (
        -l * n / 2 * math.log(math.pi)
        + l / 2 * math.log(am / (am + n))
        + multigammaln((n + a) / 2, l)
        - multigammaln(a / 2, l)
        + a / 2 * np.linalg.slogdet(t0)[1]
        - (n + a) / 2 * np.linalg.slogdet(tnn)[1]
    )


def test_bge_matches_direct_marginal_ratio(x64):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(7, 4))
    x[:, 2] += x[:, 0]
    am, aw = 1.3, 6.5
    table = np.asarray(bge_local_scores(x, alpha_mu=am, alpha_w=aw).table)
    for j in range(4):
        others = [i for i in range(4) if i != j]
        for c in range(8):
            pa = [others[b] for b in range(3) if (c >> b) & 1]
            want = _bge_set_direct(x, sorted(pa + [j]), am, aw) - _bge_set_direct(x, sorted(pa), am, aw)
            np.testing.assert_allclose(table[j, c], want, rtol=1e-10, atol=1e-10)


def test_bge_full_set_equals_sequential_student_t(x64):
    """Chain rule: p(D) = prod_n p(x_n | x_<n) with the Normal-Wishart multivariate-t predictive."""
    rng = np.random.default_rng(1)
    d, n = 3, 6
    x = rng.normal(size=(n, d))
    am, aw = 1.0, d + 2.0
    t = am * (aw - d - 1) / (am + 1)
    mu, kappa, nu, T = np.zeros(d), am, aw, t * np.eye(d)
    logp = 0.0
    for k in range(n):
        df = nu - d + 1
        scale = T * (kappa + 1) / (kappa * df)
        diff = x[k] - mu
        logp += (
            gammaln((df + d) / 2) - gammaln(df / 2) - d / 2 * math.log(df * math.pi)
            - 0.5 * np.linalg.slogdet(scale)[1]
            - (df + d) / 2 * math.log1p(diff @ np.linalg.solve(scale, diff) / df)
        )
        T = T + kappa / (kappa + 1) * np.outer(diff, diff)
        mu = (kappa * mu + x[k]) / (kappa + 1)
        kappa += 1
        nu += 1
    table = np.asarray(bge_local_scores(x, alpha_mu=am, alpha_w=aw).table)
    # complete DAG 0 -> 1 -> 2, 0 -> 2: node j has parents {0..j-1}
    full = table[0, 0] + table[1, 1] + table[2, 3]
    np.testing.assert_allclose(full, logp, rtol=1e-10)


def test_bge_score_equivalence(x64):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(15, 4))
    x[:, 1] += 0.8 * x[:, 0]
    dags = enumerate_dags(4)
    scores = np.asarray(dag_log_scores(bge_local_scores(x), dags.parents))
    for c in range(dags.num_mecs):
        s = scores[dags.mec == c]
        assert np.ptp(s) < 1e-9 * max(1.0, np.abs(s).max())
    assert np.ptp(scores) > 1.0  # not trivially constant


def test_nig_matches_student_t_marginal(x64):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(9, 3))
    v, a0, b0 = 0.7, 2.0, 1.5
    table = np.asarray(nig_local_scores(x, weight_scale=v, a0=a0, b0=b0, center=False).table)
    n = x.shape[0]
    for j in range(3):
        others = [i for i in range(3) if i != j]
        for c in range(4):
            pa = [others[b] for b in range(2) if (c >> b) & 1]
            xp = x[:, pa]
            cov = (b0 / a0) * (np.eye(n) + v * xp @ xp.T)
            y = x[:, j]
            df = 2 * a0
            want = (
                gammaln((df + n) / 2) - gammaln(df / 2) - n / 2 * math.log(df * math.pi)
                - 0.5 * np.linalg.slogdet(cov)[1]
                - (df + n) / 2 * math.log1p(y @ np.linalg.solve(cov, y) / df)
            )
            np.testing.assert_allclose(table[j, c], want, rtol=1e-10)


def test_bdeu_matches_pgmpy():
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pgmpy")
    from pgmpy.structure_score import BDeu

    rng = np.random.default_rng(4)
    x = np.stack([rng.integers(0, 2, 60), rng.integers(0, 3, 60), rng.integers(0, 2, 60)], 1)
    x[:, 2] = (x[:, 0] + (rng.random(60) < 0.2)) % 2
    table = np.asarray(bdeu_local_scores(x, [2, 3, 2], equivalent_sample_size=5.0).table)
    df = pd.DataFrame(x, columns=["a", "b", "c"])
    sc = BDeu(df, equivalent_sample_size=5, state_names={"a": [0, 1], "b": [0, 1, 2], "c": [0, 1]})
    names = ["a", "b", "c"]
    for j in range(3):
        others = [i for i in range(3) if i != j]
        for c in range(4):
            pa = [names[others[b]] for b in range(2) if (c >> b) & 1]
            np.testing.assert_allclose(table[j, c], sc.local_score(names[j], tuple(pa)), rtol=1e-4)


def test_max_parents_and_priors():
    x = np.random.default_rng(5).normal(size=(10, 4))
    t = np.asarray(bge_local_scores(x, max_parents=1).table)
    nodes, cidx = parent_set_list(4, 1)
    assert len(cidx) == 4 * 4
    pop = np.array([bin(c).count("1") for c in range(8)])
    assert np.all(np.isneginf(t[:, pop > 1])) and np.all(np.isfinite(t[:, pop <= 1]))
    er = np.asarray(erdos_renyi_prior_table(5, 0.3).table)
    np.testing.assert_allclose(np.exp(er).sum(1), 1.0, rtol=1e-6)
    om = np.asarray(order_modular_prior_table(5).table)
    assert om[0, 0] == 0 and np.isclose(om[0, 1], -math.log(4))
    np.testing.assert_allclose(np.asarray(sparsity_prior_table(3, 2.0).table)[0], [0, -2, -2, -4])


def test_bad_inputs():
    x = np.random.default_rng(6).normal(size=(10, 3))
    bad = x.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        bge_local_scores(bad)
    with pytest.raises(ValueError, match="alpha_w"):
        bge_local_scores(x, alpha_w=1.0)
    with pytest.raises(ValueError, match="shape"):
        bge_local_scores(x[0])
    with pytest.raises(ValueError, match="arity"):
        bdeu_local_scores(np.array([[0, 2], [1, 0]]), [2, 2])
    with pytest.raises(ValueError, match="edge_probability"):
        erdos_renyi_prior_table(3, 1.5)
