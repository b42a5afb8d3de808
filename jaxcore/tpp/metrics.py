"""Evaluation of point-process models: NLL per event, next-event prediction, time-rescaling KS.

Next-event prediction follows Zhang et al. (ICML 2024, Sec. 4.3): after event
``i`` the intensity is integrated forward (drift only) and the next time is the
mean of the predicted density ``p(s) = lambda(s) exp(-int_{t_i}^s lambda)``,
``E[t_{i+1}] = t_i + int_0^H tau p(t_i + tau) dtau`` (mass beyond the horizon
``H`` is placed at ``H``); the type is ``argmax_k int lambda_k(s) exp(-int lambda) ds``.

Goodness of fit uses the time-rescaling theorem (Brown et al., 2002): under the
true model the compensator increments between consecutive events are i.i.d.
Exp(1); the KS statistic compares their empirical law with Exp(1).

References:
    E. N. Brown, R. Barbieri, V. Ventura, R. E. Kass, L. M. Frank, "The
    time-rescaling theorem and its application to neural spike train data
    analysis", Neural Computation 14(2), 2002.
    Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from jaxcore._util import check_bool, check_int, check_key, check_positive, check_scalar, expected, is_concrete

from ._checks import as_param

from .events import EventBatch, check_batch, check_marks
from .solver import JumpDiffusion, _solve_args, _solve_batch, as_jump_diffusion


def nll_per_event(log_likelihood: Float[Array, " batch"], num_events: Array) -> Float[Array, ""]:
    """Negative log-likelihood per event, ``-sum_b log L_b / sum_b N_b`` (nats).

    Args:
        log_likelihood: ``[B]`` per-sequence log-likelihoods (nats).
        num_events: ``[B]`` event counts (``EventBatch.num_events``); a total of 0 counts as 1.

    Returns:
        Scalar float, nats per event (integer inputs are converted to float exactly).

    Raises:
        TypeError: None or non-numeric inputs.
        ValueError: the shapes differ or are not 1-D; no sequence (``B = 0``: nothing to
            average); a NaN log-likelihood; negative or non-finite counts.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.tpp import nll_per_event
        >>> float(nll_per_event(jnp.array([-3.0, -5.0]), jnp.array([2, 2])))
        2.0
    """
    ll = as_param(log_likelihood, "log_likelihood")
    n = as_param(num_events, "num_events")
    if ll.ndim != 1:
        raise ValueError(expected("log_likelihood", "shape [batch]", f"shape {tuple(ll.shape)}", raw=True))
    if n.shape != ll.shape:
        raise ValueError(expected("num_events", f"shape {tuple(ll.shape)} (that of log_likelihood)",
                                  f"shape {tuple(n.shape)}", raw=True))
    if ll.shape[0] == 0:
        raise ValueError(expected("log_likelihood", "at least one sequence", "shape (0,)", raw=True))
    if is_concrete(ll) and bool(jnp.any(jnp.isnan(ll))):
        raise ValueError(expected("log_likelihood", "no NaN entry", "a NaN entry", raw=True))
    check_positive(n, "num_events", allow_zero=True)
    return _nll_per_event(ll, n)


@jax.jit
def _nll_per_event(log_likelihood, num_events):
    return -jnp.sum(log_likelihood) / jnp.maximum(jnp.sum(num_events), 1)


def ks_statistic(samples: Float[Array, " n"], mask: Bool[Array, " n"] | None = None) -> Float[Array, ""]:
    """Kolmogorov-Smirnov distance between the empirical law of ``samples[mask]`` and Exp(1).

    ``D = max_i max(i/n - F(x_(i)), F(x_(i)) - (i-1)/n)``, ``F(x) = 1 - e^{-x}``.

    Args:
        samples: ``[n]`` (any shape, flattened) non-negative values.
        mask: which entries count (default all), same shape.

    Returns:
        Scalar ``D`` in [0, 1]; integer samples are converted to float. Under ``jit`` with no
        valid sample it is 0 (a distance from nothing: check the mask's count).

    Raises:
        TypeError: None or non-numeric ``samples``.
        ValueError: negative or non-finite samples (where counted); ``mask`` of another shape; no
            valid sample (empty ``samples`` or an all-False ``mask``) when concrete.

    References:
        Brown et al., Neural Computation 14(2), 2002 (time-rescaling goodness of fit).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxcore.tpp import ks_statistic
        >>> round(float(ks_statistic(jnp.array([0.1, 0.7, 2.0]))), 4)
        0.2382
    """
    x = as_param(samples, "samples")
    if mask is not None:
        if np.shape(mask) != tuple(x.shape):
            raise ValueError(expected("mask", f"shape {tuple(x.shape)} (that of samples)",
                                      f"shape {np.shape(mask)}", raw=True))
        mask = jnp.asarray(mask, bool)
    if is_concrete(x, mask):
        if x.size == 0 or (mask is not None and not bool(jnp.any(mask))):
            name, got = ("samples", "an empty array") if x.size == 0 else ("mask", "an all-False mask")
            raise ValueError(expected(name, "at least one valid sample", got, raw=True))
        check_positive(x if mask is None else jnp.where(mask, x, 0.0), "samples", allow_zero=True)
    return _ks_statistic(x, mask)


def _ks_impl(samples, mask):
    x = jnp.ravel(samples)
    m = jnp.ones_like(x, bool) if mask is None else jnp.ravel(mask)
    n = jnp.sum(m)
    xs = jnp.sort(jnp.where(m, x, jnp.inf))
    F = -jnp.expm1(-xs)
    i = jnp.arange(1, x.shape[0] + 1, dtype=F.dtype)
    valid = i <= n
    nf = jnp.maximum(n, 1).astype(F.dtype)
    d = jnp.maximum(i / nf - F, F - (i - 1) / nf)
    return jnp.max(jnp.where(valid, d, 0.0))


_ks_statistic = jax.jit(_ks_impl)


def time_rescaling_ks(dynamics: JumpDiffusion, batch: EventBatch, key: PRNGKeyArray | None = None,
                      **solve_kwargs: Any) -> Float[Array, ""]:
    """KS statistic of the rescaled inter-event times ``Lambda(t_{i-1}, t_i)`` against Exp(1), pooled over the batch.

    Under the true model the compensator increments between events are i.i.d. Exp(1)
    (the time-rescaling theorem); ``D`` is their KS distance to Exp(1).

    Args:
        dynamics: a :class:`JumpDiffusion` (NJDTPP, ``model.jump_diffusion()``) or a classical model
            (``Poisson``, ``Hawkes``, ``SharedDecayHawkes``, ``SelfCorrecting``), taken as its jump-diffusion.
        batch: ``B`` sequences.
        key: Brownian key passed to :func:`solve`; ``None`` integrates the drift only.
        **solve_kwargs: passed to :func:`solve` (``method``, ``num_substeps``, ``convention``, ...). Without
            ``method``, the exact closed-form flow is used where one exists and ``key`` is None (every
            classical model), else :func:`solve`'s default ``"scan"``.

    Returns:
        Scalar KS statistic in [0, 1].

    Raises:
        TypeError/ValueError: as :func:`solve`.

    References:
        Brown et al., Neural Computation 14(2), 2002, Sec. 2.

    Examples:
        >>> from jaxcore.tpp import EventBatch, Poisson, time_rescaling_ks
        >>> batch = EventBatch.from_sequences([[0.5, 1.5, 2.0]], T=3.0)
        >>> d = time_rescaling_ks(Poisson(1.0), batch)      # the exact flow of the classical model
        >>> 0.0 <= float(d) <= 1.0
        True
    """
    dynamics = as_jump_diffusion(dynamics)
    if "method" not in solve_kwargs and key is None and dynamics.has_flow():
        solve_kwargs["method"] = "exact"
    args = _solve_args(dynamics, batch, key, **solve_kwargs)
    return _time_rescaling_run(args)


def _time_rescaling_impl(args):
    batch, convention = args[1], args[5]
    res = _solve_batch(*args)
    mask = batch.mask
    if convention == "paper":
        mask = mask & (jnp.arange(batch.max_events) > 0)[None]
    return _ks_impl(res.interval_compensator, mask)


_time_rescaling_run = eqx.filter_jit(_time_rescaling_impl)


class NextEventPrediction(NamedTuple):
    """Predictions of event ``i+1`` from the history up to event ``i`` (``[B, L]`` each).

    Attributes:
        time: predicted time of the next event (same unit as the batch).
        type: predicted type (int32).
        type_probs: ``[B, L, K]`` predicted type probabilities.
        valid: True where event ``i+1`` exists (targets ``times[:, i+1]``, ``marks[:, i+1]``).

    Examples:
        >>> from jaxcore.tpp import NextEventPrediction
        >>> NextEventPrediction._fields
        ('time', 'type', 'type_probs', 'valid')
    """

    time: Array
    type: Array
    type_probs: Array
    valid: Array


def predict_next(dynamics: JumpDiffusion, batch: EventBatch, *, horizon: float, num_grid: int = 64,
                 num_substeps: int = 10, convention: str = "window", method: str = "scan") -> NextEventPrediction:
    """Predict each next event's time (mean of the predicted density) and type, drift-only.

    On each of the ``num_grid`` steps of length ``H / num_grid`` after event ``i`` the
    next event falls with probability ``exp(-Lambda_before) (1 - exp(-dLambda))``
    (``dLambda`` the step's compensator increment), placed at the step's midpoint
    and split between types in proportion to ``lambda_k`` at the step's start.

    Args:
        dynamics: the model's jump-diffusion.
        batch: ``B`` sequences; predictions are made after every real event.
        horizon: how far ahead to integrate (same time unit, > 0), e.g. several mean gaps.
        num_grid: steps over the horizon.
        num_substeps: steps per gap when integrating the history (``method="scan"``).
        convention: likelihood convention of the history pass (see :func:`solve`).
        method: ``"scan"`` (Euler steps, any dynamics) or ``"exact"`` (the
            closed-form :meth:`JumpDiffusion.flow` of the classical processes; stable
            at any step size).

    Returns:
        A :class:`NextEventPrediction` of ``[B, L]`` (and ``[B, L, K]``) arrays.

    Raises:
        ValueError: non-positive ``horizon`` or ``num_grid``; ``method`` not
            ``"scan"``/``"exact"`` or ``"exact"`` without a closed-form flow.

    References:
        Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024, Sec. 4.3.

    Examples:
        >>> from jaxcore.tpp import EventBatch, Poisson, predict_next
        >>> batch = EventBatch.from_sequences([[0.5, 1.0, 2.0]], T=3.0)
        >>> pred = predict_next(Poisson(2.0).jump_diffusion(), batch, horizon=10.0, method="exact")
        >>> pred.time.shape, bool(pred.valid[0, -1])
        ((1, 3), False)
    """
    if method not in ("scan", "exact"):
        raise ValueError(expected("method", "'scan' or 'exact'", method))
    if is_concrete(horizon):
        check_scalar(horizon, "horizon", positive=True)
    G = check_int(num_grid, "num_grid", minimum=1)
    args = _solve_args(dynamics, batch, None, method, num_substeps, convention)
    return _predict_next_run(args, jnp.asarray(horizon, batch.times.dtype), G)


def _grid_path(dynamics, method, eta, t, h, G):
    """The drift path from the post-jump state ``eta`` at ``t`` on ``G`` steps of ``h``: the compensator at each
    step's start and end ``[G]`` and the log-intensities at each step's start ``[G, K]``."""
    def step(carry, k):
        eta, lam_int = carry
        lam = jnp.exp(eta)
        if method == "exact":
            eta_next, d_int = dynamics.flow(t + k * h, eta, h)
        else:
            eta_next, d_int = eta + dynamics.drift(t + k * h, eta) * h, jnp.sum(lam) * h
        return (eta_next, lam_int + d_int), (lam_int, lam_int + d_int, eta)

    return jax.lax.scan(step, (eta, jnp.zeros((), eta.dtype)), jnp.arange(G, dtype=eta.dtype))[1]


def _grid_path_sde(dynamics, eta, t, h, z):
    """:func:`_grid_path` with the Brownian part: Euler-Maruyama steps ``eta + f h + g sqrt(h) z_k`` (``z``
    ``[G, K]`` standard normals) and the left-point compensator; also each step's end state ``[G, K]``."""
    sqrt_h = jnp.sqrt(h)

    def step(carry, x):
        eta, lam_int = carry
        k, zk = x
        f, g = dynamics.drift_and_diffusion(t + k * h, eta)
        eta_next = eta + f * h + g * sqrt_h * zk
        d_int = jnp.sum(jnp.exp(eta)) * h
        return (eta_next, lam_int + d_int), (lam_int, lam_int + d_int, eta, eta_next)

    G = z.shape[0]
    return jax.lax.scan(step, (eta, jnp.zeros((), eta.dtype)), (jnp.arange(G, dtype=eta.dtype), z))[1]


def _predict_next_impl(args, horizon, G):
    dynamics, batch, method = args[0], args[1], args[3]
    res = _solve_batch(*args)
    dtype = batch.times.dtype
    h = jnp.asarray(horizon, dtype) / G
    tau = (jnp.arange(G, dtype=dtype) + 0.5) * h

    def after_event(eta_pre, t, m):
        starts, ends, etas = _grid_path(dynamics, method, eta_pre + dynamics.jump(t, eta_pre)[:, m], t, h, G)
        lams = jnp.exp(etas)
        p_step = jnp.exp(-starts) * -jnp.expm1(-(ends - starts))  # P(next event in this step)
        dens = p_step[:, None] * lams / jnp.maximum(jnp.sum(lams, -1, keepdims=True), jnp.finfo(dtype).tiny)
        lam_int = ends[-1]
        total = jnp.sum(dens, axis=1)  # [G] probability of the next event in each step
        tail = jnp.exp(-lam_int)
        mean = jnp.sum(total * tau) + tail * horizon
        probs = jnp.sum(dens, axis=0)
        probs = probs / jnp.maximum(jnp.sum(probs), jnp.finfo(dtype).tiny)
        return t + mean, probs

    f = jax.vmap(jax.vmap(after_event))
    time, probs = f(res.eta_events, batch.times, batch.marks)
    valid = batch.mask & jnp.concatenate([batch.mask[:, 1:], jnp.zeros((batch.num_sequences, 1), bool)], axis=1)
    return NextEventPrediction(time, jnp.argmax(probs, axis=-1).astype(jnp.int32), probs, valid)


_predict_next_run = eqx.filter_jit(_predict_next_impl)


def sample_next(key: PRNGKeyArray, dynamics: JumpDiffusion, batch: EventBatch, *, horizon: float,
                num_samples: int = 16, num_grid: int = 256, num_substeps: int = 10, convention: str = "window",
                method: str = "scan", stochastic: bool = False) -> Any:
    """Sample the next event after every event of a jump-diffusion TPP (NJDTPP, the classical SDEs), drift-only
    or with the diffusion's Brownian part.

    The history is integrated as in :func:`predict_next`; after event ``i`` the drift path on
    ``num_grid`` steps over ``horizon`` gives the compensator ``Lambda(s)`` at the step ends
    (linear in between), and each draw inverts it (time rescaling): ``E ~ Exp(1)``, next time
    ``t_i + Lambda^{-1}(E)``, its type drawn with probabilities ``lambda_k / sum lambda`` at
    the start of its step; ``E > Lambda(horizon)`` censors the draw at ``t_i + horizon``
    (``accepted`` False). This samples exactly the discretised path whose density
    :func:`predict_next` integrates (not Ogata thinning: with a compensator on the grid,
    inversion needs no intensity bound and accepts every draw).

    With ``stochastic=True`` (``method="scan"``, a model whose ``stochastic`` is True) the history
    is integrated by Euler-Maruyama on one Brownian path (``num_substeps`` per gap; the prior path,
    as in the likelihood) and each draw follows its own Brownian path on the grid (the steps and
    compensator of :func:`generate` with ``stochastic=True``), so a draw samples the next event of
    the jump-diffusion process itself.

    Args:
        key: PRNG key.
        dynamics: a :class:`JumpDiffusion` (or a classical model's ``jump_diffusion()``).
        batch: ``B`` sequences.
        horizon: look-ahead (time unit, > 0).
        num_samples: draws per event.
        num_grid: steps over ``horizon``.
        num_substeps, convention, method: as :func:`predict_next`.
        stochastic: include the diffusion's Brownian part (default False: drift only).

    Returns:
        A :class:`jaxcore.tpp.NextEventSamples` of ``[B, L, num_samples]`` arrays (``type_probs``
        ``[B, L, num_samples, K]``); draws after padding are meaningless.

    Raises:
        TypeError: ``key`` is not a PRNG key; ``stochastic`` not a bool.
        ValueError: non-positive ``horizon``, ``num_samples`` or ``num_grid``; a bad ``method``;
            ``stochastic=True`` with ``method="exact"``.

    References:
        Zhang et al., ICML 2024, Sec. 4.3; E. N. Brown et al., "The time-rescaling theorem and its
        application to neural spike train data analysis", Neural Computation 14(2), 2002.

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import EventBatch, Poisson, sample_next
        >>> batch = EventBatch.from_sequences([[0.5, 1.0, 2.0]], T=3.0)
        >>> s = sample_next(jax.random.key(0), Poisson(2.0).jump_diffusion(), batch, horizon=10.0, method="exact")
        >>> s.time.shape, bool(s.accepted.all())
        ((1, 3, 16), True)
    """
    args, G = _draw_args(key, dynamics, batch, horizon, num_grid, num_substeps, convention, method)
    S = check_int(num_samples, "num_samples", minimum=1)
    noisy = _noisy(args, stochastic, method)
    return _sample_next_run(args, key, jnp.asarray(horizon, batch.times.dtype), G, S, noisy)


def _noisy(args, stochastic, method) -> bool:
    """Whether a draw includes the Brownian part (``stochastic`` checked; the model must have a diffusion)."""
    stochastic = check_bool(stochastic, "stochastic")
    if stochastic and method == "exact":
        raise ValueError(expected("method", "'scan' with stochastic=True (the exact flow is the drift's)", method))
    return stochastic and bool(args[0].stochastic)


def _with_history_noise(args, key, noisy):
    """``(args, key)``: with ``noisy`` the history's solve gets its own Brownian key split from ``key``."""
    if not noisy:
        return args, key
    key, k_hist = jax.random.split(key)
    return (args[0], args[1], k_hist) + tuple(args[3:]), key


def _draw_args(key, dynamics, batch, horizon, num_grid, num_substeps, convention, method):
    """The checks shared by :func:`sample_next` and :func:`generate`: ``(solver arguments, num_grid)``."""
    check_key(key)
    if method not in ("scan", "exact"):
        raise ValueError(expected("method", "'scan' or 'exact'", method))
    if is_concrete(horizon):
        check_scalar(horizon, "horizon", positive=True)
    G = check_int(num_grid, "num_grid", minimum=1)
    return _solve_args(dynamics, batch, None, method, num_substeps, convention), G


def _draw_setup(args, horizon, G):
    dynamics, batch, method = args[0], args[1], args[3]
    dtype = batch.times.dtype
    return dynamics, batch, method, _solve_batch(*args), dtype, jnp.asarray(horizon, dtype) / G, jnp.finfo(dtype).tiny


def _sample_next_impl(args, key, horizon, G, S, noisy=False):
    from .neural import NextEventSamples

    args, key = _with_history_noise(args, key, noisy)
    dynamics, batch, method, res, dtype, h, tiny = _draw_setup(args, horizon, G)
    K = dynamics.initial_state().shape[0]

    def invert(starts, ends, lams, E):
        j = jnp.minimum(jnp.searchsorted(ends, E), G - 1)  # the step whose end first reaches E
        frac = jnp.clip((E - starts[j]) / jnp.maximum(ends[j] - starts[j], tiny), 0.0, 1.0)
        return j, frac, lams[j]

    def after_event(eta_pre, t, m, k):
        eta = eta_pre + dynamics.jump(t, eta_pre)[:, m]
        k_e, k_m = jax.random.split(k)
        E = jax.random.exponential(k_e, (S,), dtype)
        if noisy:  # one Brownian grid path per draw
            k_m, k_z = jax.random.split(k_m)
            z = jax.random.normal(k_z, (S, G, K), dtype)
            starts, ends, etas, _ = jax.vmap(lambda zz: _grid_path_sde(dynamics, eta, t, h, zz))(z)
            j, frac, lam_j = jax.vmap(invert)(starts, ends, jnp.exp(etas), E)
            accepted = E <= ends[:, -1]
        else:
            starts, ends, etas = _grid_path(dynamics, method, eta, t, h, G)
            j, frac, lam_j = invert(starts, ends, jnp.exp(etas), E)
            accepted = E <= ends[-1]
        dt = jnp.where(accepted, (j + frac) * h, horizon)
        probs = lam_j / jnp.maximum(jnp.sum(lam_j, -1, keepdims=True), tiny)
        typ = jax.random.categorical(k_m, jnp.log(jnp.maximum(probs, tiny)))
        return t + dt, typ.astype(jnp.int32), probs, accepted

    B, L = batch.times.shape
    keys = jax.random.split(key, (B, L))
    out = jax.vmap(jax.vmap(after_event))(res.eta_events, batch.times, batch.marks, keys)
    return NextEventSamples(*out)


_sample_next_run = eqx.filter_jit(_sample_next_impl)


def generate(key: PRNGKeyArray, dynamics: JumpDiffusion, batch: EventBatch, *, num_events: int, horizon: float,
             num_grid: int = 256, num_substeps: int = 10, convention: str = "window", method: str = "scan",
             stochastic: bool = False) -> Any:
    """Multi-step generation for a jump-diffusion TPP (NJDTPP, the classical SDEs): ``num_events``
    events after each sequence's last event, one :func:`sample_next` draw at a time; drift-only, or
    with the diffusion's Brownian part (``stochastic=True``).

    From the state after the last event (the initial state at ``t = 0`` for an empty history)
    the drift path on ``num_grid`` steps over ``horizon`` is inverted at ``E ~ Exp(1)``; the
    state is carried to the drawn time within its step, the type drawn with probabilities
    ``lambda_k / sum lambda`` there, the jump applied, and the next draw starts from that
    event. A draw beyond ``horizon`` ends that sequence's generation (``accepted`` False from
    there on). Vmapped over sequences; one ``lax.scan`` over the new events.

    With ``stochastic=True`` (``method="scan"``, a model whose ``stochastic`` is True) the
    log-intensity follows its SDE ``d eta = f dt + g dW`` (Zhang et al. 2024, Eq. 5): the history by
    Euler-Maruyama with ``num_substeps`` per gap (its own Brownian path), each draw's grid path by
    Euler-Maruyama steps ``eta + f h + g sqrt(h) z`` with the left-point compensator
    ``h sum exp(eta)``, and the state at the drawn time inside a step by the Brownian bridge between
    the step's ends. Each draw of ``key`` is then a sample of the discretised jump-diffusion process
    itself (the grid path is re-drawn from the state after each event). A model without diffusion
    (``stochastic`` False) is generated drift-only either way.

    Args:
        key: PRNG key.
        dynamics: a :class:`JumpDiffusion`.
        batch: ``B`` histories.
        num_events: events to generate per sequence (>= 1).
        horizon, num_grid, num_substeps, convention, method: as :func:`sample_next`.
        stochastic: include the diffusion's Brownian part (default False: drift only).

    Returns:
        A :class:`jaxcore.tpp.GeneratedEvents` of ``[B, num_events]`` arrays.

    Raises:
        As :func:`sample_next`; ``num_events < 1``; ``stochastic`` not a bool (TypeError) or
        ``stochastic=True`` with ``method="exact"`` (ValueError: the exact flow is the drift's).

    References:
        Zhang et al., ICML 2024, Sec. 4.3; Brown et al., Neural Computation 14(2), 2002.

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import EventBatch, Poisson, generate
        >>> batch = EventBatch.from_sequences([[0.5, 1.0]], T=1.0)
        >>> g = generate(jax.random.key(0), Poisson(2.0).jump_diffusion(), batch, num_events=3, horizon=20.0,
        ...              method="exact")
        >>> g.time.shape, bool((g.time[0] > 1.0).all())
        ((1, 3), True)
    """
    args, G = _draw_args(key, dynamics, batch, horizon, num_grid, num_substeps, convention, method)
    n = check_int(num_events, "num_events", minimum=1)
    noisy = _noisy(args, stochastic, method)
    return _generate_run(args, key, jnp.asarray(horizon, batch.times.dtype), G, n, noisy)


def _generate_impl(args, key, horizon, G, n_new, noisy=False):
    from .neural import GeneratedEvents

    args, key = _with_history_noise(args, key, noisy)
    dynamics, batch, method, res, dtype, h, tiny = _draw_setup(args, horizon, G)
    K = dynamics.initial_state().shape[0]

    def one(eta_events, times, marks, mask, k):
        count = jnp.sum(mask)
        i = jnp.maximum(count - 1, 0)
        after = eta_events[i] + dynamics.jump(times[i], eta_events[i])[:, marks[i]]
        eta0 = jnp.where(count > 0, after, dynamics.initial_state().astype(dtype))
        t0 = jnp.where(count > 0, times[i], 0.0)

        def draw(carry, kk):
            eta, t, alive = carry
            if noisy:
                kk, k_z, k_b = jax.random.split(kk, 3)
                z = jax.random.normal(k_z, (G, K), dtype)
                starts, ends, etas, nexts = _grid_path_sde(dynamics, eta, t, h, z)
            else:
                starts, ends, etas = _grid_path(dynamics, method, eta, t, h, G)
            k_e, k_m = jax.random.split(kk)
            E = jax.random.exponential(k_e, (), dtype)
            j = jnp.minimum(jnp.searchsorted(ends, E), G - 1)
            frac = jnp.clip((E - starts[j]) / jnp.maximum(ends[j] - starts[j], tiny), 0.0, 1.0)
            t_j = t + j.astype(dtype) * h
            if noisy:  # the Brownian bridge between the step's ends
                bridge = jnp.sqrt(frac * (1.0 - frac) * h) * jax.random.normal(k_b, (K,), dtype)
                eta_t = etas[j] + frac * (nexts[j] - etas[j]) + dynamics.diffusion(t_j, etas[j]) * bridge
            elif method == "exact":
                eta_t = dynamics.flow(t_j, etas[j], frac * h)[0]
            else:
                eta_t = etas[j] + dynamics.drift(t_j, etas[j]) * frac * h
            ok = alive & (E <= ends[-1])
            t_new = t_j + frac * h
            m = jax.random.categorical(k_m, eta_t).astype(jnp.int32)  # probabilities lambda_k / sum lambda
            eta_new = eta_t + dynamics.jump(t_new, eta_t)[:, m]
            carry = (jnp.where(ok, eta_new, eta), jnp.where(ok, t_new, t), ok)
            return carry, (jnp.where(ok, t_new, t + horizon), m, ok)

        return jax.lax.scan(draw, (eta0, t0, jnp.ones((), bool)), jax.random.split(k, n_new))[1]

    keys = jax.random.split(key, batch.num_sequences)
    out = jax.vmap(one)(res.eta_events, batch.times, batch.marks, batch.mask, keys)
    return GeneratedEvents(*out)


_generate_run = eqx.filter_jit(_generate_impl)


def prediction_scores(pred: NextEventPrediction, batch: EventBatch) -> tuple[Array, Array]:
    """``(rmse, accuracy)`` of next-event predictions against the batch's next events.

    RMSE of the predicted next time (time unit) and accuracy of the predicted
    type, over positions where a next event exists.

    Args:
        pred: a :class:`NextEventPrediction` for ``batch``.
        batch: the ``B`` sequences the predictions were made on.

    Returns:
        ``(rmse, accuracy)``: scalars (time unit; fraction in [0, 1]).

    Raises:
        TypeError: ``pred`` is not a NextEventPrediction or ``batch`` not an EventBatch.

    Examples:
        >>> from jaxcore.tpp import EventBatch, Poisson, predict_next, prediction_scores
        >>> batch = EventBatch.from_sequences([[0.5, 1.0, 2.0]], T=3.0)
        >>> pred = predict_next(Poisson(2.0).jump_diffusion(), batch, horizon=10.0, method="exact")
        >>> rmse, acc = prediction_scores(pred, batch)
        >>> float(acc)
        1.0
    """
    if not isinstance(pred, NextEventPrediction):
        raise TypeError(expected("pred", "a jaxcore.tpp.NextEventPrediction", type(pred).__name__, raw=True))
    check_batch(batch)
    return _prediction_scores(pred, batch)


def _prediction_scores_impl(pred, batch):
    target_t = jnp.concatenate([batch.times[:, 1:], batch.times[:, -1:]], axis=1)
    target_m = jnp.concatenate([batch.marks[:, 1:], batch.marks[:, -1:]], axis=1)
    n = jnp.maximum(jnp.sum(pred.valid), 1)
    rmse = jnp.sqrt(jnp.sum(jnp.where(pred.valid, (pred.time - target_t) ** 2, 0.0)) / n)
    acc = jnp.sum(pred.valid & (pred.type == target_m)) / n
    return rmse, acc


_prediction_scores = eqx.filter_jit(_prediction_scores_impl)


class EvaluationResult(NamedTuple):
    """Test metrics of one model on one batch (:func:`evaluate`); scalars.

    Attributes:
        nll: negative log-likelihood per event (nats), ``-sum log L / sum N``.
        rmse: root mean squared error of the predicted next-event time (the batch's time unit).
        accuracy: fraction of next-event types predicted correctly, in [0, 1].
        ks: time-rescaling KS statistic of the pooled rescaled gaps against Exp(1), in [0, 1].

    Examples:
        >>> from jaxcore.tpp import EvaluationResult
        >>> EvaluationResult._fields
        ('nll', 'rmse', 'accuracy', 'ks')
    """

    nll: Array
    rmse: Array
    accuracy: Array
    ks: Array


def evaluate(
    dynamics: Any,
    batch: EventBatch,
    key: PRNGKeyArray | None = None,
    *,
    horizon: float,
    num_substeps: int = 10,
    num_samples: int = 1,
    num_grid: int = 256,
    chunk_size: int | None = None,
) -> EvaluationResult:
    """Score a model on test sequences: NLL per event, next-event RMSE and type accuracy, time-rescaling KS.

    Dynamics with a closed-form flow (the classical processes) are integrated exactly
    (``method="exact"``: exact NLL and KS); others (NJDTPP) by the Euler-Maruyama solver
    with ``num_substeps`` steps per gap. With a ``key`` the NLL is averaged over
    ``num_samples`` Brownian paths; ``key=None`` integrates the drift only (deterministic).
    Predictions (:func:`predict_next`, ``num_grid`` steps over ``horizon``) and the KS
    statistic (:func:`time_rescaling_ks`) are drift-only. All of it runs as one program.
    A neural TPP (:class:`jaxcore.tpp.NeuralTPP`) is scored on its own likelihood (closed-form or
    16-node quadrature compensator) and predicts by thinning (:meth:`NeuralTPP.predict_next`,
    ``max(num_samples, 16)`` draws; ``key`` required).

    Args:
        dynamics: a :class:`JumpDiffusion` (``NJDTPP``, ``HawkesSDE``, ...), a classical
            model with ``jump_diffusion()`` (``Poisson``, ``Hawkes``, ``SharedDecayHawkes``,
            ``SelfCorrecting``) or a neural TPP (``RMTPP``, ``NHP``, ``THP``, ``SAHP``, ``IFTPP``).
        batch: ``B`` test sequences.
        key: PRNG key for the Brownian paths of the NLL, or ``None`` (drift only).
        horizon: prediction horizon (time unit, > 0), e.g. a few mean gaps.
        num_substeps: Euler steps per gap (ignored by the exact flow).
        num_samples: Brownian paths averaged for the NLL (with a ``key``).
        num_grid: steps of the prediction grid over ``horizon``.
        chunk_size: a neural TPP's thinning draws, ``chunk_size`` (sequence, position) pairs at a time
            (memory; see :meth:`NeuralTPP.sample_next`); ``None``: all at once. Ignored by the others.

    Returns:
        An :class:`EvaluationResult` ``(nll, rmse, accuracy, ks)`` of scalars.

    Raises:
        TypeError: ``dynamics`` is neither a JumpDiffusion nor a classical model; bad key.
        ValueError: non-positive ``horizon``, ``num_substeps``, ``num_samples``, ``num_grid`` or ``chunk_size``;
            the batch's number of marks differs from the model's.

    References:
        Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024, Sec. 5
        (NLL, RMSE, accuracy); Brown et al., Neural Computation 14(2), 2002 (KS).

    Examples:
        >>> from jaxcore.tpp import EventBatch, Poisson, evaluate
        >>> batch = EventBatch.from_sequences([[0.5, 1.0, 2.0]], T=3.0)
        >>> r = evaluate(Poisson(1.0), batch, horizon=5.0)
        >>> round(float(r.nll), 4), float(r.accuracy)
        (1.0, 1.0)
    """
    from .neural import NeuralTPP

    if isinstance(dynamics, NeuralTPP):
        return _evaluate_neural(dynamics, batch, key, horizon, num_samples, chunk_size)
    if not isinstance(dynamics, JumpDiffusion):
        if not hasattr(dynamics, "jump_diffusion"):
            raise TypeError(expected("dynamics", "a jaxcore.tpp.JumpDiffusion or a classical model with "
                                                 "jump_diffusion()", type(dynamics).__name__, raw=True))
        dynamics = dynamics.jump_diffusion()
    if key is not None:
        check_key(key)
    if is_concrete(horizon):
        check_scalar(horizon, "horizon", positive=True)
    n = check_int(num_substeps, "num_substeps", minimum=1)
    S = check_int(num_samples, "num_samples", minimum=1)
    G = check_int(num_grid, "num_grid", minimum=1)
    method = "exact" if dynamics.has_flow() else "scan"
    _solve_args(dynamics, batch, None, method, n)  # validates dynamics against batch
    # strong dtypes: a weakly typed parameter (e.g. a model of Python floats) would recompile
    dynamics = jax.tree.map(lambda x: jnp.asarray(x, x.dtype) if eqx.is_array(x) else x, dynamics)
    return _evaluate_run(dynamics, batch, key, jnp.asarray(horizon, batch.times.dtype), n, S, method, G)


def _evaluate_impl(dyn, batch, key, horizon, num_substeps, num_samples, method, num_grid):
    args = _solve_args(dyn, batch, None, method, num_substeps)
    if key is None:
        lls = _solve_batch(*args).log_likelihood
    else:
        def one(k):
            return _solve_batch(args[0], batch, k, *args[3:]).log_likelihood

        lls = jnp.mean(jax.vmap(one)(jax.random.split(key, num_samples)), 0)
    pred = _predict_next_impl(args, horizon, num_grid)
    rmse, acc = _prediction_scores_impl(pred, batch)
    ks = _time_rescaling_impl(args)
    return EvaluationResult(_nll_per_event(lls, batch.num_events), rmse, acc, ks)


_evaluate_run = eqx.filter_jit(_evaluate_impl)


def _evaluate_neural(model, batch, key, horizon, num_samples, chunk_size=None):
    """:func:`evaluate` for a neural TPP: its likelihood, thinning predictions and rescaled gaps."""
    if key is None:
        raise ValueError(expected("key", "a PRNG key for a neural TPP (its predictions sample by thinning)",
                                  "None", raw=True))
    check_key(key)
    check_batch(batch)
    check_marks(batch, model.num_marks)
    check_scalar(horizon, "horizon", positive=True)
    S = max(check_int(num_samples, "num_samples", minimum=1), 16)
    from .neural import _chunk

    return _evaluate_neural_run(model._checked(), batch, key, jnp.asarray(horizon, batch.times.dtype), S,
                                _chunk(chunk_size))


@eqx.filter_jit
def _evaluate_neural_run(model, batch, key, horizon, S, chunk=None):
    from .neural import _loglik_batch, _sample_batch

    parts = _loglik_batch(model, batch, 16)
    over = jnp.asarray(1.5, batch.times.dtype)
    s = _sample_batch(model, key, batch, horizon, S, 64, 32, over, chunk)
    probs = jnp.mean(s.type_probs, axis=2)
    valid = batch.mask & jnp.concatenate([batch.mask[:, 1:], jnp.zeros((batch.num_sequences, 1), bool)], 1)
    pred = NextEventPrediction(jnp.mean(s.time, axis=2), jnp.argmax(probs, -1).astype(jnp.int32), probs, valid)
    rmse, acc = _prediction_scores_impl(pred, batch)
    ks = _ks_impl(parts.interval_compensator, batch.mask)
    return EvaluationResult(_nll_per_event(parts.log_likelihood, batch.num_events), rmse, acc, ks)
