"""jaxcore.evals: language-model evaluation (TrustLLM's metrics and trust suite, InfiAgent-DABench's agent evaluation).

Placeholder docstring; completed below as the family grows.
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
