"""Fitting prefix scorers: CD-FUDGE's and CD-Q's losses minimised with optax in one ``lax.scan``."""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float

from jaxcore._util import Progress, ProgressArg, check_int, check_key, check_progress, check_scalar, expected
from jaxcore._util.minibatch import batch_mesh, minibatch_schedule, take_local

from .losses import Rollouts, _cdq_loss, _fudge_loss, check_rollouts
from .scorers import check_scorer

__all__ = ["FitResult", "fit_cdq", "fit_fudge"]


class FitResult(NamedTuple):
    """What :func:`fit_fudge` and :func:`fit_cdq` return.

    Attributes:
        head: the trained head.
        losses: ``[num_steps]`` float32 minibatch loss before each step.
    """

    head: object
    losses: Float[Array, " S"]


@eqx.filter_jit
def _fit_jit(key, head, data: Rollouts, loss_fn, learning_rate, optimizer, num_steps, batch_size, progress, label,
             where):
    opt = optax.adam(learning_rate) if optimizer is None else optimizer
    n = data.num_samples
    prog = Progress(progress, num_steps, label)
    params, static = eqx.partition(head, eqx.is_inexact_array)

    def loss_of(p, batch):
        return loss_fn(eqx.combine(p, static), batch)

    def step(carry, xs):
        p, state = carry
        i, k = xs
        if batch_size >= n:
            batch = data
        elif where is None:
            idx = jax.random.choice(k, n, (batch_size,), replace=False)
            batch = jax.tree_util.tree_map(lambda a: a[idx], data)
        else:  # k: this step's row indices, batch_size / D from each device's block of samples
            batch = take_local(where, data, k, n)
        loss, g = jax.value_and_grad(loss_of)(p, batch)
        updates, state = opt.update(g, state, p)
        prog.update(i, {"loss": loss})
        return (optax.apply_updates(p, updates), state), loss

    if where is None or batch_size >= n:
        keys = jax.random.split(key, num_steps)
    else:
        keys = minibatch_schedule(key, n, batch_size, num_steps, where.num_shards)
    (p, _), losses = jax.lax.scan(step, (params, opt.init(params)), (jnp.arange(num_steps), keys))
    return eqx.combine(p, static), losses


def _fit(key, head, data, kind, loss_fn, num_steps, batch_size, learning_rate, optimizer, progress, label, mesh):
    check_key(key)
    check_scorer(head, kind, "head")
    check_rollouts(data, head)
    steps = check_int(num_steps, "num_steps", minimum=1)
    bs = data.num_samples if batch_size is None else check_int(batch_size, "batch_size", minimum=1)
    lr = check_scalar(learning_rate, "learning_rate", positive=True)
    if optimizer is not None and not isinstance(optimizer, optax.GradientTransformation):
        raise TypeError(expected("optimizer", "an optax.GradientTransformation", type(optimizer).__name__, raw=True))
    progress = check_progress(progress)
    bs = min(bs, data.num_samples)
    where = batch_mesh(mesh, data.hidden, data.num_samples, bs, data_name="data")
    head, losses = _fit_jit(key, head, data, loss_fn, jnp.asarray(lr, jnp.float32), optimizer, steps, bs, progress,
                            label, None if bs >= data.num_samples else where)
    return FitResult(head, losses)


def fit_fudge(key, head, data: Rollouts, *, num_steps: int, batch_size: int | None = None,
              learning_rate: float = 1e-2, optimizer: optax.GradientTransformation | None = None,
              progress: ProgressArg = False, mesh: jax.sharding.Mesh | None = None) -> FitResult:
    """Train a CD-FUDGE value head: minimise :func:`fudge_loss` over minibatches of rollouts.

    Rollouts split over devices (their leading axis): at ``batch_size < N`` each of ``D`` devices
    takes its ``batch_size / D`` samples of every step from its own ``N / D`` (``jax.shard_map``), so
    nothing of the data moves and each device runs ``1 / D`` of the step; the head's gradient is
    all-reduced. The split is ``mesh``'s first axis or, without ``mesh``, the ``NamedSharding`` of
    ``data.hidden`` when ``D > 1`` divides ``N`` and ``batch_size`` (concrete data only: under an outer
    ``jit`` pass ``mesh``). That minibatch is a stratified sample (the same count from every block
    of ``N / D`` consecutive samples, each sample once per block epoch): the same key gives other
    minibatches than on one device. Otherwise each step draws ``batch_size`` samples of all ``N``
    (without replacement), which XLA assembles on every device when the data is split. Full-batch
    training (``batch_size`` None or >= N) keeps split data where it is in every case.

    Args:
        key: a ``jax.random.key`` (minibatch draws, without replacement per step).
        head: a :class:`ValueHead` (the start).
        data: :class:`Rollouts` of the base model.
        num_steps: optimizer steps >= 1.
        batch_size: sequences per step (None: all).
        learning_rate: Adam's step size > 0 (ignored with ``optimizer``).
        optimizer: an optax transformation instead of Adam.
        progress: False, True (a bar) or ``fn(step, {"loss": ...})``.
        mesh: optional ``jax.sharding.Mesh`` whose first axis splits the samples (its size must divide
            ``N`` and ``batch_size``; place ``data`` on it): device-local minibatches, see above.
            ``None``: the data's own ``NamedSharding`` if it splits the samples that way.

    Returns:
        A :class:`FitResult` (head, losses ``[num_steps]``).

    Raises:
        TypeError, ValueError: bad key, head, data, settings or mesh.

    References:
        Mudgal et al., "Controlled Decoding from Language Models", ICML 2024, Eq. 4.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.decoding import ValueHead, random_toy_lm, toy_rollouts
        >>> toy = random_toy_lm(jax.random.key(0))
        >>> data = toy_rollouts(toy, jnp.linspace(0, 1, 81))
        >>> res = fit_fudge(jax.random.key(1), ValueHead(toy.num_nodes), data, num_steps=50, learning_rate=0.1)
        >>> bool(res.losses[-1] < res.losses[0])
        True
    """
    return _fit(key, head, data, "value", _fudge_loss, num_steps, batch_size, learning_rate, optimizer, progress,
                "fit_fudge", mesh)


def fit_cdq(key, head, data: Rollouts, *, num_steps: int, batch_size: int | None = None,
            learning_rate: float = 1e-2, optimizer: optax.GradientTransformation | None = None,
            progress: ProgressArg = False, mesh: jax.sharding.Mesh | None = None) -> FitResult:
    """Train a CD-Q head: minimise :func:`cdq_loss` (its target under stop-gradient) over minibatches.

    Args:
        key, data, num_steps, batch_size, learning_rate, optimizer, progress, mesh: as :func:`fit_fudge`
            (device-local minibatches of split rollouts included).
        head: a :class:`QHead` (the start).

    Returns:
        A :class:`FitResult`.

    Raises:
        TypeError, ValueError: bad key, head, data, settings or mesh.

    References:
        Mudgal et al., "Controlled Decoding from Language Models", ICML 2024, Eq. 5.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore.decoding import QHead, random_toy_lm, toy_rollouts
        >>> toy = random_toy_lm(jax.random.key(0))
        >>> data = toy_rollouts(toy, jnp.linspace(0, 1, 81))
        >>> res = fit_cdq(jax.random.key(1), QHead(toy.num_nodes, 3), data, num_steps=300, learning_rate=0.1)
        >>> bool(res.losses[-1] < 1e-3)
        True
    """
    return _fit(key, head, data, "q", _cdq_loss, num_steps, batch_size, learning_rate, optimizer, progress,
                "fit_cdq", mesh)
