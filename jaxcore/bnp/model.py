"""Structure-adaptive Bayesian networks: depth by a beta process, width by a Bernoulli process.

A network has an always-on input layer, ``K`` (the depth truncation) residual
hidden layers, and one head per task::

    h_0 = relu(W_in [x; 1]),
    h_k = h_{k-1} + relu((W_k * Z_k) [h_{k-1}; 1]),      k = 1..K,
    logits_t = W_head,t [h_K; 1].

Biases are the last input row of each weight matrix, so a hidden layer whose
mask ``Z_k`` is all zero is exactly the identity: an inactive layer passes
its input through and all shapes stay static.

Priors (task 1) and mean-field posteriors:

- weights: ``N(0, s0^2)`` prior, ``N(m, s^2)`` posterior (every weight, bias and head);
- depth: ``nu_k ~ Beta(alpha, beta)``, ``pi_k = prod_{j<=k} nu_j``
  (:class:`~jaxcore.bnp.processes.StickBreakingBetaProcess`); posterior
  ``Beta(a_k, b_k)``;
- width: ``Z_k[i, j] | pi ~ Bernoulli(sigmoid(logit(pi_k) + gamma0_k[i, j]))``
  (``gamma0 = 0`` at task 1), posterior ``sigmoid(logit(pi_k) + gamma_k[i, j])``,
  relaxed to a binary Concrete of temperature ``tau`` during training and
  thresholded (``logit(E pi_k) + gamma > 0``) at test.

This module holds what every architecture shares, the abstract base :class:`AbstractAdaptiveNetwork`; the
two final architectures, :class:`~jaxcore.bnp.AdaptiveMLP` and :class:`~jaxcore.bnp.AdaptiveCNN`, are in
:mod:`jaxcore.bnp.networks`, the variational factors in :mod:`jaxcore.bnp.variational` and the fitting loop
in :mod:`jaxcore.bnp.inference`.

After a task the posterior becomes the next prior (:meth:`AbstractAdaptiveNetwork.posterior_to_prior`,
:mod:`jaxcore.bnp.continual`). The model holds its variational parameters; the prior is a
model of the same configuration.

The mask KL ``E_q(nu)[KL(q(Z | nu) || p(Z | nu))]`` is estimated, as in the
paper's relaxed ELBO and its official code, with one Concrete draw per sample and
the *same* sampled ``logit(pi_k)`` in ``q`` and ``p``. When ``temperature ==
prior_temperature`` (the default) this estimate does not depend on ``pi``: both
logit-space laws are translated by ``logit(pi_k) / tau``, and a KL is invariant
under a common bijection. It equals the KL between ``LogitRelaxedBernoulli(tau,
gamma)`` and ``LogitRelaxedBernoulli(tau, gamma0)``, so depth is then driven by the
data term (through the masks) and the Beta KL only. This is a property of the
relaxation, not a coding error: with ``temperature != prior_temperature`` the
estimate depends on ``pi``, as the exact Bernoulli KL would
(``tests/bnp/test_kl.py::test_mask_kl_depends_on_shared_pi_only_when_temperatures_differ``).

Inference: an **optax** Adam loop inside ``lax.scan`` (:func:`~jaxcore.bnp.fit`, returning a
:class:`~jaxcore.bnp.FitResult` with the loss history; one step is :func:`~jaxcore.bnp.make_svi_step`) over an ELBO
built from the numpyro-compatible pieces of this family: closed-form Gaussian and
Beta KLs (:mod:`jaxcore.bnp.kl`), the logit-space relaxed-Bernoulli density of
:class:`~jaxcore.bnp.distributions.LogitRelaxedBernoulli` for the Monte Carlo mask
KL, and reparameterised Beta sticks (:func:`~jaxcore.bnp.sampling.gamma_rsample`).
We chose this over numpyro SVI for structural reasons, not a measured speed-up:
the ``S`` Monte Carlo samples are one ``vmap`` over a single forward pass, the
analytic KLs are computed once per step rather than per particle, and the mask
KL reuses the mask's own logistic noise. A numpyro-SVI version was not
benchmarked. The distributions themselves remain usable in numpyro models.

References:
    Thapa & Li, "Bayesian Adaptation of Network Depth and Width for Continual
    Learning", ICML 2024; Nguyen, Li, Bui & Turner, "Variational Continual
    Learning", ICLR 2018; Kessler et al., "Hierarchical Indian Buffet Neural
    Networks for Bayesian Continual Learning", UAI 2021.
"""

