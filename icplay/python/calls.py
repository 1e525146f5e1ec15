"""A test split in two: the calls of the scored function (its inputs) and the rest (the verdict).

``assert add(1, 2) == 3`` becomes the call ``add(1, 2)``, run where the solver's code is
(a fresh interpreter holding it), and the check ``assert __icplay_call__(0) == 3``, run by
the judge (a fresh interpreter that never ran the solver's code) on the call's result
brought out as plain data. So the expected value never reaches the solver's code: all
it sees is the arguments it has to compute from.

A test splits when every mention of the function is a call whose arguments need nothing
bound inside the test (no call inside a lambda or a comprehension, no call nested in
another's arguments). Every test of InterCode's MBPP and of the bundled set splits; one
that does not is run whole in the scoring interpreter (``Split.whole``), and its verdict
is the solver's code's word: never strictly solved.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

CALL = "__icplay_call__"
_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.FunctionDef,
           ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Split:
    """One test: ``calls`` (the function's calls, in order), ``check`` (the test with each
    call replaced by ``__icplay_call__(k)``), or ``whole`` when it could not be split."""

    test: str
    calls: tuple[str, ...] = ()
    check: str = ""
    whole: bool = False


class _Replace(ast.NodeTransformer):
    def __init__(self, targets: list[ast.Call]):
        self.index = {id(node): k for k, node in enumerate(targets)}

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if id(node) in self.index:
            replaced = ast.Call(ast.Name(CALL, ast.Load()), [ast.Constant(self.index[id(node)])], [])
            return ast.copy_location(replaced, node)
        return self.generic_visit(node)


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def split_test(test: str, name: str | None) -> Split:
    """``test`` split around the calls of ``name`` (see the module's docstring)."""
    try:
        tree = ast.parse(test.replace("\r\n", "\n"), "<test>", "exec")
    except SyntaxError:
        return Split(test, whole=True)
    if not name:
        return Split(test, whole=True)
    calls = _splittable_calls(tree, name)
    if calls is None or CALL in test:
        return Split(test, whole=True)
    calls.sort(key=lambda n: (n.lineno, n.col_offset))
    sources = tuple(ast.unparse(c) for c in calls)
    check = ast.unparse(ast.fix_missing_locations(_Replace(calls).visit(tree)))
    return Split(test, sources, check)


def _splittable_calls(tree: ast.AST, name: str) -> list[ast.Call] | None:
    """The calls of ``name`` when every mention of it is one and each can be run apart; else None."""
    mentions = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name]
    calls = [n for n in ast.walk(tree)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name]
    if not calls or len(mentions) != len(calls):
        return None
    parents = _parents(tree)
    if any(_in_scope(call, parents) or _binds_inside(call, name) for call in calls):
        return None
    return calls


def _in_scope(call: ast.Call, parents: dict[int, ast.AST]) -> bool:
    """Is the call inside a lambda, a comprehension, a function or a class of the test?"""
    node: ast.AST | None = call
    while node is not None:
        node = parents.get(id(node))
        if isinstance(node, _SCOPES):
            return True
    return False


def _binds_inside(call: ast.Call, name: str) -> bool:
    """Do the call's arguments bind, await or yield, or call the function again?"""
    inner = [n for arg in [*call.args, *[k.value for k in call.keywords]] for n in ast.walk(arg)]
    return any(isinstance(n, (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom))
               or (isinstance(n, ast.Name) and n.id == name) for n in inner)
