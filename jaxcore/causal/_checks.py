"""Private argument checks of :mod:`jaxcore.causal` (probability vectors, log-probabilities, bitmasks, DAGs).

Family-local helpers on top of :mod:`jaxcore._util.checks` (same dialect:
``"<argument>: expected <what>, got <value>"``); host-side, for concrete values.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxcore._util import checked_simplex, expected, is_concrete
from jaxcore._util.checks import describe


def _sum_tol(dtype) -> float:
    """Tolerance on ``|sum - 1|`` of a probability vector of ``dtype``."""
    try:
        eps = float(jnp.finfo(dtype).eps)
    except ValueError:
        eps = float(jnp.finfo(jnp.float32).eps)
    return max(1e-3, 16.0 * eps)


def host_array(x, name: str) -> np.ndarray:
    """``x`` as a real NumPy array (bfloat16 / float16 widened to float32); TypeError for None / non-numeric."""
    if x is None:
        raise TypeError(expected(name, "a real array", "None", raw=True))
    if isinstance(x, jax.core.Tracer):
        raise TypeError(expected(name, "a concrete array (not traced)", x))
    try:
        a = np.asarray(x)
    except Exception as exc:  # noqa: BLE001 - any conversion failure is a type error for the user
        raise TypeError(expected(name, "a real array", type(x).__name__, raw=True)) from exc
    if a.dtype.name == "bfloat16" or a.dtype == np.float16:
        a = a.astype(np.float32)
    if a.dtype.kind not in "biuf":
        raise TypeError(expected(name, "a real array", f"dtype {a.dtype}", raw=True))
    return a


def float_array(x, name: str) -> jax.Array:
    """A float JAX array: integers/bools become the default float, float16/bfloat16 become float32."""
    if x is None:
        raise TypeError(expected(name, "a real array", "None", raw=True))
    a = x if isinstance(x, jax.Array) else jnp.asarray(host_array(x, name))
    if a.dtype == jnp.bfloat16 or a.dtype == jnp.float16:
        return a.astype(jnp.float32)
    if not (jnp.issubdtype(a.dtype, jnp.floating) or jnp.issubdtype(a.dtype, jnp.integer) or a.dtype == jnp.bool_):
        raise TypeError(expected(name, "a real array", f"dtype {a.dtype}", raw=True))
    if not jnp.issubdtype(a.dtype, jnp.floating):
        a = a.astype(jnp.result_type(float))
    return a


def check_prob_vector(p, name: str, n: int | None = None, like: str | None = None) -> jax.Array:
    """A ``[n]`` probability vector: finite, ``>= 0``, summing to 1 within a tolerance; returned as floats."""
    a = float_array(p, name)
    if a.ndim != 1 or (n is not None and a.shape[0] != n) or a.shape[0] < 1:
        want = f"shape [{n}]" + (f" like {like}" if like else "") if n is not None else "shape [n] with n >= 1"
        raise ValueError(expected(name, want, f"shape {tuple(a.shape)}", raw=True))
    # traced (under jit): run-time checks, outside any loop
    return checked_simplex(a, name, _sum_tol(a.dtype), entries="probabilities (finite, >= 0)",
                           rows="probabilities summing to 1")


def check_log_prob(log_prob, name: str, n: int | None = None, *, normalised: bool = True) -> jax.Array:
    """A ``[n]`` log-probability vector: no NaN, no ``+inf``; ``logsumexp`` 0 within a tolerance (if normalised)."""
    a = float_array(log_prob, name)
    if a.ndim != 1 or (n is not None and a.shape[0] != n) or a.shape[0] < 1:
        want = f"shape [{n}] (one entry per DAG)" if n is not None else "shape [n] with n >= 1"
        raise ValueError(expected(name, want, f"shape {tuple(a.shape)}", raw=True))
    if is_concrete(a):
        h = np.asarray(a, np.float64)
        bad = np.isnan(h) | np.isposinf(h)
        if bad.any():
            i = int(np.argwhere(bad)[0][0])
            raise ValueError(expected(name, "log probabilities (no NaN, no +inf)", f"{float(h[i])!r} at index {i}",
                                      raw=True))
        if normalised:
            m = h.max()
            lse = -np.inf if np.isneginf(m) else m + np.log(np.sum(np.exp(h - m)))
            if not abs(lse) <= _sum_tol(a.dtype):
                raise ValueError(expected(name, "normalised log probabilities (logsumexp 0)",
                                          f"logsumexp {float(lse)!r}", raw=True))
    return a


def check_bitmasks(parents, name: str, *, compressed: bool = False) -> None:
    """Concrete ``[..., d]`` parent bitmasks in range: ``0 <= m < 2**d`` with bit ``j`` of ``m[..., j]`` clear,
    or (``compressed``) indices ``0 <= c < 2**(d-1)``. Floats must be whole numbers."""
    if not is_concrete(parents):
        return
    a = host_array(parents, name)
    if a.ndim < 1:
        raise ValueError(expected(name, "shape [..., d]", f"shape {a.shape}", raw=True))
    d = a.shape[-1]
    if a.dtype.kind == "f":
        bad = ~np.isfinite(a) | (a != np.round(a))
        if bad.any():
            raise ValueError(expected(name, "integer bitmasks", describe(a[bad][:1]), raw=True))
    if a.size == 0:
        return
    v = a.astype(np.int64) if a.dtype.kind != "f" or np.all(np.abs(a) < 2**62) else None
    hi = 1 << (d - 1) if compressed else 1 << d
    what = f"compressed parent indices in [0, 2**(d-1)) = [0, {hi})" if compressed else \
        f"parent bitmasks in [0, 2**d) = [0, {hi}) without the node's own bit"
    if v is None or np.any(v < 0) or np.any(v >= hi):
        f = np.asarray(a, np.float64)
        bad = a[(f < 0) | (f >= hi)]
        raise ValueError(expected(name, what, f"{bad.ravel()[0].item()!r}" if bad.size else "out-of-range values", raw=True))
    if not compressed:
        own = (v >> np.arange(d)) & 1
        if own.any():
            j = int(np.argwhere(own)[0][-1])
            raise ValueError(expected(name, what, f"node {j} listed as its own parent (a self-loop)", raw=True))


def check_binary(adjacency, name: str) -> None:
    """Concrete adjacency entries are 0/1 (bool, int or float 0.0/1.0)."""
    if not is_concrete(adjacency):
        return
    a = host_array(adjacency, name)
    if not np.all((a == 0) | (a == 1)):
        bad = a[~((a == 0) | (a == 1))]
        raise ValueError(expected(name, "0/1 adjacency entries", f"{np.asarray(bad).ravel()[0].item()!r}", raw=True))


def check_acyclic(adjacency, name: str, ok=None) -> None:
    """Concrete adjacency tensors ``[..., d, d]`` are DAGs (no directed cycle, no self-loop)."""
    if not is_concrete(adjacency):
        return
    from .graphs import _adjacency_array, _is_dag_jit

    if ok is None:
        ok = np.asarray(_is_dag_jit(_adjacency_array(adjacency, name)))
    ok = np.asarray(ok)
    if not ok.all():
        where = "" if ok.ndim == 0 else f" (graph {tuple(int(i) for i in np.argwhere(~ok)[0])})"
        raise ValueError(expected(name, "an acyclic graph (a DAG)", f"a directed cycle or self-loop{where}",
                                  raw=True))