import abc
import dataclasses
import functools
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PRNGKeyArray

from jaxcore._util import check_finite, check_int, check_key, check_scalar, check_shape, expected, is_concrete

from .distributions import _bernoulli_process_logits
from .kl import _kl_beta, _kl_normal, _kl_relaxed_from_noise
from .sampling import _GAMMA_PROPOSALS, _gamma_from_uniforms, _normal_from_uniform, _random_words, _uniform_from_words
from .variational import BetaSticks, MeanFieldGaussian, _gauss, _gauss_prior

__all__ = [
    "AbstractAdaptiveNetwork",
]


_WEIGHTS = ("w_in", "w_hidden", "w_head")


def _augment(h):
    return jnp.concatenate([h, jnp.ones(h.shape[:-1] + (1,), h.dtype)], axis=-1)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _tile_samples(v, num_samples: int):
    """``v`` broadcast to ``[num_samples, *v.shape]``; its gradient sums over samples with a matmul."""
    return jnp.broadcast_to(v, (num_samples,) + jnp.shape(v))


def _tile_fwd(v, num_samples):
    return _tile_samples(v, num_samples), None


def _tile_bwd(num_samples, _, g):
    return (jnp.tensordot(jnp.ones((num_samples,), g.dtype), g, axes=1),)


_tile_samples.defvjp(_tile_fwd, _tile_bwd)


def _config(model) -> dict[str, Any]:
    """The static configuration of a model (the constructor's arguments other than ``key``)."""
    return {f.name: getattr(model, f.name) for f in dataclasses.fields(model) if f.metadata.get("static", False)}


def _rebuild(model, key, **changes):
    """A freshly initialised model of the same type and configuration (``changes`` applied)."""
    return type(model)(**{**_config(model), **changes}, key=key)


def _template(model):
    """A hashable shape template of ``model`` (arrays as ``jax.ShapeDtypeStruct``), for caches."""
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(jnp.shape(a), a.dtype), model)


def _check_task(model, task, name="task"):
    """A concrete head index must be an int in ``[0, num_heads)`` (never clamped); traced ones are not checked."""
    if is_concrete(task):
        if task is None:
            raise TypeError(expected(name, "an int head index", "None", raw=True))
        if isinstance(task, (np.ndarray, jax.Array)) and np.ndim(task) == 0 and \
                jnp.issubdtype(jnp.result_type(task), jnp.integer):
            task = int(task)
        check_int(task, name, 0, model.num_heads - 1)


def _check_labels(model, y, num_valid=None, name="y"):
    """Concrete labels must be integers in ``[0, num_classes)`` (the first ``num_valid`` rows; the rest is padding)."""
    if not is_concrete(y):
        return
    if y is None or not hasattr(y, "dtype") and not isinstance(y, (list, tuple)):
        raise TypeError(expected(name, "an int label array", type(y).__name__, raw=True))
    a = np.asarray(y)
    if a.dtype.kind not in "iu":
        raise TypeError(expected(name, "integer labels", f"dtype {a.dtype}", raw=True))
    if num_valid is not None:
        a = a[: int(num_valid)]
    bad = (a < 0) | (a >= model.num_classes)
    if bad.any():
        raise ValueError(expected(name, f"labels in [0, {model.num_classes}) (num_classes)",
                                  f"{a[bad][0].item()!r}", raw=True))


def _check_model(model, name="model"):
    if not isinstance(model, AbstractAdaptiveNetwork):
        raise TypeError(expected(name, "an AbstractAdaptiveNetwork (AdaptiveMLP, AdaptiveCNN)", type(model).__name__, raw=True))


