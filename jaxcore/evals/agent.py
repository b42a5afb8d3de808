"""The data-analysis agent loop: the model writes code, the sandbox runs it, the output returns; then a final answer.

A model is any callable from a list of prompts to a list of texts (batched: one call per round for every
task still running), so any language model plugs in: jaxcore's SmolLM2 wrapped with its chat template, an
HTTP client of a larger model, or the scripted :class:`OracleAgent`. For each task, :func:`run_agent`:

1. prompts the model with the task (:func:`jaxcore.evals.task_prompt`) and the transcript so far;
2. if the reply holds a fenced Python block, runs its first block in the sandbox
   (:func:`jaxcore.evals.run_code`, the task's table copied in) and appends the (truncated) output or
   error as an observation; if the reply already holds the answers in ``@name[value]`` form, it is the
   final response; a reply with neither ends the loop;
3. after at most ``num_rounds`` rounds asks for the final answer in the task's format, with
   ``final_model`` (a constrained decoder, say) if given, else the model;
4. scores every final response with DABench's evaluator (:func:`jaxcore.evals.score_answers`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

from jaxcore._util import check_int, expected

from .answers import AnswerScore, parse_answers, score_answers
from .sandbox import ExecResult, run_code
from .tasks import Task, oracle_solution, task_prompt, task_tables

__all__ = ["AGENT_INSTRUCTIONS", "AgentResult", "AgentTrace", "OracleAgent", "extract_code", "run_agent"]

#: the instructions before every task
AGENT_INSTRUCTIONS = (
    "You are a data analyst. Answer the question about the CSV file by writing Python code (pandas, numpy and "
    "scipy are available) in one ```python block; you will see what it prints. When you know the answer, reply "
    "with it in exactly the requested format."
)
_CODE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


def extract_code(text: str) -> str | None:
    """The first fenced code block of a reply (```` ```python ... ``` ````), or None.

    A block left open at the end of the reply (a model cut off by its token limit) runs to the end.

    Examples:
        >>> extract_code("Let me compute.\\n```python\\nprint(1)\\n```")
        'print(1)\\n'
        >>> extract_code("```python\\nx = 1\\nprint(x"), extract_code("no code") is None
        ('x = 1\\nprint(x', True)
    """
    m = _CODE.search(text)
    return m.group(1) if m else None


class AgentTrace(NamedTuple):
    """One task's run.

    Attributes:
        task_id: the task.
        transcript: ``(role, text)`` pairs: ``("user", ...)``, ``("assistant", ...)``, ``("observation", ...)``.
        executions: the :class:`jaxcore.evals.ExecResult` of every code block run.
        final: the final response that was scored.
        num_rounds: model calls before the final answer.
    """

    task_id: str
    transcript: tuple
    executions: tuple
    final: str
    num_rounds: int


class AgentResult(NamedTuple):
    """An agent's run over tasks: its traces and DABench's three accuracies.

    Attributes:
        traces: one :class:`AgentTrace` per task, in order.
        score: the :class:`jaxcore.evals.AnswerScore` of the final responses.
        num_executions: code blocks run in all.
        statuses: ``{sandbox status: count}`` over every execution.
    """

    traces: tuple
    score: AnswerScore
    num_executions: int
    statuses: dict


def _observation(r: ExecResult) -> str:
    text = r.stdout
    if r.status != "ok":
        text += f"\n[status: {r.status}]\n{r.stderr[-1500:]}"
    return text.strip() or "(no output)"


def _render(task: Task, transcript: list) -> str:
    parts = [AGENT_INSTRUCTIONS, "", task_prompt(task)]
    for role, text in transcript[1:]:
        parts += ["", f"{role.capitalize()}:", text]
    return "\n".join(parts)


def run_agent(model: Callable[[list], list], tasks: Sequence[Task], *, num_rounds: int = 3,
              final_model: Callable[[list], list] | None = None, key=None, sandbox: dict | None = None,
              num_resamples: int = 1000) -> AgentResult:
    """Run the agent loop (see the module docstring) on tasks and score the final answers.

    Args:
        model: ``model(prompts: list[str]) -> list[str]``, one reply per prompt.
        tasks: :class:`jaxcore.evals.Task` s.
        num_rounds: at most this many model calls with code per task (>= 1) before the final answer.
        final_model: the callable that writes the final answer (default: ``model``); a constrained decoder
            makes every final response parse.
        key: a ``jax.random.key`` for the accuracies' bootstrap intervals, or None (values only).
        sandbox: keyword arguments of :func:`jaxcore.evals.run_code` (limits).
        num_resamples: bootstrap resamples.

    Returns:
        An :class:`AgentResult`.

    Raises:
        TypeError: ``model`` is not callable, or returns other than one string per prompt.
        ValueError: no task, or ``num_rounds`` < 1.

    References:
        X. Hu, Z. Zhao, S. Wei, et al. "InfiAgent-DABench: Evaluating Agents on Data Analysis Tasks." ICML 2024.

    Examples:
        >>> from jaxcore.evals import make_tasks
        >>> tasks = make_tasks(["cars"], ["summary"])
        >>> r = run_agent(OracleAgent(tasks), tasks)
        >>> r.score.by_question.value.item(), r.traces[0].final
        (1.0, '@mean_speed[15.40] @std_speed[5.29]')
    """
    if not callable(model) or (final_model is not None and not callable(final_model)):
        raise TypeError(expected("model", "a callable from a list of prompts to a list of texts", model))
    tasks = list(tasks)
    if not tasks:
        raise ValueError(expected("tasks", "at least one task", tasks))
    num_rounds = check_int(num_rounds, "num_rounds", minimum=1)
    opts = dict(sandbox or {})
    transcripts = [[("user", task_prompt(t))] for t in tasks]
    executions: list[list] = [[] for _ in tasks]
    finals: list[str | None] = [None] * len(tasks)
    rounds = [0] * len(tasks)
    active = list(range(len(tasks)))

    def call(fn, idx, suffix=""):
        prompts = [_render(tasks[i], transcripts[i]) + suffix for i in idx]
        replies = fn(prompts)
        if not isinstance(replies, (list, tuple)) or len(replies) != len(prompts) or \
                not all(isinstance(r, str) for r in replies):
            raise TypeError(expected("model", f"a list of {len(prompts)} strings from {len(prompts)} prompts",
                                     replies))
        return replies

    for _ in range(num_rounds):
        if not active:
            break
        replies = call(model, active)
        still = []
        for i, reply in zip(active, replies):
            rounds[i] += 1
            transcripts[i].append(("assistant", reply))
            code = extract_code(reply)
            if code is None:
                if parse_answers(reply):
                    finals[i] = reply
                continue
            r = run_code(code, task_tables(tasks[i]), **opts)
            executions[i].append(r)
            transcripts[i].append(("observation", _observation(r)))
            still.append(i)
        active = still
    pending = [i for i in range(len(tasks)) if finals[i] is None]
    if pending:
        replies = call(final_model or model, pending,
                       "\n\nNow give only the final answer in the requested format.")
        for i, reply in zip(pending, replies):
            transcripts[i].append(("assistant", reply))
            finals[i] = reply
    score = score_answers(key, finals, [t.answers for t in tasks], num_resamples=num_resamples)
    statuses: dict[str, int] = {}
    for ex in executions:
        for r in ex:
            statuses[r.status] = statuses.get(r.status, 0) + 1
    traces = tuple(AgentTrace(t.task_id, tuple(tr), tuple(ex), f, n)
                   for t, tr, ex, f, n in zip(tasks, transcripts, executions, finals, rounds))
    return AgentResult(traces, score, sum(len(e) for e in executions), statuses)


class OracleAgent:
    """A scripted agent that knows the tasks: it writes the hand-written pandas solution, then copies the answer.

    On a prompt without an observation it replies with :func:`jaxcore.evals.oracle_solution` of the task
    whose question the prompt holds; after an observation it replies with the ``@name[value]`` answers
    printed there. It proves the loop, the sandbox and the evaluator: it must score 100%.

    Args:
        tasks: the tasks it may be asked.

    Examples:
        >>> from jaxcore.evals import make_tasks, task_prompt
        >>> tasks = make_tasks(["cars"], ["summary"])
        >>> OracleAgent(tasks)([task_prompt(tasks[0])])[0][:3]
        '```'
    """

    def __init__(self, tasks: Sequence[Task]):
        self._tasks = list(tasks)

    def _task_of(self, prompt: str) -> Task | None:
        # The same question is asked of several tables, and one question can hold another, so a task is the one
        # whose whole statement (question and file, as task_prompt writes them) the prompt holds, the longest first.
        found = [t for t in self._tasks if f"Question: {t.question}\n" in prompt and f"File: {t.file_name} " in prompt]
        return max(found, key=lambda t: len(t.question), default=None)

    def __call__(self, prompts: list) -> list:
        out = []
        for p in prompts:
            task = self._task_of(p)
            if task is None:
                out.append("I do not know this task.")
            elif "Observation:" not in p:
                out.append(f"```python\n{oracle_solution(task)}\n```")
            else:
                seen = p.rsplit("Observation:", 1)[1]
                out.append(" ".join(f"@{k}[{v}]" for k, v in parse_answers(seen).items()))
        return out
