"""jaxcore.effects: speed of the batched balancing dual and of zero-shot CInA; ATE quality (Zhang et al., ICML 2024).

Speed:

- ``effects.balancing_dual``: the optimal-balancing weights (SVM dual) of B data sets of N units
  by the batched SMO solver, against a Python loop of scikit-learn ``SVC(kernel="precomputed")``
  fits on the same kernels at the same ``tol`` (1e-3, libsvm's default). Agreement first: per data
  set the weights' L1 distance and the dual objectives. Target >= 3x; default B = 64, N = 500 (the
  SVC loop is called about ten times by the harness), B = 256 and 1024 in the full configuration.
- ``effects.zero_shot``: CInA's zero-shot weights (one forward pass of a network trained on other
  data sets) against per-data-set optimisation (single-data-set CInA, 1000 Adam steps, JAX; and
  the exact optimum by the batched dual solver). Agreement: the ATE estimates within their standard
  errors on average. Target >= 50x over single-data-set CInA.

Quality:

- ``effects.synthetic``: ATE error on the synthetic family (in- and out-of-distribution test
  data sets) for every method, CInA single-data-set and zero-shot, over training seeds, with the
  time per data set.
- ``effects.lalonde``: LaLonde's NSW treated beside PSID / CPS controls: each method's estimate
  against the experimental benchmark of the same treated group (1,794 for the 185 Dehejia-Wahba
  treated, 886 for LaLonde's 297). No method is tuned on the benchmark: every hyperparameter is
  its default (lam = 1, RBF bandwidth sqrt(D), ridge 1, DoubleML's IRM with random forests).
  Default: the Dehejia-Wahba treated beside PSID-1, PSID-3 and CPS-3 (one padded batch, so each
  method compiles once); the full configuration adds PSID-2, CPS-2 and LaLonde's own treated.
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.registry import Baseline, Case, QualityBenchmark, QualityResult, Scaling, SpeedBenchmark, Table, \
    register
from jaxcore.datasets import load_lalonde
from jaxcore.effects import (CInA, EffectData, aipw, balancing_dual, cina_weights, difference_in_means, effect_data,
                             fit_cina, fit_cina_multi, ipw, kernel_matrix, resample_datasets, stack_datasets,
                             synthetic_family, weighted_ate)

FAMILY = "effects"
_TOL = 1e-3


# ----------------------------------------------------------------------------- baselines (host libraries)

def svc_weights(kernel, treatment, mask, lam=1.0, tol=_TOL):
    """SVM balancing weights from scikit-learn's SVC dual, one fit per data set (Tarr & Imai 2021)."""
    from sklearn.svm import SVC

    kernel, treatment, mask = (np.asarray(a) for a in (kernel, treatment, mask))
    out = np.zeros(treatment.shape)
    for b in range(treatment.shape[0]):
        m = mask[b].astype(bool)
        y = 2 * treatment[b][m] - 1
        s = SVC(C=1.0 / lam, kernel="precomputed", tol=tol).fit(np.asarray(kernel[b][np.ix_(m, m)], np.float64), y)
        a = np.zeros(m.sum())
        a[s.support_] = np.abs(s.dual_coef_[0])
        w = np.where(y > 0, a / a[y > 0].sum(), a / a[y < 0].sum())
        out[b, m] = w
    return out


def dml_ate(x, t, y, seed=0):
    """DoubleML's interactive regression model (ATE), random-forest nuisances, 5 folds: estimate, SE."""
    import doubleml as dml
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    data = dml.DoubleMLData.from_arrays(np.asarray(x, np.float64), np.asarray(y, np.float64), np.asarray(t, int))
    forest = dict(n_estimators=100, min_samples_leaf=5, random_state=seed)
    model = dml.DoubleMLIRM(data, RandomForestRegressor(**forest), RandomForestClassifier(**forest),
                            n_folds=5, trimming_threshold=0.01)
    np.random.seed(seed)
    model.fit()
    return float(model.coef[0]), float(model.se[0])


# ----------------------------------------------------------------------------- speed: batched dual vs SVC loop

def _bal_setup(size, key):
    data = synthetic_family(key, int(size["B"]), int(size["N"]), int(size["D"]))
    k = kernel_matrix(data)
    return Case(args=(k, data.x, data.treatment, data.mask), static={"lam": 1.0}, work=int(size["B"]),
                work_unit="data sets")


def _bal_kernel(k, x, t, m, lam):
    data = EffectData(x, t, jnp.zeros_like(t), m, jnp.zeros(t.shape[:1], t.dtype))
    return balancing_dual(k, data, lam=lam, tol=_TOL).weights


def _svc_loop(k, x, t, m, lam):
    return svc_weights(k, t, m, lam)


