"""answer: an icplay environment in one file. A Bash shell over a data file the task
brings; `submit ANSWER` scores 1 when the answer equals the task's gold (case and
surrounding spaces aside). On Docker the shell runs in this package's own image
(image/Dockerfile, built on first use); on bwrap, in icplay's Bash testbed."""

from __future__ import annotations

import shlex
from pathlib import Path

from icplay.envs.base import STREAMS_OUTPUT, StepResult, SubmitResult
from icplay.envs.bash import BashSandboxes
from icplay.languages.spec import Image, LanguageSpec, Prompts

TASKS = Path(__file__).with_name("tasks.json")
IMAGE = Image("answer", "icplay-answer:latest", "Dockerfile", "the answer language's shell",
              context=str(Path(__file__).with_name("image")))


def reward(answer: str | None, gold: str) -> float:
    """The whole reward function: a pure function of the answer."""
    return 1.0 if (answer or "").strip().lower() == gold.strip().lower() else 0.0


class AnswerEnv:
    name, capabilities = "answer", frozenset({STREAMS_OUTPUT})

    def __init__(self, sandbox: str = "docker", timeout: float | None = None, progress=None, **options):
        self.sandbox_kind, self.task, self.pool, self.box = sandbox, None, None, None
        self.sandboxes = BashSandboxes(sandbox, image=IMAGE.tag if sandbox == "docker" else None,
                                       timeout=timeout or 10.0, progress=progress)

    def reset(self, task) -> str:
        self._give_back()
        self.task, self.pool = task, self.sandboxes.pool(task)
        self.box = self.pool.take()
        self.box.run(f"cd /tmp && printf '%s\\n' {shlex.quote(task.extra['data'])} > data.txt")
        return task.query

    def step(self, action: str, on_output=None) -> StepResult:
        done = self.box.run(action, on_output=on_output)
        return StepResult(done.output, done.exit_code, done.duration, done.info())

    def submit(self, arg: str | None = None) -> SubmitResult:
        return SubmitResult(reward(arg, self.task.gold), {"answer": arg, "expected": self.task.gold}, self.task.gold)

    def interrupt(self) -> None:
        if self.box is not None:
            self.box.interrupt()

    def _give_back(self) -> None:
        if self.box is not None:
            self.pool.discard(self.box)
            self.box = None

    def close(self) -> None:
        self._give_back()
        self.sandboxes.close()


SPEC = LanguageSpec(
    name="answer", title="Answer", sandboxes=("docker", "bwrap"), env=AnswerEnv, images=(IMAGE,),
    prompts=Prompts(name="Bash", setting="Bash shell with a data file at /tmp/data.txt", fence="bash",
                    fence_aliases=("bash", "sh"), bare_code="shell", submit_arg=True,
                    notes="- Read /tmp/data.txt and reply `submit <answer>` when you know the answer."),
    gold_actions=lambda task: [f"submit {task.gold}"],
    score_rows=lambda b: [("your answer", str(b.get("answer"))), ("expected", str(b.get("expected")))],
    description="a shell over a data file; submit the answer",
)
