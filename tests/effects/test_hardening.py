"""Bad input: a clear error naming the argument, in the one dialect; never a silent NaN."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.effects import (CInA, aipw, balancing_dual, cina_objective, cina_weights, effect_data, fit_cina,
                             fit_cina_multi, ipw, kernel_matrix, linear_design, resample_datasets, stack_datasets,
                             synthetic_family, weighted_ate, weighted_mmd)

X = np.random.default_rng(0).normal(size=(6, 2))
T = np.array([1, 0, 1, 0, 1, 0])
Y = np.arange(6.0)


def _d():
    return effect_data(X, T, Y)


@pytest.mark.parametrize("args, exc, match", [
    ((X[:, 0], T, Y), ValueError, "x: expected covariates"),
    ((X, T[:5], Y), ValueError, "treatment: expected shape"),
    ((X, np.array([1, 0, 2, 0, 1, 0]), Y), ValueError, "treatment: expected values in"),
    ((X, np.ones(6), Y), ValueError, "treatment: expected at least one treated and one control"),
    ((X, T, np.r_[Y[:5], np.nan]), ValueError, "outcome: expected finite"),
    ((np.where(np.eye(6, 2) > 0, np.inf, X), T, Y), ValueError, "x: expected finite"),
    ((X.astype(str), T, Y), TypeError, "x: expected a real"),
    ((X, T.astype(str), Y), TypeError, "treatment: expected a real"),
])
def test_effect_data_refuses(args, exc, match):
    with pytest.raises(exc, match=match):
        effect_data(*args)


def test_mask_drops_an_arm():
    with pytest.raises(ValueError, match="treatment: expected at least one treated"):
        effect_data(X, T, Y, mask=T == 1)


def test_kernel_and_dual_arguments():
    d = _d()
    with pytest.raises(ValueError, match="kind: expected one of"):
        kernel_matrix(d, kind="poly")
    with pytest.raises(ValueError, match="bandwidth: expected finite values > 0"):
        kernel_matrix(d, bandwidth=0.0)
    k = kernel_matrix(d)
    with pytest.raises(ValueError, match="kernel: expected kernel"):
        balancing_dual(k[:, :5, :5], d)
    for kw, match in [({"lam": 0.0}, "lam: expected"), ({"lam": np.nan}, "lam: expected"),
                      ({"tol": -1.0}, "tol: expected"), ({"max_steps": 0}, "max_steps: expected"),
                      ({"method": "newton"}, "method: expected one of"), ({"chunk_size": 0}, "chunk_size: expected")]:
        with pytest.raises(ValueError, match=match):
            balancing_dual(k, d, **kw)
    with pytest.raises(TypeError, match="max_steps: expected an int"):
        balancing_dual(k, d, max_steps=10.0)
    with pytest.raises(ValueError, match="weights: expected finite values >= 0"):
        weighted_mmd(k, d, -jnp.ones((1, 6)))


def test_estimator_arguments():
    d = _d()
    with pytest.raises(ValueError, match="weights: expected shape"):
        weighted_ate(d, jnp.ones((1, 5)))
    with pytest.raises(ValueError, match="weights: expected finite values >= 0"):
        weighted_ate(d, -jnp.ones((1, 6)))
    with pytest.raises(ValueError, match="clip: expected values in"):
        ipw(d, clip=0.5)
    with pytest.raises(ValueError, match="ridge: expected"):
        aipw(d, ridge=-1.0)


def test_cina_arguments():
    d = _d()
    with pytest.raises(ValueError, match="kind: expected one of"):
        fit_cina(d, kind="linear")
    with pytest.raises(ValueError, match="num_steps: expected"):
        fit_cina(d, num_steps=0)
    with pytest.raises(TypeError, match="progress: expected"):
        fit_cina(d, progress="yes")
    with pytest.raises(ValueError, match="bias: expected"):
        cina_objective(d, jnp.zeros((1, 6)), jnp.zeros(2))
    with pytest.raises(TypeError, match="key: expected"):
        CInA(2, key=0)
    with pytest.raises(ValueError, match="num_heads: expected a divisor"):
        CInA(2, hidden=6, num_heads=4, key=jax.random.key(0))
    model = CInA(3, hidden=4, num_heads=2, key=jax.random.key(0))
    with pytest.raises(ValueError, match="data: expected 3 covariates"):
        cina_weights(model, d)
    with pytest.raises(TypeError, match="model: expected a CInA"):
        fit_cina_multi(jax.random.key(0), object(), d)
    with pytest.raises(TypeError, match="key: expected"):
        fit_cina_multi(1, model, d)


def test_generators_and_batching_arguments():
    with pytest.raises(TypeError, match="key: expected"):
        linear_design(0)
    with pytest.raises(ValueError, match="num_units: expected"):
        linear_design(jax.random.key(0), 3)
    with pytest.raises(ValueError, match="distribution: expected one of"):
        synthetic_family(jax.random.key(0), 2, distribution="shifted")
    with pytest.raises(ValueError, match="num_datasets: expected"):
        resample_datasets(jax.random.key(0), _d(), 0, 4)
    with pytest.raises(ValueError, match="datasets: expected at least one"):
        stack_datasets([])
    with pytest.raises(ValueError, match="num_units: expected"):
        stack_datasets([_d()], 3)


def test_linear_design_and_balancing_dual_refuse_nan_and_non_psd_kernels():
    # issue 48 items 16 and 12: linear_design(effect=nan) and a NaN kernel entry propagated NaN;
    # balancing_dual(-K) returned weights.
    with pytest.raises(ValueError, match="^effect: expected finite values"):
        linear_design(jax.random.key(0), 8, 2, effect=float("nan"))
    assert float(linear_design(jax.random.key(0), 8, 2, effect=2.0).ate[0]) == 2.0
    d = _d()
    k = kernel_matrix(d)
    good = balancing_dual(k, d, lam=0.5)
    assert bool(jnp.all(jnp.isfinite(good.weights)))
    for bad, match in ((k.at[0, 1, 2].set(jnp.nan), "finite values"), (-k, "diagonal >= 0"),
                       (k.at[0, 1, 2].add(0.5), "symmetric")):
        with pytest.raises(ValueError, match=f"^kernel: expected .*{match}"):
            balancing_dual(bad, d, lam=0.5)
    run = jax.jit(lambda kk: balancing_dual(kk, d, lam=0.5).weights)
    np.testing.assert_allclose(run(k), good.weights, rtol=1e-5, atol=1e-6)
    with pytest.raises(Exception, match="kernel: expected finite values on the real units"):
        jax.block_until_ready(run(k.at[0, 1, 2].set(jnp.nan)))


def test_none_and_non_effect_data_get_the_house_type_error():
    # issue 48 item 18: difference_in_means(None) and friends raised AttributeError from inside.
    from jaxcore.effects import aipw, difference_in_means, propensity, standardize

    d = _d()
    assert bool(jnp.isfinite(difference_in_means(d).estimate[0]))
    calls = [difference_in_means, ipw, aipw, propensity, standardize, kernel_matrix,
             lambda x: weighted_ate(x, jnp.ones((1, 6))), lambda x: balancing_dual(jnp.eye(6)[None], x),
             lambda x: resample_datasets(jax.random.key(0), x, 2, 4), lambda x: weighted_mmd(jnp.ones((1, 6)), x)]
    for call in calls:
        for bad in (None, jnp.float32(1.0), {"x": X}):
            with pytest.raises(TypeError, match="^data: expected a jaxcore.effects.EffectData"):
                call(bad)
    with pytest.raises(TypeError, match="^datasets: expected a sequence of EffectData, got NoneType"):
        stack_datasets(None)
    with pytest.raises(TypeError, match=r"^datasets\[1\]: expected a jaxcore.effects.EffectData"):
        stack_datasets([d, None])
    assert stack_datasets([d, d]).x.shape == (2, 6, 2)


def test_weighted_ate_refuses_an_arm_with_zero_total_weight():
    # issue 48 item 12: zero weight on an arm gave NaN (0/0 arm mean).
    from jaxcore.effects import effect_data

    d = effect_data(np.zeros((4, 1)), [1, 1, 0, 0], [3.0, 5.0, 1.0, 1.0])
    assert float(weighted_ate(d, jnp.array([[1.0, 1.0, 1.0, 0.0]])).estimate[0]) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="^weights: expected a positive weight on some control unit of every data set, "
                                         "got all zero on the control arm of data set 0"):
        weighted_ate(d, jnp.array([[1.0, 1.0, 0.0, 0.0]]))
    f = jax.jit(lambda w: weighted_ate(d, w).estimate)
    assert float(f(jnp.array([[1.0, 1.0, 1.0, 0.0]]))[0]) == pytest.approx(3.0)
    with pytest.raises(Exception, match="weights: expected a positive weight on some treated and some control unit"):
        jax.block_until_ready(f(jnp.array([[0.0, 0.0, 1.0, 1.0]])))