def _bal_check(kernel_out, base_out, case):
    k, b = np.asarray(kernel_out, np.float64), np.asarray(base_out, np.float64)
    dist = np.abs(k - b).sum(-1)  # L1 over both arms (each sums to 1): at most 4
    if not np.all(np.isfinite(k)) or dist.max() > 0.1:
        raise AssertionError(f"balancing weights differ from SVC's: max L1 distance {dist.max():.3g} > 0.1 "
                             f"(both solvers stop at tol={_TOL})")


register(SpeedBenchmark(
    name="effects.balancing_dual",
    family=FAMILY,
    kernel=_bal_kernel,
    setup=_bal_setup,
    sizes=[{"B": 64, "N": 500, "D": 5}],
    quick_sizes=[{"B": 16, "N": 100, "D": 5}],
    baselines=[Baseline("sklearn-svc", _svc_loop, requires=("sklearn",),
                        note="Python loop of SVC(kernel='precomputed', C=1/lam, tol=1e-3).fit, float64")],
    check=_bal_check,
    scaling=Scaling("B", [16, 64, 256]),
    target={"sklearn-svc": 3.0},
    batch_param="B",
    description="optimal kernel balancing weights (SVM dual) of B data sets of N units, batched SMO vs SVC loop",
))


# ----------------------------------------------------------------------------- CInA model trained once per shape

@functools.lru_cache(maxsize=8)
def _trained_model(n, d, num_train, num_steps, seed):
    train = synthetic_family(jax.random.key(1000 + seed), num_train, n, d)
    model = CInA(d, hidden=32, num_heads=4, key=jax.random.key(seed))
    fit = fit_cina_multi(jax.random.key(2000 + seed), model, train, num_steps=num_steps, batch_size=16,
                         learning_rate=3e-3)
    jax.block_until_ready(fit.history)
    return fit.model


def _zs_setup(size, key):
    n, d = int(size["N"]), int(size["D"])
    model = _trained_model(n, d, int(size["train"]), int(size["steps"]), 0)
    data = synthetic_family(key, int(size["B"]), n, d)
    return Case(args=(data,), static={"model": model}, work=int(size["B"]), work_unit="data sets")


def _zs_kernel(data, model):
    return cina_weights(model, data).weights


def _per_dataset(data, model):
    return fit_cina(data, lam=model.lam, num_steps=1000).weights


def _dual_per_dataset(data, model):
    return balancing_dual(kernel_matrix(data), data, lam=model.lam, tol=_TOL).weights


def _zs_check(kernel_out, base_out, case):
    data = case.args[0]
    zs = weighted_ate(jnp.asarray(kernel_out), data)
    opt = weighted_ate(jnp.asarray(base_out), data)
    gap = float(jnp.mean(jnp.abs(zs.estimate - opt.estimate)))
    se = float(jnp.mean(opt.std_error))
    if not np.all(np.isfinite(np.asarray(zs.estimate))) or gap > se:
        raise AssertionError(f"zero-shot ATEs differ from per-data-set CInA by {gap:.3g} on average (> mean SE {se:.3g})")


register(SpeedBenchmark(
    name="effects.zero_shot",
    family=FAMILY,
    kernel=_zs_kernel,
    setup=_zs_setup,
    sizes=[{"B": 64, "N": 100, "D": 5, "train": 256, "steps": 300}],
    quick_sizes=[{"B": 8, "N": 40, "D": 5, "train": 32, "steps": 30}],
    baselines=[Baseline("per-dataset-cina", _per_dataset, is_jax=True,
                        note="single-data-set CInA: 1000 Adam steps on the same loss, vmapped over B"),
               Baseline("balancing-dual", _dual_per_dataset, is_jax=True,
                        note="jaxcore's batched SMO dual solver on each data set (the exact optimum), tol 1e-3")],
    check=_zs_check,
    target={"per-dataset-cina": 50.0},
    batch_param="B",
    description="zero-shot CInA weights (one forward pass) vs per-data-set optimisation, B data sets of N units",
))


# ----------------------------------------------------------------------------- quality helpers

def _timed(fn, *args, host=False):
    """(output, seconds of one call after compilation): a JAX method is compiled ahead of time (so that it runs
    once, timed); one with host steps (scikit-learn) cannot be traced, and its first call warms it up."""
    if not host:
        try:
            fn = jax.jit(fn).lower(*args).compile()
        except Exception:  # host-side NumPy / scikit-learn inside: warm up with one untimed call
            jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    out = fn(*args)
    jax.block_until_ready(out)
    return out, time.perf_counter() - t0


