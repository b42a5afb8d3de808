"""Oracle tests of jaxcore.sam.trainer (step, sharpness_aware, train): base-optimizer limit, manual SAM/OBF, m-sharpness, jit, devices, models."""

import functools

import chex
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.flatten_util import ravel_pytree
from jax.sharding import Mesh, PartitionSpec as P

from jaxcore.sam import ASAM, GSAM, OBF, SAM, RandomDirection, init, obf_alpha, obf_loss, sharpness_aware, step


def _mlp_params(key, dtype=jnp.float64, d_in=5, h=7, c=3):
    k1, k2 = jax.random.split(key)
    return {
        "w1": jax.random.normal(k1, (d_in, h), dtype) / np.sqrt(d_in),
        "b1": jnp.full((h,), 0.1, dtype),
        "w2": jax.random.normal(k2, (h, c), dtype) / np.sqrt(h),
        "b2": jnp.zeros((c,), dtype),
    }


def _logits(p, x):
    return jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def loss_fn(p, model_state, batch):
    del model_state
    z = _logits(p, batch["x"])
    loss = optax.softmax_cross_entropy_with_integer_labels(z.astype(jnp.float32 if z.dtype == jnp.bfloat16 else z.dtype), batch["label"]).mean()
    return loss, {"logits": z}


def _batch(key, n=8, d_in=5, c=3, dtype=jnp.float64):
    kx, ky = jax.random.split(key)
    return {"x": jax.random.normal(kx, (n, d_in), dtype), "label": jax.random.randint(ky, (n,), 0, c)}


def _flat(t):
    return np.asarray(ravel_pytree(jax.tree.map(lambda x: np.asarray(x, np.float64), t))[0])


def _run(pert, obf=None, steps=1, opt=None, k=None, params=None, batch=None, jit=True):
    opt = opt or optax.sgd(0.1)
    params = _mlp_params(jax.random.key(0)) if params is None else params
    batch = _batch(jax.random.key(1)) if batch is None else batch
    tr = sharpness_aware(loss_fn, opt, pert, obf, num_micro_batches=k)
    st = tr.init(params)
    f = jax.jit(tr.step) if jit else tr.step
    for i in range(steps):
        params, st, info = f(params, st, batch, key=jax.random.key(i))
    return params, st, info


@functools.partial(jax.jit, static_argnames=("obf",))
def _manual_sam(params, batch, rho, lr, obf=None):
    """Independent SAM/OBF step on flat vectors (float64)."""
    flat, unravel = ravel_pytree(params)
    L = lambda v, b: loss_fn(unravel(v), None, b)[0]  # noqa: E731
    if obf is None:
        h = jax.grad(L)(flat, batch)
    else:
        z = _logits(params, batch["x"])
        a = obf_alpha(z, batch["label"], obf.gamma, obf.lam, obf.sigmoid)
        h = jax.grad(lambda v: obf_loss(_logits(unravel(v), batch["x"]), batch["label"], a, obf.sigmoid))(flat)
    eps = rho * h / jnp.linalg.norm(h)
    gp = jax.grad(L)(flat + eps, batch)
    return unravel(flat - lr * gp)


@pytest.mark.parametrize("pert", [SAM(0.0), ASAM(0.0), GSAM(0.0, alpha=0.3), RandomDirection(0.0)])
def test_rho_zero_reproduces_base_optimizer_exactly(x64, pert):
    opt = optax.chain(optax.add_decayed_weights(1e-3), optax.sgd(0.1, momentum=0.9))
    ref, _, _ = _run(None, opt=opt, steps=3)
    out, _, _ = _run(pert, opt=opt, steps=3)
    if isinstance(pert, GSAM):
        # g_perp = h - <h, u> u is zero only up to rounding when h == g_p.
        np.testing.assert_allclose(_flat(out), _flat(ref), rtol=1e-14, atol=1e-16)
    else:
        np.testing.assert_array_equal(_flat(out), _flat(ref))


def test_base_optimizer_path_equals_optax(x64):
    params, batch = _mlp_params(jax.random.key(0)), _batch(jax.random.key(1))
    opt = optax.adam(1e-2)
    g = jax.grad(lambda p: loss_fn(p, None, batch)[0])(params)
    u, _ = opt.update(g, opt.init(params), params)
    ref = optax.apply_updates(params, u)
    out, _, _ = _run(None, opt=opt, params=params, batch=batch)
    np.testing.assert_allclose(_flat(out), _flat(ref), rtol=1e-13)


