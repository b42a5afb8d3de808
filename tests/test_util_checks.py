"""jaxcore._util's host-or-run-time checks (``checked_*``), ``check_float_dtype`` and ``minibatch_draw``.

Each check has one message for both paths: a concrete value is refused on the host (ValueError naming
the first bad entry), a traced one at run time through ``error_if`` with the same text.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore._util import (
    check_float_dtype,
    checked,
    checked_finite,
    checked_index,
    checked_positive,
    checked_range,
    checked_scalar,
    checked_simplex,
    first_bad,
    trusted_values,
)
from jaxcore._util.minibatch import minibatch_draw

RUNTIME = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError)


def test_first_bad_names_the_first_bad_entry():
    a = np.array([[1.0, 2.0], [np.nan, 4.0]])
    assert first_bad(a, np.isnan(a)) == "nan at index (1, 0)"
    assert first_bad(np.array(7), np.array(True)) == "7"


@pytest.mark.parametrize(
    "call, good, bad, message",
    [
        (lambda x: checked_finite(x, "x"), [1.0, -2.0], [1.0, np.inf], r"^x: expected finite values, got inf at index \(1,\)$"),
        (lambda x: checked_positive(x, "s"), [1.0, 2.0], [1.0, 0.0], r"^s: expected finite values > 0, got 0.0 at index \(1,\)$"),
        (lambda x: checked_positive(x, "s", allow_zero=True), [0.0, 2.0], [0.0, -1.0],
         r"^s: expected finite values >= 0, got -1.0 at index \(1,\)$"),
        (lambda x: checked_range(x, "p", 0.0, 1.0), [0.0, 1.0], [0.5, np.nan],
         r"^p: expected values in \[0, 1\], got nan at index \(1,\)$"),
        (lambda x: checked_range(x, "l", None, 0.0), [-3.0, 0.0], [-3.0, 0.5],
         r"^l: expected values in \(-inf, 0\], got 0.5 at index \(1,\)$"),
        (lambda x: checked_index(x, "i", 3), [0, 2], [0, 3], r"^i: expected indices in \[0, 3\), got 3 at index \(1,\)$"),
        (lambda x: checked(x, "w", "even numbers", lambda a: a % 2 != 0), [2, 4], [2, 5],
         r"^w: expected even numbers, got 5 at index \(1,\)$"),
    ],
)
def test_host_and_run_time_paths_agree(call, good, bad, message):
    good_a, bad_a = jnp.asarray(good), jnp.asarray(bad)
    assert call(good_a) is good_a  # concrete and valid: returned as it is
    with pytest.raises(ValueError, match=message):
        call(bad_a)
    run = eqx.filter_jit(call)
    np.testing.assert_array_equal(run(good_a), good_a)
    with pytest.raises(RUNTIME, match=message.split(", got")[0].lstrip("^")):
        jax.block_until_ready(run(bad_a))


def test_trusted_and_switched_off_values_are_not_checked():
    bad = jnp.array([1.0, jnp.nan])

    @jax.jit
    def trusted(x):
        with trusted_values(x):
            return checked_finite(x, "x")

    np.testing.assert_array_equal(np.isnan(trusted(bad)), [False, True])
    np.testing.assert_array_equal(np.isnan(jax.jit(lambda x: checked_finite(x, "x", check=False))(bad)), [False, True])
    assert checked_finite(bad, "x", check=False) is bad


def test_checked_scalar():
    assert checked_scalar(0.5, "lr", positive=True) == 0.5
    with pytest.raises(ValueError, match=r"^lr: expected a finite number > 0, got 0.0$"):
        checked_scalar(0.0, "lr", positive=True)
    with pytest.raises(ValueError, match=r"^g: expected a number in \[0, 1\], got 1.5$"):
        checked_scalar(1.5, "g", low=0.0, high=1.0)
    run = eqx.filter_jit(lambda x: checked_scalar(x, "lr", nonnegative=True))
    assert float(run(jnp.float32(2.0))) == 2.0
    with pytest.raises(RUNTIME, match="lr: expected a finite number >= 0"):
        jax.block_until_ready(run(jnp.float32(-1.0)))
    with pytest.raises(TypeError, match=r"^lr: expected a scalar, got an array of shape \(2,\)"):
        jax.jit(lambda x: checked_scalar(x, "lr"))(jnp.ones(2))


def test_checked_simplex():
    w = jnp.array([[0.25, 0.75], [1.0, 0.0]])
    assert checked_simplex(w, "w", 1e-4) is w
    with pytest.raises(ValueError, match=r"^w: expected finite values >= 0, got -0.5 at index \(1, 1\)$"):
        checked_simplex(jnp.array([[0.5, 0.5], [1.5, -0.5]]), "w", 1e-4)
    with pytest.raises(ValueError, match=r"^w: expected rows summing to 1 \(within 0.0001\), got sum float64 array"):
        checked_simplex(jnp.array([[0.5, 0.5], [0.5, 0.25]]), "w", 1e-4)
    run = eqx.filter_jit(lambda x: checked_simplex(x, "p", 1e-3, entries="probabilities", rows="probabilities summing to 1"))
    np.testing.assert_array_equal(run(w), w)
    with pytest.raises(RUNTIME, match="p: expected probabilities summing to 1"):
        jax.block_until_ready(run(jnp.array([0.5, 0.4])))
    with pytest.raises(RUNTIME, match="p: expected probabilities"):
        jax.block_until_ready(run(jnp.array([1.5, -0.5])))


def test_check_float_dtype():
    assert check_float_dtype(jnp.bfloat16) == jnp.dtype(jnp.bfloat16)
    assert check_float_dtype("float32") == jnp.dtype(jnp.float32)
    with pytest.raises(TypeError, match=r"^dtype: expected a float dtype, got int32$"):
        check_float_dtype(jnp.int32)
    with pytest.raises(TypeError, match=r"^d: expected a floating dtype, got 'nope'$"):
        check_float_dtype("nope", "d", "a floating dtype")


def test_minibatch_draw_is_the_stream_it_replaced():
    key = jax.random.key(3)
    # i.i.d. rows: exactly jax.random.randint's stream (the training loops' results are unchanged)
    np.testing.assert_array_equal(minibatch_draw(key, 50, 8), jax.random.randint(key, (8,), 0, 50))
    # distinct rows when the batch fits, i.i.d. when it does not: jax.random.choice's stream
    np.testing.assert_array_equal(minibatch_draw(key, 50, 8, replace=None),
                                  jax.random.choice(key, 50, (8,), replace=False))
    np.testing.assert_array_equal(minibatch_draw(key, 5, 8, replace=None), jax.random.choice(key, 5, (8,), replace=True))
    rows = np.asarray(minibatch_draw(key, 10, 10, replace=False))
    assert sorted(rows.tolist()) == list(range(10))  # without replacement: a permutation
    # a traced row count (the valid rows of padded data): every draw below it
    drawn = jax.jit(lambda n: minibatch_draw(key, n, 1000))(jnp.int32(7))
    assert int(drawn.min()) == 0 and int(drawn.max()) == 6
    with pytest.raises(TypeError, match="replace: expected True, False or None"):
        minibatch_draw(key, 5, 2, replace="yes")
