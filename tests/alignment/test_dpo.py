import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxcore.alignment import DPOState, dpo_init, dpo_loss, dpo_step, fit_dpo, sequence_log_probs
from jaxcore.alignment.dpo import _minibatch_schedule

from ._shared import L, N, model, pairs


def _closed_form(pc, pr, rc, rr, beta):
    m = beta * ((pc - rc) - (pr - rr))
    return np.mean(np.log1p(np.exp(-m)))


def test_loss_closed_form_and_finite_difference_gradient(x64):
    rng = np.random.default_rng(1)
    args = [jnp.asarray(rng.normal(size=6) * 3) for _ in range(4)]
    beta = 0.3
    np.testing.assert_allclose(float(dpo_loss(*args, beta=beta)), _closed_form(*map(np.asarray, args), beta),
                               rtol=1e-12)
    grads = jax.grad(lambda *a: dpo_loss(*a, beta=beta), argnums=(0, 1, 2, 3))(*args)
    eps = 1e-6
    for k in range(4):
        for i in range(6):
            up = [a.at[i].add(eps) if j == k else a for j, a in enumerate(args)]
            dn = [a.at[i].add(-eps) if j == k else a for j, a in enumerate(args)]
            fd = (float(dpo_loss(*up, beta=beta)) - float(dpo_loss(*dn, beta=beta))) / (2 * eps)
            assert abs(float(grads[k][i]) - fd) < 1e-8
    # the chosen and the reference-rejected terms push the same way, the others the opposite way
    assert np.all(np.asarray(grads[0]) < 0) and np.all(np.asarray(grads[1]) > 0)


def test_loss_weights_and_large_margins():
    z = jnp.zeros(2)
    big = jnp.array([1e4, -1e4])
    loss = dpo_loss(big, z, z, z, beta=1.0, weights=jnp.array([0.0, 1.0]))
    assert float(loss) == pytest.approx(1e4)  # -log sigmoid(-1e4), no overflow
    assert float(dpo_loss(big, z, z, z, beta=1.0, weights=jnp.array([1.0, 0.0]))) == pytest.approx(0.0, abs=1e-30)


def test_tabular_bandit_converges_to_tilted_reference(x64):
    """On a bandit with Bradley-Terry preferences, DPO's minimiser is pi_ref exp(r / beta) / Z (Eq. 4)."""
    rng = np.random.default_rng(2)
    a, beta = 5, 0.5
    pi_ref = rng.dirichlet(np.ones(a))
    r = rng.uniform(-1, 1, size=a)
    i, j = np.meshgrid(np.arange(a), np.arange(a), indexing="ij")
    off = i != j
    i, j = i[off], j[off]
    w = jnp.asarray(pi_ref[i] * pi_ref[j] / (1 + np.exp(-(r[i] - r[j]))))  # P(i preferred over j)
    lref = jnp.log(jnp.asarray(pi_ref))

    def loss(theta):
        lp = jax.nn.log_softmax(theta)
        return dpo_loss(lp[i], lp[j], lref[i], lref[j], beta=beta, weights=w)

    opt = optax.adam(0.05)

    @jax.jit
    def run(theta):
        def body(c, _):
            th, s = c
            g = jax.grad(loss)(th)
            u, s = opt.update(g, s)
            return (optax.apply_updates(th, u), s), None
        return jax.lax.scan(body, (theta, opt.init(theta)), None, length=3000)[0][0]

    theta = run(jnp.zeros(a))
    target = pi_ref * np.exp(r / beta)
    np.testing.assert_allclose(np.asarray(jax.nn.softmax(theta)), target / target.sum(), atol=1e-5)


