"""Shape/dtype/NaN fuzzing of every public function of jaxcore.sam (issue 15, DESIGN "Tests").

For each exported function (``FUZZED`` lists which inputs each is fuzzed with), hypothesis draws one
input to make bad and a dtype (int32, float16, bfloat16, float32, float64), a value class (valid,
zero, negative, NaN, inf, None) and a shape from a small fixed set (matched or mismatched). The
outcome must be finite, or a ValueError/TypeError in the one dialect (``"<argument>: expected ..."``)
naming that input (or, for a shape mismatch, its partner); never a NaN from finite valid input, never
an exception from inside JAX. The default ("light") profile runs 12 examples per function on shapes
that compile once; ``test_fuzz_deep`` (marked slow) runs 200.
"""

from __future__ import annotations

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxcore import sam

DTYPES = [np.int32, jnp.float16, jnp.bfloat16, np.float32, np.float64]
KINDS = ["valid", "zero", "negative", "nan", "inf", "none", "shape"]
SHAPES = [(2, 3), (4,)]  # the valid shape is (2, 3); (4,) is the mismatched one
KEY = jax.random.key(0)

FUZZED = {
    "tree_dot": ["a", "b"], "global_norm": ["tree"], "safe_normalize": ["tree", "scale"],
    "sam_perturbation": ["grads", "rho"], "asam_perturbation": ["grads", "params", "rho", "eta"],
    "random_perturbation": ["like", "rho"], "gsam_direction": ["ascent_grads", "perturbed_grads", "alpha"],
    "default_weight_mask": ["params"], "rho_at": ["rho", "count"],
    "lr_proportional_rho": ["lr_max", "lr_min", "rho_max", "rho_min"],
    "obf_alpha": ["logits", "labels", "gamma"], "obf_cotangent": ["logits", "labels", "gamma"],
    "obf_loss": ["logits", "labels", "alpha"],
    "SAM": ["rho"], "ASAM": ["rho", "eta"], "GSAM": ["rho", "alpha"], "RandomDirection": ["rho"], "OBF": ["gamma"],
    "normalize": ["updates"], "sam_adversary": ["rho", "updates"], "asam_adversary": ["rho", "eta", "updates"],
    "sharpness_aware_transform": ["perturbation", "updates"],
    "hessian_vector_product": ["params", "v"], "hessian_max_eigenvalue": ["params", "num_iters"],
    "m_sharpness": ["params", "rho", "step_size"], "ascent_gradient": ["params"],
    "init": ["params"], "step": ["params", "perturbation"], "train": ["params", "indices"],
    "sharpness_aware": ["perturbation"],
}
#: Exported names that are result containers / abstract bases (constructed by the functions above).
NOT_CALLED = {"Perturbation", "MSharpnessResult", "PowerIterationResult", "SAMState", "SharpnessAware", "StepInfo",
              "StepResult", "TrainResult", "SharpnessAwareTransformState"}
CLASSES = ["dtypes int32/float16/bfloat16/float32/float64", "valid/zero/negative/NaN/inf values", "None",
           "mismatched shapes"]

_DIALECT = re.compile(r"^(?P<name>[\w\[\], ]+): expected ")


def test_every_export_is_fuzzed_or_a_container():
    assert set(sam.__all__) == set(FUZZED) | NOT_CALLED


def _value(kind, dtype, shape=(2, 3)):
    if kind == "none":
        return None
    if kind == "shape":
        shape, kind = SHAPES[1], "valid"
    base = {"valid": 0.5, "zero": 0.0, "negative": -1.5, "nan": np.nan, "inf": np.inf}[kind]
    a = np.full(shape, base, np.float64) + 0.25 * np.arange(int(np.prod(shape))).reshape(shape)
    if np.dtype(dtype).kind == "i":
        a = np.nan_to_num(a, nan=0, posinf=7, neginf=-7)
    return jnp.asarray(a.astype(dtype) if dtype is not jnp.bfloat16 else a, dtype)


def _scalar(kind):
    return {"valid": 0.1, "zero": 0.0, "negative": -1.0, "nan": float("nan"), "inf": float("inf"), "none": None,
            "shape": np.ones(3)}[kind]


def _loss(w, _, b):
    return jnp.mean((b @ w.astype(jnp.float32).reshape(-1)[:3].reshape(3, 1)) ** 2), {}


_B = jnp.ones((4, 3))