def _init_network(model, in_features, width, truncation, num_heads, num_classes, key, alpha, beta, prior_scale,
                  init_scale, temperature, prior_temperature, adapt_structure) -> None:
    """The shared constructor of the networks: checks the configuration and draws the initial posterior.

    Called from a network's ``__init__`` (``model`` is the instance being built): weight means
    ``N(0, 1 / fan_in)`` (head means zero), standard deviations ``init_scale``, ``gamma = 0`` and the sticks at
    the prior's values.
    """
    model.in_features = check_int(in_features, "in_features", 1)
    model.width = check_int(width, "width", 1)
    model.truncation = check_int(truncation, "truncation", 1)
    model.num_heads = check_int(num_heads, "num_heads", 1)
    model.num_classes = check_int(num_classes, "num_classes", 2)
    for name, v in (("alpha", alpha), ("beta", beta), ("prior_scale", prior_scale), ("init_scale", init_scale),
                    ("temperature", temperature), ("prior_temperature", prior_temperature)):
        setattr(model, name, check_scalar(v, name, positive=True))
    if not isinstance(adapt_structure, (bool, np.bool_)):
        raise TypeError(expected("adapt_structure", "a bool", type(adapt_structure).__name__, raw=True))
    model.adapt_structure = bool(adapt_structure)
    check_key(key)
    shapes = model._shapes()
    keys = jax.random.split(key, 3)
    w = {}
    for k, name in zip(keys, _WEIGHTS):
        w[name] = _gauss(k, shapes[name], model.init_scale, 1.0 / np.sqrt(shapes[name][-2]))
    model.w_in, model.w_hidden = w["w_in"], w["w_hidden"]
    model.w_head = MeanFieldGaussian(jnp.zeros_like(w["w_head"].loc), w["w_head"].log_scale)
    model.gamma = jnp.zeros(model.mask_shape())
    model.sticks = model._prior_sticks()


