"""alignment's sequences and preference pairs on 4 faked devices: log-probabilities and a DPO step.

What shards: the ``[B, L]`` sequences of ``sequence_log_probs`` and their log-probabilities; the
``[B, 2, L]`` pairs of ``dpo_step`` and every per-pair activation of the policy's forward and backward
and of the reference's forward. Replicated: the models, the optimizer state and the step's outputs
(the updated policy and scalar metrics): each device's weight gradient of its own pairs is all-reduced
(a sum of weight-shaped arrays, the one collective of data-parallel training), so the policy after the
step equals the one-device policy to float32 rounding of that sum. ``fit_dpo(..., mesh=)`` (or without
``mesh=`` on pairs placed on a ``NamedSharding``) draws each device's minibatch rows from its own block of
pairs and computes their reference log-probabilities there (``jax.shard_map``): a stratified minibatch,
and nothing of the pairs moves.

The position-averaged internals (``mean_hidden``, ``residual_features``, ``key_activations``) with
``chunk_size < B`` run interleaved chunks (chunk j: rows j, j + m, ...), each spread over every device:
the ``[B, L]`` sequences and every per-sequence activation stay split, with no collective at all.
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxcore import alignment, lm
from jaxcore.alignment.dpo import _minibatch_schedule

from . import _sharding as S

B = 8
PAIRS = 20  # a pair batch (and 2 x it) that no tiny-Llama dimension (64, 32, 96, 8, 4, 2) is a multiple of
OPT = optax.adam(1e-2)


def _model():
    return lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny())


def test_sequence_log_probs_shards_sequences():
    tokens = jax.random.randint(jax.random.key(1), (B, 12), 0, 64)
    loss_mask = jnp.arange(12)[None, :] >= jnp.arange(2, 2 + B)[:, None]  # a different continuation per row
    run = S.check_sharded(lambda m, t, c: alignment.sequence_log_probs(m, t, loss_mask=c),
                          (_model(), tokens, loss_mask), B, (False, True, True), max_memory_ratio=0.75,
                          rtol=1e-5, atol=1e-4)
    lp = np.asarray(run.many)
    assert np.all(lp < 0) and len(np.unique(lp)) == B


def _pairs(n=PAIRS, length=10):
    tokens = jax.random.randint(jax.random.key(1), (n, 2, length), 0, 64)
    mask = jnp.ones((n, 2, length), bool).at[:, :, :2].set(False)  # two left pads
    loss_mask = mask.at[:, :, :5].set(False)  # prompt: positions 2-4, continuation: 5-9
    return alignment.PreferencePairs(tokens, mask, loss_mask, jnp.zeros((n, 2)))


@pytest.mark.slow
def test_dpo_step_shards_pairs():
    model = _model()
    state = alignment.dpo_init(model, OPT)
    # the reference differs from the policy, so the first step's loss is not log 2
    reference = eqx.tree_at(lambda m: m.embed, model, model.embed * 0.9)
    step = lambda st, ref, pairs: alignment.dpo_step(st, ref, pairs, optimizer=OPT, beta=0.5)  # noqa: E731
    args = (state, reference, _pairs())
    one_mesh, many_mesh = S.mesh(1), S.mesh()
    compiled_one, args_one = S.compile_on(step, args, one_mesh, PAIRS, (False, False, True))
    compiled_many, args_many = S.compile_on(step, args, many_mesh, PAIRS, (False, False, True))
    (st1, m1), (stn, mn) = compiled_one(*args_one), compiled_many(*args_many)
    for a, b in zip(jax.tree.leaves((stn, mn)), jax.tree.leaves((st1, m1)), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=1e-6)
    assert abs(float(mn.loss) - np.log(2.0)) > 1e-3 and int(stn.step) == 1
    # the step moved the policy
    assert not np.allclose(np.asarray(stn.policy.embed), np.asarray(model.embed))
    hlo = compiled_many.as_text()
    S.assert_no_batch_gather(hlo, PAIRS)  # also catches the flattened [2B, L] forward (2B is a multiple of B)
    # weight gradients are all-reduced (data-parallel training), nothing of the pair batch is
    assert any(c.op.startswith("all-reduce") and any(s != () for s in c.shapes) for c in S.collectives(hlo))
    S.assert_memory_shrinks(compiled_one, compiled_many, max_ratio=0.6)  # measured 0.35 (4.2 MB -> 1.5 MB)


ROWS = 20  # sequences for the position-averaged internals; chunks of 4 rows: 5 chunks, each on all 4 devices


def _sequences(n=ROWS, length=9):
    tokens = jax.random.randint(jax.random.key(2), (n, length), 1, 64)
    mask = jnp.arange(length)[None, :] >= (jnp.arange(n) % 3)[:, None]  # 0-2 left pads
    pos = mask & (jnp.arange(length)[None, :] >= 4 + jnp.arange(n)[:, None] % 4)  # a different average per row
    return tokens, mask, pos


_INTERNALS = {
    "mean_hidden": lambda m, t, c, p: alignment.mean_hidden(m, t, c, position_mask=p, chunk_size=4),
    "residual_features": lambda m, t, c, p: alignment.residual_features(m, t, c, position_mask=p, chunk_size=4),
    "key_activations": lambda m, t, c, p: alignment.key_activations(
        m, t, c, layers=np.array([1, 0, 1]), indices=np.array([3, 90, 17]), position_mask=p, chunk_size=4),
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n == "mean_hidden" else pytest.mark.slow)
                                  for n in _INTERNALS])  # the other two read mean_hidden's program's outputs
def test_chunked_internals_shard_sequences(name):
    # chunk_size (4) < B (20): chunk j holds rows j, j + 5, j + 10, j + 15, one on each device, so the
    # lax.map over chunks never moves a row; the output comes back in the caller's row order
    model, (tokens, mask, pos) = _model(), _sequences()
    run = S.check_sharded(_INTERNALS[name], (model, tokens, mask, pos), ROWS, (False, True, True, True),
                          max_memory_ratio=0.8, rtol=1e-5, atol=1e-5, collectives_allowed=False)
    # (memory per device, 4 vs 1 devices, measured: 0.54 mean_hidden, 0.71 residual_features, 0.59 key
    # activations; the replicated model bounds it)
    # the one-device answer is the unchunked one, row by row
    whole = alignment.mean_hidden(model, tokens, mask, position_mask=pos, chunk_size=ROWS)
    want = {"mean_hidden": whole, "residual_features": whole.residual[:, -1],
            "key_activations": whole.mlp[:, [1, 0, 1], [3, 90, 17]]}[name]
    for a, b in zip(jax.tree.leaves(run.many), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


FIT_PAIRS, FIT_BATCH = 40, 20  # 10 pairs per device, 5 of them in each step's minibatch


@pytest.mark.slow
def test_fit_dpo_mesh_draws_device_local_minibatches():
    # with mesh=, each device draws its minibatch rows from its own block of pairs (a stratified
    # sample): the fit equals one-device dpo_steps over that schedule, and no pair moves between devices
    model, pairs, opt = _model(), _pairs(FIT_PAIRS), optax.sgd(0.5)
    reference = eqx.tree_at(lambda m: m.embed, model, model.embed * 0.9)
    key = jax.random.key(7)
    fit = lambda m, p: alignment.fit_dpo(key, model, p, reference=reference, num_steps=3,  # noqa: E731
                                         batch_size=FIT_BATCH, optimizer=opt, beta=0.5, mesh=m)
    compiled, arrays = S.compile_on(functools.partial(fit, S.mesh()), (pairs,), S.mesh(), FIT_PAIRS, (True,))
    res = compiled(*arrays)
    schedule = np.asarray(_minibatch_schedule(key, FIT_PAIRS, FIT_BATCH, 3, S.NUM_DEVICES))
    # every step: 5 rows of each device's block of 10, each row of a block once in two steps
    blocks = schedule // (FIT_PAIRS // S.NUM_DEVICES)
    np.testing.assert_array_equal(blocks, np.repeat(np.arange(S.NUM_DEVICES), 5)[None].repeat(3, 0))
    assert all(len(set(schedule[:2, 5 * d: 5 * d + 5].ravel())) == 10 for d in range(S.NUM_DEVICES))
    state = alignment.dpo_init(model, opt)
    for s, b in enumerate(schedule):
        state, metrics = alignment.dpo_step(state, reference, pairs.take(b), optimizer=opt, beta=0.5)
        np.testing.assert_allclose(float(res.history.loss[s]), float(metrics.loss), rtol=1e-5)
        np.testing.assert_allclose(float(res.history.accuracy[s]), float(metrics.accuracy))
    for a, b in zip(jax.tree.leaves(res.policy), jax.tree.leaves(state.policy), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=1e-6)
    flat = lambda a: a.reshape(2 * FIT_PAIRS, -1)  # noqa: E731
    ref = alignment.sequence_log_probs(reference, flat(pairs.tokens), flat(pairs.mask), flat(pairs.loss_mask))
    np.testing.assert_allclose(np.asarray(res.reference_log_probs), np.asarray(ref).reshape(-1, 2), rtol=1e-5,
                               atol=1e-4)
    S.assert_batch_sharded(res.reference_log_probs, FIT_PAIRS, S.NUM_DEVICES)
    hlo = compiled.as_text()
    S.assert_no_batch_gather(hlo, FIT_BATCH)  # neither a minibatch (20) nor all pairs (40) nor 2 x either
    assert not [c for c in S.collectives(hlo) if c.op.startswith("all-gather")]
    # each device holds and runs its own block of pairs (measured 0.28: 3.7 MB -> 1.0 MB; without mesh=
    # the minibatch is assembled on every device and the ratio is 1.0)
    compiled_one, _ = S.compile_on(functools.partial(fit, S.mesh(1)), (pairs,), S.mesh(1), FIT_PAIRS, (True,))
    S.assert_memory_shrinks(compiled_one, compiled, max_ratio=0.5)


@pytest.mark.slow
def test_fit_dpo_reads_the_split_from_the_pairs():
    # without mesh=, pairs placed on a NamedSharding of their leading axis are fitted as with mesh= that
    # mesh (the same program: bit-for-bit the same history and policy; its HLO and memory are checked in
    # the test above); pairs on one device draw the one-device minibatches
    model, pairs, opt = _model(), _pairs(FIT_PAIRS), optax.sgd(0.5)
    reference = eqx.tree_at(lambda m: m.embed, model, model.embed * 0.9)
    placed = S.place(pairs, S.mesh(), FIT_PAIRS)
    fit = lambda p, **kw: alignment.fit_dpo(jax.random.key(7), model, p, reference=reference,  # noqa: E731
                                            num_steps=2, batch_size=FIT_BATCH, optimizer=opt, beta=0.5, **kw)
    inferred, explicit, single = fit(placed), fit(placed, mesh=S.mesh()), fit(pairs)
    for a, b in zip(jax.tree.leaves((inferred.history, inferred.policy)),
                    jax.tree.leaves((explicit.history, explicit.policy)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    S.assert_batch_sharded(inferred.reference_log_probs, FIT_PAIRS, S.NUM_DEVICES)
    assert not np.allclose(np.asarray(single.history.loss), np.asarray(inferred.history.loss))