def _build(name, arg, kind, dtype):
    """(call, whether the inputs are finite and valid) with ``arg`` of value class ``kind``/``dtype``."""
    good = {"float": lambda: _value("valid", np.float32), "scalar": 0.1}
    bad_arr = _value(kind, dtype)
    bad_sc = _scalar(kind)

    def a(n):
        return bad_arr if n == arg else good["float"]()

    def s(n, default=0.1):
        return bad_sc if n == arg else default

    valid = kind in ("valid", "zero") and (arg not in ("a", "b", "tree", "grads", "params", "like", "ascent_grads",
                                                       "perturbed_grads", "v", "updates", "logits")
                                           or np.dtype(dtype).kind == "f" or dtype is jnp.bfloat16)
    if kind == "zero" and arg in ("lr_max", "num_iters", "rho_max") or arg == "labels" and kind != "valid":
        valid = False
    opt = optax.sgd(0.1)
    calls = {
        "tree_dot": lambda: sam.tree_dot(a("a"), a("b")),
        "global_norm": lambda: sam.global_norm(a("tree")),
        "safe_normalize": lambda: sam.safe_normalize(a("tree"), s("scale")),
        "sam_perturbation": lambda: sam.sam_perturbation(a("grads"), s("rho")),
        "asam_perturbation": lambda: sam.asam_perturbation(a("grads"), a("params"), s("rho"), s("eta", 0.01)),
        "random_perturbation": lambda: sam.random_perturbation(KEY, a("like"), s("rho")),
        "gsam_direction": lambda: sam.gsam_direction(a("ascent_grads"), a("perturbed_grads"), s("alpha")),
        "default_weight_mask": lambda: sam.default_weight_mask(a("params")),
        "rho_at": lambda: sam.rho_at(s("rho"), 3 if arg != "count" else _count(kind)),
        "lr_proportional_rho": lambda: sam.lr_proportional_rho(optax.constant_schedule(0.5), s("lr_max", 1.0),
                                                               s("lr_min", 0.0), s("rho_max", 0.05),
                                                               s("rho_min", 0.0))(0),
        "obf_alpha": lambda: sam.obf_alpha(a("logits"), _labels(arg, kind), s("gamma", 1.0)),
        "obf_cotangent": lambda: sam.obf_cotangent(a("logits"), _labels(arg, kind), s("gamma", 1.0)),
        "obf_loss": lambda: sam.obf_loss(a("logits"), _labels(arg, kind),
                                         bad_arr[:, 0] / 2 if arg == "alpha" and bad_arr is not None  # a in [0, 1]
                                         and kind != "shape" else (bad_arr if arg == "alpha" else jnp.ones(2))),
        "SAM": lambda: sam.SAM(s("rho")).perturb(good["float"](), None, 0.1),
        "ASAM": lambda: sam.ASAM(s("rho"), eta=s("eta", 0.01)).perturb(good["float"](), good["float"](), 0.1),
        "GSAM": lambda: sam.GSAM(s("rho"), alpha=s("alpha", 0.01)).direction(good["float"](), good["float"]()),
        "RandomDirection": lambda: sam.RandomDirection(s("rho")).perturb(good["float"](), None, 0.1, key=KEY),
        "OBF": lambda: sam.OBF(gamma=s("gamma", 1.0)).cotangent(jnp.zeros((2, 3)), jnp.array([0, 1])),
        "normalize": lambda: _tx(sam.normalize(), a("updates")),
        "sam_adversary": lambda: _tx(sam.sam_adversary(s("rho")), a("updates")),
        "asam_adversary": lambda: _tx(sam.asam_adversary(s("rho"), s("eta", 0.01)), a("updates")),
        "sharpness_aware_transform": lambda: _tx(sam.sharpness_aware_transform(
            opt, sam.SAM(0.1) if arg != "perturbation" else bad_sc), a("updates")),
        "hessian_vector_product": lambda: sam.hessian_vector_product(_loss, a("params"), _B, a("v")),
        "hessian_max_eigenvalue": lambda: sam.hessian_max_eigenvalue(KEY, _loss, a("params"), _B,
                                                                     num_iters=2 if arg != "num_iters" else _count(kind)),
        "m_sharpness": lambda: sam.m_sharpness(_loss, a("params"), _B, num_micro_batches=2, rho=s("rho"),
                                               step_size=s("step_size", None)),
        "ascent_gradient": lambda: sam.ascent_gradient(_loss, a("params"), _B),
        "init": lambda: sam.init(a("params"), opt),
        "step": lambda: sam.step(_loss, a("params"), sam.init(good["float"](), opt), _B, optimizer=opt,
                                 perturbation=sam.SAM(0.05) if arg != "perturbation" else bad_sc),
        "train": lambda: sam.train(_loss, a("params"), _B, jnp.array([[0, 1], [2, 3]]) if arg != "indices"
                                   else _indices(kind), optimizer=opt, perturbation=sam.SAM(0.05)),
        "sharpness_aware": lambda: sam.sharpness_aware(_loss, opt, sam.SAM(0.05) if arg != "perturbation"
                                                       else bad_sc).init(good["float"]()),
    }
    if arg in ("perturbation",) or arg == "indices":
        valid = False
    if kind == "shape" and (name, arg) not in MUST_MATCH and arg not in ("perturbation", "indices", "labels"):
        valid = np.dtype(dtype).kind == "f" or dtype is jnp.bfloat16  # any shape is a valid shape here
    if arg in SCALARS:
        valid = kind in ("valid", "zero") and not (kind == "zero" and arg in ("lr_max", "num_iters"))
    if arg == "step_size" and kind == "none" or arg == "perturbation" and kind == "none" \
            and name != "sharpness_aware_transform":
        valid = True  # the defaults: rho / num_steps, and the plain base optimizer (not a SAM transform's)
    return calls[name], valid


