"""The language-model families' reproduction verdicts, read from hand-built cell metrics."""

import math

import pytest

from benchmarks.cli import discover_suites
from benchmarks.registry import reproductions


@pytest.fixture(scope="module")
def verdicts():
    discover_suites()
    return {name: rep.verdict for name, rep in reproductions().items()}


def _frontier(cdq):
    """decoding.frontier metrics: best-of-K at K = 1, 2, 4 (rewards .05, .09, .15) and CD-Q points (kl, reward)."""
    pre = "decoding.frontier."
    m = {pre + "base.-.reward": 0.05}
    for k, r in ((1, 0.05), (2, 0.09), (4, 0.15)):
        m[pre + f"best-of-K_(reward).K={k}.reward"] = r
        m[pre + f"best-of-K_(reward).K={k}.kl"] = math.log(k) - (k - 1) / k
    for i, (kl, r) in enumerate(cdq):
        m[pre + f"CD-Q.lambda={i}.reward"], m[pre + f"CD-Q.lambda={i}.kl"] = r, kl
    return m


def test_decoding_verdict_compares_cd_q_with_best_of_k_at_equal_kl(verdicts):
    v = verdicts["decoding"]
    # above the interpolated frontier (0.09 + 0.5 * 0.06 = 0.12 at KL 0.41)
    assert v({"c": _frontier([(0.41, 0.14)])})[0] == "reproduced in kind"
    assert v({"c": _frontier([(0.41, 0.10)])})[0] == "not reproduced"
    # one point above, two below: a minority does not reproduce the claim
    assert v({"c": _frontier([(0.3, 0.2), (0.5, 0.05), (0.6, 0.06)])})[0] == "not reproduced"
    # at the base model's KL (under half of best-of-2's 0.19 nats) a point is not compared; beyond K = 4, neither
    verdict, text = v({"c": _frontier([(0.03, 0.2), (-0.04, 0.3), (5.0, 0.4)])})
    assert verdict == "incomplete" and "not compared" in text and "beyond best-of-K's largest KL" in text


def _toxicity(n, base, dpo, unaligned, ppl_ratio, sd=0.1, count=400):
    pre = "alignment.toxicity."
    m = {pre + "num_pairs": float(n), pre + "value_vector_cosine_min": 0.9999}
    for name, tox, ppl in (("base", base, 20.0), ("subtract_probe", base, 20.0), ("DPO", dpo, 20.0 * ppl_ratio),
                           ("DPO_unaligned", unaligned, 21.0)):
        m.update({pre + f"{name}.toxicity": tox, pre + f"{name}.toxicity_sd": sd, pre + f"{name}.num_scores": count,
                  pre + f"{name}.perplexity": ppl})
    return m


def test_alignment_verdict_reads_the_largest_cell(verdicts):
    v = verdicts["alignment"]
    # the largest cell decides: DPO 0.05 below base with SE ~0.007 per arm, perplexity within 10%, un-alignment back
    assert v({"small": _toxicity(8, 0.1, 0.12, 0.1, 1.0), "big": _toxicity(64, 0.12, 0.07, 0.11, 1.05)})[0] == \
        "reproduced in kind"
    assert v({"big": _toxicity(64, 0.12, 0.07, 0.11, 1.25)})[0] == "not reproduced"  # perplexity rose 25%
    assert v({"big": _toxicity(64, 0.12, 0.115, 0.12, 1.0)})[0] == "not reproduced"  # within its interval
