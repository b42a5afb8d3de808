"""An offline toxicity scorer: alt-profanity-check's linear model as plain arrays, and a profanity list.

The language-model families need a toxicity score they can compute without a network or a GPU: the
rewards of controlled decoding, the preference pairs and the evaluation of DPO. The scorer here is the
classifier of ``alt-profanity-check`` 1.9.1 (MIT), converted once by ``scripts/convert_toxicity_scorer.py``
into the arrays shipped in ``jaxcore/lm/data/toxicity.npz`` (recipe, source checksums and licences in
``toxicity.json`` beside it): an l2-normalised TF-IDF bag of 15,442 words feeding five linear SVMs with
Platt calibration, averaged. It scores offensive language (profanity, slurs, insults), which is what the
word-level toxicity of a short continuation mostly is; it does not see context, sarcasm or implied harm.
"""

from __future__ import annotations

import functools
import hashlib
import json
import pathlib
import re
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .._util.checks import expected

__all__ = ["ToxicityFeatures", "ToxicityScorer", "load_toxicity_scorer", "profanity_words"]

_DATA = pathlib.Path(__file__).resolve().parent / "data"
_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's default token pattern, which the model was fitted with


class ToxicityFeatures(NamedTuple):
    """Sparse TF-IDF rows, padded: ``weights[n, j]`` is the l2-normalised TF-IDF of word ``ids[n, j]``.

    ``ids``: ``[N, W]`` int32 vocabulary indices; ``weights``: ``[N, W]`` float (0 where padded), ``W`` the
    most distinct vocabulary words in any of the ``N`` texts (at least 1).
    """

    ids: Int[Array, "N W"]
    weights: Float[Array, "N W"]


def _probability(xp, sigmoid, ids, weights, coef, intercept, calibration):
    """P(offensive) = mean_k sigmoid(-(a_k f_k + b_k)), f_k = <w_k, x> + c_k (sklearn's sigmoid calibration)."""
    f = (weights[:, None, :] * coef[:, ids].transpose(1, 0, 2)).sum(-1) + intercept  # [N, K]
    return sigmoid(-(calibration[:, 0] * f + calibration[:, 1])).mean(-1)


@jax.jit
def _predict_proba(ids, weights, coef, intercept, calibration):
    return _probability(jnp, jax.nn.sigmoid, ids, weights, coef, intercept, calibration)


class ToxicityScorer(eqx.Module):
    """P(offensive | text) from a TF-IDF bag of words and five Platt-calibrated linear SVMs.

    With ``x`` the text's l2-normalised TF-IDF vector over the vocabulary (lower-cased words of two or more
    word characters; counts times ``idf``), the probability is ``mean_k sigmoid(-(a_k (w_k . x + c_k) + b_k))``
    over the five cross-validation folds ``k``. :meth:`__call__` computes it on the host in float64 and equals
    ``profanity_check.predict_prob`` (alt-profanity-check 1.9.1) to rounding; :meth:`predict_proba` is the
    same linear model as a jittable JAX function of :meth:`features`.

    Attributes:
        vocabulary: the ``F`` = 15,442 words, in feature order.
        idf: ``[F]`` float64 inverse document frequencies.
        coef: ``[K, F]`` float64 SVM weights of the ``K`` = 5 folds; ``intercept``: ``[K]``.
        calibration: ``[K, 2]`` float64 Platt parameters ``(a, b)``.

    Examples:
        >>> scorer = load_toxicity_scorer()
        >>> p = scorer(["What a lovely morning for a walk.", "you are a fucking idiot"])
        >>> p.shape, bool(p[0] < 0.1), bool(p[1] > 0.9)
        ((2,), True, True)
    """

    vocabulary: tuple[str, ...] = eqx.field(static=True)
    idf: Float[Array, " F"]
    coef: Float[Array, "K F"]
    intercept: Float[Array, " K"]
    calibration: Float[Array, "K 2"]

    @property
    def num_features(self) -> int:
        """``F``, the vocabulary size."""
        return len(self.vocabulary)

    def features(self, texts: Sequence[str]) -> ToxicityFeatures:
        """The texts' sparse TF-IDF rows (host work: tokenising strings), as NumPy arrays.

        Args:
            texts: ``N`` strings.

        Returns:
            :class:`ToxicityFeatures` with float64 weights (convert to float32 for a float32 program).

        Raises:
            TypeError: ``texts`` is a single string or holds a non-string.
        """
        texts = _check_texts(texts)
        index = _index(self.vocabulary)
        idf = np.asarray(self.idf, np.float64)
        rows = []
        for text in texts:
            counts = Counter(index[w] for w in _TOKEN.findall(text.lower()) if w in index)
            ids = np.fromiter(counts.keys(), np.int32, len(counts))
            tfidf = np.fromiter(counts.values(), np.float64, len(counts)) * idf[ids]
            norm = np.sqrt((tfidf ** 2).sum())
            rows.append((ids, tfidf / norm if norm > 0 else tfidf))
        width = max([1] + [len(ids) for ids, _ in rows])
        ids = np.zeros((len(rows), width), np.int32)
        weights = np.zeros((len(rows), width), np.float64)
        for n, (i, w) in enumerate(rows):
            ids[n, :len(i)] = i
            weights[n, :len(w)] = w
        return ToxicityFeatures(ids, weights)

    def predict_proba(self, features: ToxicityFeatures) -> Float[Array, " N"]:
        """P(offensive) of each row of :meth:`features`, one jitted JAX program (vmaps, shards over ``N``).

        Computed in the weights' dtype (float32 unless ``jax_enable_x64``); agrees with :meth:`__call__`
        to about 1e-6 in float32.

        Args:
            features: :class:`ToxicityFeatures` with ``ids [N, W]`` in ``[0, F)``.

        Returns:
            ``[N]`` probabilities in ``[0, 1]``.

        Raises:
            TypeError: ``features`` is not a ``ToxicityFeatures``.
            ValueError: shapes disagree or (when concrete) an id is out of range.
        """
        if not isinstance(features, ToxicityFeatures):
            raise TypeError(expected("features", "ToxicityFeatures (from scorer.features(texts))",
                                     type(features).__name__, raw=True))
        ids, weights = jnp.asarray(features.ids), jnp.asarray(features.weights)
        if ids.ndim != 2 or ids.shape != weights.shape:
            raise ValueError(expected("features", "ids and weights of one shape [N, W]",
                                      f"{ids.shape} and {weights.shape}", raw=True))
        if not jnp.issubdtype(ids.dtype, jnp.integer):
            raise TypeError(expected("features.ids", "an integer array", ids.dtype, raw=True))
        if not isinstance(ids, jax.core.Tracer) and ids.size and (int(ids.min()) < 0
                                                                  or int(ids.max()) >= self.num_features):
            raise ValueError(expected("features.ids", f"indices in [0, {self.num_features})",
                                      f"range [{int(ids.min())}, {int(ids.max())}]", raw=True))
        dtype = jnp.result_type(weights.dtype, jnp.float32) if jnp.issubdtype(weights.dtype, jnp.floating) \
            else jnp.float32
        dtype = jnp.dtype(jax.dtypes.canonicalize_dtype(dtype))
        return _predict_proba(ids, weights.astype(dtype), jnp.asarray(self.coef, dtype),
                              jnp.asarray(self.intercept, dtype), jnp.asarray(self.calibration, dtype))

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """P(offensive) of each text, float64 on the host (equal to ``profanity_check.predict_prob``).

        Args:
            texts: ``N`` strings (an empty string scores the model's prior, about 0.036).

        Returns:
            ``[N]`` float64 NumPy array in ``[0, 1]``.

        Raises:
            TypeError: ``texts`` is a single string or holds a non-string.
        """
        from scipy.special import expit

        feats = self.features(texts)
        if not len(feats.ids):
            return np.zeros((0,), np.float64)
        return _probability(np, expit, feats.ids, feats.weights, np.asarray(self.coef),
                            np.asarray(self.intercept), np.asarray(self.calibration))


