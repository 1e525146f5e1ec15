"""Harbor's language spec: a Bash shell in the task's own container, scored by its verifier."""

from __future__ import annotations

from typing import Callable

from icplay.languages.spec import LanguageSpec, Prompts
from icplay.languages.turns import TurnPlan, TurnRule
from icplay.tasks.model import Task


def score_rows(b: dict) -> list[tuple[str, str]]:
    rows = [("verifier", str(b.get("verifier") or "tests/test.sh"))]
    if b.get("not_scored"):
        rows.append(("not scored", str(b["not_scored"])))
    if b.get("reward_file"):
        rows.append(("reward read from", str(b["reward_file"])))
    for name, value in (b.get("rewards") or {}).items():
        rows.append((f"reward {name}", str(value)))
    if b.get("verifier_exit_code") is not None:
        rows.append(("verifier exit code", str(b["verifier_exit_code"])))
    output = (b.get("verifier_output") or "").strip()
    if output:
        rows.append(("verifier output (end)", "\n".join(output.splitlines()[-8:])))
    return rows


def gold_actions(task: Task) -> list[str]:
    """Harbor's oracle: solution/ written to /solution, then ``bash /solution/solve.sh``."""
    if not task.gold:
        return ["submit"]
    return [task.gold, "submit"]


def task_lines(task: Task) -> list[str]:
    return ["This is a Harbor task: when you submit, the task's own tests run in this container and give the reward."]


PROMPTS = Prompts(
    name="Bash",
    setting="Bash shell on Linux inside the task's own container (a persistent session: cd, variables and "
            "functions carry over between commands)",
    unit="command", units="commands", fence="bash",
    fence_aliases=("bash", "sh", "shell", "console", "shell-session", "zsh", "terminal"),
    notes=(
        "- Commands get no input on stdin; do not start editors, pagers or anything interactive (use cat, sed,\n"
        "  printf, heredocs).\n"
        "- Do what the task asks in this container; when you are done, reply `submit`: the task's tests then\n"
        "  check the container's state. You see no reward before that."
    ),
    bare_code="shell",
    task_lines=task_lines,
)

SPEC = LanguageSpec(
    name="harbor", title="Harbor", sandboxes=("docker", "podman"),
    env="icplay.harbor.env:make_harbor_env", env_factory="icplay.harbor.env:HarborEnvFactory",
    prompts=PROMPTS, pane="icplay.tui.widgets.panes:BashPane", keys_scope="bash",
    score_rows=score_rows, gold_actions=gold_actions,
    description="a Harbor / Terminal-Bench task folder: a shell in its own container, scored by its tests/test.sh",
    fresh_state="a new container of the task's image",
    # the verifier runs once, at the submit: InterCode's per-turn scoring scores no turn
    intercode_turn=TurnRule(plan=lambda action: TurnPlan(score=False)),
    gold_check="icplay.harbor.spec:check_oracles",
    gold_check_finds="have an oracle (solution/solve.sh) that does not score 1.0",
)


def check_oracles(tasks: list[Task], sandbox: str, progress: Callable[[str], None]) -> list[tuple[Task, str]]:
    """Harbor's gold check: each task's oracle played and verified in a container of its own
    image on the image engine ``sandbox`` (docker, podman)."""
    from icplay.harbor.env import check_oracles as check   # start-up: the registry loads this spec for any listing

    return check(tasks, progress=progress, sandbox=sandbox)
