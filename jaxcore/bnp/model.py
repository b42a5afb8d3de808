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
  (:class:`~jaxcore.bnp.distributions.StickBreakingBetaProcess`); posterior
  ``Beta(a_k, b_k)``;
- width: ``Z_k[i, j] | pi ~ Bernoulli(sigmoid(logit(pi_k) + gamma0_k[i, j]))``
  (``gamma0 = 0`` at task 1), posterior ``sigmoid(logit(pi_k) + gamma_k[i, j])``,
  relaxed to a binary Concrete of temperature ``tau`` during training and
  thresholded (``logit(E pi_k) + gamma > 0``) at test.

After a task the prior becomes the posterior (:mod:`jaxcore.bnp.continual`).

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

Inference: an **optax** Adam loop inside ``lax.scan`` (:func:`fit`) over an ELBO
built from the numpyro-compatible pieces of this family: closed-form Gaussian and
Beta KLs (:mod:`jaxcore.bnp.kl`), the logit-space relaxed-Bernoulli density of
:class:`~jaxcore.bnp.distributions.LogitRelaxedBernoulli` for the Monte Carlo mask
KL, and reparameterised Beta sticks (:func:`~jaxcore.bnp.distributions.gamma_rsample`).
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

from __future__ import annotations

import functools
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .distributions import (
    _GAMMA_PROPOSALS,
    _check_int,
    _check_positive,
    _gamma_from_uniforms,
    _normal_from_uniform,
    _uniform_open,
    bernoulli_process_logits,
)
from .kl import _kl_relaxed_from_noise, kl_beta, kl_normal

__all__ = ["AdaptiveCNN", "AdaptiveMLP", "FitState", "fit", "make_svi_step"]

Params = dict[str, Any]


def _gauss(key, shape, init_scale, loc_scale):
    return {
        "loc": loc_scale * jax.random.normal(key, shape),
        "log_scale": jnp.full(shape, np.log(init_scale), jnp.result_type(float)),  # not weak-typed
    }


def _gauss_prior(shape, scale):
    return {"loc": jnp.zeros(shape), "log_scale": jnp.full(shape, np.log(scale), jnp.result_type(float))}


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


