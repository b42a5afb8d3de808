"""Argument checks in jaxcore's one error dialect.

Every message reads ``"<argument>: expected <what>, got <value>"``; a wrong value raises
:class:`ValueError`, a wrong type :class:`TypeError`. NaN and inf fail every "positive",
"non-negative" and "in range" check. Checks run on the host when the values are concrete
(:func:`is_concrete`); under ``jit`` the value checks that matter use :func:`error_if`, which wraps
``equinox.error_if`` with the same message and skips values a caller vouched for with
:func:`trusted_values` (checked once, before a loop).

The routine "check on the host when concrete, else ``error_if``" is written once, :func:`checked`,
with its common cases :func:`checked_finite`, :func:`checked_positive`, :func:`checked_range`,
:func:`checked_index`, :func:`checked_simplex` and :func:`checked_scalar`: a family keeps only the
checks no other family needs (in its ``_checks.py``), built on these.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "as_float_array",
    "check_auto_mesh",
    "check_bool",
    "check_choice",
    "check_finite",
    "check_float_dtype",
    "check_int",
    "check_ndim",
    "check_nonnegative",
    "check_positive",
    "check_range",
    "check_scalar",
    "check_shape",
    "checked",
    "checked_finite",
    "checked_index",
    "checked_positive",
    "checked_range",
    "checked_scalar",
    "checked_simplex",
    "default_float",
    "describe",
    "error_if",
    "expected",
    "first_bad",
    "is_concrete",
    "trusted_values",
]


def describe(value: Any, max_items: int = 8) -> str:
    """A short description of ``value`` for an error message (type, shape or a few entries)."""
    if isinstance(value, jax.core.Tracer):
        return f"a traced {value.dtype} array of shape {tuple(value.shape)}"
    if isinstance(value, (np.ndarray, jax.Array)):
        a = np.asarray(value)
        if a.ndim == 0:
            return repr(a.item())
        flat = a.ravel()[:max_items]
        more = ", ..." if a.size > max_items else ""
        return f"{a.dtype} array of shape {a.shape} [{', '.join(repr(v.item()) for v in flat)}{more}]"
    if isinstance(value, (str, int, float, bool, type(None), np.generic)):
        return repr(value.item() if isinstance(value, np.generic) else value)
    text = repr(value)
    return text if len(text) <= 80 else f"{type(value).__name__} {text[:77]}..."


def expected(name: str, what: str, got: Any, *, raw: bool = False) -> str:
    """The one message format: ``"<name>: expected <what>, got <value>"``.

    ``raw=True`` uses ``got`` as text as it is (already described).
    """
    return f"{name}: expected {what}, got {got if raw else describe(got)}"


def is_concrete(*xs: Any) -> bool:
    """True if no leaf of the arguments is a JAX tracer (so values can be checked in Python)."""
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(xs))


def default_float() -> jnp.dtype:
    """float64 when ``jax_enable_x64`` is on, else float32."""
    return jnp.dtype(jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)


def check_bool(x: Any, name: str) -> bool:
    """Return ``x`` if it is a Python or NumPy bool; else TypeError."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    raise TypeError(expected(name, "a bool", type(x).__name__, raw=True))