def test_sam_step_equals_manual_sam(x64):
    params, batch = _mlp_params(jax.random.key(0)), _batch(jax.random.key(1))
    out, _, info = _run(SAM(0.2), params=params, batch=batch)
    np.testing.assert_allclose(_flat(out), _flat(_manual_sam(params, batch, 0.2, 0.1)), rtol=1e-12)
    assert float(info.perturbed_loss) > float(info.loss)  # ascent raises the loss


def test_obf_step_equals_manual_obf(x64):
    params, batch = _mlp_params(jax.random.key(0)), _batch(jax.random.key(1))
    for obf in (OBF(), OBF(gamma=0.5, sigmoid=False)):
        out, _, _ = _run(SAM(0.2), obf, params=params, batch=batch)
        np.testing.assert_allclose(_flat(out), _flat(_manual_sam(params, batch, 0.2, 0.1, obf)), rtol=1e-12)


def test_gsam_alpha_zero_equals_sam(x64):
    a, _, _ = _run(GSAM(0.1, alpha=0.0), steps=2)
    b, _, _ = _run(SAM(0.1), steps=2)
    np.testing.assert_allclose(_flat(a), _flat(b), rtol=1e-14)
    c, _, _ = _run(GSAM(0.1, alpha=0.5), steps=2)
    assert not np.allclose(_flat(c), _flat(b))


def test_m_equal_to_batch_is_sam_and_m_sharpness_averages_micro_batches(x64):
    params, batch = _mlp_params(jax.random.key(0)), _batch(jax.random.key(1))
    a, _, _ = _run(SAM(0.1), k=1, params=params, batch=batch)
    b, _, _ = _run(SAM(0.1), k=None, params=params, batch=batch)
    np.testing.assert_array_equal(_flat(a), _flat(b))
    # m = 2 (k = 4 micro-batches): the direction is the mean of four independent SAM gradients.
    out, _, _ = _run(SAM(0.1), k=4, params=params, batch=batch)
    flat, unravel = ravel_pytree(params)
    gps = []
    for i in range(4):
        mb = jax.tree.map(lambda x: x[2 * i : 2 * i + 2], batch)
        w1 = ravel_pytree(_manual_sam(params, mb, 0.1, 1.0))[0]
        gps.append(flat - w1)  # = lr * g_p with lr = 1
    np.testing.assert_allclose(_flat(out), np.asarray(flat - 0.1 * np.mean(gps, axis=0)), rtol=1e-12)


def test_jit_equals_no_jit(x64):
    for pert, obf, k in [(GSAM(0.1, 0.2), OBF(), None), (RandomDirection(0.1), None, None)]:
        a, _, ia = _run(pert, obf, k=k, jit=True)
        b, _, ib = _run(pert, obf, k=k, jit=False)
        np.testing.assert_allclose(_flat(a), _flat(b), rtol=1e-12)
        np.testing.assert_allclose(ia.loss, ib.loss, rtol=1e-12)


def test_zero_gradient_no_nan():
    # A loss that does not depend on the parameters: zero gradient everywhere.
    def flat_loss(p, s, b):
        return jnp.sum(b["x"]) * 0.0 + 1.0, {"logits": jnp.zeros((b["x"].shape[0], 3)) + 0.0 * p["w"].sum()}

    p = {"w": jnp.ones((2, 2))}
    b = {"x": jnp.ones((4, 2)), "label": jnp.zeros(4, jnp.int32)}
    for pert in (SAM(0.1), ASAM(0.1), GSAM(0.1, 0.5)):
        tr = sharpness_aware(flat_loss, optax.sgd(0.1), pert)
        out, _, info = jax.jit(tr.step)(p, tr.init(p), b)
        assert np.all(np.isfinite(out["w"])) and np.all(out["w"] == 1.0)
        assert float(info.ascent_norm) == 0.0