def _methods(p, model):
    """name -> fn(data) -> (estimate [B], std_error [B]) for every method (DML separately, host)."""
    lam = 1.0

    def svc(d):
        return weighted_ate(jnp.asarray(svc_weights(kernel_matrix(d), d.treatment, d.mask, lam), d.x.dtype), d)

    def bal(d):
        return weighted_ate(balancing_dual(kernel_matrix(d), d, lam=lam, tol=_TOL).weights, d)

    out = {
        "difference in means": difference_in_means,
        "IPW (logistic)": ipw,
        "AIPW": aipw,
        "SVM balancing (sklearn SVC)": svc,
        "kernel balancing (jaxcore dual)": bal,
        "CInA (single data set)": lambda d: weighted_ate(fit_cina(d, lam=lam, num_steps=p["cina_steps"]).weights, d),
    }
    if model is not None:
        out["CInA zero-shot"] = lambda d: weighted_ate(cina_weights(model, d).weights, d)
    return out


def _dml_batch(d, limit):
    est, se = [], []
    for b in range(min(limit, d.num_datasets)):
        m = np.asarray(d.mask[b])
        e, s = dml_ate(np.asarray(d.x[b])[m], np.asarray(d.treatment[b])[m], np.asarray(d.outcome[b])[m], seed=b)
        est.append(e)
        se.append(s)
    return np.asarray(est), np.asarray(se)


# ----------------------------------------------------------------------------- quality: synthetic

def _run_synthetic(ctx):
    p = ctx.params
    n, d = p["num_units"], p["num_features"]
    errs: dict[str, dict[str, list]] = {}
    times: dict[str, list] = {}
    for seed in p["seeds"]:
        ctx.progress(f"synthetic: training CInA (seed {seed})")
        model = _trained_model(n, d, p["num_train"], p["train_steps"], seed)
        for dist in ("in", "out"):
            test = synthetic_family(jax.random.key(10_000 + seed), p["num_test"], n, d, distribution=dist)
            truth = np.asarray(test.ate)
            for name, fn in _methods(p, model).items():
                ctx.progress(f"synthetic: {name}, {dist}, seed {seed}")
                res, sec = _timed(fn, test)
                errs.setdefault(name, {}).setdefault(dist, []).append(float(np.mean(np.abs(res.estimate - truth))))
                times.setdefault(name, []).append(1e3 * sec / test.num_datasets)
            if p["dml_datasets"] > 0:
                ctx.progress(f"synthetic: DoubleML, {dist}, seed {seed}")
                t0 = time.perf_counter()
                est, _ = _dml_batch(test, p["dml_datasets"])
                times.setdefault("DoubleML IRM (random forests)", []).append(1e3 * (time.perf_counter() - t0) / len(est))
                errs.setdefault("DoubleML IRM (random forests)", {}).setdefault(dist, []).append(
                    float(np.mean(np.abs(est - truth[:len(est)]))))
    rows = []
    metrics = {}
    for name, e in errs.items():
        ins, outs = np.asarray(e["in"]), np.asarray(e["out"])
        rows.append([name, (float(ins.mean()), float(ins.std())), (float(outs.mean()), float(outs.std())),
                     float(np.median(times[name]))])
        key = name.split(" (")[0].lower().replace(" ", "_")
        metrics[f"effects.synthetic.{key}.mae_in"] = float(ins.mean())
        metrics[f"effects.synthetic.{key}.mae_out"] = float(outs.mean())
    note = (f"{p['num_test']} test data sets of N={n}, D={d} per seed (DoubleML on the first {p['dml_datasets']}); "
            f"CInA zero-shot trained on {p['num_train']} unlabelled in-distribution data sets for {p['train_steps']} "
            f"steps; mean +- std over training seeds {list(p['seeds'])}; times per data set after compilation, "
            "measured under shared-CPU load.")
    return QualityResult(
        tables=[Table(title="Synthetic family: mean absolute ATE error (in / out of distribution)",
                      columns=["method", "MAE in-distribution", "MAE out-of-distribution", "ms per data set"],
                      rows=rows, note=note)],
        metrics=metrics)


register(QualityBenchmark(
    name="effects.synthetic",
    family=FAMILY,
    run=_run_synthetic,
    params={"num_units": 100, "num_features": 5, "num_train": 256, "train_steps": 300, "num_test": 32,
            "seeds": [0, 1], "cina_steps": 500, "dml_datasets": 1},
    quick_params={"num_units": 40, "num_train": 32, "train_steps": 30, "num_test": 4, "seeds": [0],
                  "cina_steps": 100, "dml_datasets": 0},
    description="ATE error on the synthetic family, in and out of distribution, every method incl. CInA zero-shot",
    timed=True,  # its tables report wall-clock times: runs alone
))


# ----------------------------------------------------------------------------- quality: LaLonde

def _lalonde_model(samples, p, seed):
    sources = stack_datasets(samples)
    train = resample_datasets(jax.random.key(seed), sources, p["num_train"], p["train_units"])
    model = CInA(sources.num_features, hidden=32, num_heads=4, key=jax.random.key(100 + seed))
    fit = fit_cina_multi(jax.random.key(200 + seed), model, train, num_steps=p["train_steps"], batch_size=16,
                         learning_rate=3e-3)
    return fit.model