@pytest.mark.slow
def test_model_gradient_matches_finite_differences(x64):
    """d loss / d eps along a random weight direction of the float64 Llama, against central differences."""
    m64 = model().astype(jnp.float64)
    p = pairs()
    flat = lambda a: a.reshape(2 * N, L)  # noqa: E731
    ref = sequence_log_probs(m64, flat(p.tokens), flat(p.mask), flat(p.loss_mask)).reshape(N, 2)
    direction = jax.random.normal(jax.random.key(3), m64.layers[1].w_down.shape, jnp.float64)

    def loss(eps):
        w = m64.layers[1].w_down + eps * direction
        blk = m64.layers[1]
        blk = type(blk)(blk.attn_norm, blk.wqkv, blk.wo, blk.mlp_norm, blk.w_gate_up, w)
        mm = type(m64)(m64.config, m64.embed, (m64.layers[0], blk), m64.final_norm, m64.head)
        lp = sequence_log_probs(mm, flat(p.tokens), flat(p.mask), flat(p.loss_mask)).reshape(N, 2)
        # a rejected/chosen swap makes the margin non-zero at eps = 0
        return dpo_loss(lp[:, 0], lp[:, 1], ref[:, 1], ref[:, 0], beta=0.7)

    g = float(jax.grad(loss)(0.0))
    h = 1e-5
    fd = (float(loss(h)) - float(loss(-h))) / (2 * h)
    assert abs(g - fd) < 1e-7 * max(1.0, abs(fd))
    assert abs(g) > 1e-4


def test_full_batch_fit_equals_repeated_steps_and_lowers_the_loss(compiles):
    opt = optax.sgd(0.5)  # plain gradient steps: Adam's first step g / (|g| + eps) amplifies rounding
    state, m1 = dpo_step(dpo_init(model(), opt), model(), pairs(), optimizer=opt, beta=0.5)
    assert isinstance(state, DPOState) and int(state.step) == 1
    assert float(m1.loss) == pytest.approx(np.log(2), abs=1e-6)  # policy = reference
    state, m2 = dpo_step(state, model(), pairs(), optimizer=opt, beta=0.5)
    assert float(m2.loss) < float(m1.loss)
    assert float(m2.margin) > 0 and float(m2.chosen_reward) > float(m2.rejected_reward)
    # with the full batch every step sees all pairs: the fit is the same two steps
    res = fit_dpo(jax.random.key(0), model(), pairs(), num_steps=2, batch_size=N, optimizer=opt, beta=0.5)
    for a, b in zip(jax.tree_util.tree_leaves(state.policy), jax.tree_util.tree_leaves(res.policy)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(res.history.loss), [float(m1.loss), float(m2.loss)], rtol=1e-5)
    p = pairs()
    flat = lambda a: a.reshape(2 * N, L)  # noqa: E731
    ref = sequence_log_probs(model(), flat(p.tokens), flat(p.mask), flat(p.loss_mask)).reshape(N, 2)
    np.testing.assert_allclose(np.asarray(res.reference_log_probs), np.asarray(ref), rtol=1e-5, atol=1e-5)
    lp = sequence_log_probs(res.policy, flat(p.tokens), flat(p.mask), flat(p.loss_mask)).reshape(N, 2)
    assert float(jnp.mean((lp[:, 0] - ref[:, 0]) - (lp[:, 1] - ref[:, 1]))) > 0
    with compiles() as c:  # same shapes, another key: no new program
        fit_dpo(jax.random.key(3), model(), pairs(), num_steps=2, batch_size=N, optimizer=opt, beta=0.5)
    assert len(c) == 0


@pytest.mark.slow
def test_minibatch_fit_with_progress():
    seen = []
    res = fit_dpo(jax.random.key(1), model(), pairs(), num_steps=6, batch_size=2, learning_rate=1e-2, beta=0.5,
                  progress=lambda step, m: seen.append((step, m["loss"])))
    h = res.history
    assert h.loss.shape == (6,) and float(h.loss[-1]) < float(h.loss[0])
    assert seen and seen[-1][0] == 6 and seen[-1][1] == pytest.approx(float(h.loss[-1]))


