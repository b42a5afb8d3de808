"""Regression tests of issue 15 (hardening) for jaxcore.sam: each reproducer, then its class."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxcore import sam
from jaxcore.sam import tree_math as TM

RUNTIME = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError)


def _loss(w, _, b):
    logits = b["x"] @ w
    return optax.softmax_cross_entropy_with_integer_labels(logits, b["label"]).mean(), {"logits": logits}


def _bare_loss(w, _, b):  # returns a bare scalar, not (loss, aux)
    return jnp.mean((b["x"] @ w) ** 2)


_BATCH = {"x": jnp.eye(4, 3), "label": jnp.array([0, 1, 2, 0], jnp.int32)}
_W = jnp.zeros((3, 3))


# --- norms stable in float32 -------------------------------------------------------------------


@pytest.mark.parametrize("v", [1e-19, 1e19, 1e-30, 1e30])
def test_sam_perturbation_tiny_and_huge_gradients_keep_norm_rho_float32(v):
    eps = sam.sam_perturbation({"w": jnp.full(8, v, jnp.float32)}, 0.05)
    assert eps["w"].dtype == jnp.float32
    np.testing.assert_allclose(float(sam.global_norm(eps)), 0.05, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(eps["w"]), 0.05 / np.sqrt(8), rtol=1e-5)


@pytest.mark.parametrize("v", [1e-19, 1e19, 1e-30, 1e30])
def test_global_norm_stable_float32(v):
    n = sam.global_norm({"a": jnp.full(8, v, jnp.float32), "b": jnp.full((2, 2), v, jnp.float32)})
    np.testing.assert_allclose(float(n), v * np.sqrt(12), rtol=1e-5)
    n16 = sam.global_norm(jnp.full(4, v, jnp.bfloat16))
    np.testing.assert_allclose(float(n16), float(jnp.asarray(v, jnp.bfloat16)) * 2, rtol=1e-2)


@pytest.mark.parametrize("v", [1e-30, 1e30])
def test_asam_and_gsam_and_safe_normalize_stable_float32(v):
    g = {"w": jnp.full((2, 2), v, jnp.float32), "b": jnp.full(2, v, jnp.float32)}
    p = {"w": jnp.ones((2, 2)), "b": jnp.ones(2)}
    eps = sam.asam_perturbation(g, p, 1.0, eta=0.0)
    np.testing.assert_allclose(float(sam.global_norm(eps)), 1.0, rtol=1e-5)  # T = 1: plain SAM
    out, norm = sam.safe_normalize(g, 2.0)
    np.testing.assert_allclose(float(sam.global_norm(out)), 2.0, rtol=1e-5)
    np.testing.assert_allclose(float(norm), v * np.sqrt(6), rtol=1e-5)
    d = sam.gsam_direction(jax.tree.map(lambda x: 2 * x, g), g, 0.5)
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(d))
    np.testing.assert_allclose(np.asarray(d["w"]), v, rtol=1e-5)  # h parallel to g_p: no g_perp


def test_global_norm_zero_and_gradients_stay_finite():
    g = jax.grad(TM._global_norm)
    assert np.asarray(g(jnp.zeros(3))).tolist() == [0.0, 0.0, 0.0]
    for v in (1e-30, 1e30, 3.0):
        np.testing.assert_allclose(np.asarray(g(jnp.full(4, v, jnp.float32))), 0.5, rtol=1e-5)
    vg = jax.vmap(g)(jnp.array([[0.0, 0.0], [1e-30, 1e-30], [3.0, 4.0], [1e30, 1e30]], jnp.float32))
    assert np.isfinite(np.asarray(vg)).all()
    assert float(sam.global_norm({})) == 0.0
    assert np.isnan(float(sam.global_norm(jnp.array([1.0, jnp.nan]))))  # NaN is not hidden


def test_step_ascent_norm_tiny_gradient_is_not_zero():
    # loss ~ 1e-20 * w: its gradient's squared norm underflows in float32; the step must still perturb.
    loss = lambda w, _, b: (1e-20 * jnp.sum(w * b.mean(0)), {})  # noqa: E731
    w = jnp.zeros(4)
    res = sam.step(loss, w, sam.init(w, optax.sgd(0.1)), jnp.ones((2, 4)), optimizer=optax.sgd(0.1),
                   perturbation=sam.SAM(0.05))
    np.testing.assert_allclose(float(res.info.ascent_norm), 2e-20, rtol=1e-5)


# --- negative radius / rates in the functional API -------------------------------------------


@pytest.mark.parametrize("call", [
    lambda r: sam.sam_perturbation({"w": jnp.ones(2)}, r),
    lambda r: sam.asam_perturbation({"w": jnp.ones(2)}, {"w": jnp.ones(2)}, r),
    lambda r: sam.random_perturbation(jax.random.key(0), {"w": jnp.ones(2)}, r),
    lambda r: sam.rho_at(r, 0),
    lambda r: sam.sam_adversary(r),
    lambda r: sam.asam_adversary(r),
    lambda r: sam.m_sharpness(_loss, _W, _BATCH, num_micro_batches=1, rho=r),
])
@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_functional_negative_rho_refused(call, bad):
    with pytest.raises(ValueError, match="rho: expected"):
        call(bad)


def test_functional_negative_alpha_eta_step_size_gamma_refused():
    with pytest.raises(ValueError, match="alpha: expected"):
        sam.gsam_direction(jnp.ones(2), jnp.ones(2), -1.0)
    with pytest.raises(ValueError, match="eta: expected"):
        sam.asam_perturbation({"w": jnp.ones(2)}, {"w": jnp.ones(2)}, 0.1, eta=-1.0)
    with pytest.raises(ValueError, match="step_size: expected"):
        sam.m_sharpness(_loss, _W, _BATCH, num_micro_batches=1, rho=0.1, step_size=-1)
    with pytest.raises(ValueError, match="rho: expected"):
        sam.rho_at(lambda c: -0.1 + 0.0 * c, 0)  # a schedule's value
    with pytest.raises(ValueError, match="gamma: expected"):
        sam.obf_alpha(jnp.zeros((2, 3)), jnp.array([0, 1]), gamma=2.0)


def test_traced_negative_rho_raises_at_run_time():
    with pytest.raises(RUNTIME, match="rho: expected"):
        jax.block_until_ready(jax.jit(sam.sam_perturbation)({"w": jnp.ones(2)}, -1.0))
    with pytest.raises(RUNTIME, match="alpha: expected"):
        jax.block_until_ready(jax.jit(sam.gsam_direction)(jnp.ones(2), jnp.ones(2), -1.0))
    with pytest.raises(RUNTIME, match="rho: expected"):
        jax.block_until_ready(jax.jit(sam.rho_at)(-1.0, 0))
    with pytest.raises(RUNTIME, match="step_size: expected"):
        f = jax.jit(lambda s: sam.m_sharpness(_loss, _W, _BATCH, num_micro_batches=1, rho=0.1, step_size=s).sharpness)
        jax.block_until_ready(f(-1.0))
    ok = jax.jit(sam.sam_perturbation)({"w": jnp.array([3.0, 4.0])}, 0.5)
    np.testing.assert_allclose(np.asarray(ok["w"]), [0.3, 0.4], rtol=1e-6)


def test_traced_rho_in_a_class_checked_once_in_step():
    opt = optax.sgd(0.1)

    def run(r):
        return sam.step(_loss, _W, sam.init(_W, opt), _BATCH, optimizer=opt, perturbation=sam.SAM(r)).params

    jax.block_until_ready(jax.jit(run)(0.05))
    with pytest.raises((*RUNTIME, ValueError), match="rho: expected"):  # XLA:CPU wraps the callback error
        jax.block_until_ready(jax.jit(run)(-0.05))


# --- shapes, None, labels ------------------------------------------------------------------------


def test_tree_dot_and_norms_refuse_mismatch_and_none():
    with pytest.raises(ValueError, match="^b: expected"):
        sam.tree_dot(jnp.ones(2), jnp.ones(3))
    for call, name in [(lambda: sam.tree_dot(None, jnp.ones(3)), "a"), (lambda: sam.global_norm(None), "tree"),
                       (lambda: sam.sam_perturbation(None, 0.1), "grads"),
                       (lambda: sam.asam_perturbation(jnp.ones(2), None, 0.1), "params"),
                       (lambda: sam.random_perturbation(jax.random.key(0), None, 0.1), "like"),
                       (lambda: sam.default_weight_mask(None), "params"),
                       (lambda: sam.init(None, optax.sgd(0.1)), "params")]:
        with pytest.raises(TypeError, match=f"^{name}: expected"):
            call()
    with pytest.raises(ValueError, match="^params: expected"):
        sam.asam_perturbation({"w": jnp.ones(2)}, {"w": jnp.ones(3)}, 0.1)
    with pytest.raises(TypeError, match="^weight_mask: expected"):
        sam.asam_perturbation({"w": jnp.ones(2)}, {"w": jnp.ones(2)}, 0.1, weight_mask={"w": 1})
    with pytest.raises(ValueError, match="^weight_mask: expected"):
        sam.asam_perturbation({"w": jnp.ones(2)}, {"w": jnp.ones(2)}, 0.1, weight_mask={"v": True})


def test_obf_refuses_mismatched_alpha_and_out_of_range_labels():
    logits = jnp.zeros((2, 3))
    with pytest.raises(ValueError, match="^alpha: expected"):
        sam.obf_loss(logits, jnp.array([0, 1]), jnp.ones(3))
    with pytest.raises(TypeError, match="^alpha: expected"):
        sam.obf_loss(logits, jnp.array([0, 1]), None)
    for f in (lambda lab: sam.obf_loss(logits, lab, jnp.ones(2)), lambda lab: sam.obf_alpha(logits, lab),
              lambda lab: sam.obf_cotangent(logits, lab)):
        for lab in (jnp.array([0, 5]), jnp.array([-1, 0])):
            with pytest.raises(ValueError, match=r"^labels: expected class indices in \[0, 3\)"):
                f(lab)
    with pytest.raises(ValueError, match="^labels: expected"):
        sam.obf_alpha(logits, jnp.array([[1.0, 1.0, 0.0], [0.0, 1.0, 0.0]]))  # a row summing to 2
    with pytest.raises(ValueError, match="^labels: expected"):
        sam.obf_alpha(logits, jnp.array([0, 1, 2]))  # batch mismatch
    with pytest.raises(TypeError, match="^logits: expected"):
        sam.obf_alpha(None, jnp.array([0, 1]))
    with pytest.raises(RUNTIME, match="labels: expected"):
        jax.block_until_ready(jax.jit(sam.obf_alpha)(logits, jnp.array([0, 5])))


def test_train_refuses_out_of_range_indices():
    opt = optax.sgd(0.1)
    with pytest.raises(ValueError, match="^indices: expected example indices in"):
        sam.train(_loss, _W, _BATCH, jnp.array([[0, 4]]), optimizer=opt, perturbation=sam.SAM(0.05))
    with pytest.raises(TypeError, match="^indices: expected"):
        sam.train(_loss, _W, _BATCH, None, optimizer=opt, perturbation=sam.SAM(0.05))


def test_step_refuses_bad_state_and_none_params():
    opt = optax.sgd(0.1)
    with pytest.raises(TypeError, match="^state: expected"):
        sam.step(_loss, _W, None, _BATCH, optimizer=opt, perturbation=sam.SAM(0.05))
    with pytest.raises(TypeError, match="^params: expected"):
        sam.step(_loss, None, sam.init(_W, opt), _BATCH, optimizer=opt, perturbation=sam.SAM(0.05))


# --- a loss that does not return (loss, aux) --------------------------------------------------------


@pytest.mark.parametrize("entry", ["step", "step_plain", "step_obf", "train", "ascent", "ascent_obf", "hvp",
                                   "eig", "msharp"])
def test_bare_scalar_loss_gives_clear_type_error(entry):
    opt = optax.sgd(0.1)
    calls = {
        "step": lambda: sam.step(_bare_loss, _W, sam.init(_W, opt), _BATCH, optimizer=opt,
                                 perturbation=sam.SAM(0.05)),
        "step_plain": lambda: sam.step(_bare_loss, _W, sam.init(_W, opt), _BATCH, optimizer=opt, perturbation=None),
        "step_obf": lambda: sam.step(_bare_loss, _W, sam.init(_W, opt), _BATCH, optimizer=opt,
                                     perturbation=sam.SAM(0.05), perturbation_loss=sam.OBF()),
        "train": lambda: sam.train(_bare_loss, _W, _BATCH, jnp.array([[0, 1]]), optimizer=opt,
                                   perturbation=sam.SAM(0.05)),
        "ascent": lambda: sam.ascent_gradient(_bare_loss, _W, _BATCH),
        "ascent_obf": lambda: sam.ascent_gradient(_bare_loss, _W, _BATCH, sam.OBF()),
        "hvp": lambda: sam.hessian_vector_product(_bare_loss, _W, _BATCH, _W),
        "eig": lambda: sam.hessian_max_eigenvalue(jax.random.key(0), _bare_loss, _W, _BATCH, num_iters=1),
        "msharp": lambda: sam.m_sharpness(_bare_loss, _W, _BATCH, num_micro_batches=1, rho=0.1),
    }
    with pytest.raises(TypeError, match=r"^loss_fn: expected a function returning \(loss, aux\)"):
        calls[entry]()


# --- deep-fuzz findings (issue 15, second round) -------------------------------------------------------


@pytest.mark.parametrize("entry", ["step", "step_micro", "step_jit", "train", "ascent"])
@pytest.mark.parametrize("labels", [[0, 1, 5, 0], [0, -1, 2, 0]])
def test_obf_labels_are_range_checked_inside_step_and_train(entry, labels):
    """Concrete labels given to ``step`` are checked on the host (ValueError, no callback in the compiled
    step); traced ones (``step`` inside ``jax.jit``), ``train``'s data and the ascent gradient at run time."""
    batch = {"x": _BATCH["x"], "label": jnp.array(labels, jnp.int32)}
    opt, obf = optax.sgd(0.1), sam.OBF()
    calls = {
        "step": lambda: sam.step(_loss, _W, sam.init(_W, opt), batch, optimizer=opt, perturbation=sam.SAM(0.05),
                                 perturbation_loss=obf),
        "step_micro": lambda: sam.step(_loss, _W, sam.init(_W, opt), batch, optimizer=opt, perturbation=sam.SAM(0.05),
                                       perturbation_loss=obf, num_micro_batches=2),
        "step_jit": lambda: jax.jit(lambda b: sam.step(_loss, _W, sam.init(_W, opt), b, optimizer=opt,
                                                       perturbation=sam.SAM(0.05), perturbation_loss=obf))(batch),
        "train": lambda: sam.train(_loss, _W, batch, jnp.array([[0, 1], [2, 3]]), optimizer=opt,
                                   perturbation=sam.SAM(0.05), perturbation_loss=obf),
        "ascent": lambda: sam.ascent_gradient(_loss, _W, batch, obf),
    }
    where = "data" if entry == "train" else "batch"
    err = ValueError if entry in ("step", "step_micro") else RUNTIME
    with pytest.raises(err, match=rf"{where}\[label\]: expected OBF class indices in \[0, 3\)"):
        jax.block_until_ready(calls[entry]())


