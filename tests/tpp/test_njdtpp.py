import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.tpp import NJDTPP, EventBatch, Hawkes, load_checkpoint, save_checkpoint, solve, train


def test_shapes_and_defaults():
    m = NJDTPP(3, key=jax.random.key(0))
    assert m.num_marks == 3 and m.width == 32 and m.depth == 2 and m.activation == "tanh"
    eta = jnp.zeros(3)
    assert m.drift(0.0, eta).shape == (3,)
    assert m.diffusion(0.0, eta).shape == (3,)
    assert m.jump(0.0, eta).shape == (3, 3)
    assert len(m.drift_net.layers) == 3 and m.drift_net.layers[0].weight.shape == (32, 3)
    m2 = NJDTPP(2, key=jax.random.key(0), width=8, depth=1, activation="relu")
    assert m2.drift_net.layers[0].weight.shape == (8, 2) and len(m2.jump_net.layers) == 2


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_fused_drift_and_diffusion_equal_the_separate_networks(depth):
    m = NJDTPP(3, key=jax.random.key(4), width=8, depth=depth, activation="softplus")
    m = eqx.tree_at(lambda z: z.diffusion_net.layers[-1].bias, m, jnp.array([0.3, -0.2, 0.1]))
    eta = jnp.array([0.4, -1.0, 2.0])
    f, g = m.drift_and_diffusion(0.0, eta)
    np.testing.assert_allclose(np.asarray(f), np.asarray(m.drift(0.0, eta)), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.asarray(g), np.asarray(m.diffusion(0.0, eta)), rtol=1e-6, atol=1e-7)


def test_untrained_model_is_close_to_poisson_and_conventions_differ(x64):
    m = NJDTPP(1, key=jax.random.key(0), init_log_rate=np.log(0.5))
    b = EventBatch.from_sequences([[0.5, 1.0, 3.0]], T=4.0)
    ll = float(m.log_likelihood(b)[0])
    assert ll == pytest.approx(3 * np.log(0.5) - 0.5 * 4.0, abs=0.5)
    paper = float(m.log_likelihood(b, convention="paper")[0])
    assert paper != pytest.approx(ll, abs=1e-3)


def test_checkpoint_roundtrip(tmp_path):
    m = NJDTPP(2, key=jax.random.key(1), width=16)
    path = tmp_path / "model.eqx"
    save_checkpoint(path, m)
    m2 = load_checkpoint(path)
    for a, c in zip(jax.tree_util.tree_leaves(eqx.filter(m, eqx.is_array)),
                    jax.tree_util.tree_leaves(eqx.filter(m2, eqx.is_array))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(c))
    assert m2.width == 16 and m2.num_marks == 2
    (tmp_path / "bad").write_bytes(b"\xff\xfe")
    with pytest.raises(ValueError, match="path: expected an NJDTPP checkpoint"):
        load_checkpoint(tmp_path / "bad")


def test_gradient_matches_finite_differences(x64):
    m = NJDTPP(2, key=jax.random.key(2), width=8)
    b = EventBatch.from_sequences([[0.2, 0.9, 1.4], [0.5]], [[0, 1, 1], [1]], T=2.0, num_marks=2)
    key = jax.random.key(3)

    @jax.jit
    def f(eta0, bias):
        mm = eqx.tree_at(lambda z: (z.eta0, z.jump_net.layers[-1].bias), m, (eta0, bias))
        return jnp.sum(solve(mm, b, key, num_substeps=4).log_likelihood)

    eta0, bias = m.eta0, m.jump_net.layers[-1].bias
    g0, g1 = jax.grad(f, argnums=(0, 1))(eta0, bias)
    eps = 1e-6
    for i in range(2):
        fd = (float(f(eta0.at[i].add(eps), bias)) - float(f(eta0.at[i].add(-eps), bias))) / (2 * eps)
        assert float(g0[i]) == pytest.approx(fd, rel=1e-5, abs=1e-8)
    for i in range(4):
        fd = (float(f(eta0, bias.at[i].add(eps))) - float(f(eta0, bias.at[i].add(-eps)))) / (2 * eps)
        assert float(g1[i]) == pytest.approx(fd, rel=1e-5, abs=1e-8)


@pytest.mark.slow  # ~1 min CPU (40 Adam steps with compile); run by -m slow / CI
def test_training_improves_likelihood_on_hawkes_data():
    true = Hawkes(0.2, 0.8, 1.0)
    b, _ = true.simulate(jax.random.key(0), 40.0, 96, 24)
    m = NJDTPP(1, key=jax.random.key(1), width=16, init_log_rate=float(np.log(0.5)))
    res = train(jax.random.key(2), m, b[:16], num_steps=40, batch_size=8, valid_batch=b[16:], eval_every=20)
    assert res.losses.shape == (40,) and res.valid_losses.shape == (2,)
    n = float(b[16:].num_events.sum())
    before = -float(m.log_likelihood(b[16:], jax.random.key(12345)).sum()) / n
    assert np.all(np.isfinite(res.losses))
    assert min(res.valid_losses) < before


