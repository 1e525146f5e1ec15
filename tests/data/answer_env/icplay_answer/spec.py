"""The "answer" language: a Bash shell (icplay's own sandboxes); `submit ANSWER` scores 1
when ANSWER equals the task's gold answer, ignoring case and surrounding spaces."""

from __future__ import annotations

import shlex

from icplay.envs.base import STREAMS_OUTPUT, StepResult, SubmitResult
from icplay.languages import LanguageSpec, Prompts, make_env


def reward(answer: str | None, gold: str) -> float:
    """The whole reward function: a pure function of the answer."""
    return 1.0 if (answer or "").strip().lower() == gold.strip().lower() else 0.0


class AnswerEnv:
    name = "answer"
    capabilities = frozenset({STREAMS_OUTPUT})

    def __init__(self, sandbox: str, **options):
        self.shell = make_env("bash", sandbox, timeout=options.get("timeout"), progress=options.get("progress"))
        self.sandbox_kind = self.shell.sandbox_kind
        self.task = None

    def reset(self, task) -> str:
        self.task = task
        self.shell.reset(task)
        self.shell.step(f"cd /tmp && printf '%s\\n' {shlex.quote(task.extra['data'])} > data.txt")
        return task.query

    def step(self, action: str, on_output=None) -> StepResult:
        return self.shell.step(action, on_output)

    def submit(self, arg: str | None = None) -> SubmitResult:
        return SubmitResult(reward(arg, self.task.gold), {"answer": arg, "expected": self.task.gold}, self.task.gold)

    def interrupt(self) -> None:
        self.shell.interrupt()

    def close(self) -> None:
        self.shell.close()


SPEC = LanguageSpec(
    name="answer", title="Answer", sandboxes=("bwrap", "docker"), env=AnswerEnv,
    prompts=Prompts(name="Bash", setting="Bash shell with a data file at /tmp/data.txt", fence="bash",
                    fence_aliases=("bash", "sh"), bare_code="shell", submit_arg=True,
                    notes="- Read /tmp/data.txt and reply `submit <answer>` when you know the answer."),
    gold_actions=lambda task: [f"submit {task.gold}"],
    score_rows=lambda b: [("your answer", str(b.get("answer"))), ("expected", str(b.get("expected")))],
    description="a shell over a data file; submit the answer",
)