@pytest.mark.slow  # CPU budget of the default run; still run by .ci/run (pytest -m slow)
def test_bf16_params():
    p32 = _mlp_params(jax.random.key(0), jnp.float32)
    p16 = jax.tree.map(lambda x: x.astype(jnp.bfloat16), p32)
    b32 = _batch(jax.random.key(1), dtype=jnp.float32)
    b16 = {"x": b32["x"].astype(jnp.bfloat16), "label": b32["label"]}
    out16, _, info = _run(ASAM(0.5), params=p16, batch=b16, opt=optax.sgd(0.5))
    out32, _, _ = _run(ASAM(0.5), params=p32, batch=b32, opt=optax.sgd(0.5))
    assert all(x.dtype == jnp.bfloat16 for x in jax.tree.leaves(out16))
    assert np.isfinite(float(info.loss))
    d16, d32 = _flat(out16) - _flat(p32), _flat(out32) - _flat(p32)
    assert np.linalg.norm(d16 - d32) < 0.1 * np.linalg.norm(d32) + 1e-2


def test_schedule_rho_is_used(x64):
    params, batch = _mlp_params(jax.random.key(0)), _batch(jax.random.key(1))
    out, _, info = _run(SAM(lambda count: 0.2 + 0.0 * count), params=params, batch=batch)
    np.testing.assert_allclose(_flat(out), _flat(_manual_sam(params, batch, 0.2, 0.1)), rtol=1e-12)
    np.testing.assert_allclose(info.rho, 0.2)


def test_multi_device_synchronised_equals_concatenated_batch(x64):
    devs = jax.devices()
    if len(devs) < 4:
        pytest.skip("needs 4 (fake) devices from tests/conftest.py")
    mesh = Mesh(np.array(devs[:4]), ("data",))
    params, batch = _mlp_params(jax.random.key(0)), _batch(jax.random.key(1), n=16)
    opt = optax.sgd(0.1)
    for pert, obf, syncs in [(SAM(0.2), None, (True, False)), (GSAM(0.2, alpha=0.4), OBF(sigmoid=False), (True,))]:
        ref, _, ref_info = _run(pert, obf, params=params, batch=batch, opt=opt)
        for sync in syncs:
            tr = sharpness_aware(loss_fn, opt, pert, obf, axis_name="data", sync_perturbation=sync)
            st = tr.init(params)
            f = jax.jit(jax.shard_map(lambda p, s, b: (lambda o: (o[0], o[2].loss))(tr.step(p, s, b)), mesh=mesh,
                                      in_specs=(P(), P(), P("data")), out_specs=(P(), P())))
            out, loss = f(params, st, batch)
            np.testing.assert_allclose(loss, ref_info.loss, rtol=1e-12)
            if sync:
                np.testing.assert_allclose(_flat(out), _flat(ref), rtol=1e-12)
            else:
                # Per-device perturbations: the mean of 4 per-shard SAM directions (m-sharpness with m = 4).
                m4, _, _ = _run(pert, params=params, batch=batch, opt=opt, k=4)
                np.testing.assert_allclose(_flat(out), _flat(m4), rtol=1e-12)
                assert not np.allclose(_flat(out), _flat(ref), rtol=1e-9)


def test_errors_bad_m_missing_labels_missing_logits_missing_key():
    params, batch = _mlp_params(jax.random.key(0), jnp.float32), _batch(jax.random.key(1), dtype=jnp.float32)
    st = init(params, optax.sgd(0.1))
    kw = dict(optimizer=optax.sgd(0.1), perturbation=SAM(0.1))
    for k, err in [(0, ValueError), (3, ValueError), (-2, ValueError), (16, ValueError), (2.0, TypeError)]:
        with pytest.raises(err, match="num_micro_batches"):
            step(loss_fn, params, st, batch, num_micro_batches=k, **kw)
    with pytest.raises(ValueError, match="labels"):
        step(loss_fn, params, st, {"x": batch["x"]}, perturbation_loss=OBF(), **kw)
    with pytest.raises(ValueError, match="logits"):
        step(lambda p, s, b: loss_fn(p, s, b)[:1] + ({},), params, st, batch, perturbation_loss=OBF(), **kw)
    with pytest.raises(TypeError, match="key"):
        step(loss_fn, params, st, batch, optimizer=optax.sgd(0.1), perturbation=RandomDirection(0.1))
    with pytest.raises(TypeError, match="perturbation"):
        step(loss_fn, params, st, batch, optimizer=optax.sgd(0.1), perturbation="sam")
    with pytest.raises(ValueError, match="rho"):
        SAM(-1.0)
    with pytest.raises(ValueError, match="perturbation_loss"):
        step(loss_fn, params, st, batch, optimizer=optax.sgd(0.1), perturbation=None, perturbation_loss=OBF())
    with pytest.raises(TypeError, match="optimizer"):
        step(loss_fn, params, st, batch, optimizer="sgd", perturbation=SAM(0.1))


