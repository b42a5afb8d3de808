"""CInA: causal inference with attention. Balancing weights read off the last self-attention layer.

With queries = keys = the standardised covariates ``z`` scaled by the bandwidth, the unnormalised
attention ``sum_j exp(s_ij) v_j = softmax(s_i) . v * exp(logsumexp(s_i))`` is a kernel expansion
``f(x_i) = sum_j K(x_i, x_j) v_j`` (``s_ij = -|z_i - z_j|^2 / 2h^2`` gives the Gaussian kernel,
``s_ij = z_i . z_j / h^2`` the softmax score kernel). With values ``v_j = W_j a_j``,
``0 <= a_j <= C = 1 / lam``, the penalised hinge loss of this output

    L(v, b) = lam / 2 v^T K v + sum_i [1 - W_i (f(x_i) + b)]_+

is ``lam`` times the SVM primal whose dual is the balancing problem (:mod:`.dual`): at its
minimum ``a`` is the SVM dual solution, ``alpha = lam a`` the optimal balancing weights, and
``L = -lam`` times the SVC dual objective (strong duality; Zhang et al. 2024, Theorem 1). No
outcome enters the loss: training is self-supervised.

- :func:`fit_cina`: single-data-set CInA: free values per unit (``a = C sigmoid(u)``) and
  intercept per data set, trained with optax Adam; vmapped over the batch.
- :class:`CInA` + :func:`fit_cina_multi`: multi-data-set CInA: a network maps each unit's
  ``(z_i, W_i)`` through a masked self-attention block (context of the whole data set) to its
  value ``a_i``, trained on many unlabelled data sets; :func:`cina_weights` then gives an unseen
  data set's balancing weights in one forward pass (zero-shot).

The effect on the treated (``estimand="att"``): the treated keep ``1 / n_1`` and the controls' weights
``w = softmax`` of learned logits over the controls (positive, summing to 1: never collapsing to an
empty arm); with ``v = T / n_1 - w`` the self-supervised loss is the ATT balancing objective of
:func:`att_balancing` written through the same attention layer,

    L_att(w) = v^T f(v) + lam sum_{T=0} w_j^2,   f = the unnormalised attention output,

the squared MMD between the treated and the weighted controls plus ``lam / ESS_0``.

Zero-shot across sizes: the network's tokens carry ``log n_1`` and ``log n_0`` of their data set (the
ATE values' scale depends on the data set's size: ``f`` sums over every unit), and
:func:`cina_weights` reads the weights straight off the network's values (no thresholding: a unit
past the margin keeps its small value), so a data set larger or shifted from the training ones never
has its weights collapse onto a few units; :func:`effective_sample_size` reports how many they rest on.

Deviation from the paper, stated: the last layer's keys are the standardised covariates (a fixed
kernel, the one the dual solver uses) rather than a learned encoder's output, so the zero-shot
weights estimate the same optimum as per-data-set balancing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import Progress, check_choice, check_int, check_key, check_positive, check_progress, \
    check_shape, expected
from jaxcore._util.minibatch import minibatch_draw

from .data import EffectData, check_data
from .estimators import check_estimand
from .kernels import _default_h2, _standardize

__all__ = ["CInA", "CInAFit", "CInAResult", "attention_kernel_output", "cina_objective", "cina_weights",
           "fit_cina", "fit_cina_multi"]

_KINDS = ("rbf", "attention")


class CInAResult(NamedTuple):
    """Balancing weights from CInA (single-data-set fit or zero-shot forward pass).

    For ``estimand="att"``: ``alpha`` and ``weights`` are both the ATT weights (treated ``1 / n_1``, controls
    the softmax weights), ``dual_coef`` is ``v = T / n_1 - w``, ``bias`` 0 and ``loss`` the ATT objective.

    Attributes:
        alpha: ``[B, N]`` in [0, 1]: ``lam a`` (0 on padding).
        weights: ``[B, N]`` ``alpha`` normalised to sum 1 within each arm (use with ``weighted_ate``).
        dual_coef: ``[B, N]`` the attention values ``v = W a`` (``SVC.dual_coef_`` layout).
        bias: ``[B]`` the intercept ``b``.
        loss: ``[B]`` the penalised hinge loss ``L(v, b)`` (sum over units) at the end.
        history: ``[num_steps]`` the mean training loss per unit, each step (empty for zero-shot).

    Examples:
        >>> CInAResult._fields[:2]
        ('alpha', 'weights')
    """

    alpha: Float[Array, "B N"]
    weights: Float[Array, "B N"]
    dual_coef: Float[Array, "B N"]
    bias: Float[Array, " B"]
    loss: Float[Array, " B"]
    history: Float[Array, " num_steps"]


class CInAFit(NamedTuple):
    """Result of :func:`fit_cina_multi`: the trained network and its loss per step.

    Attributes:
        model: the trained :class:`CInA`.
        history: ``[num_steps]`` mean loss per unit over each step's minibatch of data sets.

    Examples:
        >>> CInAFit._fields
        ('model', 'history')
    """

    model: "CInA"
    history: Float[Array, " num_steps"]


def _scores(z: jnp.ndarray, mask: jnp.ndarray, kind: str, h2) -> jnp.ndarray:
    g = z @ z.T
    if kind == "rbf":
        sq = jnp.diagonal(g)
        s = -(sq[:, None] + sq[None, :] - 2.0 * g) / (2.0 * h2)
        s = jnp.minimum(s, 0.0)
    else:
        s = g / h2
    return jnp.where(mask[None, :], s, -jnp.inf)


def _attend(z, v, mask, kind, h2):
    """Unnormalised attention ``exp(s) @ v`` as softmax attention times the row normaliser."""
    s = _scores(z, mask, kind, h2)
    lse = jax.nn.logsumexp(s, axis=-1)
    f = (jax.nn.softmax(s, axis=-1) @ v) * jnp.exp(lse)
    return jnp.where(mask, f, 0.0)


def _loss(z, v, b, w, mask, lam, kind, h2):
    f = _attend(z, v, mask, kind, h2)
    hinge = jnp.where(mask, jax.nn.relu(1.0 - w * (f + b)), 0.0)
    return 0.5 * lam * jnp.sum(v * f) + jnp.sum(hinge)


def _signs(data: EffectData) -> jnp.ndarray:
    return jnp.where(data.mask, 2.0 * data.treatment - 1.0, 0.0)


def _kkt_readout(z, v, b, w, mask, lam, kind, h2, margin_tol):
    """Complementary slackness applied to learned values: ``a = 0`` where the margin
    ``W (f + b) > 1 + tol`` (not a support vector), ``a = C`` where it is ``< 1 - tol``."""
    f = _attend(z, v, mask, kind, h2)
    margin = w * (f + b)
    raw = jnp.abs(v) * mask
    a = jnp.where(margin > 1.0 + margin_tol, 0.0, jnp.where(margin < 1.0 - margin_tol, 1.0 / lam, raw)) * mask
    # an arm left without weight (every margin beyond 1 + tol) keeps its raw values
    empty1 = jnp.sum(jnp.where(w > 0, a, 0.0)) <= 0
    empty0 = jnp.sum(jnp.where(w < 0, a, 0.0)) <= 0
    return jnp.where(((w > 0) & empty1) | ((w < 0) & empty0), raw, a)


def _normalise(alpha, w):
    s1 = jnp.sum(jnp.where(w > 0, alpha, 0.0), -1, keepdims=True)
    s0 = jnp.sum(jnp.where(w < 0, alpha, 0.0), -1, keepdims=True)
    return jnp.where(w > 0, alpha / jnp.maximum(s1, 1e-30), jnp.where(w < 0, alpha / jnp.maximum(s0, 1e-30), 0.0))


def _att_loss(z, logits, t, mask, lam, kind, h2):
    """(ATT weights, v, loss) of control logits: ``w = softmax`` over the controls, ``v = T / n_1 - w``."""
    tm = (t > 0.5) & mask
    c = (t < 0.5) & mask
    tw = tm / jnp.maximum(jnp.sum(tm), 1)
    wc = jax.nn.softmax(jnp.where(c, logits, -jnp.inf))
    wc = jnp.where(c, wc, 0.0)
    v = (tw - wc).astype(z.dtype)
    f = _attend(z, v, mask, kind, h2)
    return (tw + wc).astype(z.dtype), v, jnp.sum(v * f) + lam * jnp.sum(wc * wc)


def _lam(lam: float | None, att: bool) -> float:
    return (0.1 if att else 1.0) if lam is None else lam


def _check_common(kind: str, lam: float, bandwidth: float | None) -> None:
    check_choice(kind, "kind", _KINDS)
    check_positive(lam, "lam")
    if bandwidth is not None:
        check_positive(bandwidth, "bandwidth")


@jax.jit(static_argnames=("kind",))
def _kernel_out_jit(data, v, kind, h2):
    z = jax.vmap(_standardize)(data.x, data.mask)
    return jax.vmap(lambda zz, vv, mm: _attend(zz, vv, mm, kind, h2))(z, v, data.mask)


def attention_kernel_output(
    data: EffectData,
    values: Float[Array, "B N"],
    *,
    kind: Literal["rbf", "attention"] = "rbf",
    bandwidth: float | None = None,
) -> Float[Array, "B N"]:
    """CInA's last layer: unnormalised self-attention with queries = keys = standardised covariates.

    ``f_i = sum_j exp(s_ij) v_j = (softmax(s_i) . v) exp(logsumexp_j s_ij)``; equal to ``K @ v`` for the
    kernel of :func:`kernel_matrix` of the same ``kind`` and ``bandwidth``.

    Args:
        data: :class:`EffectData`.
        values: ``[B, N]`` attention values (padding ignored).
        kind: ``"rbf"`` or ``"attention"``.
        bandwidth: as :func:`kernel_matrix`.

    Returns:
        ``[B, N]`` attention outputs (0 on padding).

    Raises:
        TypeError: ``data`` is not an :class:`EffectData`.
        ValueError: bad shapes, kind or bandwidth.

    References:
        Zhang et al., ICML 2024, Section 3.2 (self-attention as a kernel expansion).

    Examples:
        >>> from jaxcore.effects import effect_data, kernel_matrix
        >>> d = effect_data([[0.0], [1.0], [3.0]], [1, 0, 1])
        >>> v = jnp.array([[1.0, -2.0, 0.5]])
        >>> bool(jnp.allclose(attention_kernel_output(d, v), (kernel_matrix(d) @ v[..., None])[..., 0], atol=1e-5))
        True
    """
    check_data(data)
    _check_common(kind, 1.0, bandwidth)
    check_shape(values, "values", data.treatment.shape)
    h2 = jnp.asarray(_default_h2(kind, data.num_features, bandwidth), data.x.dtype)
    return _kernel_out_jit(data, jnp.asarray(values, data.x.dtype), kind, h2)


@jax.jit(static_argnames=("kind",))
def _objective_jit(data, v, b, lam, kind, h2):
    z = jax.vmap(_standardize)(data.x, data.mask)
    return jax.vmap(lambda zz, vv, bb, ww, mm: _loss(zz, vv, bb, ww, mm, lam, kind, h2))(
        z, v, b, _signs(data), data.mask)


def cina_objective(
    data: EffectData,
    dual_coef: Float[Array, "B N"],
    bias: Float[Array, " B"],
    *,
    lam: float = 1.0,
    kind: Literal["rbf", "attention"] = "rbf",
    bandwidth: float | None = None,
) -> Float[Array, " B"]:
    """The CInA loss ``lam/2 v^T K v + sum_i [1 - W_i (f_i + b)]_+`` of attention values ``v`` and intercept ``b``.

    Args:
        data: :class:`EffectData`.
        dual_coef: ``[B, N]`` values ``v`` (e.g. :class:`BalancingResult` ``.dual_coef``).
        bias: ``[B]`` intercepts.
        lam, kind, bandwidth: as :func:`balancing_dual` / :func:`kernel_matrix`.

    Returns:
        ``[B]`` loss (sum over units); at the SVM solution it equals ``-lam`` times the SVC dual objective.

    Raises:
        TypeError: ``data`` is not an :class:`EffectData`.
        ValueError: bad shapes or arguments.

    References:
        Zhang et al., ICML 2024, Theorem 1 and Eq. (6) (the penalised hinge loss of the attention output).

    Examples:
        >>> from jaxcore.effects import effect_data
        >>> d = effect_data([[0.0], [1.0]], [1, 0])
        >>> float(cina_objective(d, jnp.zeros((1, 2)), jnp.zeros(1))[0])  # v = 0: every hinge is 1
        2.0
    """
    check_data(data)
    _check_common(kind, lam, bandwidth)
    check_shape(dual_coef, "dual_coef", data.treatment.shape)
    check_shape(bias, "bias", (data.num_datasets,))
    h2 = jnp.asarray(_default_h2(kind, data.num_features, bandwidth), data.x.dtype)
    dt = data.x.dtype
    return _objective_jit(data, jnp.asarray(dual_coef, dt), jnp.asarray(bias, dt), jnp.asarray(lam, dt), kind, h2)


def _single_fit(data, lam, kind, h2, num_steps, learning_rate, margin_tol, progress, att=False):
    z = jax.vmap(_standardize)(data.x, data.mask)
    w = _signs(data)
    if att:
        return _single_fit_att(z, data, lam, kind, h2, num_steps, learning_rate, progress)
    c = 1.0 / lam
    n = jnp.sum(data.mask, -1).astype(z.dtype)
    opt = optax.adam(learning_rate)
    params = (jnp.full_like(w, -3.0), jnp.zeros(w.shape[0], w.dtype))  # a = C sigmoid(-3): few support vectors

    def per_set(p):
        u, b = p
        v = w * c * jax.nn.sigmoid(u)
        return jax.vmap(lambda zz, vv, bb, ww, mm: _loss(zz, vv, bb, ww, mm, lam, kind, h2))(z, v, b, w, data.mask)

    def total(p):
        losses = per_set(p)
        return jnp.sum(losses / n), losses

    prog = Progress(progress, num_steps, "effects.fit_cina")

    def step(carry, t):
        p, s = carry
        (val, _), g = jax.value_and_grad(total, has_aux=True)(p)
        upd, s = opt.update(g, s, p)
        p = optax.apply_updates(p, upd)
        prog.update(t, {"loss": val / w.shape[0]})
        return (p, s), val / w.shape[0]

    (params, _), hist = jax.lax.scan(step, (params, opt.init(params)), jnp.arange(num_steps))
    u, b = params
    v = w * c * jax.nn.sigmoid(u)
    a = jax.vmap(lambda zz, vv, bb, ww, mm: _kkt_readout(zz, vv, bb, ww, mm, lam, kind, h2, margin_tol))(
        z, v, b, w, data.mask)
    alpha = lam * a
    return CInAResult(alpha, _normalise(alpha, w), v, b, per_set(params), hist)


def _single_fit_att(z, data, lam, kind, h2, num_steps, learning_rate, progress):
    opt = optax.adam(learning_rate)
    one = jax.vmap(lambda zz, uu, tt, mm: _att_loss(zz, uu, tt, mm, lam, kind, h2))

    def total(u):
        losses = one(z, u, data.treatment, data.mask)[2]
        return jnp.sum(losses), losses

    prog = Progress(progress, num_steps, "effects.fit_cina")
    b = data.num_datasets

    def step(carry, i):
        u, s = carry
        (val, _), g = jax.value_and_grad(total, has_aux=True)(u)
        upd, s = opt.update(g, s, u)
        u = optax.apply_updates(u, upd)
        prog.update(i, {"loss": val / b})
        return (u, s), val / b

    u0 = jnp.zeros_like(data.treatment)
    (u, _), hist = jax.lax.scan(step, (u0, opt.init(u0)), jnp.arange(num_steps))
    weights, v, loss = one(z, u, data.treatment, data.mask)
    return CInAResult(weights, weights, v, jnp.zeros(b, z.dtype), loss, hist)


_single_fit_jit = jax.jit(_single_fit, static_argnames=("kind", "num_steps", "progress", "att"))


def fit_cina(
    data: EffectData,
    *,
    lam: float | None = None,
    kind: Literal["rbf", "attention"] = "rbf",
    bandwidth: float | None = None,
    num_steps: int = 1000,
    learning_rate: float = 0.1,
    margin_tol: float = 0.02,
    progress: bool | Callable = False,
    estimand: Literal["ate", "att"] = "ate",
) -> CInAResult:
    """Single-data-set CInA: train per-unit attention values on the penalised hinge loss (no outcomes).

    Each data set gets its own values ``a = C sigmoid(u)`` and intercept ``b``, optimised by Adam on
    ``L(v, b) / n`` (module docstring); all ``B`` data sets train together (independent parameters).
    ``estimand="att"``: control logits ``u`` (weights ``softmax(u)`` over the controls) optimised by Adam on
    the ATT loss ``L_att`` (module docstring), the minimum of :func:`att_balancing`'s problem.

    Args:
        data: :class:`EffectData` (outcomes unused).
        lam: ``> 0`` (ATE: ``C = 1 / lam``; ATT: the price of ``1 / ESS_0``); None: 1.0 (ATE), 0.1 (ATT).
        kind, bandwidth: the last layer's kernel (:func:`attention_kernel_output`).
        num_steps: Adam steps (>= 1).
        learning_rate: ``> 0``.
        margin_tol: ``>= 0``: the weights read off the trained values apply complementary
            slackness, ``a_i = 0`` where the margin ``W_i (f_i + b) > 1 + margin_tol`` and ``a_i = C``
            where it is ``< 1 - margin_tol`` (a first-order fit leaves small values on the many
            non-support vectors, which otherwise add up to a large share of an arm's weight). ATE only.
        progress: False, True (a bar) or ``fn(step, metrics)``.
        estimand: ``"ate"`` or ``"att"``.

    Returns:
        :class:`CInAResult` (``dual_coef`` and ``loss`` are the trained values', before the readout).

    Raises:
        TypeError: ``data`` is not an :class:`EffectData`.
        ValueError: invalid arguments.

    References:
        Zhang et al., ICML 2024, Algorithm 1 (CInA, single data set). D. P. Kingma, J. Ba, "Adam", ICLR 2015.

    Examples:
        >>> from jaxcore.effects import effect_data
        >>> d = effect_data([[0.0], [0.1], [1.0], [1.1]], [1, 0, 1, 0])
        >>> r = fit_cina(d, lam=0.5, num_steps=200)
        >>> [round(float(s), 2) for s in r.weights[0]]
        [0.5, 0.5, 0.5, 0.5]
    """
    check_data(data)
    att = check_estimand(estimand)
    lam = _lam(lam, att)
    _check_common(kind, lam, bandwidth)
    num_steps = check_int(num_steps, "num_steps", 1)
    check_positive(learning_rate, "learning_rate")
    check_positive(margin_tol, "margin_tol", allow_zero=True)
    progress = check_progress(progress)
    dt = data.x.dtype
    h2 = jnp.asarray(_default_h2(kind, data.num_features, bandwidth), dt)
    return _single_fit_jit(data, jnp.asarray(lam, dt), kind, h2, num_steps, jnp.asarray(learning_rate, dt),
                           jnp.asarray(margin_tol, dt), progress, att)


class CInA(eqx.Module):
    """Multi-data-set CInA: a set network predicting each unit's attention value, then the balancing attention.

    Per data set: ``z`` standardised covariates; tokens ``e_i = MLP([z_i, W_i, log n_1 / 8, log n_0 / 8, 10 g_i])``
    (the arm sizes let one network serve data sets of any size; ``g_i = mean_{T=1} K(x_i, .) - mean_{T=0} K(x_i, .)``
    is the unweighted arms' MMD witness at unit ``i``, computed by the kernel attention); one masked multi-head self-attention
    block with a residual and layer norm, ``h = LN(e + MHA(e))``; values ``a_i = C sigmoid(MLP(h_i))``,
    intercept ``b = Linear(mean_i h_i)``; the last layer is :func:`attention_kernel_output` with
    ``v = W a``. ``estimand="att"``: ``MLP(h_i)`` are the controls' logits, weights their softmax over
    the controls, the loss ``L_att`` (module docstring).

    Args:
        num_features: D.
        hidden: token width (>= 1).
        num_heads: attention heads (divides ``hidden``).
        lam: ``> 0`` or None (1.0 for the ATE, 0.1 for the ATT); kind, bandwidth: the last layer's kernel.
        estimand: ``"ate"`` or ``"att"``: what the network's weights balance for.
        key: PRNG key (keyword-only, equinox's convention).

    Raises:
        ValueError: invalid sizes or arguments.

    References:
        Zhang et al., ICML 2024, Section 4 (multi-data-set CInA and zero-shot inference).

    Examples:
        >>> m = CInA(3, hidden=8, num_heads=2, key=jax.random.key(0))
        >>> m.lam, m.kind
        (1.0, 'rbf')
    """

    embed: eqx.nn.MLP
    attention: eqx.nn.MultiheadAttention
    norm: eqx.nn.LayerNorm
    value_head: eqx.nn.MLP
    bias_head: eqx.nn.Linear
    num_features: int = eqx.field(static=True)
    lam: float = eqx.field(static=True)
    kind: str = eqx.field(static=True)
    bandwidth: float | None = eqx.field(static=True)
    estimand: str = eqx.field(static=True)

    def __init__(self, num_features: int, *, hidden: int = 32, num_heads: int = 2, lam: float | None = None,
                 kind: Literal["rbf", "attention"] = "rbf", bandwidth: float | None = None,
                 estimand: Literal["ate", "att"] = "ate", key: PRNGKeyArray):
        check_key(key)
        att = check_estimand(estimand)
        lam = _lam(lam, att)
        d = check_int(num_features, "num_features", 1)
        hidden = check_int(hidden, "hidden", 1)
        num_heads = check_int(num_heads, "num_heads", 1)
        if hidden % num_heads:
            raise ValueError(expected("num_heads", f"a divisor of hidden={hidden}", num_heads))
        _check_common(kind, lam, bandwidth)
        k1, k2, k3, k4 = jax.random.split(key, 4)
        self.embed = eqx.nn.MLP(d + 4, hidden, hidden, 1, activation=jax.nn.gelu, key=k1)
        self.attention = eqx.nn.MultiheadAttention(num_heads, hidden, key=k2)
        self.norm = eqx.nn.LayerNorm(hidden)
        self.value_head = eqx.nn.MLP(hidden, "scalar", hidden, 1, activation=jax.nn.gelu, key=k3)
        self.bias_head = eqx.nn.Linear(hidden, "scalar", key=k4)
        self.num_features = d
        self.lam = float(lam)
        self.kind = kind
        self.bandwidth = None if bandwidth is None else float(bandwidth)
        self.estimand = estimand

    def __call__(self, x: Float[Array, "N D"], treatment: Float[Array, " N"], mask: jnp.ndarray):
        """One data set -> ``(v, b, loss)``: attention values ``W a``, intercept, penalised hinge loss
        (ATT: ``v = T / n_1 - w``, ``b = 0``, the ATT loss)."""
        z = _standardize(x, mask)
        w = jnp.where(mask, 2.0 * treatment - 1.0, 0.0).astype(z.dtype)
        counts = jnp.maximum(jnp.stack([jnp.sum(w > 0), jnp.sum(w < 0)]), 1).astype(z.dtype)
        sizes = jnp.log(counts) / 8.0
        h2 = _default_h2(self.kind, self.num_features, self.bandwidth)
        # the MMD witness of the unweighted arms, mean_T K(x, .) - mean_C K(x, .), through the same kernel attention:
        # the balancing gradient at uniform weights, a per-unit feature independent of the data set's size
        witness = _attend(z, jnp.where(w > 0, 1.0 / counts[0], 0.0) - jnp.where(w < 0, 1.0 / counts[1], 0.0), mask,
                          self.kind, h2)
        tokens = jnp.concatenate([z, w[:, None], jnp.broadcast_to(sizes, (z.shape[0], 2)), 10.0 * witness[:, None]],
                                 -1)
        e = jax.vmap(self.embed)(tokens)
        att = self.attention(e, e, e, mask=jnp.broadcast_to(mask[None, :], (mask.shape[0],) * 2))
        h = jax.vmap(self.norm)(e + att)
        out = jax.vmap(self.value_head)(h)
        if self.estimand == "att":
            _, v, loss = _att_loss(z, out, treatment, mask, self.lam, self.kind, h2)
            return v, jnp.zeros((), z.dtype), loss
        a = jax.nn.sigmoid(out) / self.lam * mask
        m = mask.astype(h.dtype)[:, None]
        b = self.bias_head((h * m).sum(0) / jnp.maximum(m.sum(), 1.0))
        v = w * a
        return v, b, _loss(z, v, b, w, mask, self.lam, self.kind, h2)


def _multi_loss(model, x, t, m):
    _, _, losses = jax.vmap(model)(x, t, m)
    if model.estimand == "att":  # already per data set (an MMD plus lam / ESS)
        return jnp.mean(losses)
    return jnp.mean(losses / jnp.sum(m, -1))


@eqx.filter_jit
def _multi_fit(key, model, data, num_steps, batch_size, learning_rate, progress):
    opt = optax.adam(learning_rate)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    prog = Progress(progress, num_steps, "effects.fit_cina_multi")

    def step(carry, inp):
        p, s = carry
        t, k = inp
        idx = minibatch_draw(k, data.num_datasets, batch_size, replace=None)
        val, g = eqx.filter_value_and_grad(
            lambda pp: _multi_loss(eqx.combine(pp, static), data.x[idx], data.treatment[idx], data.mask[idx]))(p)
        upd, s = opt.update(g, s, p)
        p = eqx.apply_updates(p, upd)
        prog.update(t, {"loss": val})
        return (p, s), val

    keys = jax.random.split(key, num_steps)
    (params, _), hist = jax.lax.scan(step, (params, opt.init(params)), (jnp.arange(num_steps), keys))
    return CInAFit(eqx.combine(params, static), hist)


def fit_cina_multi(
    key: PRNGKeyArray,
    model: CInA,
    data: EffectData,
    *,
    num_steps: int = 1000,
    batch_size: int = 16,
    learning_rate: float = 1e-3,
    progress: bool | Callable = False,
) -> CInAFit:
    """Multi-data-set CInA: train one :class:`CInA` on many unlabelled data sets (self-supervised).

    Each Adam step draws ``batch_size`` data sets and minimises the mean over them of
    ``L(v, b) / n`` with ``v, b`` the network's output; outcomes are never read.

    Args:
        key: PRNG key (minibatch draws).
        model: the initial :class:`CInA` (``model.num_features == D``).
        data: :class:`EffectData` ``[B, N, D]`` training data sets.
        num_steps: Adam steps (>= 1); batch_size: data sets per step (>= 1); learning_rate: > 0.
        progress: False, True (a bar) or ``fn(step, metrics)``.

    Returns:
        :class:`CInAFit`.

    Raises:
        TypeError: ``data`` is not an :class:`EffectData`.
        TypeError: ``key`` not a PRNG key, ``model`` not a :class:`CInA`.
        ValueError: invalid sizes, D mismatch.

    References:
        Zhang et al., ICML 2024, Algorithm 2 (multi-data-set CInA).

    Examples:
        >>> from jaxcore.effects import synthetic_family
        >>> d = synthetic_family(jax.random.key(1), 4, 20, 3)  # (skipped here: compiling the training loop is slow)
        >>> fit = fit_cina_multi(jax.random.key(2), CInA(3, hidden=8, key=jax.random.key(0)), d, num_steps=3,
        ...                      batch_size=2)  # doctest: +SKIP
        >>> fit.history.shape  # doctest: +SKIP
        (3,)
    """
    check_data(data)
    check_key(key)
    if not isinstance(model, CInA):
        raise TypeError(expected("model", "a CInA", type(model).__name__, raw=True))
    if model.num_features != data.num_features:
        raise ValueError(expected("data", f"{model.num_features} covariates (the model's)",
                                  f"{data.num_features}", raw=True))
    num_steps = check_int(num_steps, "num_steps", 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    check_positive(learning_rate, "learning_rate")
    progress = check_progress(progress)
    return _multi_fit(key, model, data, num_steps, batch_size, learning_rate, progress)


@eqx.filter_jit
def _zero_shot(model, data, margin_tol, raw):
    v, b, loss = jax.vmap(model)(data.x, data.treatment, data.mask)
    w = _signs(data)
    if model.estimand == "att" or raw:
        alpha = jnp.abs(v) if model.estimand == "att" else model.lam * jnp.abs(v)
        return CInAResult(alpha, _normalise(alpha, w), v, b, loss, jnp.zeros((0,), v.dtype))
    z = jax.vmap(_standardize)(data.x, data.mask)
    h2 = _default_h2(model.kind, model.num_features, model.bandwidth)
    a = jax.vmap(lambda zz, vv, bb, ww, mm: _kkt_readout(zz, vv, bb, ww, mm, model.lam, model.kind, h2, margin_tol))(
        z, v, b, w, data.mask)
    alpha = model.lam * a
    return CInAResult(alpha, _normalise(alpha, w), v, b, loss, jnp.zeros((0,), v.dtype))


def cina_weights(model: CInA, data: EffectData, *, margin_tol: float | None = None) -> CInAResult:
    """Zero-shot CInA: balancing weights of unseen data sets from one forward pass of a trained network.

    The estimand is the model's (``model.estimand``). The weights are the network's values normalised per
    arm (ATT: the treated ``1 / n_1``, the controls' softmax): every unit keeps a positive weight, so an
    unseen data set's weights cannot collapse onto a few units by a thresholding readout.

    Args:
        model: a :class:`CInA` trained by :func:`fit_cina_multi`.
        data: :class:`EffectData` ``[B, N, D]`` with ``D = model.num_features``.
        margin_tol: None (the values as they are) or ``>= 0``: the complementary-slackness readout of
            :func:`fit_cina` (ATE only: ``a = 0`` past the margin; on data sets unlike the training ones it can
            leave an arm's weight on a handful of units).

    Returns:
        :class:`CInAResult` (empty history).

    Raises:
        TypeError: ``data`` is not an :class:`EffectData`.
        TypeError / ValueError: wrong model or covariate count.

    References:
        Zhang et al., ICML 2024, Section 4.2 (zero-shot causal inference).

    Examples:
        >>> from jaxcore.effects import synthetic_family
        >>> d = synthetic_family(jax.random.key(3), 2, 30, 3)
        >>> cina_weights(CInA(3, hidden=8, num_heads=2, key=jax.random.key(1)), d).weights.shape
        (2, 30)
    """
    check_data(data)
    if not isinstance(model, CInA):
        raise TypeError(expected("model", "a CInA", type(model).__name__, raw=True))
    if model.num_features != data.num_features:
        raise ValueError(expected("data", f"{model.num_features} covariates (the model's)",
                                  f"{data.num_features}", raw=True))
    if margin_tol is not None:
        check_positive(margin_tol, "margin_tol", allow_zero=True)
    tol = jnp.asarray(0.0 if margin_tol is None else margin_tol, data.x.dtype)
    return _zero_shot(model, data, tol, margin_tol is None)
