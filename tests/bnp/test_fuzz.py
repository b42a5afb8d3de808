"""Hypothesis fuzzing of every public bnp name (issue 15).

Each test draws a dtype (int32, float16, bfloat16, float32, float64), a value class (valid, zero, negative,
NaN, inf, huge) and a shape from small fixed sets (few compilations), calls the public function and
asserts the outcome: a finite value of the right shape for valid input, else a ValueError/TypeError whose
message starts with the argument's name; never an exception from inside JAX, never a NaN from valid input.
``FUZZED`` lists the inputs each public name is fuzzed with. The deep variants (``slow``) run 200 examples.
"""

from types import SimpleNamespace

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxcore import bnp

DTYPES = ["int32", "float16", "bfloat16", "float32", "float64"]
KINDS = ["valid", "zero", "negative", "nan", "inf", "huge", "none", "string"]
SHAPES = [(), (3,)]

# public name -> the inputs it is fuzzed with (classes: dtypes, values, shapes, None/strings, keys)
FUZZED = {
    "kl_beta": "a1, b1, a2, b2: dtypes x values x shapes (mismatched (3,) vs (4,))",
    "kl_normal": "loc1, scale1, loc2, scale2: dtypes x values x shapes",
    "kl_relaxed_bernoulli_mc": "key, q_logits, temperature, num_samples: dtypes x values, int keys",
    "gamma_rsample": "key, a: dtypes x values x shapes, int keys (shape: tests/bnp/test_hardening.py)",
    "stick_breaking_log_weights": "nu: dtypes x values (incl. > 1) x shapes",
    "bernoulli_process_logits": "log_pi, gamma: dtypes x values x shapes (mismatched)",
    "ibp_sample": "key, alpha, num_customers, max_features: values, int sizes <= 0, floats",
    "StickBreakingBetaProcess": "concentration1, truncation, log_prob(value): dtypes x values x shapes",
    "IndianBuffetProcess": "alpha, num_customers: values, sizes",
    "BernoulliProcessMask": "log_pi, gamma: dtypes x values",
    "LogitRelaxedBernoulli": "temperature, logits: dtypes x values x shapes",
    "RelaxedBernoulli": "temperature, logits, log_prob(value): dtypes x values",
    "average_accuracy": "acc: dtypes x shapes (non-square, 1-d), None",
    "backward_transfer": "acc: dtypes x shapes (one task), None",
    "active_depth": "masks, layer_ndim: shapes, negative/float layer_ndim",
    "active_fraction": "masks, layer_ndim: shapes, negative/float layer_ndim",
    "mask_union": "masks, num_tasks: shapes, negative/float num_tasks",
    "ContinualConfig": "every field: values (zero, negative, NaN, inf, floats for counts)",
    "AdaptiveMLP": "sizes, alpha, beta, temperature, prior_scale: values; key: ints; methods predict_logits/elbo: "
                   "task and labels out of range, x shapes",
    "AdaptiveCNN": "sizes, temperature: values; x shapes",
    "fit": "learning_rate, kl_weight: values; y: labels out of range, float labels; task: out of range; num_valid",
    "make_svi_step": "num_samples, optimizer; the step: labels and task out of range",
    "run_continual": "keys: single key, int, 2-d; method; config; tasks: more than heads",
    "AbstractAdaptiveNetwork": "the abstract base: cannot be built (test_fuzz_containers); its methods are fuzzed "
                               "through AdaptiveMLP",
    "MeanFieldGaussian": "construction only (a container)",
    "BetaSticks": "construction only (a container)",
    "FitState": "NamedTuple fields", "FitResult": "NamedTuple fields", "SVIStepResult": "NamedTuple fields",
    "ContinualResult": "NamedTuple fields", "METHODS": "the method names (a tuple)",
}


def test_every_public_name_is_fuzzed():
    assert set(FUZZED) == set(bnp.__all__)