def test_obf_soft_labels_are_checked_inside_step():
    """Soft labels: checked on the host when concrete, at run time under ``jax.jit``."""
    opt = optax.sgd(0.1)

    def loss(w, _, b):
        logits = b["x"] @ w
        return optax.softmax_cross_entropy(logits, b["label"]).mean(), {"logits": logits}

    good = jax.nn.one_hot(jnp.array([0, 1, 2, 0]), 3)
    out = sam.step(loss, _W, sam.init(_W, opt), {"x": _BATCH["x"], "label": good}, optimizer=opt,
                   perturbation=sam.SAM(0.05), perturbation_loss=sam.OBF())
    assert np.isfinite(np.asarray(out.params)).all()
    bad = {"x": _BATCH["x"], "label": 2.0 * good}
    with pytest.raises(ValueError, match=r"batch\[label\]: expected OBF one-hot or soft labels"):
        sam.step(loss, _W, sam.init(_W, opt), bad, optimizer=opt, perturbation=sam.SAM(0.05),
                 perturbation_loss=sam.OBF())
    with pytest.raises(RUNTIME, match=r"batch\[label\]: expected OBF one-hot or soft labels"):
        jax.block_until_ready(jax.jit(lambda b: sam.step(loss, _W, sam.init(_W, opt), b, optimizer=opt,
                                                         perturbation=sam.SAM(0.05), perturbation_loss=sam.OBF()))(bad))


