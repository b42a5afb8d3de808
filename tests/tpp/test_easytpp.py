"""THP's EasyTPP-layout encoder and the trapezoid compensator: NumPy oracles, and agreement with easy-tpp itself."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxcore.tpp import NHP, THP, EventBatch

SEQS = ([[0.3, 0.9, 1.0, 2.6], [1.5, 3.0], []], [[0, 1, 1, 0], [1, 0], []])
T = 4.0


def _batch(dtype=jnp.float64):
    return EventBatch.from_sequences(SEQS[0], SEQS[1], T=T, num_marks=2, dtype=dtype, max_events=5)


def _thp(dtype=jnp.float64):
    """A tiny easytpp-layout THP with weights scaled up so that attention and the elapsed-time term matter."""
    m = THP(2, key=jax.random.key(3), d_model=4, num_heads=2, num_layers=2, encoder="easytpp", dtype=dtype)
    m = eqx.tree_at(lambda m: (m.embedding, m.start, m.head.weight, m.alpha), m,
                    (m.embedding * 10, m.start * 10, m.head.weight * 10, jnp.asarray([-0.7, 0.4], dtype)))
    return eqx.tree_at(lambda m: [layer.to_query.weight for layer in m.layers], m,
                       [layer.to_query.weight * 3 for layer in m.layers])


def _np(x):
    return np.asarray(x, np.float64)


def _easytpp_states(m, times, marks):
    """EasyTPP 0.3.0's THP encoder for one sequence, row by row in NumPy (float64): the start at t = 0, then
    per layer ``x += tem(t)``, causal attention (heads = contiguous feature blocks, no output map), the
    shared ReLU feed-forward."""
    d = m.start.shape[0]
    h = m.layers[0].num_heads if m.layers else 1
    dk = d // h
    tt = [0.0] + list(times)
    x = [_np(m.start)] + [_np(m.embedding[k]) for k in marks]

    def tem(t):
        return np.array([(math.sin if i % 2 == 0 else math.cos)(t / 10000.0 ** (2 * (i // 2) / d))
                         for i in range(d)])

    (f1, f2) = m.feed_forward
    for layer in m.layers:
        x = [xi + tem(ti) for xi, ti in zip(x, tt)]
        q, k, v = ([_np(lin.weight) @ xi + _np(lin.bias) for xi in x]
                   for lin in (layer.to_query, layer.to_key, layer.to_value))
        out = []
        for r in range(len(x)):
            row = np.zeros(d)
            for hh in range(h):
                sl = slice(hh * dk, (hh + 1) * dk)
                s = np.array([q[r][sl] @ k[j][sl] / math.sqrt(dk) for j in range(r + 1)])
                a = np.exp(s - s.max())
                row[sl] = (a / a.sum()) @ np.array([v[j][sl] for j in range(r + 1)])
            out.append(row)
        x = [_np(f2.weight) @ np.maximum(_np(f1.weight) @ o + _np(f1.bias), 0.0) + _np(f2.bias) for o in out]
    return x


def _reference_intensity(m, times, marks, t):
    S = _easytpp_states(m, times, marks)
    n = sum(1 for tj in times if tj < t)
    last = times[n - 1] if n else 0.0
    z = _np(m.alpha) * (t - last) + _np(m.head.weight) @ S[n] + _np(m.head.bias)
    return np.logaddexp(0.0, z)


def test_easytpp_encoder_matches_its_layer_equations_row_by_row(x64):
    m = _thp()
    q = np.array([[0.1, 0.3, 0.95, 1.0, 3.9], [0.1, 1.5, 2.0, 3.0, 3.9], [0.1, 0.5, 1.0, 2.0, 3.9]])
    got = np.asarray(m.intensity(_batch(), jnp.asarray(q)))  # event times count as strictly before: left limits
    for b, (seq, marks) in enumerate(zip(*SEQS)):
        for j, t in enumerate(q[b]):
            np.testing.assert_allclose(got[b, j], _reference_intensity(m, seq, marks, t), rtol=1e-11)
    lam = np.asarray(m.intensity(_batch(), jnp.asarray(q)))
    assert np.ptp(lam[0, :, 0]) > 0.1  # the weights make the intensity move


@pytest.mark.parametrize("make", [_thp, lambda dtype: NHP(2, key=jax.random.key(1), hidden=3, dtype=dtype)],
                         ids=["THP", "NHP"])
def test_trapezoid_log_likelihood_equals_the_rule_on_the_intensity(x64, make):
    m = make(jnp.float64)
    batch = _batch()
    g = 7
    got = np.asarray(m.log_likelihood(batch, num_quadrature=g, quadrature="trapezoid"))
    for b, (seq, marks) in enumerate(zip(*SEQS)):
        edges = [0.0] + list(seq) + [T]
        ll = 0.0
        for i in range(len(edges) - 1):
            a, c = edges[i], edges[i + 1]
            # nodes a + u (c - a), u in [0, 1]: the right limit after the event at a, the left limit at c (the
            # ends nudged inside by 1e-13 of the gap, so that the strict "events before t" rule sees the interval)
            nodes = a + np.linspace(0.0, 1.0, g) * (c - a)
            nodes[0] = a + 1e-13 * (c - a) if i else 0.0
            nodes[-1] = c - 1e-13 * (c - a)
            lam = np.asarray(m.intensity(EventBatch.from_sequences([seq], [marks], T=T, num_marks=2,
                                                                   dtype=jnp.float64, max_events=5),
                                         jnp.asarray(nodes[None]))).sum(-1)[0]
            ll -= (c - a) * np.sum((lam[1:] + lam[:-1]) / 2) / (g - 1)
        if seq:
            lam_ev = np.asarray(m.intensity(EventBatch.from_sequences([seq], [marks], T=T, num_marks=2,
                                                                      dtype=jnp.float64, max_events=5),
                                            jnp.asarray([seq])))[0]
            ll += np.sum(np.log(lam_ev[np.arange(len(seq)), marks]))
        np.testing.assert_allclose(got[b], ll, rtol=1e-9)
    # and it converges to the Gauss-Legendre likelihood as the nodes grow
    fine = np.asarray(m.log_likelihood(batch, num_quadrature=2001, quadrature="trapezoid"))
    np.testing.assert_allclose(fine, np.asarray(m.log_likelihood(batch, num_quadrature=32)), rtol=1e-6)


def test_quadrature_and_encoder_refusals():
    m = THP(2, key=jax.random.key(0), d_model=4, num_layers=1, encoder="easytpp")
    with pytest.raises(ValueError, match="quadrature: expected one of 'gauss-legendre', 'trapezoid'"):
        m.log_likelihood(_batch(jnp.float32), quadrature="simpson")
    with pytest.raises(ValueError, match="num_quadrature: expected"):
        m.log_likelihood(_batch(jnp.float32), num_quadrature=1, quadrature="trapezoid")
    with pytest.raises(ValueError, match="encoder: expected one of 'pre-norm', 'easytpp'"):
        THP(2, key=jax.random.key(0), encoder="post-norm")


@pytest.mark.parametrize("kind", ["THP", "NHP"])
def test_agrees_with_easytpp_on_its_own_models(kind):
    """The speed rows' agreement check at their smoke size: EasyTPP's loss and every gradient, weight for weight."""
    pytest.importorskip("torch")
    pytest.importorskip("easy_tpp", reason="easy-tpp is not installed (pip install --no-deps easy-tpp==0.3.0)")
    from benchmarks.suites import tpp as suite

    case = suite._easytpp_setup(kind)({"batch": 4, "events": 12}, jax.random.key(0))
    out = suite.neural_grad_kernel(*case.args, **case.static)
    base = suite.easytpp_grad(*case.baseline_args["easytpp"], **case.static)
    suite._easytpp_check(out, base, case)
    # the check can fail: a perturbed weight in the JAX model breaks the agreement
    params = eqx.tree_at(lambda p: p.head.bias, case.args[0], case.args[0].head.bias + 0.05)
    with pytest.raises(AssertionError, match="loss"):
        suite._easytpp_check(suite.neural_grad_kernel(params, case.args[1], **case.static), base, case)