def _value(kind, dtype, shape, *, low=0.5, high=3.0, rng=None):
    """(value, valid) of a value class; positive-valued parameters when valid."""
    if kind == "none":
        return None, False
    if kind == "string":
        return "1.0", False
    base = {"valid": 1.7, "zero": 0.0, "negative": -1.3, "nan": np.nan, "inf": np.inf, "huge": 1e30}[kind]
    if dtype == "int32":
        if kind in ("nan", "inf", "huge"):
            kind, base = "valid", 2.0
        base = float(int(base))
        if kind == "valid":
            base = 2.0
    # "huge" is 1e30: it overflows float16 (the cast gives inf: invalid) but not bfloat16 (max 3.4e38: a
    # finite, valid value); int32 has no NaN/inf/huge, those classes become the valid value 2. Validity is
    # always decided from the value after the cast (_finite), never from the class name.
    arr = np.full(shape, base, np.float64)
    if kind == "valid" and shape:
        arr = arr * np.linspace(0.8, 1.2, int(np.prod(shape))).reshape(shape)
    out = np.asarray(arr).astype(jnp.dtype(dtype))
    finite = bool(np.all(np.isfinite(out.astype(np.float64))))
    valid = finite and kind in ("valid", "huge") and bool(np.all(out.astype(np.float64) > 0))
    return (out if shape else out[()]), valid


def _finite(v):
    """A real array/number whose every entry is finite (None and strings are not)."""
    return v is not None and not isinstance(v, str) and bool(np.all(np.isfinite(np.asarray(v, np.float64))))


def _expect(call, valid, names, *, check=None):
    """Run ``call``: valid -> finite result (``check`` on it); invalid -> ValueError/TypeError naming an argument."""
    try:
        out = call()
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        assert any(msg.startswith(n + ":") or msg.startswith(n + ",") or msg.startswith(n + " ")
                   or msg.startswith(n) for n in names), msg
        assert not valid, f"valid input refused: {msg}"
        return None
    assert valid, "invalid input accepted"
    for leaf in jax.tree.leaves(out):
        a = np.asarray(leaf)
        if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
            assert not np.isnan(a.astype(np.float64)).any(), "NaN output from valid input"
    if check is not None:
        check(out)
    return out


dtype_st = st.sampled_from(DTYPES)
kind_st = st.sampled_from(KINDS)
shape_st = st.sampled_from(SHAPES)


def _fuzz_kl(fn, names, positive, dtype, kinds, shape, which, mismatch):
    args, valid = [], True
    for i, (n, pos) in enumerate(zip(names, positive)):
        kind = kinds if i == which else "valid"
        v, ok = _value(kind, dtype, shape)
        if not pos:  # a real parameter: any finite value
            ok = _finite(v)
        args.append(v)
        valid &= ok
    if mismatch:  # a (4,) argument beside valid ones of the drawn shape
        args = [_value("valid", dtype, shape)[0] for _ in names[:-1]] + [np.ones((4,), np.float32)]
        valid = shape == ()
    def check(out):
        assert out.shape == np.broadcast_shapes(*(np.shape(a) for a in args))
        assert (np.asarray(out, np.float64) >= 0).all()
    _expect(lambda: fn(*args), valid, list(names) + [", ".join(names)], check=check)


@given(dtype_st, kind_st, shape_st, st.integers(0, 3), st.booleans())
def test_fuzz_kl_beta(dtype, kind, shape, which, mismatch):
    _fuzz_kl(bnp.kl_beta, ("a1", "b1", "a2", "b2"), (True,) * 4, dtype, kind, shape, which, mismatch)


@given(dtype_st, kind_st, shape_st, st.integers(0, 3), st.booleans())
def test_fuzz_kl_normal(dtype, kind, shape, which, mismatch):
    _fuzz_kl(bnp.kl_normal, ("loc1", "scale1", "loc2", "scale2"), (False, True, False, True), dtype, kind, shape,
             which, mismatch)


@given(dtype_st, kind_st, st.sampled_from(["temperature", "q_logits", "num_samples", "key"]))
def test_fuzz_kl_relaxed_bernoulli_mc(dtype, kind, which):
    v, ok = _value(kind, dtype, ())
    args = dict(key=jax.random.key(0), q_logits=1.0, p_logits=-1.0, temperature=0.3, num_samples=2)
    if which == "temperature":
        args["temperature"] = v
    elif which == "q_logits":
        args["q_logits"] = v
        ok = v is not None and not isinstance(v, str) and bool(np.isfinite(np.asarray(v, np.float64)))
    elif which == "num_samples":
        args["num_samples"] = 0 if kind in ("zero", "negative") else (2 if kind == "valid" else 2.5)
        ok = kind == "valid"
    else:
        args["key"] = 0
        ok = False
    _expect(lambda: bnp.kl_relaxed_bernoulli_mc(**args), ok, [which])


