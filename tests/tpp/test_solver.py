import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.tpp import NJDTPP, EventBatch, Hawkes, JumpDiffusion, Poisson, SelfCorrecting, intensity_path, solve

TIGHT = dict(method="diffrax", solver=diffrax.Tsit5(),
             stepsize_controller=diffrax.PIDController(rtol=1e-11, atol=1e-12))


def _seqs():
    times = [[0.3, 0.9, 1.0, 2.6, 4.1], [1.5, 3.0], []]
    return EventBatch.from_sequences(times, T=5.0, max_events=6), times


def test_diffrax_reproduces_hawkes_closed_form(x64):
    b, _ = _seqs()
    model = Hawkes(0.4, 0.7, 1.3)
    res = solve(model.jump_diffusion(), b, **TIGHT)
    ll = np.asarray(model.log_likelihood(b))
    np.testing.assert_allclose(np.asarray(res.log_likelihood), ll, rtol=1e-6)
    # log-intensities just before events and the rescaled gaps
    lam = np.asarray(model.intensity(b, b.times))[..., 0]
    mask = np.asarray(b.mask)
    np.testing.assert_allclose(np.exp(np.asarray(res.eta_events)[..., 0])[mask], lam[mask], rtol=1e-7)
    comp = np.asarray(model.compensator(b, b.times))[..., 0]
    gaps = np.diff(np.concatenate([np.zeros((3, 1)), comp], 1), axis=1)
    np.testing.assert_allclose(np.asarray(res.interval_compensator)[mask], gaps[mask], rtol=1e-7)


def test_diffrax_reproduces_self_correcting_and_poisson(x64):
    b, _ = _seqs()
    sc = SelfCorrecting(0.5, 0.2)
    np.testing.assert_allclose(np.asarray(solve(sc.jump_diffusion(), b, **TIGHT).log_likelihood),
                               np.asarray(sc.log_likelihood(b)), rtol=1e-6)
    p = Poisson(1.7)
    np.testing.assert_allclose(np.asarray(solve(p.jump_diffusion(), b, **TIGHT).log_likelihood),
                               np.asarray(p.log_likelihood(b)), rtol=1e-10)
    # constant intensity: the scan Euler path is exact
    np.testing.assert_allclose(np.asarray(solve(p.jump_diffusion(), b, num_substeps=1).log_likelihood),
                               np.asarray(p.log_likelihood(b)), rtol=1e-12)


def test_exact_flow_reproduces_closed_forms_and_is_stable(x64):
    b, _ = _seqs()
    for model in (Hawkes(0.4, 0.7, 1.3), Hawkes([0.2, 0.5], [[0.3, 0.1], [0.6, 0.2]], 2.0),
                  SelfCorrecting(0.5, 0.2), Poisson([1.7, 0.3])):
        bb = b if model.num_marks == 1 else EventBatch.from_sequences(
            [[0.3, 0.9, 1.0, 2.6], [1.5, 3.0], []], [[0, 1, 1, 0], [1, 0], []], T=5.0, num_marks=2)
        res = solve(model.jump_diffusion(), bb, method="exact")
        np.testing.assert_allclose(np.asarray(res.log_likelihood), np.asarray(model.log_likelihood(bb)), rtol=1e-12)
        comp = np.asarray(model.compensator(bb, bb.times)).sum(-1)
        gaps = np.diff(np.concatenate([np.zeros((3, 1)), comp], 1), axis=1)
        mask = np.asarray(bb.mask)
        np.testing.assert_allclose(np.asarray(res.interval_compensator)[mask], gaps[mask], rtol=1e-12)
    # a stiff Hawkes (beta * gap = 40): log-space Euler with one step per gap diverges, the flow does not
    stiff = Hawkes(0.4, 0.7, 20.0)
    long_gaps = EventBatch.from_sequences([[1.0, 3.0]], T=5.0)
    exact = float(stiff.log_likelihood(long_gaps)[0])
    euler = float(solve(stiff.jump_diffusion(), long_gaps, num_substeps=2, scheme="euler").log_likelihood[0])
    assert not abs(euler - exact) < 1.0  # diverged (non-finite here)
    expo = float(solve(stiff.jump_diffusion(), long_gaps, num_substeps=2).log_likelihood[0])
    assert abs(expo - exact) < 0.2  # the exponential step stays stable (first order once h * beta >> 1)
    ll = float(solve(stiff.jump_diffusion(), long_gaps, method="exact").log_likelihood[0])
    assert ll == pytest.approx(exact, rel=1e-12)


