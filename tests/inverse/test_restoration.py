"""Tests of jaxcore.inverse.restoration: the Gaussian-prior closed form, determinism, PSNR gains, errors, jit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.inverse.denoisers import GaussianMMSEDenoiser, TVDenoiser
from jaxcore.inverse.operators import Blur, Inpainting, degrade, gaussian_kernel, random_mask
from jaxcore.inverse import (
    METHODS,
    annealed_schedule,
    annealed_snore,
    constant_schedule,
    pnp_hqs,
    pnp_pgd,
    red,
    red_prox,
    restore_batch,
    snore,
)

N = 8  # image side of the closed-form tests
S2, SIG, ALPHA, SIGMA_Y = 0.05, 0.1, 2.0, 0.05


def _problem(kind):
    rng = np.random.default_rng(0)
    mu = jnp.asarray(rng.random((N, N, 1)))
    x_clean = jnp.asarray(rng.random((N, N, 1)))
    if kind == "blur":
        op = Blur(jnp.asarray(gaussian_kernel(5, 1.0), jnp.float64), (N, N))
    else:
        op = Inpainting(random_mask(jax.random.key(3), (N, N), 0.5))
    y = op(x_clean) + SIGMA_Y * jnp.asarray(rng.standard_normal((N, N, 1)))
    # closed-form minimiser of ||Ax - y||^2/(2 sy^2) + alpha ||x - mu||^2 / (2 (s^2 + sigma^2)),
    # with A as a dense matrix built column by column (independent of the FFT/prox code)
    eye = jnp.eye(N * N).reshape(N * N, N, N, 1)
    a = jax.vmap(op)(eye).reshape(N * N, N * N).T
    c = ALPHA / (S2 + SIG**2)
    lhs = a.T @ a / SIGMA_Y**2 + c * jnp.eye(N * N)
    rhs = a.T @ y.reshape(-1) / SIGMA_Y**2 + c * mu.reshape(-1)
    x_star = jnp.linalg.solve(lhs, rhs).reshape(N, N, 1)
    lip = float(jnp.linalg.eigvalsh(lhs).max())
    return op, y, mu, x_star, lip


@pytest.mark.parametrize("kind", ["blur", "inpaint"])
@pytest.mark.parametrize("prox", [False, True])
def test_snore_converges_to_gaussian_closed_form(x64, kind, prox):
    op, y, mu, x_star, lip = _problem(kind)
    den = GaussianMMSEDenoiser(mu, S2)
    sched = constant_schedule(1500, sigma=SIG, alpha=ALPHA, step_size=1.0 / lip)
    # antithetic pairs (z, -z) cancel exactly through the affine MMSE denoiser: deterministic limit
    out = snore(jax.random.key(0), y, op, den, sched, SIGMA_Y, num_samples=2, antithetic=True, prox=prox,
                clip=False)
    assert out.x.dtype == jnp.float64
    np.testing.assert_allclose(out.x, x_star, atol=1e-10)


def test_stochastic_snore_mean_is_closed_form(x64):
    op, y, mu, x_star, lip = _problem("blur")
    den = GaussianMMSEDenoiser(mu, S2)
    sched = constant_schedule(400, sigma=SIG, alpha=ALPHA, step_size=1.0 / lip)
    keys = jax.random.split(jax.random.key(1), 512)
    out = restore_batch(keys, y[None], op, den, sched, SIGMA_Y, method="snore", clip=False)
    xs = out.x[0]  # [seeds, N, N, 1]
    err = jnp.abs(jnp.mean(xs, 0) - x_star)
    se = jnp.std(xs, 0) / np.sqrt(xs.shape[0])
    assert float(jnp.max(jnp.std(xs, 0))) > 1e-3  # really stochastic
    assert bool(jnp.all(err < 5 * se)), float(jnp.max(err / se))


def test_annealed_schedule_shape_and_values():
    s = annealed_schedule(sigma_start=0.2, sigma_end=0.02, alpha_start=0.5, alpha_end=1.0, step_size=0.1,
                          num_stages=16, steps_per_stage=3, final_steps=5)
    assert s.num_steps == 16 * 3 + 5
    sig = np.asarray(s.sigma)
    assert np.all(np.diff(sig) <= 1e-9) and sig[0] == pytest.approx(0.2) and sig[-1] == pytest.approx(0.02)
    np.testing.assert_allclose(sig[3] / sig[0], (0.1) ** (1 / 15), rtol=1e-5)
    assert float(s.alpha[-1]) == pytest.approx(1.0)
    lin = annealed_schedule(sigma_start=0.2, sigma_end=0.1, alpha_start=1, alpha_end=1, step_size=0.1,
                            num_stages=3, steps_per_stage=1, final_steps=0, spacing="linear")
    np.testing.assert_allclose(lin.sigma, [0.2, 0.15, 0.1], rtol=1e-6)
    with pytest.raises(ValueError, match="spacing"):
        annealed_schedule(sigma_start=0.2, sigma_end=0.1, alpha_start=1, alpha_end=1, step_size=0.1, spacing="x")


def _small_problem():
    from jaxcore.datasets import load_image

    x = jnp.asarray(load_image("camera")[150:182, 220:252])
    op = Blur(gaussian_kernel(7, 1.6), (32, 32))
    sigma_y = 5 / 255
    y = degrade(jax.random.key(0), x, op, sigma_y)
    return x, op, y, sigma_y


def test_same_key_same_result_and_seeds_differ():
    x, op, y, sigma_y = _small_problem()
    den = TVDenoiser(num_steps=20)
    sched = constant_schedule(5, sigma=10 / 255, alpha=0.5, step_size=0.5 * sigma_y**2)
    run = lambda k: snore(k, y, op, den, sched, sigma_y, num_samples=2).x  # noqa: E731
    a, b, c = run(jax.random.key(4)), run(jax.random.key(4)), run(jax.random.key(5))
    np.testing.assert_array_equal(a, b)
    assert float(jnp.max(jnp.abs(a - c))) > 1e-4
    batch = restore_batch(jnp.stack([jax.random.key(4), jax.random.key(5)]), y[None], op, den, sched,
                          sigma_y, method="snore", num_samples=2)
    assert batch.x.shape == (1, 2, 32, 32, 1)
    np.testing.assert_allclose(batch.x[0, 0], a, atol=1e-4)
    np.testing.assert_allclose(batch.x[0, 1], c, atol=1e-4)


def test_tracking_and_inpainting_batch_of_operators():
    x, _, _, sigma_y = _small_problem()
    masks = jnp.stack([random_mask(jax.random.key(i), (32, 32), 0.5) for i in range(2)])
    ops = jax.vmap(Inpainting)(masks)
    ys = jax.vmap(lambda op, k: degrade(k, x, op, sigma_y))(ops, jax.random.split(jax.random.key(0), 2))
    sched = constant_schedule(4, sigma=10 / 255, alpha=0.5, step_size=0.5 * sigma_y**2)
    out = restore_batch(jax.random.split(jax.random.key(1), 3), ys, ops, TVDenoiser(num_steps=10), sched,
                        sigma_y, method="red", operator_batched=True, x_true=jnp.stack([x, x]), track=True)
    assert out.x.shape == (2, 3, 32, 32, 1) and out.psnr.shape == (2, 3, 4) and out.fidelity.shape == (2, 3, 4)
    # red is deterministic: seeds agree
    np.testing.assert_allclose(out.x[:, 0], out.x[:, 2], atol=1e-6)
    # chunked runs (lax.map over vmapped pairs of runs, the last chunk padded) give the same results
    chunked = restore_batch(jax.random.split(jax.random.key(1), 3), ys, ops, TVDenoiser(num_steps=10), sched,
                            sigma_y, method="red", operator_batched=True, x_true=jnp.stack([x, x]), track=True,
                            chunk_size=4)
    for a, b in zip(chunked, out):
        np.testing.assert_allclose(a, b, atol=1e-6)
    with pytest.raises(ValueError, match="chunk_size: expected an int >= 1, got 0"):
        restore_batch(jax.random.split(jax.random.key(1), 3), ys, ops, TVDenoiser(num_steps=10), sched,
                      sigma_y, method="red", operator_batched=True, chunk_size=0)


def test_errors():
    x, op, y, sigma_y = _small_problem()
    den = TVDenoiser(num_steps=5)
    sched = constant_schedule(2, sigma=0.05)
    with pytest.raises(ValueError, match="sigma_y: expected a finite number > 0, got 0.0"):
        snore(jax.random.key(0), y, op, den, sched, 0.0)
    with pytest.raises(ValueError, match="x0"):
        snore(jax.random.key(0), y, op, den, sched, sigma_y, x0=y[:10])
    with pytest.raises(ValueError, match=r"\[H, W, C\]"):
        snore(jax.random.key(0), y[None], op, den, sched, sigma_y)
    with pytest.raises(ValueError, match="channels"):
        snore(jax.random.key(0), jnp.zeros((32, 32, 3)), Inpainting(jnp.ones((32, 32, 2))), den, sched, sigma_y)
    with pytest.raises(ValueError, match="method: expected one of"):
        restore_batch(jax.random.split(jax.random.key(0), 1), y[None], op, den, sched, sigma_y, method="nope")
    with pytest.raises(TypeError, match="schedule: expected a Schedule"):
        snore(jax.random.key(0), y, op, den, (1, 2, 3), sigma_y)
    with pytest.raises(ValueError, match="sigma"):
        constant_schedule(3, sigma=-1.0)
    with pytest.raises(ValueError, match="sigma"):
        den(y, -0.1)
    # a concrete Schedule built by hand (constant_schedule checks its own arguments)
    bad = sched._replace(step_size=-sched.step_size)
    with pytest.raises(ValueError, match="schedule.step_size: expected finite values >= 0"):
        snore(jax.random.key(0), y, op, den, bad, sigma_y)
    # SNORE and RED divide by sigma^2: sigma = 0 is an error there (PnP accepts it)
    zero = constant_schedule(2, sigma=0.0, step_size=1e-3)
    for method in (lambda sc: snore(jax.random.key(0), y, op, den, sc, sigma_y),
                   lambda sc: red(None, y, op, den, sc, sigma_y)):
        with pytest.raises(ValueError, match=r"schedule.sigma: expected finite values > 0"):
            method(zero)
    assert np.all(np.isfinite(pnp_pgd(None, y, op, den, zero, sigma_y).x))
    # checked in the image's dtype: 1e5 overflows float16
    with pytest.raises(ValueError, match="schedule.sigma: expected finite values"):
        red(None, y.astype(jnp.float16), op, den, constant_schedule(2, sigma=1e5), sigma_y)


def test_traced_arguments_are_checked_once_before_the_loop():
    """Under jit, sigma_y and the schedule are checked at run time by one check before the loop,
    and the loop body holds none (on a GPU a check in the body stalls every iteration)."""
    import equinox as eqx

    x, op, y, sigma_y = _small_problem()
    den = TVDenoiser(num_steps=3)
    run = eqx.filter_jit(lambda sched, sy: snore(jax.random.key(0), y, op, den, sched, sy).x)
    good = constant_schedule(3, sigma=0.05, alpha=0.5, step_size=0.5 * sigma_y**2)
    ref = snore(jax.random.key(0), y, op, den, good, sigma_y).x
    np.testing.assert_allclose(run(good, sigma_y), ref, rtol=1e-6, atol=1e-6)
    for sched, sy in ((good._replace(sigma=-good.sigma), sigma_y), (good, -sigma_y),
                      (good._replace(step_size=-good.step_size), sigma_y)):
        with pytest.raises(eqx.EquinoxRuntimeError, match="sigma_y, schedule: expected sigma_y finite and > 0, schedule.sigma finite and > 0"):
            jax.block_until_ready(run(sched, sy))
    for num_steps in (3, 12):
        hlo = jax.jit(run).lower(constant_schedule(num_steps, sigma=0.05), sigma_y).compile().as_text()
        assert hlo.count("conditional(") == 1, hlo.count("conditional(")
    keys = jax.random.split(jax.random.key(0), 2)
    for chunk_size in (None, 1):  # vmapped, or one run at a time inside lax.map
        batch = jax.jit(lambda sched: restore_batch(keys, y[None], op, den, sched, sigma_y, method="snore",
                                                    chunk_size=chunk_size).x)
        assert batch.lower(good).compile().as_text().count("conditional(") == 1


def test_loop_trusts_only_the_values_it_checked():
    """Only the checked schedule and sigma_y go unchecked inside the loop: a value derived from them
    in a user's denoiser, and a jitted denoiser traced inside the loop then called on its own, keep
    their checks."""
    import equinox as eqx

    x, op, y, sigma_y = _small_problem()
    den = TVDenoiser(num_steps=2)
    sched = constant_schedule(2, sigma=0.05)
    # a user's shift makes sigma negative (outside filter_jit the error surfaces as JAX's runtime error)
    with pytest.raises((eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError), match="sigma: expected finite values >= 0"):
        jax.block_until_ready(red(None, y, op, lambda v, s: den(v, s - 0.1), sched, sigma_y).x)
    run = eqx.filter_jit(lambda sc: red(None, y, op, lambda v, s: den(v, s - 0.1), sc, sigma_y).x)
    with pytest.raises(eqx.EquinoxRuntimeError, match="sigma: expected finite values >= 0"):
        jax.block_until_ready(run(sched))
    fast = eqx.filter_jit(den)
    red(None, y, op, fast, sched, sigma_y)  # traces `fast` inside the loop body
    with pytest.raises(eqx.EquinoxRuntimeError, match="sigma: expected finite values >= 0"):
        jax.block_until_ready(fast(y, jnp.float32(-0.1)))
    prox = eqx.filter_jit(op.data_prox)
    pnp_hqs(None, y, op, den, constant_schedule(2, sigma=0.05, step_size=0.01), sigma_y)
    with pytest.raises(eqx.EquinoxRuntimeError, match="tau: expected finite values >= 0"):
        jax.block_until_ready(prox(y, y, sigma_y, jnp.float32(-1.0)))


@pytest.mark.slow  # ~40 s CPU of compilation; the restoration benchmark covers it in every run
def test_every_method_improves_psnr_on_a_real_crop():
    """Deblurring a held-out 32x32 crop with the shipped DnCNN: each method beats the blurred input."""
    from jaxcore.inverse.denoisers import load_pretrained
    from jaxcore.inverse.metrics import psnr

    x, op, y, _ = _small_problem()
    sigma_y = 5 / 255
    y = degrade(jax.random.key(0), x, op, sigma_y)
    net = load_pretrained("dncnn")
    d = 0.5 * sigma_y**2
    runs = {
        "snore": lambda: snore(jax.random.key(1), y, op, net, constant_schedule(60, sigma=10 / 255, alpha=0.2,
                                                                               step_size=d), sigma_y),
        "snore_prox": lambda: snore(jax.random.key(1), y, op, net, constant_schedule(60, sigma=10 / 255, alpha=0.2,
                                                                                    step_size=d), sigma_y,
                                    prox=True, num_samples=2),
        "annealed_snore": lambda: annealed_snore(
            jax.random.key(1), y, op, net,
            annealed_schedule(sigma_start=30 / 255, sigma_end=10 / 255, alpha_start=0.2, alpha_end=0.2,
                              step_size=d, num_stages=16, steps_per_stage=3, final_steps=20), sigma_y),
        "red": lambda: red(None, y, op, net, constant_schedule(60, sigma=10 / 255, alpha=0.2, step_size=d), sigma_y),
        "red_prox": lambda: red_prox(None, y, op, net, constant_schedule(60, sigma=10 / 255, alpha=0.2, step_size=d),
                                     sigma_y),
        "pnp_pgd": lambda: pnp_pgd(None, y, op, net, constant_schedule(20, sigma=15 / 255, step_size=sigma_y**2), sigma_y),
        "pnp_hqs": lambda: pnp_hqs(None, y, op, net, constant_schedule(20, sigma=15 / 255, step_size=4 * sigma_y**2),
                                   sigma_y),
    }
    base = float(psnr(y, x))
    got = {name: float(psnr(fn().x, x)) for name, fn in runs.items()}
    assert all(v > base + 0.5 for v in got.values()), (base, got)


@pytest.mark.slow  # multi-device layout check; ~30 s CPU
def test_restore_batch_under_image_sharding():
    """Images sharded over the (fake) devices give the same restorations as on one device."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    n_dev = len(jax.devices())
    x, op, _, sigma_y = _small_problem()
    xs = jnp.stack([jnp.roll(x, 3 * i, axis=0) for i in range(n_dev)])
    ys = jax.vmap(lambda xi, k: degrade(k, xi, op, sigma_y))(xs, jax.random.split(jax.random.key(0), n_dev))
    sched = constant_schedule(3, sigma=10 / 255, alpha=0.5, step_size=0.5 * sigma_y**2)
    keys = jax.random.split(jax.random.key(1), 2)
    run = jax.jit(lambda k, y: restore_batch(k, y, op, TVDenoiser(num_steps=5), sched, sigma_y, method="snore").x)
    ref = run(keys, ys)
    mesh = Mesh(np.array(jax.devices()), ("images",))
    ys_sharded = jax.device_put(ys, NamedSharding(mesh, PartitionSpec("images")))
    out = run(keys, ys_sharded)
    np.testing.assert_allclose(out, ref, atol=1e-5)


