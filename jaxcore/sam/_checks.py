"""Argument checks of the sam family, in the one dialect of :mod:`jaxcore._util`, and the run-time
checks (``error_if``) that the entry points thread through their compiled programs.

A leaf of the family: every other module may import these; they import nothing of the family.
Scalar hyperparameters are checked on the host when concrete and, when traced (a call inside
``jit``), once at run time through ``error_if`` by :func:`_checked_value`, before a compiled program
(never inside a training loop's body).
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxcore._util import check_key, check_scalar, checked_scalar, error_if, expected, is_concrete

PyTree = Any


def _check_radius(rho: Any, name: str = "rho", *, schedule: bool = True) -> None:
    """A concrete radius is a finite float >= 0; a callable is a schedule (checked at run time)."""
    if callable(rho) and not eqx.is_array(rho):
        if schedule:
            return
        raise TypeError(expected(name, "a number >= 0 (not a schedule)", type(rho).__name__, raw=True))
    if is_concrete(rho):
        check_scalar(rho, name, nonnegative=True)


def _check_real(x: Any, name: str, **bounds: Any) -> None:
    """check_scalar for concrete values; traced values pass (checked by the caller's program)."""
    if is_concrete(x):
        check_scalar(x, name, **bounds)


def _check_tree(tree: PyTree, name: str) -> None:
    if tree is None:
        raise TypeError(expected(name, "a pytree of float arrays", "None", raw=True))
    for leaf in jax.tree.leaves(tree):
        if not (eqx.is_array_like(leaf) and jnp.issubdtype(jnp.result_type(leaf), jnp.inexact)):
            raise TypeError(expected(name, "a pytree of float arrays", f"a leaf of type {type(leaf).__name__}",
                                     raw=True))
        if jnp.issubdtype(jnp.result_type(leaf), jnp.complexfloating):
            raise TypeError(expected(name, "a pytree of real float arrays", f"dtype {jnp.result_type(leaf)}",
                                     raw=True))


def _check_finite_tree(tree: PyTree, name: str) -> None:
    """ValueError if a concrete leaf holds NaN/inf (traced leaves are not checked)."""
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        if is_concrete(leaf) and not bool(np.all(np.isfinite(np.asarray(leaf, np.float64)))):
            raise ValueError(expected(f"{name}{jax.tree_util.keystr(path)}", "finite values", "NaN or inf", raw=True))


_BOUNDS = {"nonneg": {"nonnegative": True}, "finite": {}, "unit": {"low": 0.0, "high": 1.0}}


def _checked_value(x: Any, name: str, kind: str = "nonneg") -> Any:
    """Check a scalar hyperparameter (``kind``: "nonneg", "finite" or "unit"), on the host when concrete,
    with ``error_if`` when traced (:func:`jaxcore._util.checked_scalar`).

    Returns the value to use (a traced value threaded through its run-time check). Called by the
    public entry points only, before their compiled program, never inside a loop body.
    """
    return checked_scalar(x, name, **_BOUNDS[kind])


def _same_structure(a: PyTree, b: PyTree, name_a: str, name_b: str) -> None:
    sa, sb = jax.tree.structure(a), jax.tree.structure(b)
    if sa != sb:
        raise ValueError(expected(name_b, f"a pytree with the structure of {name_a} ({sa})", str(sb), raw=True))
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        if jnp.shape(x) != jnp.shape(y):
            raise ValueError(expected(name_b, f"leaves with the shapes of {name_a}",
                                      f"shape {jnp.shape(y)} against {jnp.shape(x)}", raw=True))


def _as_scalar(x: Any) -> Any:
    """A Python number as a weakly typed array (a traced argument, so new values do not recompile)."""
    return jnp.asarray(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else x


def _check_optimizer(optimizer: Any) -> None:
    if not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
        raise TypeError(expected("optimizer", "an optax GradientTransformation", type(optimizer).__name__, raw=True))


def _check_key_for(perturbation: Any, key: Any) -> None:
    """A key, when given, is a PRNG key; ``None`` is refused for a geometry that draws (``needs_key``)."""
    if key is not None:
        check_key(key)
    elif perturbation is not None and perturbation.needs_key:
        raise TypeError(expected("key", f"a jax.random.key(...) array ({type(perturbation).__name__} draws a "
                                 "random direction)", "None", raw=True))


def _batch_size(batch: PyTree) -> int:
    leaves = jax.tree.leaves(batch)
    if not leaves:
        raise ValueError(expected("batch", "a pytree of arrays with a leading batch axis", "no arrays", raw=True))
    shapes = [tuple(x.shape) if hasattr(x, "shape") else np.shape(x) for x in leaves]
    sizes = {s[0] if s else None for s in shapes}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(expected("batch", "leaves sharing one leading batch axis",
                                  f"leading sizes {sorted(map(str, sizes))}", raw=True))
    return sizes.pop()


def _checked_fields(module: Any) -> Any:
    """A perturbation (or OBF) whose traced hyperparameters (rho, eta, alpha, gamma) carry a run-time check.

    Concrete values were checked at construction; a traced one (a module built inside ``jit``) is
    checked here once, before the compiled step or the training loop, never inside its body.
    """
    if module is None:
        return None
    for field, kind in (("rho", "nonneg"), ("eta", "nonneg"), ("alpha", "nonneg"), ("gamma", "unit")):
        value = getattr(module, field, None)
        if value is None or callable(value) and not eqx.is_array(value) or is_concrete(value):
            continue
        checked = _checked_value(value, field, kind)
        module = eqx.tree_at(lambda m, f=field: getattr(m, f), module, checked)
    return module


def _checked_finite(new_params, loss, check):
    """``new_params`` carrying a run-time check (``error_if``) that the step's loss was finite.

    A NaN or inf in the parameters or the batch (or a loss that overflows) makes the loss non-finite;
    the check turns the silent NaN update into an error naming both inputs.
    """
    if not check:
        return new_params
    return error_if(new_params, ~jnp.isfinite(loss), "params / batch",
                    "finite values giving a finite loss (checked at run time), got a non-finite loss: NaN or inf "
                    "in params or batch, or a loss that overflowed")