def test_refusals():
    opt = optax.adam(1e-3)
    with pytest.raises(ValueError, match="beta: expected a finite number > 0"):
        dpo_loss(jnp.zeros(2), jnp.zeros(2), jnp.zeros(2), jnp.zeros(2), beta=0.0)
    with pytest.raises(ValueError, match="policy_rejected: expected a"):
        dpo_loss(jnp.zeros(2), jnp.zeros(3), jnp.zeros(2), jnp.zeros(2))
    with pytest.raises(ValueError, match="batch_size: expected an int in"):
        fit_dpo(jax.random.key(0), model(), pairs(), num_steps=1, batch_size=N + 1)
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        fit_dpo(0, model(), pairs(), num_steps=1, batch_size=1)
    with pytest.raises(TypeError, match="optimizer: expected an optax.GradientTransformation"):
        dpo_init(model(), "adam")
    with pytest.raises(TypeError, match="state: expected a DPOState"):
        dpo_step((model(), None, 0), model(), pairs(), optimizer=opt)
    with pytest.raises(TypeError, match="pairs: expected a PreferencePairs"):
        dpo_step(dpo_init(model(), opt), model(), pairs().tokens, optimizer=opt)


def test_minibatch_schedule_stratifies_by_block():
    # four blocks of 3 pairs, 1 row of each per step: every block's rows once per 3 steps (one block, the
    # one-device fit's order, is a permutation of all pairs per epoch: the fit tests' case)
    four = np.asarray(jax.jit(_minibatch_schedule, static_argnums=(1, 2, 3, 4))(jax.random.key(2), 12, 4, 6, 4))
    np.testing.assert_array_equal(four // 3, np.tile(np.arange(4), (6, 1)))
    for epoch in (four[:3], four[3:]):
        for d in range(4):
            assert sorted(epoch[:, d]) == [3 * d, 3 * d + 1, 3 * d + 2]
    assert not np.array_equal(four[:3], four[3:])  # a fresh permutation each epoch


def test_mesh_refusals():
    with pytest.raises(TypeError, match="mesh: expected a jax.sharding.Mesh or None"):
        fit_dpo(jax.random.key(0), model(), pairs(), num_steps=1, batch_size=2, mesh="batch")
    if len(jax.devices()) < 3:
        pytest.skip("3 devices needed (tests/conftest.py fakes 4)")
    on = lambda k: jax.sharding.Mesh(np.asarray(jax.devices()[:k]), ("batch",))  # noqa: E731
    with pytest.raises(ValueError, match=r"mesh: expected a first axis \('batch'\) whose size divides pairs \(4\)"):
        fit_dpo(jax.random.key(0), model(), pairs(), num_steps=1, batch_size=3, mesh=on(3))
    with pytest.raises(ValueError, match=r"mesh: expected a first axis \('batch'\) whose size divides batch_size"):
        fit_dpo(jax.random.key(0), model(), pairs(), num_steps=1, batch_size=3, mesh=on(2))


@pytest.mark.parametrize("args, kwargs, name", [
    ((jnp.array([jnp.inf, 0.0]), jnp.zeros(2), jnp.zeros(2), jnp.zeros(2)), {}, "policy_chosen"),
    ((jnp.zeros(2), jnp.zeros(2), jnp.array([0.0, jnp.nan]), jnp.zeros(2)), {}, "reference_chosen"),
    ((jnp.zeros(2),) * 4, {"weights": jnp.array([1.0, -1.0])}, "weights"),
    ((jnp.zeros(2),) * 4, {"weights": jnp.zeros(2)}, "weights"),
    ((jnp.zeros(0),) * 4, {}, "policy_chosen"),
])
def test_dpo_loss_refuses_non_finite_log_probs_bad_weights_and_an_empty_batch(args, kwargs, name):
    from jaxcore.alignment import dpo_loss

    with pytest.raises(ValueError, match=f"{name}: expected"):
        dpo_loss(*args, **kwargs)


def test_dpo_loss_refuses_none_and_non_numeric_inputs():
    # issue 48 item 18: dpo_loss(None, ...) raised JAX's "None is not a valid value for jnp.array".
    from jaxcore.alignment import dpo_loss

    z = jnp.zeros(3)
    assert float(dpo_loss(z, z, z, z)) == pytest.approx(np.log(2.0), rel=1e-6)
    with pytest.raises(TypeError, match="^policy_chosen: expected a real"):
        dpo_loss(None, z, z, z)
    with pytest.raises(TypeError, match="^reference_rejected: expected a real"):
        dpo_loss(z, z, z, ["a", "b", "c"])
    with pytest.raises(TypeError, match="^weights: expected a real"):
        dpo_loss(z, z, z, z, weights="abc")


def _compiled(fn, *args):
    return jax.jit(fn).lower(*args).compile()


def test_the_step_holds_no_host_callback_once_its_ids_are_validated():
    """Traced pairs (``dpo_step`` under ``jit``): a run-time id check (a host callback, which sends every call
    through JAX's Python dispatch) unless ``check_ids=False``, with the same values; concrete pairs are checked
    on the host (their step is the callback-free program)."""
    opt = optax.sgd(0.5)
    st, m, p = dpo_init(model(), opt), model(), pairs()
    progs = {c: _compiled(lambda s, r, q, c=c: dpo_step(s, r, q, optimizer=opt, beta=0.5, check_ids=c), st, m, p)
             for c in (True, False)}
    assert "python_cpu_callback" in progs[True].as_text() and "python_cpu_callback" not in progs[False].as_text()
    got_state, got = progs[False](st, m, p)
    want_state, want = progs[True](st, m, p)
    assert float(got.loss) == pytest.approx(float(want.loss), rel=1e-6)
    for a, b in zip(jax.tree_util.tree_leaves(got_state.policy), jax.tree_util.tree_leaves(want_state.policy)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)
    bad = eqx.tree_at(lambda q: q.tokens, p, p.tokens.at[0, 0, -1].set(10_000))
    with pytest.raises(ValueError, match="pairs.tokens: expected token ids in"):
        dpo_step(st, m, bad, optimizer=opt)  # concrete: refused on the host
    with pytest.raises(Exception, match="token ids in"):  # traced and checked: refused at run time
        jax.block_until_ready(progs[True](st, m, bad))
    with pytest.raises(TypeError, match="check_ids: expected a bool"):
        dpo_step(st, m, p, optimizer=opt, check_ids="no")


@pytest.mark.slow  # two compiled forwards (~4 CPU-s); the step's test above covers the switch by default
def test_sequence_log_probs_check_ids_switch():
    p = pairs()
    toks, mask, loss = (a.reshape(2 * N, L) for a in (p.tokens, p.mask, p.loss_mask))
    progs = {c: _compiled(lambda t, mk, ls, c=c: sequence_log_probs(model(), t, mk, ls, check_ids=c), toks, mask, loss)
             for c in (True, False)}
    assert "python_cpu_callback" in progs[True].as_text() and "python_cpu_callback" not in progs[False].as_text()
    np.testing.assert_allclose(np.asarray(progs[False](toks, mask, loss)),
                               np.asarray(sequence_log_probs(model(), toks, mask, loss)), rtol=1e-6, atol=1e-6)


@pytest.mark.slow  # two compiled fits (~10 CPU-s)
def test_fit_under_jit_holds_no_host_callback_with_check_ids_false():
    opt = optax.sgd(0.5)
    texts = {c: _compiled(lambda m, q, c=c: fit_dpo(jax.random.key(0), m, q, num_steps=1, batch_size=N,
                                                    optimizer=opt, check_ids=c).history.loss, model(), pairs()).as_text()
             for c in (True, False)}
    assert "python_cpu_callback" in texts[True] and "python_cpu_callback" not in texts[False]
