"""Position-averaged internals: interleaved row chunks (any chunk size, padded) and key activations under jit
(the chunked averages against ``forward_hidden``: ``test_probe``)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.alignment import key_activations, mean_hidden
from jaxcore.alignment._chunks import interleaved_map

from ._shared import model, sequences

B = 7  # a prime: every chunk size below it but 1 pads


@jax.jit
def _offsets_and_order(rows):
    def per_chunk(chunk):
        # chunk j holds rows j, j + m, j + 2 m, ...: its first row is j, so x - x[0] is each row's offset c m
        offset = interleaved_map(lambda x: x - x[0], rows, chunk)
        # a pytree of rows comes back in the caller's order, the padding slots dropped
        two = interleaved_map(lambda xs: (xs[0] * 2, xs[1][:, ::-1]), (rows, jnp.stack([rows, -rows], 1)), chunk)
        return offset, two
    return [per_chunk(c) for c in CHUNKS]


CHUNKS = (1, 2, 3, 4, 6, 7)


def test_interleaved_map_chunks_and_order():
    r = np.arange(B)
    for chunk, (offset, (double, flipped)) in zip(CHUNKS, _offsets_and_order(jnp.arange(B)), strict=True):
        m = -(-B // chunk)
        np.testing.assert_array_equal(np.asarray(offset), r - r % m, err_msg=f"chunk_size {chunk}")
        np.testing.assert_array_equal(np.asarray(double), 2 * r)
        np.testing.assert_array_equal(np.asarray(flipped), np.stack([-r, r], 1))


LAYERS, INDICES = np.array([1, 0, 1]), np.array([3, 90, 17])


def test_key_activations_under_jit():
    toks, mask, pos = sequences()
    eager = np.asarray(key_activations(model(), toks, mask, layers=LAYERS, indices=INDICES, position_mask=pos))
    want = np.asarray(mean_hidden(model(), toks, mask, position_mask=pos).mlp)[:, LAYERS, INDICES]
    np.testing.assert_allclose(eager, want, rtol=1e-6, atol=1e-7)
    # the neurons traced (arguments of the jitted program; closed over, they are concrete and checked on the host)
    traced = eqx.filter_jit(lambda m, t, c, p, la, ia: key_activations(m, t, c, layers=la, indices=ia, position_mask=p))
    np.testing.assert_allclose(np.asarray(traced(model(), toks, mask, pos, LAYERS, INDICES)), eager, rtol=1e-5,
                               atol=1e-6)
    # out of range: refused at run time when traced (on the host when concrete: test_probe.test_refusals)
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"indices: expected MLP neuron indices in \[0, 96\)"):
        jax.block_until_ready(traced(model(), toks, mask, pos, LAYERS, np.array([3, 96, 17])))
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"layers: expected block indices in \[0, 2\)"):
        jax.block_until_ready(traced(model(), toks, mask, pos, np.array([0, -1, 1]), INDICES))
    with pytest.raises(TypeError, match="layers: expected a 1-d int array"):
        traced(model(), toks, mask, pos, LAYERS.astype(np.float32), INDICES)
    with pytest.raises(ValueError, match="indices: expected the shape of layers"):
        traced(model(), toks, mask, pos, LAYERS, INDICES[:2])