def test_obf_loss_refuses_alpha_outside_the_unit_interval():
    logits = jnp.zeros((2, 3))
    for a in (jnp.array([-0.5, 0.5]), jnp.array([0.5, 1.5])):
        with pytest.raises(ValueError, match=r"^alpha: expected values in \[0, 1\]"):
            sam.obf_loss(logits, jnp.array([0, 1]), a)
    with pytest.raises(RUNTIME, match="alpha: expected OBF weights"):
        jax.block_until_ready(jax.jit(lambda a: sam.obf_loss(logits, jnp.array([0, 1]), a))(jnp.array([0.5, 2.0])))


def test_default_weight_mask_refuses_int_leaves_like_every_params_argument():
    with pytest.raises(TypeError, match="^params: expected a pytree of float arrays"):
        sam.default_weight_mask({"w": jnp.ones((2, 2), jnp.int32)})
    assert sam.default_weight_mask({"w": jnp.ones((2, 2)), "b": jnp.ones(2)}) == {"w": True, "b": False}


@pytest.mark.parametrize("make", [lambda: sam.asam_adversary(0.5),
                                  lambda: sam.sharpness_aware_transform(optax.sgd(0.1), sam.SAM(0.05))])
def test_transforms_refuse_updates_shaped_unlike_params(make):
    tx, w = make(), jnp.ones((2, 3))
    with pytest.raises(ValueError, match="^(updates|params): expected leaves with the shapes of"):
        tx.update(jnp.ones(4), tx.init(w), w)


