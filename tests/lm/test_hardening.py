"""Bad input to jaxcore.lm's public functions: a clear error in the one dialect naming the argument.

``"<argument>: expected <what>, got <value>"``; TypeError for types, ValueError for values; never a
silent NaN (traced out-of-range ids, tiny temperatures) or a wrong answer for a dtype (float ids).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import lm

KEY = jax.random.key(0)
MODEL = lm.random_llama(KEY, lm.LlamaConfig.tiny())  # V = 64, 2 layers, d = 32, f = 96, 256 positions
T = np.array([[1, 2, 3]], np.int32)
RUNTIME = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError, ValueError)  # ValueError: the CPU callback wrapper


_META = {f"meta:{k}": np.asarray(v) for k, v in {
    "general.architecture": "llama", "llama.vocab_size": 64, "llama.embedding_length": 32,
    "llama.feed_forward_length": 96, "llama.block_count": 2, "llama.attention.head_count": 4,
    "llama.attention.layer_norm_rms_epsilon": 1e-5}.items()}  # a config without its weights


def _tok():
    return lm.Tokenizer(["a", "b", "c", "ab"], ["a b"], eos_token_id=0)


SCORERS = [lm.forward, lm.forward_hidden, lm.token_logprobs, lm.sequence_logprob, lm.perplexity]


@pytest.mark.parametrize("fn", SCORERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("tokens, mask, exc, match", [
    (T.astype(np.float32), None, TypeError, "^tokens: expected an integer array"),
    (T.astype(bool), None, TypeError, "^tokens: expected an integer array"),
    ("abc", None, TypeError, "^tokens: expected an integer array"),
    (T[0], None, ValueError, r"^tokens: expected a \[batch, length\] array"),
    (np.array([[1, 64]]), None, ValueError, r"^tokens: expected token ids in \[0, 64\), got 64"),
    (np.array([[1, -1]]), None, ValueError, r"^tokens: expected token ids in \[0, 64\), got -1"),
    (np.array([[1, 2**40]]), None, ValueError, r"^tokens: expected token ids in \[0, 64\)"),
    (np.zeros((1, 0), np.int32), None, ValueError, "^tokens: expected at least one sequence"),
    (np.ones((1, 257), np.int32), None, ValueError, "^tokens: expected at most max_positions=256"),
    (T, np.ones((1, 3)), TypeError, r"^mask: expected a bool \(or 0/1\) array"),
    (T, np.array([[0, 2, 1]]), TypeError, r"^mask: expected a bool \(or 0/1\) array"),
    (T, np.ones((1, 2), bool), ValueError, "^mask: expected the shape of tokens"),
])
def test_scorers_refuse_bad_tokens_and_masks(fn, tokens, mask, exc, match):
    with pytest.raises(exc, match=match):
        fn(MODEL, tokens, mask)


@pytest.mark.parametrize("fn", SCORERS, ids=lambda f: f.__name__)
def test_scorers_refuse_models_and_interventions(fn):
    with pytest.raises(TypeError, match="^model: expected a jaxcore.lm.Llama, got NoneType"):
        fn(None, T)
    with pytest.raises(TypeError, match="^intervention: expected a jaxcore.lm.Intervention"):
        fn(MODEL, T, intervention="x")
    with pytest.raises(ValueError, match=r"^intervention.residual: expected shape \(2, 32\), got shape \(2, 31\)"):
        fn(MODEL, T, intervention=lm.Intervention(residual=jnp.zeros((2, 31))))
    with pytest.raises(ValueError, match="^intervention.mlp_scale: expected finite values, got nan"):
        fn(MODEL, T, intervention=lm.Intervention(mlp_scale=jnp.full((2, 96), jnp.nan)))
    with pytest.raises(TypeError, match="^intervention.residual: expected a real number or array"):
        fn(MODEL, T, intervention=lm.Intervention(residual=np.full((2, 32), "a")))


def test_traced_token_ids_out_of_range_fail_at_run_time_not_as_nan():
    run = jax.jit(lambda t: lm.forward(MODEL, t))
    ok = run(jnp.array([[1, 63]]))
    assert np.isfinite(np.asarray(ok)).all()
    with pytest.raises(RUNTIME, match=r"tokens: expected token ids in \[0, 64\)"):
        jax.block_until_ready(run(jnp.array([[1, 64]])))
    with pytest.raises(TypeError, match="^tokens: expected an integer array"):
        jax.jit(lambda t: lm.forward(MODEL, t))(jnp.ones((1, 2)))


def _has_callback(fn, *args):
    return "python_cpu_callback" in jax.jit(fn).lower(*args).compile().as_text()


@pytest.mark.parametrize("entry", ["forward", "forward_hidden", "generate"])
def test_check_ids_false_drops_the_run_time_check_and_its_host_callback(entry):
    """Traced ids: checked by a host callback by default; ``check_ids=False`` compiles without one.
    Concrete ids are checked on the host whatever ``check_ids`` says."""
    call = {"forward": lambda t, **kw: lm.forward(MODEL, t, **kw),
            "forward_hidden": lambda t, **kw: lm.forward_hidden(MODEL, t, **kw).logits,
            # generate's logits check (check_logits) is a run-time check of its own: off here, so that only
            # the ids' callback is counted
            "generate": lambda t, **kw: lm.generate(KEY, MODEL, t, max_new_tokens=2, temperature=0.0,
                                                    check_logits=False, **kw).tokens}[entry]
    name = "prompt_tokens" if entry == "generate" else "tokens"
    ids = jnp.array([[1, 63]])
    assert _has_callback(lambda t: call(t), ids)
    assert not _has_callback(lambda t: call(t, check_ids=False), ids)
    checked = np.asarray(jax.jit(lambda t: call(t))(ids))
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda t: call(t, check_ids=False))(ids)), checked)
    np.testing.assert_array_equal(np.asarray(call(ids, check_ids=False)), checked)
    with pytest.raises(RUNTIME, match=rf"{name}: expected token ids in \[0, 64\)"):
        jax.block_until_ready(jax.jit(lambda t: call(t))(jnp.array([[1, 64]])))
    for flag in (True, False):
        with pytest.raises(ValueError, match=rf"^{name}: expected token ids in \[0, 64\), got 64"):
            call(np.array([[1, 64]]), check_ids=flag)


def _callbacks(fn, *args):
    text = jax.jit(fn).lower(*args).compile().as_text()
    return sum("custom-call(" in line and "python_cpu_callback" in line for line in text.splitlines())


def test_scoring_checks_traced_ids_once():
    """token_logprobs with a target mask checks traced ids once (one host callback, not two)."""
    ids = jnp.array([[1, 2]])
    once = _callbacks(lambda t: lm.forward(MODEL, t), ids)
    assert once >= 1 and _callbacks(lambda t: lm.token_logprobs(MODEL, t), ids) == once
    assert _callbacks(lambda t: lm.token_logprobs(MODEL, t, target_mask=jnp.ones((1, 2), bool)), ids) == once


def test_target_mask_and_padding_refusals():
    with pytest.raises(TypeError, match="^target_mask: expected a bool"):
        lm.token_logprobs(MODEL, T, target_mask=np.ones((1, 3)))
    with pytest.raises(ValueError, match="^target_mask: expected the shape of tokens"):
        lm.sequence_logprob(MODEL, T, target_mask=np.ones((1, 2), bool))
    with pytest.raises(ValueError, match="^mask: expected left or right padding"):
        lm.perplexity(MODEL, np.array([[1, 2, 3]]), np.array([[True, False, True]]))


@pytest.mark.parametrize("kw, exc, match", [
    ({"max_new_tokens": 0}, ValueError, "^max_new_tokens: expected an int >= 1, got 0"),
    ({"max_new_tokens": 2.0}, TypeError, "^max_new_tokens: expected an int"),
    ({"max_new_tokens": 254}, ValueError, "^max_new_tokens: expected at most max_positions - P = 253"),
    ({"temperature": float("nan")}, ValueError, "^temperature: expected a finite number >= 0, got nan"),
    ({"temperature": float("inf")}, ValueError, "^temperature: expected a finite number >= 0, got inf"),
    ({"temperature": -1.0}, ValueError, "^temperature: expected a finite number >= 0"),
    ({"temperature": 1e-45}, ValueError, r"^temperature: expected 0 \(greedy\) or a number >= 1.175e-38"),
    ({"temperature": "hot"}, TypeError, "^temperature: expected a real number"),
    ({"top_k": 0}, ValueError, "^top_k: expected an int >= 1"),
    ({"top_k": 2.0}, TypeError, "^top_k: expected an int"),
    ({"top_p": 0.0}, ValueError, r"^top_p: expected a number in \(0, 1\]"),
    ({"top_p": float("nan")}, ValueError, r"^top_p: expected a number in \(0, 1\]"),
    ({"top_p": 1.5}, ValueError, r"^top_p: expected a number in \(0, 1\]"),
    ({"eos_token_id": 64}, ValueError, r"^eos_token_id: expected an int in \[0, 63\]"),
    ({"eos_token_id": 1.0}, TypeError, "^eos_token_id: expected an int"),
    ({"pad_token_id": -1}, ValueError, r"^pad_token_id: expected an int in \[0, 63\]"),
    ({"processor": "x"}, TypeError, "^processor: expected a logits processor"),
    ({"intervention": lm.Intervention(residual=jnp.full((2, 32), jnp.inf))}, ValueError,
     "^intervention.residual: expected finite values"),
])
def test_generate_refuses_bad_arguments(kw, exc, match):
    kw = {"max_new_tokens": 2, **kw}
    with pytest.raises(exc, match=match):
        lm.generate(KEY, MODEL, T, **kw)


def test_generate_refuses_keys_prompts_and_padding():
    with pytest.raises(TypeError, match="^key: expected a jax.random.key"):
        lm.generate(0, MODEL, T, max_new_tokens=2)
    with pytest.raises(TypeError, match=r"^key: expected a single jax.random.key"):
        lm.generate(jax.random.split(KEY, 2), MODEL, T, max_new_tokens=2)
    with pytest.raises(TypeError, match="^prompt_tokens: expected an integer array"):
        lm.generate(KEY, MODEL, T.astype(np.float32), max_new_tokens=2)
    with pytest.raises(ValueError, match=r"^prompt_tokens: expected token ids in \[0, 64\)"):
        lm.generate(KEY, MODEL, np.array([[70]]), max_new_tokens=2)
    with pytest.raises(ValueError, match="^prompt_mask: expected left-padded prompts"):
        lm.generate(KEY, MODEL, T, np.array([[True, True, False]]), max_new_tokens=2)
    with pytest.raises(ValueError, match="^prompt_mask: expected left-padded prompts"):
        lm.generate(KEY, MODEL, T, np.zeros((1, 3), bool), max_new_tokens=2)
    with pytest.raises(ValueError, match="^prompt_mask: expected left padding only"):
        lm.generate(KEY, MODEL, np.array([[1, 2, 3, 4]]), np.array([[True, False, True, True]]), max_new_tokens=2)


def test_a_tiny_temperature_samples_the_argmax_without_nan():
    # the shapes and processor of tests/lm/test_fuzz.py::test_fuzz_generate (one compiled program for both)
    prompt = np.array([[5, 9, 1, 2], [0, 0, 7, 3]], np.int32)
    mask = np.array([[True] * 4, [False, False, True, True]])
    out = lm.generate(KEY, MODEL, prompt, mask, max_new_tokens=3, processor=lm.TopK(8), temperature=1e-30,
                      eos_token_id=63, pad_token_id=0)
    argmax = np.argmax(np.asarray(lm.forward(MODEL, prompt, mask))[:, -1], axis=-1)
    np.testing.assert_array_equal(np.asarray(out.tokens)[:, 0], argmax)
    assert np.isfinite(np.asarray(out.logprobs)).all() and np.isfinite(np.asarray(out.model_logprobs)).all()
    np.testing.assert_allclose(np.asarray(out.logprobs)[np.asarray(out.mask)], 0.0, atol=1e-6)  # point masses
    z = jnp.array([[0.0, 3.0, 1.0]])
    assert np.asarray(lm.Temperature(2e-38)((), z - 3.0, None)[0]).max() == 0.0


@pytest.mark.parametrize("call, exc, match", [
    (lambda: lm.Temperature(0.0), ValueError, "^temperature: expected a number in"),
    (lambda: lm.Temperature(1e-39), ValueError, "^temperature: expected a number in"),
    (lambda: lm.Temperature(float("nan")), ValueError, "^temperature: expected"),
    (lambda: lm.Temperature("a"), TypeError, "^temperature: expected a real number"),
    (lambda: lm.TopK(0), ValueError, "^k: expected an int >= 1"),
    (lambda: lm.TopK(1.5), TypeError, "^k: expected an int"),
    (lambda: lm.TopP(0.0), ValueError, r"^p: expected a number in \(0, 1\]"),
    (lambda: lm.TopP(2.0), ValueError, r"^p: expected a number in \(0, 1\]"),
    (lambda: lm.TopP(float("nan")), ValueError, r"^p: expected a number in \(0, 1\]"),
    (lambda: lm.chain(lm.TopK(1), 3), TypeError, r"^processors\[1\]: expected a logits processor"),
])
def test_processor_constructors_refuse(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("call, exc, match", [
    (lambda: lm.random_llama(0), TypeError, "^key: expected a jax.random.key"),
    (lambda: lm.random_llama(KEY, "tiny"), TypeError, "^config: expected a LlamaConfig, got str"),
    (lambda: lm.random_llama(KEY, scale=0.0), ValueError, "^scale: expected a finite number > 0"),
    (lambda: lm.random_llama(KEY, scale=float("inf")), ValueError, "^scale: expected a finite number > 0"),
    (lambda: lm.random_llama(KEY, dtype=jnp.int32), ValueError, "^dtype: expected float32, bfloat16"),
    (lambda: lm.random_llama(KEY, dtype="foo"), TypeError, "^dtype: expected float32, bfloat16"),
    (lambda: lm.LlamaConfig.tiny(0), ValueError, "^vocab_size: expected an int >= 1"),
    (lambda: lm.LlamaConfig(64.0, 32, 8, 1, 4, 2), TypeError, "^vocab_size: expected an int"),
    (lambda: lm.LlamaConfig(64, 12, 8, 1, 4, 2), ValueError, "^dim: expected an even head size"),
    (lambda: lm.LlamaConfig(64, 30, 8, 1, 4, 2), ValueError, "^dim: expected a multiple of num_heads=4"),
    (lambda: lm.LlamaConfig(64, 32, 8, 1, 4, 3), ValueError, "^num_kv_heads: expected a divisor"),
    (lambda: lm.LlamaConfig(64, 32, 8, 1, 4, 2, rope_base=float("nan")), ValueError, "^rope_base: expected"),
    (lambda: lm.LlamaConfig(64, 32, 8, 1, 4, 2, norm_eps=0.0), ValueError, "^norm_eps: expected"),
    (lambda: MODEL.astype(jnp.int32), ValueError, "^dtype: expected float32, bfloat16"),
])
def test_model_construction_refuses(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("call, exc, match", [
    (lambda: lm.dequantize(np.zeros(34, np.uint8), "Q9", (32,)), ValueError, "^qtype: expected one of"),
    (lambda: lm.dequantize(np.zeros(10, np.uint8), "Q8_0", (32,)), ValueError, "^data: expected 34 bytes"),
    (lambda: lm.gguf_metadata("/nonexistent.gguf"), FileNotFoundError, "^path: expected an existing GGUF file"),
    (lambda: lm.llama_config_from_gguf({}), ValueError, "^general.architecture: expected 'llama'"),
    (lambda: lm.llama_config_from_gguf({"general.architecture": "llama"}), ValueError, "^metadata: expected the key"),
    (lambda: lm.llama_from_arrays({}, "float16"), ValueError, "^dtype: expected one of 'float32', 'bfloat16'"),
    (lambda: lm.llama_from_gguf("/x.gguf", "int8"), ValueError, "^dtype: expected one of"),
    (lambda: lm.metadata_of(None), TypeError, "^arrays: expected a dict"),
    (lambda: lm.llama_from_arrays(_META), ValueError, "^arrays: expected the weights of gguf_arrays, got no embed"),
    (lambda: lm.to_transformers("m"), TypeError, "^model: expected a jaxcore.lm.Llama"),
    (lambda: lm.to_transformers(MODEL, dtype="float16"), ValueError, "^dtype: expected one of 'float32', 'bfloat16'"),
    (lambda: lm.load_smollm2("int8"), ValueError, "^dtype: expected one of"),
    (lambda: lm.load_smollm2(allow_download="no"), TypeError, "^allow_download: expected a bool"),
])
def test_weights_and_loaders_refuse(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("call, exc, match", [
    (lambda t: t.encode(3), TypeError, "^text: expected a str, got int"),
    (lambda t: t.decode([1.0]), TypeError, "^ids: expected int token ids, got dtype float64"),
    (lambda t: t.decode([99]), ValueError, r"^ids: expected token ids in \[0, 4\)"),
    (lambda t: t.decode([-1]), ValueError, r"^ids: expected token ids in \[0, 4\)"),
    (lambda t: t.decode([[1]]), ValueError, "^ids: expected a 1-d sequence"),
    (lambda t: t.decode([1], skip_special_tokens="yes"), TypeError, "^skip_special_tokens: expected a bool"),
    (lambda t: t.encode_batch(None), TypeError, "^texts: expected a sequence of str, got NoneType"),
    (lambda t: t.encode_batch("ab"), TypeError, "^texts: expected a sequence of str"),
    (lambda t: t.encode_batch([]), ValueError, "^texts: expected at least one non-empty text"),
    (lambda t: t.encode_batch(["ab"], max_length=0), ValueError, "^max_length: expected an int >= 1"),
    (lambda t: t.encode_batch(["ab", "a"], pad_token_id=-1), ValueError, r"^pad_token_id: expected an int in \[0, 3\]"),
    (lambda t: t.encode_batch(["ab", "a"], pad_token_id=4), ValueError, r"^pad_token_id: expected an int in \[0, 3\]"),
    (lambda t: t.encode_batch(["ab", "a"], pad_token_id=1.5), TypeError, "^pad_token_id: expected an int"),
    (lambda t: t.apply_chat_template([{"role": "user", "content": "a"}]), ValueError, "^chat_template: expected"),
    (lambda t: lm.Tokenizer.from_metadata(None), TypeError, "^meta: expected a dict"),
    (lambda t: lm.Tokenizer.from_metadata({"tokenizer.ggml.model": "gpt2"}), ValueError, "^metadata: expected"),
])
def test_tokenizer_refuses(call, exc, match):
    with pytest.raises(exc, match=match):
        call(_tok())


def test_encode_batch_pads_with_a_valid_id():
    tokens, mask = _tok().encode_batch(["ab", "a"], pad_token_id=2)
    assert tokens.dtype == np.int32 and mask.dtype == bool
    np.testing.assert_array_equal(tokens, [[3], [0]])  # "ab" is one merged token
    tokens, mask = _tok().encode_batch(["abab", "a"], pad_token_id=2)
    np.testing.assert_array_equal(tokens, [[3, 3], [2, 0]])
    np.testing.assert_array_equal(mask, [[True, True], [False, True]])


@pytest.mark.parametrize("kw, exc, match", [
    (dict(merges=["x y"]), ValueError, "^merges: expected merges of tokens in the vocabulary, got 'x y'"),
    (dict(merges=["a"]), ValueError, "^merges: expected entries 'left right'"),
    (dict(merges=[1]), ValueError, "^merges: expected entries 'left right'"),
    (dict(merges="a b"), TypeError, "^merges: expected a sequence"),
    (dict(tokens=[1, 2]), TypeError, "^tokens: expected a sequence of str"),
    (dict(tokens=[], merges=[]), ValueError, "^tokens: expected at least one token"),
    (dict(bos_token_id=4), ValueError, r"^bos_token_id: expected an int in \[0, 3\]"),
    (dict(eos_token_id=-1), ValueError, r"^eos_token_id: expected an int in \[0, 3\]"),
    (dict(pad_token_id=1.0), TypeError, "^pad_token_id: expected an int"),
    (dict(token_types=[1, 1, 3]), ValueError, r"^token_types: expected one type per token \(4\), got 3 types"),
])
def test_tokenizer_constructor_refuses_bad_vocabularies(kw, exc, match):
    # issue 48 item 17: bad merges raised a bare Exception; bos beyond V and short token_types were accepted.
    args = dict(tokens=["a", "b", "c", "ab"], merges=["a b"])
    args.update(kw)
    with pytest.raises(exc, match=match):
        lm.Tokenizer(args.pop("tokens"), args.pop("merges"), **args)
    tok = lm.Tokenizer(["a", "b", "c", "ab"], ["a b"], token_types=[1, 1, 1, 1], bos_token_id=3)
    assert tok.encode("abc") == [3, 2] and tok.bos_token_id == 3


def test_check_logits_false_drops_the_logits_check_and_its_host_callback():
    ids = jnp.array([[1, 63]])
    call = lambda t, **kw: lm.generate(KEY, MODEL, t, max_new_tokens=2, temperature=0.0,  # noqa: E731
                                       check_ids=False, **kw).tokens
    assert _has_callback(lambda t: call(t), ids)
    assert not _has_callback(lambda t: call(t, check_logits=False), ids)
