"""The Recurrent Marked Temporal Point Process (RMTPP).

A recurrent network reads each event's type embedding and gap, ``s_{i+1} = tanh(W [e_{m_i}, dt_i] + U s_i + b)``,
and the intensity between events is exponential in the elapsed time::

    lambda_k(t_i + dt) = exp(v_k . s_{i+1} + w_k dt + b_k)

so the interval compensator is closed-form: ``sum_k exp(v_k . s + b_k) dt phi1(w_k dt)``,
``phi1(x) = (e^x - 1) / x``.

References:
    N. Du, H. Dai, R. Trivedi, U. Upadhyay, M. Gomez-Rodriguez, L. Song, "Recurrent Marked
    Temporal Point Processes: Embedding Event History to Vector", KDD 2016, eqs. (11)-(12).
"""

from __future__ import annotations

from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxcore._util import check_int, check_key, default_float

from ._checks import float_dtype
from .neural import NeuralTPP
from ._integrate import phi1


class RMTPP(NeuralTPP):
    """RMTPP: an Elman RNN history, per-type intensities ``exp(v_k . s + w_k dt + b_k)`` (an equinox module).

    Attributes:
        embedding: ``[K, E]`` type embeddings.
        cell: the recurrent map ``[E + 1 + H] -> H`` (tanh).
        s0: ``[H]`` the state before the first event.
        head: ``H -> K`` (``v``, ``b``).
        w: ``[K]`` the elapsed-time coefficients.

    Examples:
        >>> import jax
        >>> from jaxcore.tpp import RMTPP, EventBatch
        >>> model = RMTPP(2, key=jax.random.key(0), hidden=8)
        >>> batch = EventBatch.from_sequences([[0.3, 1.2]], [[0, 1]], T=2.0, num_marks=2)
        >>> model.log_likelihood(batch).shape
        (1,)

    References:
        Du et al., KDD 2016.
    """

    embedding: Float[Array, "K E"]
    cell: eqx.nn.Linear
    s0: Float[Array, " H"]
    head: eqx.nn.Linear
    w: Float[Array, " K"]

    closed_compensator: ClassVar[bool] = True

    def __init__(self, num_marks: int, *, key: PRNGKeyArray, hidden: int = 32, embed: int = 16,
                 init_log_rate: float = 0.0, dtype: Any = None):
        """Build the networks.

        Args:
            num_marks: ``K``.
            key: PRNG key for the weights.
            hidden, embed: state and embedding sizes.
            init_log_rate: initial log-intensity of each type (the head's bias).
            dtype: float32 (default; float64 under x64) or float64.

        Raises:
            ValueError: bad sizes. TypeError: ``key`` not a PRNG key, non-float ``dtype``.
        """
        K = check_int(num_marks, "num_marks", minimum=1)
        H = check_int(hidden, "hidden", minimum=1)
        E = check_int(embed, "embed", minimum=1)
        check_key(key)
        dtype = float_dtype(default_float() if dtype is None else dtype)
        k1, k2, k3 = jax.random.split(key, 3)
        self.embedding = jax.random.normal(k1, (K, E), dtype) * 0.1
        self.cell = eqx.nn.Linear(E + 1 + H, H, key=k2, dtype=dtype)
        self.s0 = jnp.zeros((H,), dtype)
        head = eqx.nn.Linear(H, K, key=k3, dtype=dtype)
        self.head = eqx.tree_at(lambda h: (h.weight, h.bias), head,
                                (head.weight * 0.1, jnp.full((K,), float(init_log_rate), dtype)))
        self.w = jnp.full((K,), -0.1, dtype)

    @property
    def num_marks(self) -> int:
        return self.w.shape[0]

    def states(self, times, marks, mask):
        prev = jnp.concatenate([jnp.zeros((1,), times.dtype), times[:-1]])
        dt = jnp.where(mask, times - prev, 0.0)

        def step(s, x):
            m, d, valid = x
            new = jnp.tanh(self.cell(jnp.concatenate([self.embedding[m], d[None], s])))
            new = jnp.where(valid, new, s)
            return new, new

        _, S = jax.lax.scan(step, self.s0, (marks, dt, mask))
        return jnp.concatenate([self.s0[None], S])

    def log_intensity(self, state, dt):
        return self.head(state) + self.w * dt

    def compensator(self, state, dt):
        return jnp.sum(jnp.exp(self.head(state)) * phi1(self.w * dt)) * dt