def _labels(arg, kind):
    if arg != "labels":
        return jnp.array([0, 2])
    return {"valid": jnp.array([1, 0]), "zero": jnp.array([0, 0]), "negative": jnp.array([-1, 0]),
            "nan": jnp.array([0.5, 0.5]), "inf": jnp.array([3, 9]), "none": None, "shape": jnp.array([0, 1, 2])}[kind]


def _count(kind):
    return {"valid": 3, "zero": 0, "negative": -1, "nan": float("nan"), "inf": 2.0, "none": None,
            "shape": jnp.arange(2)}[kind]


SCALARS = {"rho", "eta", "alpha", "scale", "step_size", "gamma", "count", "lr_max", "lr_min", "rho_max", "rho_min",
           "num_iters"}

#: (function, input) pairs whose shape must match a partner input (elsewhere any shape is valid).
MUST_MATCH = {("tree_dot", "a"), ("tree_dot", "b"), ("asam_perturbation", "grads"),
              ("asam_perturbation", "params"), ("gsam_direction", "ascent_grads"),
              ("gsam_direction", "perturbed_grads"), ("hessian_vector_product", "params"),
              ("hessian_vector_product", "v"), ("obf_alpha", "logits"), ("obf_cotangent", "logits"),
              ("obf_loss", "logits"), ("obf_loss", "alpha"), ("asam_adversary", "updates"),
              ("sharpness_aware_transform", "updates")}


def _indices(kind):
    return {"valid": jnp.array([[0, 1]]), "zero": jnp.zeros((0, 2), jnp.int32), "negative": jnp.array([[-1, 0]]),
            "nan": jnp.array([[0.5, 1.0]]), "inf": jnp.array([[4, 9]]), "none": None,
            "shape": jnp.array([0, 1])}[kind]


def _tx(tx, updates):
    """init at valid (2, 3) parameters, then one update call with the fuzzed ``updates`` at those parameters."""
    params = _value("valid", np.float32)
    return tx.update(updates, tx.init(params), params)[0]


def _check(name, arg, kind, dtype):
    call, valid = _build(name, arg, kind, dtype)
    try:
        out = call()
    except (ValueError, TypeError) as exc:
        m = _DIALECT.match(str(exc))
        assert m, f"{name}({arg}={kind}, {dtype}): not in the dialect: {exc}"
        assert not valid, f"{name}: valid input refused: {exc}"
        return
    except eqx.EquinoxRuntimeError as exc:  # a run-time check (sam.step's check_finite): its last line is the dialect
        assert re.search(r"EquinoxRuntimeError: [\w\[\], /]+: expected ", str(exc)), \
            f"{name}({arg}={kind}, {dtype}): not in the dialect: {exc}"
        assert not valid, f"{name}: valid input refused at run time: {exc}"
        return
    leaves = [x for x in jax.tree.leaves(out) if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.inexact)]
    if valid:
        for x in leaves:
            assert np.isfinite(np.asarray(x, np.float64)).all(), f"{name}({arg}={kind}, {dtype}): non-finite output"
    else:
        # Accepted bad input: only a value class that is legitimately fine (zero radius, NaN passed through).
        assert kind in ("zero", "nan", "inf", "negative", "valid"), f"{name}({arg}={kind}) accepted"
        if kind == "negative":
            assert arg not in ("rho", "eta", "alpha", "step_size", "gamma", "count", "num_iters"), \
                f"{name}: negative {arg} accepted"


def _strategy(name):
    return st.tuples(st.sampled_from(FUZZED[name]), st.sampled_from(KINDS), st.sampled_from(DTYPES))


@pytest.mark.parametrize("name", sorted(FUZZED))
@given(data=st.data())
def test_fuzz(name, data):
    arg, kind, dtype = data.draw(_strategy(name))
    _check(name, arg, kind, dtype)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FUZZED))
@settings(max_examples=40)
@given(data=st.data())
def test_fuzz_deep(name, data):
    arg, kind, dtype = data.draw(_strategy(name))
    _check(name, arg, kind, dtype)