class AdaptiveMLP(eqx.Module):
    """Bayesian residual MLP with beta-process depth and Bernoulli-process per-weight masks.

    Static configuration (an ``eqx.Module`` with no arrays); parameters and
    priors are separate pytrees (dicts) so that they can be ``vmap``-ed over
    seeds and stored per task.

    Attributes:
        in_features: ``D``, input dimension (inputs ``[batch, D]``, float).
        width: ``W``, hidden units of every hidden layer.
        truncation: ``K``, the maximum depth (number of residual hidden layers).
        num_heads: number of task heads ``T``.
        num_classes: classes per head ``C``.
        alpha, beta: stick-breaking prior ``nu_k ~ Beta(alpha, beta)``.
        prior_scale: weight prior standard deviation ``s0`` at task 1.
        init_scale: initial posterior standard deviation of the weights.
        temperature: posterior Concrete temperature ``tau`` (0.05-0.3 is safe).
        prior_temperature: prior Concrete temperature.
        adapt_structure: if False, no masks and no depth variables: plain VCL
            with all ``K`` hidden layers on (the "VCL" baseline).

    Raises:
        ValueError / TypeError: invalid sizes, concentrations or temperatures.

    References:
        Thapa & Li, "Bayesian Adaptation of Network Depth and Width for
        Continual Learning", ICML 2024, Sec. 3.
    """

    in_features: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    truncation: int = eqx.field(static=True)
    num_heads: int = eqx.field(static=True)
    num_classes: int = eqx.field(static=True)
    alpha: float = eqx.field(static=True, default=2.0)
    beta: float = eqx.field(static=True, default=1.0)
    prior_scale: float = eqx.field(static=True, default=1.0)
    init_scale: float = eqx.field(static=True, default=0.05)
    temperature: float = eqx.field(static=True, default=0.2)
    prior_temperature: float = eqx.field(static=True, default=0.2)
    adapt_structure: bool = eqx.field(static=True, default=True)

    def __check_init__(self):
        _check_int("in_features", self.in_features, 1)
        _check_int("width", self.width, 1)
        _check_int("truncation", self.truncation, 1)
        _check_int("num_heads", self.num_heads, 1)
        _check_int("num_classes", self.num_classes, 2)
        for name in ("alpha", "beta", "prior_scale", "init_scale", "temperature", "prior_temperature"):
            _check_positive(name, getattr(self, name))

    # ----- shapes of the architecture (overridden by AdaptiveCNN) -----
    def _shapes(self) -> dict[str, tuple]:
        d, w, k = self.in_features, self.width, self.truncation
        return {
            "w_in": (d + 1, w),
            "w_hidden": (k, w + 1, w),
            "w_head": (self.num_heads, w + 1, self.num_classes),
        }

    def mask_shape(self) -> tuple:
        """Shape of the mask ``Z``: ``[K, W + 1, W]`` (one entry per hidden weight and bias)."""
        return self._shapes()["w_hidden"]

    def _check_x(self, x):
        if x.ndim != 2 or x.shape[-1] != self.in_features:
            raise ValueError(f"x must have shape [batch, {self.in_features}], got {x.shape}")

    def _features(self, x):
        return x

    def _input_layer(self, w_in, x):
        return jax.nn.relu(_augment(x) @ w_in)

    def _hidden_layer(self, h, w, z):
        return h + jax.nn.relu(_augment(h) @ (w * z))

    def _head(self, w_head, h):
        return _augment(h) @ w_head

    def _forward(self, weights, z, x, task):
        h = self._input_layer(weights["w_in"], self._features(x))

        def layer(h, wz):
            return self._hidden_layer(h, *wz), None

        h, _ = jax.lax.scan(layer, h, (weights["w_hidden"], z), unroll=True)
        return self._head(weights["w_head"][task], h)

    # ----- parameters -----
    def init(self, key) -> Params:
        """Initial variational parameters.

        Returns:
            dict with Gaussian ``{"loc", "log_scale"}`` for ``w_in``, ``w_hidden``,
            ``w_head``; ``gamma`` (mask logit offsets, ``mask_shape()``, zeros) and
            ``sticks`` ``{"log_a", "log_b"}`` ``[K]`` (the prior's values).
        """
        shapes = self._shapes()
        keys = jax.random.split(key, 3)
        params = {}
        for k, name in zip(keys, ("w_in", "w_hidden", "w_head")):
            fan_in = shapes[name][-2]
            params[name] = _gauss(k, shapes[name], self.init_scale, 1.0 / np.sqrt(fan_in))
        params["w_head"]["loc"] = jnp.zeros_like(params["w_head"]["loc"])
        params["gamma"] = jnp.zeros(self.mask_shape())
        params["sticks"] = {
            "log_a": jnp.full((self.truncation,), np.log(self.alpha), jnp.result_type(float)),
            "log_b": jnp.full((self.truncation,), np.log(self.beta), jnp.result_type(float)),
        }
        return params

    def init_prior(self) -> Params:
        """The task-1 prior, with the same structure as :meth:`init`'s output."""
        shapes = self._shapes()
        prior = {name: _gauss_prior(shapes[name], self.prior_scale) for name in ("w_in", "w_hidden", "w_head")}
        prior["gamma"] = jnp.zeros(self.mask_shape())
        prior["sticks"] = {
            "log_a": jnp.full((self.truncation,), np.log(self.alpha), jnp.result_type(float)),
            "log_b": jnp.full((self.truncation,), np.log(self.beta), jnp.result_type(float)),
        }
        return prior

    # ----- structure -----
    def _layer_broadcast(self, v):
        """Broadcast a per-layer ``[..., K]`` array against the mask ``[..., K, *rest]``."""
        extra = len(self.mask_shape()) - 1
        return v.reshape(v.shape + (1,) * extra)

    def mask_logits(self, log_pi, gamma):
        """``logit(pi_k) + gamma_k`` broadcast to the mask shape."""
        return bernoulli_process_logits(self._layer_broadcast(log_pi), gamma)

    def expected_log_pi(self, params):
        """``log E[pi_k] = sum_{j<=k} log(a_j / (a_j + b_j))`` under the stick posterior, ``[K]``."""
        a = jnp.exp(params["sticks"]["log_a"])
        b = jnp.exp(params["sticks"]["log_b"])
        return jnp.cumsum(jnp.log(a) - jnp.log(a + b))

    def hard_masks(self, params, adapt=True):
        """Test-time masks ``1[logit(E pi_k) + gamma > 0]``, bool ``mask_shape()``.

        For ``adapt_structure=False``, or ``adapt`` false (may be traced), every entry is True.
        """
        if not self.adapt_structure:
            return jnp.ones(self.mask_shape(), bool)
        masks = self.mask_logits(self.expected_log_pi(params), params["gamma"]) > 0
        return masks if adapt is True else masks | ~jnp.asarray(adapt, bool)

    # ----- noise and ELBO -----
    def sample_noise(self, key, params, num_samples: int):
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

        All draws come from one call of the bit generator: uniforms on the open
        interval ``(0, 1)``, normals by the inverse CDF, logistic noise as
        ``log(u / (1 - u))``, Gamma draws by Marsaglia-Tsang with 8 proposals.
        """
        return self._noise_with_sticks(self._raw_noise(key, num_samples), params)

    def _raw_noise(self, key, num_samples: int):
        """The parameter-free part of :meth:`sample_noise` (the gamma draws' uniforms as ``gamma_u``)."""
        shapes = self._shapes()
        s = num_samples
        parts = {
            "eps_in": (s,) + shapes["w_in"],
            "eps_hidden": (s,) + shapes["w_hidden"],
            "eps_head": (s,) + shapes["w_head"][1:],
        }
        if self.adapt_structure:
            parts["logistic"] = (s,) + self.mask_shape()
            parts["gamma"] = (2, 2 * _GAMMA_PROPOSALS + 1, s, self.truncation)
        # one call of the bit generator for every draw: each call is a separate threefry graph, which
        # costs compile time (about 0.5 s of CPU each) and a kernel launch
        sizes = [int(np.prod(v)) for v in parts.values()]
        u = _uniform_open(key, (sum(sizes),), jnp.result_type(float))
        chunks = dict(zip(parts, jnp.split(u, np.cumsum(sizes)[:-1])))
        out = {n: _normal_from_uniform(chunks[n]).reshape(parts[n]) for n in ("eps_in", "eps_hidden", "eps_head")}
        if self.adapt_structure:
            lu = chunks["logistic"].reshape(parts["logistic"])
            # one logarithm per entry: 1 - u is exact for u >= 1/2 and u / (1 - u) is one rounding
            out["logistic"] = jnp.log(lu / (1.0 - lu))
            out["logistic_u"] = lu
            out["gamma_u"] = jnp.swapaxes(chunks["gamma"].reshape(parts["gamma"]), 0, 1)  # [2 * 8 + 1, 2, S, K]
        return out

    def _noise_with_sticks(self, raw, params):
        """:meth:`sample_noise` from :meth:`_raw_noise`: the gamma draws (both in one call, one
        implicit-gradient graph, the largest part of the compile) depend on the stick parameters."""
        out = dict(raw)
        if self.adapt_structure:
            gu = out.pop("gamma_u")
            s = gu.shape[2]
            ab = jnp.exp(jnp.stack([params["sticks"]["log_a"], params["sticks"]["log_b"]]))[:, None, :]
            g = _gamma_from_uniforms(jnp.broadcast_to(ab, (2, s, self.truncation)), gu)
            out["g1"], out["g0"] = g[0], g[1]
        return out

    def kl_gaussian(self, params, prior, task=None):
        """Closed-form KL of the Gaussian weights (nats, scalar).

        Shared layers always count; of the heads, only head ``task`` counts
        (all heads if ``task`` is None). Heads of other tasks get no gradient
        and keep their values.
        """
        total = 0.0
        for name in ("w_in", "w_hidden", "w_head"):
            q, p = params[name], prior[name]
            if name == "w_head" and task is not None:
                q = jax.tree.map(lambda v: v[task], q)
                p = jax.tree.map(lambda v: v[task], p)
            total = total + jnp.sum(
                kl_normal(q["loc"], jnp.exp(q["log_scale"]), p["loc"], jnp.exp(p["log_scale"]))
            )
        return total

    def posterior_to_prior(self, prior, params, task):
        """The prior of the next task: the posterior for shared layers and heads ``<= task``.

        Heads of later tasks keep their current prior (at task 1: ``N(0, s0^2)``),
        since they have not seen data.

        Args:
            prior: the prior used for ``task``.
            params: the posterior after training ``task``.
            task: int or int32 scalar.

        Returns:
            The new prior (same structure).
        """
        new = dict(params)
        trained = jnp.arange(self.num_heads) <= task
        new["w_head"] = jax.tree.map(
            lambda q, p: jnp.where(trained.reshape((-1,) + (1,) * (q.ndim - 1)), q, p),
            params["w_head"], prior["w_head"],
        )
        return new

    def kl_sticks(self, params, prior):
        """Closed-form ``sum_k KL(Beta(a_k, b_k) || Beta(a0_k, b0_k))`` (nats, scalar)."""
        if not self.adapt_structure:
            return 0.0
        q, p = params["sticks"], prior["sticks"]
        return jnp.sum(kl_beta(jnp.exp(q["log_a"]), jnp.exp(q["log_b"]), jnp.exp(p["log_a"]), jnp.exp(p["log_b"])))

    def elbo(self, params, prior, key, x, y, task, num_data, num_samples: int = 1, kl_weight=1.0, adapt=True):
        """ELBO per datum with ``S`` Monte Carlo samples ``vmap``-ed.

        ``ELBO = (N / B) sum_b E_q[log p(y_b | x_b, W, Z)] - KL(q(W) || p(W))
        - KL(q(nu) || p(nu)) - E_q(nu)[KL(q(Z | nu) || p(Z | nu))]``, divided by ``N``;
        the first and last terms are estimated with the same ``S`` samples.

        Args:
            params: variational parameters (:meth:`init`).
            prior: prior parameters (:meth:`init_prior` or a previous posterior).
            key: PRNG key.
            x: inputs ``[B, D]`` float (images ``[B, H, W, C]`` for the CNN).
            y: labels ``[B]`` int in ``[0, C)``.
            task: head index (int or int32 scalar).
            num_data: ``N``, the size of the task's training set (scales the likelihood).
            num_samples: ``S`` (static int).
            kl_weight: multiplies the KL terms (1 = the ELBO).
            adapt: structure adaptation on (default). A false value, which may be
                traced, gives plain VCL (all masks 1, no depth or mask KL; the
                sticks and ``gamma`` get zero gradients) in the same compiled
                function as the adaptive method.

        Returns:
            ``(elbo_per_datum, aux)``, aux a dict with ``loglik`` (mean per datum),
            ``kl`` (total, nats) and ``accuracy`` (of the sampled networks).
        """
        self._check_x(x)
        if y.shape != x.shape[:1]:
            raise ValueError(f"y must have shape [{x.shape[0]}] (one label per row of x), got {y.shape}")
        # materialise the draws: otherwise XLA fuses the generator (threefry, erf_inv) into each consumer
        # and recomputes it in the forward and the backward pass (19.0 -> 12.5 ms per SVI step at the
        # default benchmark size, 2 cores)
        noise = self._noise_with_sticks(jax.lax.optimization_barrier(self._raw_noise(key, num_samples)), params)
        return self.elbo_from_noise(params, prior, noise, x, y, task, num_data, kl_weight, adapt)

    def elbo_from_noise(self, params, prior, noise, x, y, task, num_data, kl_weight=1.0, adapt=True):
        """:meth:`elbo` with the draws of :meth:`sample_noise` given explicitly.

        The per-sample weights and relaxed masks are formed for all ``S`` samples
        at once (elementwise); the network's forward pass is ``vmap``-ed over the
        samples. Parameters enter through :func:`_tile_samples`, whose gradient
        sums over the samples with a matrix product: XLA's CPU reduction over a
        leading axis of ``[S, K, W + 1, W]`` took 1.0-1.5 ms at ``S = 10, K = 5,
        W = 64`` against 0.05 ms for the product (2 cores), and it dominated
        the backward pass.
        """
        structured = self.adapt_structure
        s = noise["eps_in"].shape[0]
        scale = {n: jnp.exp(params[n]["log_scale"]) for n in ("w_in", "w_hidden", "w_head")}

        def sampled(loc, sd, eps):
            return _tile_samples(loc, s) + _tile_samples(sd, s) * eps

        w_in = sampled(params["w_in"]["loc"], scale["w_in"], noise["eps_in"])
        w_hidden = sampled(params["w_hidden"]["loc"], scale["w_hidden"], noise["eps_hidden"])
        w_head = sampled(params["w_head"]["loc"][task], scale["w_head"][task], noise["eps_head"])
        if structured:
            g1, g0 = noise["g1"], noise["g0"]
            tiny = jnp.finfo(g1.dtype).tiny
            log_nu = jnp.log(jnp.maximum(g1, tiny)) - jnp.log(jnp.maximum(g1 + g0, tiny))
            log_pi = jnp.cumsum(log_nu, axis=-1)  # [S, K] log stick-breaking weights, no underflow
            logistic = noise["logistic"]
            q_logits = self.mask_logits(log_pi, _tile_samples(params["gamma"], s))
            z = jax.nn.sigmoid((q_logits + logistic) / self.temperature)
            kl_z = self._mask_kl_sum(log_pi, q_logits, params["gamma"], prior["gamma"], logistic,
                                     noise.get("logistic_u")) / s
            kl_z = kl_z + self.kl_sticks(params, prior)
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
        kl = self.kl_gaussian(params, prior, task) + kl_z
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
    def predict_logits(self, params, masks, x, task):
        """Test-time logits with posterior-mean weights and hard masks.

        Args:
            params: variational parameters.
            masks: bool ``mask_shape()`` (e.g. the masks stored for the task).
            x: inputs ``[B, ...]``.
            task: head index.

        Returns:
            logits ``[B, C]``.
        """
        self._check_x(x)
        if tuple(masks.shape) != tuple(self.mask_shape()):
            raise ValueError(f"masks must have shape {self.mask_shape()}, got {tuple(masks.shape)}")
        weights = {n: params[n]["loc"] for n in ("w_in", "w_hidden", "w_head")}
        return self._forward(weights, masks.astype(x.dtype), x, task)

    def layer_active(self, masks):
        """Per-layer activity ``[K]`` bool: a hidden layer is active iff any mask entry is on."""
        return jnp.any(masks.reshape(masks.shape[0], -1), axis=-1)


class AdaptiveCNN(AdaptiveMLP):
    """Small Bayesian residual CNN with beta-process depth and per-channel Bernoulli-process masks.

    ``h_0 = relu(conv3x3(x))`` (``in_channels -> width`` channels), then ``K``
    residual layers ``h_k = h_{k-1} + relu(conv3x3(h_{k-1}; W_k) * z_k + b_k * z_k)``
    with masks ``z_k`` ``[width]`` on output channels, global average pooling and
    task heads. Inputs are images ``[batch, H, W, in_channels]``; ``in_features``
    is ``in_channels``. Weight tensors are stored flattened as ``[9 * C_in + 1, C_out]``
    (HWIO then the bias row), so every method of :class:`AdaptiveMLP` applies.
    """

    def _shapes(self):
        c, w, k = self.in_features, self.width, self.truncation
        return {
            "w_in": (9 * c + 1, w),
            "w_hidden": (k, 9 * w + 1, w),
            "w_head": (self.num_heads, w + 1, self.num_classes),
        }

    def mask_shape(self):
        """Per-channel masks ``[K, width]``."""
        return (self.truncation, self.width)

    def _check_x(self, x):
        if not ((x.ndim == 4 and x.shape[-1] == self.in_features) or (x.ndim == 2 and x.shape[-1] % self.in_features == 0)):
            raise ValueError(
                f"x must have shape [batch, H, W, {self.in_features}] or flattened [batch, H*W*{self.in_features}], "
                f"got {x.shape}")

    def _features(self, x):
        if x.ndim == 2:  # flattened square images [B, side * side * C]
            side = int(round((x.shape[-1] // self.in_features) ** 0.5))
            return x.reshape(x.shape[0], side, side, self.in_features)
        return x

    @staticmethod
    def _conv(h, w_flat):
        """3x3 "SAME" convolution as a product of image patches with the flattened kernel.

        The samples' kernels differ, so under ``vmap`` a convolution becomes a
        grouped convolution, which XLA's CPU backend runs slowly; patches times
        kernel is a batched matrix product instead.
        """
        cin = (w_flat.shape[0] - 1) // 9
        patches = jax.lax.conv_general_dilated_patches(
            h, (3, 3), (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))  # [B, H, W, cin * 9], (c, kh, kw)
        kernel = w_flat[:-1].reshape(3, 3, cin, w_flat.shape[1]).transpose(2, 0, 1, 3).reshape(9 * cin, -1)
        return patches @ kernel + w_flat[-1]

    def _input_layer(self, w_in, x):
        return jax.nn.relu(self._conv(x, w_in))

    def _hidden_layer(self, h, w, z):
        return h + jax.nn.relu(self._conv(h, w) * z)

    def _head(self, w_head, h):
        return _augment(jnp.mean(h, axis=(1, 2))) @ w_head


class FitState(eqx.Module):
    """State of :func:`fit`: variational parameters and the optax state."""

    params: Any
    opt_state: Any


def make_svi_step(model: AdaptiveMLP, optimizer: optax.GradientTransformation, num_samples: int, kl_weight=1.0,
                  adapt=True):
    """One stochastic variational step: ELBO gradient with ``S`` vmapped samples + optax update.

    Returns:
        ``step(state, prior, key, x, y, task, num_data) -> (state, loss)`` with
        ``loss = -ELBO / N`` (nats per datum); pure and ``jit``-able.
    """
    num_samples = _check_int("num_samples", num_samples, 1)

    def loss_fn(params, prior, key, x, y, task, num_data):
        elbo, aux = model.elbo(params, prior, key, x, y, task, num_data, num_samples, kl_weight, adapt)
        return -elbo, aux

    def step(state: FitState, prior, key, x, y, task, num_data):
        (loss, _), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, prior, key, x, y, task, num_data)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        return FitState(optax.apply_updates(state.params, updates), opt_state), loss

    return step


def fit(
    model: AdaptiveMLP,
    params,
    prior,
    key,
    x,
    y,
    num_valid,
    task,
    *,
    num_steps: int,
    batch_size: int,
    num_samples: int = 4,
    learning_rate: float = 1e-3,
    kl_weight=1.0,
    adapt=True,
):
    """Maximise the ELBO of one task with Adam over random minibatches (a ``lax.scan``).

    Args:
        model: the network configuration.
        params: initial variational parameters (e.g. the previous posterior).
        prior: the prior (the previous posterior, or :meth:`AdaptiveMLP.init_prior`).
        key: PRNG key.
        x: padded training inputs ``[N_max, ...]``; y: labels ``[N_max]`` int.
        num_valid: number of real rows ``N <= N_max`` (rows past it are padding).
        task: head index.
        num_steps, batch_size, num_samples: static ints.
        learning_rate: Adam step size; may be traced.
        kl_weight: KL multiplier (1 = ELBO); may be traced.
        adapt: structure adaptation switch (see :meth:`AdaptiveMLP.elbo`); may be traced.

    Returns:
        ``(params, losses)``: fitted parameters and ``[num_steps]`` losses (-ELBO per datum).

    Raises:
        ValueError / TypeError: ``num_steps`` or ``batch_size`` not a positive int, ``y`` not one
            label per row of ``x``, or a concrete ``num_valid`` outside ``[1, N_max]``.
    """
    num_steps = _check_int("num_steps", num_steps, 1)
    batch_size = _check_int("batch_size", batch_size, 1)
    if jnp.ndim(x) < 1 or jnp.shape(y) != jnp.shape(x)[:1]:
        raise ValueError(f"y must have shape [N_max] (one label per row of x {jnp.shape(x)}), got {jnp.shape(y)}")
    try:
        n_valid = int(num_valid)
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError, TypeError):
        n_valid = None  # traced (inside jit/vmap): not checked here
    if n_valid is not None:
        if not 1 <= n_valid <= jnp.shape(x)[0]:
            raise ValueError(f"num_valid must be in [1, {jnp.shape(x)[0]}] (rows of x), got {n_valid}")
    optimizer = optax.flatten(optax.adam(learning_rate))  # one flat moment vector: ~1 s less compile per fit
    step = make_svi_step(model, optimizer, num_samples, kl_weight, adapt)
    state = FitState(params, optimizer.init(params))
    num_valid_f = jnp.asarray(num_valid, jnp.float32)

    def body(state, k):
        kb, ks = jax.random.split(k)
        idx = jax.random.randint(kb, (batch_size,), 0, num_valid)
        return step(state, prior, ks, x[idx], y[idx], task, num_valid_f)

    state, losses = jax.lax.scan(body, state, jax.random.split(key, num_steps))
    return state.params, losses