# ---------------------------------------------------------------------------
# Models with BatchNorm: equinox and flax (Linen)
# ---------------------------------------------------------------------------


class _EqxNet(eqx.Module):
    lin1: eqx.nn.Linear
    bn: eqx.nn.BatchNorm
    lin2: eqx.nn.Linear

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.lin1 = eqx.nn.Linear(5, 6, key=k1)
        self.bn = eqx.nn.BatchNorm(6, axis_name="batch", momentum=0.5)
        self.lin2 = eqx.nn.Linear(6, 3, key=k2)

    def __call__(self, x, state):
        h, state = self.bn(self.lin1(x), state)
        return self.lin2(jax.nn.relu(h)), state


def test_equinox_batchnorm_state_comes_from_clean_pass():
    model, state = eqx.nn.make_with_state(_EqxNet)(jax.random.key(0))
    params, static = eqx.partition(model, eqx.is_inexact_array)
    batch = _batch(jax.random.key(1), dtype=jnp.float32)

    def eqx_loss(p, s, b):
        net = eqx.combine(p, static)
        logits, s2 = jax.vmap(net, in_axes=(0, None), out_axes=(0, None), axis_name="batch")(b["x"], s)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, b["label"]).mean()
        return loss, {"logits": logits, "model_state": s2}

    opt = optax.sgd(0.1)
    tr = sharpness_aware(eqx_loss, opt, SAM(0.5), OBF())
    new_p, new_st, info = jax.jit(tr.step)(params, tr.init(params, state), batch)
    # Running statistics equal one clean forward pass at w (not at w + epsilon).
    _, clean = eqx.filter_jit(eqx_loss)(params, state, batch)
    for a, b in zip(jax.tree.leaves(new_st.model_state), jax.tree.leaves(clean["model_state"])):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_allclose(info.aux["logits"], clean["logits"], rtol=1e-6)
    # Parameters: w - lr * grad at w + eps, with eps from the OBF gradient (BatchNorm in train mode).
    @eqx.filter_jit
    def reference(params):
        a = obf_alpha(clean["logits"], batch["label"])
        h = jax.grad(lambda p: obf_loss(eqx_loss(p, state, batch)[1]["logits"], batch["label"], a))(params)
        hn = jnp.sqrt(sum(jnp.sum(x**2) for x in jax.tree.leaves(h)))
        w_eps = jax.tree.map(lambda w, g: w + 0.5 * g / hn, params, h)
        gp = jax.grad(lambda p: eqx_loss(p, state, batch)[0])(w_eps)
        return jax.tree.map(lambda w, g: w - 0.1 * g, params, gp)

    ref = reference(params)
    for x, y in zip(jax.tree.leaves(new_p), jax.tree.leaves(ref)):
        np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-6)


@pytest.mark.slow  # CPU budget of the default run; still run by .ci/run (pytest -m slow)
def test_flax_linen_batchnorm():
    import flax.linen as nn

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool):
            x = nn.Dense(6)(x)
            x = nn.BatchNorm(use_running_average=not train, momentum=0.5)(x)
            return nn.Dense(3)(nn.relu(x))

    net = Net()
    batch = _batch(jax.random.key(1), dtype=jnp.float32)
    variables = net.init(jax.random.key(0), batch["x"], train=False)
    params, stats = variables["params"], variables["batch_stats"]

    def flax_loss(p, s, b):
        logits, upd = net.apply({"params": p, "batch_stats": s}, b["x"], train=True, mutable=["batch_stats"])
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, b["label"]).mean()
        return loss, {"logits": logits, "model_state": upd["batch_stats"]}

    tr = sharpness_aware(flax_loss, optax.sgd(0.1), GSAM(0.3, alpha=0.0), num_micro_batches=1)
    new_p, new_st, _ = jax.jit(tr.step)(params, tr.init(params, stats), batch)
    _, clean = jax.jit(flax_loss)(params, stats, batch)
    for a, b in zip(jax.tree.leaves(new_st.model_state), jax.tree.leaves(clean["model_state"])):
        np.testing.assert_allclose(a, b, rtol=1e-6)

    @jax.jit
    def reference(params):
        h = jax.grad(lambda p: flax_loss(p, stats, batch)[0])(params)
        hn = jnp.sqrt(sum(jnp.sum(x**2) for x in jax.tree.leaves(h)))
        gp = jax.grad(lambda p: flax_loss(p, stats, batch)[0])(jax.tree.map(lambda w, g: w + 0.3 * g / hn, params, h))
        return jax.tree.map(lambda w, g: w - 0.1 * g, params, gp)

    ref = reference(params)
    for x, y in zip(jax.tree.leaves(new_p), jax.tree.leaves(ref)):
        np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-6)
    # m-sharpness with BatchNorm: per-micro-batch statistics, running averages averaged.
    tr4 = sharpness_aware(flax_loss, optax.sgd(0.1), SAM(0.3), num_micro_batches=2)
    _, st4, _ = jax.jit(tr4.step)(params, tr4.init(params, stats), batch)
    halves = [jax.jit(flax_loss)(params, stats, jax.tree.map(lambda x: x[i * 4 : i * 4 + 4], batch))[1]["model_state"]
              for i in range(2)]
    for a, b0, b1 in zip(jax.tree.leaves(st4.model_state), *[jax.tree.leaves(hh) for hh in halves]):
        np.testing.assert_allclose(a, (b0 + b1) / 2, rtol=1e-5)


