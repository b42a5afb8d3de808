"""Peers' values: HF transformers (PyTorch) on the same weights, and SmolLM2 itself (slow)."""

import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxcore import lm
from jaxcore.alignment import dpo_init, dpo_step, sequence_log_probs, vocab_projection

from ._shared import L, N, model, pairs

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def _torch_logps(hf, tokens, mask, loss):
    ids = torch.from_numpy(np.array(tokens).astype(np.int64))
    att = torch.from_numpy(np.array(mask))
    pos = (att.long().cumsum(-1) - 1).clamp(min=0)
    logits = hf(input_ids=ids, attention_mask=att.long(), position_ids=pos).logits[:, :-1].float()
    lp = logits.log_softmax(-1).gather(-1, ids[:, 1:, None])[..., 0]
    scored = torch.from_numpy(np.array(loss))[:, 1:] & att[:, 1:] & att[:, :-1]
    return (lp * scored).sum(-1)


@pytest.mark.slow
def test_log_probs_and_dpo_gradient_equal_transformers():
    p = pairs()
    t, m, c = (np.asarray(a).reshape(2 * N, L) for a in (p.tokens, p.mask, p.loss_mask))
    hf = lm.to_transformers(model())
    with torch.no_grad():
        want = _torch_logps(hf, t, m, c).numpy()
    np.testing.assert_allclose(np.asarray(sequence_log_probs(model(), t, m, c)), want, rtol=1e-5, atol=1e-4)
    # one SGD step of DPO (policy = reference + a swap, so the gradient is not zero): the same update
    opt = optax.sgd(1.0)
    swapped = type(p)(p.tokens[:, ::-1], p.mask[:, ::-1], p.loss_mask[:, ::-1], p.scores)
    state, _ = dpo_step(dpo_init(model(), opt), model(), p, optimizer=opt, beta=0.5)  # policy != reference
    new, metrics = dpo_step(dpo_init(state.policy, opt), model(), swapped, optimizer=opt, beta=0.5)
    policy = lm.to_transformers(state.policy)
    ts, ms, cs = (np.asarray(a).reshape(2 * N, L) for a in (swapped.tokens, swapped.mask, swapped.loss_mask))
    lp = _torch_logps(policy, ts, ms, cs).reshape(-1, 2)
    with torch.no_grad():
        ref = _torch_logps(hf, ts, ms, cs).reshape(-1, 2)
    loss = -torch.nn.functional.logsigmoid(0.5 * ((lp[:, 0] - ref[:, 0]) - (lp[:, 1] - ref[:, 1]))).mean()
    loss.backward()
    assert float(metrics.loss) == pytest.approx(float(loss.detach()), rel=1e-5)
    g_torch = policy.model.layers[1].mlp.down_proj.weight.grad.numpy().T
    g_jax = np.asarray(state.policy.layers[1].w_down - new.policy.layers[1].w_down)  # sgd(1): the gradient
    np.testing.assert_allclose(g_jax, g_torch, rtol=1e-3, atol=1e-6)


@pytest.mark.slow
def test_smollm2_log_probs_equal_transformers_and_embedding_projection():
    model, tok = lm.load_smollm2()
    texts = ["Shut up, you are such a", "The weather forecast for tomorrow says"]
    t, m = tok.encode_batch(texts)
    loss = m.copy()
    loss[:, : t.shape[1] // 2] = False
    hf = lm.to_transformers(model)
    with torch.no_grad():
        want = _torch_logps(hf, t, m, loss).numpy()
    np.testing.assert_allclose(np.asarray(sequence_log_probs(model, t, m, loss)), want, rtol=1e-4, atol=2e-3)
    ids = [tok.encode(" stupid")[0], tok.encode(" weather")[0]]
    proj = vocab_projection(model, model.embed[jnp.asarray(ids)], top_k=1, measure="cosine")
    assert np.asarray(proj.token_ids[:, 0]).tolist() == ids