@given(dtype_st, kind_st, shape_st, st.booleans())
def test_fuzz_gamma_rsample(dtype, kind, shape, int_key):
    a, ok = _value(kind, dtype, shape)
    key = 1 if int_key else jax.random.key(0)
    names = ["key"] if int_key else ["a"]
    _expect(lambda: bnp.gamma_rsample(key, a), ok and not int_key, names,
            check=lambda x: (np.asarray(x, np.float64) > 0).all())


@given(dtype_st, st.sampled_from(KINDS + ["above_one"]), shape_st)
def test_fuzz_stick_breaking_log_weights(dtype, kind, shape):
    if kind == "above_one":
        nu, ok = np.full(shape, 1.5, np.float32), False
    else:
        nu, ok = _value(kind, dtype, shape)
        if kind == "valid":
            nu, ok = (np.asarray(nu, np.float64) / 4).astype(jnp.dtype(dtype)) if dtype != "int32" else nu, \
                dtype != "int32" or False
        ok = ok and kind == "valid" and dtype != "int32" or (dtype == "int32" and kind == "valid" and False)
    if dtype == "int32" and kind == "valid":
        nu, ok = np.ones(shape, np.int32), True  # nu = 1: log pi = 0
    if kind == "huge":
        ok = False
    shape_ok = shape != ()
    _expect(lambda: bnp.stick_breaking_log_weights(nu), ok and (shape_ok or not ok), ["nu"])


@given(dtype_st, kind_st, shape_st, st.sampled_from(["log_pi", "gamma", "mismatch"]))
def test_fuzz_bernoulli_process_logits(dtype, kind, shape, which):
    v, _ = _value(kind, dtype, shape)
    log_pi, gamma, ok = np.log(0.5) * np.ones(shape, np.float32), np.zeros(shape, np.float32), True
    if which == "log_pi":
        log_pi = None if v is None else (v if isinstance(v, str) else -np.asarray(v))
        # log_pi: finite and <= 0; int32 values are converted explicitly (int32 "nan"/"inf" are the value 2)
        ok = _finite(log_pi) and bool(np.all(np.asarray(log_pi, np.float64) <= 0))
    elif which == "gamma":
        gamma = v
        ok = _finite(v)
    else:
        gamma = np.zeros((4,), np.float32)
        ok = shape == ()
    _expect(lambda: bnp.bernoulli_process_logits(log_pi, gamma), ok, [which if which != "mismatch" else "log_pi"])
    _expect(lambda: bnp.BernoulliProcessMask(log_pi, gamma).hard(), ok, [which if which != "mismatch" else "log_pi"])


@given(kind_st, st.sampled_from([0, -1, 3, 2.0]))
def test_fuzz_ibp(kind, n):
    alpha, ok = _value(kind, "float32", ())
    ok_n = isinstance(n, int) and n >= 1
    names = ["alpha"] if ok_n else ["num_customers", "max_features"]
    _expect(lambda: bnp.ibp_sample(jax.random.key(0), alpha if ok_n else 1.0, n, 4), (ok or not ok_n) and ok_n,
            names if ok_n else ["num_customers"])
    _expect(lambda: bnp.IndianBuffetProcess(alpha, 3, 4).mean_num_features, ok, ["alpha"])


@given(dtype_st, kind_st, st.sampled_from([(), (3,), (2,)]), st.sampled_from(["ok", "outside", "nan", "shape"]))
def test_fuzz_stick_breaking_process(dtype, kind, shape, value_kind):
    a, ok = _value(kind, dtype, shape)
    ok = ok and shape != (2,)
    names = ["concentration1", "concentration1/concentration0"]
    d = _expect(lambda: bnp.StickBreakingBetaProcess(a, 1.0, truncation=3), ok, names)
    if d is None:
        return
    value = {"ok": np.array([0.9, 0.5, 0.2]), "outside": np.array([1.5, 0.5, 0.2]),
             "nan": np.array([np.nan, 0.5, 0.2]), "shape": np.array([0.5, 0.2])}[value_kind]
    _expect(lambda: d.log_prob(value), value_kind == "ok", ["value"])