class AbstractAdaptiveNetwork(eqx.Module):
    """A Bayesian residual network with beta-process depth and Bernoulli-process masks (the abstract base).

    The variational posterior and the prior are models of the same final class
    (:class:`~jaxcore.bnp.AdaptiveMLP` or :class:`~jaxcore.bnp.AdaptiveCNN`); this base holds everything
    they share: the prior (:meth:`init_prior`), the masks (:meth:`mask_logits`, :meth:`hard_masks`), the
    reparameterised noise (:meth:`sample_noise`), the KLs and the ELBO (:meth:`elbo`), the hand-over of a
    posterior to the next task (:meth:`posterior_to_prior`) and prediction (:meth:`predict_logits`).

    A concrete network declares the fields below (the variational parameters first, in this order, so that
    flattened optimiser states keep their layout; the configuration static), initialises them in its
    ``__init__`` with :func:`_init_network`, and writes its architecture: ``_shapes`` (the weight tensors'
    shapes), :meth:`mask_shape`, ``_check_x``, ``_features`` (inputs to the first layer's layout),
    ``_input_layer``, ``_hidden_layer`` and ``_head``. Concrete networks are final (equinox's abstract/final
    pattern): extend this base, never a network.

    ``h_0 = input_layer(x)``, ``h_k = hidden_layer(h_{k-1}; W_k, Z_k)`` (residual; an all-zero mask makes
    the layer the identity), ``logits_t = head_t(h_K)``.

    References:
        Thapa & Li, "Bayesian Adaptation of Network Depth and Width for Continual Learning", ICML 2024,
        Sec. 3 (eqs. 1-6).
    """

    # evaluated annotations (this module has no ``from __future__ import annotations``): equinox reads them
    gamma: eqx.AbstractVar[Array]
    sticks: eqx.AbstractVar[BetaSticks]
    w_head: eqx.AbstractVar[MeanFieldGaussian]
    w_hidden: eqx.AbstractVar[MeanFieldGaussian]
    w_in: eqx.AbstractVar[MeanFieldGaussian]
    in_features: eqx.AbstractVar[int]
    width: eqx.AbstractVar[int]
    truncation: eqx.AbstractVar[int]
    num_heads: eqx.AbstractVar[int]
    num_classes: eqx.AbstractVar[int]
    alpha: eqx.AbstractVar[float]
    beta: eqx.AbstractVar[float]
    prior_scale: eqx.AbstractVar[float]
    init_scale: eqx.AbstractVar[float]
    temperature: eqx.AbstractVar[float]
    prior_temperature: eqx.AbstractVar[float]
    adapt_structure: eqx.AbstractVar[bool]

    # ----- the architecture (each network's own) -----
    @abc.abstractmethod
    def _shapes(self) -> dict[str, tuple]:
        """The shapes of the weight tensors ``w_in``, ``w_hidden`` ``[K, ...]`` and ``w_head`` ``[T, ...]``."""

    @abc.abstractmethod
    def mask_shape(self) -> tuple:
        """Shape of the masks ``Z`` ``[K, ...]``."""

    @abc.abstractmethod
    def _check_x(self, x) -> None:
        """ValueError unless ``x`` has the network's input shape."""

    @abc.abstractmethod
    def _features(self, x):
        """The inputs in the first layer's layout."""

    @abc.abstractmethod
    def _input_layer(self, w_in, x):
        """``h_0`` from the features."""

    @abc.abstractmethod
    def _hidden_layer(self, h, w, z):
        """One residual layer ``h_k`` from ``h_{k-1}``, its weights ``w`` and masks ``z``."""

    @abc.abstractmethod
    def _head(self, w_head, h):
        """One task head's logits from ``h_K``."""

    def _check_xy(self, x, y):
        self._check_x(x)
        if jnp.shape(y) != jnp.shape(x)[:1]:
            raise ValueError(expected("y", f"shape [{jnp.shape(x)[0]}] (one label per row of x)",
                                      f"shape {jnp.shape(y)}", raw=True))

    def _forward(self, weights, z, x, task):
        """The network on given weights (a dict ``w_in``, ``w_hidden``, ``w_head`` of arrays) and masks."""
        h = self._input_layer(weights["w_in"], self._features(x))

        def layer(h, wz):
            return self._hidden_layer(h, *wz), None

        h, _ = jax.lax.scan(layer, h, (weights["w_hidden"], z), unroll=True)
        return self._head(weights["w_head"][task], h)

    # ----- parameters -----
    def _prior_sticks(self):
        return BetaSticks(jnp.full((self.truncation,), np.log(self.alpha), jnp.result_type(float)),
                          jnp.full((self.truncation,), np.log(self.beta), jnp.result_type(float)))

    def init_prior(self) -> "AbstractAdaptiveNetwork":
        """The task-1 prior: a model of the same type and configuration holding the prior's values.

        Weights ``N(0, prior_scale^2)``, ``gamma0 = 0``, sticks ``Beta(alpha, beta)``.

        Returns:
            the prior, same type, shapes and dtypes as ``self``.
        """
        shapes = self._shapes()
        new = (jnp.zeros(self.mask_shape()), self._prior_sticks())
        new += tuple(_gauss_prior(shapes[name], self.prior_scale) for name in ("w_head", "w_hidden", "w_in"))
        return eqx.tree_at(lambda m: (m.gamma, m.sticks, m.w_head, m.w_hidden, m.w_in), self, new)

    # ----- structure -----
    def _layer_broadcast(self, v):
        """Broadcast a per-layer ``[..., K]`` array against the mask ``[..., K, *rest]``."""
        extra = len(self.mask_shape()) - 1
        return v.reshape(v.shape + (1,) * extra)

    def mask_logits(self, log_pi, gamma):
        """``logit(pi_k) + gamma_k`` broadcast to the mask shape (``log_pi`` ``[..., K]``)."""
        return _bernoulli_process_logits(self._layer_broadcast(log_pi), gamma)

    def expected_log_pi(self):
        """``log E[pi_k] = sum_{j<=k} log(a_j / (a_j + b_j))`` under the stick posterior, ``[K]``."""
        a = jnp.exp(self.sticks.log_a)
        b = jnp.exp(self.sticks.log_b)
        return jnp.cumsum(jnp.log(a) - jnp.log(a + b))

    def hard_masks(self, adapt=True):
        """Test-time masks ``1[logit(E pi_k) + gamma > 0]``, bool ``mask_shape()``.

        For ``adapt_structure=False``, or ``adapt`` false (may be traced), every entry is True.
        """
        return _hard_masks_jit(self, adapt)

    def _hard_masks(self, adapt=True):
        if not self.adapt_structure:
            return jnp.ones(self.mask_shape(), bool)
        masks = self.mask_logits(self.expected_log_pi(), self.gamma) > 0
        return masks if adapt is True else masks | ~jnp.asarray(adapt, bool)

    # ----- noise and ELBO -----
    def sample_noise(self, key: PRNGKeyArray, num_samples: int) -> dict[str, jax.Array]:
        """All random draws of one ELBO estimate with ``S`` samples.

        Returns:
            dict: ``eps_in`` ``[S, D+1, W]``, ``eps_hidden`` ``[S, *mask_shape]``,
            ``eps_head`` ``[S, W+1, C]`` (standard normals); ``logistic``
            ``[S, *mask_shape]`` (logistic noise of the relaxed masks, ``L = logit(u)``);
            ``logistic_u`` ``[S, *mask_shape]``, the uniforms ``u`` (optional in
            :meth:`elbo_from_noise`, which then uses the two-softplus form of the mask KL); ``g1``,
            ``g0`` ``[S, K]`` (gamma draws with shapes ``a``, ``b``:
            ``nu = g1 / (g1 + g0)``, differentiable in ``a, b`` through implicit
            reparameterisation). Exposed so reference implementations can reproduce
            the estimate exactly.

        All draws come from one call of the bit generator, laid out sample by sample
        (``[S, words per sample]``: ``eps_in``, ``eps_hidden``, ``eps_head``, ``logistic``,
        then the gamma uniforms): uniforms on the open interval ``(0, 1)``, normals by the
        inverse CDF, logistic noise as ``log(u / (1 - u))``, Gamma draws by Marsaglia-Tsang
        with 8 proposals.
        """
        check_key(key)
        return _sample_noise_jit(self, key, check_int(num_samples, "num_samples", 1))

    def _sample_noise(self, key, num_samples: int):
        return self._noise_with_sticks(self._raw_noise(key, num_samples))

    def _noise_parts(self) -> dict[str, tuple]:
        """The per-sample draws of :meth:`_raw_noise` and their shapes, in the bit generator's word order."""
        shapes = self._shapes()
        parts = {"eps_in": shapes["w_in"], "eps_hidden": shapes["w_hidden"], "eps_head": shapes["w_head"][1:]}
        if self.adapt_structure:
            parts["logistic"] = self.mask_shape()
            parts["gamma"] = (2 * _GAMMA_PROPOSALS + 1, 2, self.truncation)
        return parts

    def _raw_noise(self, key, num_samples: int):
        """The parameter-free part of :meth:`sample_noise` (the gamma draws' uniforms as ``gamma_u``).

        The words of each sample are turned into floats in one step of a ``lax.scan`` over the
        samples, so that every float draw is computed once and stored: as one elementwise
        expression, XLA:CPU fuses the conversion (the inverse normal CDF's polynomials) into each of
        its consumers in the forward and the backward pass, and recomputes it there (at ``S = 10,
        K = 5, W = 128``: a third less time per SVI step with the scan, A/B on 2 cores; an
        ``optimization_barrier`` around the draws did not stop the fusion).
        """
        parts = self._noise_parts()
        sizes = [int(np.prod(v)) for v in parts.values()]
        # one call of the bit generator for every draw: each call is a separate threefry graph, which
        # costs compile time (about 0.5 s of CPU each) and a kernel launch
        words = _random_words(key, num_samples * sum(sizes)).reshape(num_samples, sum(sizes))
        dtype = jnp.result_type(float)

        def one_sample(_, w):
            u = _uniform_from_words(w, dtype)
            chunks = {n: c.reshape(parts[n]) for n, c in zip(parts, jnp.split(u, np.cumsum(sizes)[:-1]))}
            out = {n: _normal_from_uniform(chunks[n]) for n in ("eps_in", "eps_hidden", "eps_head")}
            if self.adapt_structure:
                lu = chunks["logistic"]
                # one logarithm per entry: 1 - u is exact for u >= 1/2 and u / (1 - u) is one rounding
                out["logistic"] = jnp.log(lu / (1.0 - lu))
                out["logistic_u"] = lu
                out["gamma_u"] = chunks["gamma"]
            return None, out

        _, out = jax.lax.scan(one_sample, None, words)
        if self.adapt_structure:
            out["gamma_u"] = jnp.moveaxis(out["gamma_u"], 0, 2)  # [S, 2 * 8 + 1, 2, K] -> [2 * 8 + 1, 2, S, K]
        return out

    def _noise_with_sticks(self, raw):
        """:meth:`sample_noise` from :meth:`_raw_noise`: the gamma draws (both in one call, one
        implicit-gradient graph, the largest part of the compile) depend on the stick parameters."""
        out = dict(raw)
        if self.adapt_structure:
            gu = out.pop("gamma_u")
            s = gu.shape[2]
            ab = jnp.exp(jnp.stack([self.sticks.log_a, self.sticks.log_b]))[:, None, :]
            g = _gamma_from_uniforms(jnp.broadcast_to(ab, (2, s, self.truncation)), gu)
            out["g1"], out["g0"] = g[0], g[1]
        return out

    def kl_gaussian(self, prior: "AbstractAdaptiveNetwork", task=None):
        """Closed-form KL of the Gaussian weights to ``prior``'s (nats, scalar).

        Shared layers always count; of the heads, only head ``task`` counts
        (all heads if ``task`` is None). Heads of other tasks get no gradient
        and keep their values.
        """
        total = 0.0
        for name in _WEIGHTS:
            q, p = getattr(self, name), getattr(prior, name)
            if name == "w_head" and task is not None:
                q = jax.tree.map(lambda v: v[task], q)
                p = jax.tree.map(lambda v: v[task], p)
            total = total + jnp.sum(_kl_normal(q.loc, jnp.exp(q.log_scale), p.loc, jnp.exp(p.log_scale)))
        return total

    def posterior_to_prior(self, prior: "AbstractAdaptiveNetwork", task) -> "AbstractAdaptiveNetwork":
        """The prior of the next task, ``self`` being the posterior after training ``task``.

        The posterior for shared layers and heads ``<= task``; heads of later tasks keep
        their current prior (at task 1: ``N(0, s0^2)``), since they have not seen data.

        Args:
            prior: the prior used for ``task``.
            task: int or int32 scalar.

        Returns:
            The new prior (same type and shapes).
        """
        trained = jnp.arange(self.num_heads) <= task
        head = jax.tree.map(
            lambda q, p: jnp.where(trained.reshape((-1,) + (1,) * (q.ndim - 1)), q, p), self.w_head, prior.w_head)
        return eqx.tree_at(lambda m: m.w_head, self, head)

    def kl_sticks(self, prior: "AbstractAdaptiveNetwork"):
        """Closed-form ``sum_k KL(Beta(a_k, b_k) || Beta(a0_k, b0_k))`` to ``prior``'s sticks (nats, scalar)."""
        if not self.adapt_structure:
            return 0.0
        q, p = self.sticks, prior.sticks
        return jnp.sum(_kl_beta(jnp.exp(q.log_a), jnp.exp(q.log_b), jnp.exp(p.log_a), jnp.exp(p.log_b)))

    def elbo(self, key: PRNGKeyArray, prior: "AbstractAdaptiveNetwork", x, y, task, num_data, num_samples: int = 1,
             kl_weight=1.0, adapt=True):
        """ELBO per datum with ``S`` Monte Carlo samples ``vmap``-ed.

        ``ELBO = (N / B) sum_b E_q[log p(y_b | x_b, W, Z)] - KL(q(W) || p(W))
        - KL(q(nu) || p(nu)) - E_q(nu)[KL(q(Z | nu) || p(Z | nu))]``, divided by ``N``;
        the first and last terms are estimated with the same ``S`` samples.

        Args:
            key: PRNG key of the draws (:meth:`sample_noise`).
            prior: the prior, a model of the same configuration (:meth:`init_prior` or a
                previous posterior).
            x: inputs ``[B, D]`` float (images ``[B, H, W, C]`` for the CNN).
            y: labels ``[B]`` int in ``[0, C)``.
            task: head index (int or int32 scalar).
            num_data: ``N``, the size of the task's training set (scales the likelihood).
            num_samples: ``S`` (static int >= 1).
            kl_weight: multiplies the KL terms (1 = the ELBO).
            adapt: structure adaptation on (default). A false value, which may be
                traced, gives plain VCL (all masks 1, no depth or mask KL; the
                sticks and ``gamma`` get zero gradients) in the same compiled
                function as the adaptive method.

        Returns:
            ``(elbo_per_datum, aux)`` (nats per datum), aux a dict with ``loglik`` (mean
            per datum), ``kl`` (total, nats) and ``accuracy`` (of the sampled networks).

        Raises:
            ValueError / TypeError: ``x``/``y`` shapes, an empty batch, ``num_samples`` or ``key``;
                concrete labels outside ``[0, num_classes)``, a concrete ``task`` outside
                ``[0, num_heads)``, concrete ``x`` with NaN/inf, a concrete ``num_data`` that is not
                finite and > 0 or ``kl_weight`` not finite and >= 0 (traced values are not checked).

        References:
            Thapa & Li, ICML 2024, eq. (7) (the relaxed ELBO); Nguyen et al., ICLR 2018, eq. (4).
        """
        check_key(key)
        self._check_xy(x, y)
        _check_model(prior, "prior")
        _check_task(self, task)
        _check_labels(self, y)
        _check_batch_values(x, num_data, kl_weight)
        return _elbo_jit(self, key, prior, x, y, *_traced(task, num_data, kl_weight),
                         check_int(num_samples, "num_samples", 1), adapt)

    def _elbo(self, key, prior, x, y, task, num_data, num_samples: int = 1, kl_weight=1.0, adapt=True):
        noise = self._noise_with_sticks(self._raw_noise(key, num_samples))
        return self._elbo_from_noise(prior, noise, x, y, task, num_data, kl_weight, adapt)

    def elbo_from_noise(self, prior: "AbstractAdaptiveNetwork", noise, x, y, task, num_data, kl_weight=1.0, adapt=True):
        """:meth:`elbo` with the draws of :meth:`sample_noise` given explicitly (deterministic).

        The per-sample weights and relaxed masks are formed for all ``S`` samples
        at once (elementwise); the network's forward pass is ``vmap``-ed over the
        samples. Parameters enter through a broadcast whose gradient
        sums over the samples with a matrix product: XLA's CPU reduction over a
        leading axis of ``[S, K, W + 1, W]`` took 1.0-1.5 ms at ``S = 10, K = 5,
        W = 64`` against 0.05 ms for the product (2 cores), and it dominated
        the backward pass.

        Raises:
            ValueError / TypeError: as :meth:`elbo`.
        """
        self._check_xy(x, y)
        _check_model(prior, "prior")
        _check_task(self, task)
        _check_labels(self, y)
        _check_batch_values(x, num_data, kl_weight)
        task, num_data, kl_weight = _traced(task, num_data, kl_weight)
        return _elbo_from_noise_jit(self, prior, noise, x, y, task, num_data, kl_weight, adapt)

    def _elbo_from_noise(self, prior, noise, x, y, task, num_data, kl_weight=1.0, adapt=True):
        structured = self.adapt_structure
        s = noise["eps_in"].shape[0]
        scale = {n: jnp.exp(getattr(self, n).log_scale) for n in _WEIGHTS}

        def sampled(loc, sd, eps):
            return _tile_samples(loc, s) + _tile_samples(sd, s) * eps

        w_in = sampled(self.w_in.loc, scale["w_in"], noise["eps_in"])
        w_hidden = sampled(self.w_hidden.loc, scale["w_hidden"], noise["eps_hidden"])
        w_head = sampled(self.w_head.loc[task], scale["w_head"][task], noise["eps_head"])
        if structured:
            g1, g0 = noise["g1"], noise["g0"]
            tiny = jnp.finfo(g1.dtype).tiny
            log_nu = jnp.log(jnp.maximum(g1, tiny)) - jnp.log(jnp.maximum(g1 + g0, tiny))
            log_pi = jnp.cumsum(log_nu, axis=-1)  # [S, K] log stick-breaking weights, no underflow
            logistic = noise["logistic"]
            q_logits = self.mask_logits(log_pi, _tile_samples(self.gamma, s))
            z = jax.nn.sigmoid((q_logits + logistic) / self.temperature)
            kl_z = self._mask_kl_sum(log_pi, q_logits, self.gamma, prior.gamma, logistic,
                                     noise.get("logistic_u")) / s
            kl_z = kl_z + self.kl_sticks(prior)
            if adapt is not True:
                on = jnp.asarray(adapt, bool)
                z = jnp.where(on, z, jnp.ones_like(z))
                kl_z = jnp.where(on, kl_z, 0.0)
        else:
            z = jnp.ones((s,) + self.mask_shape(), x.dtype)
            kl_z = 0.0

        def one_sample(w_in, w_hidden, w_head, z):
            logits = self._forward({"w_in": w_in, "w_hidden": w_hidden, "w_head": w_head[None]}, z, x, 0)
            logp = jax.nn.log_softmax(logits)
            ll = jnp.take_along_axis(logp, y[:, None], axis=-1)[:, 0]
            acc = jnp.mean(jnp.argmax(logits, -1) == y)
            return jnp.mean(ll), acc

        ll, acc = jax.vmap(one_sample)(w_in, w_hidden, w_head, z)
        kl = self.kl_gaussian(prior, task) + kl_z
        loglik = jnp.mean(ll)
        elbo = loglik - kl_weight * kl / num_data
        return elbo, {"loglik": loglik, "kl": kl, "accuracy": jnp.mean(acc)}

    def _mask_kl_sum(self, log_pi, q_logits, gamma, gamma0, logistic, u=None):
        """``sum_s sum_i [log q(y_si) - log p(y_si)]`` of the relaxed masks, one draw per sample.

        ``y = (q + L) / tau`` with ``q = logit(pi) + gamma``, ``p = logit(pi) + gamma0``
        and ``L = logit(u)`` (``u``: the uniforms; without them the softplus form below is used). With
        equal temperatures the logit-space log-ratio simplifies exactly to
        ``(gamma - gamma0) + 2 softplus(d - L) - 2 softplus(-L)``, ``d = gamma0 - gamma``
        (``pi`` cancels, see the module docstring), and
        ``softplus(d - L) - softplus(-L) = log(u + e^d (1 - u)) = m + log(u e^-m + e^(d-m) (1 - u))``
        with ``m = max(d, 0)``: one logarithm per entry, the exponentials on the
        ``[*mask_shape]`` parameters only, and an argument ``>= min(u, 1 - u) > 0``.
        """
        s = logistic.shape[0]
        if self.temperature == self.prior_temperature:
            d = gamma0 - gamma
            if u is None:  # the softplus form (sigmoid(L) rounds to 1 for the largest L in float32)
                sp = jnp.sum(jax.nn.softplus(_tile_samples(d, s) - logistic)) - jnp.sum(jax.nn.softplus(-logistic))
            else:
                m = jnp.maximum(d, 0.0)
                a, b = _tile_samples(jnp.exp(-m), s), _tile_samples(jnp.exp(d - m), s)
                sp = jnp.sum(jnp.log(u * a + (1.0 - u) * b)) + s * jnp.sum(m)
            return s * jnp.sum(gamma - gamma0) + 2.0 * sp
        p_logits = self.mask_logits(log_pi, _tile_samples(gamma0, s))
        return jnp.sum(_kl_relaxed_from_noise(logistic, q_logits, p_logits, self.temperature, self.prior_temperature))

    # ----- prediction -----
    def predict_logits(self, masks, x, task):
        """Test-time logits with posterior-mean weights and hard masks.

        Args:
            masks: bool ``mask_shape()`` (e.g. the masks stored for the task, :meth:`hard_masks`).
            x: inputs ``[B, ...]`` float.
            task: head index (int or int32 scalar).

        Returns:
            logits ``[B, C]`` float.

        Raises:
            ValueError: ``x`` or ``masks`` of the wrong shape, a concrete ``task`` outside ``[0, num_heads)``.
        """
        self._check_x(x)
        check_shape(masks, "masks", self.mask_shape())
        _check_task(self, task)
        return _predict_logits_jit(self, masks, x, jnp.asarray(task, jnp.int32))

    def _predict_logits(self, masks, x, task):
        weights = {n: getattr(self, n).loc for n in _WEIGHTS}
        return self._forward(weights, masks.astype(x.dtype), x, task)

    def layer_active(self, masks):
        """Per-layer activity ``[K]`` bool: a hidden layer is active iff any mask entry is on."""
        return jnp.any(masks.reshape(masks.shape[0], -1), axis=-1)


