"""Continual-learning metrics on hand-built cases and forgetting on a planted two-task problem."""

from types import SimpleNamespace

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.bnp.continual import (
    ContinualConfig,
    active_depth,
    active_fraction,
    average_accuracy,
    backward_transfer,
    mask_union,
    run_continual,
)
from jaxcore.bnp.networks import AdaptiveMLP


def test_average_accuracy_and_backward_transfer_hand_built():
    acc = jnp.array([[0.9, np.nan, np.nan], [0.7, 0.8, np.nan], [0.5, 0.6, 1.0]])
    np.testing.assert_allclose(average_accuracy(acc), [0.9, 0.75, 0.7], rtol=1e-6)
    # BWT = ((0.5 - 0.9) + (0.6 - 0.8)) / 2
    np.testing.assert_allclose(backward_transfer(acc), -0.3, rtol=1e-6)
    np.testing.assert_allclose(backward_transfer(jnp.stack([acc, acc])), [-0.3, -0.3], rtol=1e-6)
    with pytest.raises(ValueError, match="acc: expected .* at least 2 tasks"):
        backward_transfer(jnp.ones((1, 1)))


def test_active_depth_and_fraction_hand_built():
    m = np.zeros((4, 3, 2), bool)  # K = 4 layers of 3 x 2 masks
    assert int(active_depth(m)) == 0 and float(active_fraction(m)) == 0.0
    m[0, 0, 0] = True
    m[2, 1, 1] = True  # layer 2 off, layer 3 on: depth is the deepest active layer
    assert int(active_depth(m)) == 3
    np.testing.assert_allclose(active_fraction(m), 2 / 24)
    m[3] = True
    assert int(active_depth(m)) == 4
    batch = np.stack([np.zeros_like(m), m])
    np.testing.assert_array_equal(active_depth(batch), [0, 4])
    # per-channel (CNN) masks: one trailing axis per layer
    c = np.array([[1, 0], [0, 0], [0, 1]], bool)
    assert int(active_depth(c, layer_ndim=1)) == 3
    np.testing.assert_allclose(active_fraction(c, layer_ndim=1), 2 / 6)
    with pytest.raises(ValueError, match="masks: expected .* at least 3 axes"):
        active_depth(np.ones((2, 2), bool))


def test_mask_union_hand_built():
    t1 = np.zeros((2, 2, 2), bool)
    t1[0, 0, 0] = True
    t2 = np.zeros((2, 2, 2), bool)
    t2[1, 1, 1] = True
    t2[0, 0, 0] = True
    t3 = np.ones((2, 2, 2), bool)
    masks = np.stack([t1, t2, t3])
    np.testing.assert_array_equal(mask_union(masks[:2]), t1 | t2)
    np.testing.assert_array_equal(mask_union(masks, 2), t1 | t2)
    np.testing.assert_array_equal(mask_union(masks, 3), t3)
    np.testing.assert_allclose(active_fraction(mask_union(masks, 2)), 2 / 8)


def planted_two_task_problem(seed=0, n=400, d=10):
    """Synthetic planted problem: two binary tasks on the same Gaussian inputs, each on its own pair of
    coordinates, so a narrow shared layer must be re-purposed by the second task."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, 2 * n, d)).astype(np.float32)
    y = np.stack([x[0, :, 0] + x[0, :, 1] > 0, x[1, :, 2] - x[1, :, 3] > 0]).astype(np.int32)
    return SimpleNamespace(
        x_train=x[:, :n], y_train=y[:, :n], n_train=np.array([n, n], np.int32),
        x_test=x[:, n:], y_test=y[:, n:], n_test=np.array([n, n], np.int32),
    )


@pytest.mark.slow
def test_finetuning_forgets_more_than_the_method_on_planted_problem():
    tasks = planted_two_task_problem()
    model = AdaptiveMLP(10, 8, 2, 2, 2, init_scale=0.05, key=jax.random.key(3))  # its arrays are not used
    cfg = ContinualConfig(num_steps=300, batch_size=64, num_samples=2, learning_rate=2e-2)
    keys = jax.random.split(jax.random.key(0), 2)
    ft = run_continual(keys, "finetune", model, tasks, cfg)
    ours = run_continual(keys, "adaptive", model, tasks, cfg)
    bwt_ft = np.asarray(backward_transfer(ft.accuracy))
    bwt_ours = np.asarray(backward_transfer(ours.accuracy))
    # both learn the first task; fine-tuning loses more of it
    assert np.all(np.asarray(ft.accuracy)[:, 0, 0] > 0.85) and np.all(np.asarray(ours.accuracy)[:, 0, 0] > 0.85)
    assert bwt_ft.mean() < bwt_ours.mean() - 0.05, (bwt_ft, bwt_ours)
    assert ours.masks.shape == (2, 2) + model.mask_shape()
    assert np.all((np.asarray(ours.active_depth) >= 0) & (np.asarray(ours.active_depth) <= 2))


def test_run_continual_rejects_bad_input():
    tasks = planted_two_task_problem(n=8)
    model = _template(10, 4, 1, 2, 2)
    keys = jax.random.split(jax.random.key(0), 1)
    with pytest.raises(ValueError, match="method: expected one of"):
        run_continual(keys, "sgd", model, tasks)
    with pytest.raises(ValueError, match="in_features"):
        run_continual(keys, "finetune", _template(7, 4, 1, 2, 2), tasks)
    with pytest.raises(TypeError, match="keys: expected"):
        run_continual(0, "finetune", model, tasks)
    with pytest.raises(ValueError, match="config.num_steps: expected"):
        run_continual(keys, "finetune", model, tasks, ContinualConfig(num_steps=0))


def _template(*args):
    return eqx.filter_eval_shape(lambda k: AdaptiveMLP(*args, key=k), jax.random.key(0))


def _doctest_problem():
    """The shapes of ``run_continual``'s docstring example (so the two share one compilation)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 16, 3)).astype(np.float32)
    y = (x[..., 0] > 0).astype(np.int32)
    n = np.array([16, 16], np.int32)
    tasks = SimpleNamespace(x_train=x, y_train=y, n_train=n, x_test=x, y_test=y, n_test=n)
    return tasks, _template(3, 4, 2, 2, 2), ContinualConfig(num_steps=3, batch_size=4, num_fisher_samples=4)