def _run_lalonde(ctx):
    p = ctx.params
    rows, metrics, abs_err = [], {}, {}
    times: dict[str, list] = {}
    for treated in ("dw", "lalonde"):
        names = [c for c in p["controls"] if (treated, c) in {tuple(s.split(":")) for s in p["samples"]}]
        if not names:
            continue
        loaded = [load_lalonde(c, treated=treated) for c in names]
        datasets = [effect_data(d["x"], d["treatment"], d["outcome"]) for d in loaded]
        models = []
        for seed in p["seeds"]:
            ctx.progress(f"lalonde: training zero-shot CInA on {treated} covariates (seed {seed})")
            models.append(_lalonde_model(datasets, p, seed))
        # one padded batch per treated group: every method compiles once for all its samples (masks keep
        # each sample's estimate what it is alone); times are the batch's over its number of samples
        stacked = stack_datasets(datasets)
        cells = [{} for _ in names]
        for name, fn in _methods(p, None).items():
            ctx.progress(f"lalonde: {treated}: {name}")
            res, sec = _timed(fn, stacked)
            for i, cell in enumerate(cells):
                cell[name] = (float(res.estimate[i]), float(res.std_error[i]))
            times.setdefault(name, []).append(sec / len(names))
        zs = []
        for model in models:
            res, sec = _timed(lambda z, m=model: weighted_ate(cina_weights(m, z).weights, z), stacked)
            zs.append(np.asarray(res.estimate, np.float64))
            times.setdefault("CInA zero-shot", []).append(sec / len(names))
        for i, cell in enumerate(cells):
            if zs:
                cell["CInA zero-shot"] = (float(np.mean([z[i] for z in zs])), float(np.std([z[i] for z in zs])))
        for c, d, cell in zip(names, loaded, cells):
            bench = d["benchmark"]
            if p["dml"]:
                ctx.progress(f"lalonde: {treated}/{c}: DoubleML")
                t0 = time.perf_counter()
                cell["DoubleML IRM (random forests)"] = dml_ate(d["x"], d["treatment"], d["outcome"])
                times.setdefault("DoubleML IRM (random forests)", []).append(time.perf_counter() - t0)
            for name, (e, s) in cell.items():
                rows.append([f"{treated}:{c}", len(d["outcome"]), round(bench), name, round(e), round(s), round(e - bench)])
                abs_err.setdefault(name, []).append(abs(e - bench))
    summary = [[name, float(np.mean(v)), len(v), float(np.median(times[name]))] for name, v in abs_err.items()]
    for name, v in abs_err.items():
        metrics[f"effects.lalonde.{name.split(' (')[0].lower().replace(' ', '_')}.mean_abs_error"] = float(np.mean(v))
    note = ("Benchmark: the experimental difference in means of the same treated group (dw: 185 Dehejia-Wahba "
            "treated, 1794; lalonde: 297 LaLonde treated, 886). SE column: the method's standard error (CInA "
            f"zero-shot: std over training seeds {list(p['seeds'])}). Zero-shot CInA is trained on "
            f"{p['num_train']} unit subsamples ({p['train_units']} units) of the same treated group's observational "
            "samples, covariates and treatment only (never outcomes). Defaults only: lam = 1, RBF bandwidth "
            "sqrt(D), ridge 1; nothing tuned on the benchmark.")
    return QualityResult(
        tables=[Table(title="LaLonde NSW vs PSID / CPS controls: ATE on 1978 earnings (USD)",
                      columns=["sample", "N", "benchmark", "method", "estimate", "SE", "error"], rows=rows, note=note),
                Table(title="LaLonde: mean absolute error over the samples", columns=[
                    "method", "mean |error| (USD)", "samples", "s per data set"], rows=summary,
                    note=("times after compilation, measured under shared-CPU load; the jaxcore methods run on "
                          "one padded batch of a treated group's samples (time per sample: the batch's over "
                          "its number of samples)"))],
        metrics=metrics)


register(QualityBenchmark(
    name="effects.lalonde",
    family=FAMILY,
    run=_run_lalonde,
    params={"samples": ["dw:psid1", "dw:psid3", "dw:cps3"],
            "controls": ["psid1", "psid2", "psid3", "cps2", "cps3"], "seeds": [0], "num_train": 128,
            "train_units": 256, "train_steps": 200, "cina_steps": 500, "dml": True},
    quick_params={"samples": ["dw:psid3"], "seeds": [], "num_train": 16, "train_units": 64, "train_steps": 20,
                  "cina_steps": 50, "dml": False},
    description="LaLonde NSW treated vs PSID/CPS controls: every method against the experimental benchmark",
    timed=True,  # its tables report wall-clock times: runs alone
))