def _check_batch_values(x, num_data, kl_weight):
    """Host checks of an ELBO's batch and scalars (concrete values only; traced ones are the caller's)."""
    if jnp.shape(x)[0] == 0:
        raise ValueError(expected("x", "at least one row (an empty batch has no likelihood)",
                                  f"shape {jnp.shape(x)}", raw=True))
    check_finite(x, "x")
    if is_concrete(num_data):
        check_scalar(num_data, "num_data", positive=True)
    if is_concrete(kl_weight):
        check_scalar(kl_weight, "kl_weight", nonnegative=True)


def _traced(task, num_data, kl_weight):
    """Head index, data size and KL weight as arrays, so that other values reuse the compiled program."""
    dtype = jnp.result_type(float)
    return (jnp.asarray(task, jnp.int32), jnp.asarray(num_data, jnp.result_type(num_data, dtype)),
            jnp.asarray(kl_weight, jnp.result_type(kl_weight, dtype)))


# one compiled program per public method (the model is a pytree argument: its configuration selects
# the compilation, its arrays are traced)
_hard_masks_jit = eqx.filter_jit(lambda model, adapt: model._hard_masks(adapt))
_sample_noise_jit = eqx.filter_jit(lambda model, key, num_samples: model._sample_noise(key, num_samples))
_elbo_jit = eqx.filter_jit(lambda model, key, prior, x, y, task, num_data, kl_weight, num_samples, adapt:
                           model._elbo(key, prior, x, y, task, num_data, num_samples, kl_weight, adapt))
_elbo_from_noise_jit = eqx.filter_jit(lambda model, *args: model._elbo_from_noise(*args))
_predict_logits_jit = eqx.filter_jit(lambda model, *args: model._predict_logits(*args))
