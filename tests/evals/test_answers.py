"""The @name[value] parser's edge cases (official and balanced) and DABench's three accuracies by hand."""

import jax
import pytest

from jaxcore import evals


@pytest.mark.parametrize("text, official, balanced", [
    ("@a[1] @b[x y]", {"a": "1", "b": "x y"}, {"a": "1", "b": "x y"}),
    ("@cols[[a, b]]", {"cols": "[a, b"}, {"cols": "[a, b]"}),            # a value containing ]
    ("@v[a]b] tail", {"v": "a"}, {"v": "a"}),                           # the first ] closes
    ("@v[[1, [2]], 3] @w[4]", {"v": "[1, [2", "w": "4"}, {"v": "[1, [2]], 3", "w": "4"}),
    ("@open[never closed", {}, {}),                                     # no closing bracket
    ("@x[[unbalanced] @y[2]", {"x": "[unbalanced", "y": "2"}, {"x": "[unbalanced", "y": "2"}),
    ("@mean-age[3] @mean_age[4]", {"mean_age": "4"}, {"mean_age": "4"}),   # \w+ names only
    ("@a[1] ... @a[2]", {"a": "2"}, {"a": "2"}),                         # the last value wins
    ("@a[\n  7\n]", {"a": "7"}, {"a": "7"}),                             # stripped, across lines
    ("no answer here", {}, {}),
    ("@[3] @a[]", {"a": ""}, {"a": ""}),
])
def test_parser_edge_cases(text, official, balanced):
    assert evals.parse_answers(text) == official
    assert evals.parse_answers(text, mode="balanced") == balanced


def test_match_rules():
    assert evals.answers_match("0.30000000000000004", "0.3")
    assert evals.answers_match("1e3", "1000")
    assert not evals.answers_match("0.301", "0.3")
    assert not evals.answers_match("nan", "nan ") is False  # identical strings match
    assert not evals.answers_match("inf", "1e400")         # non-finite numbers are not numbers
    assert not evals.answers_match("Yes", "yes")            # case matters, as in the official evaluator


def test_three_accuracies_hand_worked():
    golds = [{"a": "1", "b": "2"}, {"c": "x"}, {"d": "0.5", "e": "3", "f": "t"}]
    responses = ["@a[1] @b[3]", "@c[x]", "@d[0.5000000001] @e[3] @f[t] extra @zz[9]"]
    s = evals.score_answers(None, responses, golds)
    assert s.correct == ((True, False), (True,), (True, True, True))
    assert s.by_question.value.item() == pytest.approx(2 / 3)
    assert s.by_subquestion.value.item() == pytest.approx(5 / 6)
    assert s.proportional.value.item() == pytest.approx((0.5 + 1 + 1) / 3)
    k = evals.score_answers(jax.random.key(0), responses, golds, num_resamples=100)
    assert k.by_question.low <= k.by_question.value <= k.by_question.high


def test_malformed_responses_are_wrong_not_errors():
    s = evals.score_answers(None, ["", "@a[", "]]]@@[[", "@a[1"], [{"a": "1"}] * 4)
    assert s.by_question.value.item() == 0.0


def test_bad_arguments():
    with pytest.raises(ValueError, match="golds: expected"):
        evals.score_answers(None, ["x"], [])
    with pytest.raises(ValueError, match=r"golds\[0\]: expected"):
        evals.score_answers(None, ["x"], [{}])
    with pytest.raises(TypeError, match=r"responses\[0\]: expected a string"):
        evals.score_answers(None, [3], [{"a": "1"}])
    with pytest.raises(ValueError, match="mode: expected"):
        evals.parse_answers("x", mode="greedy")
    with pytest.raises(ValueError, match="answers: expected"):
        evals.format_answers({"bad name": 1})
