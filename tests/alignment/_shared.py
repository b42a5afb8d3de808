"""Shared tiny inputs of the alignment tests (one model, fixed shapes: shared compiled programs)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxcore import lm
from jaxcore.alignment import PreferencePairs

V, N, L = 64, 4, 10  # vocabulary, pairs, sequence length


@functools.lru_cache(maxsize=None)
def model():
    return lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny(V))


@functools.lru_cache(maxsize=None)
def pairs() -> PreferencePairs:
    """N pairs of length L: left padding of 0-2 tokens, prompts of 4 real tokens, the rest continuation."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, V, size=(N, 2, L)).astype(np.int32)
    mask = np.ones((N, 2, L), bool)
    loss = np.zeros((N, 2, L), bool)
    for i in range(N):
        for j in range(2):
            pad = (i + j) % 3
            mask[i, j, :pad] = False
            tokens[i, j, :pad] = 0
            loss[i, j, pad + 4:] = True
    return PreferencePairs(jnp.asarray(tokens), jnp.asarray(mask), jnp.asarray(loss), jnp.zeros((N, 2)))


def sequences(n: int = 7, length: int = 6):
    """``n`` token rows with 0-2 left pads and the positions from 3 on to average over (a prime ``n``:
    every chunk size below it but 1 pads)."""
    toks = jax.random.randint(jax.random.key(5), (n, length), 1, V)
    mask = jnp.arange(length)[None, :] >= (jnp.arange(n) % 3)[:, None]
    return toks, mask, mask & (jnp.arange(length)[None, :] >= 3)


def brute_log_probs(model, tokens, mask, loss_mask):
    """sum_i log_softmax(forward)[i - 1, x_i] over scored positions, one row at a time in NumPy."""
    logits = np.asarray(lm.forward(model, tokens, mask), np.float64)
    t, m, c = np.asarray(tokens), np.asarray(mask), np.asarray(loss_mask)
    out = []
    for b in range(t.shape[0]):
        z = logits[b]
        ls = z - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True)) - z.max(-1, keepdims=True)
        out.append(sum(ls[i - 1, t[b, i]] for i in range(1, t.shape[1]) if c[b, i] and m[b, i] and m[b, i - 1]))
    return np.array(out)
