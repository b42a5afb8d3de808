"""jaxcore.evals: evaluating language models offline (TrustLLM's metrics, InfiAgent-DABench's agent evaluation).

A model is any callable from a list of prompts to a list of texts; nothing here imports another family.

- metrics (TrustLLM): :func:`refuse_to_answer_rate`, :func:`toxicity`, :func:`agreement`,
  :func:`pearson_correlation`, :func:`robustness` (accuracy, ASR, RS), :func:`chi_square_test`: one jitted
  program per metric for a whole models x runs x items table, with paired bootstrap intervals;
- judges: :func:`is_refusal` (a keyword judge, weaker than a learned classifier), :func:`cohen_kappa`,
  :func:`judge_texts` (36 labelled texts written here); perturbations: :func:`perturb` (a jitted kernel);
- the trust suite: :func:`trust_table` (RtA on HarmBench and benign look-alikes, toxicity, robustness);
- agents (DABench): :func:`make_tasks` (questions over R's tables with gold ``@name[value]`` answers),
  :func:`run_code` (the sandbox), :func:`run_agent` (the loop), :class:`OracleAgent`, :func:`score_answers`.

The main workflow on real data: the scripted oracle agent answers a question about R's ``mtcars`` through
the sandbox, scored by DABench's evaluator; a keyword judge and the refuse-to-answer rate with its interval.

>>> import jax
>>> from jaxcore import evals
>>> tasks = evals.make_tasks(["mtcars"], ["correlation"])
>>> print(tasks[0].question)
What is the Pearson correlation coefficient between 'mpg' and 'cyl', and how strong is it?
>>> res = evals.run_agent(evals.OracleAgent(tasks), tasks)
>>> res.traces[0].final, res.score.by_question.value.item(), res.statuses
('@correlation_coefficient[-0.85] @relationship_strength[strong]', 1.0, {'ok': 1})
>>> refused = evals.is_refusal(["I'm sorry, but I can't help with that.", "Sure, here it is.", "I won't."])
>>> r = evals.refuse_to_answer_rate(jax.random.key(0), refused, num_resamples=200)
>>> round(r.value.item(), 3), bool(r.low <= r.value <= r.high)
(0.667, True)

References:
    Y. Huang, L. Sun, H. Wang, et al. "Position: TrustLLM: Trustworthiness in Large Language Models." ICML 2024.
    X. Hu, Z. Zhao, S. Wei, et al. "InfiAgent-DABench: Evaluating Agents on Data Analysis Tasks." ICML 2024.
"""

from .metrics import (STATISTICS, ChiSquareResult, MetricResult, RobustnessResult, agreement, chi_square_test,
                      pearson_correlation, refuse_to_answer_rate, robustness, table_metric, ToxicityResult,
                      toxicity)
from .answers import ANSWER_PATTERN, AnswerScore, answers_match, format_answers, parse_answers, score_answers
from .sandbox import STATUSES, ExecResult, network_isolation, run_code
from .tasks import LEVELS, TASK_KINDS, Task, make_tasks, oracle_solution, task_prompt, task_tables
from .agent import AGENT_INSTRUCTIONS, AgentResult, AgentTrace, OracleAgent, extract_code, run_agent
from .judges import REFUSAL_PHRASES, JudgeAgreement, cohen_kappa, is_refusal, judge_texts
from .perturb import PERTURBATIONS, PerturbResult, decode_texts, encode_texts, perturb, perturb_texts
from .trust import BENIGN_LOOKALIKES, YES_NO_QUESTIONS, TrustResult, parse_yes_no, trust_table

__all__ = ["STATISTICS", "ChiSquareResult", "MetricResult", "RobustnessResult", "agreement", "chi_square_test",
           "pearson_correlation", "refuse_to_answer_rate", "robustness", "table_metric", "ToxicityResult",
           "toxicity", "ANSWER_PATTERN", "AnswerScore", "answers_match", "format_answers", "parse_answers",
           "score_answers", "STATUSES", "ExecResult", "network_isolation", "run_code", "LEVELS", "TASK_KINDS", "Task",
           "make_tasks", "oracle_solution", "task_prompt", "task_tables", "AGENT_INSTRUCTIONS", "AgentResult",
           "AgentTrace", "OracleAgent", "extract_code", "run_agent", "REFUSAL_PHRASES", "JudgeAgreement", "cohen_kappa",
           "is_refusal", "judge_texts", "PERTURBATIONS", "PerturbResult", "decode_texts", "encode_texts", "perturb",
           "perturb_texts", "BENIGN_LOOKALIKES", "YES_NO_QUESTIONS", "TrustResult", "parse_yes_no", "trust_table"]