def test_methods_are_the_functions_with_one_signature():
    import inspect

    first = ["key", "y", "operator", "denoiser", "schedule", "sigma_y"]
    for name, fn in METHODS.items():
        assert fn.__name__ == name  # the public function itself, no wrapper
        assert list(inspect.signature(fn).parameters)[:6] == first, name
    x, op, y, sigma_y = _small_problem()
    den = TVDenoiser(num_steps=3)
    sched = constant_schedule(2, sigma=0.05, step_size=1e-4)
    # red_prox is red with prox=True; deterministic methods ignore a key
    with pytest.warns(DeprecationWarning, match="red: the key is unused"):
        keyed = red(jax.random.key(3), y, op, den, sched, sigma_y, prox=True).x
    np.testing.assert_array_equal(red_prox(None, y, op, den, sched, sigma_y).x, keyed)
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        snore(0, y, op, den, sched, sigma_y)
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        red(0, y, op, den, sched, sigma_y)
    with pytest.raises(ValueError, match="num_samples: expected an int >= 1, got 0"):
        snore(jax.random.key(0), y, op, den, sched, sigma_y, num_samples=0)


def test_second_call_does_not_recompile(compiles):
    """Each method is one compiled program: the same shapes again (new key, new values) compile nothing."""
    x, op, y, sigma_y = _small_problem()
    den = TVDenoiser(num_steps=5)  # the denoiser and schedule length of test_errors: pnp_pgd is compiled there
    sched = constant_schedule(2, sigma=0.05, alpha=0.5, step_size=1e-4)
    other = constant_schedule(2, sigma=0.04, alpha=0.4, step_size=2e-4)
    y2, k0, k1 = y * 0.9, jax.random.key(0), jax.random.key(1)  # inputs made outside the count
    for name in ("snore", "pnp_pgd"):
        fn, (ka, kb) = METHODS[name], ((k0, k1) if name == "snore" else (None, None))  # PnP-PGD: no key
        a = fn(ka, y, op, den, sched, sigma_y)
        with compiles() as c:
            b = fn(kb, y2, op, den, other, sigma_y * 1.1)
            again = fn(ka, y, op, den, sched, sigma_y)
        assert len(c) == 0, (name, len(c))
        np.testing.assert_array_equal(a.x, again.x)
        assert b.x.shape == a.x.shape
    keys, keys2, ys = jax.random.split(k0, 2), jax.random.split(k1, 2), y[None]
    restore_batch(keys, ys, op, den, sched, sigma_y, method="snore")
    with compiles() as c:
        restore_batch(keys2, ys, op, den, other, sigma_y, method="snore")
    assert len(c) == 0