def check_int(x: Any, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``int(x)`` for a Python/NumPy integer within ``[minimum, maximum]``.

    Raises:
        TypeError: ``x`` is not an integer (bools and floats are refused, ``2.0`` included).
        ValueError: ``x`` is outside the bounds.
    """
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        if isinstance(x, (np.ndarray, jax.Array)) and x.ndim == 0 and jnp.issubdtype(x.dtype, jnp.integer) \
                and is_concrete(x):
            x = int(x)
        else:
            raise TypeError(expected(name, "an int", f"{type(x).__name__} {describe(x)}", raw=True))
    x = int(x)
    if minimum is not None and x < minimum:
        bound = f"an int >= {minimum}" if maximum is None else f"an int in [{minimum}, {maximum}]"
        raise ValueError(expected(name, bound, x))
    if maximum is not None and x > maximum:
        bound = f"an int <= {maximum}" if minimum is None else f"an int in [{minimum}, {maximum}]"
        raise ValueError(expected(name, bound, x))
    return x


def _explicit_axes(x: Any) -> tuple:
    """The Explicit mesh axes an array (concrete or traced) is typed with; () for none."""
    try:
        sharding = jax.typeof(x).sharding if isinstance(x, jax.core.Tracer) else getattr(x, "sharding", None)
        mesh = getattr(sharding, "mesh", None)
        types = getattr(mesh, "axis_types", ()) or ()
        return tuple(n for n, t in zip(mesh.axis_names, types) if t == jax.sharding.AxisType.Explicit)
    except Exception:  # noqa: BLE001 - no sharding information: nothing to refuse
        return ()


_AUTO_MESH = ("a mesh of Auto axes: jax.make_mesh(shape, names, axis_types=(jax.sharding.AxisType.Auto,) * len(shape)) "
              "or jax.sharding.Mesh(devices, names); meshes of Explicit axes (jax.make_mesh's default) are not supported")


def check_auto_mesh(tree: Any, name: str) -> None:
    """TypeError if ``tree`` is, or holds an array placed on, a mesh with Explicit axes.

    jaxcore's kernels are written for the default (Auto) sharding mode; under Explicit axes
    (sharding in types, ``jax.make_mesh``'s default since jax 0.7) ``lax.select`` / ``scan`` carries
    need matching shardings the kernels do not state, and JAX fails deep inside. Refused here,
    naming the argument and the way to build an Auto mesh.
    """
    if isinstance(tree, jax.sharding.Mesh):
        axes = tuple(n for n, t in zip(tree.axis_names, tree.axis_types) if t == jax.sharding.AxisType.Explicit)
        if axes:
            raise TypeError(expected(name, _AUTO_MESH, f"a mesh with Explicit axes {axes}", raw=True))
        return
    for leaf in jax.tree_util.tree_leaves(tree):
        axes = _explicit_axes(leaf) if isinstance(leaf, (jax.Array, jax.core.Tracer)) else ()
        if axes:
            raise TypeError(expected(name, "arrays on " + _AUTO_MESH, f"an array sharded over Explicit axes {axes}",
                                     raw=True))


def _real_array(x: Any, name: str) -> np.ndarray:
    try:
        a = np.asarray(x)
    except Exception as exc:  # noqa: BLE001 - any conversion failure is a type error for the user
        raise TypeError(expected(name, "a real number or array", type(x).__name__, raw=True)) from exc
    if a.dtype.kind not in "biuf" and a.dtype.name != "bfloat16":
        raise TypeError(expected(name, "a real number or array", f"dtype {a.dtype}", raw=True))
    return a


def check_scalar(
    x: Any,
    name: str,
    *,
    positive: bool = False,
    nonnegative: bool = False,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    finite: bool = True,
) -> float:
    """Return a concrete real scalar as a Python float after checking it.

    Raises:
        TypeError: not a real number (strings, complex, arrays of more than one entry).
        ValueError: NaN/inf (when ``finite``), not positive / non-negative, or outside ``[low, high]``.
    """
    if isinstance(x, jax.core.Tracer):
        raise TypeError(expected(name, "a concrete number (not traced)", x))
    a = _real_array(x, name)
    if a.ndim != 0 and a.size != 1:
        raise TypeError(expected(name, "a scalar", f"an array of shape {a.shape}", raw=True))
    v = float(a.reshape(()))
    what = _scalar_what(positive, nonnegative, low, high, low_open, high_open, finite)
    if (finite or positive or nonnegative or low is not None or high is not None) and np.isnan(v):
        raise ValueError(expected(name, what, v))
    if finite and not np.isfinite(v):
        raise ValueError(expected(name, what, v))
    if positive and not v > 0:
        raise ValueError(expected(name, what, v))
    if nonnegative and not v >= 0:
        raise ValueError(expected(name, what, v))
    if low is not None and not (v > low if low_open else v >= low):
        raise ValueError(expected(name, what, v))
    if high is not None and not (v < high if high_open else v <= high):
        raise ValueError(expected(name, what, v))
    return v


def _scalar_what(positive, nonnegative, low, high, low_open, high_open, finite) -> str:
    parts = []
    if low is not None or high is not None:
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        parts.append(f"a number in {'(' if low_open or low is None else '['}{lo}, {hi}{')' if high_open or high is None else ']'}")
    elif positive:
        parts.append("a finite number > 0" if finite else "a number > 0")
    elif nonnegative:
        parts.append("a finite number >= 0" if finite else "a number >= 0")
    else:
        parts.append("a finite number" if finite else "a number")
    return parts[0]


def first_bad(a: np.ndarray, bad: np.ndarray) -> str:
    """The first entry of ``a`` where ``bad`` holds, for a message: ``"nan at index (1, 0)"`` (``repr`` of the value)."""
    idx = tuple(int(i) for i in np.argwhere(bad)[0]) if a.ndim else ()
    value = a[idx] if a.ndim else a
    return f"{np.asarray(value).item()!r}" + (f" at index {idx}" if a.ndim else "")


def check_finite(x: Any, name: str) -> None:
    """ValueError if a concrete ``x`` has a NaN or inf entry (traced values are not checked)."""
    if not is_concrete(x):
        return
    a = _real_array(x, name)
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        bad = ~np.isfinite(a.astype(np.float64))
        if bad.any():
            raise ValueError(expected(name, "finite values", first_bad(a, bad), raw=True))


def check_positive(x: Any, name: str, *, allow_zero: bool = False) -> None:
    """ValueError unless every entry of a concrete ``x`` is finite and > 0 (>= 0 with ``allow_zero``)."""
    if not is_concrete(x):
        return
    a = _real_array(x, name).astype(np.float64)
    bad = ~np.isfinite(a) | ((a < 0) if allow_zero else (a <= 0))
    if bad.any():
        kind = "finite values >= 0" if allow_zero else "finite values > 0"
        raise ValueError(expected(name, kind, first_bad(a, bad), raw=True))


def check_nonnegative(x: Any, name: str) -> None:
    """ValueError unless every entry of a concrete ``x`` is finite and >= 0."""
    check_positive(x, name, allow_zero=True)


def check_range(
    x: Any, name: str, low: float | None, high: float | None, *, low_open: bool = False, high_open: bool = False
) -> None:
    """ValueError unless every entry of a concrete ``x`` lies in the interval (NaN fails)."""
    if not is_concrete(x):
        return
    a = _real_array(x, name).astype(np.float64)
    bad = np.isnan(a)
    if low is not None:
        bad |= (a <= low) if low_open else (a < low)
    if high is not None:
        bad |= (a >= high) if high_open else (a > high)
    if bad.any():
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        interval = f"{'(' if low_open or low is None else '['}{lo}, {hi}{')' if high_open or high is None else ']'}"
        raise ValueError(expected(name, f"values in {interval}", first_bad(a, bad), raw=True))


def check_ndim(x: Any, name: str, ndim: int | Iterable[int], layout: str | None = None) -> None:
    """ValueError unless ``x.ndim`` is ``ndim`` (or one of them); ``layout`` names the axes in the message."""
    allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    got = np.ndim(x)
    if got not in allowed:
        what = layout or (f"a {allowed[0]}-d array" if len(allowed) == 1 else f"an array with ndim in {allowed}")
        raise ValueError(expected(name, what, f"shape {tuple(np.shape(x))}", raw=True))


def check_shape(x: Any, name: str, shape: Sequence[int | None], layout: str | None = None) -> None:
    """ValueError unless ``x.shape`` matches ``shape`` (``None`` matches any length)."""
    got = tuple(np.shape(x))
    ok = len(got) == len(shape) and all(s is None or s == g for s, g in zip(shape, got))
    if not ok:
        want = layout or "shape (" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
        raise ValueError(expected(name, want, f"shape {got}", raw=True))


def check_choice(x: Any, name: str, choices: Iterable[Any]) -> Any:
    """Return ``x`` if it is one of ``choices``; else ValueError listing them."""
    choices = tuple(choices)
    if isinstance(x, str) or not isinstance(x, (list, dict)):
        try:
            if x in choices:
                return x
        except TypeError:
            pass
    raise ValueError(expected(name, "one of " + ", ".join(repr(c) for c in choices), x))


def check_float_dtype(dtype: Any, name: str = "dtype", what: str = "a float dtype") -> jnp.dtype:
    """``jnp.dtype(dtype)`` if it is a floating dtype (half precision included); else TypeError.

    The message is ``"<name>: expected <what>, got <dtype>"``: the value as given when it is no dtype
    at all, the dtype's name otherwise (``"dtype: expected a float dtype, got int32"``).
    """
    try:
        d = jnp.dtype(dtype)
    except Exception:  # noqa: BLE001 - anything jnp.dtype refuses is a type error for the user
        raise TypeError(expected(name, what, dtype)) from None
    if not jnp.issubdtype(d, jnp.floating):
        raise TypeError(expected(name, what, d.name, raw=True))
    return d


def as_float_array(x: Any, name: str, *, dtype: Any = None) -> jax.Array:
    """Convert to a floating JAX array; ints and bools become the default float dtype.

    Raises:
        TypeError: ``x`` is not real numeric data (strings, objects, complex).
    """
    if isinstance(x, jax.Array):
        arr = x
    else:
        a = _real_array(x, name)
        arr = jnp.asarray(a)
    if not (jnp.issubdtype(arr.dtype, jnp.floating) or jnp.issubdtype(arr.dtype, jnp.integer)
            or arr.dtype == jnp.bool_):
        raise TypeError(expected(name, "a real float array", f"dtype {arr.dtype}", raw=True))
    if dtype is not None:
        return arr.astype(dtype)
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        arr = arr.astype(default_float())
    return arr


# --- run-time checks under jit ---------------------------------------------------------------

_TRUSTED = threading.local()


@contextlib.contextmanager
def trusted_values(*values: Any):
    """While tracing inside this block, :func:`error_if` skips exactly these traced values.

    Identity, not equality: values the caller checked once before a loop. Derived values and
    the fresh tracers of a jitted callee are still checked. On an accelerator each run-time
    check in a loop body is a conditional the host reads at every iteration, so hoisting the
    check out of the loop and trusting the value inside it keeps the loop fast.
    """
    previous = getattr(_TRUSTED, "values", ())
    _TRUSTED.values = previous + tuple(v for v in jax.tree_util.tree_leaves(values)
                                       if isinstance(v, jax.core.Tracer))
    try:
        yield
    finally:
        _TRUSTED.values = previous


def is_trusted(value: Any) -> bool:
    """True if every traced leaf of ``value`` was passed to an enclosing :func:`trusted_values`."""
    leaves = [v for v in jax.tree_util.tree_leaves(value) if isinstance(v, jax.core.Tracer)]
    trusted = getattr(_TRUSTED, "values", ())
    return bool(leaves) and all(any(v is t for t in trusted) for v in leaves)


def error_if(x: Any, bad: Any, name: str, what: str) -> Any:
    """``equinox.error_if`` with the one dialect: raises ``"<name>: expected <what>"`` at run time.

    Returns ``x`` unchanged (thread it through so the check is not dead code). A value wrapped
    by :func:`trusted_values` is returned without a check.
    """
    if is_trusted(x):
        return x
    msg = f"{name}: expected {what}"
    leaves, tree = jax.tree_util.tree_flatten(x)
    i = next((j for j, leaf in enumerate(leaves) if isinstance(leaf, jax.Array) and leaf.ndim > 0
              and (jnp.issubdtype(leaf.dtype, jnp.number) or leaf.dtype == jnp.bool_)), None)
    if i is None or not isinstance(bad, jax.core.Tracer):
        return eqx.error_if(x, bad, msg)  # scalars only, or a predicate known when tracing
    # The check rides on a scalar: equinox's error branch is a host callback, placed on one device,
    # and threading a sharded batch through it would gather the batch there. The scalar (0, never
    # changed when the check passes) then joins one leaf: x - 0 (keeps -0.0, NaN, inf) or x | False.
    zero = eqx.error_if(jnp.zeros((), leaves[i].dtype), bad, msg)
    leaves[i] = jnp.logical_or(leaves[i], zero) if leaves[i].dtype == jnp.bool_ else leaves[i] - zero
    return jax.tree_util.tree_unflatten(tree, leaves)


# --- one check, host or run time ----------------------------------------------------------------
#
# The routine every family needs: refuse bad entries on the host when the value is concrete (a
# ValueError naming the first bad entry), else thread one run-time check (error_if) through the
# value. One message for both paths: "<name>: expected <what>[, got <first bad entry>]".


def checked(x: Any, name: str, what: str, bad: Any, *, check: bool = True) -> Any:
    """``x`` with its bad entries refused: on the host when concrete, at run time when traced.

    Args:
        x: an array (or a pytree of arrays for a traced check; the host check reads ``bad``'s result).
        name, what: the message, ``"<name>: expected <what>, got <first bad entry>"``.
        bad: a function of ``x`` giving a boolean array, True at a bad entry; called with a NumPy
            array when ``x`` is concrete and with the traced value otherwise, so it is written with
            operators and ``jnp`` functions that accept both.
        check: False returns ``x`` unchecked (a caller that validated once, before a loop).

    Returns:
        ``x``; a traced ``x`` threaded through :func:`error_if` (values wrapped by
        :func:`trusted_values` are returned as they are).

    Raises:
        ValueError: a concrete bad entry (traced: equinox's run-time error with the same text).
    """
    if not check:
        return x
    if is_concrete(x):
        a = np.asarray(x)
        b = np.asarray(bad(a))
        if b.any():
            raise ValueError(expected(name, what, first_bad(np.broadcast_to(a, b.shape), b), raw=True))
        return x
    if is_trusted(x):
        return x
    return error_if(x, jnp.any(bad(x)), name, what)


def _interval(low, high, low_open, high_open) -> str:
    lo = "-inf" if low is None else f"{low:g}"
    hi = "inf" if high is None else f"{high:g}"
    return f"{'(' if low_open or low is None else '['}{lo}, {hi}{')' if high_open or high is None else ']'}"


def checked_finite(x: Any, name: str, what: str = "finite values", *, check: bool = True) -> Any:
    """:func:`checked` for NaN and inf: :func:`check_finite` on the host, :func:`error_if` when traced."""
    return checked(x, name, what, lambda a: ~jnp.isfinite(a) if isinstance(a, jax.Array)
                   else ~np.isfinite(a.astype(np.float64)), check=check)


def checked_positive(x: Any, name: str, *, allow_zero: bool = False, what: str | None = None,
                     check: bool = True) -> Any:
    """:func:`checked` for "finite and > 0" (``>= 0`` with ``allow_zero``), the message of :func:`check_positive`."""
    what = what or ("finite values >= 0" if allow_zero else "finite values > 0")

    def bad(a):
        xp = jnp if isinstance(a, jax.Array) else np
        a = a if xp is jnp else a.astype(np.float64)
        return ~xp.isfinite(a) | ((a < 0) if allow_zero else (a <= 0))

    return checked(x, name, what, bad, check=check)


def checked_range(x: Any, name: str, low: float | None, high: float | None, *, low_open: bool = False,
                  high_open: bool = False, what: str | None = None, check: bool = True) -> Any:
    """:func:`checked` for entries in an interval (NaN fails), the message of :func:`check_range`."""
    what = what or f"values in {_interval(low, high, low_open, high_open)}"

    def bad(a):
        a = a if isinstance(a, jax.Array) else a.astype(np.float64)
        out = a != a  # NaN
        if low is not None:
            out = out | ((a <= low) if low_open else (a < low))
        if high is not None:
            out = out | ((a >= high) if high_open else (a > high))
        return out

    return checked(x, name, what, bad, check=check)


def checked_index(x: Any, name: str, n: int, what: str | None = None, *, check: bool = True) -> Any:
    """:func:`checked` for integer indices into ``n`` items: every entry in ``[0, n)``.

    An out-of-range index would be clamped silently by a gather; refused here instead, on the host
    (the first bad entry named) or at run time. ``what`` defaults to ``"indices in [0, n)"``.
    """
    return checked(x, name, what or f"indices in [0, {n})", lambda a: (a < 0) | (a >= n), check=check)


def checked_simplex(w: Any, name: str, tol: float, *, entries: str = "finite values >= 0",
                    rows: str | None = None, check: bool = True) -> Any:
    """:func:`checked` for weights or probabilities ``[..., m]``: entries finite and ``>= 0``, each row
    (last axis) summing to 1 within ``tol``. Not normalised: the caller decides.

    Two messages, ``"<name>: expected <entries>, got <first bad entry>"`` and ``"<name>: expected
    <rows>, got sum <the row sums>"`` (``rows`` defaults to ``"rows summing to 1 (within <tol>)"``),
    on the host or at run time (two checks).
    """
    rows = rows or f"rows summing to 1 (within {tol:g})"
    w = checked_positive(w, name, allow_zero=True, what=entries, check=check)
    if not check:
        return w
    if is_concrete(w):
        sums = np.asarray(w).astype(np.float64).sum(axis=-1)
        if np.any(np.abs(sums - 1.0) > tol):
            raise ValueError(expected(name, rows, f"sum {describe(sums)}", raw=True))
        return w
    if is_trusted(w):
        return w
    return error_if(w, jnp.any(jnp.abs(jnp.sum(w, axis=-1) - 1.0) > tol), name, rows)


def checked_scalar(x: Any, name: str, *, positive: bool = False, nonnegative: bool = False,
                   low: float | None = None, high: float | None = None, finite: bool = True) -> Any:
    """A real scalar hyperparameter: :func:`check_scalar` when concrete (returned as it came), one
    :func:`error_if` with the same message when traced (a traced array that is not a real scalar
    is a TypeError at trace time)."""
    if is_concrete(x):
        check_scalar(x, name, positive=positive, nonnegative=nonnegative, low=low, high=high, finite=finite)
        return x
    leaves = jax.tree_util.tree_leaves(x)
    if len(leaves) != 1 or jnp.ndim(leaves[0]) != 0:
        raise TypeError(expected(name, "a scalar", f"an array of shape {jnp.shape(leaves[0]) if leaves else ()}",
                                 raw=True))
    if not (jnp.issubdtype(x.dtype, jnp.floating) or jnp.issubdtype(x.dtype, jnp.integer)):
        raise TypeError(expected(name, "a real number", f"dtype {x.dtype}", raw=True))
    what = _scalar_what(positive, nonnegative, low, high, False, False, finite)
    ok = jnp.isfinite(x) if finite else ~jnp.isnan(x)
    if positive:
        ok = ok & (x > 0)
    if nonnegative:
        ok = ok & (x >= 0)
    if low is not None:
        ok = ok & (x >= low)
    if high is not None:
        ok = ok & (x <= high)
    return error_if(x, ~ok, name, what)
