"""The intensity-free TPP (IFTPP, LogNormMix): a log-normal mixture for the next gap.

A GRU reads each event's type embedding and log gap; from the state ``s`` the next gap
``tau`` has the density of a mixture of ``M`` log-normals and the next type a categorical
independent of ``tau``::

    p(tau | s) = sum_j w_j LogNormal(tau; mu_j, sigma_j),      p(k | s) = softmax(V s + c)_k

so ``lambda_k(t_i + tau) = p(k | s) p(tau | s) / S(tau | s)`` and the interval compensator is
``-log S(tau | s)``, ``S(tau) = sum_j w_j Phi((mu_j - log tau) / sigma_j)``, both in closed form.

References:
    O. Shchur, M. Bilos, S. Guennemann, "Intensity-Free Learning of Temporal Point Processes",
    ICLR 2020, Sec. 3.1 (eqs. 4-6).
"""

from __future__ import annotations

from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.scipy.special import log_ndtr
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import check_int, check_key, default_float

from ._checks import float_dtype
from .neural import NeuralTPP

_LOG_2PI = 1.8378770664093453


class IFTPP(NeuralTPP):
    """Intensity-free TPP with a log-normal mixture of ``num_components`` components (an equinox module).

    Attributes:
        embedding: ``[K, E]`` type embeddings.
        cell: ``eqx.nn.GRUCell`` ``[E + 1] -> H``.
        s0: ``[H]`` the state before the first event.
        mixture: ``H -> 3 M`` (logits, means, log-scales of ``log tau``).
        mark_head: ``H -> K`` type logits.

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import IFTPP, EventBatch
        >>> model = IFTPP(1, key=jax.random.key(0), hidden=8, num_components=4)
        >>> model.log_likelihood(EventBatch.from_sequences([[0.5, 1.0]], T=2.0)).shape
        (1,)

    References:
        Shchur et al., ICLR 2020.
    """

    embedding: Float[Array, "K E"]
    cell: eqx.nn.GRUCell
    s0: Float[Array, " H"]
    mixture: eqx.nn.Linear
    mark_head: eqx.nn.Linear

    closed_compensator: ClassVar[bool] = True

    def __init__(self, num_marks: int, *, key: PRNGKeyArray, hidden: int = 32, embed: int = 16,
                 num_components: int = 8, init_log_gap: float = 0.0, dtype: Any = None):
        """Build the networks.

        Args:
            num_marks: ``K``.
            key: PRNG key for the weights.
            hidden, embed: state and embedding sizes.
            num_components: mixture size ``M``.
            init_log_gap: initial mean of ``log tau`` (e.g. the log mean gap of the data).
            dtype: float32 (default; float64 under x64) or float64.

        Raises:
            ValueError: bad sizes. TypeError: ``key`` not a PRNG key, non-float ``dtype``.
        """
        K = check_int(num_marks, "num_marks", minimum=1)
        H = check_int(hidden, "hidden", minimum=1)
        E = check_int(embed, "embed", minimum=1)
        M = check_int(num_components, "num_components", minimum=1)
        check_key(key)
        dtype = float_dtype(default_float() if dtype is None else dtype)
        k1, k2, k3, k4 = jax.random.split(key, 4)
        self.embedding = jax.random.normal(k1, (K, E), dtype) * 0.1
        self.cell = eqx.nn.GRUCell(E + 1, H, key=k2, dtype=dtype)
        self.s0 = jnp.zeros((H,), dtype)
        mix = eqx.nn.Linear(H, 3 * M, key=k3, dtype=dtype)
        spread = jnp.linspace(-1.0, 1.0, M, dtype=dtype) if M > 1 else jnp.zeros((1,), dtype)
        bias = jnp.concatenate([jnp.zeros((M,), dtype), float(init_log_gap) + spread, jnp.zeros((M,), dtype)])
        self.mixture = eqx.tree_at(lambda h: (h.weight, h.bias), mix, (mix.weight * 0.1, bias))
        self.mark_head = eqx.nn.Linear(H, K, key=k4, dtype=dtype)

    @property
    def num_marks(self) -> int:
        return self.embedding.shape[0]

    def states(self, times, marks, mask):
        prev = jnp.concatenate([jnp.zeros((1,), times.dtype), times[:-1]])
        dt = jnp.where(mask, times - prev, 1.0)
        log_dt = jnp.log(jnp.maximum(dt, jnp.finfo(times.dtype).tiny))

        def step(s, x):
            m, ld, valid = x
            new = self.cell(jnp.concatenate([self.embedding[m], ld[None]]), s)
            new = jnp.where(valid, new, s)
            return new, new

        _, S = jax.lax.scan(step, self.s0, (marks, log_dt, mask))
        return jnp.concatenate([self.s0[None], S])

    def mixture_params(self, state: Float[Array, " H"]) -> tuple[Array, Array, Array]:
        """``(log w [M], mu [M], log sigma [M])`` of ``log tau`` given the state."""
        M = self.mixture.out_features // 3
        p = self.mixture(state)
        return jax.nn.log_softmax(p[:M]), p[M:2 * M], jnp.clip(p[2 * M:], -5.0, 3.0)

    def log_gap_density(self, state, dt):
        """``log p(tau = dt | s)`` of the log-normal mixture (``dt > 0``)."""
        log_w, mu, log_sig = self.mixture_params(state)
        x = jnp.log(jnp.maximum(dt, jnp.finfo(dt.dtype).tiny))
        z = (x - mu) * jnp.exp(-log_sig)
        return jax.nn.logsumexp(log_w - 0.5 * z * z - log_sig - 0.5 * _LOG_2PI) - x

    def log_survival(self, state, dt):
        """``log S(dt | s) = log P(tau > dt | s)``."""
        log_w, mu, log_sig = self.mixture_params(state)
        x = jnp.log(jnp.maximum(dt, jnp.finfo(dt.dtype).tiny))
        return jax.nn.logsumexp(log_w + log_ndtr((mu - x) * jnp.exp(-log_sig)))

    def log_intensity(self, state, dt):
        log_pk = jax.nn.log_softmax(self.mark_head(state))
        return log_pk + self.log_gap_density(state, dt) - self.log_survival(state, dt)

    def compensator(self, state, dt):
        return -self.log_survival(state, dt)