@given(dtype_st, kind_st, shape_st, st.sampled_from(["temperature", "logits"]))
def test_fuzz_relaxed_bernoulli(dtype, kind, shape, which):
    v, ok = _value(kind, dtype, shape)
    if which == "logits":  # any finite real (bfloat16 1e30 included)
        ok = _finite(v)
    args = {"temperature": 0.3, "logits": 0.5, which: v}
    _expect(lambda: bnp.LogitRelaxedBernoulli(**args).log_prob(np.zeros(shape, np.float32)), ok, [which])
    _expect(lambda: bnp.RelaxedBernoulli(**args).log_prob(np.full(shape, 0.5, np.float32)), ok, [which])


@given(dtype_st, st.sampled_from([(2, 2), (3, 3), (2, 3), (3,), None]))
def test_fuzz_accuracy_metrics(dtype, shape):
    acc = None if shape is None else np.full(shape, 0.5).astype(jnp.dtype(dtype))
    square = shape is not None and len(shape) == 2 and shape[0] == shape[1]
    _expect(lambda: bnp.average_accuracy(acc), square, ["acc"])
    _expect(lambda: bnp.backward_transfer(acc), square, ["acc"])


@given(st.sampled_from([(3, 2, 2), (2, 3), (3,), ()]), st.sampled_from([2, 1, -1, 1.5]), st.sampled_from([None, 1, -1]))
def test_fuzz_mask_metrics(shape, layer_ndim, num_tasks):
    masks = np.ones(shape, bool)
    ok = isinstance(layer_ndim, int) and layer_ndim >= 0 and len(shape) >= layer_ndim + 1
    _expect(lambda: bnp.active_depth(masks, layer_ndim), ok, ["layer_ndim", "masks"])
    _expect(lambda: bnp.active_fraction(masks, layer_ndim), ok, ["layer_ndim", "masks"])
    ok_u = len(shape) >= 1 and (num_tasks is None or num_tasks >= 0)
    _expect(lambda: bnp.mask_union(masks, num_tasks), ok_u, ["masks", "num_tasks"])


FIELDS = {"num_steps": int, "batch_size": int, "num_samples": int, "num_fisher_samples": int,
          "learning_rate": "positive", "kl_weight": "nonnegative", "ewc_lambda": "nonnegative"}


@given(st.sampled_from(sorted(FIELDS)), st.sampled_from([2, 0, -1, 2.5, float("nan"), float("inf"), None]))
def test_fuzz_continual_config(field, value):
    kind = FIELDS[field]
    if kind is int:
        ok = isinstance(value, int) and value >= 1
    elif kind == "positive":
        ok = value is not None and np.isfinite(value) and value > 0
    else:
        ok = value is not None and np.isfinite(value) and value >= 0
    _expect(lambda: bnp.ContinualConfig(**{field: value}), ok, [f"config.{field}"])


@pytest.fixture(scope="module")
def small():
    model = bnp.AdaptiveMLP(3, 4, 2, 2, 2, key=jax.random.key(0))
    return model, model.init_prior(), jnp.ones((4, 3)), jnp.array([0, 1, 0, 1])


@given(st.sampled_from(["alpha", "beta", "temperature", "prior_scale", "init_scale", "width", "key"]),
       st.sampled_from([0.0, -1.0, float("nan"), float("inf"), None]), st.booleans())
def test_fuzz_model_constructors(field, value, cnn):
    cls = bnp.AdaptiveCNN if cnn else bnp.AdaptiveMLP
    kw = {"key": jax.random.key(0)}
    args = [1 if cnn else 3, 4, 2, 2, 2]
    if field == "width":
        args[1] = None if value is None else (0 if value == 0.0 else -1)
    elif field == "key":
        kw["key"] = None if value is None else 0
    else:
        kw[field] = value
    _expect(lambda: eqx.filter_eval_shape(lambda: cls(*args, **kw)), False, [field])


@given(st.sampled_from(["task", "labels", "float_labels", "x_shape", "learning_rate", "kl_weight", "num_valid"]),
       st.sampled_from([-1, 2, float("nan"), None]))
