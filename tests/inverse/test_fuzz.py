"""Fuzzing every public function of jaxcore.inverse (issue 15): bad input is refused in the one dialect.

Each entry of :data:`FUZZ` lists, per argument, its valid and its bad inputs. An example draws either
all arguments valid (then the call must return finite values) or exactly one argument bad (then it
must raise ValueError/TypeError whose message starts with that argument's name, never an exception
from inside JAX). Images come from a small fixed set of shapes and dtypes (int32, float16,
bfloat16, float32, float64), so examples do not recompile; the "light" profile runs 12 examples per
function, the slow deep variant 200.
"""

from __future__ import annotations

import functools
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxcore.inverse as inv

H = W = 8
NAN, INF = float("nan"), float("inf")


def _base(shape=(H, W, 1)):
    return 0.25 + 0.5 * np.linspace(0.0, 1.0, int(np.prod(shape))).reshape(shape)


def _img(dtype, kind="valid", shape=(H, W, 1)):
    """An image factory: ``dtype`` one of int32/float16/bfloat16/float32/float64, ``kind`` valid/nan/inf/
    negative/zero/other (a second, different valid image)."""
    def make():
        x = _base(shape)
        if kind == "zero":
            x = np.zeros(shape)
        elif kind == "negative":
            x = x - 1.0
        elif kind == "other":
            x = x[..., ::-1, :, :] * 0.9 if len(shape) >= 3 else x * 0.9
        elif kind in ("nan", "inf"):
            x = x.copy()
            x.flat[3] = NAN if kind == "nan" else INF
        if dtype == "int32":
            return np.round(x * 255).astype(np.int32)
        if dtype == "float64":
            return x.astype(np.float64)
        return jnp.asarray(x, dtype)
    return _Named(make, f"img({dtype}, {kind}, {shape})")


class _Named:
    def __init__(self, fn, name):
        self.fn, self.name = fn, name

    def __call__(self):
        return self.fn()

    def __repr__(self):
        return self.name


class _const:  # noqa: N801 - a factory of a constant input, shown by hypothesis by its value
    def __init__(self, v):
        self.v = v

    def __call__(self):
        return self.v

    def __repr__(self):
        return f"const({self.v!r})"


FLOATS = ("float16", "bfloat16", "float32", "float64")
IMG_OK = [_img(d) for d in FLOATS] + [_img("float32", "negative"), _img("float32", "zero")]
IMG_BAD = [_img("int32"), _img("float32", "nan"), _img("float16", "inf"), _const(None), _const("img"),
           _img("float32", shape=(H, W))]
IMG_BAD_SHAPE = [_img("float32", shape=(6, W, 1))]  # the spatial shape of no operator
POS = [_const(0.1), _const(1), _const(np.float32(0.05))]            # finite > 0
POS_BAD = [_const(0.0), _const(-1.0), _const(NAN), _const(INF), _const(None), _const("a"), _const(jnp.ones(2))]
NONNEG = POS + [_const(0.0)]
NONNEG_BAD = [_const(-1.0), _const(NAN), _const(INF), _const(None), _const("a")]
KEY_OK = [lambda: jax.random.key(0)]
KEY_BAD = [_const(0), _const(None), lambda: jax.random.split(jax.random.key(0), 2)]


@functools.cache
def _blur():
    return inv.Blur(inv.uniform_kernel(3), (H, W))


@functools.cache
def _inpaint():
    return inv.Inpainting(inv.random_mask(jax.random.key(0), (H, W), 0.5))


@functools.cache
def _sched():
    return inv.constant_schedule(2, sigma=0.05, alpha=0.5, step_size=1e-3)


OPERATORS = [_blur, _inpaint, lambda: inv.Identity()]
DENOISER = [lambda: inv.GaussianMMSEDenoiser(0.5, 0.01)]
SCHED_BAD = [_const(None), _const((1, 2, 3)), lambda: _sched()._replace(sigma=-_sched().sigma),
             lambda: _sched()._replace(step_size=jnp.full(2, NAN)), lambda: _sched()._replace(alpha=jnp.ones(3)),
             lambda: _sched()._replace(sigma=None)]


