"""jaxcore.rl: speed of vmapped combination locks and of FOOBAR; sample efficiency of Song, Bagnell & Singh (ICML 2024).

Speed (measured under load on a shared machine: the ratios, timed interleaved, are what count):

- ``rl.env_steps``: 1,024 rich-observation locks (H = 100, A = 10, d = 128; 4,096 and 65,536 in the
  full configuration) stepped for a whole episode
  by an epsilon-greedy linear policy (``jaxcore.rl.evaluate``), against the same rollout in NumPy
  vectorised over the environments (arrays of states, one NumPy call per step for all of them).
  Target >= 5x.
- ``rl.env_steps_loop``: the same at 64 environments against the research-code reference, one
  environment at a time (a Python loop over environments and steps).
- ``rl.foobar``: the whole FOOBAR run (forward moment matching and backward PSDP on traces, greedy
  evaluation) against the same algorithm in PyTorch written as research code usually is: batched
  tensors, a Python loop over levels, steps and adam updates. Target >= 3x. Default H = 5 (the
  PyTorch loop runs 200 Adam updates per level and the harness calls it about six times; H = 100
  in the full configuration).

Quality:

- ``rl.sample_efficiency``: success rate and return versus online episodes for FOOBAR, online-only
  PSDP (epsilon-greedy), PSDP with a reset model and behaviour cloning with actions (no online
  episode), as the horizon grows, over seeds (one lock and one offline data set per seed), with a figure.
  Default: H in {5, 15}, 3 seeds, FOOBAR against online-only PSDP (each method and horizon is one
  compiled program, which dominates the cost on CPU); the full configuration: H up to 100, 5 seeds,
  every method.
"""

from __future__ import annotations

import math

import numpy as np

import jax
import jax.numpy as jnp

from benchmarks.registry import (
    Baseline,
    Case,
    QualityBenchmark,
    QualityResult,
    Reproduction,
    SpeedBenchmark,
    Table,
    register,
    register_reproduction,
    torch_device,
    torch_threads,
)
from jaxcore.rl import (
    behaviour_cloning,
    collect_offline,
    evaluate,
    foobar,
    make_lock,
    online_psdp,
    optimal_policy,
    reset_psdp,
)

FAMILY = "rl"
_EPS = 0.05  # exploration of the benchmarked rollout policy (so that returns vary across episodes)


# ----------------------------------------------------------------------------- environment speed


def _env_kernel(key, lock, policy, num_envs):
    res = evaluate(key, lock, policy, num_envs, epsilon=_EPS)
    return jnp.stack([res.mean_return, res.success_rate])


def _env_setup(size, key):
    H, n = int(size["horizon"]), int(size["envs"])
    lock = make_lock(key, horizon=H, num_actions=10)
    pol = optimal_policy(lock)
    np_args = (np.asarray(lock.advancing), np.asarray(lock.rotation), float(lock.noise), np.asarray(pol.weight),
               int(jax.random.randint(key, (), 0, 2 ** 30)))
    return Case(args=(jax.random.fold_in(key, 1), lock, pol), static={"num_envs": n},
                baseline_args={"numpy": np_args, "loop": np_args}, work=n * H, work_unit="env steps")


def _np_obs(rng, latent, h, rotation, noise, live, num_latent):
    n, d = latent.shape[0], rotation.shape[0]
    z = np.zeros((n, d))
    z[np.arange(n), latent] = 1.0
    z[:, num_latent + h] += 1.0
    z[:, :live] += noise * rng.standard_normal((n, live))
    return z @ rotation.T