def test_progress_reports_steps_and_leaves_the_result_unchanged():
    from jaxcore.inverse import GaussianMMSEDenoiser, Identity, red, snore

    y = jnp.full((4, 4, 1), 0.6)
    den, sched = GaussianMMSEDenoiser(0.5, 0.01), constant_schedule(6, sigma=0.05, step_size=1e-3)
    for fn, key in ((snore, jax.random.key(0)), (red, None)):
        seen = []
        shown = fn(key, y, Identity(), den, sched, 0.05, progress=lambda step, m: seen.append(step))
        np.testing.assert_array_equal(shown.x, fn(key, y, Identity(), den, sched, 0.05).x)
        assert seen == [1, 2, 3, 4, 5, 6], fn.__name__
        with pytest.raises(TypeError, match="progress: expected a bool or a callable"):
            fn(key, y, Identity(), den, sched, 0.05, progress="on")


def test_recommended_schedules_are_the_benchmarked_settings():
    from benchmarks.suites.inverse import METHOD_PARAMS
    from jaxcore.inverse import RECOMMENDED, recommended_schedule

    sy = 10 / 255
    s = recommended_schedule("snore", sy)
    assert s.num_steps == 300
    np.testing.assert_allclose([s.sigma[0], s.alpha[0], s.step_size[0]], [2 * sy, 0.7, 0.5 * sy**2], rtol=1e-6)
    assert recommended_schedule("pnp_hqs", sy, iteration_scale=0.1).num_steps == 5
    a = recommended_schedule("annealed_snore", sy)
    assert a.num_steps == 16 * 10 + 140 and float(a.sigma[0]) == pytest.approx(4 * sy, rel=1e-6)
    assert set(RECOMMENDED) <= set(METHOD_PARAMS)
    for name, mp in METHOD_PARAMS.items():  # the benchmark's settings are the library's, named, not restated
        assert mp["schedule"] in RECOMMENDED and set(mp) <= {"kind", "schedule", "denoiser"}, name
    with pytest.raises(ValueError, match="method: expected one of"):
        recommended_schedule("admm", sy)
    with pytest.raises(ValueError, match="sigma_y: expected"):
        recommended_schedule("red", 0.0)
