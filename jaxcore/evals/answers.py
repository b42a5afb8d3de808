"""InfiAgent-DABench's closed-form answers: the ``@answer_name[value]`` parser and the three accuracies.

DABench turns open data-analysis questions into closed form by format prompting: the response must hold
``@answer_name[value]`` for every sub-question, and the official evaluator reads them with the regular
expression ``@(\\w+)\\[(.*?)\\]`` and counts a sub-answer correct when the value equals the gold string or both
are numbers within ``1e-6``. Its three accuracies: by question (every sub-answer right), by sub-question
(right sub-answers over all sub-answers) and proportional (the mean over questions of the fraction right).

Edge cases of the official parser, kept in ``mode="official"``: the value ends at the FIRST ``]``, so
``@x[[1, 2]]`` reads ``[1, 2`` and a value containing ``]`` is cut; names are ``\\w+`` (letters, digits,
underscore), so ``@mean-age[3]`` is not an answer; a name given twice keeps its last value; whitespace around
a value is stripped before comparing. ``mode="balanced"`` reads a value up to the ``]`` that balances its
``[`` (nested lists), falling back to the official reading where the brackets never balance.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Literal, NamedTuple

import numpy as np

from jaxcore._util import expected

from .metrics import MetricResult, table_metric

__all__ = ["ANSWER_PATTERN", "AnswerScore", "answers_match", "format_answers", "parse_answers", "score_answers"]

#: the official DABench answer pattern
ANSWER_PATTERN = r"@(\w+)\[(.*?)\]"
_OFFICIAL = re.compile(ANSWER_PATTERN, re.DOTALL)
_HEAD = re.compile(r"@(\w+)\[")
#: two numbers closer than this are equal (the official tolerance)
TOLERANCE = 1e-6


def _balanced(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    pos = 0
    while True:
        m = _HEAD.search(text, pos)
        if m is None:
            return out
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"[": 1, "]": -1}.get(text[i], 0)
            i += 1
        if depth:  # never balanced: the official reading of this one
            o = _OFFICIAL.match(text, m.start())
            if o is None:
                pos = m.end()
                continue
            out[o.group(1)] = o.group(2).strip()
            pos = o.end()
        else:
            out[m.group(1)] = text[m.end():i - 1].strip()
            pos = i


def parse_answers(text: str, *, mode: Literal["official", "balanced"] = "official") -> dict[str, str]:
    """The ``{answer_name: value}`` pairs of a response (values stripped; a repeated name keeps its last value).

    Args:
        text: the model's response.
        mode: ``"official"`` (DABench's regex, the value ends at the first ``]``) or ``"balanced"``
            (the value ends at the ``]`` balancing its ``[``).

    Returns:
        dict from names to value strings (empty if the response holds no answer).

    Raises:
        TypeError: ``text`` is not a string.
        ValueError: an unknown ``mode``.

    References:
        X. Hu, Z. Zhao, S. Wei, et al. "InfiAgent-DABench: Evaluating Agents on Data Analysis Tasks." ICML 2024.

    Examples:
        >>> parse_answers("The mean is @mean_age[29.7] and @count[ 12 ].")
        {'mean_age': '29.7', 'count': '12'}
        >>> parse_answers("@cols[[a, b]]"), parse_answers("@cols[[a, b]]", mode="balanced")
        ({'cols': '[a, b'}, {'cols': '[a, b]'})
    """
    if not isinstance(text, str):
        raise TypeError(expected("text", "a string", type(text).__name__, raw=True))
    if mode == "official":
        return {k: v.strip() for k, v in _OFFICIAL.findall(text)}
    if mode == "balanced":
        return _balanced(text)
    raise ValueError(expected("mode", "'official' or 'balanced'", mode))


def _number(s: str) -> float | None:
    try:
        v = float(s)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def answers_match(value: str, gold: str) -> bool:
    """DABench's equality: the same string after stripping, or two finite numbers within ``1e-6``.

    Examples:
        >>> answers_match("3.1400000001", "3.14"), answers_match("3.15", "3.14"), answers_match(" yes", "yes")
        (True, False, True)
    """
    a, b = str(value).strip(), str(gold).strip()
    if a == b:
        return True
    x, y = _number(a), _number(b)
    return x is not None and y is not None and abs(x - y) < TOLERANCE


def format_answers(answers: Mapping[str, object]) -> str:
    """``@name[value]`` for every pair, joined by spaces (the form DABench asks for).

    Examples:
        >>> format_answers({"mean": "2.50", "n": 4})
        '@mean[2.50] @n[4]'
    """
    for k in answers:
        if not re.fullmatch(r"\w+", str(k)):
            raise ValueError(expected("answers", "names of letters, digits and underscores", k))
    return " ".join(f"@{k}[{v}]" for k, v in answers.items())


class AnswerScore(NamedTuple):
    """DABench's accuracies of a set of responses.

    Attributes:
        by_question: :class:`MetricResult`: the fraction of questions with every sub-answer right.
        by_subquestion: :class:`MetricResult`: right sub-answers over all sub-answers (the interval resamples
            sub-answers).
        proportional: :class:`MetricResult`: the mean over questions of the fraction of sub-answers right.
        correct: per question, a tuple of bools (one per gold sub-answer, in the gold's order).
        parsed: per question, the parsed ``{name: value}`` of its response.
    """

    by_question: MetricResult
    by_subquestion: MetricResult
    proportional: MetricResult
    correct: tuple
    parsed: tuple


def score_answers(key, responses: Sequence[str], golds: Sequence[Mapping[str, str]], *,
                  mode: Literal["official", "balanced"] = "official", num_resamples: int = 1000,
                  level: float = 0.95) -> AnswerScore:
    """Score responses against gold sub-answers: by question, by sub-question and proportionally.

    A sub-answer is right when the response holds its name and :func:`answers_match` holds; a missing or
    malformed answer is simply wrong (never an error).

    Args:
        key: a ``jax.random.key`` for the bootstrap intervals, or None (values only).
        responses: Q response strings.
        golds: Q non-empty mappings ``{answer_name: gold value string}``.
        mode: the parser's mode (:func:`parse_answers`).
        num_resamples, level: the bootstrap (:func:`jaxcore.evals.table_metric`).

    Returns:
        An :class:`AnswerScore`.

    Raises:
        ValueError: lengths differ, no question, or a gold without answers.
        TypeError: a response that is not a string.

    Examples:
        >>> s = score_answers(None, ["@a[1] @b[2]", "@a[3.0000000001] @b[x]"], [{"a": "1", "b": "2"},
        ...                                                                   {"a": "3", "b": "y"}])
        >>> s.by_question.value.item(), s.by_subquestion.value.item(), s.proportional.value.item()
        (0.5, 0.75, 0.75)
    """
    if len(responses) != len(golds) or not responses:
        raise ValueError(expected("golds", f"{len(responses)} gold mappings (one per response, at least one)",
                                  f"{len(golds)}", raw=True))
    correct, parsed = [], []
    for i, (r, g) in enumerate(zip(responses, golds)):
        if not isinstance(r, str):
            raise TypeError(expected(f"responses[{i}]", "a string", type(r).__name__, raw=True))
        if not g:
            raise ValueError(expected(f"golds[{i}]", "at least one answer name", g))
        p = parse_answers(r, mode=mode)
        parsed.append(p)
        correct.append(tuple(k in p and answers_match(p[k], v) for k, v in g.items()))
    q_all = np.array([all(c) for c in correct])
    q_prop = np.array([np.mean(c) for c in correct])
    flat = np.array([x for c in correct for x in c])
    kw = {"num_resamples": num_resamples, "level": level}
    return AnswerScore(table_metric(key, "mean", q_all, **kw), table_metric(key, "mean", flat, **kw),
                       table_metric(key, "mean", q_prop, **kw), tuple(correct), tuple(parsed))
