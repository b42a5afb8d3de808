"""Shared toy fixtures: the V = 3, T = 4 tabular model, a reward with distinct values, tables as heads."""

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from jaxcore import lm
from jaxcore.decoding import QHead, ToyLM, ValueHead, random_toy_lm, toy_sequences

LOGITS = np.asarray(random_toy_lm(jax.random.key(0)).logits, np.float64)
REWARD = np.asarray(jax.random.uniform(jax.random.key(5), (81,)), np.float64)  # distinct values
SEQS = toy_sequences()


def toy():
    """The toy model in the current default float (float64 under the x64 fixture)."""
    return ToyLM(jnp.asarray(LOGITS), 3, 4)


def _base_probs():
    # p(y) by enumeration in NumPy float64, independent of the library's code
    v = 3
    probs = np.ones(81)
    for i, y in enumerate(SEQS):
        node = 0
        for t in range(4):
            z = LOGITS[node] - LOGITS[node].max()
            probs[i] *= np.exp(z[y[t]]) / np.exp(z).sum()
            node = (v ** (t + 1) - 1) // (v - 1) + (node - (v ** t - 1) // (v - 1)) * v + y[t]
    return probs


BASE = _base_probs()
NUM_SAMPLES = 20000  # every toy sampling test draws this many: one compiled sampler per processor type

# the tiny Llama of the non-slow tests (one layer: compile time) and its shared decoding shapes
MODEL = lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny(num_layers=1))


def q_table_head(toy, q):
    """A QHead that outputs the table q[node] ``[M, V]`` at non-terminal nodes (one-hot features)."""
    d = toy.num_nodes
    w = np.zeros((d, toy.vocab_size))
    w[: q.shape[0]] = np.asarray(q)  # one-hot rows have unit norm already
    h = QHead(d, toy.vocab_size)
    return _with(h, weight=jnp.asarray(w, h.weight.dtype))


def value_table_head(toy, value):
    d = toy.num_nodes
    h = ValueHead(d)
    return _with(h, weight=jnp.asarray(np.asarray(value), h.weight.dtype))


def _with(module, **fields):
    import equinox as eqx

    for name, val in fields.items():
        module = eqx.tree_at(lambda m, n=name: getattr(m, n), module, val)
    return module


def chi_square_pvalue(samples_idx, probs, min_expected=5.0):
    """p-value of a chi-square goodness-of-fit test (cells with small expectation pooled)."""
    n = len(samples_idx)
    counts = np.bincount(samples_idx, minlength=len(probs)).astype(float)
    exp = probs * n
    big = exp >= min_expected
    obs = np.append(counts[big], counts[~big].sum())
    ex = np.append(exp[big], exp[~big].sum())
    keep = ex > 0
    return stats.chisquare(obs[keep], ex[keep] * obs[keep].sum() / ex[keep].sum()).pvalue