def _check_texts(texts) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise TypeError(expected("texts", "a sequence of strings (wrap one text in a list)",
                                 type(texts).__name__, raw=True))
    try:
        texts = list(texts)
    except TypeError:
        raise TypeError(expected("texts", "a sequence of strings", type(texts).__name__, raw=True)) from None
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(expected(f"texts[{i}]", "a str", type(t).__name__, raw=True))
    return texts


@functools.lru_cache(maxsize=4)
def _index(vocabulary: tuple[str, ...]) -> dict[str, int]:
    return {w: i for i, w in enumerate(vocabulary)}


@functools.lru_cache(maxsize=1)
def _arrays() -> dict[str, np.ndarray]:
    path = _DATA / "toxicity.npz"
    meta = json.loads((_DATA / "toxicity.json").read_text(encoding="utf-8"))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != meta["npz_sha256"]:
        raise OSError(f"{path}: SHA-256 {digest} differs from toxicity.json's {meta['npz_sha256']}; "
                      "rebuild it with `python scripts/convert_toxicity_scorer.py`")
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def load_toxicity_scorer() -> ToxicityScorer:
    """The shipped :class:`ToxicityScorer` (alt-profanity-check 1.9.1 as arrays; checksum verified).

    Returns:
        A :class:`ToxicityScorer` holding float64 NumPy arrays (JAX converts them inside
        :meth:`ToxicityScorer.predict_proba` to the program's dtype).

    Raises:
        OSError: the shipped array file fails its SHA-256 check.

    References:
        Zhou, Kotoglou & Mistriotis, ``alt-profanity-check`` 1.9.1 (MIT), a linear SVM on TF-IDF trained
        on labelled offensive and clean comments; Platt, "Probabilistic outputs for support vector
        machines", 1999 (the calibration).

    Examples:
        >>> scorer = load_toxicity_scorer()
        >>> scorer.num_features, scorer.coef.shape
        (15442, (5, 15442))
    """
    a = _arrays()
    return ToxicityScorer(vocabulary=tuple(str(w) for w in a["vocabulary"]), idf=a["idf"], coef=a["coef"],
                          intercept=a["intercept"], calibration=a["calibration"])


def profanity_words() -> tuple[str, ...]:
    """better-profanity 0.7.0's word list (MIT): 916 English profanities, slurs and their spellings.

    Useful as a keyword reward or to count profanities in sampled text; many are not single tokens of
    a subword vocabulary (SmolLM2's splits most into pieces).

    Returns:
        The words, in the list's order.

    Examples:
        >>> words = profanity_words()
        >>> len(words), "fuck" in words
        (916, True)
    """
    return tuple(str(w) for w in _arrays()["profanity_words"])