def _np_rollout(advancing, rotation, noise, weight, seed, num_envs):
    """The lock and the epsilon-greedy linear policy in NumPy, vectorised over environments."""
    rng = np.random.default_rng(seed)
    H, G = advancing.shape
    A = weight.shape[1]
    live = G + 1 + H + 1
    latent = rng.integers(0, G, num_envs)
    obs = _np_obs(rng, latent, 0, rotation, noise, live, G + 1)
    ret = np.zeros(num_envs)
    success = np.zeros(num_envs, bool)
    for h in range(H):
        a = np.argmax(obs @ weight[h].T, axis=1)
        a = np.where(rng.random(num_envs) < _EPS, rng.integers(0, A, num_envs), a)
        good = latent < G
        adv = advancing[h][np.minimum(latent, G - 1)]
        advances = good & (a == adv)
        falls = good & (a != adv)
        paid = rng.random(num_envs) < 0.5
        ret += np.where(advances & (h == H - 1), 1.0, np.where(falls & paid, 0.1, 0.0))
        success |= advances & (h == H - 1)
        latent = np.where(advances, rng.integers(0, G, num_envs), G)
        obs = _np_obs(rng, latent, h + 1, rotation, noise, live, G + 1)
    return np.array([ret.mean(), success.mean()])


def _loop_rollout(advancing, rotation, noise, weight, seed, num_envs):
    """One environment at a time (research-code reference): Python loops over environments and steps."""
    rng = np.random.default_rng(seed)
    H, G = advancing.shape
    A, d = weight.shape[1], rotation.shape[0]
    live = G + 1 + H + 1
    rets, succ = [], []
    for _ in range(num_envs):
        s = int(rng.integers(0, G))
        ret, ok = 0.0, False
        for h in range(H + 1):
            z = np.zeros(d)
            z[s] = 1.0
            z[G + 1 + h] += 1.0
            z[:live] += noise * rng.standard_normal(live)
            x = rotation @ z
            if h == H:
                break
            a = int(np.argmax(weight[h] @ x)) if rng.random() >= _EPS else int(rng.integers(0, A))
            if s < G and a == advancing[h, s]:
                if h == H - 1:
                    ret, ok = ret + 1.0, True
                s = int(rng.integers(0, G))
            else:
                if s < G and rng.random() < 0.5:
                    ret += 0.1
                s = G
        rets.append(ret)
        succ.append(ok)
    return np.array([np.mean(rets), np.mean(succ)])


def _env_check(kernel_out, base_out, case):
    """Different random streams: mean return and success rate must agree within sampling error."""
    k, b = np.asarray(kernel_out, float), np.asarray(base_out, float)
    n = case.static["num_envs"]
    tol = 5.0 * np.sqrt(0.25 / n) + 0.01
    if not np.all(np.abs(k - b) <= tol):
        raise AssertionError(f"(mean return, success rate): kernel {k.round(4)} vs baseline {b.round(4)}, tol {tol:.3f}")


register(SpeedBenchmark(
    name="rl.env_steps",
    family=FAMILY,
    kernel=_env_kernel,
    setup=_env_setup,
    sizes=[{"horizon": 100, "envs": 1024}],
    quick_sizes=[{"horizon": 25, "envs": 1024}],
    baselines=[Baseline("numpy", _np_rollout, requires=("numpy",),
                        note="NumPy vectorised over environments (one call per step for all), float64")],
    check=_env_check,
    target={"numpy": 5.0},
    description="episodes of rich-observation combination locks (H steps, Hadamard-rotated noisy obs) under vmap",
))

register(SpeedBenchmark(
    name="rl.env_steps_loop",
    family=FAMILY,
    kernel=_env_kernel,
    setup=_env_setup,
    sizes=[{"horizon": 100, "envs": 64}],
    quick_sizes=[{"horizon": 25, "envs": 64}],
    baselines=[Baseline("loop", _loop_rollout, requires=("numpy",),
                        note="one environment at a time, Python loops over environments and steps")],
    check=_env_check,
    description="the same rollout against a one-environment-at-a-time loop (research-code reference)",
))


# ----------------------------------------------------------------------------- FOOBAR speed

_FB = dict(num_updates=200, learning_rate=0.5, ridge=1e-3)


def _foobar_kernel(key, lock, data, num_samples, num_eval):
    res = foobar(key, lock, data, num_samples=num_samples, num_eval_episodes=num_eval, **_FB)
    return res.success_rate


