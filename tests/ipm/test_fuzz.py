"""Shape/dtype/NaN fuzzing of every public function of jaxcore.ipm (issue 15, DESIGN "Tests").

For each exported function (``FUZZED`` below lists which inputs each is fuzzed with), hypothesis draws
a dtype (int32, float16, bfloat16, float32, float64), a value class (valid, zero, negative, NaN, inf)
for one argument, and a shape from a small fixed set (matched or mismatched). The outcome must be a
finite value, or a ValueError/TypeError in the one dialect (``"<argument>: expected ..."``) whose
message names the argument that was made bad; never a NaN from finite valid input, never an
exception from inside JAX. Valid inputs must succeed. The default ("light") profile runs 12 examples
per function on shapes that compile once; ``test_fuzz_deep`` (marked slow) runs 200.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxcore import ipm

DTYPES = [np.int32, jnp.float16, jnp.bfloat16, np.float32, np.float64]
KINDS = ["valid", "zero", "negative", "nan", "inf"]
KEY = jax.random.key(0)

# function -> the inputs it is fuzzed with (each with dtypes, value classes and shapes where it is an array)
FUZZED = {
    "wasserstein_1d": ["x", "y", "x_weights", "y_weights", "p"],
    "w1_empirical": ["u", "v"],
    "outer_ot_cost": ["cost", "outer", "epsilon"],
    "hipm_objective": ["slopes", "features1", "features2"],
    "hipm_features": ["sample", "interval", "num_grid"],
    "dlip": ["sample1", "sample2", "interval", "tol", "starts", "key"],
    "lower_bound": ["sample1", "sample2"],
    "inner_cost_matrix": ["sample1", "sample2", "p", "epsilon"],
    "wow": ["sample1", "sample2", "p", "outer_epsilon"],
    "permutation_test": ["key", "sample1", "sample2", "statistic", "num_permutations", "p"],
    "pool": ["sample1", "sample2"],
    "pad_atoms": ["sample", "num_atoms"],
    "hierarchical_sample": ["atoms", "weights", "interval"],
    "from_groups": ["values", "groups", "dtype"],
    "dirichlet_process_urn": ["key", "alpha", "num_atoms", "dtype"],
    "dirichlet_process_finite": ["key", "alpha", "num_atoms", "dtype"],
    "dirichlet_process_stick_breaking": ["key", "alpha", "num_atoms", "dtype"],
    "hierarchical_gaussian": ["key", "mean", "mean_scale", "scale", "log_scale_sd", "dtype"],
    "uniform_base": ["low", "high"],
    "uniform_mixture_base": ["intervals", "probs"],
    "dirichlet_process_approximation_bounds": ["alpha", "num_atoms"],
    "dirichlet_process_approximation_error": ["key", "alpha", "num_atoms", "num_reps"],
    "permutation_test_power": ["key", "num_measures", "num_datasets", "level"],
}
CLASSES = ["dtypes int32/float16/bfloat16/float32/float64", "valid/zero/negative/NaN/inf values",
           "matched/mismatched shapes", "None", "int seeds as keys (where a key is taken)"]

_DIALECT = re.compile(r"^(?P<names>[\w\[\], ]+): expected ")


def _array(shape, dtype, kind, low=0.0, high=1.0, seed=0):
    """Values in [low, high] (valid), then one entry made bad by ``kind``; int dtypes get integers."""
    rng = np.random.default_rng(seed)
    v = rng.uniform(low, high, shape)
    if kind == "zero":
        v = np.zeros(shape)
    if np.dtype(dtype).kind == "i":
        v = np.round(v)  # integers inside [low, high] (for the intervals)
        if kind == "negative":
            v.flat[0] = -2
        return np.asarray(v, dtype)
    if kind == "negative":
        v.flat[0] = -0.5
    elif kind == "nan":
        v.flat[0] = np.nan
    elif kind == "inf":
        v.flat[0] = np.inf
    if dtype in (jnp.float16, jnp.bfloat16):
        return jnp.asarray(v, jnp.float32).astype(dtype)
    return np.asarray(v, dtype)


def _weights(shape, dtype, kind):
    w = np.full(shape, 1.0 / shape[-1])
    if kind == "negative":
        w.flat[0], w.flat[1] = -0.5, w.flat[1] + 0.5 + w.flat[0]
    elif kind == "nan":
        w.flat[0] = np.nan
    elif kind == "inf":
        w.flat[0] = np.inf
    elif kind == "zero":
        w = np.zeros(shape)
    if np.dtype(dtype).kind == "i":
        return np.asarray(np.round(w), dtype)  # integer weights rarely sum to one: refused or accepted
    if dtype in (jnp.float16, jnp.bfloat16):
        return jnp.asarray(w, jnp.float32).astype(dtype)
    return np.asarray(w, dtype)


def check_outcome(call, bad, ok):
    """Run ``call``: a finite result, or a dialect error naming one of ``bad`` (None: any argument).

    ``ok``: the inputs are valid, so the call must succeed.
    """
    try:
        out = call()
        leaves = [x for x in jax.tree_util.tree_leaves(out) if hasattr(x, "dtype")
                  and np.issubdtype(np.asarray(x).dtype, np.number) or isinstance(x, (float, np.floating))]
        for x in leaves:
            a = np.asarray(jax.block_until_ready(x)).astype(np.float64)
            assert np.all(np.isfinite(a)), f"non-finite output {a} from accepted input"
        return out
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        m = _DIALECT.match(msg)
        assert m is not None, f"not the house dialect: {type(exc).__name__}: {msg[:300]}"
        assert not ok, f"valid input refused: {msg}"
        if bad is not None:
            names = {n.strip() for n in m.group("names").split(",")}
            assert names & set(bad), f"message does not name {bad}: {msg}"
        return None


def _kind(data, allow_bad=True):
    return data.draw(st.sampled_from(KINDS if allow_bad else ["valid", "zero"]))


# --- array kernels ------------------------------------------------------------------------------------------


def fuzz_wasserstein_1d(data):
    dtype = data.draw(st.sampled_from(DTYPES))
    target = data.draw(st.sampled_from(["x", "y", "x_weights", "y_weights", "p", "none"]))
    kind = _kind(data)
    ny = data.draw(st.sampled_from([3, 2]))
    wshape = data.draw(st.sampled_from(["match", "mismatch"]))
    x = _array((3,), dtype, kind if target == "x" else "valid")
    y = _array((ny,), dtype, kind if target == "y" else "valid", seed=1)
    xw = _weights((3,) if wshape == "match" else (2,), dtype, kind if target == "x_weights" else "valid")
    yw = None if target != "y_weights" else _weights((ny,), dtype, kind)
    p = {"valid": 2.0, "zero": 0.0, "negative": -1.0, "nan": float("nan"), "inf": float("inf")}[kind] \
        if target == "p" else 1.0
    if target == "none":
        x = None
    weight_int = np.dtype(dtype).kind == "i"
    ok = (target == "y_weights" and kind == "valid" and not weight_int) or \
         (target in ("x", "y") and kind in ("valid", "zero", "negative") and wshape == "match" and not weight_int) or \
         (target == "p" and kind == "valid" and wshape == "match" and not weight_int)
    bad = {"none": ("x",)}.get(target, (target, "x_weights") if wshape == "mismatch" else (target,))
    if weight_int or wshape == "mismatch":
        bad = bad + ("x_weights",)
    check_outcome(lambda: ipm.wasserstein_1d(x, y, xw, yw, p=p), bad, ok)


def fuzz_w1_empirical(data):
    dtype = data.draw(st.sampled_from(DTYPES))
    target = data.draw(st.sampled_from(["u", "v"]))
    kind = _kind(data)
    shape_v = data.draw(st.sampled_from([(2, 3), (2, 4), (3, 3), (0,)]))
    u = _array((2, 3), dtype, kind if target == "u" else "valid")
    v = _array(shape_v, dtype, kind if target == "v" and shape_v != (0,) else "valid", seed=1)
    ok = kind in ("valid", "zero", "negative") and shape_v[0] == 2
    check_outcome(lambda: ipm.w1_empirical(u, v), (target, "u", "v"), ok)


def fuzz_outer_ot_cost(data):
    dtype = data.draw(st.sampled_from(DTYPES))
    kind = _kind(data)
    shape = data.draw(st.sampled_from([(3, 3), (3, 2), (3,)]))
    outer = data.draw(st.sampled_from(["exact", "sinkhorn", "nope"]))
    eps = data.draw(st.sampled_from([1e-2, 0.0, float("nan")]))
    cost = _array(shape, dtype, kind)
    ok = kind in ("valid", "zero", "negative") and len(shape) == 2 and outer != "nope" and eps == 1e-2
    check_outcome(lambda: ipm.outer_ot_cost(cost, outer=outer, epsilon=eps), ("cost", "outer", "epsilon"), ok)


def fuzz_hipm_objective(data):
    dtype = data.draw(st.sampled_from(DTYPES))
    target = data.draw(st.sampled_from(["slopes", "features1", "features2"]))
    kind = _kind(data)
    m = data.draw(st.sampled_from([4, 3]))
    s = _array((4,), dtype, kind if target == "slopes" else "valid", -1, 1)
    f1 = _array((3, 4), dtype, kind if target == "features1" else "valid", seed=1)
    f2 = _array((2, m), dtype, kind if target == "features2" else "valid", seed=2)
    ok = kind in ("valid", "zero", "negative") and m == 4
    check_outcome(lambda: ipm.hipm_objective(s, f1, f2), (target, "slopes"), ok)


# --- sample kernels -----------------------------------------------------------------------------------------


SHAPES2 = [(3, 4), (2, 3), (3, 4, 2), (4,)]


def _sample_inputs(data, shapes=SHAPES2):
    """Atoms for ``sample1``/``sample2`` with one made bad (values, dtype or shape)."""
    dtype = data.draw(st.sampled_from(DTYPES))
    target = data.draw(st.sampled_from(["sample1", "sample2", "weights"]))
    kind = _kind(data)
    shape2 = data.draw(st.sampled_from(shapes))
    a1 = _array((3, 4), dtype, kind if target == "sample1" else "valid")
    a2 = _array(shape2, dtype, kind if target == "sample2" else "valid", seed=1)
    s1 = a1
    if target == "weights":
        if np.dtype(dtype).kind == "i":
            kind = "valid"
        s1 = (a1, _weights((3, 4), dtype, kind))
    return dtype, target, kind, s1, a2, shape2


ONE_VALID = [(3, 4), (3, 4, 2), (4,)]  # one valid shape: the costly kernels compile once per weights kind


def _run_pair(fn, data, *, interval=False, d_ok=False, shapes=SHAPES2, **kw):
    dtype, target, kind, s1, a2, shape2 = _sample_inputs(data, shapes)

    def call():
        x = ipm.hierarchical_sample(*s1, name="sample1") if isinstance(s1, tuple) else s1
        return fn(x, a2, **kw)

    shapes_ok = len(shape2) == 2 or (d_ok and len(shape2) == 3)
    ok = kind in ("valid",) + (() if interval else ("zero", "negative")) and shapes_ok
    if target == "weights" and (kind != "valid" or np.dtype(dtype).kind == "i"):
        ok = False  # integer weights round to 0 / 1 and do not sum to one
    names = ("sample1" if target == "weights" else target, "sample1, sample2", "sample1", "sample2")
    check_outcome(call, names, ok)


def fuzz_lower_bound(data):
    _run_pair(ipm.lower_bound, data)


def fuzz_inner_cost_matrix(data):
    _run_pair(ipm.inner_cost_matrix, data, shapes=ONE_VALID, p=1.0)


def fuzz_wow(data):
    _run_pair(lambda a, b: ipm.wow(a, b, p=2.0).value, data, shapes=[(2, 3), (3, 4, 2), (4,)])


def fuzz_pool(data):
    _run_pair(ipm.pool, data, d_ok=False)


def fuzz_dlip(data):
    _run_pair(lambda a, b: ipm.dlip(a, b, interval=(0.0, 1.0), num_grid=4, num_starts=2, max_steps=5).value,
              data, interval=True, shapes=ONE_VALID)


def fuzz_permutation_test(data):
    statistic = data.draw(st.sampled_from(["lower_bound", "wow"]))
    use_int_key = data.draw(st.booleans())
    key = 0 if use_int_key else KEY

    def fn(a, b):
        return ipm.permutation_test(key, a, b, statistic=statistic, num_permutations=9).p_value

    # one valid shape only: every valid example of a statistic shares one compilation
    dtype, target, kind, s1, a2, shape2 = _sample_inputs(data, ONE_VALID)

    def call():
        x = ipm.hierarchical_sample(*s1, name="sample1") if isinstance(s1, tuple) else s1
        return fn(x, a2)

    ok = kind in ("valid", "zero", "negative") and len(shape2) == 2 and not use_int_key
    if target == "weights" and (kind != "valid" or np.dtype(dtype).kind == "i"):
        ok = False
    check_outcome(call, ("key", "sample1" if target == "weights" else target, "sample1", "sample2"), ok)


def fuzz_hipm_features(data):
    dtype = data.draw(st.sampled_from(DTYPES))
    kind = _kind(data)
    shape = data.draw(st.sampled_from([(3, 4), (3, 4, 1), (3, 4, 2), (4,)]))
    interval = data.draw(st.sampled_from([(0.0, 1.0), (1.0, 0.0), (0.0, float("nan")), None]))
    num_grid = data.draw(st.sampled_from([4, 0]))
    atoms = _array(shape, dtype, kind)
    ok = kind in ("valid", "zero") and shape in ((3, 4), (3, 4, 1)) and interval == (0.0, 1.0) and num_grid == 4
    check_outcome(lambda: ipm.hipm_features(atoms, interval=interval, num_grid=num_grid),
                  ("sample", "interval", "num_grid"), ok)


def fuzz_pad_atoms(data):
    dtype = data.draw(st.sampled_from(DTYPES))
    kind = _kind(data)
    num_atoms = data.draw(st.sampled_from([6, 4, 2, 6.0]))
    atoms = _array((3, 4), dtype, kind, -1, 1)
    ok = kind in ("valid", "zero", "negative") and num_atoms in (6, 4) and isinstance(num_atoms, int)
    check_outcome(lambda: ipm.pad_atoms(atoms, num_atoms), ("sample", "num_atoms"), ok)


def fuzz_hierarchical_sample(data):
    dtype = data.draw(st.sampled_from(DTYPES))
    target = data.draw(st.sampled_from(["atoms", "weights", "none"]))
    kind = _kind(data)
    wshape = data.draw(st.sampled_from([(3, 4), (3, 5)]))
    interval = data.draw(st.sampled_from([None, (0.0, 1.0), (1.0, 0.0)]))
    atoms = None if target == "none" else _array((3, 4), dtype, kind if target == "atoms" else "valid")
    w = _weights(wshape, dtype, kind if target == "weights" else "valid")
    w_int = np.dtype(dtype).kind == "i"
    ok = (target == "atoms" and kind in ("valid", "zero") and wshape == (3, 4) and not w_int
          and interval != (1.0, 0.0))
    check_outcome(lambda: ipm.hierarchical_sample(atoms, w, interval=interval), ("sample", "interval"), ok)


def fuzz_from_groups(data):
    dtype = data.draw(st.sampled_from([np.float32, np.float64, jnp.float16, jnp.bfloat16, np.int32]))
    kind = _kind(data)
    ng = data.draw(st.sampled_from([5, 4]))
    values = _array((5,), np.float64, kind)
    groups = np.array([0, 1, 0, 2, 1])[:ng]
    ok = kind in ("valid", "zero", "negative") and ng == 5 and np.dtype(dtype).kind == "f" or \
        (kind in ("valid", "zero", "negative") and ng == 5 and dtype == jnp.bfloat16)
    check_outcome(lambda: ipm.from_groups(values, groups, dtype=dtype), ("values", "groups", "dtype"), ok)


# --- generators ---------------------------------------------------------------------------------------------

_SCALAR = {"valid": 1.5, "zero": 0.0, "negative": -1.0, "nan": float("nan"), "inf": float("inf")}


def _fuzz_dp(gen, data):
    dtype = data.draw(st.sampled_from(DTYPES))
    kind = _kind(data)
    int_key = data.draw(st.booleans())
    num_atoms = data.draw(st.sampled_from([3, 0]))
    key = 7 if int_key else KEY
    ok = kind == "valid" and not int_key and num_atoms == 3 and np.dtype(dtype).kind == "f" or \
        (kind == "valid" and not int_key and num_atoms == 3 and dtype == jnp.bfloat16)
    out = check_outcome(lambda: gen(key, ipm.uniform_base(), _SCALAR[kind], 2, num_atoms, dtype=dtype),
                        ("key", "alpha", "num_atoms", "dtype"), ok)
    if out is not None:
        assert out.atoms.dtype == jnp.dtype(dtype) or dtype == np.float64
        np.testing.assert_allclose(np.asarray(out.weights, np.float64).sum(1), 1.0, atol=4 * 2**-7)


def fuzz_dirichlet_process_urn(data):
    _fuzz_dp(ipm.dirichlet_process_urn, data)


def fuzz_dirichlet_process_finite(data):
    _fuzz_dp(ipm.dirichlet_process_finite, data)


def fuzz_dirichlet_process_stick_breaking(data):
    _fuzz_dp(ipm.dirichlet_process_stick_breaking, data)


def fuzz_hierarchical_gaussian(data):
    dtype = data.draw(st.sampled_from(DTYPES))
    target = data.draw(st.sampled_from(["mean", "mean_scale", "scale", "log_scale_sd", "key"]))
    kind = _kind(data)
    dim = data.draw(st.sampled_from([None, 2]))
    key = 3 if target == "key" else KEY
    kw = {} if target == "key" else {target: _SCALAR[kind]}
    valid_value = kind == "valid" or (kind == "zero" and target in ("mean", "mean_scale", "log_scale_sd")) or \
        (kind == "negative" and target == "mean")
    ok = target != "key" and valid_value and (np.dtype(dtype).kind == "f" or dtype == jnp.bfloat16)
    check_outcome(lambda: ipm.hierarchical_gaussian(key, 2, 3, dim=dim, dtype=dtype, **kw),
                  (target, "dtype"), ok)


def fuzz_uniform_base(data):
    low = data.draw(st.sampled_from([0.0, -1.0, float("nan"), float("inf"), None, 2]))
    high = data.draw(st.sampled_from([1.0, 0.0, float("nan"), float("-inf"), "a"]))
    ok = isinstance(low, (int, float)) and low is not None and np.isfinite(low) and isinstance(high, float) \
        and np.isfinite(high) and low < high
    out = check_outcome(lambda: ipm.uniform_base(low, high), ("low", "high"), ok)
    if out is not None:
        x = out(KEY, (5,))
        assert bool(jnp.all((x >= low) & (x <= high)))


def fuzz_uniform_mixture_base(data):
    intervals = data.draw(st.sampled_from([[(0, 1), (2, 3)], [(1, 0), (2, 3)], [(0, float("nan")), (2, 3)],
                                           [(0, 1)], None, "ab"]))
    probs = data.draw(st.sampled_from([[0.5, 0.5], [1.5, -0.5], [float("nan"), 0.5], [0.2, 0.2], None]))
    ok = intervals == [(0, 1), (2, 3)] and probs == [0.5, 0.5]
    check_outcome(lambda: ipm.uniform_mixture_base(intervals, probs), ("intervals", "probs", "intervals, probs"), ok)


def fuzz_dirichlet_process_approximation_bounds(data):
    alpha = _SCALAR[_kind(data)]
    n = data.draw(st.sampled_from([4, [1, 4], 0, 2.5, float("nan"), "x", None, np.array([3], np.int32)]))
    ok = alpha == 1.5 and (isinstance(n, (int, list)) and n != 0 or isinstance(n, np.ndarray))
    out = check_outcome(lambda: ipm.dirichlet_process_approximation_bounds(alpha, n), ("alpha", "num_atoms"), ok)
    if out is not None:
        assert set(out) == {"urn", "finite", "stick_breaking"}



def fuzz_dirichlet_process_approximation_error(data):
    kind = _kind(data)
    int_key = data.draw(st.booleans())
    num_atoms = data.draw(st.sampled_from([3, 0, 4]))  # 4: more than the reference's 3 atoms (3: no padding,
    # and stick-breaking shares the reference's program: fewer compilations)
    reps = data.draw(st.sampled_from([1, 0]))
    ok = kind == "valid" and not int_key and num_atoms == 3 and reps == 1
    out = check_outcome(lambda: ipm.dirichlet_process_approximation_error(
        7 if int_key else KEY, ipm.uniform_base(), _SCALAR[kind], 2, num_atoms, interval=(0.0, 1.0),
        num_reference_atoms=3, num_reps=reps, num_grid=8, num_starts=1, max_steps=5),
        ("key", "alpha", "num_atoms", "num_reps"), ok)
    if out is not None:
        assert all(x.shape == (1,) and float(x[0]) >= 0.0 for x in out)


def fuzz_permutation_test_power(data):
    target = data.draw(st.sampled_from(["key", "num_measures", "num_datasets", "level", "none"]))
    kind = _kind(data)
    bad = {"key": 7, "num_measures": [4, _SCALAR[kind]], "num_datasets": _SCALAR[kind], "level": _SCALAR[kind]}

    def pair(k, n):
        k1, k2 = jax.random.split(k)
        return (ipm.dirichlet_process_stick_breaking(k1, ipm.uniform_base(), 1.0, n, 5),
                ipm.dirichlet_process_stick_breaking(k2, ipm.uniform_base(), 1.0, n, 5))

    args = {"key": KEY, "num_measures": [4], "num_datasets": 1, "level": 0.1}
    if target != "none":
        args[target] = bad[target]
    ok = target == "none"  # every bad value above (1.5, 0, -1, NaN, inf) is out of its argument's range or type
    out = check_outcome(lambda: ipm.permutation_test_power(
        args["key"], pair, args["num_measures"], num_datasets=args["num_datasets"], level=args["level"],
        statistic="lower_bound", num_permutations=9), ("key", "num_measures", "num_measures[1]", "num_datasets",
                                                       "level"), ok)
    if out is not None:
        assert 0.0 <= float(out.rejection_rate[-1]) <= 1.0

FUZZERS = {name[len("fuzz_"):]: fn for name, fn in dict(globals()).items() if name.startswith("fuzz_")}


def test_every_public_function_is_fuzzed():
    public = {n for n in ipm.__all__ if callable(getattr(ipm, n)) and not isinstance(getattr(ipm, n), type)
              and n != "BaseSampler"}
    assert public == set(FUZZED) == set(FUZZERS), (public ^ set(FUZZED), public ^ set(FUZZERS))


@pytest.mark.parametrize("name", sorted(FUZZERS))
def test_fuzz(name):
    given(st.data())(FUZZERS[name])()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FUZZERS))
def test_fuzz_deep(name):
    settings(max_examples=40)(given(st.data())(FUZZERS[name]))()
