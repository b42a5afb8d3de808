"""A/B on the GPU: SNORE with the run-time checks hoisted out of the loop vs inside it (as before).

A record of the run in this folder: it patches private names of the tree it ran on (commit 5fc9829;
the check predicate is now ``is_trusted`` in ``jaxcore._util.checks``, imported by the inverse modules).
"""
import functools, os, sys, time
import jax, numpy as np
sys.path.insert(0, os.getcwd())
import benchmarks.suites.inverse as I
import jaxcore.inverse.denoisers as D
import jaxcore.inverse.operators as O
from benchmarks.registry import _REGISTRY
from benchmarks.runner import block

s = _REGISTRY["inverse.snore_small"]
hoisted = O._is_trusted
for iters in (5, 50):
    fns = {}
    for variant in ("hoisted", "in_loop"):
        O._is_trusted = D._is_trusted = (hoisted if variant == "hoisted" else (lambda v: False))
        c = s.setup({"hw": 64, "images": 2, "seeds": 4, "iters": iters}, jax.random.key(0))
        f = jax.jit(functools.partial(I.snore_kernel, **c.static)).lower(*c.args).compile()
        print(variant, "conditionals in HLO:", f.as_text().count("conditional("), flush=True)
        fns[variant] = (f, c)
    O._is_trusted = D._is_trusted = hoisted
    outs = [np.asarray(block(f(*c.args))) for f, c in fns.values()]
    print("max |hoisted - in_loop| =", float(np.abs(outs[0] - outs[1]).max()))
    c = fns["hoisted"][1]
    tfn = functools.partial(I.torch_snore, *c.baseline_args["torch"], **c.static)
    block(tfn())
    times = {"hoisted": [], "in_loop": [], "torch": []}
    for r in range(40):
        for v, (f, cc) in fns.items():
            t0 = time.perf_counter(); block(f(*cc.args)); times[v].append(time.perf_counter() - t0)
        t0 = time.perf_counter(); block(tfn()); times["torch"].append(time.perf_counter() - t0)
    med = {k: float(np.median(v)) * 1e3 for k, v in times.items()}
    print(f"iters={iters}: hoisted {med['hoisted']:.3f} ms, in_loop {med['in_loop']:.3f} ms, torch {med['torch']:.3f} ms; "
          f"torch/hoisted {med['torch']/med['hoisted']:.2f}, torch/in_loop {med['torch']/med['in_loop']:.2f}", flush=True)
