"""FALCON's loss terms, each a mean over a batch of logits (nats).

With student logits ``z [N, F]``, ``p = softmax(z)``, the assignment ``M [F, C]`` (0/1, one 1 per row)
and coarse labels ``y [N]``:

- coarse cross-entropy: ``-mean_n log sum_{f: M[f, y_n] = 1} p_n[f]``, a masked logsumexp of ``z``
  over the fine classes of the coarse label minus the logsumexp over all fine classes;
- fine cross-entropy on pseudo-labels: the EMA teacher's logits ``t`` divided by a temperature and
  restricted to the fine classes of ``y_n`` give ``q_n = softmax(t_n / T masked)``; the target is
  ``tau q_n + (1 - tau) onehot(argmax q_n)`` and the loss ``-mean_n sum_f target[f] log p_n[f]``;
- neighbour consistency: ``-mean_{n,k} log <p_n, r_{n,k}>`` with ``r`` the teacher's probabilities of
  the n-th sample's neighbours (computed in log space: ``logsumexp(log p_n + log r_{n,k})``);
- the entropy of the mean prediction, as the gap ``log F - H(mean_n p_n) >= 0``.

The total (:func:`falcon_loss`) is ``w_coarse * coarse + w_fine * (fine + consistency) + w_reg * gap``
(the reference code's weights are all 0.5).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

__all__ = [
    "LossTerms",
    "coarse_cross_entropy",
    "coarse_log_probs",
    "entropy_gap",
    "falcon_loss",
    "fine_cross_entropy",
    "fine_targets",
    "neighbour_consistency",
]


class LossTerms(NamedTuple):
    """FALCON's loss terms (scalars, nats) and their weighted total."""

    total: Float[Array, ""]
    coarse: Float[Array, ""]
    fine: Float[Array, ""]
    consistency: Float[Array, ""]
    entropy_gap: Float[Array, ""]


@jax.jit
def coarse_log_probs(logits: Float[Array, "N F"], assignment: Float[Array, "F C"]) -> Float[Array, "N C"]:
    """``log P(coarse = c | x_n) = logsumexp_{f: M[f, c] = 1} z_n[f] - logsumexp_f z_n[f]``.

    A coarse class with no fine class gets ``-inf``.

    Args:
        logits: ``[N, F]`` fine logits. assignment: ``[F, C]`` 0/1 (any value > 0.5 counts as 1).

    Returns:
        ``[N, C]`` log-probabilities (nats).

    Examples:
        >>> import jax.numpy as jnp
        >>> lp = coarse_log_probs(jnp.zeros((1, 3)), jnp.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
        >>> jnp.round(jnp.exp(lp), 4).tolist()
        [[0.6667, 0.3333]]
    """
    mask = assignment > 0.5
    masked = jnp.where(mask[None, :, :], logits[:, :, None], -jnp.inf)
    lse = jax.nn.logsumexp(masked, axis=1, where=mask[None, :, :])
    lse = jnp.where(mask.any(0)[None, :], lse, -jnp.inf)
    return lse - jax.nn.logsumexp(logits, axis=1, keepdims=True)


@jax.jit
def coarse_cross_entropy(
    logits: Float[Array, "N F"], coarse_labels: Int[Array, " N"], assignment: Float[Array, "F C"]
) -> Float[Array, ""]:
    """``-mean_n log P(y_n | x_n)`` through :func:`coarse_log_probs` (nats).

    Examples:
        >>> import jax.numpy as jnp
        >>> m = jnp.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
        >>> round(float(coarse_cross_entropy(jnp.zeros((1, 3)), jnp.array([1]), m)), 4)  # log 3
        1.0986
    """
    lp = coarse_log_probs(logits, assignment)
    return -jnp.mean(jnp.take_along_axis(lp, coarse_labels[:, None], axis=1))


@jax.jit
def fine_targets(
    teacher_logits: Float[Array, "N F"],
    coarse_labels: Int[Array, " N"],
    assignment: Float[Array, "F C"],
    temperature: float = 0.9,
    tau: float = 0.0,
) -> Float[Array, "N F"]:
    """Pseudo-labels ``tau q + (1 - tau) onehot(argmax q)``, ``q = softmax(t / T)`` over the fine classes of ``y``.

    Args:
        teacher_logits: ``[N, F]`` (the EMA teacher's; no gradient flows through them).
        coarse_labels: ``[N]`` int. assignment: ``[F, C]`` 0/1.
        temperature: T > 0. tau: soft weight in [0, 1] (1: soft targets, 0: hard).

    Returns:
        ``[N, F]`` targets; rows sum to 1 and vanish outside the coarse label's fine set.

    Examples:
        >>> import jax.numpy as jnp
        >>> m = jnp.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
        >>> fine_targets(jnp.array([[0.0, 1.0, 5.0]]), jnp.array([0]), m).tolist()
        [[0.0, 1.0, 0.0]]
    """
    t = jax.lax.stop_gradient(teacher_logits)
    mask = (assignment > 0.5).T[coarse_labels]  # [N, F]
    q = jax.nn.softmax(jnp.where(mask, t / temperature, -jnp.inf), axis=-1, where=mask)
    q = jnp.where(mask, q, 0.0)
    hard = jax.nn.one_hot(jnp.argmax(jnp.where(mask, q, -1.0), axis=-1), t.shape[-1], dtype=q.dtype)
    return tau * q + (1.0 - tau) * hard


