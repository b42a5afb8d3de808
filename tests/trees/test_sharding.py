"""Rows shard over 4 faked devices: apply / predict_proba / cheapest_actions give the unsharded results."""

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from sklearn.ensemble import RandomForestClassifier

from jaxcore.trees import Forest, action_constraints, apply, cheapest_actions, predict_proba, recourse_cost


@pytest.mark.skipif(jax.device_count() < 4, reason="needs 4 (faked) devices")
def test_rows_shard():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, size=(64, 4)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 4).astype(int)
    f = Forest.from_sklearn(RandomForestClassifier(3, max_depth=2, random_state=0).fit(x, y))
    mesh = Mesh(np.array(jax.devices()[:4]), ("rows",))
    xs = jax.device_put(x, NamedSharding(mesh, PartitionSpec("rows", None)))
    p = predict_proba(f, xs)
    np.testing.assert_allclose(np.asarray(p), np.asarray(predict_proba(f, x)), atol=1e-6)
    assert len(p.sharding.device_set) == 4  # the result stays spread over the devices
    np.testing.assert_array_equal(np.asarray(apply(f, xs)), np.asarray(apply(f, x)))
    cost, cons = recourse_cost(x, "mps"), action_constraints(4)
    a, b = cheapest_actions(xs, f, cons, cost), cheapest_actions(x, f, cons, cost)
    np.testing.assert_allclose(np.asarray(a.cost), np.asarray(b.cost), rtol=1e-6)
