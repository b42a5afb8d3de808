"""decoding's prompts on 4 faked devices: controlled decoding with the prompt batch split.

What shards: the ``[B, P]`` prompts and everything per prompt (the KV cache, hidden states, the scorer's
values, the tilted logits, the new tokens, blockwise's K candidates per prompt); replicated: the model
and the scorer heads. CD-Q adds ``lambda Q(h)`` row by row; CD-FUDGE picks its k candidates with a sort
along the vocabulary (row-local, unlike ``lax.top_k``) and adds their values with a scatter that has a
batch dimension; blockwise CD keeps each prompt's best block with a batched gather; ``rollouts`` (the
scorers' training data) runs its chunks of rows interleaved, so each chunk spans every device (with
``chunk_size`` a multiple of the device count dividing N). The same key gives the same tokens on 1 and on
4 devices.
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxcore import decoding, lm

from . import _sharding as S

B = 8


def _problem():
    model = lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny())
    return model, jax.random.randint(jax.random.key(1), (B, 5), 1, 50)


def _tokens_and_logprobs(out):
    return out.tokens, out.logprobs


def _cdq(model):
    return decoding.CDQ(decoding.QHead(model.config.dim, model.config.vocab_size, key=jax.random.key(3)), 4.0)


def _cdfudge(model):
    return decoding.CDFudge(decoding.ValueHead(model.config.dim, key=jax.random.key(3)), 4.0, 4)


@pytest.mark.slow
@pytest.mark.parametrize("make", [_cdq, _cdfudge], ids=["cdq", "cdfudge"])
def test_tokenwise_generate_shards_prompts(make):
    model, prompt = _problem()
    processor = make(model)
    run = S.check_sharded(lambda m, p, k: lm.generate(k, m, p, max_new_tokens=3, processor=processor),
                          (model, prompt, jax.random.key(2)), B, (False, True, False), select=_tokens_and_logprobs,
                          max_memory_ratio=0.9, rtol=1e-5, atol=1e-5)
    # the tilt is strong (lambda = 4, values ~ 1): the sampled distribution is not the base model's
    assert not np.allclose(np.asarray(run.many.logprobs), np.asarray(run.many.model_logprobs), atol=1e-3)


@pytest.mark.slow
def test_blockwise_generate_shards_prompts():
    model, prompt = _problem()
    head = decoding.ValueHead(model.config.dim, key=jax.random.key(3))
    run = S.check_sharded(
        lambda m, p, k: decoding.blockwise_generate(k, m, p, scorer=head, num_candidates=2, block_size=2,
                                                    max_new_tokens=4),
        (model, prompt, jax.random.key(2)), B, (False, True, False), max_memory_ratio=0.9, rtol=1e-5, atol=1e-5)
    assert run.many.tokens.shape == (B, 4) and run.many.scores.shape == (B, 2)


@pytest.mark.slow
def test_rollouts_shards_samples(chunk_size=4):  # two chunks of 4 rows, each spanning the 4 devices
    model, prompt = _problem()
    tokens = jax.random.randint(jax.random.key(4), (B, 4), 0, 64)
    mask = np.ones((B, 4), bool)

    def prepare(m, p, t, c, r):
        zero = jnp.zeros(t.shape, jnp.float32)
        return decoding.rollouts(m, p, None, lm.GenerateResult(t, c, zero, zero, None), r, top_k=8,
                                 chunk_size=chunk_size)

    run = S.check_sharded(prepare, (model, prompt, tokens, mask, jnp.arange(B, dtype=jnp.float32)), B,
                          (False, True, True, True, True), max_memory_ratio=0.9, rtol=1e-5, atol=1e-5,
                          select=lambda r: (r.hidden, r.tokens, r.mask, r.reward, r.next_ids, r.next_probs))
    # (weight, unit weights, is a constant of the program: replicated)
    # the kept next-token ids are the 8 most likely under the model, their probabilities renormalised
    assert run.many.hidden.shape == (B, 5, model.config.dim)
    logits = np.asarray(lm.forward(model, np.concatenate([np.asarray(prompt), np.asarray(tokens)], axis=1)))
    np.testing.assert_array_equal(np.asarray(run.many.next_ids), np.argsort(-logits[:, 4:], axis=-1)[..., :8])
    np.testing.assert_allclose(np.asarray(run.many.next_probs).sum(-1), 1.0, rtol=1e-5)
    assert np.all(np.diff(np.asarray(run.many.next_probs), axis=-1) <= 1e-7)  # descending, as lax.top_k orders them


@pytest.mark.slow
def test_fit_cdq_full_batch_is_data_parallel():
    # the head's training on rollouts split over the devices: each device's gradient of its own samples,
    # all-reduced (weight-shaped); minibatches (batch_size < N): test_fit_minibatches_are_device_local
    n = 20  # no dimension of the head or the tiny Llama (64, 32, 96, 8) is a multiple of it
    model = lm.random_llama(jax.random.key(0), lm.LlamaConfig.tiny())
    prompt = jax.random.randint(jax.random.key(1), (n, 5), 1, 50)
    tokens = jax.random.randint(jax.random.key(4), (n, 4), 0, 64)
    zero = jnp.zeros((n, 4))
    data = decoding.rollouts(model, prompt, None, lm.GenerateResult(tokens, np.ones((n, 4), bool), zero, zero, None),
                             jnp.linspace(0.0, 1.0, n), top_k=8, chunk_size=4)
    head = decoding.QHead(model.config.dim, model.config.vocab_size)
    fit = lambda d: decoding.fit_cdq(jax.random.key(3), head, d, num_steps=5)  # noqa: E731
    compiled_one, args_one = S.compile_on(fit, (data,), S.mesh(1), n, (True,))
    compiled_many, args_many = S.compile_on(fit, (data,), S.mesh(), n, (True,))
    one, many = compiled_one(*args_one), compiled_many(*args_many)
    np.testing.assert_allclose(np.asarray(many.losses), np.asarray(one.losses), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(many.head.weight), np.asarray(one.head.weight), rtol=1e-4, atol=1e-6)
    assert np.asarray(many.losses)[-1] < np.asarray(many.losses)[0]  # it trained
    S.assert_no_batch_gather(compiled_many.as_text(), n)
    S.assert_memory_shrinks(compiled_one, compiled_many, max_ratio=0.9)


MB_N, MB_BATCH, MB_STEPS = 40, 20, 6  # 10 samples per device, 5 of them in each step's minibatch


def _random_rollouts(n=MB_N, length=12, dim=32, vocab=64, k=16):
    """Rollouts of random hidden states and a random top-k law (the losses need nothing else)."""
    keys = jax.random.split(jax.random.key(11), 5)
    ids = jnp.argsort(jax.random.uniform(keys[2], (n, length + 1, vocab)), axis=-1)[..., :k].astype(jnp.int32)
    probs = jax.nn.softmax(jax.random.normal(keys[3], (n, length + 1, k)), axis=-1)
    live = jnp.arange(length)[None, :] < (length - jnp.arange(n) % 4)[:, None]  # 9-12 live tokens
    return decoding.Rollouts(jax.random.normal(keys[0], (n, length + 1, dim)),
                             jax.random.randint(keys[1], (n, length), 0, vocab), live,
                             jax.random.uniform(keys[4], (n,)), ids, probs, jnp.ones((n,)))


_FITS = {"fudge": (decoding.fit_fudge, decoding.fudge_loss, lambda: decoding.ValueHead(32, key=jax.random.key(5))),
         "cdq": (decoding.fit_cdq, decoding.cdq_loss, lambda: decoding.QHead(32, 64, key=jax.random.key(5)))}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(_FITS))
def test_fit_minibatches_are_device_local(kind):
    # batch_size < N with mesh=: each device takes its 5 samples of a step from its own block of 10 (a
    # stratified minibatch); the fit equals one-device Adam steps over that schedule, nothing of the
    # samples moves, and memory per device shrinks
    from jaxcore._util.minibatch import minibatch_schedule

    fit_fn, loss_fn, make_head = _FITS[kind]
    data, head, key = _random_rollouts(), make_head(), jax.random.key(9)
    fit = lambda m, d: fit_fn(key, head, d, num_steps=MB_STEPS, batch_size=MB_BATCH,  # noqa: E731
                              learning_rate=0.05, mesh=m)
    compiled, arrays = S.compile_on(functools.partial(fit, S.mesh()), (data,), S.mesh(), MB_N, (True,))
    res = compiled(*arrays)
    # the oracle: optax Adam on the public loss of each step's rows, on one device
    schedule = np.asarray(minibatch_schedule(key, MB_N, MB_BATCH, MB_STEPS, S.NUM_DEVICES))
    np.testing.assert_array_equal(schedule // (MB_N // S.NUM_DEVICES),
                                  np.repeat(np.arange(S.NUM_DEVICES), 5)[None].repeat(MB_STEPS, 0))
    opt = optax.adam(0.05)
    params, static = eqx.partition(head, eqx.is_inexact_array)
    state = opt.init(params)
    for s, rows in enumerate(schedule):
        batch = jax.tree.map(lambda a: a[rows], data)
        loss, g = jax.value_and_grad(lambda p: loss_fn(eqx.combine(p, static), batch))(params)
        np.testing.assert_allclose(float(res.losses[s]), float(loss), rtol=1e-5)
        updates, state = opt.update(g, state, params)
        params = optax.apply_updates(params, updates)
    np.testing.assert_allclose(np.asarray(res.head.weight), np.asarray(params.weight), rtol=1e-4, atol=1e-6)
    assert float(res.losses[-1]) < float(res.losses[0])  # it trained, as on one device
    hlo = compiled.as_text()
    S.assert_no_batch_gather(hlo, MB_BATCH)  # neither a minibatch (20) nor all samples (40)
    assert not [c for c in S.collectives(hlo) if c.op.startswith("all-gather")]
    compiled_one, _ = S.compile_on(functools.partial(fit, S.mesh(1)), (data,), S.mesh(1), MB_N, (True,))
    S.assert_memory_shrinks(compiled_one, compiled, max_ratio=0.6)


@pytest.mark.slow
def test_fit_reads_the_split_from_the_data():
    # without mesh=, rollouts placed on a NamedSharding are trained as with mesh= that mesh (bit for bit);
    # on one device the same key draws other minibatches
    data, head, key = _random_rollouts(), _FITS["fudge"][2](), jax.random.key(9)
    placed = S.place(data, S.mesh(), MB_N)
    fit = lambda d, **kw: decoding.fit_fudge(key, head, d, num_steps=MB_STEPS, batch_size=MB_BATCH,  # noqa: E731
                                             learning_rate=0.05, **kw)
    inferred, explicit, single = fit(placed), fit(placed, mesh=S.mesh()), fit(data)
    np.testing.assert_array_equal(np.asarray(inferred.losses), np.asarray(explicit.losses))
    np.testing.assert_array_equal(np.asarray(inferred.head.weight), np.asarray(explicit.head.weight))
    assert not np.allclose(np.asarray(single.losses), np.asarray(inferred.losses))
    assert float(inferred.losses[-1]) < float(inferred.losses[0])
