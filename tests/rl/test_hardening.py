"""Bad input to every public entry point of jaxcore.rl is refused in the one dialect, naming the argument."""

import jax
import jax.numpy as jnp
import pytest

from jaxcore.rl import (
    behaviour_cloning,
    collect_offline,
    evaluate,
    init_policy,
    make_lock,
    optimal_policy,
    policy_table,
    reset_psdp,
)

LOCK = make_lock(jax.random.key(0), horizon=3, num_actions=4)


@pytest.mark.parametrize("call,exc,name", [
    (lambda: evaluate(0, LOCK, init_policy(jax.random.key(0), 3, 4, LOCK.obs_dim)), TypeError, "key"),
    (lambda: evaluate(jax.random.key(0), LOCK, init_policy(jax.random.key(0), 2, 4, LOCK.obs_dim)), ValueError,
     "policy"),
    (lambda: evaluate(jax.random.key(0), LOCK, init_policy(jax.random.key(0), 3, 4, 5)), ValueError, "policy"),
    (lambda: evaluate(jax.random.key(0), LOCK, "policy"), TypeError, "policy"),
    (lambda: evaluate(jax.random.key(0), LOCK, optimal_policy(LOCK), 0), ValueError, "num_episodes"),
    (lambda: evaluate(jax.random.key(0), LOCK, optimal_policy(LOCK), epsilon=1.5), ValueError, "epsilon"),
    (lambda: init_policy(jax.random.key(0), 3, 4, 8, kind="tree"), ValueError, "kind"),
    (lambda: init_policy(jax.random.key(0), 3, 1, 8), ValueError, "num_actions"),
    (lambda: init_policy(jax.random.key(0), 3, 4, 8, scale=-1.0), ValueError, "scale"),
    (lambda: collect_offline(jax.random.key(0), LOCK, 0), ValueError, "num_episodes"),
    (lambda: collect_offline(jax.random.key(0), LOCK, 8, coverage=1.5), ValueError, "coverage"),
    (lambda: collect_offline(jax.random.key(0), LOCK, 8, epsilon=float("nan")), ValueError, "epsilon"),
    (lambda: collect_offline(jax.random.key(0), "lock", 8), TypeError, "lock"),
    (lambda: policy_table(LOCK, None), TypeError, "policy"),
    (lambda: optimal_policy(None), TypeError, "lock"),
    (lambda: reset_psdp(jax.random.key(0), LOCK, None), TypeError, "data"),
    (lambda: behaviour_cloning(jax.random.split(jax.random.key(0), (2, 2)), LOCK, None), TypeError, "key"),
    (lambda: make_lock(jax.random.key(0), 3, dtype=jnp.int32), TypeError, "dtype"),
    (lambda: make_lock(jax.random.key(0), 3, anti_prob=-0.1), ValueError, "anti_prob"),
    (lambda: make_lock(jax.random.key(0), 3, num_good=0), ValueError, "num_good"),
])
def test_refused_in_dialect(call, exc, name):
    with pytest.raises(exc, match=f"^{name}: expected"):
        call()