def _method(name):
    def call(key, y, operator, schedule, sigma_y):
        with warnings.catch_warnings():  # a key to a deterministic method is accepted, deprecated
            warnings.simplefilter("ignore", DeprecationWarning)
            return inv.METHODS[name](key, y, operator, DENOISER[0](), schedule, sigma_y)
    return call


def _restore(key, y, operator, schedule, sigma_y, method):
    return inv.restore(key, y, operator, DENOISER[0](), schedule, sigma_y, method=method)


def _restoration_row(name, random):
    sched_ok = [_sched] if name != "annealed_snore" else [_sched, _const(None)]
    return (_method(name), {
        "key": (KEY_OK if random else KEY_OK + [_const(None)], KEY_BAD if random else [_const(0)]),
        "y": ([_img(d) for d in FLOATS], IMG_BAD + [_img("float32", shape=(1, H, W, 1))]),
        "operator": ([_blur, _inpaint], [_const(None), _const("blur")]),
        "schedule": (sched_ok, SCHED_BAD[1:] if name == "annealed_snore" else SCHED_BAD),
        "sigma_y": (POS, POS_BAD),
    })


def _op_row(method):
    ops = ([_blur, _inpaint], [])
    img = (IMG_OK, IMG_BAD + IMG_BAD_SHAPE)
    if method == "__call__":
        return (lambda operator, x: operator(x)), {"operator": ops, "x": img}
    if method == "adjoint":
        return (lambda operator, y: operator.adjoint(y)), {"operator": ops, "y": img}
    sig = (POS, POS_BAD + [_const(jnp.ones(2))])
    if method == "data_prox":
        return (lambda operator, z, y, sigma_y, tau: operator.data_prox(z, y, sigma_y, tau),
                {"operator": ops, "z": img, "y": img, "sigma_y": sig, "tau": (NONNEG, NONNEG_BAD)})
    return ((lambda operator, x, y, sigma_y: getattr(operator, method)(x, y, sigma_y)),
            {"operator": ops, "x": img, "y": img, "sigma_y": sig})


def _den_call(cls):
    def call(x, sigma):
        den = {"GaussianMMSEDenoiser": lambda: inv.GaussianMMSEDenoiser(0.5, 0.01),
               "TVDenoiser": lambda: inv.TVDenoiser(num_steps=3),
               "DnCNN": lambda: _dncnn(),
               "GradientStepDenoiser": lambda: inv.GradientStepDenoiser(inv.GaussianMMSEDenoiser(0.5, 0.01))}[cls]()
        return den(x, sigma)
    return call


@functools.cache
def _dncnn():
    return inv.DnCNN(key=jax.random.key(0), channels=1, features=4, depth=2)


_DEN_ARGS = {"x": (IMG_OK, IMG_BAD), "sigma": (NONNEG, NONNEG_BAD + [_const(jnp.ones(3))])}