# ---------------------------------------------------------------------------
# House conventions: compiled entry points, keys, train, ascent_gradient
# ---------------------------------------------------------------------------

from jaxcore.sam import StepResult, TrainResult, ascent_gradient, train  # noqa: E402


def test_step_does_not_recompile_on_a_second_call(compiles):
    params, batch = _mlp_params(jax.random.key(0), jnp.float32), _batch(jax.random.key(1), dtype=jnp.float32)
    opt = optax.sgd(0.1)
    st = init(params, opt)
    traces = []

    def counted_loss(p, s, b):
        traces.append(1)
        return loss_fn(p, s, b)

    kw = dict(optimizer=opt, perturbation=GSAM(0.1, 0.2), perturbation_loss=OBF())
    out = step(counted_loss, params, st, batch, **kw)
    assert isinstance(out, StepResult)
    n_traces = len(traces)
    with compiles() as n:
        out2 = step(counted_loss, out.params, out.state, batch, **kw)  # same shapes, equal configuration objects
        jax.block_until_ready(out2.params)
    assert n() == 0 and len(traces) == n_traces
    # ascent_gradient and train are compiled programs too.
    ascent_gradient(counted_loss, params, batch, OBF())
    idx = jnp.arange(8).reshape(2, 4)
    train(counted_loss, params, batch, idx, optimizer=opt, perturbation=SAM(0.1))
    with compiles() as n:
        jax.block_until_ready(ascent_gradient(counted_loss, out.params, batch, OBF()))
        jax.block_until_ready(train(counted_loss, out.params, batch, idx, optimizer=opt, perturbation=SAM(0.1)).params)
    assert n() == 0


def test_train_equals_a_loop_of_steps_and_keeps_its_history(x64):
    params, data = _mlp_params(jax.random.key(0)), _batch(jax.random.key(1), n=12)
    idx = jax.random.randint(jax.random.key(2), (5, 4), 0, 12)
    opt = optax.sgd(0.1, momentum=0.9)
    seen = []
    # The random control: the key path (one key per step); step's deterministic and OBF paths are tested above.
    for pert, obf, key in [(RandomDirection(0.1), None, jax.random.key(3))]:
        res = train(loss_fn, params, data, idx, optimizer=opt, perturbation=pert, perturbation_loss=obf, key=key,
                    progress=lambda i, m: seen.append((i, m["loss"])))
        assert isinstance(res, TrainResult)
        chex.assert_shape([res.losses, res.perturbed_losses, res.ascent_norms, res.rhos], (5,))
        p, st = params, init(params, opt)
        keys = None if key is None else jax.random.split(key, 5)
        losses = []
        for t in range(5):
            batch = jax.tree.map(lambda x: x[idx[t]], data)
            p, st, info = step(loss_fn, p, st, batch, key=None if keys is None else keys[t], optimizer=opt,
                               perturbation=pert, perturbation_loss=obf)
            losses.append(float(info.loss))
        chex.assert_trees_all_close(res.params, p, rtol=1e-12)
        np.testing.assert_allclose(res.losses, losses, rtol=1e-12)
        assert int(res.state.count) == 5
    assert seen and seen[-1][0] == 5  # the progress callback saw the last step
    with pytest.raises(TypeError, match="key: expected"):
        train(loss_fn, params, data, idx, optimizer=opt, perturbation=RandomDirection(0.1))
    with pytest.raises(ValueError, match="indices: expected"):
        train(loss_fn, params, data, jnp.arange(4.0), optimizer=opt, perturbation=SAM(0.1))


