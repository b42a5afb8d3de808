"""The Self-Attentive Hawkes Process (SAHP).

Causal self-attention over the events (type embedding plus a sinusoidal temporal encoding)
gives the state ``s``; between events each type's intensity relaxes exponentially from a
start level to a base level::

    lambda_k(t_i + dt) = softplus(mu_k + (eta_k - mu_k) exp(-gamma_k dt)),
    mu = gelu(W_mu s), eta = gelu(W_eta s), gamma = softplus(W_gamma s)

with the interval compensator by Gauss-Legendre quadrature.

References:
    Q. Zhang, A. Lipani, O. Kirnap, E. Yilmaz, "Self-Attentive Hawkes Process", ICML 2020, eqs. (9)-(12).
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray


from ._attention import encode
from .neural import NeuralTPP, log_softplus
from .thp import attention_trunk


class SAHP(NeuralTPP):
    """Self-attentive Hawkes process (an equinox module).

    Attributes:
        embedding: ``[K, d]`` type embeddings.
        start: ``[d]`` the start token.
        layers: causal attention layers.
        head: ``d -> 3 K`` (``mu``, ``eta``, ``gamma`` pre-activations).

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import SAHP, EventBatch
        >>> model = SAHP(1, key=jax.random.key(0), d_model=8, num_heads=2, num_layers=1)
        >>> model.log_likelihood(EventBatch.from_sequences([[0.5, 1.0]], T=2.0)).shape
        (1,)

    References:
        Zhang et al., ICML 2020.
    """

    embedding: Float[Array, "K d"]
    start: Float[Array, " d"]
    layers: tuple
    head: eqx.nn.Linear

    def __init__(self, num_marks: int, *, key: PRNGKeyArray, d_model: int = 32, num_heads: int = 2,
                 num_layers: int = 2, init_rate: float = 1.0, dtype: Any = None):
        """Build the networks (arguments as :class:`jaxcore.tpp.THP`).

        Raises:
            ValueError: bad sizes. TypeError: ``key`` not a PRNG key, non-float ``dtype``.
        """
        K, d, dtype, head_key, (self.embedding, self.start, self.layers) = attention_trunk(
            num_marks, d_model, num_heads, num_layers, key, dtype)
        head = eqx.nn.Linear(d, 3 * K, key=head_key, dtype=dtype)
        b = float(jnp.log(jnp.expm1(jnp.asarray(float(init_rate)))))
        bias = jnp.concatenate([jnp.full((2 * K,), b, dtype), jnp.zeros((K,), dtype)])
        self.head = eqx.tree_at(lambda m: (m.weight, m.bias), head, (head.weight * 0.1, bias))

    @property
    def num_marks(self) -> int:
        return self.embedding.shape[0]

    def states(self, times, marks, mask):
        return encode(self.embedding, self.start, self.layers, times, marks, mask)

    def decay_params(self, state: Float[Array, " d"]) -> tuple[Array, Array, Array]:
        """``(mu, eta, gamma)``, each ``[K]``."""
        K = self.num_marks
        p = self.head(state)
        return jax.nn.gelu(p[:K]), jax.nn.gelu(p[K:2 * K]), jax.nn.softplus(p[2 * K:])

    def log_intensity(self, state, dt):
        mu, eta, gamma = self.decay_params(state)
        return log_softplus(mu + (eta - mu) * jnp.exp(-gamma * dt))