#: Every fuzzed public function: name -> (call, {argument: (valid inputs, bad inputs)}). The
#: classes: images in int32/float16/bfloat16/float32/float64 with NaN/inf/negative/zero values,
#: None/strings/wrong ndim/mismatched shapes; scalars zero/negative/NaN/inf/None/str/arrays;
#: keys as ints/None/batches; wrong-type objects; unknown choices.
FUZZ: dict = {
    "psnr": (lambda x, ref, data_range: inv.psnr(x, ref, data_range),
             {"x": ([_img(d) for d in ("int32",) + FLOATS] + [_img("float32", "negative")],
                    IMG_BAD[1:]),
              "ref": ([_img(d, "other") for d in ("int32", "float32", "float16")],
                      [_img("float32", "nan"), _const(None), _img("float32", shape=(6, W, 1))]),
              "data_range": (POS + [_const(255.0)], POS_BAD)}),
    "ssim": (lambda x, ref, data_range, k1: inv.ssim(x, ref, data_range, k1=k1),
             {"x": ([_img(d) for d in ("int32",) + FLOATS], IMG_BAD[1:]),
              "ref": ([_img(d, "other") for d in ("int32", "float32", "bfloat16")],
                      [_img("float32", "inf"), _const(None), _img("float32", shape=(H, 6, 1))]),
              "data_range": (POS, POS_BAD), "k1": ([_const(0.01)], [_const(-0.01), _const(NAN)])}),
    "gaussian_kernel": (inv.gaussian_kernel, {"size": ([_const(3), _const(5)], [_const(4), _const(0), _const(2.0),
                                                                               _const(None)]),
                                             "std": (POS, POS_BAD)}),
    "uniform_kernel": (inv.uniform_kernel, {"size": ([_const(1), _const(4)], [_const(0), _const(-3), _const(1.5),
                                                                             _const("3")])}),
    "motion_kernel": (lambda key, size, intensity: inv.motion_kernel(key, size, num_steps=20, intensity=intensity),
                      {"key": (KEY_OK, KEY_BAD), "size": ([_const(9)], [_const(8), _const(1), _const(None)]),
                       "intensity": ([_const(0.5), _const(1.0)], [_const(0.0), _const(1.5), _const(NAN)])}),
    "random_mask": (lambda key, shape, missing: inv.random_mask(key, shape, missing),
                    {"key": (KEY_OK, KEY_BAD), "shape": ([_const((H, W))], [_const(None), _const((H,)),
                                                                           _const((0, W)), _const((2.5, W))]),
                     "missing": ([_const(0.0), _const(0.5), _const(1)], [_const(-0.1), _const(1.5), _const(NAN)])}),
    "standard_normal": (inv.standard_normal,
                        {"key": (KEY_OK, KEY_BAD), "shape": ([_const((H, W, 1)), _const(3)],
                                                             [_const(None), _const((-1,)), _const((2.5,))]),
                         "dtype": ([_const(jnp.float32), _const(jnp.float16)], [_const(jnp.int32), _const("nope")])}),
    "add_gaussian_noise": (inv.add_gaussian_noise,
                           {"key": (KEY_OK, KEY_BAD), "x": (IMG_OK, IMG_BAD[:4]), "sigma": (NONNEG, NONNEG_BAD)}),
    "degrade": (lambda key, x, operator, sigma_y: inv.degrade(key, x, operator, sigma_y),
                {"key": (KEY_OK, KEY_BAD),
                 "x": ([_img(d) for d in FLOATS] + [_img("float32", "zero")],
                       IMG_BAD + [_img("float32", "negative")]),
                 "operator": (OPERATORS, [_const(None), _const(lambda x: x)]),
                 "sigma_y": (NONNEG, NONNEG_BAD + [_const(jnp.ones(2))])}),
    "Blur": (lambda kernel, shape: inv.Blur(kernel, shape)(jnp.full((H, W, 1), 0.5)),
             {"kernel": ([lambda: inv.uniform_kernel(3), lambda: inv.uniform_kernel(3).astype(jnp.float16),
                          lambda: np.ones((3, 3), np.int32)],
                         [_const(None), lambda: jnp.full((3, 3), NAN), lambda: jnp.ones((3,)),
                          lambda: jnp.ones((9, 9)), lambda: jnp.ones((3, 3), jnp.complex64)]),
              "shape": ([_const((H, W))], [_const(None), _const((H, -W)), _const((H,)), _const("ab")])}),
    "Inpainting": (lambda mask: inv.Inpainting(mask)(jnp.full((H, W, 1), 0.5)),
                   {"mask": ([lambda: np.ones((H, W)), lambda: jnp.zeros((H, W, 1), jnp.bfloat16)],
                             [_const(None), lambda: jnp.full((H, W), NAN), lambda: jnp.ones(H), _const("m")])}),
    "GaussianMMSEDenoiser": (lambda mean, variance: inv.GaussianMMSEDenoiser(mean, variance)(_base(), 0.1),
                             {"mean": ([_const(0.5), _const(np.full((H, W, 1), 0.2))],
                                       [_const(NAN), _const(None), _const(np.ones((1, 1, H, W, 1)))]),
                              "variance": ([_const(0.01), _const(1)], POS_BAD)}),
    "TVDenoiser": (lambda tau, weight_per_sigma, num_steps: inv.TVDenoiser(
        tau=tau, weight_per_sigma=weight_per_sigma, num_steps=num_steps)(jnp.full((H, W, 1), 0.5), 0.1),
                   {"tau": ([_const(0.248), _const(0.1)], [_const(-1.0), _const(0.0), _const(0.5), _const(NAN),
                                                            _const(None)]),
                    "weight_per_sigma": ([_const(1.1)], [_const(-1.0), _const(INF), _const(NAN)]),
                    "num_steps": ([_const(3)], [_const(0), _const(2.5), _const(None)])}),
    "DnCNN": (lambda key, depth, boundary: inv.DnCNN(key=key, channels=1, features=4, depth=depth,
                                                      boundary=boundary),
              {"key": (KEY_OK, KEY_BAD), "depth": ([_const(2)], [_const(1), _const(2.0)]),
               "boundary": ([_const("zeros"), _const("symmetric")], [_const("reflect"), _const(None)])}),
    "GradientStepDenoiser": (lambda network: inv.GradientStepDenoiser(network)(jnp.full((H, W, 1), 0.5), 0.1),
                             {"network": (DENOISER, [_const(None), _const(3)])}),
    "conv3x3": (inv.conv3x3, {"h": ([lambda: jnp.ones((1, H, W, 2)), lambda: np.ones((1, H, W, 2))],
                                    [_const(None), lambda: jnp.ones((H, W, 2)), lambda: np.ones((1, H, W, 2),
                                                                                               np.int32)]),
                              "w": ([lambda: jnp.ones((3, 3, 2, 1)) * 0.1],
                                    [_const(None), lambda: jnp.ones((3, 3, 1, 1)), lambda: jnp.ones((5, 5, 2, 1)),
                                     lambda: jnp.ones((3, 3, 2, 1), jnp.float16)])}),
    "load_pretrained": (inv.load_pretrained, {"name": ([_const("dncnn"), _const("gs-dncnn")],
                                                       [_const("nope"), _const(None), _const(3)]),
                                              "boundary": ([_const("zeros")], [_const("x"), _const(None)])}),
    "pretrained_info": (inv.pretrained_info, {"name": ([_const("dncnn")], [_const("nope"), _const(None)])}),
    # sigma = 1e5 is bad only where it overflows: in float16 (finite in float32, the default).
    "constant_schedule": (lambda num_steps, sigma, step_size, dtype: inv.constant_schedule(
        num_steps, sigma=sigma, step_size=step_size,
        dtype=jnp.float16 if isinstance(sigma, float) and sigma == 1e5 else dtype),
                          {"num_steps": ([_const(3)], [_const(0), _const(2.5), _const(None)]),
                           "sigma": (NONNEG[:3], NONNEG_BAD + [_const(1e5)]),
                           "step_size": (NONNEG[:3], NONNEG_BAD),
                           "dtype": ([_const(jnp.float16), _const(None), _const(jnp.float32)],
                                     [_const(jnp.int32), _const("x")])}),
    "recommended_schedule": (lambda method, sigma_y, iteration_scale: inv.recommended_schedule(
        method, sigma_y, iteration_scale=iteration_scale),
                             {"method": ([_const("snore"), _const("pnp_hqs")], [_const("admm"), _const(None)]),
                              "sigma_y": (POS, POS_BAD),
                              "iteration_scale": ([_const(0.1), _const(1.0)], [_const(0.0), _const(NAN)])}),
    "annealed_schedule": (lambda sigma_start, num_stages, spacing: inv.annealed_schedule(
        sigma_start=sigma_start, sigma_end=0.05, alpha_start=1.0, alpha_end=0.5, step_size=0.1,
        num_stages=num_stages, steps_per_stage=2, final_steps=1, spacing=spacing),
                          {"sigma_start": (POS, NONNEG_BAD),
                           "num_stages": ([_const(1), _const(3)], [_const(0), _const(1.0)]),
                           "spacing": ([_const("geometric"), _const("linear")], [_const("log"), _const(None)])}),
    "make_task": (inv.make_task, {"key": (KEY_OK, KEY_BAD),
                                  "name": ([_const("inpainting"), _const("gaussian_blur")], [_const("x"), _const(None)]),
                                  "shape": ([_const((32, 32))], [_const(None), _const((32,)), _const((-1, 32)),
                                                                 _const(("a", 32))]),
                                  "sigma_y": (NONNEG, NONNEG_BAD)}),
    "restore_batch": (lambda keys, ys, method, sigma_y: inv.restore_batch(
        keys, ys, _blur(), DENOISER[0](), _sched(), sigma_y, method=method),
                      {"keys": ([lambda: jax.random.split(jax.random.key(0), 2)],
                                [_const(None), lambda: jax.random.key(0), _const(np.zeros(2, np.int32))]),
                       "ys": ([_img(d, shape=(1, H, W, 1)) for d in ("float32", "float16")],
                              [_const(None), _img("int32", shape=(1, H, W, 1)), _img("float32"),
                               _img("float32", shape=(1, 6, W, 1))]),
                       "method": ([_const("red"), _const("pnp_pgd")], [_const("nope"), _const(None)]),
                       "sigma_y": (POS, POS_BAD)}),
    "heldout_crops": (inv.heldout_crops, {"size": ([_const(8)], [_const(0), _const(1000), _const(2.5),
                                                                 _const(None)])}),
    # expensive when valid (a training run, the full table): fuzzed with one bad argument at a time only
    "psnr_table": (lambda denoiser, seed, tv: inv.psnr_table(denoiser, seed=seed, size=8, tv=tv),
                   {"denoiser": (DENOISER, [_const(None), _const("dncnn")]),
                    "seed": ([_const(0)], [_const(-1), _const(0.5), _const(None)]),
                    "tv": ([_const(False)], [_const(None), _const(1)])}),
    "train_denoiser": (lambda key, model, images, num_steps, learning_rate: inv.train_denoiser(
        key, model, images, num_steps=num_steps, batch_size=1, patch_size=4, learning_rate=learning_rate),
                       {"key": (KEY_OK, KEY_BAD), "model": (DENOISER, [_const(None), _const(lambda x, s: x)]),
                        "images": ([lambda: [_base((H, W, 3))]],
                                   [_const(None), _const([]), lambda: [np.full((H, W, 3), NAN)],
                                    lambda: [np.ones((H, W, 3), np.uint8)], lambda: [np.ones((2, 2, 3)) * 0.5],
                                    lambda: [np.ones((H, W, 2)) * 0.5], lambda: [_base((H, W, 3)) + 1]]),
                        "num_steps": ([_const(2)], [_const(0), _const(None)]),
                        "learning_rate": ([_const(1e-3)], [_const(-1.0), _const(NAN), _const(0.0)])}),
}
for _m in ("snore", "snore_prox", "annealed_snore", "red", "red_prox", "pnp_pgd", "pnp_hqs"):
    FUZZ[_m] = _restoration_row(_m, random=_m in ("snore", "snore_prox", "annealed_snore"))
