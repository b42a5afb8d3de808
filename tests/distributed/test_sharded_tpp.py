"""tpp's sequence axis on 4 faked devices: likelihoods, the SDE solve, NJDTPP's loss gradient, simulation.

What shards: every ``[B]`` / ``[B, L]`` input and output (the solve and likelihoods are vmapped over
sequences; the Brownian keys are split from one key inside the program, each device computing its own
rows of the split). Replicated: the model's parameters (their gradient is summed over devices, an
all-reduce of parameter size, never of the batch). Simulation has no batch input: its sequences shard
when the caller asks for sharded outputs (``jax.jit(..., out_shardings=...)``), and each device then
samples only its rows.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

from jaxcore import tpp

from . import _sharding as S

B, L = 32, 12  # a batch no parameter dimension is a multiple of


def _hawkes():
    return tpp.Hawkes(jnp.array([0.5, 0.3]), jnp.array([[0.3, 0.1], [0.2, 0.3]]), jnp.ones((2, 2)))


def _batch():
    return _hawkes().simulate(jax.random.key(0), 10.0, L, B)[0]


@pytest.mark.slow
def test_solve_shards_sequences():
    """The stochastic SDE solve of B sequences: [B] results split over the devices, no gather, memory / 3."""
    dyn, batch = _hawkes().jump_diffusion(), _batch()
    run = S.check_sharded(lambda d, b, k: tpp.solve(d, b, k), (dyn, batch, jax.random.key(1)), B,
                          (False, True, False), max_memory_ratio=0.5)
    assert run.many.log_likelihood.shape == (B,)
    assert np.all(np.isfinite(np.asarray(run.many.log_likelihood)))
    assert len(set(np.round(np.asarray(run.many.log_likelihood), 4))) > B // 2  # distinct sequences


def test_exact_hawkes_likelihood_shards_sequences():
    h, batch = _hawkes(), _batch()
    run = S.check_sharded(lambda m, b: m.log_likelihood(b), (h, batch), B, (False, True), max_memory_ratio=0.6)
    ref = tpp.log_likelihood(h.jump_diffusion(), batch, method="exact")  # the closed-form flow, one device
    np.testing.assert_allclose(np.asarray(run.many), np.asarray(ref), rtol=1e-4)


@pytest.mark.slow
def test_njdtpp_likelihood_and_loss_gradient_shard_sequences():
    """NJDTPP's per-sequence likelihood shards; its mean-NLL gradient is data parallel (parameter-size
    all-reduces only) and needs less memory per device."""
    import equinox as eqx

    model, batch, key = tpp.NJDTPP(2, key=jax.random.key(0), width=8, depth=1), _batch(), jax.random.key(2)

    def loss_and_grad(m, b, k):  # (mean NLL, [B] log-likelihoods), gradient: one program
        def loss(m):
            ll = m.log_likelihood(b, k, num_substeps=2)
            return -jnp.mean(ll), ll
        return eqx.filter_value_and_grad(loss, has_aux=True)(m)

    run = S.check_sharded(loss_and_grad, (model, batch, key), B, (False, True, False),
                          select=lambda out: out[0][1], max_memory_ratio=0.6, rtol=1e-3, atol=1e-5)
    assert run.many[0][1].shape == (B,)
    grads = [c for c in S.collectives(run.hlo) if c.op.startswith("all-reduce") and c.shapes != [()]]
    assert grads  # the parameter gradient is summed over the devices (data parallel)


@pytest.mark.slow
def test_simulation_shards_sequences_through_out_shardings():
    h, mesh = _hawkes(), S.mesh(4)
    sim = lambda k: h.simulate(k, 10.0, L, B)  # noqa: E731
    sharded = jax.jit(sim, out_shardings=NamedSharding(mesh, PartitionSpec(S.AXIS)))
    c4 = sharded.lower(jax.random.key(3)).compile()
    c1 = jax.jit(sim).lower(jax.random.key(3)).compile()
    S.assert_no_batch_gather(c4.as_text(), B)
    S.assert_memory_shrinks(c1, c4, max_ratio=0.6)
    batch, overflow = c4(jax.random.key(3))
    S.assert_batch_sharded((batch.times, batch.mask, batch.T, overflow), B, 4)
    ref, _ = sim(jax.random.key(3))
    np.testing.assert_allclose(np.asarray(batch.times), np.asarray(ref.times), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(batch.mask), np.asarray(ref.mask))


TRAIN_BATCH = 8  # 2 sequences of each device's block of 8 in every step


@pytest.mark.slow
def test_train_draws_device_local_minibatches():
    """``tpp.train(..., mesh=)``: each device draws its minibatch rows from its own block of sequences (a
    stratified schedule), the loss history equals one-device steps over that schedule, no sequence moves
    between devices (no all-gather in the compiled fit) and the memory per device shrinks; without mesh=
    a batch placed on the mesh is fitted the same way."""
    import equinox as eqx
    import optax

    from jaxcore._util.minibatch import minibatch_schedule
    from jaxcore.tpp.training import training_loss

    model, batch, key = tpp.NJDTPP(2, key=jax.random.key(0), width=8, depth=1), _batch(), jax.random.key(5)
    opt, steps = optax.sgd(0.05), 3
    fit = lambda m, b: tpp.train(key, model, b, num_steps=steps, batch_size=TRAIN_BATCH, optimizer=opt,  # noqa: E731
                                 num_substeps=2, stochastic=False, mesh=m)
    def run(m, b):  # the arrays of the result: losses and the trained parameters
        r = fit(m, b)
        return r.losses, eqx.filter(r.model, eqx.is_inexact_array)

    compiled, arrays = S.compile_on(lambda b: run(S.mesh(), b), (batch,), S.mesh(), B, (True,))
    losses, trained = compiled(*arrays)
    # the schedule: every step 2 rows from each device's block of 8, each row once per 4 steps
    schedule = np.asarray(minibatch_schedule(jax.random.fold_in(jax.random.split(key, steps + 1)[steps], 1), B,
                                             TRAIN_BATCH, steps, S.NUM_DEVICES))
    np.testing.assert_array_equal(schedule // (B // S.NUM_DEVICES),
                                  np.repeat(np.arange(S.NUM_DEVICES), 2)[None].repeat(steps, 0))
    # one-device optimizer steps on exactly those rows
    params, static = eqx.partition(model, eqx.is_inexact_array)
    state = opt.init(params)
    for s, rows in enumerate(schedule):
        sub = tpp.EventBatch(batch.times[rows], batch.marks[rows], batch.mask[rows], batch.T[rows], batch.num_marks)
        loss, g = jax.value_and_grad(training_loss)(params, static, sub, None, 2, "window", False)
        np.testing.assert_allclose(float(losses[s]), float(loss), rtol=1e-5)
        updates, state = opt.update(g, state, params)
        params = optax.apply_updates(params, updates)
    for a, b in zip(jax.tree.leaves(trained), jax.tree.leaves(params), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
    hlo = compiled.as_text()
    S.assert_no_batch_gather(hlo, TRAIN_BATCH)
    S.assert_no_batch_gather(hlo, B)
    assert not [c for c in S.collectives(hlo) if c.op.startswith("all-gather")]
    compiled_one, _ = S.compile_on(lambda b: run(S.mesh(1), b), (batch,), S.mesh(1), B, (True,))
    S.assert_memory_shrinks(compiled_one, compiled, max_ratio=0.6)
    # the split read from the batch's placement: the same history as with mesh=
    inferred = tpp.train(key, model, S.place(batch, S.mesh(), B), num_steps=steps, batch_size=TRAIN_BATCH,
                         optimizer=opt, num_substeps=2, stochastic=False)
    np.testing.assert_allclose(np.asarray(inferred.losses), np.asarray(losses), rtol=1e-6)


def test_train_refuses_a_mesh_that_does_not_divide_the_sequences():
    # refused on the host before anything compiles: 4 sequences, a minibatch of 6 on 4 devices
    model = tpp.NJDTPP(1, key=jax.random.key(0), width=4, depth=0)
    batch = tpp.EventBatch.from_sequences([[0.5], [0.2, 0.9], [1.1], [0.3]], T=2.0)
    with pytest.raises(ValueError, match="mesh"):
        tpp.train(jax.random.key(1), model, batch, num_steps=1, batch_size=6, mesh=S.mesh())
    with pytest.raises(TypeError, match="mesh"):
        tpp.train(jax.random.key(1), model, batch, num_steps=1, batch_size=8, mesh="batch")