def test_sharpness_aware_transform_refuses_none_and_casts_half_updates_to_the_params_dtype():
    with pytest.raises(TypeError, match="^perturbation: expected a Perturbation"):
        sam.sharpness_aware_transform(optax.sgd(0.1), None)
    tx = sam.sharpness_aware_transform(optax.sgd(0.1), sam.GSAM(0.05, alpha=0.1))
    w = jnp.array([1.0, 2.0], jnp.float32)
    g16 = jnp.array([0.5, -0.25], jnp.float16)  # exact in float16
    u, s = tx.update(g16, tx.init(w), w)
    assert u.dtype == jnp.float32 and s.ascent.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(s.ascent), [0.5, -0.25])
    u2, s2 = tx.update(g16, s, w + u)
    ref_u, ref_s = tx.update(g16.astype(jnp.float32), tx.init(w), w)
    ref_u2, _ = tx.update(g16.astype(jnp.float32), ref_s, w + ref_u)
    np.testing.assert_allclose(np.asarray(u2), np.asarray(ref_u2), rtol=1e-6)


@pytest.mark.parametrize("scale", [1.0, 1e-25, 1e18])
def test_m_sharpness_step_equals_per_micro_batch_sam_at_tiny_and_huge_gradients(scale):
    """k = 2 micro-batches (batched norms, one cond for all): each eps_i = rho h_i / |h_i| as SAM's, stable in float32."""
    def loss(w, _, b):
        return scale * jnp.mean((b["x"] @ w - b["y"]) ** 2), {}

    x = jax.random.normal(jax.random.key(0), (4, 3))
    batch = {"x": x, "y": jnp.array([1.0, -1.0, 0.5, 2.0])}
    w, opt, rho = jnp.array([0.3, -0.2, 0.1]), optax.sgd(0.1), 0.05
    out = sam.step(loss, w, sam.init(w, opt), batch, optimizer=opt, perturbation=sam.SAM(rho), num_micro_batches=2)
    ds, norms = [], []
    for i in range(2):
        mb = jax.tree.map(lambda v: v[2 * i:2 * i + 2], batch)
        h = sam.ascent_gradient(loss, w, mb)
        norms.append(float(sam.global_norm(h)))
        eps = sam.sam_perturbation(h, rho)
        ds.append(jax.grad(lambda v: loss(v, None, mb)[0])(w + eps))
    ref = w - 0.1 * (ds[0] + ds[1]) / 2
    np.testing.assert_allclose(np.asarray(out.params), np.asarray(ref), rtol=1e-5, atol=1e-7 * scale)
    np.testing.assert_allclose(float(out.info.ascent_norm), np.mean(norms), rtol=1e-5)
    assert np.isfinite(float(out.info.ascent_norm)) and float(out.info.ascent_norm) > 0