FUZZ["restore"] = (_restore, {
    "key": (KEY_OK, KEY_BAD), "y": ([_img(d) for d in FLOATS], IMG_BAD), "operator": ([_blur, _inpaint], [_const(None)]),
    "schedule": ([_sched], SCHED_BAD), "sigma_y": (POS, POS_BAD),
    "method": ([lambda: inv.SNORE()], [_const("snore"), _const(None), lambda: inv.SNORE]),
})
_FLAG = ([_const(False), _const(True)], [_const(1), _const(None), _const("yes")])
FUZZ["SNORE"] = (inv.SNORE, {"num_samples": ([_const(1), _const(3)], [_const(0), _const(1.5), _const(None)]),
                             "prox": _FLAG, "antithetic": _FLAG})
FUZZ["RED"] = (inv.RED, {"prox": _FLAG})
FUZZ["PnPPGD"] = (inv.PnPPGD, {})
FUZZ["PnPHQS"] = (inv.PnPHQS, {})
for _cls in ("GaussianMMSEDenoiser", "TVDenoiser", "DnCNN", "GradientStepDenoiser"):
    FUZZ[f"{_cls}.__call__"] = (_den_call(_cls), _DEN_ARGS)
for _meth in ("__call__", "adjoint", "data_grad", "data_fidelity", "data_prox"):
    FUZZ[f"operator.{_meth}"] = _op_row(_meth)