def _foobar_setup(size, key):
    H, n = int(size["horizon"]), int(size["samples"])
    k_l, k_d, k_r = jax.random.split(key, 3)
    lock = make_lock(k_l, horizon=H, num_actions=10)
    data = collect_offline(k_d, lock, 4 * n)
    t_args = (np.asarray(lock.advancing), np.asarray(lock.rotation), float(lock.noise),
              np.asarray(data.observations), int(jax.random.randint(k_r, (), 0, 2 ** 30)))
    episodes = 2 * H * n
    return Case(args=(k_r, lock, data), static={"num_samples": n, "num_eval": int(size["eval"])},
                baseline_args={"torch": t_args}, work=episodes, work_unit="online episodes")


def _torch_foobar(advancing, rotation, noise, expert, seed, num_samples, num_eval):
    """FOOBAR in PyTorch as research code: batched tensors, Python loops over levels, steps and updates."""
    import torch

    dev = torch_device()
    with torch_threads(1):
        g = torch.Generator(device=dev).manual_seed(seed)
        adv = torch.as_tensor(np.array(advancing), device=dev, dtype=torch.long)
        R = torch.as_tensor(np.array(rotation), device=dev, dtype=torch.float32)
        E = torch.as_tensor(np.array(expert), device=dev, dtype=torch.float32)
        H, G = adv.shape
        A, d, S = 10, R.shape[0], G + 1
        live = S + H + 1
        N, U, lr = num_samples, _FB["num_updates"], _FB["learning_rate"]

        def obs(lat, h):
            z = torch.zeros(lat.shape[0], d, device=dev)
            z[torch.arange(lat.shape[0], device=dev), lat] = 1.0
            z[:, S + h] += 1.0
            z[:, :live] += noise * torch.randn(lat.shape[0], live, generator=g, device=dev)
            return z @ R.T

        def step(lat, h, a):
            n = lat.shape[0]
            good = lat < G
            ok = good & (a == adv[h][lat.clamp(max=G - 1)])
            falls = good & ~ok
            paid = torch.rand(n, generator=g, device=dev) < 0.5
            r = torch.where(ok & (h == H - 1), 1.0, torch.where(falls & paid, 0.1, 0.0))
            nxt = torch.where(ok, torch.randint(0, G, (n,), generator=g, device=dev), torch.full_like(lat, G))
            return nxt, r

        Wf, bf = torch.zeros(H, A, d, device=dev), torch.zeros(H, A, device=dev)
        Wb, bb = torch.zeros(H, A, d, device=dev), torch.zeros(H, A, device=dev)

        def sample(logits):
            return torch.distributions.Categorical(logits=logits).sample()

        for h in range(H):  # forward: FAIL with the linear discriminator (moment gap)
            lat = torch.randint(0, G, (N,), generator=g, device=dev)
            x = obs(lat, 0)
            for t in range(h):
                lat, _ = step(lat, t, sample(x @ Wf[t].T + bf[t]))
                x = obs(lat, t + 1)
            a = torch.randint(0, A, (N,), generator=g, device=dev)
            lat2, _ = step(lat, h, a)
            xn = obs(lat2, h + 1)
            mu_e = E[h + 1].mean(0)
            W = torch.zeros(A, d, device=dev, requires_grad=True)
            b = torch.zeros(A, device=dev, requires_grad=True)
            opt = torch.optim.Adam([W, b], lr=lr)
            for _ in range(U):
                opt.zero_grad()
                w = torch.softmax(x @ W.T + b, dim=1)[torch.arange(N, device=dev), a]
                mu = (w[:, None] * xn).sum(0) / w.sum().clamp_min(1e-12)
                loss = ((mu_e - mu) ** 2).sum()
                loss.backward()
                opt.step()
            Wf[h], bf[h] = W.detach(), b.detach()
        eye = torch.eye(d + 1, device=dev)
        for h in reversed(range(H)):  # backward: PSDP on traces, per-action ridge regression
            lat = torch.randint(0, G, (N,), generator=g, device=dev)
            x = obs(lat, 0)
            for t in range(h):
                lat, _ = step(lat, t, sample(x @ Wf[t].T + bf[t]))
                x = obs(lat, t + 1)
            a = torch.randint(0, A, (N,), generator=g, device=dev)
            x_h = x
            lat, ret = step(lat, h, a)
            for t in range(h + 1, H):
                x = obs(lat, t)
                lat, r = step(lat, t, torch.argmax(x @ Wb[t].T + bb[t], dim=1))
                ret = ret + r
            xb = torch.cat([x_h, torch.ones(N, 1, device=dev)], 1)
            for act in range(A):
                m = (a == act).float()
                gram = (xb * m[:, None]).T @ xb + _FB["ridge"] * eye
                theta = torch.linalg.solve(gram, (xb * (m * ret)[:, None]).sum(0))
                Wb[h, act], bb[h, act] = theta[:d], theta[d]
        lat = torch.randint(0, G, (num_eval,), generator=g, device=dev)
        ok = torch.zeros(num_eval, dtype=torch.bool, device=dev)
        for t in range(H):  # greedy evaluation
            x = obs(lat, t)
            a = torch.argmax(x @ Wb[t].T + bb[t], dim=1)
            ok |= (lat < G) & (a == adv[t][lat.clamp(max=G - 1)]) & (t == H - 1)
            lat, _ = step(lat, t, a)
        return float(ok.float().mean())


