"""A numpyro latent-graph model (a DiBS-style continuous relaxation) fitted with numpyro's SVI.

Model (linear-Gaussian SEM on standardised data)::

    Z_ij ~ Normal(0, 1)                 latent edge logits, i != j
    W_ij ~ Normal(0, weight_scale^2)    edge weights
    G    = sigmoid(alpha Z)             soft adjacency (diagonal masked)
    factor(-beta h(G)),  h(G) = tr(exp(G ∘ G)) - d    (NOTEARS acyclicity; 0 iff G is a DAG)
    x_n  ~ Normal(x_n (G ∘ W), sigma^2)

A mean-field Gaussian guide (``AutoNormal``) is fitted by SVI (``Trace_ELBO``, Adam).
Graphs are then drawn from the guide as ``G_ij ~ Bernoulli(sigmoid(alpha Z_ij))``; cyclic
draws are discarded and the acyclic ones are weighted either uniformly or, as in DiBS+, by
their exact BGe marginal likelihood (self-normalised over the draws).

References:
    L. Lorch, J. Rothfuss, B. Schölkopf, A. Krause, "DiBS: differentiable Bayesian structure
    learning", NeurIPS 2021 (the relaxation and the DiBS+ weighting); X. Zheng, B. Aragam,
    P. Ravikumar, E. P. Xing, "DAGs with NO TEARS", NeurIPS 2018 (``h``).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxcore._util import Progress, check_choice, check_int, check_key, check_progress, check_scalar, is_concrete

from .graphs import _acyclic_residual, _adj_to_parents, _compress
from .samples import DAGSamples
from .scores import bge_local_scores, check_data

__all__ = ["DiBSResult", "dibs_model", "dibs_svi"]


class DiBSResult(NamedTuple):
    """Result of :func:`dibs_svi`.

    Attributes:
        samples: :class:`DAGSamples` of ``num_particles`` graphs (cyclic draws carry weight 0).
        losses: ``[num_steps]`` negative ELBO at each SVI step (nats).
        acyclic_fraction: scalar fraction of the drawn graphs that are acyclic.

    Examples:
        >>> from jaxcore.causal import DiBSResult
        >>> DiBSResult._fields  # doctest: +ELLIPSIS
        (...)
    """

    samples: DAGSamples
    losses: Float[Array, " num_steps"]
    acyclic_fraction: Float[Array, ""]


def dibs_model(x, *, alpha=2.0, beta=5.0, weight_scale=1.0, sigma=1.0):
    """The numpyro model above; ``x`` is ``[N, d]`` standardised data (a numpyro model function).

    Args:
        x: ``[N, d]`` float data.
        alpha: sigmoid slope of the relaxation.
        beta: weight of the acyclicity penalty.
        weight_scale: prior standard deviation of the edge weights.
        sigma: observation noise standard deviation.

    Returns:
        None (numpyro records the sample sites ``Z``, ``W``, ``x`` and the factor).

    Raises:
        ImportError: numpyro is not installed (``pip install numpyro``).
        ValueError / TypeError: (concrete arguments) ``x`` not ``[N, d]`` finite data; ``alpha``,
            ``weight_scale``, ``sigma`` not finite and > 0; ``beta`` not finite and >= 0.

    References:
        L. Lorch et al., "DiBS: differentiable Bayesian structure learning", NeurIPS 2021.

    Examples:
        >>> import jax, numpy as np
        >>> from numpyro import handlers
        >>> from jaxcore.causal import dibs_model
        >>> x = np.zeros((4, 2), np.float32)
        >>> tr = handlers.trace(handlers.seed(dibs_model, jax.random.key(0))).get_trace(x)
        >>> tr["Z"]["value"].shape
        (2, 2)
    """
    import numpyro
    import numpyro.distributions as dist

    if is_concrete(x):
        x = jnp.asarray(check_data(x, "x"), jnp.result_type(float))
    for v, nm, kw in ((alpha, "alpha", {"positive": True}), (beta, "beta", {"nonnegative": True}),
                      (weight_scale, "weight_scale", {"positive": True}), (sigma, "sigma", {"positive": True})):
        if is_concrete(v):
            check_scalar(v, nm, **kw)
    n, d = x.shape
    off = 1.0 - jnp.eye(d, dtype=x.dtype)
    z = numpyro.sample("Z", dist.Normal(jnp.zeros((d, d)), 1.0).to_event(2))
    w = numpyro.sample("W", dist.Normal(jnp.zeros((d, d)), weight_scale).to_event(2))
    g = jax.nn.sigmoid(alpha * z) * off
    h = jnp.trace(jax.scipy.linalg.expm(g * g)) - d
    numpyro.factor("acyclicity", -beta * h)
    mean = x @ (g * w)
    numpyro.sample("x", dist.Normal(mean, sigma).to_event(2), obs=x)


@functools.partial(jax.jit, static_argnames=("num_steps", "num_particles", "alpha", "beta", "lr", "bge_weighting",
                                             "progress"))
def _fit(key, x, num_steps, num_particles, alpha, beta, lr, bge_weighting, progress):
    import numpyro
    from numpyro.infer import SVI, Trace_ELBO
    from numpyro.infer.autoguide import AutoNormal

    d = x.shape[1]
    model = functools.partial(dibs_model, alpha=alpha, beta=beta)
    guide = AutoNormal(model, init_scale=0.1)
    svi = SVI(model, guide, numpyro.optim.Adam(lr), Trace_ELBO())
    k_init, k_run, k_post, k_draw = jax.random.split(key, 4)
    state = svi.init(k_init, x)

    prog = Progress(progress, num_steps, "dibs_svi")

    def body(state, i):
        state, loss = svi.update(state, x)
        prog.update(i, {"loss": loss})
        return state, loss

    state, losses = jax.lax.scan(body, state, jnp.arange(num_steps))
    params = svi.get_params(state)
    z = guide.sample_posterior(k_post, params, sample_shape=(num_particles,))["Z"]
    prob = jax.nn.sigmoid(alpha * z) * (1.0 - jnp.eye(d))
    adj = (jax.random.uniform(k_draw, prob.shape) < prob).astype(jnp.int32)
    parents = _adj_to_parents(adj)
    ok = _acyclic_residual(parents) == 0
    if bge_weighting:
        table = bge_local_scores(x).table
        logw = jnp.sum(table[jnp.arange(d), _compress(parents)], axis=-1)
    else:
        logw = jnp.zeros((num_particles,), x.dtype)
    logw = jnp.where(ok, logw, -jnp.inf)
    w = jnp.exp(logw - jnp.max(logw))
    return DiBSResult(DAGSamples(adj, w / jnp.sum(w)), losses, jnp.mean(ok))


def dibs_svi(
    key: jax.Array,
    data: Float[Array, "N d"],
    *,
    num_steps: int = 2000,
    num_particles: int = 256,
    alpha: float = 2.0,
    beta: float = 5.0,
    learning_rate: float = 0.02,
    weighting: str = "bge",
    progress=False,
) -> DiBSResult:
    """Approximate DAG posterior from the numpyro latent-graph model fitted by SVI.

    One jitted program: ``num_steps`` Adam steps on the ELBO in a ``lax.scan``, then
    ``num_particles`` hard graphs drawn from the guide and weighted.

    Args:
        key: PRNG key (``jax.random.key``).
        data: ``[N, d]`` data (standardise it first; the model has unit noise scale).
        num_steps: SVI steps (one ``lax.scan``).
        num_particles: graphs drawn from the fitted guide.
        alpha: sigmoid slope of the relaxation.
        beta: weight of the acyclicity penalty.
        learning_rate: Adam step size.
        weighting: ``"bge"`` (DiBS+: weights ∝ exact BGe marginal likelihood of each hard graph)
            or ``"uniform"``.
        progress: ``False``, ``True`` (a progress bar) or ``fn(step, {"loss": ...})``.

    Returns:
        :class:`DiBSResult`: the weighted graphs, the loss trace ``[num_steps]`` and the
        acyclic fraction.

    Raises:
        TypeError: ``key`` is not a PRNG key.
        ValueError: bad data, unknown weighting, bad counts, or no acyclic draw (raise ``beta``
            or ``num_particles``).

    References:
        L. Lorch, J. Rothfuss, B. Schölkopf, A. Krause, "DiBS: differentiable Bayesian structure
        learning", NeurIPS 2021, sec. 4 (DiBS+ weighting).

    Examples:
        >>> import jax, numpy as np
        >>> from jaxcore.causal import dibs_svi
        >>> x = np.random.default_rng(0).normal(size=(20, 2)).astype(np.float32)
        >>> res = dibs_svi(jax.random.key(0), x, num_steps=6, num_particles=8, weighting="uniform")
        >>> res.samples.adjacency.shape, res.losses.shape
        ((8, 2, 2), (6,))
    """
    check_key(key)
    x = check_data(data)
    weighting = check_choice(weighting, "weighting", ("bge", "uniform"))
    num_steps = check_int(num_steps, "num_steps", 1)
    num_particles = check_int(num_particles, "num_particles", 1)
    alpha = check_scalar(alpha, "alpha", positive=True)
    beta = check_scalar(beta, "beta", nonnegative=True)
    learning_rate = check_scalar(learning_rate, "learning_rate", positive=True)
    progress = check_progress(progress)
    xj = jnp.asarray(x, jnp.result_type(float))
    res = _fit(key, xj, num_steps, num_particles, alpha, beta, learning_rate, weighting == "bge", progress)
    if not bool(jnp.isfinite(jnp.sum(res.samples.weights))):
        raise ValueError("samples: expected at least one acyclic graph among the draws, got none; "
                         "increase beta or num_particles")
    return res