def test_scan_euler_converges_at_first_order_and_matches_diffrax_euler(x64):
    b, _ = _seqs()
    model = Hawkes(0.4, 0.7, 1.3)
    dyn = model.jump_diffusion()
    exact = np.asarray(model.log_likelihood(b))
    lls = {n: np.asarray(solve(dyn, b, num_substeps=n, scheme="euler").log_likelihood) for n in (16, 32)}
    errs = [np.max(np.abs(lls[n] - exact)) for n in (16, 32)]
    assert 1.7 < errs[0] / errs[1] < 2.3  # first order
    dfx = np.asarray(solve(dyn, b, method="diffrax", num_substeps=16).log_likelihood)
    np.testing.assert_allclose(lls[16], dfx, rtol=1e-10)
    # the default exponential scheme: second order, and 10x closer than Euler at equal steps
    expo = {n: np.asarray(solve(dyn, b, num_substeps=n).log_likelihood) for n in (16, 32)}
    errs_e = [np.max(np.abs(expo[n] - exact)) for n in (16, 32)]
    assert 3.4 < errs_e[0] / errs_e[1] < 4.6, errs_e
    assert errs_e[0] < errs[0] / 10


def test_default_scheme_reproduces_the_classical_likelihoods():
    # issue 17: the true models through the generic SDE path (not their closed forms), default settings:
    # exact for Poisson and self-correcting (linear log-intensity between events), < 0.5% for Hawkes
    key = jax.random.key(3)
    for model, rtol in ((Poisson(1.0), 1e-5), (SelfCorrecting(0.5, 0.2), 1e-5), (Hawkes(0.2, 0.8, 1.0), 5e-3)):
        b, _ = model.simulate(key, 50.0, 160, 4)
        exact = float(jnp.sum(model.log_likelihood(b)))
        got = float(jnp.sum(solve(model.jump_diffusion(), b).log_likelihood))
        assert got == pytest.approx(exact, rel=rtol), type(model).__name__
        if isinstance(model, SelfCorrecting):  # the first-order Euler scheme was biased (-17% in the issue)
            euler = float(jnp.sum(solve(model.jump_diffusion(), b, scheme="euler").log_likelihood))
            assert abs(euler - exact) > 0.05 * abs(exact)


def test_paper_convention_equals_shifted_window(x64):
    # conditioned on t_1: the shifted sequence on [0, t_L - t_1] minus the first event's log mu
    b, times = _seqs()
    model = Hawkes(0.4, 0.7, 1.3)
    res = solve(model.jump_diffusion(), b, convention="paper", **TIGHT)
    for i, t in enumerate(times[:2]):
        t = np.asarray(t)
        shifted = EventBatch.from_sequences([t - t[0]], T=t[-1] - t[0])
        ref = float(model.log_likelihood(shifted)[0]) - np.log(0.4)
        assert float(res.log_likelihood[i]) == pytest.approx(ref, rel=1e-6)
    assert float(res.log_likelihood[2]) == 0.0  # empty sequence


@pytest.mark.slow
def test_stochastic_scan_and_diffrax_agree_in_distribution(x64):
    import equinox as eqx

    model = NJDTPP(1, key=jax.random.key(0))
    # give the diffusion a visible size: g(eta) ~ 0.5
    model = eqx.tree_at(lambda m: m.diffusion_net.layers[-1].bias, model, jnp.array([0.5]))
    n = 300
    b = EventBatch.from_sequences([[0.5, 1.2, 2.0]] * n, T=3.0)
    r_scan = solve(model, b, jax.random.key(1), num_substeps=10)
    r_dfx = solve(model, b, jax.random.key(2), method="diffrax", num_substeps=10)
    r_det = solve(model, b, None, num_substeps=10)
    e_scan, e_dfx = np.asarray(r_scan.eta_final[:, 0]), np.asarray(r_dfx.eta_final[:, 0])
    assert np.asarray(r_det.eta_final).std() < 1e-12
    assert 0.6 < e_scan.std() < 1.2  # ~ 0.5 sqrt(3)
    se = np.sqrt(e_scan.var() / n + e_dfx.var() / n)
    assert abs(e_scan.mean() - e_dfx.mean()) < 4 * se
    assert abs(e_scan.std() / e_dfx.std() - 1) < 0.16
    ll_s, ll_d = np.asarray(r_scan.log_likelihood), np.asarray(r_dfx.log_likelihood)
    assert abs(np.median(ll_s) - np.median(ll_d)) < 0.25 * (np.percentile(ll_s, 75) - np.percentile(ll_s, 25))


