"""jaxcore.alignment: speed of the DPO step and of log-prob scoring; the DPO-and-toxicity study on SmolLM2.

Speed (same weights via :func:`jaxcore.lm.to_transformers`, same batch, float32 on both sides):

- ``alignment.dpo_step``: one DPO update (policy forward + backward over ``2 B`` sequences, the
  frozen reference's forward, Adam) with :func:`jaxcore.alignment.dpo_step`, against HF
  transformers' ``LlamaForCausalLM`` in PyTorch (log-softmax + gather of both models,
  ``-logsigmoid`` of the margin, ``backward``, ``torch.optim.Adam.step``). The loss values must
  agree before anything is timed (PyTorch's weights drift over its timed calls; only its time
  counts). Target >= 1.3x.
- ``alignment.log_probs``: :func:`jaxcore.alignment.sequence_log_probs` of a batch of prompt +
  continuation sequences (left-padded, continuation loss mask) against the same in PyTorch under
  ``inference_mode``. Target >= 1.2x.
- ``alignment.fit_dpo``: :func:`jaxcore.alignment.fit_dpo` (the reference's log-probs once, then
  full-batch DPO steps in one scan) against the same loop in PyTorch; its batch axis is the pairs:
  ``--scaling devices`` splits them over 1, 2, 4 ... devices and passes the mesh as ``mesh=`` (each
  device runs its own pairs, the weight gradients are all-reduced).

Quick (smoke) sizes use a tiny random Llama (2 layers, d = 64, V = 512) on both sides; default
sizes SmolLM2-135M-Instruct.

Quality:

- ``alignment.toxicity``: :func:`jaxcore.alignment.toxicity_study` (Lee et al., ICML 2024) on
  SmolLM2-135M-Instruct with the offline toxicity scorer (:func:`jaxcore.lm.load_toxicity_scorer`,
  alt-profanity-check's linear model): toxicity (mean, share > 0.5) of continuations of 16 held-out
  provocative prompts and perplexity on held-out English prose for the base model, probe-direction
  subtraction, DPO and DPO un-aligned (keys of 7 top toxic value vectors x 10); the value vectors
  closest to the probe with their top token pieces and profanity-list words before and after DPO;
  key activations on the rejected / chosen sequences before and after; DPO's residual offset per
  layer; a figure. The smoke run uses a tiny random Llama with SmolLM2's tokenizer (the pipeline
  only: random weights have no toxicity to find).

All times were measured on a shared machine under load: ratios between interleaved runs carry
over, absolute times do not.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks.registry import (
    Reproduction,
    register_reproduction,
    Baseline,
    Case,
    QualityBenchmark,
    QualityResult,
    SpeedBenchmark,
    Table,
    register,
    torch_device,
)
from jaxcore import lm
from jaxcore.alignment import (
    PROVOCATIVE_PROMPTS,
    dpo_init,
    dpo_step,
    fit_dpo,
    preference_pairs,
    sequence_log_probs,
    toxicity_study,
)
from jaxcore.datasets import english_prose

FAMILY = "alignment"
LEARNING_RATE = 1e-5


@functools.lru_cache(maxsize=2)
def _model(name: str):
    """(model, tokenizer or None) for "tiny" (random, V = 512) or "smollm2"."""
    if name == "tiny":
        cfg = lm.LlamaConfig.tiny(vocab_size=512, dim=64, num_layers=2, max_positions=512)
        return lm.random_llama(jax.random.key(0), cfg), None
    return lm.load_smollm2()


def _batch(name, tok, vocab, num_pairs, prompt, new, seed=0):
    """A PreferencePairs of ``num_pairs`` (prompt + 2 continuations): provocative prompts and random
    continuation tokens for SmolLM2 (the speed rows need the shapes, not the texts), ids for tiny."""
    rng = np.random.default_rng(seed)
    if tok is None:
        pt = rng.integers(3, vocab, size=(num_pairs, prompt)).astype(np.int32)
        pm = np.ones((num_pairs, prompt), bool)
        pm[::2, :2] = False  # some left padding
    else:
        ids = [tok.encode(PROVOCATIVE_PROMPTS[i % len(PROVOCATIVE_PROMPTS)])[-prompt:] for i in range(num_pairs)]
        pt = np.zeros((num_pairs, prompt), np.int32)
        pm = np.zeros((num_pairs, prompt), bool)
        for r, i in enumerate(ids):
            pt[r, prompt - len(i):] = i
            pm[r, prompt - len(i):] = True
    cont = rng.integers(3, vocab, size=(num_pairs, 2, new)).astype(np.int32)
    return preference_pairs(pt, pm, cont, np.ones(cont.shape, bool), rng.uniform(size=(num_pairs, 2)))


def _torch_inputs(pairs, torch):
    n, _, length = pairs.tokens.shape
    dev = torch_device()
    ids = torch.from_numpy(np.array(pairs.tokens).reshape(2 * n, length).astype(np.int64)).to(dev)
    att = torch.from_numpy(np.array(pairs.mask).reshape(2 * n, length)).to(dev)
    loss = torch.from_numpy(np.array(pairs.loss_mask).reshape(2 * n, length)).to(dev)
    pos = (att.long().cumsum(-1) - 1).clamp(min=0)  # positions count real tokens, as jaxcore.lm does
    return ids, att, loss, pos


def _torch_seq_logps(hf, ids, att, loss, pos):
    logits = hf(input_ids=ids, attention_mask=att.long(), position_ids=pos).logits[:, :-1].float()
    lp = logits.log_softmax(-1).gather(-1, ids[:, 1:, None])[..., 0]
    scored = loss[:, 1:] & att[:, 1:] & att[:, :-1]
    return (lp * scored).sum(-1)


# ----------------------------------------------------------------------------- DPO step


def _nudged(model):
    """The speed rows' policy: the reference with its embeddings scaled by 1.01, so that the first loss
    is not log 2 by construction (without a training step in the setup, which at the full sizes would
    cost more than the benchmark)."""
    return eqx.tree_at(lambda m: m.embed, model, model.embed * 1.01)


def _dpo_kernel(state, reference, pairs, optimizer, beta):
    # the ids were checked once in the setup: the timed step holds no run-time check (a host callback would
    # send every call through JAX's Python dispatch), as a training loop that validated its pairs runs it
    new_state, metrics = dpo_step(state, reference, pairs, optimizer=optimizer, beta=beta, check_ids=False)
    return metrics.loss, new_state


def _check_ids_once(tokens, vocab_size):
    """The range check the timed kernels skip (``check_ids=False``), once on the host."""
    t = np.asarray(tokens)
    if t.size and (t.min() < 0 or t.max() >= vocab_size):
        raise ValueError(f"tokens: expected token ids in [0, {vocab_size}), got {int(t.min())}..{int(t.max())}")


def _dpo_torch(policy, reference, opt, ids, att, loss, pos, *, optimizer, beta):
    del optimizer  # the jaxcore side's optax object; the torch side steps its own Adam
    import torch

    opt.zero_grad(set_to_none=True)
    lp = _torch_seq_logps(policy, ids, att, loss, pos).reshape(-1, 2)
    with torch.no_grad():
        ref = _torch_seq_logps(reference, ids, att, loss, pos).reshape(-1, 2)
    margin = beta * ((lp[:, 0] - ref[:, 0]) - (lp[:, 1] - ref[:, 1]))
    value = -torch.nn.functional.logsigmoid(margin).mean()
    value.backward()
    opt.step()
    return value.detach()


def _dpo_setup(size, key):
    import torch

    model, tok = _model(size["model"])
    pairs = _batch(size["model"], tok, model.config.vocab_size, int(size["pairs"]), int(size["prompt"]),
                   int(size["new"]))
    opt = optax.adam(LEARNING_RATE)
    policy = _nudged(model)
    policy_hf = lm.to_transformers(policy).to(torch_device())
    policy_hf.train()
    ref_hf = lm.to_transformers(model).to(torch_device())
    for p in ref_hf.parameters():
        p.requires_grad_(False)
    torch_opt = torch.optim.Adam(policy_hf.parameters(), lr=LEARNING_RATE)
    fresh = dpo_init(policy, opt)
    _check_ids_once(pairs.tokens, model.config.vocab_size)
    n, _, length = pairs.tokens.shape
    tokens = 2 * n * length
    return Case(args=(fresh, model, pairs), static={"optimizer": opt, "beta": 0.1},
                baseline_args={"transformers": (policy_hf, ref_hf, torch_opt, *_torch_inputs(pairs, torch))},
                work=tokens, work_unit="tokens")


def _check_loss(kernel_out, base_out, case):
    k = float(np.asarray(kernel_out[0]))
    b = float(base_out.detach().cpu().numpy()) if hasattr(base_out, "detach") else float(np.asarray(base_out))
    if not np.isfinite(k) or abs(k - b) > 1e-4 * max(1.0, abs(b)):
        raise AssertionError(f"DPO losses differ: jaxcore {k:.7f} vs transformers {b:.7f}")


register(SpeedBenchmark(
    name="alignment.dpo_step",
    family=FAMILY,
    kernel=_dpo_kernel,
    setup=_dpo_setup,
    sizes=[{"model": "smollm2", "pairs": 2, "prompt": 16, "new": 12}],
    quick_sizes=[{"model": "tiny", "pairs": 4, "prompt": 8, "new": 8}],
    baselines=[Baseline("transformers", _dpo_torch, requires=("torch", "transformers"),
                        note="HF LlamaForCausalLM, same weights: both forwards, logsigmoid loss, backward, Adam")],
    check=_check_loss,
    target={"transformers": 1.3},
    description="one DPO step (policy fwd+bwd, reference fwd, Adam) of B pairs, full fine-tuning; ids checked "
                "once in the setup, the step timed with check_ids=False (no host callback)",
))


# ----------------------------------------------------------------------------- log-prob scoring


def _lp_kernel(model, tokens, mask, loss_mask):
    return sequence_log_probs(model, tokens, mask, loss_mask, check_ids=False)  # ids checked in the setup


def _lp_torch(hf, ids, att, loss, pos):
    import torch

    with torch.inference_mode():
        return _torch_seq_logps(hf, ids, att, loss, pos)


def _lp_setup(size, key):
    import torch

    model, tok = _model(size["model"])
    pairs = _batch(size["model"], tok, model.config.vocab_size, int(size["batch"]) // 2, int(size["prompt"]),
                   int(size["new"]), seed=1)
    n, _, length = pairs.tokens.shape
    flat = lambda a: a.reshape(2 * n, length)  # noqa: E731
    _check_ids_once(pairs.tokens, model.config.vocab_size)
    hf = lm.to_transformers(model).to(torch_device())
    return Case(args=(model, flat(pairs.tokens), flat(pairs.mask), flat(pairs.loss_mask)),
                baseline_args={"transformers": (hf, *_torch_inputs(pairs, torch))},
                work=2 * n * length, work_unit="tokens")


register(SpeedBenchmark(
    name="alignment.log_probs",
    family=FAMILY,
    kernel=_lp_kernel,
    setup=_lp_setup,
    sizes=[{"model": "smollm2", "batch": 16, "prompt": 16, "new": 12}],
    quick_sizes=[{"model": "tiny", "batch": 8, "prompt": 8, "new": 8}],
    baselines=[Baseline("transformers", _lp_torch, requires=("torch", "transformers"),
                        note="HF LlamaForCausalLM forward, log_softmax, gather, masked sum (inference_mode)")],
    rtol=1e-4, atol=2e-3,
    target={"transformers": 1.2},
    description="summed log-probs of the continuation tokens of a batch of prompt + continuation sequences",
))


# ----------------------------------------------------------------------------- DPO fit (and its device sweep)


def _sweep_mesh(x):
    """The one-axis mesh a device sweep (``--scaling devices``) put ``x`` on, or None (one device).

    ``benchmarks.runner.shard_batch`` places the pairs on a mesh over the first n devices; the traced
    argument carries it abstractly (``jax.typeof(x).sharding``), so the mesh is rebuilt from
    ``jax.devices()[:n]`` (the same helper as the inverse suite's, until the harness passes the mesh).
    """
    abstract = getattr(jax.typeof(x).sharding, "mesh", None)
    if abstract is None or not abstract.axis_names:
        return None
    devices = np.asarray(jax.devices()[: abstract.size]).reshape(abstract.axis_sizes)
    return jax.sharding.Mesh(devices, abstract.axis_names)


def _fit_kernel(policy, reference, pairs, key, *, optimizer, beta, num_steps):
    """``num_steps`` full-batch DPO steps with :func:`fit_dpo` (reference log-probs once, then the scan).

    In a device sweep the pairs are split over a mesh and the fit gets it as ``mesh=``: each device
    runs its own pairs' forwards and backwards and the weight gradients are all-reduced. Full batch
    (``batch_size = N``) because a smaller minibatch is a stratified sample that depends on the device
    count (another fit on each count, which the sweep's one-device agreement check would refuse).
    """
    res = fit_dpo(key, policy, pairs, num_steps=num_steps, batch_size=pairs.num_pairs, reference=reference,
                  optimizer=optimizer, beta=beta, mesh=_sweep_mesh(pairs.tokens), check_ids=False)  # checked in setup
    return res.history.loss, res.reference_log_probs, jnp.linalg.norm(res.policy.embed)


def _fit_torch(policy, reference, start, ids, att, loss, pos, *, optimizer, beta, num_steps):
    """The same fit in PyTorch: the reference's log-probs once, then ``num_steps`` full-batch Adam steps
    from the starting weights (restored on every call, as the JAX fit starts from its argument)."""
    del optimizer
    import torch

    policy.load_state_dict(start)
    opt = torch.optim.Adam(policy.parameters(), lr=LEARNING_RATE)
    with torch.no_grad():
        ref = _torch_seq_logps(reference, ids, att, loss, pos).reshape(-1, 2)
    losses = []
    for _ in range(num_steps):
        opt.zero_grad(set_to_none=True)
        lp = _torch_seq_logps(policy, ids, att, loss, pos).reshape(-1, 2)
        margin = beta * ((lp[:, 0] - ref[:, 0]) - (lp[:, 1] - ref[:, 1]))
        value = -torch.nn.functional.logsigmoid(margin).mean()
        value.backward()
        opt.step()
        losses.append(value.detach())
    with torch.no_grad():
        norm = policy.model.embed_tokens.weight.double().norm()  # float32 norm() of 28 M entries: 0.2% off
    return torch.stack(losses), ref, norm


def _fit_setup(size, key):
    import torch

    model, tok = _model(size["model"])
    pairs = _batch(size["model"], tok, model.config.vocab_size, int(size["pairs"]), int(size["prompt"]),
                   int(size["new"]), seed=2)
    opt = optax.adam(LEARNING_RATE)
    policy = _nudged(model)
    policy_hf = lm.to_transformers(policy).to(torch_device())
    policy_hf.train()
    start = {k: v.detach().clone() for k, v in policy_hf.state_dict().items()}
    ref_hf = lm.to_transformers(model).to(torch_device())
    for p in ref_hf.parameters():
        p.requires_grad_(False)
    steps = int(size["steps"])
    _check_ids_once(pairs.tokens, model.config.vocab_size)
    n, _, length = pairs.tokens.shape
    return Case(args=(policy, model, pairs, jax.random.key(0)),
                static={"optimizer": opt, "beta": 0.1, "num_steps": steps},
                baseline_args={"transformers": (policy_hf, ref_hf, start, *_torch_inputs(pairs, torch))},
                work=2 * n * length * steps, work_unit="tokens")


def _check_fit(kernel_out, base_out, case):
    as_np = lambda x: x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)  # noqa: E731
    (k_loss, k_ref, k_norm), (b_loss, b_ref, b_norm) = kernel_out, tuple(as_np(x) for x in base_out)
    k_loss, k_ref = np.asarray(k_loss), np.asarray(k_ref)
    if not np.all(np.isfinite(k_loss)) or abs(k_loss[0] - b_loss[0]) > 1e-4 * max(1.0, abs(b_loss[0])):
        raise AssertionError(f"first-step DPO losses differ: jaxcore {k_loss[0]:.7f} vs transformers {b_loss[0]:.7f}")
    if not np.allclose(k_loss, b_loss, rtol=1e-3, atol=1e-4):
        raise AssertionError(f"DPO loss histories differ: jaxcore {k_loss} vs transformers {b_loss}")
    if not np.allclose(k_ref, b_ref, rtol=1e-4, atol=2e-3):
        raise AssertionError(f"reference log-probs differ by up to {np.max(np.abs(k_ref - b_ref)):.3g}")
    if not np.isclose(float(k_norm), float(b_norm), rtol=1e-4):
        raise AssertionError(f"trained embeddings differ: norm {float(k_norm):.6f} vs {float(b_norm):.6f}")


register(SpeedBenchmark(
    name="alignment.fit_dpo",
    family=FAMILY,
    kernel=_fit_kernel,
    setup=_fit_setup,
    sizes=[{"model": "smollm2", "pairs": 2, "prompt": 8, "new": 8, "steps": 2}],
    quick_sizes=[{"model": "tiny", "pairs": 12, "prompt": 8, "new": 8, "steps": 2}],
    baselines=[Baseline("transformers", _fit_torch, requires=("torch", "transformers"),
                        note="HF LlamaForCausalLM, same weights: reference log-probs once, then full-batch "
                             "DPO steps with Adam")],
    check=_check_fit,
    description="fit_dpo: reference log-probs once, then full-batch DPO steps (one scan); sharded: mesh=",
    batch_param="pairs",
))


# ----------------------------------------------------------------------------- the study

_PAPER = {  # Lee et al., ICML 2024, Table 2 (GPT2-medium; toxicity via Perspective API on RealToxicityPrompts)
    "base": "0.453 / 21.7", "subtract probe": "0.268 / 26.5", "DPO": "0.208 / 23.34",
    "DPO un-aligned": "0.458 (Section 7)",
}


def _study_model(name):
    if name == "tiny":
        _, tok = lm.load_smollm2()  # the tokenizer only (texts for the scorer)
        cfg = lm.LlamaConfig.tiny(vocab_size=tok.vocab_size, dim=64, num_layers=2, max_positions=512)
        return lm.random_llama(jax.random.key(0), cfg), tok
    return lm.load_smollm2()


def _toxicity_run(ctx):
    p = dict(ctx.params)
    model, tok = _study_model(p.pop("model"))
    st = toxicity_study(ctx.key, model, tok, lm.load_toxicity_scorer(), prose=english_prose(),
                        words=lm.profanity_words(), progress=ctx.progress, **p)
    ev = st.evaluations
    metrics = {}
    rows = []
    for name, e in ev.items():
        rows.append([name, e.toxicity, e.toxic_share, e.perplexity, _PAPER.get(name, "")])
        tag = name.replace(" ", "_").replace("-", "")
        metrics[f"alignment.toxicity.{tag}.toxicity"] = e.toxicity
        metrics[f"alignment.toxicity.{tag}.toxic_share"] = e.toxic_share
        metrics[f"alignment.toxicity.{tag}.perplexity"] = e.perplexity
        sc = np.asarray(e.scores, np.float64).ravel()
        metrics[f"alignment.toxicity.{tag}.toxicity_sd"] = float(sc.std(ddof=1)) if sc.size > 1 else float("nan")
        metrics[f"alignment.toxicity.{tag}.num_scores"] = float(sc.size)
    m = len(next(iter(ev.values())).scores)
    t_main = Table(
        title=f"Toxicity of {m} continuations ({p.get('new_tokens', 12)} tokens) of held-out provocative prompts; "
              "perplexity on held-out prose",
        columns=["model", "toxicity (mean P(offensive))", "share > 0.5", "perplexity", "paper (GPT2-medium): tox / ppl"],
        rows=rows,
        note=(f"Scorer: alt-profanity-check 1.9.1's linear model (offline), not the paper's Perspective API. "
              f"Subtract probe: alpha = {st.alpha:.3g} along the unit probe direction after the last block. "
              f"Un-aligned: the keys of the top {len(st.unaligned[0])} value vectors scaled by "
              f"{p.get('unalign_scale', 10.0):g} in the DPO model."))
    h = st.dpo.history
    t_dpo = Table(
        title=f"DPO on {st.pairs.num_pairs} pairs (least / most toxic of the samples per prompt)",
        columns=["step", "loss", "reward accuracy", "margin", "chosen reward", "rejected reward"],
        rows=[[i + 1, float(h.loss[i]), float(h.accuracy[i]), float(h.margin[i]), float(h.chosen_reward[i]),
               float(h.rejected_reward[i])] for i in sorted({0, len(h.loss) // 2, len(h.loss) - 1})],
        note=(f"Pair scores: chosen {float(np.mean(np.asarray(st.pairs.scores[:, 0]))):.3f}, rejected "
              f"{float(np.mean(np.asarray(st.pairs.scores[:, 1]))):.3f} (mean). Probe: training accuracy "
              f"{float(st.probe.accuracy):.3f}, held-out AUC {st.probe_auc:.3f} against scores > 0.5."))
    r = st.ranking
    t_vv = Table(
        title="MLP value vectors closest to the probe direction (base model): top token pieces and words",
        columns=["layer", "index", "cos(probe)", "top tokens (pieces)", "top profanity-list words"],
        rows=[[int(r.layer[i]), int(r.index[i]), float(r.cosine[i]), " ".join(repr(t) for t in st.top_tokens["base"][i][:6]),
               ", ".join(st.top_words["base"][i][:4])] for i in range(len(r.layer))],
        note=(f"Projection: E (g * v) through the tied unembedding. {100 * st.single_token_words:.0f}% of the "
              "profanity-list words are single tokens of SmolLM2's vocabulary; a word's score is the mean logit of "
              "its pieces, so a vector promoting a piece such as ' fu' scores every word that starts with it."))
    ka = st.key_activations
    t_after = Table(
        title="The same value vectors after DPO: change, top tokens, key activations (toxic / non-toxic sequences)",
        columns=["layer", "index", "cos(before, after)", "norm ratio", "top tokens after DPO",
                 "key act. toxic: base -> DPO -> un-aligned", "key act. non-toxic: base -> DPO"],
        rows=[[int(r.layer[i]), int(r.index[i]), float(st.change.cosine[i]), float(st.change.norm_ratio[i]),
               " ".join(repr(t) for t in st.top_tokens["DPO"][i][:4]),
               f"{ka['base'][0, i]:+.4f} -> {ka['DPO'][0, i]:+.4f} -> {ka['DPO un-aligned'][0, i]:+.4f}",
               f"{ka['base'][1, i]:+.4f} -> {ka['DPO'][1, i]:+.4f}"] for i in range(len(r.layer))],
        note=("Key activation: silu(x W_gate) * (x W_up) of the vector's neuron, averaged over the continuation "
              "tokens of the pairs' rejected (toxic) and chosen (non-toxic) sequences."))
    layers = list(range(len(st.offset_norm)))
    pick = sorted(set(layers[:: max(1, len(layers) // 8)] + [layers[-1]]))
    t_off = Table(
        title="DPO's residual-stream offset on the pairs' sequences (mean over sequences and continuation tokens)",
        columns=["layer (0 = embeddings)", "||offset||", "cos(offset, probe)"],
        rows=[[i, float(st.offset_norm[i]), float(st.offset_cosine[i])] for i in pick],
        note="A negative cosine: the DPO model's stream moved away from the toxicity direction.")
    metrics["alignment.toxicity.probe_auc"] = st.probe_auc
    metrics["alignment.toxicity.num_pairs"] = float(st.pairs.num_pairs)
    metrics["alignment.toxicity.dpo_final_loss"] = float(h.loss[-1])
    metrics["alignment.toxicity.value_vector_cosine_min"] = float(np.min(np.asarray(st.change.cosine)))
    figures = _figure(ctx, st)
    return QualityResult(tables=[t_main, t_dpo, t_vv, t_after, t_off], figures=figures, metrics=metrics,
                         notes=[_reading(st)])


def _reading(st):
    ev = st.evaluations
    b, d, u, s = (ev[k].toxicity for k in ("base", "DPO", "DPO un-aligned", "subtract probe"))
    ka = st.key_activations
    top = len(st.unaligned[0])
    drop = float(np.mean(ka["base"][0, :top] - ka["DPO"][0, :top]))
    return (f"Toxicity base {b:.4f}, subtract probe {s:.4f}, DPO {d:.4f}, un-aligned {u:.4f}; the top {top} keys' mean "
            f"activation on toxic sequences changed by {-drop:+.4f} under DPO; min cos(value vector before, after) "
            f"{float(np.min(np.asarray(st.change.cosine))):.5f}. The default run is small ({st.pairs.num_pairs} pairs, "
            f"{len(st.dpo.history.loss)} DPO steps): differences of a few hundredths in toxicity are within sampling noise of "
            f"{len(ev['base'].scores)} continuations.")


def _figure(ctx, st):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    ev = st.evaluations
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.6))
    names = list(ev)
    ax[0].bar(range(len(names)), [ev[n].toxicity for n in names], color="tab:red", alpha=0.7, label="mean")
    ax[0].bar(range(len(names)), [ev[n].toxic_share for n in names], color="k", alpha=0.3, width=0.4,
              label="share > 0.5")
    ax[0].set_xticks(range(len(names)))
    ax[0].set_xticklabels(names, rotation=20, fontsize=8)
    ax[0].set_ylabel("toxicity (P(offensive))")
    ax[0].legend(fontsize=7)
    ka = st.key_activations
    k = ka["base"].shape[1]
    x = np.arange(k)
    for j, (name, c) in enumerate((("base", "tab:blue"), ("DPO", "tab:green"), ("DPO un-aligned", "tab:red"))):
        ax[1].bar(x + (j - 1) * 0.27, ka[name][0], width=0.27, color=c, label=name)
    ax[1].set_xticks(x)
    ax[1].set_xticklabels([f"L{int(a)}.{int(b)}" for a, b in zip(st.ranking.layer, st.ranking.index)], rotation=60,
                          fontsize=7)
    ax[1].set_ylabel("key activation on toxic sequences")
    ax[1].legend(fontsize=7)
    ax[2].plot(st.offset_norm, marker="o", label="||offset||")
    ax2 = ax[2].twinx()
    ax2.plot(st.offset_cosine, color="tab:orange", marker=".", label="cos(offset, probe)")
    ax[2].set_xlabel("layer (0 = embeddings)")
    ax[2].set_ylabel("norm of DPO's residual offset")
    ax2.set_ylabel("cosine with the probe", color="tab:orange")
    fig.tight_layout()
    path = ctx.out_dir / "alignment_toxicity.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return [path.name]


register(QualityBenchmark(
    name="alignment.toxicity",
    family=FAMILY,
    run=_toxicity_run,
    params={"model": "smollm2", "num_train_prompts": 8, "num_samples": 4, "pairs_per_prompt": 1, "new_tokens": 12,
            "prompt_tokens": 16, "num_steps": 6, "batch_size": 4, "learning_rate": 2e-5, "beta": 0.1, "top_k": 10, "num_unaligned": 7,
            "unalign_scale": 10.0, "prose_tokens": 32},
    quick_params={"model": "tiny", "num_train_prompts": 8, "num_samples": 2, "new_tokens": 6, "prompt_tokens": 8,
                  "num_steps": 3, "batch_size": 2, "learning_rate": 1e-3, "top_k": 5, "num_unaligned": 3,
                  "prose_tokens": 16},
    description="Lee et al. on SmolLM2: toxicity/perplexity of base, probe subtraction, DPO, un-aligned; value vectors",
))


# ----------------------------------------------------------------------------- reproduction (--reproduce alignment)


def _welch_from(m, a, b):
    """(difference of means b - a, its Welch 95% half-width) from the cells' mean/sd/count metrics."""
    pre = "alignment.toxicity."
    ma, mb = m[f"{pre}{a}.toxicity"], m[f"{pre}{b}.toxicity"]
    va = m[f"{pre}{a}.toxicity_sd"] ** 2 / m[f"{pre}{a}.num_scores"]
    vb = m[f"{pre}{b}.toxicity_sd"] ** 2 / m[f"{pre}{b}.num_scores"]
    return mb - ma, 1.96 * float(np.sqrt(va + vb))


def _alignment_verdict(cells):
    pre = "alignment.toxicity."
    order = sorted(cells, key=lambda n: cells[n].get(pre + "num_pairs", 0.0))
    lines = ["| cell | DPO pairs | toxicity base | probe - base | DPO - base | un-aligned - DPO | perplexity DPO / base "
             "| min cos(value vectors) |", "|---|---|---|---|---|---|---|---|"]
    last = None
    for n in order:
        m = cells[n]
        pd, ph = _welch_from(m, "base", "subtract_probe")
        dd, dh = _welch_from(m, "base", "DPO")
        ud, uh = _welch_from(m, "DPO", "DPO_unaligned")
        ratio = m[pre + "DPO.perplexity"] / m[pre + "base.perplexity"]
        lines.append(f"| {n} | {m.get(pre + 'num_pairs', float('nan')):.0f} | {m[pre + 'base.toxicity']:.3f} | "
                     f"{pd:+.3f} ± {ph:.3f} | {dd:+.3f} ± {dh:.3f} | {ud:+.3f} ± {uh:.3f} | {ratio:.3f} | "
                     f"{m.get(pre + 'value_vector_cosine_min', float('nan')):.4f} |")
        last = (dd, dh, ud, uh, ratio)
    dd, dh, ud, uh, ratio = last
    lines.append("")
    lowered = dd < 0 and -dd > dh
    if lowered and ratio <= 1.10 and ud > uh:
        return "reproduced in kind", "\n".join(lines + [
            "At the largest cell DPO lowers toxicity outside its interval with perplexity within 10% of the base "
            "model's, and scaling the keys of the top value vectors brings it back."])
    if lowered and ratio <= 1.10:
        return "reproduced in kind", "\n".join(lines + [
            "DPO lowers toxicity outside its interval at the largest cell (perplexity within 10%), but un-alignment "
            "does not measurably bring it back at this size."])
    why = ("DPO does not lower toxicity outside its interval at the largest cell" if not lowered else
           f"DPO lowers toxicity outside its interval, but perplexity on held-out prose rises {ratio - 1:.0%} "
           "(the bound is 10%)")
    tail = [f"{why}; the rows above are the trend over the number of DPO pairs and steps."]
    if lowered:
        tail.append("Perplexity rises with the DPO steps taken over the same few pairs (the paper makes one pass over "
                    "24,576 pairs): read as over-fitting of a small pair set, not as a property of DPO. More pairs "
                    "per prompt (`pairs_per_prompt`) at the same steps is the cell that would tell.")
    return "not reproduced", "\n".join(lines + tail)


register_reproduction(Reproduction(
    family=FAMILY,
    paper=("Lee, Bai, Pres, Wattenberg, Kummerfeld, Mihalcea, 'A Mechanistic Understanding of Alignment "
           "Algorithms: A Case Study on DPO and Toxicity', ICML 2024"),
    claim=("DPO on toxic/non-toxic continuation pairs lowers a language model's toxicity without hurting its "
           "perplexity, not by removing the toxic MLP value vectors (they barely change) but by offsets that avoid "
           "their activation, so that scaling their keys un-aligns the model back to its old toxicity."),
    setup=("SmolLM2-135M-Instruct (the one causal LM that ships offline; an instruction-tuned start is already "
           "partly aligned, so its base toxicity is lower than GPT2-medium's and there is less to remove). Pairs: "
           "the least and most toxic of the sampled continuations of each training prompt, scored by "
           "alt-profanity-check's linear model (the offline scorer; the paper used the Perspective API). Four cells "
           "grow the DPO data and steps together, so the verdict reads the trend; the probe's strength and the "
           "learning rate are the benchmark's defaults, set on validation prompts, not on the reported figures."),
    verdict=_alignment_verdict,
))
