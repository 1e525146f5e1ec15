"""Python (InterCode-Python, MBPP): a persistent interpreter in the sandbox; ``submit NAME``."""

from __future__ import annotations

import re

from icplay.envs.base import SubmitResult, parse_submit
from icplay.languages.spec import SHELL_SANDBOXES, Image, LanguageSpec, Prompts
from icplay.languages.turns import TurnPlan, TurnRule
from icplay.tasks.model import Task
from icplay.python.reward import gold_function_name

# InterCode's experiments/eval_n_turn.py: the first function an action starting with "def"
# defines is submitted by name (``re.match(r'def (\w+)\(', action)``), and when a test of
# the solver's raised, the model is told this instead of the action's output.
INTERCODE_DEF = re.compile(r"def (\w+)\(")
INTERCODE_RETRY = "Test case did not pass. Please try again."



def score_rows(b: dict) -> list[tuple[str, str]]:
    rows = [("tests matching the gold", f"{b.get('passed', 0)} of {b.get('total', 0)}"),
            ("your function", f"{b.get('function') or '?'} (bound to the gold's name {b.get('gold_function') or '?'})")]
    for i, test in enumerate(b.get("tests") or [], start=1):
        mark = "same" if test.get("match") else "different"
        rows.append((f"test {i}: {mark}", _test_text(test)))
    return rows


def _last_line(side: dict) -> str:
    """The last line a side's test printed (an assertion's message, a traceback's last line)."""
    lines = (side.get("output") or "").strip().splitlines()
    return lines[-1] if lines else "passed silently"


def _test_text(test: dict) -> str:
    """One test as the breakdown shows it: its last line of output for you and for the gold,
    and, when they differ, what each side's calls returned."""
    yours, gold = test.get("yours") or {}, test.get("gold") or {}
    detail = "cut: it hung or flooded the output" if yours.get("status") == "cut" else _last_line(yours)
    gold_detail = _last_line(gold)
    text = f"{test.get('test', '')}\n  yours: {detail}\n  gold:  {gold_detail}"
    calls = test.get("calls") or {}
    if calls and not test.get("match"):    # what the calls returned, as brought out of each sandbox
        text += (f"\n  your call returned: {'; '.join(calls.get('yours') or [])}"
                 f"\n  the gold's returned: {'; '.join(calls.get('gold') or [])}")
    return text


def gold_actions(task: Task) -> list[str]:
    name = gold_function_name(task.gold, [str(t) for t in task.extra.get("tests") or []])
    return [task.gold.replace("\r\n", "\n"), f"submit {name}" if name else "submit"]


def task_lines(task: Task) -> list[str]:
    tests = task.extra.get("tests") or []
    return ["Your function must pass tests like:\n" + "\n".join(str(t) for t in tests[:1])] if tests else []


def intercode_plan(action: str) -> TurnPlan:
    """InterCode's Python turn: ``def ...`` runs and its first function is submitted by name;
    ``submit NAME`` is scored; anything else runs and scores 0 (InterCode's step gave 0).
    An action starting with "def" that its pattern does not match (``default = 1``), which
    stopped InterCode's loop with an error, is treated as any other action."""
    is_submit, arg = parse_submit(action)
    if is_submit:
        return TurnPlan(run=False, submit_arg=arg)
    match = INTERCODE_DEF.match(action) if action.startswith("def") else None
    if match:
        return TurnPlan(submit_arg=match.group(1))
    return TurnPlan(score=False)


def intercode_feedback(result: SubmitResult) -> str | None:
    """InterCode's retry message: the reward is below 1 and one of the solver's tests raised
    (or was cut: InterCode's would have hung)."""
    tests = result.breakdown.get("tests") or []
    if result.reward != 1 and any((row.get("yours") or {}).get("status") not in (None, "ok") for row in tests):
        return INTERCODE_RETRY
    return None


PROMPTS = Prompts(
    name="Python", setting="Python 3 interpreter (definitions carry over between inputs)",
    unit="snippet", units="snippets", fence="python",
    fence_aliases=("python", "py", "python3", "pycon", "ipython"),
    notes=(
        "- Each snippet runs in the same interpreter, like Python's REPL: a bare expression's value is shown,\n"
        "  a whole `def` (or class) is one snippet, errors show the traceback's last line. No input on stdin.\n"
        "- Define the requested function; test it on small examples before submitting.\n"
        "- To submit, reply `submit <function_name>`."
    ),
    bare_code="python", submit_arg=True, task_lines=task_lines, tool_arg="code",
    submit_arg_name="function_name", submit_arg_help="the name of the function to score (the one the task asks for)",
)

SPEC = LanguageSpec(
    name="python", title="Python", sandboxes=SHELL_SANDBOXES,
    env="icplay.envs.python:make_python_env", env_factory="icplay.envs.python:SharedPythonEnvs",
    prompts=PROMPTS,
    pane="icplay.tui.widgets.python_pane:PythonPane", keys_scope="python",
    score_rows=score_rows, gold_actions=gold_actions, uses_image=True,
    images=(Image("python", "icplay-python:latest", "docker/python.Dockerfile",
                  "Python tasks: Debian's python3; icplay's interpreter server is copied in per episode"),),
    submit_scores="the function the task asks for, as the session defines it now",
    description="a persistent Python interpreter; submit NAME scores your function with the task's tests",
    fresh_state="a fresh interpreter", input_mode="block", prompt=">>> ",
    input_help="Python: a line ending with ':' opens a block; an empty line runs it. `submit NAME` scores NAME.",
    intercode_turn=TurnRule(intercode_plan, intercode_feedback), rescore="icplay.rescore.python:plan",
)
