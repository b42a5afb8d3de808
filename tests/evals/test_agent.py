"""Task generator (gold answers against independent computations) and the agent loop end to end."""

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from jaxcore import evals
from jaxcore.datasets import analysis_table


def test_generator_covers_every_kind_and_level():
    tasks = evals.make_tasks()
    assert len(tasks) == 105 and len({t.task_id for t in tasks}) == 105
    assert {t.kind for t in tasks} == set(evals.TASK_KINDS) and {t.level for t in tasks} == set(evals.LEVELS)
    for t in tasks:
        assert t.answers and all(k.isidentifier() for k in t.answers)
        for k in t.answers:   # the format names every answer
            assert f"@{k}[" in t.answer_format


def test_gold_answers_against_closed_forms():
    by_id = {t.task_id: t for t in evals.make_tasks(["women", "airquality", "chickwts", "faithful"])}
    # women: height 58..72 (15 values), mean 65, sample std sqrt(20) = 4.47
    assert by_id["women-summary"].answers == {"mean_height": "65.00", "std_height": "4.47"}
    air = pd.read_csv(analysis_table("airquality")["path"])
    assert by_id["airquality-missing"].answers["rows_remaining"] == "111" == str(len(air.dropna()))
    chick = pd.read_csv(analysis_table("chickwts")["path"])
    assert by_id["chickwts-groups"].answers["top_group"] == chick.groupby("feed").weight.mean().idxmax()
    f = pd.read_csv(analysis_table("faithful")["path"])
    r = scipy.stats.linregress(f.eruptions, f.waiting)
    want = {"slope": f"{r.slope:.2f}", "intercept": f"{r.intercept:.2f}", "r_squared": f"{r.rvalue ** 2:.2f}"}
    assert by_id["faithful-regression"].answers == want
    p = scipy.stats.shapiro(f.waiting).pvalue
    assert by_id["faithful-normality"].answers == {"p_value": f"{p:.4f}", "normality": "not_normal"}


def test_oracle_agent_scores_100_percent_end_to_end():
    tasks = [t for t in evals.make_tasks(["airquality", "iris"]) if t.kind in ("missing", "groups", "regression")]
    r = evals.run_agent(evals.OracleAgent(tasks), tasks)
    assert r.score.by_question.value.item() == 1.0 and r.score.by_subquestion.value.item() == 1.0
    assert r.statuses == {"ok": len(tasks)} and all(tr.num_rounds == 2 for tr in r.traces)


def test_oracle_agent_tells_apart_tables_asked_the_same_question():
    # chickwts and PlantGrowth both have a column 'weight': the same question of two files (the reproduction's
    # oracle scored 100/105 when the agent matched prompts by question alone and answered from the wrong file)
    tasks = evals.make_tasks(["chickwts", "PlantGrowth"], ["summary", "outliers"])
    assert len({t.question for t in tasks}) < len(tasks)
    agent = evals.OracleAgent(tasks)
    for t in tasks:
        code = agent([evals.task_prompt(t)])[0]
        assert f"read_csv({t.file_name!r})" in code
    assert agent(["Question: an unknown question\nFile: none.csv (in the current folder)"]) == ["I do not know this task."]
    r = evals.run_agent(agent, tasks)
    assert r.score.by_question.value.item() == 1.0 and r.statuses == {"ok": len(tasks)}


def _scripted(replies):
    calls = []

    def model(prompts):
        calls.append(prompts)
        return [replies[min(len(calls) - 1, len(replies) - 1)]] * len(prompts)

    return model, calls


def test_loop_records_bad_code_and_asks_for_a_final_answer():
    task = evals.make_tasks(["cars"], ["outliers"])[0]
    model, calls = _scripted(["```python\nwhile True:\n    pass\n```", "```python\nimport socket\nsocket.socket()\n```",
                              "@outlier_count[1]"])
    final, fcalls = _scripted(["@outlier_count[" + task.answers["outlier_count"] + "]"])
    r = evals.run_agent(model, [task], num_rounds=2, final_model=final, sandbox={"cpu_seconds": 1})
    assert r.statuses == {"cpu_limit": 1, "refused": 1}
    assert len(calls) == 2 and len(fcalls) == 1 and "final answer" in fcalls[0][0]
    assert "Observation:" in fcalls[0][0] and "[status: refused]" in fcalls[0][0]
    assert r.score.by_question.value.item() == 1.0


def test_a_reply_without_code_or_answer_ends_the_loop():
    task = evals.make_tasks(["cars"], ["summary"])[0]
    model, calls = _scripted(["I think the mean is about 15."])
    r = evals.run_agent(model, [task], num_rounds=3)
    assert len(calls) == 2 and r.num_executions == 0 and r.score.by_question.value.item() == 0.0


def test_bad_models():
    task = evals.make_tasks(["cars"], ["summary"])[0]
    with pytest.raises(TypeError, match="model: expected"):
        evals.run_agent("gpt", [task])
    with pytest.raises(TypeError, match="model: expected a list of 1 strings"):
        evals.run_agent(lambda ps: "one string", [task])
    with pytest.raises(ValueError, match="num_rounds: expected"):
        evals.run_agent(lambda ps: ps, [task], num_rounds=0)
    with pytest.raises(ValueError, match="tables: expected"):
        evals.make_tasks(["nope"])


def test_a_code_block_cut_off_by_the_token_limit_still_runs():
    task = evals.make_tasks(["women"], ["summary"])[0]
    model, _ = _scripted(["Let me look.\n```python\nprint('@mean_height[65.00] @std_height[4.47]')\n"])
    final, _ = _scripted(["@mean_height[65.00] @std_height[4.47]"])
    r = evals.run_agent(model, [task], num_rounds=1, final_model=final)
    assert r.statuses == {"ok": 1} and r.traces[0].transcript[2] == ("observation",
                                                                      "@mean_height[65.00] @std_height[4.47]")
