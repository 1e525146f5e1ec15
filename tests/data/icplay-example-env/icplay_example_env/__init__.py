"""calc: an icplay environment in one file. Actions are arithmetic (``x = 6 * 7``, ``x + 1``);
the reward is 1 when the value of the last action equals the value of the task's gold."""

from __future__ import annotations

import ast
import operator
from pathlib import Path

from icplay.envs.base import StepResult, SubmitResult
from icplay.languages.spec import LanguageSpec, Prompts

TASKS = Path(__file__).with_name("tasks.json")
OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
       ast.Pow: operator.pow, ast.Mod: operator.mod, ast.FloorDiv: operator.floordiv, ast.USub: operator.neg}


def evaluate(node: ast.AST, names: dict[str, float]) -> float:
    """Numbers, names, + - * / ** % // and parentheses: nothing else runs."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise NameError(f"{node.id} is not defined")
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in OPS:
        return OPS[type(node.op)](evaluate(node.left, names), evaluate(node.right, names))
    if isinstance(node, ast.UnaryOp) and type(node.op) in OPS:
        return OPS[type(node.op)](evaluate(node.operand, names))
    raise SyntaxError("only arithmetic is allowed")


def run(line: str, names: dict[str, float]) -> float:
    """One action: ``name = expression`` (kept for later actions) or an expression."""
    tree = ast.parse(line.strip(), mode="exec")
    if len(tree.body) != 1:
        raise SyntaxError("one expression or assignment per action")
    stmt = tree.body[0]
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        names[stmt.targets[0].id] = value = evaluate(stmt.value, names)
        return value
    if isinstance(stmt, ast.Expr):
        return evaluate(stmt.value, names)
    raise SyntaxError("one expression or assignment per action")


class CalcEnv:
    name, capabilities = "calc", frozenset()

    def __init__(self, sandbox: str = "memory", **options):
        self.sandbox_kind, self.task, self.names, self.last = sandbox, None, {}, None

    def reset(self, task) -> str:
        self.task, self.names, self.last = task, {}, None
        return task.query

    def step(self, action: str, on_output=None) -> StepResult:
        try:
            self.last = run(action, self.names)
            return StepResult(f"{self.last:g}\n", 0)
        except Exception as exc:   # the error is the observation, as in a REPL
            return StepResult(f"{type(exc).__name__}: {exc}\n", 1)

    def submit(self, arg: str | None = None) -> SubmitResult:
        expected = run(self.task.gold, {})
        reward = 1.0 if self.last is not None and abs(self.last - expected) < 1e-9 else 0.0
        return SubmitResult(reward, {"value": self.last, "expected": expected}, f"{expected:g}")

    def interrupt(self) -> None:
        pass

    def close(self) -> None:
        pass


SPEC = LanguageSpec(
    name="calc", title="Calc", sandboxes=("memory",), env=CalcEnv,
    prompts=Prompts(name="calc", setting="calculator (variables carry over between lines)", unit="line",
                    units="lines", fence="calc", notes="- One expression or `name = expression` per reply."),
    description="arithmetic in a calculator: the last value is the answer", prompt="calc> ",
)
