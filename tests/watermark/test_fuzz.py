"""Hypothesis fuzzing of jaxcore.watermark's public functions (light profile: fixed shapes, few examples).

Each draw makes one argument bad (dtype, value class, shape) or keeps it valid; the outcome must be
a finite answer for valid input, or a ValueError/TypeError in the one dialect naming that argument.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxcore.watermark import DiPmark, detect, dip_reweight, substitution_attack, token_positions

KEY = jax.random.key(0)
WM = DiPmark(16, key=KEY, context_size=2)
_DIALECT = re.compile(r"^(?P<name>\w+): expected ")

TOKENS = {
    "valid": np.array([[1, 2, 3, 4]], np.int32),
    "float": np.array([[1.0, 2.0, 3.0, 4.0]]),
    "negative": np.array([[1, -1, 3, 4]], np.int32),
    "too_large": np.array([[1, 2, 3, 16]], np.int32),
    "one_d": np.array([1, 2, 3, 4], np.int32),
    "bool": np.array([[True, False, True, False]]),
}
ALPHAS = {"valid": 0.3, "nan": float("nan"), "inf": float("inf"), "negative": -0.1, "large": 0.9, "string": "a"}
EPS = {"valid": 0.2, "nan": float("nan"), "negative": -0.5, "large": 2.0, "string": "x"}


def _outcome(fn, name):
    try:
        out = fn()
    except (ValueError, TypeError) as exc:
        m = _DIALECT.match(str(exc))
        assert m is not None, f"not in the dialect: {exc}"
        assert m.group("name") == name, f"names {m.group('name')}, expected {name}: {exc}"
        return "refused"
    for leaf in jax.tree_util.tree_leaves(out):
        a = np.asarray(leaf)
        if a.dtype.kind == "f":
            assert np.all(np.isfinite(a)), "non-finite output from valid input"
    return "ok"


@settings(max_examples=10)
@given(st.sampled_from(sorted(TOKENS)))
def test_fuzz_detect_tokens(kind):
    got = _outcome(lambda: detect(WM, TOKENS[kind]), "tokens")
    assert got == ("ok" if kind == "valid" else "refused")


@settings(max_examples=10)
@given(st.sampled_from(sorted(ALPHAS)))
def test_fuzz_reweight_alpha(kind):
    p = jnp.full(4, 0.25)
    got = _outcome(lambda: dip_reweight(p, jnp.arange(4), ALPHAS[kind]), "alpha")
    assert got == ("ok" if kind == "valid" else "refused")


@settings(max_examples=10)
@given(st.sampled_from(sorted(EPS)))
def test_fuzz_attack_eps(kind):
    got = _outcome(lambda: substitution_attack(KEY, TOKENS["valid"], None, EPS[kind], 16), "eps")
    assert got == ("ok" if kind == "valid" else "refused")


@settings(max_examples=10)
@given(st.sampled_from([2, 3, 16, 1, 0, 2.0, "a", None]))
def test_fuzz_vocab_size(v):
    valid = isinstance(v, int) and v >= 2
    got = _outcome(lambda: token_positions(KEY, jnp.zeros(4, jnp.uint32), jnp.zeros(4, jnp.int32), v), "vocab_size")
    assert got == ("ok" if valid else "refused")


@pytest.mark.parametrize("bad", [0, "key", None, jax.random.split(KEY, 2)])
def test_keys_refused(bad):
    with pytest.raises(TypeError, match="key: expected a"):
        DiPmark(16, key=bad)