def test_check_labels_false_compiles_no_callback_and_changes_nothing_for_valid_labels():
    """``check_labels=False``: the step under ``jax.jit`` holds no host callback (the checked one does) and
    gives the checked step's parameters on valid labels; a non-bool is refused."""
    opt, obf = optax.sgd(0.1), sam.OBF()
    batch = {"x": _BATCH["x"], "label": jnp.array([0, 1, 2, 0], jnp.int32)}

    def run(check):
        return jax.jit(lambda b: sam.step(_loss, _W, sam.init(_W, opt), b, optimizer=opt, perturbation=sam.SAM(0.05),
                                          perturbation_loss=obf, check_labels=check, check_finite=False).params)

    texts = {c: run(c).lower(batch).compile().as_text() for c in (True, False)}
    assert "python_cpu_callback" in texts[True] and "python_cpu_callback" not in texts[False]
    np.testing.assert_array_equal(np.asarray(run(False)(batch)), np.asarray(run(True)(batch)))
    with pytest.raises(TypeError, match="check_labels: expected"):
        sam.step(_loss, _W, sam.init(_W, opt), batch, optimizer=opt, perturbation=sam.SAM(0.05),
                 perturbation_loss=obf, check_labels="no")


def test_perturbations_and_obf_refuse_nan_inputs():
    # issue 48 item 19: sam_perturbation / obf_alpha with NaN inputs returned NaN.
    g = {"w": jnp.array([3.0, 4.0])}
    np.testing.assert_allclose(sam.sam_perturbation(g, 0.5)["w"], [0.3, 0.4], rtol=1e-6)
    with pytest.raises(ValueError, match=r"^grads\['w'\]: expected finite values, got NaN or inf"):
        sam.sam_perturbation({"w": jnp.array([jnp.nan, 4.0])}, 0.5)
    with pytest.raises(ValueError, match=r"^params\['w'\]: expected finite values"):
        sam.asam_perturbation(g, {"w": jnp.array([1.0, jnp.inf])}, 0.5)
    logits = jnp.log(jnp.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1]]))
    np.testing.assert_allclose(sam.obf_alpha(logits, jnp.array([0, 0]), sigmoid=False), [6 / 7, 0.0], rtol=1e-5)
    for fn in (sam.obf_alpha, sam.obf_cotangent):
        with pytest.raises(ValueError, match="^logits: expected finite values"):
            fn(logits.at[0, 1].set(jnp.nan), jnp.array([0, 0]))
    # traced values are not checked on the host: the jitted form still runs
    assert jax.jit(sam.sam_perturbation)(g, 0.5)["w"].shape == (2,)


