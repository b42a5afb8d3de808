"""The interface of the neural temporal point processes (RMTPP, NHP, THP, SAHP, IFTPP, AttNHP).

A neural TPP summarises the history before event ``i`` in a state ``s_i`` (``s_0``: no event
yet) and gives, on the interval ``(t_{i-1}, t_i]`` (``t_{-1} = 0``), the log-intensity
``log lambda_k(t_{i-1} + dt | s_i)`` of each of the ``K`` types. The log-likelihood of a
sequence on ``[0, T]`` is::

    log L = sum_i log lambda_{m_i}(t_i) - sum_i int_{t_{i-1}}^{t_i} sum_k lambda_k ds - int_{t_L}^T sum_k lambda_k ds

with each interval's compensator in closed form where the model has one (RMTPP, IFTPP) and by
``num_quadrature``-point Gauss-Legendre quadrature otherwise. Every model in this family is an
equinox module with the same methods: :meth:`NeuralTPP.log_likelihood`, :meth:`NeuralTPP.intensity`,
:meth:`NeuralTPP.sample_next` (Ogata thinning, vmapped over sequences and positions) and
:meth:`NeuralTPP.predict_next`; :func:`jaxcore.tpp.train` fits them like the NJDTPP.

References:
    S. Zhang et al., "Neural Jump-Diffusion Temporal Point Processes", ICML 2024, Sec. 5 (the
    baselines); S. Xue et al., "EasyTPP: Towards Open Benchmarking Temporal Point Processes",
    ICLR 2024 (the catalogue and its thinning sampler); Y. Ogata, "On Lewis' simulation method
    for point processes", IEEE Trans. Inf. Theory 27(1), 1981.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxcore._util import check_choice, check_int, check_key, check_positive, check_scalar, expected

from ._checks import check_query_times
from .base import AbstractTPP, EvaluationTerms, GeneratedEvents, NextEventPrediction, NextEventSamples
from .events import EventBatch, check_batch, check_marks


Quadrature = Literal["gauss-legendre", "trapezoid"]
QUADRATURES = ("gauss-legendre", "trapezoid")


class NeuralLikelihood(NamedTuple):
    """Output of :meth:`NeuralTPP.log_likelihood_parts` for ``B`` sequences of padded length ``L``.

    Attributes:
        log_likelihood: ``[B]`` nats.
        log_intensity: ``[B]`` ``sum_i log lambda_{m_i}(t_i)``.
        compensator: ``[B]`` integral of the total intensity over ``[0, T]``.
        interval_compensator: ``[B, L]`` the integral from the previous event to event ``i``
            (0 at padding): the time-rescaled gaps.

    Examples:
        >>> from jaxcore.tpp import NeuralLikelihood
        >>> NeuralLikelihood._fields
        ('log_likelihood', 'log_intensity', 'compensator', 'interval_compensator')
    """

    log_likelihood: Array
    log_intensity: Array
    compensator: Array
    interval_compensator: Array


class NeuralTPP(AbstractTPP):
    """Abstract neural TPP: a history encoder plus an interval log-intensity.

    Subclasses implement the abstract ``states`` (``[L + 1, D]`` history states of one sequence; row
    ``i`` summarises the events before ``i``), ``log_intensity(state, dt) -> [K]`` and ``num_marks``;
    those with a closed-form interval compensator (RMTPP, IFTPP) set ``closed_compensator = True`` and
    provide ``compensator(state, dt) -> scalar`` (``int_0^dt sum_k lambda_k ds``), the others are
    integrated by quadrature. The :class:`AbstractTPP` interface is implemented here once for every
    neural TPP (final methods).

    References:
        Zhang et al., ICML 2024, Sec. 5; Xue et al., ICLR 2024 (EasyTPP).

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import RMTPP, EventBatch, NeuralTPP
        >>> model = RMTPP(1, key=jax.random.key(0), hidden=4)
        >>> batch = EventBatch.from_sequences([[0.5, 1.0]], T=2.0)
        >>> isinstance(model, NeuralTPP), model.intensity(batch, jax.numpy.array([[0.2, 1.5]])).shape
        (True, (1, 2, 1))
    """

    closed_compensator: ClassVar[bool] = False

    @abc.abstractmethod
    def states(self, times: Float[Array, " L"], marks: Int[Array, " L"], mask: Any) -> Float[Array, "L1 D"]:
        """``[L + 1, D]`` history states (row ``i``: events ``0..i-1``) of one padded sequence."""

    @abc.abstractmethod
    def log_intensity(self, state: Float[Array, " D"], dt: Float[Array, ""]) -> Float[Array, " K"]:
        """``log lambda_k`` at ``dt`` after the previous event (or 0), ``[K]``."""

    def _checked(self) -> NeuralTPP:
        return self

    # ------------------------------------------------------------------ public interface

    def log_likelihood(self, batch: EventBatch, *, num_quadrature: int = 16,
                       quadrature: Quadrature = "gauss-legendre") -> Float[Array, " batch"]:
        """``[B]`` log-likelihoods (nats) of the sequences on ``[0, T]``.

        Args:
            batch: ``B`` padded sequences with this model's number of types.
            num_quadrature: nodes per interval for the compensator (models without a closed form).
            quadrature: the rule on each interval ``[0, dt]``: ``"gauss-legendre"`` (default;
                exact for polynomials of degree ``2 num_quadrature - 1``) or ``"trapezoid"``
                (``num_quadrature >= 2`` equally spaced nodes including both ends: EasyTPP's rule
                with ``use_mc_samples: False``, for likelihoods comparable node for node).

        Returns:
            ``[B]`` nats.

        Raises:
            TypeError: ``batch`` is not an EventBatch.
            ValueError: the batch's number of marks differs, an unknown ``quadrature``, or
                ``num_quadrature`` below 1 (below 2 for ``"trapezoid"``).
        """
        return self.log_likelihood_parts(batch, num_quadrature=num_quadrature,
                                         quadrature=quadrature).log_likelihood

    def log_likelihood_parts(self, batch: EventBatch, *, num_quadrature: int = 16,
                             quadrature: Quadrature = "gauss-legendre") -> NeuralLikelihood:
        """The log-likelihood with its parts (:class:`NeuralLikelihood`); arguments as :meth:`log_likelihood`."""
        check_batch(batch)
        check_marks(batch, self.num_marks)
        rule = check_choice(quadrature, "quadrature", QUADRATURES)
        g = check_int(num_quadrature, "num_quadrature", minimum=2 if rule == "trapezoid" else 1)
        return log_likelihood_program(self._checked(), batch, g, rule)

    def intensity(self, batch: EventBatch, t: Float[Array, "batch query"]) -> Float[Array, "batch query K"]:
        """``lambda_k(t)`` given the events strictly before ``t``, at query times ``t`` ``[B, Q]``; ``[B, Q, K]``.

        Raises:
            TypeError: ``batch`` is not an EventBatch.
            ValueError: ``t`` is not ``[B, Q]`` with finite non-negative values.
        """
        check_batch(batch)
        t = check_query_times(t, batch.num_sequences)
        return _intensity_batch(self._checked(), batch, t.astype(batch.times.dtype))

    def sample_next(self, key: PRNGKeyArray, batch: EventBatch, *, horizon: float, num_samples: int = 16,
                    num_proposals: int = 64, num_grid: int = 32, over_sample: float = 1.5,
                    chunk_size: int | None = None) -> NextEventSamples:
        """Sample the next event after every history prefix by Ogata thinning, vmapped over sequences.

        For position ``i`` (history: events ``0..i``) the proposals are a Poisson process of
        rate ``lambda* = over_sample * max_grid sum_k lambda_k`` on ``(t_i, t_i + horizon]``
        (the maximum over ``num_grid`` points, as EasyTPP's sampler); the first proposal ``s``
        with ``u lambda* <= sum_k lambda_k(s)`` is the next time, its type drawn with
        probabilities ``lambda_k(s) / sum_k lambda_k(s)``; with no acceptance the time is
        ``t_i + horizon`` (censored, ``accepted`` False).

        Args:
            key: PRNG key.
            batch: ``B`` sequences.
            horizon: positive look-ahead (same unit as the batch).
            num_samples: draws per position.
            num_proposals: proposals per draw.
            num_grid: grid points for the intensity bound.
            over_sample: factor (>= 1) on the grid maximum.
            chunk_size: ``None`` (default) draws at every position of every sequence at once;
                ``c >= 1`` draws for ``c`` (sequence, position) pairs at a time (``lax.map``), so the
                memory holds ``c num_samples (num_grid + num_proposals)`` intensity evaluations instead
                of ``B L`` times as many (the same draws for the same key).

        Returns:
            :class:`NextEventSamples` of ``[B, L, num_samples]`` arrays.

        Raises:
            TypeError: ``key`` is not a PRNG key, ``batch`` not an EventBatch.
            ValueError: non-positive sizes, ``horizon``, ``chunk_size`` or ``over_sample < 1``.

        References:
            Ogata, IEEE Trans. Inf. Theory 27(1), 1981; Xue et al., ICLR 2024 (EasyTPP's thinning).
        """
        check_key(key)
        check_batch(batch)
        check_marks(batch, self.num_marks)
        check_positive(horizon, "horizon")
        S = check_int(num_samples, "num_samples", minimum=1)
        P = check_int(num_proposals, "num_proposals", minimum=1)
        G = check_int(num_grid, "num_grid", minimum=2)
        over = float(over_sample)
        if not np.isfinite(over) or over < 1.0:
            raise ValueError(expected("over_sample", "a finite number >= 1", over_sample))
        return _sample_batch(self._checked(), key, batch, jnp.asarray(horizon, batch.times.dtype), S, P, G,
                             jnp.asarray(over, batch.times.dtype), _chunk(chunk_size))

    def generate(self, key: PRNGKeyArray, batch: EventBatch, *, num_events: int, horizon: float,
                 num_proposals: int = 64, num_grid: int = 32, over_sample: float = 1.5) -> GeneratedEvents:
        """Multi-step generation: ``num_events`` events after each sequence's history, one thinning draw
        (:meth:`sample_next`) at a time, each drawn event appended to the history before the next draw
        (the state recomputed over the padded, extended sequence), vmapped over sequences.

        A draw with no accepted proposal within ``horizon`` ends that sequence's generation
        (``accepted`` False from there on).

        Args:
            key: PRNG key.
            batch: ``B`` histories.
            num_events: events to generate per sequence.
            horizon, num_proposals, num_grid, over_sample: as :meth:`sample_next`.

        Returns:
            :class:`GeneratedEvents` of ``[B, num_events]`` arrays.

        Raises:
            As :meth:`sample_next`; ``num_events < 1``.
        """
        check_key(key)
        check_batch(batch)
        check_marks(batch, self.num_marks)
        check_positive(horizon, "horizon")
        n = check_int(num_events, "num_events", minimum=1)
        P = check_int(num_proposals, "num_proposals", minimum=1)
        G = check_int(num_grid, "num_grid", minimum=2)
        over = float(over_sample)
        if not np.isfinite(over) or over < 1.0:
            raise ValueError(expected("over_sample", "a finite number >= 1", over_sample))
        return _generate_batch(self._checked(), key, batch, jnp.asarray(horizon, batch.times.dtype), n, P, G,
                               jnp.asarray(over, batch.times.dtype))

    def predict_next(self, key: PRNGKeyArray, batch: EventBatch, *, horizon: float, num_samples: int = 16,
                     **kwargs: Any) -> NextEventPrediction:
        """Next-event prediction from :meth:`sample_next`: the mean sampled time, the type probabilities
        averaged over the draws (``lambda_k / sum lambda`` at each sampled time) and their argmax.

        Returns:
            A :class:`jaxcore.tpp.NextEventPrediction` of ``[B, L]`` (``type_probs`` ``[B, L, K]``).

        Raises:
            As :meth:`sample_next`.
        """
        s = self.sample_next(key, batch, horizon=horizon, num_samples=num_samples, **kwargs)
        return _prediction(s, batch)


    def evaluation_terms(self, key: PRNGKeyArray | None, batch: EventBatch, *, horizon: float,
                         num_substeps: int = 10, num_samples: int = 1, num_grid: int = 256,
                         chunk_size: int | None = None) -> EvaluationTerms:
        """What :func:`jaxcore.tpp.evaluate` scores, in one compiled program: the likelihood (closed-form or
        16-node Gauss-Legendre compensator), the thinning prediction (:meth:`predict_next` from
        ``max(num_samples, 16)`` draws, 64 proposals, a 32-point bound at 1.5x; ``chunk_size`` as
        :meth:`sample_next`) and the rescaled gaps. ``num_substeps`` and ``num_grid`` are unused.

        Raises:
            ValueError: ``key`` is None (the prediction samples); non-positive ``horizon``, ``num_samples``
                or ``chunk_size``; the batch's number of marks differs from the model's.
            TypeError: ``key`` is not a PRNG key; ``batch`` not an EventBatch.
        """
        if key is None:
            raise ValueError(expected("key", "a PRNG key for a neural TPP (its predictions sample by thinning)",
                                      "None", raw=True))
        check_key(key)
        check_batch(batch)
        check_marks(batch, self.num_marks)
        check_scalar(horizon, "horizon", positive=True)
        S = max(check_int(num_samples, "num_samples", minimum=1), 16)
        return _evaluation_terms(self._checked(), batch, key, jnp.asarray(horizon, batch.times.dtype), S,
                                 _chunk(chunk_size))


@eqx.filter_jit
def _evaluation_terms(model, batch, key, horizon, S, chunk=None):
    parts = log_likelihood_program(model, batch, 16)
    over = jnp.asarray(1.5, batch.times.dtype)
    s = _sample_batch(model, key, batch, horizon, S, 64, 32, over, chunk)
    return EvaluationTerms(parts.log_likelihood, _prediction(s, batch), parts.interval_compensator)


def _prediction(s: NextEventSamples, batch: EventBatch) -> NextEventPrediction:
    """The mean sampled time, the type probabilities averaged over the draws and their argmax."""
    probs = jnp.mean(s.type_probs, axis=2)
    valid = batch.mask & jnp.concatenate([batch.mask[:, 1:], jnp.zeros((batch.num_sequences, 1), bool)], 1)
    return NextEventPrediction(jnp.mean(s.time, axis=2), jnp.argmax(probs, -1).astype(jnp.int32), probs, valid)


def log_softplus(x: Array) -> Array:
    """``log softplus(x)``, finite for every finite ``x`` (``~ x`` below -15, where softplus underflows)."""
    low = x < -15.0
    return jnp.where(low, x, jnp.log(jax.nn.softplus(jnp.where(low, 0.0, x))))


def _quadrature(g: int, dtype, rule: str = "gauss-legendre") -> tuple[Array, Array]:
    """Nodes in ``[0, 1]`` and weights (summing to 1) of the ``g``-point rule."""
    if rule == "trapezoid":
        w = np.full(g, 1.0 / (g - 1))
        w[[0, -1]] *= 0.5
        return jnp.asarray(np.linspace(0.0, 1.0, g), dtype), jnp.asarray(w, dtype)
    x, w = np.polynomial.legendre.leggauss(g)
    return jnp.asarray((x + 1) / 2, dtype), jnp.asarray(w / 2, dtype)


def _compensators(model: NeuralTPP, S, dt, g, rule="gauss-legendre"):
    """``dt_i * sum_j w_j sum_k lambda_k(S_i, x_j dt_i)`` for every row ``i`` of ``S`` ``[N, D]``.

    A scan over the ``g`` quadrature nodes with a rematerialised body: vmapping over the nodes would hold
    ``[N, g, hidden]`` activations for the backward pass, and on CPU moving those through memory costs more
    than recomputing one node's ``[N, hidden]`` activations in the backward pass.
    """
    x, w = _quadrature(g, dt.dtype, rule)

    @jax.checkpoint
    def node(acc, xw):
        xi, wi = xw
        lam = jax.vmap(lambda s, d: jnp.sum(jnp.exp(model.log_intensity(s, xi * d))))(S, dt)
        return acc + wi * lam, None

    acc, _ = jax.lax.scan(node, jnp.zeros_like(dt), (x, w))
    return dt * acc


def _loglik_one(model, times, marks, mask, T, g, rule="gauss-legendre"):
    L = times.shape[0]
    S = model.states(times, marks, mask)
    prev = jnp.concatenate([jnp.zeros((1,), times.dtype), times[:-1]])
    dt = jnp.where(mask, times - prev, 0.0)
    logs = jax.vmap(model.log_intensity)(S[:L], dt)
    log_term = jnp.where(mask, jnp.take_along_axis(logs, marks[:, None], 1)[:, 0], 0.0)
    n = jnp.sum(mask)
    last = jnp.where(n > 0, times[jnp.maximum(n - 1, 0)], 0.0)
    # Every interval's compensator at once, the open final interval (last event, T] as row L.
    S_all = jnp.concatenate([S[:L], S[n][None]], axis=0)
    dt_all = jnp.concatenate([dt, (T - last)[None]])
    if model.closed_compensator:
        comp_all = jax.vmap(model.compensator)(S_all, dt_all)
    else:
        comp_all = _compensators(model, S_all, dt_all, g, rule)
    comp_i = jnp.where(mask, comp_all[:L], 0.0)
    comp = jnp.sum(comp_i) + comp_all[L]
    lt = jnp.sum(log_term)
    return NeuralLikelihood(lt - comp, lt, comp, comp_i)


@eqx.filter_jit
def log_likelihood_program(model, batch, g, rule="gauss-legendre"):
    """The batched log-likelihood, one program per model structure, shapes, ``g`` and rule."""
    return jax.vmap(lambda t, m, k, T: _loglik_one(model, t, m, k, T, g, rule))(batch.times, batch.marks,
                                                                                batch.mask, batch.T)


def _intensity_one(model, times, marks, mask, q):
    S = model.states(times, marks, mask)
    before = mask[None, :] & (times[None, :] < q[:, None])
    i = jnp.sum(before, axis=1)
    last = jnp.where(i > 0, times[jnp.maximum(i - 1, 0)], 0.0)
    return jax.vmap(lambda s, d: jnp.exp(model.log_intensity(s, d)))(S[i], q - last)


@eqx.filter_jit
def _intensity_batch(model, batch, t):
    return jax.vmap(lambda tt, m, k, q: _intensity_one(model, tt, m, k, q))(batch.times, batch.marks, batch.mask, t)


def _thin_one(model, key, state, t0, horizon, P, G, over):
    """One thinning draw after ``t0`` from ``state``: ``(time, type, type_probs, accepted)``."""
    grid = jnp.linspace(0.0, 1.0, G, dtype=t0.dtype) * horizon
    bound = over * jnp.max(jax.vmap(lambda d: jnp.sum(jnp.exp(model.log_intensity(state, d))))(grid))
    bound = jnp.maximum(bound, jnp.finfo(t0.dtype).tiny)
    k_e, k_u, k_m = jax.random.split(key, 3)
    dts = jnp.cumsum(jax.random.exponential(k_e, (P,), t0.dtype)) / bound
    lam = jax.vmap(lambda d: jnp.exp(model.log_intensity(state, d)))(dts)  # [P, K]
    tot = jnp.sum(lam, -1)
    u = jax.random.uniform(k_u, (P,), t0.dtype)
    ok = (u * bound <= tot) & (dts <= horizon)
    j = jnp.argmax(ok)
    accepted = jnp.any(ok)
    dt = jnp.where(accepted, dts[j], horizon)
    probs = lam[j] / jnp.maximum(tot[j], jnp.finfo(t0.dtype).tiny)
    probs = jnp.where(accepted, probs, jnp.exp(model.log_intensity(state, horizon)) /
                      jnp.sum(jnp.exp(model.log_intensity(state, horizon))))
    typ = jax.random.categorical(k_m, jnp.log(jnp.maximum(probs, jnp.finfo(t0.dtype).tiny)))
    return t0 + dt, typ.astype(jnp.int32), probs, accepted


def _sample_one(model, key, times, marks, mask, horizon, S_, P, G, over):
    L = times.shape[0]
    S = model.states(times, marks, mask)
    keys = jax.random.split(key, (L, S_))
    t0 = jnp.where(mask, times, 0.0)
    draw = jax.vmap(jax.vmap(lambda k, s, t: _thin_one(model, k, s, t, horizon, P, G, over),
                             in_axes=(0, None, None)), in_axes=(0, 0, 0))
    return draw(keys, S[1:], t0)


@eqx.filter_jit
def _sample_batch(model, key, batch, horizon, S_, P, G, over, chunk=None):
    keys = jax.random.split(key, batch.num_sequences)
    B, L = batch.times.shape
    if chunk is None or chunk >= B * L:
        out = jax.vmap(lambda k, t, m, msk: _sample_one(model, k, t, m, msk, horizon, S_, P, G, over))(
            keys, batch.times, batch.marks, batch.mask)
        return NextEventSamples(*out)
    # the same draws, ``chunk`` (sequence, position) pairs at a time: the states of every sequence, then
    # lax.map over the flattened positions, each chunk's thinning vmapped over its positions and samples
    states = jax.vmap(model.states)(batch.times, batch.marks, batch.mask)[:, 1:]
    pos_keys = jax.vmap(lambda k: jax.random.split(k, (L, S_)))(keys)
    t0 = jnp.where(batch.mask, batch.times, 0.0)
    per_position = jax.vmap(lambda k, s, t: _thin_one(model, k, s, t, horizon, P, G, over), in_axes=(0, None, None))
    flat = [a.reshape((B * L,) + a.shape[2:]) for a in (pos_keys, states, t0)]
    out = jax.lax.map(lambda a: per_position(*a), tuple(flat), batch_size=chunk)
    return NextEventSamples(*(o.reshape((B, L) + o.shape[1:]) for o in out))


def _generate_one(model, key, times, marks, mask, horizon, n_new, P, G, over):
    T_ = jnp.concatenate([times, jnp.zeros((n_new,), times.dtype)])
    M_ = jnp.concatenate([marks, jnp.zeros((n_new,), marks.dtype)])
    K_ = jnp.concatenate([mask, jnp.zeros((n_new,), bool)])

    def step(carry, k):
        T_, M_, K_, n, alive = carry
        S = model.states(T_, M_, K_)
        t_last = jnp.where(n > 0, T_[jnp.maximum(n - 1, 0)], 0.0)
        t, m, _, acc = _thin_one(model, k, S[n], t_last, horizon, P, G, over)
        acc = acc & alive
        T_ = T_.at[n].set(jnp.where(acc, t, T_[n]))
        M_ = M_.at[n].set(jnp.where(acc, m, M_[n]).astype(M_.dtype))
        K_ = K_.at[n].set(acc)
        return (T_, M_, K_, n + acc.astype(n.dtype), acc), (t, m, acc)

    n0 = jnp.sum(mask).astype(jnp.int32)
    _, out = jax.lax.scan(step, (T_, M_, K_, n0, jnp.ones((), bool)), jax.random.split(key, n_new))
    return out


@eqx.filter_jit
def _generate_batch(model, key, batch, horizon, n_new, P, G, over):
    keys = jax.random.split(key, batch.num_sequences)
    out = jax.vmap(lambda k, t, m, msk: _generate_one(model, k, t, m, msk, horizon, n_new, P, G, over))(
        keys, batch.times, batch.marks, batch.mask)
    return GeneratedEvents(*out)


def _chunk(chunk_size: int | None) -> int | None:
    return None if chunk_size is None else check_int(chunk_size, "chunk_size", minimum=1)