#: Functions whose valid path is too expensive for a fuzz example (fuzzed with one bad argument).
BAD_ONLY = ("psnr_table", "train_denoiser")

_NAME = re.compile(r"^([A-Za-z_][\w.\[\]]*)(, [A-Za-z_][\w.\[\]]*)*: expected ")


def _finite_leaves(out):
    for leaf in jax.tree_util.tree_leaves(out):
        if isinstance(leaf, (jax.Array, np.ndarray)) and jnp.issubdtype(leaf.dtype, jnp.inexact):
            assert bool(jnp.all(jnp.isfinite(jnp.asarray(leaf, jnp.float32)))), "non-finite output"


def _run(name, data):
    call, args = FUZZ[name]
    choices = [a for a, (_, bad) in args.items() if bad]
    bad_arg = data.draw(st.sampled_from(choices if name in BAD_ONLY else [None] + choices), label="bad")
    kwargs = {}
    for arg, (ok, bad) in args.items():
        factory = data.draw(st.sampled_from(bad if arg == bad_arg else ok), label=arg)
        kwargs[arg] = factory()
    try:
        out = call(**kwargs)
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        head = _NAME.match(msg)
        assert bad_arg is not None, f"valid input refused: {msg}"
        assert head is not None, f"not the one dialect: {type(exc).__name__}: {msg}"
        named = [n.strip() for n in msg.split(": expected")[0].split(",")]
        assert any(n.split(".")[0].split("[")[0] == bad_arg for n in named), (bad_arg, msg)
        return
    assert bad_arg is None, f"bad {bad_arg} accepted"
    _finite_leaves(out)


@pytest.mark.parametrize("name", sorted(FUZZ))
@given(data=st.data())
def test_fuzz(name, data):
    _run(name, data)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FUZZ))
@settings(max_examples=40)
@given(data=st.data())
def test_fuzz_deep(name, data):
    _run(name, data)


def test_every_public_function_is_fuzzed():
    """Every public callable of the family is in the table (the containers and constants are not called)."""
    containers = {"AbstractDenoiser", "AbstractOperator", "AbstractRestorer", "RestorationProblem", "Schedule",
                  "RestorationResult", "Task",
                  "DenoiserTrainResult", "METHODS", "PRETRAINED", "RECOMMENDED", "TASKS", "TABLE_SEED", "TABLE_SIGMAS",
                  "TEST_IMAGES", "TRAIN_IMAGES"}
    fuzzed = {n.split(".")[0] for n in FUZZ} | {"Identity"}  # Identity: operator.* rows
    missing = set(inv.__all__) - containers - fuzzed
    assert not missing, missing
