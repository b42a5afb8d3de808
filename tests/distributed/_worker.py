"""One process of the two-process test (tests/distributed/test_multiprocess.py); not collected by pytest.

Usage: python _worker.py PROCESS_ID PORT OUT.npz. Each process joins the run, then computes two jaxcore
kernels on a batch sharded over the devices of BOTH processes (one CPU device each), and the same kernels on
the whole batch on its own device; process 0 writes both results for the test to compare.
"""

import sys

import numpy as np

import jaxcore


def main(argv):
    process_id, port, out = int(argv[0]), int(argv[1]), argv[2]
    info = jaxcore.initialize_distributed(f"127.0.0.1:{port}", 2, process_id)

    import jax
    import jax.numpy as jnp
    import optax
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding, PartitionSpec as P

    from jaxcore import inverse, sam

    assert (info.num_processes, info.num_devices) == (2, 2), info
    mesh = jax.make_mesh((2,), ("batch",))
    local_device = jax.local_devices()[0]
    on_mesh = NamedSharding(mesh, P("batch"))


    def global_batch(full):
        """The global array whose rows this process holds half of (rows [pid * n/2, (pid + 1) * n/2))."""
        half = full.shape[0] // 2
        return jax.make_array_from_process_local_data(on_mesh, full[process_id * half:(process_id + 1) * half])


    results = {}

    # inverse: SNORE restorations of 2 images, the image axis sharded over the two processes.
    rng = np.random.default_rng(0)
    clean = rng.uniform(size=(2, 16, 16, 1)).astype(np.float32)
    op = inverse.Blur(inverse.gaussian_kernel(5, 1.0), (16, 16))
    sigma_y = 0.02
    ys = np.asarray(jax.vmap(lambda x, k: inverse.degrade(k, x, op, sigma_y))(
        jnp.asarray(clean), jax.random.split(jax.random.key(0), 2)))
    sched = inverse.constant_schedule(3, sigma=10 / 255, alpha=0.5, step_size=0.5 * sigma_y**2)
    keys = jax.random.split(jax.random.key(1), 2)
    run = jax.jit(lambda k, y: inverse.restore_batch(k, y, op, inverse.TVDenoiser(num_steps=5), sched, sigma_y,
                                                     method="snore").x)
    sharded = run(keys, global_batch(ys))
    results["inverse_sharded"] = multihost_utils.process_allgather(sharded, tiled=True)
    results["inverse_sharding_spec"] = np.array(str(sharded.sharding.spec))
    results["inverse_local"] = np.asarray(run(jax.device_put(keys, local_device), jax.device_put(ys, local_device)))

    # sam: one synchronised SAM step, the batch split over the processes' devices (shard_map, axis "batch").
    def loss_fn(params, state, batch):
        pred = batch["x"] @ params["w"] + params["b"]
        return jnp.mean((pred - batch["y"]) ** 2), state


    params = {"w": jnp.asarray(rng.normal(size=(4, 1)), jnp.float32), "b": jnp.zeros((1,), jnp.float32)}
    x = rng.normal(size=(8, 4)).astype(np.float32)
    batch = {"x": x, "y": (x @ np.ones((4, 1), np.float32)).astype(np.float32)}
    opt = optax.sgd(0.1)
    tr = sam.sharpness_aware(loss_fn, opt, sam.SAM(0.05), axis_name="batch", sync_perturbation=True)
    st = tr.init(params)
    step = jax.jit(jax.shard_map(lambda p, s, b: tr.step(p, s, b)[0], mesh=mesh, in_specs=(P(), P(), P("batch")),
                                 out_specs=P()))
    new = step(params, st, {k: global_batch(v) for k, v in batch.items()})
    assert all(v.sharding.is_fully_replicated for v in jax.tree.leaves(new))
    results["sam_sharded"] = np.concatenate([np.ravel(v.addressable_data(0)) for v in
                                             jax.tree.leaves(new)])
    one = sam.sharpness_aware(loss_fn, opt, sam.SAM(0.05))
    local = jax.jit(lambda p, s, b: one.step(p, s, b)[0])(*jax.device_put((params, one.init(params), batch), local_device))
    results["sam_local"] = np.concatenate([np.ravel(v) for v in jax.tree.leaves(local)])

    if process_id == 0:
        np.savez(out, **results)
    multihost_utils.sync_global_devices("done")
    print(f"process {process_id} of {info.num_processes}: ok")


if __name__ == "__main__":
    main(sys.argv[1:])
