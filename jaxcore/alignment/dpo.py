"""Direct Preference Optimization: the loss, one jitted optax step, and a fit in one ``lax.scan``.

For a pair (prompt x, chosen y_w, rejected y_l), a policy pi_theta and a frozen reference pi_ref,

    L = -log sigma( beta [ (log pi_theta(y_w|x) - log pi_ref(y_w|x)) - (log pi_theta(y_l|x) - log pi_ref(y_l|x)) ] ),

averaged over pairs (Rafailov et al., Eq. 7). ``beta (log pi_theta - log pi_ref)`` is the implicit
reward of a continuation; its optimum over all policies is ``pi_ref(y|x) exp(r(x, y) / beta) / Z(x)``
for Bradley-Terry preferences with reward r (Eq. 4). All weights of the policy are trained
(full fine-tuning, float arrays of the :class:`jaxcore.lm.Llama`), with any optax optimizer.

References:
    Rafailov, Sharma, Mitchell, Ermon, Manning, Finn, "Direct Preference Optimization: Your
    Language Model is Secretly a Reward Model", NeurIPS 2023, Eqs. 4 and 7.
    Lee et al., "A Mechanistic Understanding of Alignment Algorithms: A Case Study on DPO and
    Toxicity", ICML 2024, Section 5.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax
from jaxtyping import Array, Float, Int

from jaxcore import lm
from jaxcore._util import (Progress, as_float_array, check_bool, check_finite, check_int, check_key, check_progress,
                           check_scalar, expected, is_concrete)
from jaxcore._util.minibatch import batch_mesh, minibatch_schedule, take_local

from ._chunks import interleaved_map
from .logprobs import _sequence_log_probs, check_sequences
from .pairs import PreferencePairs

__all__ = ["DPOMetrics", "DPOResult", "DPOState", "dpo_init", "dpo_loss", "dpo_step", "fit_dpo"]


class DPOState(NamedTuple):
    """The policy being trained, its optimizer state and the number of steps taken.

    Examples:
        >>> DPOState._fields
        ('policy', 'opt_state', 'step')
    """

    policy: lm.Llama
    opt_state: Any
    step: Int[Array, ""]


class DPOMetrics(NamedTuple):
    """One step's statistics over its minibatch (scalars, before the update).

    Attributes:
        loss: the DPO loss (nats).
        accuracy: share of pairs whose chosen implicit reward beats the rejected one.
        margin: mean implicit-reward margin ``beta (h_w - h_l)`` (nats).
        chosen_reward: mean ``beta (log pi_theta(y_w|x) - log pi_ref(y_w|x))``.
        rejected_reward: mean ``beta (log pi_theta(y_l|x) - log pi_ref(y_l|x))``.
    """

    loss: Float[Array, ""]
    accuracy: Float[Array, ""]
    margin: Float[Array, ""]
    chosen_reward: Float[Array, ""]
    rejected_reward: Float[Array, ""]


class DPOResult(NamedTuple):
    """What :func:`fit_dpo` returns.

    Attributes:
        policy: the trained :class:`jaxcore.lm.Llama`.
        state: the final :class:`DPOState` (to continue training).
        history: :class:`DPOMetrics` of every step, each ``[num_steps]``.
        reference_log_probs: ``[N, 2]`` log pi_ref of every pair's chosen and rejected continuation.
    """

    policy: lm.Llama
    state: DPOState
    history: DPOMetrics
    reference_log_probs: Float[Array, "N 2"]


def _dpo_terms(pc, pr, rc, rr, beta):
    margin = beta * ((pc - rc) - (pr - rr))
    return -jax.nn.log_sigmoid(margin), margin


def dpo_loss(policy_chosen: Float[Array, " B"], policy_rejected: Float[Array, " B"],
             reference_chosen: Float[Array, " B"], reference_rejected: Float[Array, " B"], *,
             beta: float = 0.1, weights: Float[Array, " B"] | None = None) -> Float[Array, ""]:
    """The DPO loss of a batch of pairs from their sequence log-probabilities.

    ``L = sum_b w_b (-log sigma(beta [(p_w - r_w) - (p_l - r_l)])_b) / sum_b w_b`` (weights default 1:
    the mean), computed with ``log_sigmoid`` (no overflow for large margins).

    Args:
        policy_chosen, policy_rejected: ``[B]`` log pi_theta of the chosen / rejected continuations (nats).
        reference_chosen, reference_rejected: ``[B]`` the same under the frozen reference.
        beta: > 0, the KL strength (the paper's 0.1).
        weights: optional ``[B]`` non-negative pair weights with a positive sum (e.g. Bradley-Terry label
            probabilities).

    Returns:
        A scalar in the inputs' float dtype (float64 under ``jax_enable_x64`` with float64 inputs).

    Raises:
        TypeError: None or non-numeric log-probabilities or weights.
        ValueError: shapes differ or the batch is empty; ``beta`` not positive; a non-finite concrete
            log-probability; a negative or non-finite concrete weight, or weights summing to 0.

    References:
        Rafailov et al., NeurIPS 2023, Eq. 7.

    Examples:
        >>> import jax.numpy as jnp
        >>> z = jnp.zeros(3)
        >>> round(float(dpo_loss(z, z, z, z)), 6)  # log 2 when policy = reference
        0.693147
    """
    b = check_scalar(beta, "beta", positive=True)
    names = ("policy_chosen", "policy_rejected", "reference_chosen", "reference_rejected")
    arrs = [as_float_array(a, name) for name, a in
            zip(names, (policy_chosen, policy_rejected, reference_chosen, reference_rejected))]
    shape = arrs[0].shape
    for name, a in zip(names, arrs):
        if a.shape != shape or a.ndim != 1:
            raise ValueError(expected(name, f"a [batch] array of shape {shape}", f"shape {a.shape}", raw=True))
    if shape[0] < 1:
        raise ValueError(expected("policy_chosen", "at least one pair", f"shape {shape}", raw=True))
    dt = jnp.result_type(*arrs, float)
    for name, a in zip(names, arrs):  # a log-probability is finite (a sequence of zero probability has no gradient)
        check_finite(a, name)
    if weights is None:
        w = jnp.ones(shape, dt)
    else:
        w = as_float_array(weights, "weights", dtype=dt)
        if w.shape != shape:
            raise ValueError(expected("weights", f"shape {shape}", f"shape {w.shape}", raw=True))
        if is_concrete(w):
            wa = np.asarray(w, np.float64)
            if not (np.all(np.isfinite(wa)) and np.all(wa >= 0) and wa.sum() > 0):
                raise ValueError(expected("weights", "finite non-negative pair weights with a positive sum",
                                          "a negative or non-finite weight, or all zero", raw=True))
    return _loss_jit(*(a.astype(dt) for a in arrs), w, b)


@jax.jit
def _loss_jit(pc, pr, rc, rr, w, beta):
    losses, _ = _dpo_terms(pc, pr, rc, rr, beta)
    return jnp.sum(w * losses) / jnp.sum(w)


def _pair_log_probs(model, pairs: PreferencePairs, check_ids: bool = False):
    """[B, 2] sequence log-probabilities of both members of each pair (one forward of [2B, L]); ``check_ids``:
    check the (traced) token ids at run time (a host callback), for pairs not validated on the host."""
    n, _, length = pairs.tokens.shape
    flat = lambda a: a.reshape(2 * n, length)  # noqa: E731
    lp = _sequence_log_probs(model, flat(pairs.tokens), flat(pairs.mask), flat(pairs.loss_mask), None, check_ids)
    return lp.reshape(n, 2)


def _update(optimizer, beta, policy, opt_state, pairs, ref_lp, check_ids=False):
    params, static = eqx.partition(policy, eqx.is_inexact_array)

    def loss_fn(p):
        lp = _pair_log_probs(eqx.combine(p, static), pairs, check_ids)
        losses, margin = _dpo_terms(lp[:, 0], lp[:, 1], ref_lp[:, 0], ref_lp[:, 1], beta)
        return jnp.mean(losses), (lp, margin)

    (loss, (lp, margin)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    metrics = DPOMetrics(loss, jnp.mean((margin > 0).astype(loss.dtype)), jnp.mean(margin),
                         beta * jnp.mean(lp[:, 0] - ref_lp[:, 0]), beta * jnp.mean(lp[:, 1] - ref_lp[:, 1]))
    return eqx.combine(params, static), opt_state, metrics


@eqx.filter_jit
def _step_jit(state, reference, pairs, optimizer, beta, check_ids):
    ref_lp = lax.stop_gradient(_pair_log_probs(reference, pairs, check_ids))  # one check covers both forwards
    policy, opt_state, metrics = _update(optimizer, beta, state.policy, state.opt_state, pairs, ref_lp)
    return DPOState(policy, opt_state, state.step + 1), metrics


def _check_optimizer(optimizer):
    if not isinstance(optimizer, optax.GradientTransformation):
        raise TypeError(expected("optimizer", "an optax.GradientTransformation", type(optimizer).__name__, raw=True))
    return optimizer


def _check_pairs(model, pairs, name="pairs"):
    if not isinstance(pairs, PreferencePairs):
        raise TypeError(expected(name, "a PreferencePairs", type(pairs).__name__, raw=True))
    n, _, length = pairs.tokens.shape
    # concrete pairs are reshaped on the host (an eager reshape is a compiled program per shape)
    flat = lambda a: (a if isinstance(a, jax.core.Tracer) else np.asarray(a)).reshape(2 * n, length)  # noqa: E731
    # traced ids are checked where they are read (the step's forwards, ``check_ids``), not here
    check_sequences(model, flat(pairs.tokens), flat(pairs.mask), flat(pairs.loss_mask), prefix=name + ".",
                    check_ids=False)
    return pairs


@functools.lru_cache(maxsize=8)
def _default_optimizer(learning_rate: float) -> optax.GradientTransformation:
    """``optax.adam(learning_rate)``, one object per rate (a new one would recompile the fit)."""
    return optax.adam(learning_rate)


def _trainable(policy):
    return eqx.filter(policy, eqx.is_inexact_array)


def dpo_init(policy: lm.Llama, optimizer: optax.GradientTransformation) -> DPOState:
    """The starting :class:`DPOState`: ``optimizer.init`` of the policy's float weights, step 0.

    Args:
        policy: the :class:`jaxcore.lm.Llama` to train.
        optimizer: an optax ``GradientTransformation``.

    Returns:
        A :class:`DPOState`.

    Raises:
        TypeError: not a Llama / not an optax optimizer.

    Examples:
        >>> import jax, optax
        >>> from jaxcore import lm
        >>> state = dpo_init(lm.random_llama(jax.random.key(0)), optax.adam(1e-3))
        >>> int(state.step)
        0
    """
    lm.model.check_model(policy)
    _check_optimizer(optimizer)
    return DPOState(policy, optimizer.init(_trainable(policy)), jnp.zeros((), jnp.int32))


def dpo_step(state: DPOState, reference: lm.Llama, pairs: PreferencePairs, *,
             optimizer: optax.GradientTransformation, beta: float = 0.1,
             check_ids: bool = True) -> tuple[DPOState, DPOMetrics]:
    """One DPO update: policy and reference log-probs of the pairs, the loss, its gradient, optax.

    Policy forward + backward over ``[2 B, L]``, reference forward (no gradient), then
    ``optimizer.update`` and ``optax.apply_updates`` on every float weight, in one compiled program.
    Concrete pairs are validated on the host at every call, and the compiled step then holds no host
    callback (JAX dispatches a program holding one through its Python path, 0.15-0.25 ms more per
    call on a CPU); traced pairs (``dpo_step`` inside your ``jit``) have their token ids checked at run
    time unless ``check_ids=False``.

    Args:
        state: a :class:`DPOState` (from :func:`dpo_init`).
        reference: the frozen reference :class:`jaxcore.lm.Llama` (same configuration).
        pairs: a :class:`PreferencePairs` minibatch ``[B, 2, L]``.
        optimizer: the optax optimizer ``state`` was built with.
        beta: > 0, the KL strength.
        check_ids: check traced token ids at run time (an ``error_if``, a host callback in the
            compiled step); ``False`` for a caller that validated its pairs once. Concrete pairs are
            always checked on the host, and their step never holds the callback.

    Returns:
        ``(new_state, metrics)``: the :class:`DPOState` after the update and this minibatch's
        :class:`DPOMetrics` (before it).

    Raises:
        TypeError, ValueError: bad state, model, pairs, optimizer or beta.

    References:
        Rafailov et al., NeurIPS 2023, Eq. 7 and Appendix B (the training loop).

    Examples:
        >>> import jax, jax.numpy as jnp, optax
        >>> from jaxcore import lm
        >>> model = lm.random_llama(jax.random.key(0))
        >>> m = jnp.ones((2, 2, 6), bool)
        >>> pairs = PreferencePairs(jnp.arange(24).reshape(2, 2, 6) % 64, m, m.at[:, :, :3].set(False), jnp.zeros((2, 2)))
        >>> opt = optax.adam(1e-3)
        >>> state, metrics = dpo_step(dpo_init(model, opt), model, pairs, optimizer=opt)
        >>> round(float(metrics.loss), 4), int(state.step)
        (0.6931, 1)
    """
    if not isinstance(state, DPOState):
        raise TypeError(expected("state", "a DPOState (from dpo_init)", type(state).__name__, raw=True))
    lm.model.check_model(state.policy)
    lm.model.check_model(reference)
    if reference.config != state.policy.config:
        raise ValueError(expected("reference", "a Llama with the policy's configuration", reference.config, raw=True))
    _check_optimizer(optimizer)
    _check_pairs(state.policy, pairs)
    b = check_scalar(beta, "beta", positive=True)
    check = check_bool(check_ids, "check_ids")
    traced = isinstance(pairs.tokens, jax.core.Tracer)  # concrete ids were range-checked on the host just now
    return _step_jit(state, reference, pairs, optimizer, b, traced and check)


def _minibatch_schedule(key, num_pairs: int, batch_size: int, num_steps: int, num_shards: int = 1):
    """``[num_steps, batch_size]`` int32 pair indices of every step's minibatch (traceable): the
    stratified schedule of :func:`jaxcore._util.minibatch.minibatch_schedule` (``num_shards = 1``: one
    permutation of all pairs per epoch)."""
    return minibatch_schedule(key, num_pairs, batch_size, num_steps, num_shards)


def _reference_log_probs(reference, pairs, chunk_size, check_ids=False):
    """[N, 2] log pi_ref of every pair, ``chunk_size`` pairs per forward (interleaved chunks)."""
    return lax.stop_gradient(interleaved_map(lambda q: _pair_log_probs(reference, q, check_ids), pairs, chunk_size))


@eqx.filter_jit
def _fit_jit(key, policy, reference, pairs, optimizer, beta, num_steps, batch_size, progress, where, check_ids):
    # check_ids: traced pairs (fit_dpo under an outer jit), their ids checked once, in the reference's forwards
    # the optimizer's state built inside the fit: eagerly, every distinct leaf shape compiles a program
    state = DPOState(policy, optimizer.init(_trainable(policy)), jnp.zeros((), jnp.int32))
    n = pairs.tokens.shape[0]
    shards = 1 if where is None else where.num_shards
    batches = _minibatch_schedule(key, n, batch_size, num_steps, shards)
    if where is None:
        # the frozen reference's log-probabilities, once, batch_size pairs per forward
        ref_lp = _reference_log_probs(reference, pairs, batch_size, check_ids)
        take = lambda b: (pairs.take(b), ref_lp[b])  # noqa: E731
    else:  # every device on its own block of pairs: its reference forwards and its minibatch rows
        from jax.sharding import PartitionSpec as P

        rows = P(where.axis)
        ref_arrays, ref_static = eqx.partition(reference, eqx.is_array)
        ref_lp = jax.shard_map(
            lambda r, q: _reference_log_probs(eqx.combine(r, ref_static), q, batch_size // shards, check_ids),
            mesh=where.mesh,
            in_specs=(P(), rows), out_specs=rows, check_vma=False)(ref_arrays, pairs)  # lm's loops: unannotated
        take = lambda i: take_local(where, (pairs, ref_lp), i, n)  # noqa: E731
    bar = Progress(progress, num_steps, "DPO")

    def body(st, xs):
        i, b = xs
        minibatch, ref_b = take(b)
        policy, opt_state, metrics = _update(optimizer, beta, st.policy, st.opt_state, minibatch, ref_b)
        bar.update(i, {"loss": metrics.loss, "accuracy": metrics.accuracy})
        return DPOState(policy, opt_state, st.step + 1), metrics

    state, history = lax.scan(body, state, (jnp.arange(num_steps), batches))
    return state, history, ref_lp


def fit_dpo(key, policy: lm.Llama, pairs: PreferencePairs, *, num_steps: int, batch_size: int,
            reference: lm.Llama | None = None, optimizer: optax.GradientTransformation | None = None,
            learning_rate: float = 1e-5, beta: float = 0.1, progress=False,
            mesh: jax.sharding.Mesh | None = None, check_ids: bool = True) -> DPOResult:
    """Fine-tune ``policy`` with DPO on ``pairs`` for ``num_steps`` minibatch steps (one ``lax.scan``).

    The reference log-probabilities are computed once (the reference is frozen); each step draws
    ``batch_size`` pairs (a fresh permutation per epoch) and applies :func:`dpo_step`'s update.

    Pairs split over devices: each of ``D`` devices draws its ``batch_size / D`` rows of every step
    from its own ``N / D`` pairs (``jax.shard_map``) and computes their reference log-probabilities
    itself: nothing of the pairs moves, each device runs ``1 / D`` of every step and the weight
    gradients are all-reduced (tiny Llama, 40 pairs, 4 faked CPU devices: 1.0 MB instead of 3.7 MB
    per device and a quarter of the flops). The split is ``mesh``'s first axis, or, without ``mesh``,
    the ``NamedSharding`` of ``pairs.tokens``'s leading axis when ``D > 1`` divides ``N`` and
    ``batch_size`` (concrete pairs only: under an outer ``jit`` the placement is unknown, pass ``mesh``).
    The minibatch is then a stratified sample (the same count from every block of ``N / D``
    consecutive pairs, each pair once per epoch): its mean gradient is still unbiased for the
    all-pairs mean, its variance the stratified one (no larger than a simple random sample's, up to
    finite-population terms); the same key gives another minibatch order than on one device. Pairs
    split in a way that does not divide ``N`` and ``batch_size`` (or traced, without ``mesh``) are
    sampled as on one device: a step's minibatch is then a random index set over all pairs, which XLA
    assembles on every device (every device runs the whole minibatch; memory per device does not
    shrink).

    Args:
        key: a ``jax.random.key`` (minibatch order).
        policy: the starting :class:`jaxcore.lm.Llama`.
        pairs: a :class:`PreferencePairs` ``[N, 2, L]``.
        num_steps: >= 1 optimizer steps.
        batch_size: pairs per step, in ``[1, N]``.
        reference: the frozen reference (default: the starting ``policy``, as in the paper).
        optimizer: an optax optimizer (default ``optax.adam(learning_rate)``); pass the same object
            again to reuse the compiled program.
        learning_rate: > 0, used only for the default optimizer.
        beta: > 0, the KL strength.
        progress: ``False``, ``True`` (a bar) or ``fn(step, metrics)``.
        mesh: optional ``jax.sharding.Mesh`` whose first axis splits the pairs (its size must divide
            ``N`` and ``batch_size``): device-local minibatches, see above. ``None``: the pairs' own
            ``NamedSharding`` if it splits them that way, else one-device sampling.
        check_ids: check traced token ids (``fit_dpo`` inside your ``jit``) at run time, once, in the
            reference's forwards (a host callback in the compiled fit); ``False`` for pairs validated
            beforehand. Concrete pairs are checked on the host and the compiled fit holds no callback.

    Returns:
        A :class:`DPOResult` (the trained policy, final state, per-step :class:`DPOMetrics`,
        the reference log-probabilities).

    Raises:
        TypeError, ValueError: bad key, models, pairs, sizes, hyperparameters or mesh.

    References:
        Rafailov et al., NeurIPS 2023; Lee et al., ICML 2024, Section 5 (DPO on toxicity pairs).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxcore import lm
        >>> model = lm.random_llama(jax.random.key(0))
        >>> m = jnp.ones((4, 2, 6), bool)
        >>> pairs = PreferencePairs(jnp.arange(48).reshape(4, 2, 6) % 64, m, m.at[:, :, :3].set(False), jnp.zeros((4, 2)))
        >>> res = fit_dpo(jax.random.key(1), model, pairs, num_steps=3, batch_size=2,
        ...               learning_rate=1e-2)  # doctest: +SKIP
        >>> res.history.loss.shape, bool(res.history.loss[-1] < res.history.loss[0])  # doctest: +SKIP
        ((3,), True)
    """
    check_key(key)
    lm.model.check_model(policy)
    reference = policy if reference is None else lm.model.check_model(reference)
    if reference.config != policy.config:
        raise ValueError(expected("reference", "a Llama with the policy's configuration", reference.config, raw=True))
    _check_pairs(policy, pairs)
    num_steps = check_int(num_steps, "num_steps", minimum=1)
    batch_size = check_int(batch_size, "batch_size", minimum=1, maximum=pairs.num_pairs)
    lr = check_scalar(learning_rate, "learning_rate", positive=True)
    optimizer = _default_optimizer(lr) if optimizer is None else _check_optimizer(optimizer)
    b = check_scalar(beta, "beta", positive=True)
    progress = check_progress(progress)
    where = batch_mesh(mesh, pairs.tokens, pairs.num_pairs, batch_size, data_name="pairs")
    # concrete pairs were checked on the host above: the compiled fit holds no run-time id check
    check = isinstance(pairs.tokens, jax.core.Tracer) and check_bool(check_ids, "check_ids")
    state, history, ref_lp = _fit_jit(key, policy, reference, pairs, optimizer, b, num_steps, batch_size, progress,
                                      where, check)
    return DPOResult(state.policy, state, history, ref_lp)