@pytest.mark.parametrize("where", ["params", "batch"])
@pytest.mark.parametrize("perturbation", [None, sam.SAM(0.05)])
def test_step_refuses_nan_params_or_batch_and_check_finite_false_compiles_no_callback(where, perturbation):
    # issue 48 item 19: sam.step with a NaN in params or batch silently returned NaN parameters.
    opt = optax.sgd(0.1)
    w = _W.at[0, 0].set(jnp.nan) if where == "params" else _W
    batch = dict(_BATCH, x=_BATCH["x"].at[1, 2].set(jnp.inf)) if where == "batch" else _BATCH
    with pytest.raises(RUNTIME, match=r"params / batch: expected finite values giving a finite loss"):
        jax.block_until_ready(sam.step(_loss, w, sam.init(w, opt), batch, optimizer=opt,
                                       perturbation=perturbation).params)
    # switched off: no host callback in the compiled step, and the same parameters on valid input
    def run(check):
        return jax.jit(lambda b: sam.step(_loss, _W, sam.init(_W, opt), b, optimizer=opt, perturbation=perturbation,
                                          check_finite=check).params)

    texts = {c: run(c).lower(_BATCH).compile().as_text() for c in (True, False)}
    assert "python_cpu_callback" in texts[True] and "python_cpu_callback" not in texts[False]
    np.testing.assert_array_equal(np.asarray(run(False)(_BATCH)), np.asarray(run(True)(_BATCH)))
    unchecked = sam.step(_loss, w, sam.init(w, opt), batch, optimizer=opt, perturbation=perturbation,
                         check_finite=False)
    assert not np.isfinite(float(unchecked.info.loss))  # what the check turns into an error