def test_ascent_gradient_is_the_training_or_the_obf_gradient(x64):
    params, batch = _mlp_params(jax.random.key(0)), _batch(jax.random.key(1))
    g = jax.grad(lambda p: loss_fn(p, None, batch)[0])(params)
    np.testing.assert_allclose(_flat(ascent_gradient(loss_fn, params, batch)), _flat(g), rtol=1e-13)
    obf = OBF(gamma=0.5, sigmoid=False)
    a = obf_alpha(_logits(params, batch["x"]), batch["label"], obf.gamma, obf.lam, obf.sigmoid)
    h = jax.grad(lambda p: obf_loss(_logits(p, batch["x"]), batch["label"], a, obf.sigmoid))(params)
    np.testing.assert_allclose(_flat(ascent_gradient(loss_fn, params, batch, obf)), _flat(h), rtol=1e-12)
    with pytest.raises(ValueError, match="labels"):
        ascent_gradient(loss_fn, params, {"x": batch["x"]}, obf)


def test_keys_are_checked_and_none_is_the_deterministic_path(x64):
    params, batch = _mlp_params(jax.random.key(0)), _batch(jax.random.key(1))
    opt = optax.sgd(0.1)
    st = init(params, opt)
    with pytest.raises(TypeError, match=r"key: expected a jax.random.key\(...\) array, got int"):
        step(loss_fn, params, st, batch, key=1, optimizer=opt, perturbation=RandomDirection(0.1))
    a = step(loss_fn, params, st, batch, optimizer=opt, perturbation=SAM(0.1))
    b = step(loss_fn, params, st, batch, key=jax.random.key(5), optimizer=opt, perturbation=SAM(0.1))
    np.testing.assert_array_equal(_flat(a.params), _flat(b.params))  # SAM does not use the key


def test_micro_batch_mean_by_halving_equals_the_mean_for_every_count():
    """The step's pairwise (halving) mean over the micro-batch axis is jnp.mean to float rounding (k odd, even, 1)."""
    from jaxcore.sam.micro_batches import _mean_leading

    x = jax.random.normal(jax.random.key(3), (13, 5, 4))
    for k in (1, 2, 3, 7, 8, 13):
        np.testing.assert_allclose(np.asarray(_mean_leading(x[:k])), np.asarray(x[:k]).mean(0), rtol=1e-6, atol=1e-7)
    assert _mean_leading(x.astype(jnp.bfloat16)).dtype == jnp.float32  # accumulated in >= float32


def test_step_with_axis_name_under_a_named_vmap_equals_the_concatenated_batch():
    # issue 48 item 22: under vmap(..., axis_name="d") the synchronised step crashed with pcast's
    # internal AssertionError (jax 0.10); shard_map worked.
    params, batch = _mlp_params(jax.random.key(0), jnp.float32), _batch(jax.random.key(1), n=16, dtype=jnp.float32)
    opt = optax.sgd(0.1)
    ref, _, ref_info = _run(SAM(0.2), params=params, batch=batch, opt=opt)
    split = jax.tree.map(lambda x: x.reshape((4, 4) + x.shape[1:]), batch)
    for sync in (True, False):
        tr = sharpness_aware(loss_fn, opt, SAM(0.2), axis_name="d", sync_perturbation=sync)
        st = tr.init(params)
        out, _, info = jax.vmap(lambda b: tr.step(params, st, b), axis_name="d")(split)
        np.testing.assert_allclose(info.loss, np.full(4, ref_info.loss), rtol=1e-6)
        first = jax.tree.map(lambda x: x[0], out)
        assert np.all(np.isfinite(_flat(first)))
        if sync:
            np.testing.assert_allclose(_flat(first), _flat(ref), rtol=1e-5, atol=1e-6)
        else:  # per-element perturbations: the m-sharpness step with k = 4
            m4, _, _ = _run(SAM(0.2), params=params, batch=batch, opt=opt, k=4)
            np.testing.assert_allclose(_flat(first), _flat(m4), rtol=1e-5, atol=1e-6)
