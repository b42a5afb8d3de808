"""Restoration over a batch of images and seeds: :func:`restore_batch`, one compiled program.

The solvers of :mod:`jaxcore.inverse.solvers` restore one image; this module vmaps their loop over images and
over seeds (or maps it in chunks, or splits it over devices with ``shard_map``), validating the batch once on
the host before the program runs.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import check_bool, check_choice, check_int, check_key, expected

from .denoisers import AbstractDenoiser
from .operators import AbstractOperator
from .restoration import METHODS, _method_restorer
from .schedules import Schedule, _checked_values
from .solvers import (
    AbstractRestorer,
    RestorationResult,
    _check_images,
    _check_options,
    _check_problem_types,
    _solve,
)

__all__ = ["restore_batch"]


def _restore_batch(restorer, keys, ys, operator, denoiser, schedule, sigma_y, x0s, x_true, operator_batched,
                   chunk_size, options):
    """:func:`restore_batch` on checked arguments (traced under :data:`_restore_batch_program`)."""
    op_axes = jax.tree.map(lambda _: 0, operator) if operator_batched else None

    def one(key, y, op, x0, xt):
        # sigma_y and the schedule were checked by restore_batch, the schedule cast to x0s' dtype
        return _solve(restorer, key if restorer.random else None, y, x0, op, denoiser, schedule, sigma_y, xt,
                      **options)

    if chunk_size is None:
        over_seeds = jax.vmap(one, in_axes=(0, None, None, None, None))
        over_images = jax.vmap(over_seeds, in_axes=(None, 0, op_axes, 0, 0 if x_true is not None else None))
        return over_images(keys, ys, operator, x0s, x_true)
    n_img, n_seeds = ys.shape[0], keys.shape[0]
    img = jnp.repeat(jnp.arange(n_img), n_seeds)  # run r: image r // n_seeds, seed r % n_seeds
    seed = jnp.tile(jnp.arange(n_seeds), n_img)

    def run(idx):
        i, j = idx
        op = jax.tree.map(lambda a: a[i], operator) if operator_batched else operator
        return one(keys[j], ys[i], op, x0s[i], None if x_true is None else x_true[i])

    out = jax.lax.map(run, (img, seed), batch_size=chunk_size)
    return jax.tree.map(lambda a: a.reshape((n_img, n_seeds) + a.shape[1:]), out)


_restore_batch_program = eqx.filter_jit(_restore_batch)


def _restore_batch_sharded(mesh, restorer, keys, ys, operator, denoiser, schedule, sigma_y, x0s, x_true,
                           operator_batched, chunk_size, options):
    """:func:`_restore_batch` under ``shard_map``: each device restores its images (and seeds) alone."""
    from jax.sharding import PartitionSpec as P

    img_axis = mesh.axis_names[0]
    seed_axis = mesh.axis_names[1] if len(mesh.axis_names) > 1 else None
    dynamic, static = eqx.partition((operator, denoiser, schedule, sigma_y), eqx.is_array)
    op_spec = P(img_axis) if operator_batched else P()
    specs = (jax.tree.map(lambda _: op_spec, dynamic[0]),) + tuple(jax.tree.map(lambda _: P(), d) for d in dynamic[1:])

    def local(keys, ys, dynamic, x0s, x_true):
        operator, denoiser, schedule, sigma_y = eqx.combine(dynamic, static)
        return _restore_batch(restorer, keys, ys, operator, denoiser, schedule, sigma_y, x0s, x_true,
                              operator_batched, chunk_size, options)

    images = P(img_axis)
    in_specs = (P(seed_axis), images, specs, images, None if x_true is None else images)
    args = jax.tree.map(lambda spec, x: _on_mesh(x, mesh, spec), in_specs, (keys, ys, dynamic, x0s, x_true),
                        is_leaf=lambda v: isinstance(v, P))
    run = jax.shard_map(local, mesh=mesh, in_specs=in_specs, out_specs=P(img_axis, seed_axis), check_vma=False)
    return run(*args)


def _on_mesh(x, mesh, spec):
    """``x`` laid out as ``spec`` on ``mesh`` inside a traced program (a mesh of explicit axes, as
    ``jax.make_mesh`` makes, takes ``reshard``; one of auto axes a sharding constraint)."""
    sharding = jax.sharding.NamedSharding(mesh, spec)
    if all(t == jax.sharding.AxisType.Explicit for t in mesh.axis_types):
        return jax.sharding.reshard(x, sharding)
    return jax.lax.with_sharding_constraint(x, sharding)


_restore_batch_sharded_program = eqx.filter_jit(_restore_batch_sharded)


def restore_batch(
    keys: PRNGKeyArray,
    ys: Float[Array, "num_images H W C"],
    operator: AbstractOperator,
    denoiser: AbstractDenoiser | Callable,
    schedule: Schedule,
    sigma_y,
    *,
    method: str | AbstractRestorer,
    operator_batched: bool = False,
    x0s: Float[Array, "num_images H W C"] | None = None,
    x_true: Float[Array, "num_images H W C"] | None = None,
    chunk_size: int | None = None,
    mesh: jax.sharding.Mesh | None = None,
    **options,
) -> RestorationResult:
    """Run ``method`` on a batch of images and seeds, vmapped over both, as one compiled program.

    Args:
        keys: ``[num_seeds]`` PRNG keys (one run per image and key; the deterministic methods
            give the same result for every key).
        ys: observations ``[num_images, H, W, C]``.
        operator: forward model, shared by all images, or (``operator_batched=True``)
            an operator whose array leaves carry a leading ``num_images`` axis
            (e.g. from ``jax.vmap(Inpainting)(masks)``).
        denoiser, schedule, sigma_y, options: as in :func:`snore` (``options`` are the method's
            keyword options, e.g. ``num_samples``, ``clip``, ``track``).
        method: a key of :data:`~jaxcore.inverse.METHODS` ("snore", "snore_prox", "annealed_snore", "red",
            "red_prox", "pnp_pgd", "pnp_hqs"), whose solver is built from ``options``, or a solver object
            (:class:`~jaxcore.inverse.AbstractRestorer`, e.g. ``SNORE(num_samples=2)``; ``options`` then hold
            only the loop's ``clip``, ``track``, ``progress``).
        x0s: initial iterates ``[num_images, H, W, C]`` (default ``ys``).
        x_true: clean images ``[num_images, H, W, C]`` for PSNR tracking.
        chunk_size: run the ``num_images x num_seeds`` restorations in vmapped chunks of this many,
            one chunk after the other (``jax.lax.map``), instead of all at once; ``None``
            (default) vmaps all. On CPU, restorations with the DnCNN run faster one at a
            time (``chunk_size=1``): one image's activations stay in cache (SNORE, 2 cores,
            paired median speed-up over vmapping all: 1.07x for 2 images x 4 seeds of
            64 x 64, 1.11x for 1 x 2 of 256 x 256, 1.44x for 2 x 2 of 256 x 256); on
            accelerators keep the default. Results are the same either way.
        mesh: a ``jax.sharding.Mesh`` to split the restorations over (``jax.shard_map``): its first
            axis splits the images, a second one (if any) the seeds; each device then restores its
            own images alone and the result comes back split the same way. ``None`` (default): one
            program that follows its inputs' shardings; there, XLA's partitioner gathers the batch
            around each FFT (``Blur``'s), which ``mesh=`` avoids. Multi-process runs pass a mesh of
            every process's devices.

    Returns:
        :class:`RestorationResult` with ``x`` of shape ``[num_images, num_seeds, H, W, C]``
        (histories ``[num_images, num_seeds, num_steps]``).

    Raises:
        TypeError: ``keys`` not PRNG keys; wrong operator/denoiser/schedule type; images not
            float arrays.
        ValueError: unknown ``method``; ``ys`` not 4-D; mismatched shapes (a batched operator
            without the leading ``num_images`` axis included); ``chunk_size < 1``; a ``mesh`` with
            more than two axes or whose axes do not divide ``num_images`` / ``num_seeds``; the value
            errors of the method.

    References:
        Renaud et al., ICML 2024 (SNORE); the methods' own references.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.inverse import GaussianMMSEDenoiser, Identity, constant_schedule, restore_batch
        >>> keys = jax.random.split(jax.random.key(0), 3)
        >>> out = restore_batch(keys, jnp.full((2, 4, 4, 1), 0.6), Identity(), GaussianMMSEDenoiser(0.5, 0.01),
        ...                     constant_schedule(5, sigma=0.05, step_size=1e-3), 0.05, method="snore")
        >>> out.x.shape
        (2, 3, 4, 4, 1)
    """
    if isinstance(method, AbstractRestorer):
        restorer, loop_opts = method, options
        unknown = sorted(set(options) - {"clip", "track", "progress"})
        if unknown:
            raise TypeError(expected("options", "the loop's keyword options (clip, track, progress) with a solver "
                                     "object as method", unknown, raw=True))
    else:
        method = check_choice(method, "method", sorted(METHODS))
        restorer, loop_opts = _method_restorer(method, options)
    loop_opts = _check_options(loop_opts.get("clip", True), loop_opts.get("track", False),
                               loop_opts.get("progress", False))
    keys = check_key(keys, "keys", batch=True)
    if keys.ndim != 1:
        raise ValueError(expected("keys", "a 1-d array of keys [num_seeds]", f"shape {tuple(keys.shape)}", raw=True))
    _check_problem_types(operator, denoiser, schedule)
    ys, x0s, x_true = _check_images(ys, x0s, x_true, batch=True)
    x0s = ys if x0s is None else x0s
    operator_batched = check_bool(operator_batched, "operator_batched")
    if operator_batched:
        for leaf in jax.tree_util.tree_leaves(eqx.filter(operator, eqx.is_array)):
            if leaf.ndim < 1 or leaf.shape[0] != ys.shape[0]:
                raise ValueError(expected("operator", f"array leaves with a leading num_images axis {ys.shape[0]} "
                                          "(operator_batched=True)", f"a leaf of shape {tuple(leaf.shape)}",
                                          raw=True))
    if chunk_size is not None:
        chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
    sigma_y, schedule = _checked_values(schedule, sigma_y, x0s.dtype, sigma_positive=restorer.sigma_positive)
    if mesh is not None:
        _check_mesh(mesh, ys.shape[0], keys.shape[0])
        return _restore_batch_sharded_program(mesh, restorer, keys, ys, operator, denoiser, schedule, sigma_y, x0s,
                                              x_true, operator_batched, chunk_size, loop_opts)
    return _restore_batch_program(restorer, keys, ys, operator, denoiser, schedule, sigma_y, x0s, x_true,
                                  operator_batched, chunk_size, loop_opts)


def _check_mesh(mesh, num_images: int, num_seeds: int) -> None:
    """A mesh of one or two axes that divide the images and the seeds."""
    if not isinstance(mesh, jax.sharding.Mesh):
        raise TypeError(expected("mesh", "a jax.sharding.Mesh or None", type(mesh).__name__, raw=True))
    if len(mesh.axis_names) not in (1, 2):
        raise ValueError(expected("mesh", "one axis (images) or two (images, seeds)",
                                  f"axes {tuple(mesh.axis_names)}", raw=True))
    for name, count, what in zip(mesh.axis_names, (num_images, num_seeds), ("num_images", "num_seeds")):
        if count % mesh.shape[name]:
            raise ValueError(expected("mesh", f"axis {name!r} of a size that divides {what} ({count})",
                                      f"size {mesh.shape[name]}", raw=True))