@jax.jit
def fine_cross_entropy(logits: Float[Array, "N F"], targets: Float[Array, "N F"]) -> Float[Array, ""]:
    """``-mean_n sum_f targets[n, f] log softmax(z_n)[f]`` (nats).

    Examples:
        >>> import jax.numpy as jnp
        >>> round(float(fine_cross_entropy(jnp.zeros((2, 4)), jnp.eye(4)[:2])), 4)  # log 4
        1.3863
    """
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.sum(jnp.where(targets > 0, targets * logp, 0.0), axis=-1))


@jax.jit
def neighbour_consistency(
    logits: Float[Array, "N F"], neighbour_log_probs: Float[Array, "N K F"]
) -> Float[Array, ""]:
    """``-mean_{n,k} log <p_n, r_{n,k}>``, ``p_n = softmax(z_n)``, ``r = exp(neighbour_log_probs)`` (nats).

    Args:
        logits: ``[N, F]`` student logits.
        neighbour_log_probs: ``[N, K, F]`` log-probabilities of each sample's K neighbours (the
            teacher's; no gradient flows through them).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> r = jax.nn.log_softmax(jnp.zeros((1, 1, 4)))
        >>> round(float(neighbour_consistency(jnp.zeros((1, 4)), r)), 4)   # -log(1/4)
        1.3863
    """
    logp = jax.nn.log_softmax(logits, axis=-1)
    r = jax.lax.stop_gradient(neighbour_log_probs)
    return -jnp.mean(jax.nn.logsumexp(logp[:, None, :] + r, axis=-1))


@jax.jit
def entropy_gap(logits: Float[Array, "N F"]) -> Float[Array, ""]:
    """``log F - H(mean_n softmax(z_n))``: zero when the mean prediction is uniform (nats).

    Examples:
        >>> import jax.numpy as jnp
        >>> round(float(entropy_gap(jnp.array([[9.0, 0.0], [0.0, 9.0]]))), 4)
        0.0
    """
    pbar = jnp.mean(jax.nn.softmax(logits, axis=-1), axis=0)
    h = -jnp.sum(jax.scipy.special.xlogy(pbar, pbar))
    return jnp.log(logits.shape[-1]) - h


@jax.jit
def falcon_loss(
    logits: Float[Array, "N F"],
    teacher_logits: Float[Array, "N F"],
    neighbour_log_probs: Float[Array, "N K F"],
    coarse_labels: Int[Array, " N"],
    assignment: Float[Array, "F C"],
    *,
    tau: float = 0.0,
    temperature: float = 0.9,
    weights: tuple[float, float, float] = (0.5, 0.5, 0.5),
) -> LossTerms:
    """FALCON's objective: ``w0 coarse + w1 (fine + consistency) + w2 entropy_gap`` (module docstring).

    Args:
        logits: ``[N, F]`` student logits. teacher_logits: ``[N, F]`` EMA-teacher logits of the same
            samples. neighbour_log_probs: ``[N, K, F]`` teacher log-probabilities of their neighbours.
        coarse_labels: ``[N]`` int in ``[0, C)``. assignment: ``[F, C]`` 0/1 M.
        tau: soft weight of the pseudo-labels. temperature: of the pseudo-labels.
        weights: ``(w_coarse, w_fine, w_reg)``.

    Returns:
        :class:`LossTerms` (scalars, nats).

    References:
        Gadetsky, Jiang, Salzmann, Brbic. "Discovering fine-grained classes from coarsely labeled
        data." ICML 2024, Eqs. (2)-(4); weights from the reference code (0.5, 0.5, 0.5).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> m = jnp.array([[1.0, 0.0], [0.0, 1.0]])
        >>> z = jnp.array([[4.0, 0.0], [0.0, 4.0]])
        >>> terms = falcon_loss(z, z, jax.nn.log_softmax(z)[:, None], jnp.array([0, 1]), m)
        >>> round(float(terms.entropy_gap), 4), bool(terms.total > 0)
        (0.0, True)
    """
    coarse = coarse_cross_entropy(logits, coarse_labels, assignment)
    fine = fine_cross_entropy(logits, fine_targets(teacher_logits, coarse_labels, assignment, temperature, tau))
    cons = neighbour_consistency(logits, neighbour_log_probs)
    gap = entropy_gap(logits)
    w0, w1, w2 = weights
    return LossTerms(w0 * coarse + w1 * (fine + cons) + w2 * gap, coarse, fine, cons, gap)