def test_padding_vmap_and_gradient(x64):
    b, times = _seqs()
    b_long = EventBatch.from_sequences(times, T=5.0, max_events=11)
    dyn = Hawkes(0.4, 0.7, 1.3).jump_diffusion()
    r1 = np.asarray(solve(dyn, b, num_substeps=5).log_likelihood)
    np.testing.assert_allclose(np.asarray(solve(dyn, b_long, num_substeps=5).log_likelihood), r1, rtol=1e-13)
    single = EventBatch.from_sequences([times[1]], T=5.0, max_events=6)
    np.testing.assert_allclose(float(solve(dyn, single, num_substeps=5).log_likelihood[0]), r1[1], rtol=1e-13)

    def f(p):
        from jaxcore.tpp.hawkes import HawkesSDE
        return jnp.sum(solve(HawkesSDE(p[0:1], p[1:2].reshape(1, 1), p[2]), b, num_substeps=5).log_likelihood)

    p = jnp.array([0.4, 0.7, 1.3])
    g = np.asarray(jax.grad(f)(p))
    eps = 1e-6
    fd = [(float(f(p.at[i].add(eps))) - float(f(p.at[i].add(-eps)))) / (2 * eps) for i in range(3)]
    np.testing.assert_allclose(g, fd, rtol=1e-6)


def test_intensity_path_matches_closed_form(x64):
    b, _ = _seqs()
    model = Hawkes(0.4, 0.7, 1.3)
    grid = jnp.linspace(0.0, 5.0, 20001)
    lam = np.asarray(intensity_path(model.jump_diffusion(), b.times[0], b.marks[0], b.mask[0], grid))[:, 0]
    ref = np.asarray(model.intensity(b[0], grid[None]))[0, :, 0]
    # Euler on a fine grid; events land on the next grid point
    assert np.median(np.abs(lam - ref) / ref) < 1e-3
    exact = np.asarray(intensity_path(model.jump_diffusion(), b.times[0], b.marks[0], b.mask[0], grid,
                                      method="exact"))[:, 0]
    assert np.median(np.abs(exact - ref) / ref) < 1e-12


def test_errors():
    b, _ = _seqs()
    dyn = Poisson(1.0).jump_diffusion()
    with pytest.raises(ValueError, match="method: expected one of"):
        solve(dyn, b, method="rk4")
    with pytest.raises(ValueError, match="method: expected 'scan' or 'diffrax' for NJDTPP, which has no closed-form flow"):
        solve(NJDTPP(1, key=jax.random.key(0)), b, method="exact")
    with pytest.raises(ValueError, match="method: expected 'scan' for NJDTPP, which has no closed-form flow"):
        intensity_path(NJDTPP(1, key=jax.random.key(0)), b.times[0], b.marks[0], b.mask[0], jnp.zeros(2),
                       method="exact")
    with pytest.raises(NotImplementedError, match="no closed-form flow"):
        NJDTPP(1, key=jax.random.key(0)).flow(0.0, jnp.zeros(1), 1.0)
    with pytest.raises(ValueError, match="convention: expected one of"):
        solve(dyn, b, convention="full")
    with pytest.raises(ValueError, match="num_substeps: expected an int >= 1"):
        solve(dyn, b, num_substeps=0)
    with pytest.raises(ValueError, match="solver: expected None unless method='diffrax'"):
        solve(dyn, b, solver=diffrax.Tsit5())
    with pytest.raises(TypeError, match="dynamics: expected a jaxcore.tpp.JumpDiffusion or a classical model"):
        solve("poisson", b)
    with pytest.raises(ValueError, match="batch.num_marks: expected 2"):
        solve(Poisson([1.0, 2.0]).jump_diffusion(), b)
    assert issubclass(NJDTPP, JumpDiffusion)
