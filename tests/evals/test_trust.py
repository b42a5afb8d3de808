"""Judges on the labelled set, perturbation kernels (invariants), and the trust table with scripted models."""

import jax
import numpy as np
import pytest

from jaxcore import evals


def test_refusal_judge_on_the_labelled_set():
    d = evals.judge_texts()
    pred = evals.is_refusal(d["texts"])
    r = evals.cohen_kappa(pred, d["refusal"])
    # by construction: 4 of 14 refusals avoid every listed phrase, and one profane reply opens with "I can't"
    assert r.confusion.tolist() == [[21, 4], [1, 10]]
    assert r.agreement == pytest.approx(31 / 36) and 0.6 < r.kappa < 0.8


def test_cohen_kappa_closed_forms():
    assert evals.cohen_kappa([1, 0, 1, 0], [1, 0, 1, 0]).kappa == 1.0
    assert evals.cohen_kappa([1, 0, 1, 0], [0, 1, 0, 1]).kappa == -1.0
    assert np.isnan(evals.cohen_kappa([1, 1], [1, 1]).kappa)
    with pytest.raises(ValueError, match="b: expected"):
        evals.cohen_kappa([1, 0], [1])


def test_toxicity_scorer_on_the_labelled_set():
    from jaxcore.lm import load_toxicity_scorer

    d = evals.judge_texts()
    p = np.asarray(load_toxicity_scorer()(d["texts"]))
    r = evals.cohen_kappa(p > 0.5, d["toxic"])
    assert r.agreement >= 0.9


@pytest.mark.parametrize("kind", evals.PERTURBATIONS)
def test_perturbation_invariants(kind):
    texts = ["Is Paris the capital of France? Answer yes or no.", "x = 42; @a[1]", "", "Ünïcode wörds stay valid"]
    c, n = evals.encode_texts(texts, max_length=120)
    r = evals.perturb(jax.random.key(0), c, n, kind=kind, rate=0.3)
    out = evals.decode_texts(r.codes, r.lengths)
    assert np.all(np.asarray(r.codes)[np.arange(120)[None] >= np.asarray(r.lengths)[:, None]] == 0)
    assert out[2] == "" and "\ufffd" not in "".join(out)
    if kind != "word_drop":   # letters only: digits and punctuation keep their order
        strip = lambda s: [ch for ch in s if not ch.isascii() or not ch.isalpha()]  # noqa: E731
        assert [strip(a) for a in out] == [strip(a) for a in texts]
    if kind in ("swap", "substitute"):
        assert r.lengths.tolist() == n.tolist()
    if kind == "swap":
        assert [sorted(a) for a in out] == [sorted(a) for a in texts]
    if kind == "delete":
        assert all(len(a) <= len(b) for a, b in zip(out, texts))
    if kind == "word_drop":
        assert all(a.split()[:1] == b.split()[:1] for a, b in zip(out, texts))
    same = evals.perturb(jax.random.key(0), c, n, kind=kind, rate=0.0)
    assert evals.decode_texts(same.codes, same.lengths) == texts


def test_perturbation_rates():
    c, n = evals.encode_texts(["abcdefghij" * 20] * 8)
    r = evals.perturb(jax.random.key(1), c, n, kind="delete", rate=0.25)
    assert np.mean(200 - np.asarray(r.lengths)) == pytest.approx(50, abs=8)
    r = evals.perturb(jax.random.key(1), c, n, kind="insert", rate=1.0)
    assert np.asarray(r.lengths).tolist() == [200] * 8   # capped at L
    with pytest.raises(ValueError, match="kind: expected"):
        evals.perturb(jax.random.key(0), c, n, kind="shout", rate=0.1)
    with pytest.raises(ValueError, match="rate: expected"):
        evals.perturb(jax.random.key(0), c, n, kind="swap", rate=1.5)
    with pytest.raises(TypeError, match="codes: expected"):
        evals.perturb(jax.random.key(0), c.astype(np.int32), n, kind="swap", rate=0.1)


def test_trust_table_with_scripted_models():
    def answerer(prompts):   # answers the question right only if "capital" is spelled right
        out = []
        for p in prompts:
            q = dict(evals.YES_NO_QUESTIONS).get(p)
            out.append(("Yes." if q == 1 else "No.") if q is not None else "Here you go.")
        return out

    refuser = lambda ps: ["I cannot help with that."] * len(ps)  # noqa: E731
    scorer = lambda texts: np.array([0.9 if "cannot" in t else 0.1 for t in texts])  # noqa: E731
    r = evals.trust_table(jax.random.key(0), {"answerer": answerer, "refuser": refuser}, ["h1", "h2"],
                          toxicity_scorer=scorer, kinds=("swap", "delete"), rate=0.5, num_resamples=20)
    assert r.rta_harmful.value.tolist() == [0.0, 1.0] and r.rta_benign.value.tolist() == [0.0, 1.0]
    np.testing.assert_allclose(r.toxicity.average.value, [0.1, 0.9], atol=1e-6)
    assert r.robustness.clean_accuracy.value.shape == (2, 2)
    np.testing.assert_allclose(r.robustness.clean_accuracy.value[0], 1.0)
    # the answerer knows only exact questions: every perturbed question that changed is answered "Here you go."
    changed = [np.mean([a != b for a, b in zip(r.perturbed_questions[k], [q for q, _ in evals.YES_NO_QUESTIONS])])
               for k in ("swap", "delete")]
    np.testing.assert_allclose(r.robustness.attack_success_rate.value[0], changed, atol=1e-6)
    np.testing.assert_allclose(r.consistency.value[1], 1.0)   # the refuser never changes its answer
    with pytest.raises(TypeError, match="models\\['bad'\\]: expected"):
        evals.trust_table(jax.random.key(0), {"bad": lambda ps: "x"}, ["h"])
