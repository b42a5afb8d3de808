"""Training FALCON: student + EMA teacher, the kNN graph, and M re-solved every few steps.

One training run alternates two things (Gadetsky et al., ICML 2024, Alg. 1):

1. ``solve_every`` optimizer steps in one compiled ``lax.scan`` (:func:`_train_chunk`): each step draws
   a minibatch with replacement and one random kNN neighbour per sample, evaluates the EMA teacher on
   both, takes an Adam(W) step on :func:`falcon_loss`, updates the teacher
   ``theta_T <- d theta_T + (1 - d) theta`` with ``d = min(ema_decay, (1 + t) / (10 + t))`` and adds the
   teacher's probabilities to the cost of M (:func:`assignment_cost`);
2. on the host, M is re-solved exactly from that cost (:func:`solve_assignment`).

The pseudo-labels' soft weight ``tau`` follows a half cosine from 1 to 0 over ``soft_label_steps``
and is 0 afterwards; the balance weight ``beta`` of the assignment is switched off after
``balance_steps`` (by default the same number of steps, as in the reference code). The first M is
solved from a random cost (the reference's ``softmax(randn)``, divided by F to be in the units of the
training costs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxcore._util import (
    Progress,
    as_float_array,
    check_finite,
    check_int,
    check_key,
    check_ndim,
    check_progress,
    check_scalar,
    expected,
)
from jaxcore._util.minibatch import minibatch_draw

from .assignment import solve_assignment
from .knn import knn_graph
from .losses import falcon_loss
from .model import FalconMLP

__all__ = ["CoarseFitResult", "FitResult", "embed", "fit", "fit_coarse", "predict"]


class FitResult(NamedTuple):
    """The outcome of :func:`fit`.

    Attributes:
        model: the student :class:`FalconMLP` after training.
        teacher: its EMA teacher (use it for predictions, as the reference code does).
        assignment: ``[F, C]`` the last fine-to-coarse assignment M (0/1).
        fine_to_coarse: ``[F]`` int32 coarse class of each fine class.
        neighbors: ``[N, K]`` int32, the kNN graph used.
        history: per-step ``[num_steps]`` arrays ``total``, ``coarse``, ``fine``, ``consistency``,
            ``entropy_gap`` (nats) and ``tau``.
    """

    model: FalconMLP
    teacher: FalconMLP
    assignment: Float[Array, "F C"]
    fine_to_coarse: Int[Array, " F"]
    neighbors: Int[Array, "N K"]
    history: dict[str, Float[Array, " S"]]


class CoarseFitResult(NamedTuple):
    """The outcome of :func:`fit_coarse`: the model and its per-step cross-entropy ``history`` (nats)."""

    model: FalconMLP
    history: Float[Array, " S"]


def _tau(t, soft_steps):
    frac = jnp.clip(t / jnp.maximum(soft_steps, 1.0), 0.0, 1.0)
    return jnp.where(t < soft_steps, 0.5 * (1.0 + jnp.cos(jnp.pi * frac)), 0.0)


@eqx.filter_jit
def _train_chunk(params, teacher, static, opt_state, x, y, nbrs, assignment, key, step0, stop, hp, length, batch_size,
                 num_coarse):
    lr, wd, ema_decay, temperature, soft_steps, w0, w1, w2 = hp
    opt = optax.adamw(lr, weight_decay=wd)
    n = x.shape[0]
    k_nbr = nbrs.shape[1]

    def step(carry, inp):
        p, tp, s, cost = carry
        t, k = inp
        ki, kn = jax.random.split(k)
        idx = minibatch_draw(ki, n, batch_size)
        nb = nbrs[idx, jax.random.randint(kn, (batch_size,), 0, k_nbr)]
        xb, yb = x[idx], y[idx]
        tmodel = eqx.combine(tp, static)
        t_logits = jax.vmap(tmodel)(xb)
        t_nbr = jax.nn.log_softmax(jax.vmap(tmodel)(x[nb]), axis=-1)[:, None, :]
        tau = _tau(t.astype(x.dtype), soft_steps)

        def loss(pp):
            logits = jax.vmap(eqx.combine(pp, static))(xb)
            terms = falcon_loss(logits, t_logits, t_nbr, yb, assignment, tau=tau, temperature=temperature,
                                weights=(w0, w1, w2))
            return terms.total, terms

        (_, terms), g = jax.value_and_grad(loss, has_aux=True)(p)
        upd, s_new = opt.update(g, s, p)
        p_new = optax.apply_updates(p, upd)
        tf = (t + 1).astype(x.dtype)
        d = jnp.minimum(ema_decay, (1.0 + tf) / (10.0 + tf))
        tp_new = jax.tree_util.tree_map(lambda a, b: d * a + (1.0 - d) * b, tp, p_new)
        cost_new = cost + jax.nn.softmax(t_logits, axis=-1).T @ jax.nn.one_hot(yb, num_coarse, dtype=x.dtype)
        # Steps past `stop` (the tail of the last chunk) leave everything unchanged: one program for all chunks.
        new = jax.tree_util.tree_map(lambda a, b: jnp.where(t < stop, a, b), (p_new, tp_new, s_new, cost_new),
                                     (p, tp, s, cost))
        return new, terms._asdict() | {"tau": tau}

    f = assignment.shape[0]
    cost0 = jnp.zeros((f, num_coarse), x.dtype)
    keys = jax.random.split(key, length)
    (params, teacher, opt_state, cost), hist = jax.lax.scan(
        step, (params, teacher, opt_state, cost0), (step0 + jnp.arange(length), keys))
    used = jnp.clip(stop - step0, 1, length)
    return params, teacher, opt_state, cost / (used * batch_size), hist


def _check_data(features, coarse_labels):
    check_ndim(features, "features", 2, "a [N, D] array")
    x = as_float_array(features, "features")
    check_finite(x, "features")
    check_ndim(coarse_labels, "coarse_labels", 1, "a [N] int array")
    y = np.asarray(coarse_labels)
    if y.dtype.kind not in "iu":
        raise TypeError(expected("coarse_labels", "an int array", f"dtype {y.dtype}", raw=True))
    if y.shape[0] != x.shape[0]:
        raise ValueError(expected("coarse_labels", f"length {x.shape[0]} (the rows of features)",
                                  f"length {y.shape[0]}", raw=True))
    if y.size == 0 or y.min() < 0:
        raise ValueError(expected("coarse_labels", "non-empty labels >= 0", y))
    return x, y


def fit(
    key: PRNGKeyArray,
    features: Float[Array, "N D"],
    coarse_labels: Int[Array, " N"],
    num_fine: int,
    *,
    num_coarse: int | None = None,
    model: FalconMLP | None = None,
    width: int = 64,
    depth: int = 4,
    num_steps: int = 1000,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    weight_decay: float = 0.0,
    num_neighbors: int = 20,
    neighbors: Int[Array, "N K"] | None = None,
    weights: tuple[float, float, float] = (0.5, 0.5, 0.5),
    temperature: float = 0.9,
    ema_decay: float = 0.99,
    beta: float = 0.005,
    solve_every: int = 30,
    soft_label_steps: int | None = None,
    balance_steps: int | None = None,
    assignment: Float[Array, "F C"] | None = None,
    progress: bool | Callable = False,
) -> FitResult:
    """Discover ``num_fine`` fine classes from coarse labels alone (FALCON), with M learned jointly.

    Minimises :func:`falcon_loss` over the classifier while re-solving the fine-to-coarse assignment
    M exactly every ``solve_every`` steps (module docstring). No fine label is read.

    Args:
        key: PRNG key (initialisation, the first M, minibatches, neighbour draws).
        features: ``[N, D]`` real inputs (standardise them first).
        coarse_labels: ``[N]`` int coarse labels in ``[0, C)``.
        num_fine: F >= C, the number of fine classes to find.
        num_coarse: C (default ``max(coarse_labels) + 1``).
        model: an initial :class:`FalconMLP` with F outputs (default: a new one of ``width``/``depth``).
        num_steps: Adam steps (>= 1). batch_size: samples per step (drawn with replacement).
        learning_rate, weight_decay: AdamW's (> 0, >= 0).
        num_neighbors: K of the cosine kNN graph on ``features`` within each coarse class (ignored
            when ``neighbors`` is given; lowered, with a ``UserWarning``, to the smallest coarse class's
            size minus 1, stated in ``FitResult.neighbors.shape``).
        neighbors: optional ``[N, K]`` int neighbour indices (e.g. from :func:`knn_graph` on better features).
        weights: ``(w_coarse, w_fine, w_reg)`` of :func:`falcon_loss`. temperature: of the pseudo-labels.
        ema_decay: the teacher's decay in [0, 1). beta: the assignment's balance weight (>= 0).
        solve_every: steps between solves of M. soft_label_steps: length of the soft-label phase
            (default ``0.3 num_steps``). balance_steps: steps during which ``beta`` is applied
            (default: the soft-label phase, as the reference code; ``num_steps`` keeps it on).
        assignment: optional fixed ``[F, C]`` 0/1 M (a known hierarchy, or the oracle ablation): never
            re-solved.
        progress: False, True (a bar) or ``fn(step, metrics)`` (called after every solve).

    Returns:
        :class:`FitResult`.

    Raises:
        TypeError: ``key`` not a PRNG key, labels not ints, ``model`` not a :class:`FalconMLP`.
        ValueError: bad shapes or values (non-finite features, ``num_fine < C``, a neighbour index
            out of range, ...).
        ImportError: OR-Tools missing (``pip install "jaxcore[trees]"``).

    References:
        Gadetsky, Jiang, Salzmann, Brbic. "Discovering fine-grained classes from coarsely labeled
        data." ICML 2024. Defaults of the loss, teacher and solver from its reference code
        (weights 0.5, temperature 0.9, EMA 0.99, beta 0.005, a solve every 30 steps, K = 20).

    Examples:
        >>> import jax, numpy as np
        >>> from jaxcore.finegrained import cluster_accuracy, coarse_blobs, predict
        >>> x, fine, coarse, _ = coarse_blobs(jax.random.key(0), 40, [[0, 1], [2, 3]], 8)
        >>> r = fit(jax.random.key(1), x, coarse, 4, num_steps=150, num_neighbors=5,
        ...         width=16, depth=1)  # doctest: +SKIP
        >>> cluster_accuracy(fine, np.asarray(predict(r.teacher, x))) > 0.9  # doctest: +SKIP
        True
    """
    key = check_key(key)
    x, y = _check_data(features, coarse_labels)
    num_coarse = check_int(num_coarse, "num_coarse", minimum=1) if num_coarse is not None else int(y.max()) + 1
    if y.max() >= num_coarse:
        raise ValueError(expected("coarse_labels", f"labels in [0, {num_coarse})", int(y.max())))
    num_fine = check_int(num_fine, "num_fine", minimum=num_coarse)
    num_steps = check_int(num_steps, "num_steps", minimum=1)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    solve_every = check_int(solve_every, "solve_every", minimum=1)
    soft = int(0.3 * num_steps) if soft_label_steps is None else check_int(soft_label_steps, "soft_label_steps",
                                                                           minimum=0)
    balance = soft if balance_steps is None else check_int(balance_steps, "balance_steps", minimum=0)
    lr = check_scalar(learning_rate, "learning_rate", positive=True)
    wd = check_scalar(weight_decay, "weight_decay", nonnegative=True)
    decay = check_scalar(ema_decay, "ema_decay", low=0.0, high=1.0, high_open=True)
    temp = check_scalar(temperature, "temperature", positive=True)
    beta = check_scalar(beta, "beta", nonnegative=True)
    if not (isinstance(weights, (tuple, list)) and len(weights) == 3):
        raise TypeError(expected("weights", "a tuple (w_coarse, w_fine, w_reg)", weights))
    w = [check_scalar(v, "weights", nonnegative=True) for v in weights]
    progress = check_progress(progress)
    if assignment is not None:
        fixed_m = np.asarray(assignment)
        if fixed_m.shape != (num_fine, num_coarse) or not np.isin(fixed_m, (0, 1)).all() \
                or not np.all(fixed_m.sum(1) == 1) or not np.all(fixed_m.sum(0) >= 1):
            raise ValueError(expected("assignment", f"a [{num_fine}, {num_coarse}] 0/1 matrix with one 1 per row "
                                      "and every column non-empty", fixed_m))
    if neighbors is not None:
        check_ndim(neighbors, "neighbors", 2, "a [N, K] int array")
        nb = np.asarray(neighbors)
        if nb.dtype.kind not in "iu" or nb.shape[0] != x.shape[0] or nb.shape[1] < 1:
            raise ValueError(expected("neighbors", f"a [{x.shape[0]}, K] int array", f"{nb.dtype} {nb.shape}",
                                      raw=True))
        if nb.min() < 0 or nb.max() >= x.shape[0]:
            raise ValueError(expected("neighbors", f"indices in [0, {x.shape[0]})", nb))
    if model is not None and not isinstance(model, FalconMLP):
        raise TypeError(expected("model", "a FalconMLP", type(model).__name__, raw=True))
    k_init, k_m, k_train = jax.random.split(key, 3)
    if model is None:
        model = FalconMLP(x.shape[1], num_fine, width=width, depth=depth, key=k_init)
    elif model.in_size != x.shape[1] or model.num_classes != num_fine:
        raise ValueError(expected("model", f"a FalconMLP with in_size {x.shape[1]} and num_classes {num_fine}",
                                  f"in_size {model.in_size}, num_classes {model.num_classes}", raw=True))
    if neighbors is None:
        num_neighbors = check_int(num_neighbors, "num_neighbors", minimum=1)
        smallest = int(np.bincount(y)[np.bincount(y) > 0].min())
        if smallest < 2:
            raise ValueError(expected("coarse_labels", "at least 2 samples in every coarse class present (kNN graph)",
                                      f"a class with {smallest}", raw=True))
        if num_neighbors > smallest - 1:  # said, not silent: the graph has fewer neighbours than asked
            warnings.warn(f"num_neighbors: {num_neighbors} asked, but the smallest coarse class holds {smallest} "
                          f"samples; the kNN graph uses {smallest - 1} neighbours", stacklevel=2)
        nbrs = knn_graph(x, min(num_neighbors, smallest - 1), groups=y).indices
    else:
        nbrs = jnp.asarray(nb, jnp.int32)

    dt = x.dtype
    yj = jnp.asarray(y, jnp.int32)
    # The reference code's first M: a random cost softmax(randn) [F, C], here divided by F so that it is
    # in the units of the training costs (entries summing to 1), on which beta acts.
    if assignment is None:
        init_cost = jax.nn.softmax(jax.random.normal(k_m, (num_fine, num_coarse)), -1) / num_fine
        m0 = solve_assignment(np.asarray(init_cost), beta)
        fixed, ftc, assignment = False, m0.fine_to_coarse, m0.assignment.astype(dt)
    else:
        fixed, ftc, assignment = True, jnp.asarray(fixed_m.argmax(1), jnp.int32), jnp.asarray(fixed_m, dt)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    teacher = params
    opt_state = optax.adamw(lr, weight_decay=wd).init(params)
    hp = tuple(jnp.asarray(v, dt) for v in (lr, wd, decay, temp, soft, *w))
    prog = Progress(progress, num_steps, "finegrained.fit")
    hists, done, ci = [], 0, 0
    while done < num_steps:
        length = min(solve_every, num_steps - done)
        params, teacher, opt_state, cost, hist = _train_chunk(
            params, teacher, static, opt_state, x, yj, nbrs, assignment, jax.random.fold_in(k_train, ci),
            jnp.asarray(done, jnp.int32), jnp.asarray(num_steps, jnp.int32), hp, min(solve_every, num_steps),
            batch_size, num_coarse)
        done += length
        ci += 1
        hists.append({k: v[:length] for k, v in hist.items()})
        if done < num_steps and not fixed:
            sol = solve_assignment(np.asarray(cost, np.float64), beta if done < balance else 0.0)
            assignment, ftc = sol.assignment.astype(dt), sol.fine_to_coarse
        prog.report(done, {"loss": float(hist["total"][-1])})
    history = {k: jnp.concatenate([h[k] for h in hists]) for k in hists[0]}
    return FitResult(eqx.combine(params, static), eqx.combine(teacher, static), assignment, ftc, nbrs, history)


@eqx.filter_jit
def _predict(model, x):
    return jnp.argmax(jax.vmap(model)(x), axis=-1).astype(jnp.int32)


@eqx.filter_jit
def _embed(model, x):
    return jax.vmap(model.embed)(x)


def _check_model_input(model, features):
    if not isinstance(model, FalconMLP):
        raise TypeError(expected("model", "a FalconMLP", type(model).__name__, raw=True))
    check_ndim(features, "features", 2, "a [N, D] array")
    x = as_float_array(features, "features")
    if x.shape[1] != model.in_size:
        raise ValueError(expected("features", f"{model.in_size} columns (the model's in_size)", f"shape {x.shape}",
                                  raw=True))
    return x


def predict(model: FalconMLP, features: Float[Array, "N D"]) -> Int[Array, " N"]:
    """The predicted class of every row: ``argmax_f model(x_n)[f]`` (int32 ``[N]``).

    Args:
        model: a :class:`FalconMLP` (``FitResult.teacher`` for FALCON's predictions). features: ``[N, D]``.

    Returns:
        ``[N]`` int32 class indices.

    Raises:
        TypeError: ``model`` is not a :class:`FalconMLP`. ValueError: wrong feature width.

    Examples:
        >>> import jax
        >>> m = FalconMLP(3, 4, width=8, depth=1, key=jax.random.key(0))
        >>> predict(m, jax.numpy.ones((5, 3))).shape
        (5,)
    """
    return _predict(model, _check_model_input(model, features))


def embed(model: FalconMLP, features: Float[Array, "N D"]) -> Float[Array, "N H"]:
    """The model's features before its head, ``relu(MLP(x_n))``, ``[N, width]`` (k-means on a network's embedding).

    Args:
        model: a :class:`FalconMLP`. features: ``[N, D]`` with ``D = model.in_size``.

    Returns:
        ``[N, width]`` float embedding.

    Raises:
        TypeError: ``model`` is not a :class:`FalconMLP`. ValueError: wrong feature width.

    Examples:
        >>> import jax
        >>> m = FalconMLP(3, 4, width=8, depth=1, key=jax.random.key(0))
        >>> embed(m, jax.numpy.ones((5, 3))).shape
        (5, 8)
    """
    return _embed(model, _check_model_input(model, features))


@eqx.filter_jit
def _fit_coarse(params, static, x, y, key, lr, num_steps, batch_size):
    opt = optax.adam(lr)

    def step(carry, k):
        p, s = carry
        idx = minibatch_draw(k, x.shape[0], batch_size)

        def loss(pp):
            logits = jax.vmap(eqx.combine(pp, static))(x[idx])
            return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[idx][:, None], axis=1))

        val, g = jax.value_and_grad(loss)(p)
        upd, s = opt.update(g, s, p)
        return (optax.apply_updates(p, upd), s), val

    (params, _), hist = jax.lax.scan(step, (params, opt.init(params)), jax.random.split(key, num_steps))
    return params, hist


def fit_coarse(
    key: PRNGKeyArray,
    features: Float[Array, "N D"],
    coarse_labels: Int[Array, " N"],
    *,
    num_coarse: int | None = None,
    width: int = 64,
    depth: int = 4,
    num_steps: int = 1000,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
) -> CoarseFitResult:
    """A :class:`FalconMLP` trained with cross-entropy on the coarse labels (the paper's baseline network).

    Its :func:`embed` features, clustered by k-means, are the "coarse-supervised embeddings" baseline.

    Args:
        key: PRNG key. features: ``[N, D]``. coarse_labels: ``[N]`` int in ``[0, C)``.
        num_coarse: C (default ``max + 1``). width, depth: the network. num_steps, batch_size,
            learning_rate: Adam's.

    Returns:
        :class:`CoarseFitResult`.

    Raises:
        TypeError / ValueError: as :func:`fit`.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> r = fit_coarse(jax.random.key(0), jnp.eye(4), jnp.array([0, 0, 1, 1]), width=8, depth=1,
        ...                num_steps=50, batch_size=4, learning_rate=1e-2)
        >>> bool(r.history[-1] < r.history[0])
        True
    """
    key = check_key(key)
    x, y = _check_data(features, coarse_labels)
    num_coarse = check_int(num_coarse, "num_coarse", minimum=1) if num_coarse is not None else int(y.max()) + 1
    if y.max() >= num_coarse:
        raise ValueError(expected("coarse_labels", f"labels in [0, {num_coarse})", int(y.max())))
    num_steps = check_int(num_steps, "num_steps", minimum=1)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    lr = check_scalar(learning_rate, "learning_rate", positive=True)
    k1, k2 = jax.random.split(key)
    model = FalconMLP(x.shape[1], num_coarse, width=width, depth=depth, key=k1)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    params, hist = _fit_coarse(params, static, x, jnp.asarray(y, jnp.int32), k2, jnp.asarray(lr, x.dtype),
                               num_steps, batch_size)
    return CoarseFitResult(eqx.combine(params, static), hist)