@pytest.mark.parametrize("method", ["finetune", pytest.param("vcl", marks=pytest.mark.slow)])
def test_run_continual_progress_reports_each_task_and_changes_nothing(method):
    tasks, model, cfg = _doctest_problem()
    keys = jax.random.split(jax.random.key(1), 2)
    seen = []
    quiet = run_continual(keys, method, model, tasks, cfg)
    loud = run_continual(keys, method, model, tasks, cfg, progress=lambda s, m: seen.append((s, m)))
    np.testing.assert_array_equal(np.asarray(quiet.accuracy), np.asarray(loud.accuracy))
    assert [s for s, _ in seen] == [1, 2] and [m["task"] for _, m in seen] == [0.0, 1.0]
    acc = np.asarray(loud.accuracy)
    np.testing.assert_allclose([m["accuracy"] for _, m in seen],
                               [acc[:, 0, 0].mean(), acc[:, 1, :2].mean()], rtol=1e-6)
    with pytest.raises(TypeError, match="progress: expected a bool or a callable"):
        run_continual(keys, method, model, tasks, cfg, progress="yes")


def test_config_defaults_are_the_benchmarked_budget():
    """The defaults equal the settings of the ``bnp.continual`` benchmark (DESIGN: defaults = what is benchmarked)."""
    from benchmarks.suites import bnp as suite  # noqa: PLC0415
    from benchmarks.registry import registry  # noqa: PLC0415

    params = registry()["bnp.continual"].params
    cfg = ContinualConfig()
    assert suite.FAMILY == "bnp"
    assert (cfg.num_steps, cfg.batch_size, cfg.num_samples, cfg.learning_rate, cfg.kl_weight, cfg.ewc_lambda) == (
        params["num_steps"], params["batch_size"], params["num_samples"], params["learning_rate"],
        params["kl_weight"], params["ewc_lambda"])


def _cnn_eval_case(seed=0):
    """A small AdaptiveCNN (two heads, random weights, masks with one channel off) and two tasks of 6x6
    images, padded to 13 test images with 13 and 9 valid (the padding's labels are garbage on purpose)."""
    from jaxcore.bnp.networks import AdaptiveCNN

    rng = np.random.default_rng(seed)
    model = AdaptiveCNN(1, 4, 2, 2, 3, key=jax.random.key(seed), init_scale=0.5)
    model = eqx.tree_at(lambda m: m.w_head.loc, model, jnp.asarray(rng.normal(size=model.w_head.loc.shape),
                                                                   jnp.float32))
    masks = np.ones((2,) + model.mask_shape(), bool)
    masks[1, 0, 1] = False
    x = rng.normal(size=(2, 13, 36)).astype(np.float32)
    y = rng.integers(0, 3, size=(2, 13)).astype(np.int32)
    n = np.array([13, 9], np.int32)
    y[1, 9:] = 7  # padding rows: never counted
    return model, jnp.asarray(masks), (None, None, None, jnp.asarray(x), jnp.asarray(y), jnp.asarray(n))


def test_chunked_evaluation_equals_unchunked_cnn():
    """The evaluation runs the test images in blocks (memory); its accuracies equal one pass over all images
    (predict_logits on the valid rows, argmax counted with NumPy) for every block size, ragged ones included."""
    from jaxcore.bnp.continual import _evaluate

    model, masks, data = _cnn_eval_case()
    x, y, n = (np.asarray(a) for a in data[3:])
    ref = []
    for j in range(2):
        logits = np.asarray(model.predict_logits(masks[j], x[j, :n[j]], j))
        ref.append(np.sum(np.argmax(logits, -1) == y[j, :n[j]]) / n[j])
    assert 0 < min(ref) and max(ref) < 1  # a non-trivial case
    predict = lambda p, m, xb, h: p.predict_logits(m, xb, h)  # noqa: E731
    for chunk in (1, 4, 5, 13, 64):
        got = jax.jit(lambda p, m, d, c=chunk: _evaluate(predict, d, m, p, 2, 2, c))(model, masks, data)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(ref, np.float32), err_msg=f"chunk {chunk}")


@pytest.mark.slow  # four small training programs compiled: ~20 CPU-seconds
def test_eval_chunk_size_does_not_change_run_continual():
    """run_continual's accuracy matrix is the same with test blocks of 3 images as with one block of all."""
    tasks = planted_two_task_problem(n=40, d=4)
    model = eqx.filter_eval_shape(lambda k: AdaptiveMLP(4, 6, 2, 2, 2, key=k), jax.random.key(0))
    keys = jax.random.split(jax.random.key(3), 2)
    out = {}
    for b in (3, 1000):
        cfg = ContinualConfig(num_steps=5, batch_size=8, num_samples=1, num_fisher_samples=8, eval_chunk_size=b)
        out[b] = {m: np.asarray(run_continual(keys, m, model, tasks, cfg).accuracy) for m in ("adaptive", "finetune")}
    for m in ("adaptive", "finetune"):
        np.testing.assert_array_equal(out[3][m], out[1000][m], err_msg=m)
    with pytest.raises(ValueError, match=r"^config.eval_chunk_size: expected"):
        ContinualConfig(eval_chunk_size=0)
