"""The Neural Hawkes Process (NHP): a continuous-time LSTM.

After event ``i`` the cell ``c(t)`` decays from ``c_i`` towards a target ``cbar_i`` at rates
``delta_i``, ``c(t) = cbar_i + (c_i - cbar_i) exp(-delta_i (t - t_i))``, the hidden state is
``h(t) = o_i * tanh(c(t))`` and the intensity ``lambda_k(t) = softplus(w_k . h(t) + b_k)``. At
an event the LSTM gates read the type embedding and ``h(t_i)`` and reset
``(c, cbar, delta, o)``. The interval compensator is by Gauss-Legendre quadrature.

References:
    H. Mei, J. Eisner, "The Neural Hawkes Process: A Neurally Self-Modulating Multivariate Point
    Process", NeurIPS 2017, eqs. (4)-(7).
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import check_int, check_key, default_float

from ._checks import float_dtype
from .neural import NeuralTPP, log_softplus


class NHP(NeuralTPP):
    """Neural Hawkes process with a continuous-time LSTM of ``hidden`` units (an equinox module).

    The state is ``(c, cbar, delta, o)`` concatenated (``[4 H]``).

    Attributes:
        embedding: ``[K + 1, H]`` type embeddings (row ``K``: the start token read at ``t = 0``).
        gates: ``2 H -> 7 H`` (``i, f, z, o, ibar, fbar, delta``).
        head: ``H -> K``.

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import NHP, EventBatch
        >>> model = NHP(2, key=jax.random.key(0), hidden=8)
        >>> batch = EventBatch.from_sequences([[0.3, 1.2]], [[0, 1]], T=2.0, num_marks=2)
        >>> model.log_likelihood(batch).shape
        (1,)

    References:
        Mei and Eisner, NeurIPS 2017.
    """

    embedding: Float[Array, "K1 H"]
    gates: eqx.nn.Linear
    head: eqx.nn.Linear

    def __init__(self, num_marks: int, *, key: PRNGKeyArray, hidden: int = 32, init_rate: float = 1.0,
                 dtype: Any = None):
        """Build the networks.

        Args:
            num_marks: ``K``.
            key: PRNG key for the weights.
            hidden: LSTM width ``H``.
            init_rate: initial intensity of each type (the head's bias is its softplus inverse).
            dtype: float32 (default; float64 under x64) or float64.

        Raises:
            ValueError: bad sizes. TypeError: ``key`` not a PRNG key, non-float ``dtype``.
        """
        K = check_int(num_marks, "num_marks", minimum=1)
        H = check_int(hidden, "hidden", minimum=1)
        check_key(key)
        dtype = float_dtype(default_float() if dtype is None else dtype)
        k1, k2, k3 = jax.random.split(key, 3)
        self.embedding = jax.random.normal(k1, (K + 1, H), dtype) * 0.1
        self.gates = eqx.nn.Linear(2 * H, 7 * H, key=k2, dtype=dtype)
        head = eqx.nn.Linear(H, K, key=k3, dtype=dtype)
        b = float(jnp.log(jnp.expm1(jnp.asarray(float(init_rate)))))
        self.head = eqx.tree_at(lambda m: (m.weight, m.bias), head, (head.weight * 0.1, jnp.full((K,), b, dtype)))

    @property
    def num_marks(self) -> int:
        return self.embedding.shape[0] - 1

    def _hidden(self, state, dt):
        c, cbar, delta, o = jnp.split(state, 4)
        return o * jnp.tanh(cbar + (c - cbar) * jnp.exp(-delta * dt))

    def _update(self, state, m, dt):
        H = self.embedding.shape[1]
        c, cbar, delta, o = jnp.split(state, 4)
        c_t = cbar + (c - cbar) * jnp.exp(-delta * dt)
        h_t = o * jnp.tanh(c_t)
        g = self.gates(jnp.concatenate([self.embedding[m], h_t]))
        i, f, z, o_new, ibar, fbar, d = (g[j * H:(j + 1) * H] for j in range(7))
        i, f, o_new, ibar, fbar = (jax.nn.sigmoid(x) for x in (i, f, o_new, ibar, fbar))
        c_new = f * c_t + i * jnp.tanh(z)
        cbar_new = fbar * cbar + ibar * jnp.tanh(z)
        return jnp.concatenate([c_new, cbar_new, jax.nn.softplus(d), o_new])

    def states(self, times, marks, mask):
        H = self.embedding.shape[1]
        dtype = self.embedding.dtype
        s0 = self._update(jnp.zeros((4 * H,), dtype), self.num_marks, jnp.zeros((), dtype))
        prev = jnp.concatenate([jnp.zeros((1,), times.dtype), times[:-1]])
        dt = jnp.where(mask, times - prev, 0.0)

        def step(s, x):
            m, d, valid = x
            new = jnp.where(valid, self._update(s, m, d), s)
            return new, new

        _, S = jax.lax.scan(step, s0, (marks, dt, mask))
        return jnp.concatenate([s0[None], S])

    def log_intensity(self, state, dt):
        return log_softplus(self.head(self._hidden(state, dt)))
