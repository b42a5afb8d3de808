"""Oracle tests of jaxcore.sam.perturbations: norms, zero gradients, bf16, GSAM, OBF."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from jaxcore.sam import (
    ASAM,
    GSAM,
    OBF,
    SAM,
    RandomDirection,
    asam_perturbation,
    global_norm,
    gsam_direction,
    lr_proportional_rho,
    obf_alpha,
    obf_cotangent,
    obf_loss,
    random_perturbation,
    safe_normalize,
    sam_perturbation,
)


def _tree(key, dtype=jnp.float64):
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        "w1": jax.random.normal(k1, (4, 3), dtype),
        "b1": jax.random.normal(k2, (3,), dtype),
        "w2": jax.random.normal(k3, (3, 2), dtype),
    }


def _flat(t):
    return np.asarray(ravel_pytree(t)[0])


def test_sam_perturbation_has_norm_rho_and_gradient_direction(x64, key):
    g = _tree(key)
    eps = sam_perturbation(g, 0.3)
    fe, fg = _flat(eps), _flat(g)
    np.testing.assert_allclose(np.linalg.norm(fe), 0.3, rtol=1e-14)
    np.testing.assert_allclose(fe, 0.3 * fg / np.linalg.norm(fg), rtol=1e-13)


def test_asam_perturbation_has_norm_rho_in_t_scaled_norm(x64, key):
    g, w = _tree(key), _tree(jax.random.key(7))
    eta, rho = 0.01, 0.7
    eps = asam_perturbation(g, w, rho, eta)
    # T = |w| + eta on weights (ndim >= 2), identity on the bias.
    t = {k: (np.abs(np.asarray(v)) + eta if v.ndim >= 2 else np.ones(v.shape)) for k, v in w.items()}
    tinv_eps = np.concatenate([(np.asarray(eps[k]) / t[k]).ravel() for k in sorted(w)])
    np.testing.assert_allclose(np.linalg.norm(tinv_eps), rho, rtol=1e-13)
    # Closed form rho T^2 g / ||T g|| leaf by leaf.
    tg_norm = np.sqrt(sum(np.sum((t[k] * np.asarray(g[k])) ** 2) for k in w))
    for k in w:
        np.testing.assert_allclose(eps[k], rho * t[k] ** 2 * np.asarray(g[k]) / tg_norm, rtol=1e-13)
    # The bias is not adapted: its perturbation is g_b scaled by the common factor only.
    np.testing.assert_allclose(eps["b1"], rho * np.asarray(g["b1"]) / tg_norm, rtol=1e-13)


def test_asam_custom_weight_mask_adapts_every_leaf(x64, key):
    g, w = _tree(key), _tree(jax.random.key(3))
    eps = asam_perturbation(g, w, 1.0, 0.0, weight_mask=lambda p: jax.tree.map(lambda _: True, p))
    tinv = np.concatenate([(np.asarray(eps[k]) / np.abs(np.asarray(w[k]))).ravel() for k in sorted(w)])
    np.testing.assert_allclose(np.linalg.norm(tinv), 1.0, rtol=1e-12)


def test_random_perturbation_norm_and_key_dependence(x64, key):
    like = _tree(key)
    e1 = random_perturbation(jax.random.key(1), like, 0.2)
    e2 = random_perturbation(jax.random.key(2), like, 0.2)
    np.testing.assert_allclose(np.linalg.norm(_flat(e1)), 0.2, rtol=1e-14)
    assert not np.allclose(_flat(e1), _flat(e2))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_zero_gradient_gives_zero_perturbation_no_nan(dtype):
    z = jax.tree.map(jnp.zeros_like, _tree(jax.random.key(0), dtype))
    w = _tree(jax.random.key(1), dtype)
    for eps in (sam_perturbation(z, 0.1), asam_perturbation(z, w, 0.1), random_perturbation(jax.random.key(0), z, 0.0)):
        f = _flat(jax.tree.map(lambda x: x.astype(jnp.float32), eps))
        assert np.all(np.isfinite(f)) and np.all(f == 0)
    d = gsam_direction(w, z, 0.5)  # zero perturbed gradient: g_perp = h, d = -alpha h
    np.testing.assert_allclose(_flat(jax.tree.map(lambda x: x.astype(jnp.float32), d)),
                               -0.5 * _flat(jax.tree.map(lambda x: x.astype(jnp.float32), w)), rtol=1e-2)
    # The norm is differentiable at zero with a zero (not NaN) gradient.
    gn = jax.grad(lambda t: global_norm(t))(jax.tree.map(lambda x: x.astype(jnp.float32), z))
    assert np.all(_flat(gn) == 0)
    out, norm = safe_normalize(z)
    assert float(norm) == 0.0 and np.all(np.isfinite(_flat(jax.tree.map(lambda x: x.astype(jnp.float32), out))))


def test_bf16_perturbation_keeps_dtype_and_norm():
    g32 = _tree(jax.random.key(0), jnp.float32)
    g = jax.tree.map(lambda x: (1e3 * x).astype(jnp.bfloat16), g32)  # large entries: squares summed in f32
    eps = sam_perturbation(g, 0.05)
    assert all(e.dtype == jnp.bfloat16 for e in jax.tree.leaves(eps))
    n = np.linalg.norm(_flat(jax.tree.map(lambda x: x.astype(jnp.float32), eps)))
    np.testing.assert_allclose(n, 0.05, rtol=1e-2)


def test_gsam_alpha_zero_is_sam_and_decomposition_is_orthogonal(x64, key):
    h, gp = _tree(key), _tree(jax.random.key(5))
    np.testing.assert_array_equal(_flat(gsam_direction(h, gp, 0.0)), _flat(gp))
    alpha = 0.3
    d = _flat(gsam_direction(h, gp, alpha))
    fh, fgp = _flat(h), _flat(gp)
    perp = (fgp - d) / alpha
    np.testing.assert_allclose(perp @ fgp, 0.0, atol=1e-12)  # orthogonal to g_p
    par = fh - perp  # the rest of h is parallel to g_p
    np.testing.assert_allclose(par, (par @ fgp) / (fgp @ fgp) * fgp, atol=1e-12)


@pytest.mark.parametrize("sigmoid", [True, False])
@pytest.mark.parametrize("onehot", [False, True])
def test_obf_cotangent_equals_autodiff_of_obf_loss(x64, key, sigmoid, onehot):
    logits = 2.0 * jax.random.normal(key, (6, 5), jnp.float64)
    labels = jnp.array([0, 1, 2, 3, 4, 0])
    lab = jax.nn.one_hot(labels, 5, dtype=jnp.float64) if onehot else labels
    for gamma, lam in [(1.0, None), (0.5, 0.1), (1.0, 0.0)]:
        a = obf_alpha(logits, lab, gamma, lam, sigmoid)
        auto = jax.grad(lambda z: obf_loss(z, lab, a, sigmoid))(logits)
        np.testing.assert_allclose(obf_cotangent(logits, lab, gamma, lam, sigmoid), auto, rtol=1e-12, atol=1e-14)


def test_obf_alpha_closed_form(x64):
    # Softmax predictions with known target probabilities, C = 4, lambda = 1/4.
    p = np.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1], [0.25, 0.25, 0.25, 0.25], [1 - 3e-12, 1e-12, 1e-12, 1e-12]])
    logits = jnp.log(jnp.asarray(p))
    labels = jnp.array([0, 0, 0, 0])  # p_t = 0.7, 0.1, 0.25, ~1
    a = np.asarray(obf_alpha(logits, labels, gamma=0.8, sigmoid=False))
    lam = 0.25
    expect = 0.8 * np.maximum(0, (1 - lam / np.array([0.7, 0.1, 0.25, 1.0])) / (1 - lam))
    np.testing.assert_allclose(a, expect, rtol=1e-9)
    np.testing.assert_allclose(obf_alpha(logits, labels, 0.5, lam=0.0, sigmoid=False), 0.5)
    # Sigmoid outputs (authors' code): p_t = sigmoid(target logit).
    z = jnp.array([[2.0, -1.0, 0.0]])
    pt = 1 / (1 + np.exp(-2.0))
    np.testing.assert_allclose(obf_alpha(z, jnp.array([0])), (1 - (1 / 3) / pt) / (1 - 1 / 3), rtol=1e-12)


def test_obf_cotangent_formula(x64, key):
    logits = jax.random.normal(key, (3, 4), jnp.float64)
    y = jnp.array([1, 3, 0])
    a = np.asarray(obf_alpha(logits, y, 1.0, None, False))[:, None]
    p = np.asarray(jax.nn.softmax(logits))
    oh = np.eye(4)[np.asarray(y)]
    np.testing.assert_allclose(obf_cotangent(logits, y, sigmoid=False), (0.25 - a * p - (1 - a) * oh) / 3, rtol=1e-12)


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="rho"):
        SAM(rho=-0.1)
    with pytest.raises(ValueError, match="rho"):
        ASAM(rho=float("nan"))
    with pytest.raises(ValueError, match="eta"):
        ASAM(rho=0.1, eta=-1.0)
    with pytest.raises(ValueError, match="alpha"):
        GSAM(rho=0.1, alpha=-0.5)
    with pytest.raises(TypeError, match="eta"):
        ASAM(rho=0.1, eta="small")
    with pytest.raises(TypeError, match="gamma"):
        OBF(gamma=None)
    with pytest.raises(TypeError, match="rho"):
        RandomDirection(rho="big")
    with pytest.raises(ValueError, match="gamma"):
        OBF(gamma=1.5)
    with pytest.raises(ValueError, match="lam"):
        OBF(lam=1.0)
    with pytest.raises(ValueError, match="labels"):
        obf_cotangent(jnp.zeros((3, 4)), jnp.zeros((2,), jnp.int32))
    with pytest.raises(TypeError, match="labels"):
        obf_cotangent(jnp.zeros((3, 4)), jnp.zeros((3,), jnp.float32))
    with pytest.raises(ValueError, match="lr_max"):
        lr_proportional_rho(lambda c: 0.1, 0.1, 0.2, 0.05)


def test_lr_proportional_rho_endpoints():
    import optax

    lr = optax.linear_schedule(1.0, 0.1, 10)
    sched = lr_proportional_rho(lr, 1.0, 0.1, rho_max=0.05, rho_min=0.01)
    np.testing.assert_allclose(sched(0), 0.05, rtol=1e-6)
    np.testing.assert_allclose(sched(10), 0.01, rtol=1e-6)
    np.testing.assert_allclose(sched(5), 0.03, rtol=1e-5)
    assert GSAM(rho=sched).rho is sched


# ---------------------------------------------------------------------------
# House conventions: containers, keys, compiled entry points, properties
# ---------------------------------------------------------------------------

import equinox as eqx  # noqa: E402
import hypothesis.extra.numpy as hnp  # noqa: E402
import optax  # noqa: E402
from hypothesis import given, strategies as st  # noqa: E402

from jaxcore.sam import Perturbation, default_weight_mask, rho_at, tree_dot  # noqa: E402

_SHAPES = ((3,), (2, 2), (4, 1))  # fixed small shapes: examples do not recompile


# Entries are 0 or of magnitude >= 1e-100: the norm sums squares (unscaled), which underflow below ~1e-154.
_ENTRY = st.one_of(st.just(0.0), st.floats(1e-100, 1e3), st.floats(-1e3, -1e-100))


@given(leaves=st.tuples(*[hnp.arrays(np.float64, s, elements=_ENTRY) for s in _SHAPES]),
       rho=st.one_of(st.just(0.0), st.floats(1e-6, 10.0)))
def test_property_sam_perturbation_has_norm_rho_or_is_zero(leaves, rho):
    with jax.enable_x64(True):
        g = {f"l{i}": jnp.asarray(x) for i, x in enumerate(leaves)}
        eps = sam_perturbation(g, rho)
        norm_g = np.linalg.norm(_flat(g))
        norm_e = np.linalg.norm(_flat(eps))
        assert np.all(np.isfinite(_flat(eps)))
        if norm_g > 0:
            np.testing.assert_allclose(norm_e, rho, rtol=1e-10, atol=1e-300)
            # the direction of g: eps = (rho / ||g||) g
            np.testing.assert_allclose(_flat(eps), rho / norm_g * _flat(g), rtol=1e-10, atol=1e-12)
        else:
            assert norm_e == 0.0


@given(rho=st.one_of(st.floats(max_value=-1e-12), st.just(float("nan")), st.just(float("inf"))))
def test_property_radius_validator_refuses_negative_nan_inf(rho):
    for make in (SAM, ASAM, GSAM, RandomDirection):
        with pytest.raises(ValueError, match="rho: expected"):
            make(rho)
    with pytest.raises(ValueError, match="rho: expected"):
        sam_perturbation(jnp.ones(2), rho)


def test_geometries_are_equinox_modules_hashable_and_static():
    for make in (lambda: SAM(0.1), lambda: ASAM(0.5, eta=0.02), lambda: GSAM(0.1, 0.2), lambda: RandomDirection(0.1)):
        p, q = make(), make()
        assert isinstance(p, eqx.Module) and isinstance(p, Perturbation)
        assert p == q and hash(p) == hash(q)  # usable as a static (compile-cache) argument
    assert SAM(0.1) != SAM(0.2)
    assert isinstance(OBF(), eqx.Module) and OBF() == OBF() and hash(OBF()) == hash(OBF())
    with pytest.raises(TypeError):
        Perturbation(0.1)  # abstract base
    with pytest.raises(TypeError, match="sigmoid"):
        OBF(sigmoid="yes")
    with pytest.raises(TypeError, match="labels_key"):
        OBF(labels_key=3)


def test_random_perturbation_key_is_checked():
    with pytest.raises(TypeError, match=r"key: expected a jax.random.key\(...\) array, got int"):
        random_perturbation(0, jnp.ones(2), 0.1)


def test_no_recompile_on_second_call(compiles):
    g = {"w": jnp.ones((3, 2)), "b": jnp.ones(2)}
    w = {"w": jnp.full((3, 2), 2.0), "b": jnp.ones(2)}
    calls = [
        lambda r: sam_perturbation(g, r),
        lambda r: asam_perturbation(g, w, r),
        lambda r: random_perturbation(jax.random.key(1), g, r),
        lambda r: gsam_direction(g, w, r),
        lambda r: safe_normalize(g, r),
        lambda r: global_norm(g),
        lambda r: tree_dot(g, w),
        lambda r: rho_at(r, 3),
        lambda r: obf_alpha(jnp.ones((2, 3)), jnp.array([0, 1]), gamma=r),
        lambda r: obf_cotangent(jnp.ones((2, 3)), jnp.array([0, 1]), gamma=r),
        lambda r: obf_loss(jnp.ones((2, 3)), jnp.array([0, 1]), jnp.full(2, r)),
    ]
    for call in calls:
        call(0.1)
        with compiles() as n:
            jax.block_until_ready(call(0.3))  # same shapes, another radius: no new program
        assert n() == 0


def test_public_functions_refuse_bad_arguments_in_the_one_dialect():
    with pytest.raises(ValueError, match="params: expected a pytree with the structure of grads"):
        asam_perturbation({"a": jnp.ones(2)}, {"b": jnp.ones(2)}, 0.1)
    with pytest.raises(TypeError, match="grads: expected a pytree of float arrays"):
        sam_perturbation({"a": jnp.arange(3)}, 0.1)
    with pytest.raises(ValueError, match="alpha: expected"):
        gsam_direction(jnp.ones(2), jnp.ones(2), -1.0)
    with pytest.raises(ValueError, match="gamma: expected"):
        obf_alpha(jnp.zeros((2, 3)), jnp.array([0, 1]), gamma=2.0)
    with pytest.raises(ValueError, match="logits: expected"):
        obf_alpha(jnp.zeros((2, 1)), jnp.array([0, 0]))
    with pytest.raises(TypeError, match="lr_schedule: expected"):
        lr_proportional_rho(0.1, 1.0, 0.0, 0.05)
    assert default_weight_mask({"w": jnp.ones((2, 2)), "b": jnp.ones(2)}) == {"w": True, "b": False}
    np.testing.assert_allclose(rho_at(optax.constant_schedule(0.2), 5), 0.2)