def _foobar_check(kernel_out, base_out, case):
    k, b = float(np.asarray(kernel_out)), float(np.asarray(base_out))
    if not (k >= 0.9 and b >= 0.9):
        raise AssertionError(f"success rates: jaxcore {k:.3f}, torch {b:.3f} (both should solve the lock)")


register(SpeedBenchmark(
    name="rl.foobar",
    family=FAMILY,
    kernel=_foobar_kernel,
    setup=_foobar_setup,
    sizes=[{"horizon": 5, "samples": 256, "eval": 1000}],
    quick_sizes=[{"horizon": 5, "samples": 256, "eval": 500}],
    baselines=[Baseline("torch", _torch_foobar, requires=("torch",),
                        note="same algorithm in PyTorch: batched tensors, Python loops over levels/steps/updates")],
    check=_foobar_check,
    target={"torch": 3.0},
    description="whole FOOBAR run (forward FAIL + backward PSDP-trace + evaluation), linear classes, rich obs",
))


# ----------------------------------------------------------------------------- quality


def _stack(trees):
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *trees)


def _run_sample_efficiency(ctx):
    p = ctx.params
    horizons, budgets, S = list(p["horizons"]), sorted(int(b) for b in p["budgets"]), int(p["seeds"])
    A, n_off, n_eval = int(p["num_actions"]), int(p["num_offline"]), int(p["num_eval"])
    n = budgets[-1]
    methods = [m for m in ("FOOBAR", "online PSDP", "reset-model PSDP") if m in p["methods"]]
    with_bc = "BC" in p["methods"]
    curves = {}
    rows, metrics = [], {}
    for H in horizons:
        ctx.progress(f"sample efficiency: H={H}")
        kh = jax.random.fold_in(ctx.key, H)
        seeds = jax.random.split(kh, S)
        locks = _stack([make_lock(jax.random.fold_in(k, 0), horizon=H, num_actions=A) for k in seeds])
        datas = _stack([collect_offline(jax.random.fold_in(k, 1), jax.tree_util.tree_map(lambda a: a[i], locks),
                                        n_off) for i, k in enumerate(seeds)])
        run_keys = jax.vmap(lambda k: jax.random.fold_in(k, 2))(seeds)
        common = dict(num_samples=n, num_eval_episodes=n_eval)
        for b in budgets:
            bj = jnp.int32(b)
            fits = {
                "FOOBAR": lambda: foobar(run_keys, locks, datas, budget=bj, **common),
                "online PSDP": lambda: online_psdp(run_keys, locks, budget=bj, **common),
                "reset-model PSDP": lambda: reset_psdp(run_keys, locks, datas, budget=bj, **common),
            }
            for m in methods:
                r = fits[m]()
                curves.setdefault((m, H), []).append((int(r.num_online_episodes[0]), np.asarray(r.success_rate),
                                                      np.asarray(r.mean_return)))
        if with_bc:
            bc = behaviour_cloning(run_keys, locks, datas, num_eval_episodes=n_eval)
            curves[("BC (with actions)", H)] = [(0, np.asarray(bc.success_rate), np.asarray(bc.mean_return))]
        for m in methods + (["BC (with actions)"] if with_bc else []):
            pts = curves[(m, H)]
            cells = [(float(s.mean()), float(s.std())) for _, s, _ in pts]
            if m.startswith("BC"):
                cells = cells * len(budgets)
            rows.append([H, m] + cells + [(float(pts[-1][2].mean()), float(pts[-1][2].std()))])
            tag = f"rl.sample_efficiency.H{H}.{m.split()[0].lower()}"
            metrics[f"{tag}.success"] = cells[-1][0]
            for b, (eps, succ, _) in zip(budgets, pts * len(budgets) if m.startswith("BC") else pts):
                metrics[f"{tag}.b{b}.success"] = float(succ.mean())
                metrics[f"{tag}.b{b}.success_min"] = float(succ.min())
                metrics[f"{tag}.b{b}.success_sem"] = float(succ.std(ddof=1) / np.sqrt(succ.size)) if succ.size > 1 else 0.0
                metrics[f"{tag}.b{b}.episodes"] = float(eps)
    metrics["rl.sample_efficiency.seeds"] = float(S)
    metrics["rl.sample_efficiency.num_eval"] = float(n_eval)
    plt = _plt()
    fig, axes = plt.subplots(1, len(horizons), figsize=(4.2 * len(horizons), 3.6), squeeze=False)
    for ax, H in zip(axes[0], horizons):
        for m, mk in zip(methods, ("o-", "s-", "^-")):
            pts = curves[(m, H)]
            xs = [e for e, _, _ in pts]
            ys = np.array([s.mean() for _, s, _ in pts])
            sd = np.array([s.std() for _, s, _ in pts])
            ax.errorbar(xs, ys, yerr=sd, fmt=mk, label=m, capsize=2)
        if with_bc:
            bc_s = curves[("BC (with actions)", H)][0][1]
            ax.axhline(float(bc_s.mean()), color="k", ls=":", label="BC with actions (offline only)")
        ax.set(xscale="log", xlabel="online episodes", ylabel="success rate", ylim=(-0.03, 1.03),
               title=f"combination lock H = {H}, A = {A}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(ctx.out_dir / "rl_sample_efficiency.png", dpi=110)
    plt.close(fig)
    table = Table(
        title=f"Success rate versus online episodes per level (budget b; mean ± std over {S} seeds)",
        columns=["H", "method"] + [f"b={b}" for b in budgets] + [f"return (b={budgets[-1]})"],
        rows=rows,
        note=(f"Rich-observation locks (2 good + 1 dead state per level, A = {A}, noise 0.1, Hadamard rotation, "
              f"anti-shaped reward 0.1 w.p. 1/2); one lock and {n_off} offline episodes of the optimal policy per "
              f"seed. Online episodes: FOOBAR 2 H b (forward + backward), online PSDP 2 rounds of H b "
              f"(epsilon-greedy roll-ins, the same budget), reset-model PSDP H b (resets to offline states); BC uses "
              f"the offline actions and no online episode. Greedy evaluation over {n_eval} episodes. "
              "One compiled program per method and horizon serves every budget and seed."),
    )
    return QualityResult(tables=[table], figures=["rl_sample_efficiency.png"], metrics=metrics)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


register(QualityBenchmark(
    name="rl.sample_efficiency",
    family=FAMILY,
    run=_run_sample_efficiency,
    # default: one compiled program per method and horizon (compile time dominates on CPU), so two horizons and
    # the contrast the paper draws (FOOBAR vs online-only PSDP); reset-model PSDP, BC and more horizons in the
    # full configuration
    params={"horizons": [5, 15], "budgets": [32, 128, 512], "seeds": 3, "num_actions": 10,
            "num_offline": 1024, "num_eval": 500, "methods": ["FOOBAR", "online PSDP"]},
    # quick: the two methods the paper contrasts, one short horizon (compile time dominates on CPU)
    quick_params={"horizons": [5], "budgets": [64, 256], "seeds": 2, "num_offline": 512, "num_eval": 200,
                  "methods": ["FOOBAR", "online PSDP"]},
    description="success rate vs online episodes: FOOBAR, online-only PSDP, reset-model PSDP, BC, as H grows",
))


# ----------------------------------------------------------------------------- reproduction verdict

_RL_METHODS = (("foobar", "FOOBAR"), ("reset-model", "reset-model PSDP"), ("online", "online PSDP"),
               ("bc", "BC (with actions)"))


def _rl_curves(cells):
    """{H: {method: {budget: (mean, sem, min, episodes)}}} from the cells' metrics."""
    out = {}
    for m in cells.values():
        for k, v in m.items():
            if not k.startswith("rl.sample_efficiency.H") or not k.endswith(".success"):
                continue
            head = k[len("rl.sample_efficiency."):-len(".success")]
            try:
                h, rest = head.split(".", 1)
                meth, b = rest.rsplit(".", 1)
            except ValueError:
                continue
            if not b.startswith("b"):
                continue
            pre = k[:-len(".success")]
            out.setdefault(int(h[1:]), {}).setdefault(meth, {})[int(b[1:])] = (
                float(v), float(m.get(pre + ".success_sem", 0.0)), float(m.get(pre + ".success_min", v)),
                float(m.get(pre + ".episodes", float("nan"))))
    return out


def _sample_efficiency_verdict(cells):
    """FOOBAR (trace model, observation-only offline data) against reset-model PSDP at every horizon: matched when
    its mean success at the largest budget is at least 0.9 and within 0.05 of reset-model PSDP's; online-only
    PSDP, which has no offline data, is the contrast (it should fail as H grows)."""
    curves = _rl_curves(cells)
    if not curves:
        return "incomplete", "No horizon finished."
    from scipy.stats import t as student_t

    seeds = min(int(m.get("rl.sample_efficiency.seeds", 2)) for m in cells.values())
    z = float(student_t.ppf(0.975, max(seeds - 1, 1)))  # 95% half-widths: t over seeds
    budgets = None
    rows, matched, online_fail, verdict_rows = [], {}, {}, []
    for H in sorted(curves):
        by = curves[H]
        budgets = sorted(next(iter(by.values())))
        for key, label in _RL_METHODS:
            if key not in by:
                continue
            c = by[key]
            cellstr = [f"{c[b][0]:.3f} ± {z * c[b][1]:.3f}" if b in c else "-" for b in budgets]
            rows.append(f"| {H} | {label} | " + " | ".join(cellstr) + f" | {c[budgets[-1]][3]:.0f} |")
        bl = budgets[-1]
        if "foobar" in by and "reset-model" in by:
            f, r = by["foobar"][bl], by["reset-model"][bl]
            diff, half = f[0] - r[0], z * math.hypot(f[1], r[1])
            matched[H] = f[0] >= 0.9 and diff >= -0.05
            first = {key: next((b for b in budgets if by[key][b][0] >= 0.9), None) for key in ("foobar", "reset-model")}
            verdict_rows.append(f"| {H} | {f[0]:.3f} ± {z * f[1]:.3f} | {r[0]:.3f} ± {z * r[1]:.3f} | "
                                f"{diff:+.3f} ± {half:.3f} | {first['foobar'] or '> ' + str(bl)} | "
                                f"{first['reset-model'] or '> ' + str(bl)} | "
                                + (f"{by['online'][bl][0]:.3f}" if "online" in by else "-") + " |")
        if "online" in by:
            online_fail[H] = by["online"][bl][0] < 0.5
    head = ["| H | method | " + " | ".join(f"b={b}" for b in budgets) + " | online episodes at the largest b |",
            "|---|---|" + "---|" * len(budgets) + "---|"]
    summary = ["| H | FOOBAR at b=%d | reset-model PSDP | difference (95%%) | FOOBAR: first b >= 0.9 | reset-model: "
               "first b >= 0.9 | online PSDP |" % budgets[-1], "|---|---|---|---|---|---|---|"]
    text = "\n".join(summary + verdict_rows + ["", f"Success rate (mean ± {z:.2f} s.e.: 95% t interval over {seeds} seeds) per budget b:", ""]
                     + head + rows)
    if not matched:
        return "incomplete", text + "\n\nNo horizon ran both FOOBAR and reset-model PSDP."
    hs = sorted(matched)
    if all(matched.values()) and all(online_fail.get(H, True) for H in hs if H >= 10):
        return "reproduced", text + (
            f"\n\nAt every horizon ({', '.join(map(str, hs))}) FOOBAR, which sees only observations offline and "
            "only full traces online, reaches the success of PSDP with a reset model (within 0.05, both >= 0.9 at "
            f"the largest budget), while online-only PSDP without the offline data stays below 0.5.")
    if any(matched.values()):
        ok = [H for H in hs if matched[H]]
        bad = [H for H in hs if not matched[H]]
        both = [H for H in bad if curves[H].get("reset-model", {}).get(budgets[-1], (1.0,))[0] < 0.9]
        extra = ""
        if both:
            extra = (f" At H in {both} reset-model PSDP fails as well (mean success below 0.9 at b = {budgets[-1]}), "
                     "so the shortfall is common to both methods, not FOOBAR's alone")
            nonmono = [H for H in both if max(curves[H]["foobar"][b][0] for b in budgets[:-1])
                       > curves[H]["foobar"][budgets[-1]][0] + 0.1]
            extra += ((f"; success falling from a smaller budget to b = {budgets[-1]} at H in {nonmono} points to an "
                       "optimisation failure at that horizon rather than too few samples (not diagnosed here)")
                      if nonmono else "") + "."
        return "reproduced in kind", text + (
            f"\n\nFOOBAR matches reset-model PSDP at H in {ok} but not at {bad} within the largest budget run "
            "here." + extra)
    return "not reproduced", text + "\n\nFOOBAR reaches reset-model PSDP's success at no horizon run here."


register_reproduction(Reproduction(
    family=FAMILY,
    paper="Y. Song, J. A. Bagnell, A. Singh, 'Hybrid Reinforcement Learning from Offline Observation Alone', "
          "ICML 2024",
    claim=("With offline data of observations only (no actions, no rewards) and online access by full traces "
           "from the initial state (no reset model), FOOBAR competes with the best policy the data covers as well "
           "as an algorithm given a reset model (PSDP with resets to the offline states), where online RL without "
           "the offline data fails on combination locks."),
    setup=("Rich-observation combination locks (jaxcore.rl.make_lock: 2 good + 1 dead latent state per level, "
           "A = 10 actions, observation noise 0.1 under a Hadamard rotation, anti-shaped reward), one lock and one "
           "offline data set of 1,024 optimal-policy episodes (observations only for FOOBAR and reset-model PSDP) "
           "per seed, 5 seeds, horizons H = 5, 10, 25 and 50 (one cell each). Budget b = online samples per level "
           "and stage (32, 128, 512); the online episodes each method spends are in the metrics (FOOBAR 2 H b, "
           "reset-model PSDP H b, online PSDP 2 H b). Greedy evaluation over 500 episodes per seed. The library's "
           "default learning rates, ridge and epsilon are used unchanged: nothing is tuned, so there is no "
           "validation split to choose on. BC uses the offline actions (which FOOBAR never sees) as a reference. "
           "Verdict rule, fixed before the run: FOOBAR matched at H when its mean success at b = 512 is >= 0.9 and "
           "within 0.05 of reset-model PSDP's; reproduced when it is matched at every H and online PSDP stays "
           "below 0.5 at H >= 10."),
    verdict=_sample_efficiency_verdict,
))