def test_fuzz_fit_and_model_methods_refuse(small, which, bad):
    model, prior, x, y = small
    kw = dict(num_steps=2, batch_size=2)
    args = [x, y, 4, 0]
    name = which
    if which == "task":
        args[3] = bad if not (isinstance(bad, float)) else 0.5
    elif which == "labels":
        args[1] = y + (2 if bad != -1 else -2)
        name = "y"
    elif which == "float_labels":
        args[1] = y.astype(jnp.float32)
        name = "y"
    elif which == "x_shape":
        args[0] = jnp.ones((4, 5))
        name = "x"
    elif which == "num_valid":
        args[2] = 9 if bad != -1 else -1
    else:
        kw[which] = bad if bad is not None else -1.0
    if which in ("learning_rate",) and bad == 2:
        kw[which] = -2.0
    if which == "kl_weight" and bad == 2:
        kw[which] = -2.0
    names = [name]
    _expect(lambda: bnp.fit(jax.random.key(1), model, prior, *args, **kw), False, names)
    if which in ("task", "labels", "float_labels", "x_shape"):
        _expect(lambda: model.elbo(jax.random.key(1), prior, args[0], args[1], args[3], 10.0), False, names)
        import optax

        opt = optax.sgd(1e-2)
        step = bnp.make_svi_step(opt, 1)
        _expect(lambda: step(jax.random.key(0), bnp.FitState(model, opt.init(model)), prior, args[0], args[1],
                             args[3], 4.0), False, names + ["y"])


@given(st.sampled_from([0, -1, 2.0, None]), st.booleans())
def test_fuzz_make_svi_step_refuses(num_samples, bad_optimizer):
    import optax

    opt = None if bad_optimizer else optax.adam(1e-3)
    _expect(lambda: bnp.make_svi_step(opt, num_samples), False, ["num_samples", "optimizer"])


@given(st.sampled_from(["single", "int", "2d", "method", "config", "heads", "labels"]))
def test_fuzz_run_continual_refuses(which):
    tmpl = eqx.filter_eval_shape(bnp.AdaptiveMLP, 3, 4, 2, 2, 2, key=jax.random.key(0))
    x = np.ones((2, 8, 3), np.float32)
    y = np.zeros((2, 8), np.int32)
    n = np.full((2,), 8, np.int32)
    keys = jax.random.split(jax.random.key(0), 2)
    method, cfg = "finetune", bnp.ContinualConfig(num_steps=2, batch_size=2, num_fisher_samples=2)
    name = {"single": "keys", "int": "keys", "2d": "keys", "method": "method", "config": "config",
            "heads": "tasks", "labels": "tasks.y_train"}[which]
    if which == "single":
        keys = jax.random.key(0)
    elif which == "int":
        keys = 7
    elif which == "2d":
        keys = jax.random.split(jax.random.key(0), (2, 2))
    elif which == "method":
        method = "sgd"
    elif which == "config":
        cfg = (2, 2)
    elif which == "heads":
        x, y, n = np.ones((3, 8, 3), np.float32), np.zeros((3, 8), np.int32), np.full((3,), 8, np.int32)
    else:
        y = y + 3
    tasks = SimpleNamespace(x_train=x, y_train=y, n_train=n, x_test=x, y_test=y, n_test=n)
    _expect(lambda: bnp.run_continual(keys, method, tmpl, tasks, cfg), False, [name])


def test_fuzz_containers():
    with pytest.raises(TypeError):
        bnp.AbstractAdaptiveNetwork()
    assert bnp.MeanFieldGaussian(jnp.zeros(2), jnp.zeros(2)).loc.shape == (2,)
    assert bnp.BetaSticks(jnp.zeros(2), jnp.zeros(2)).log_b.shape == (2,)
    assert bnp.FitState._fields == ("params", "opt_state")
    assert bnp.FitResult._fields == ("params", "opt_state", "losses")
    assert bnp.SVIStepResult._fields == ("state", "loss", "grads")
    assert bnp.ContinualResult._fields[0] == "accuracy"
    assert bnp.METHODS == ("adaptive", "vcl", "finetune", "ewc")


_DEEP = [test_fuzz_kl_beta, test_fuzz_kl_normal, test_fuzz_bernoulli_process_logits, test_fuzz_stick_breaking_process,
         test_fuzz_relaxed_bernoulli]


@pytest.mark.slow
@pytest.mark.parametrize("test", _DEEP, ids=lambda t: t.__name__)
def test_fuzz_deep(test):
    settings(max_examples=40)(test)()