def test_errors():
    with pytest.raises(ValueError, match="activation: expected one of"):
        NJDTPP(1, key=jax.random.key(0), activation="swish2")
    with pytest.raises(ValueError, match="num_marks: expected an int >= 1"):
        NJDTPP(0, key=jax.random.key(0))
    with pytest.raises(TypeError, match="model: expected an NJDTPP"):
        train(jax.random.key(0), Hawkes(0.2, 0.1, 1.0), EventBatch.from_sequences([[0.1]]))
    with pytest.raises(ValueError, match="batch.num_marks: expected 2"):
        train(jax.random.key(0), NJDTPP(2, key=jax.random.key(0)), EventBatch.from_sequences([[0.1]]))


def test_njdtpp_fused_drift_jacobian_matches_the_generic_jvp():
    from jaxcore.tpp import JumpDiffusion

    m = NJDTPP(3, key=jax.random.key(0), width=5, depth=2, activation="gelu")
    eta = jnp.array([0.1, -0.3, 0.7])
    f, d = m.drift_and_jacobian_diag(0.0, eta)
    f0, d0 = JumpDiffusion.drift_and_jacobian_diag(m, 0.0, eta)
    np.testing.assert_allclose(np.asarray(f), np.asarray(m.drift(0.0, eta)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(d), np.asarray(d0), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.asarray(d), np.diag(np.asarray(jax.jacfwd(lambda e: m.drift(0.0, e))(eta))),
                               rtol=1e-5, atol=1e-7)


_SC_OPEN = pytest.mark.xfail(strict=False, reason="issues 17/41: at train's default Adam 1e-2 NJDTPP stays +0.05 "
                             "nats/event above the self-correcting truth (near the Poisson fit): the likelihood is a "
                             "narrow valley (Hessian condition number 5,300) that 1e-2 bounces across; at 1e-3 the "
                             "gap was 0.0102 after 1,000 steps and falling (--reproduce tpp runs 2,000), too long "
                             "for this test's budget")


@pytest.mark.slow
@pytest.mark.parametrize("which", [pytest.param("self-correcting", marks=_SC_OPEN), "hawkes"])
def test_njdtpp_fitted_reaches_the_true_model(which):
    # issue 17's check: within max(2 SE, 0.01) nats/event of the true model's test NLL, the learned model
    # scored on a converged solver (160 sub-steps), so that discretisation error cannot flatter it
    from jaxcore.tpp import SelfCorrecting, synthetic_hawkes, synthetic_self_correcting

    truth = SelfCorrecting(0.5, 0.2) if which == "self-correcting" else Hawkes(0.2, 0.8, 1.0)
    gen = synthetic_self_correcting if which == "self-correcting" else synthetic_hawkes
    data = gen(jax.random.key(0), num_sequences=32 + 8 + 32, T=50.0, max_events=300).trim(32)
    train_b, valid, test = data[:32], data[32:40], data[40:]
    rate = float(np.asarray(train_b.num_events).sum() / np.asarray(train_b.T).sum())
    model = NJDTPP(1, key=jax.random.key(1), width=32, init_log_rate=float(np.log(rate)))
    res = train(jax.random.key(2), model, train_b, num_steps=300, batch_size=16, valid_batch=valid,
                eval_every=60, stochastic=False)
    ll_m = np.asarray(solve(res.model, test, num_substeps=160).log_likelihood, np.float64)
    ll_t = np.asarray(truth.log_likelihood(test), np.float64)
    N = float(np.asarray(test.num_events).sum())
    d = ll_t - ll_m
    gap, se = d.sum() / N, np.std(d, ddof=1) * np.sqrt(len(d)) / N
    assert gap <= max(2 * se, 0.01), (gap, se)


def test_load_checkpoint_refuses_truncated_and_padded_files(tmp_path):
    # issue 48 item 19: a truncated checkpoint raised equinox's TreePathError.
    m = NJDTPP(1, key=jax.random.key(0), width=4, depth=1)
    path = tmp_path / "model.eqx"
    save_checkpoint(path, m)
    data = path.read_bytes()
    assert eqx.tree_equal(load_checkpoint(path), m)
    for name, content, match in (("short", data[:-7], "whose weights do not read back"),
                                 ("header", data[:data.index(b"\n") + 1], "whose weights do not read back"),
                                 ("long", data + b"\x00", "with bytes after the weights"),
                                 ("keys", b'{"width": 4}\n', "with the header")):
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=f"^path: expected an NJDTPP checkpoint .*{match}"):
            load_checkpoint(tmp_path / name)
