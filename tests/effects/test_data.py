"""EffectData: built directly, its concrete fields are checked as effect_data checks them."""

import jax.numpy as jnp
import pytest


@pytest.mark.parametrize("field, value, name", [("treatment", 2.0, "treatment"), ("outcome", float("nan"), "outcome"),
                                                 ("x", float("inf"), "x")])
def test_effect_data_built_directly_is_checked_too(field, value, name):
    from jaxcore.effects import EffectData

    x, t, y = jnp.zeros((1, 4, 2)), jnp.array([[0.0, 1.0, 0.0, 1.0]]), jnp.zeros((1, 4))
    parts = {"x": x, "treatment": t, "outcome": y}
    parts[field] = parts[field].at[(0, 1)].set(value)
    with pytest.raises(ValueError, match=f"{name}: expected"):
        EffectData(parts["x"], parts["treatment"], parts["outcome"], jnp.ones((1, 4), bool), jnp.zeros(1))
    masked = jnp.array([[True, False, True, True]])  # the bad unit is padding: accepted
    EffectData(parts["x"], parts["treatment"], parts["outcome"], masked, jnp.zeros(1))
