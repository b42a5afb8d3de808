import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import lm
from jaxcore.alignment import (
    rank_value_vectors,
    scale_keys,
    value_vector_change,
    value_vectors,
    vocab_projection,
    vocab_scores,
)

from ._shared import V, model


def test_ranking_is_the_brute_force_cosine_top_k():
    m = model()
    u = jax.random.normal(jax.random.key(7), (32,))
    r = rank_value_vectors(m, u, top_k=5)
    vv = np.asarray(value_vectors(m), np.float64).reshape(-1, 32)
    cos = vv @ np.asarray(u) / np.linalg.norm(vv, axis=1) / np.linalg.norm(u)
    best = np.argsort(-cos)[:5]
    assert (np.asarray(r.layer) * 96 + np.asarray(r.index)).tolist() == best.tolist()
    np.testing.assert_allclose(np.asarray(r.cosine), cos[best], rtol=1e-5)
    # a planted vector comes first with cosine 1
    r = rank_value_vectors(m, m.layers[0].w_down[42], top_k=1)
    assert (int(r.layer[0]), int(r.index[0])) == (0, 42) and float(r.cosine[0]) == pytest.approx(1.0, abs=1e-6)


def test_vocabulary_projection_of_an_embedding_row_returns_that_token_first():
    m = model()
    proj = vocab_projection(m, m.embed, top_k=3, measure="cosine")
    assert np.asarray(proj.token_ids[:, 0]).tolist() == list(range(V))
    np.testing.assert_allclose(np.asarray(proj.scores[:, 0]), 1.0, rtol=1e-5)
    # the logit measure is what the head adds: E (g * v)
    v = jax.random.normal(jax.random.key(8), (3, 32))
    want = (np.asarray(v) * np.asarray(m.final_norm)) @ np.asarray(m.embed).T
    np.testing.assert_allclose(np.asarray(vocab_scores(m, v)), want, rtol=1e-5, atol=1e-5)
    top = vocab_projection(m, v, top_k=4)
    assert np.asarray(top.token_ids).tolist() == np.argsort(-want, axis=1)[:, :4].tolist()


def test_value_vector_change():
    m = model()
    same = value_vector_change(m, m, jnp.array([0, 1]), jnp.array([1, 2]))
    np.testing.assert_allclose(np.asarray(same.cosine), 1.0, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(same.norm_ratio), 1.0, rtol=1e-6)
    blk = m.layers[1]
    w = blk.w_down.at[2].multiply(-3.0)
    m2 = lm.Llama(m.config, m.embed, (m.layers[0], lm.LlamaBlock(blk.attn_norm, blk.wqkv, blk.wo, blk.mlp_norm,
                                                                   blk.w_gate_up, w)), m.final_norm, m.head)
    ch = value_vector_change(m, m2, jnp.array([1, 1]), jnp.array([2, 3]))
    np.testing.assert_allclose(np.asarray(ch.cosine), [-1.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ch.norm_ratio), [3.0, 1.0], rtol=1e-6)
    # scaling keys leaves value vectors as they are
    ch = value_vector_change(m, scale_keys(m, jnp.array([1]), jnp.array([2]), 10.0), jnp.array([1]), jnp.array([2]))
    assert float(ch.norm_ratio[0]) == pytest.approx(1.0)


def test_refusals():
    m = model()
    with pytest.raises(ValueError, match="direction: expected a non-zero vector"):
        rank_value_vectors(m, jnp.zeros(32))
    with pytest.raises(ValueError, match="direction: expected shape"):
        rank_value_vectors(m, jnp.ones(31))
    with pytest.raises(ValueError, match="top_k: expected an int in"):
        rank_value_vectors(m, jnp.ones(32), top_k=0)
    with pytest.raises(ValueError, match="measure: expected one of"):
        vocab_scores(m, jnp.ones((1, 32)), measure="dot")
    with pytest.raises(ValueError, match="vectors: expected a \\[k, 32\\] array"):
        vocab_scores(m, jnp.ones((1, 8)))
    other = lm.random_llama(jax.random.key(1), lm.LlamaConfig.tiny(V, dim=16))
    with pytest.raises(ValueError, match="after: expected a Llama with the configuration"):
        value_vector_change(m, other, jnp.array([0]), jnp.array([0]))


def test_non_models_and_bad_continuations_get_the_house_error():
    # issue 48 item 18: rank_value_vectors(array, ...) raised AttributeError 'config';
    # score_continuations(None, ...) AttributeError 'tokens'.
    from jaxcore.alignment import Continuations, score_continuations

    m = model()
    r = rank_value_vectors(m, m.layers[1].w_down[7], top_k=2)
    assert int(r.layer[0]) == 1 and int(r.index[0]) == 7
    for bad in (None, jnp.float32(1.0)):
        with pytest.raises(TypeError, match="^model: expected a jaxcore.lm.Llama"):
            rank_value_vectors(bad, jnp.ones(m.config.dim))
    tok = lm.Tokenizer(["a", "b", "ab"], ["a b"])
    cont = Continuations(np.array([[[0, 1]]]), np.array([[[True, False]]]))
    assert score_continuations(lambda t: [len(s) / 10 for s in t], tok, cont).tolist() == [[0.1]]
    with pytest.raises(TypeError, match="^continuations: expected a Continuations"):
        score_continuations(lambda t: [0.0], tok, None)
    with pytest.raises(TypeError, match="^scorer: expected a callable"):
        score_continuations(None, tok, cont)
    with pytest.raises(TypeError, match="^tokenizer: expected a jaxcore.lm.Tokenizer"):
        score_continuations(lambda t: [0.0], None, cont)
    with pytest.raises(ValueError, match=r"^continuations: expected tokens and mask of one shape \[N, K, L\]"):
        score_continuations(lambda t: [0.0], tok, Continuations(np.array([[0, 1]]), np.array([[True, False]])))
