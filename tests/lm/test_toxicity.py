"""The offline toxicity scorer: its linear-model algebra, invariances, bad input, and profanity-check itself."""

import json
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import expit

from jaxcore import lm
from jaxcore.datasets import english_prose


@pytest.fixture(scope="module")
def scorer():
    return lm.load_toxicity_scorer()


def _texts(num, seed=0):
    """Windows of shipped English prose with profanities (some upper-cased) inserted at random places."""
    prose = " ".join(english_prose()).split()
    words = lm.profanity_words()
    rng = np.random.default_rng(seed)
    texts = []
    for _ in range(num):
        n = int(rng.integers(0, 30))
        start = int(rng.integers(0, len(prose) - n))
        tokens = prose[start:start + n]
        for _ in range(int(rng.integers(0, 3))):
            w = str(rng.choice(words))
            tokens.insert(int(rng.integers(0, len(tokens) + 1)), w.upper() if rng.random() < 0.2 else w)
        texts.append(" ".join(tokens))
    return texts


def test_shapes_and_shipped_arrays(scorer):
    assert scorer.num_features == 15442 == len(set(scorer.vocabulary))
    assert scorer.coef.shape == (5, 15442) and scorer.intercept.shape == (5,) and scorer.calibration.shape == (5, 2)
    assert np.all(np.asarray(scorer.idf) >= 1.0)  # smoothed idf = 1 + log((1 + n) / (1 + df)) >= 1
    meta = json.loads((pathlib.Path(lm.__file__).parent / "data" / "toxicity.json").read_text())
    assert meta["sources"]["alt-profanity-check"]["version"] == "1.9.1"
    assert meta["sources"]["alt-profanity-check"]["licence"] == "MIT"


def test_empty_text_scores_the_calibrated_intercept(scorer):
    """With no known word, x = 0: P = mean_k sigmoid(-(a_k c_k + b_k))."""
    a, b = np.asarray(scorer.calibration).T
    prior = expit(-(a * np.asarray(scorer.intercept) + b)).mean()
    got = scorer(["", "   ", "the and of", "zzzqqq xxyyzz"])  # stop words and unknown words are not features
    np.testing.assert_allclose(got, prior, rtol=0, atol=1e-15)


def test_one_word_closed_form(scorer):
    """A text of one known word w, repeated: x = e_w (l2-normalised), f_k = coef[k, w] + c_k."""
    w = scorer.vocabulary.index("idiot")
    a, b = np.asarray(scorer.calibration).T
    expect = expit(-(a * (np.asarray(scorer.coef)[:, w] + np.asarray(scorer.intercept)) + b)).mean()
    np.testing.assert_allclose(scorer(["idiot", "IDIOT idiot, idiot!"]), expect, rtol=1e-13)


def test_invariances(scorer):
    """Bag of words, lower-cased, l2-normalised: order, case and repeating the whole text change nothing."""
    texts = _texts(20, seed=3)
    base = scorer(texts)
    shuffled = [" ".join(np.random.default_rng(i).permutation(t.split())) for i, t in enumerate(texts)]
    np.testing.assert_allclose(scorer(shuffled), base, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(scorer([t.upper() for t in texts]), base, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(scorer([t + " " + t + " " + t for t in texts]), base, rtol=1e-12, atol=1e-15)


def test_orders_clean_below_offensive(scorer):
    clean = [p[:200] for p in english_prose()[:20]]
    p_clean = scorer(clean)
    p_bad = scorer(["you are a fucking idiot", "shut up you stupid bitch", "this is shit"])
    assert p_clean.max() < 0.5 < p_bad.min()


def test_jax_path_matches_host_path(scorer):
    texts = _texts(64, seed=1)
    feats = scorer.features(texts)
    assert feats.ids.dtype == np.int32 and feats.ids.shape == feats.weights.shape
    np.testing.assert_allclose(np.linalg.norm(feats.weights, axis=1)[feats.weights.any(1)], 1.0, rtol=1e-12)
    host = scorer(texts)
    got = scorer.predict_proba(feats._replace(weights=feats.weights.astype(np.float32)))
    assert got.dtype == jnp.float32 and got.shape == (64,)
    np.testing.assert_allclose(np.asarray(got), host, atol=2e-6)
    # vmapped/batched under jit: the same program on a padded batch
    many = jax.jit(lambda i, w: scorer.predict_proba(lm.ToxicityFeatures(i, w)))(
        jnp.asarray(feats.ids), jnp.asarray(feats.weights, jnp.float32))
    np.testing.assert_allclose(np.asarray(many), host, atol=2e-6)


def test_bad_input(scorer):
    with pytest.raises(TypeError, match="texts: expected a sequence of strings"):
        scorer("one string")
    with pytest.raises(TypeError, match=r"texts\[1\]: expected a str"):
        scorer(["ok", 3])
    with pytest.raises(TypeError, match="texts: expected a sequence"):
        scorer(5)
    assert scorer([]).shape == (0,)
    with pytest.raises(TypeError, match="features: expected ToxicityFeatures"):
        scorer.predict_proba(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"features.ids: expected indices in \[0, 15442\)"):
        scorer.predict_proba(lm.ToxicityFeatures(np.array([[15442]]), np.array([[1.0]])))
    with pytest.raises(ValueError, match="features: expected ids and weights of one shape"):
        scorer.predict_proba(lm.ToxicityFeatures(np.zeros((2, 3), np.int32), np.zeros((2, 2))))


def test_profanity_words():
    words = lm.profanity_words()
    assert len(words) == 916 == len(set(words)) and "fuck" in words


@pytest.mark.slow
def test_equals_profanity_check_on_1000_texts(tmp_path):
    """alt-profanity-check 1.9.1 installed alone into a temporary directory scores the same 1,000 texts."""
    pytest.importorskip("sklearn")
    import sklearn

    if sklearn.__version__ != "1.9.1":
        pytest.skip(f"profanity-check's pickles need scikit-learn 1.9.1 exactly (found {sklearn.__version__})")
    target = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(target),
                          "alt-profanity-check==1.9.1"], capture_output=True, text=True, timeout=300)
    if pip.returncode != 0:
        pytest.skip(f"cannot install alt-profanity-check 1.9.1: {pip.stderr[-300:]}")
    texts = _texts(995, seed=0) + ["", "ÉCOLE fucking Straße", "you are a fucking idiot", "A lovely walk.", "4r5e"]
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    code = ("import json, sys, numpy as np; sys.path.insert(0, sys.argv[1]); import profanity_check; "
            "t = json.load(open(sys.argv[2])); np.save(sys.argv[3], profanity_check.predict_prob(t))")
    run = subprocess.run([sys.executable, "-c", code, str(target), str(tmp_path / "texts.json"),
                          str(tmp_path / "theirs.npy")], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    theirs = np.load(tmp_path / "theirs.npy")
    ours = lm.load_toxicity_scorer()(texts)
    assert 0.05 < (theirs > 0.5).mean() < 0.95  # the texts exercise both classes
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)
