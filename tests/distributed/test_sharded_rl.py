"""rl's environments and seeds on 4 faked devices.

What shards: environments (``reset`` vmapped over ``[E]`` keys: observations and latent
states split) and seeds (``online_psdp`` with a ``[S]`` batch of keys: each seed's policy, returns and
success rate). Replicated: the lock, and outputs that do not depend on the seed (the episode count, the
initial level), which XLA keeps as constants.
"""

import jax
import numpy as np
import pytest

from jaxcore import rl

from . import _sharding as S


def _lock():
    return rl.make_lock(jax.random.key(0), horizon=3, num_actions=3)


def test_environments_shard():
    lock, keys = _lock(), jax.random.split(jax.random.key(1), 64)

    def episode_start(k, lock):
        obs, state = jax.vmap(rl.reset, in_axes=(0, None))(k, lock)
        return obs, state.latent

    run = S.check_sharded(episode_start, (keys, lock), 64, (True, False), max_memory_ratio=0.6,
                          collectives_allowed=False)
    assert run.many[0].shape[0] == 64


@pytest.mark.slow
def test_online_psdp_shards_seeds():
    lock, keys = _lock(), jax.random.split(jax.random.key(1), 8)
    run = S.check_sharded(lambda k, l: rl.online_psdp(k, l, num_samples=16, num_eval_episodes=16), (keys, lock), 8,
                          (True, False), select=lambda r: (r.success_rate, r.mean_return, r.policy),
                          max_memory_ratio=0.6, rtol=1e-5, atol=1e-6)
    assert np.asarray(run.many.success_rate).shape == (8,)
