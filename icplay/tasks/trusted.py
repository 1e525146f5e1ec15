"""The task a saved file names, taken from this machine's task sets, never from the file.

A trajectory file may come from anyone (another annotator's machine, a shared run, a
download). Its ``task`` block says which task it played, but everything that decides what
runs (the image, the network, a CTF task's files and setup, the databases, the tests) is
read from the task set on this machine that holds that task, found by set name and id,
and only after the file's own copy of the task was compared with it: a file whose task
differs, or names a task this machine does not have, is refused with one sentence naming
the file and the field. So re-execute, fork and merge never build a sandbox from a file.

Set names and ids are also checked to be names (letters, digits, ``._:+-@``, not starting
with a dot), never paths: an id never reaches a folder name unchecked.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Mapping

from icplay.tasks.model import Task, TaskFileError
from icplay.tasks.registry import TaskSet, find_set, task_sets

NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:+@-]{0,199}")
# The fields that decide what runs and how it is scored: they must be the machine's.
COMPARED = ("env", "query", "gold", "db", "image", "network")
# ``extra`` keys that are where this machine keeps a task's files (its own paths differ
# from another machine's): not compared, and always the machine's.
LOCAL_EXTRA = ("assets", "databases")


def check_task_name(value: Any, where: str, field: str) -> str:
    """``value`` as a set name or task id, or ``TaskFileError`` naming ``where`` and ``field``:
    a name, never a path (no ``/``, no leading dot, printable ASCII from ``NAME``)."""
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not NAME.fullmatch(text):
        raise TaskFileError(where, f"{json.dumps(value)[:80]} is not a task set name or id (letters, digits and "
                                   "._:+-@, not starting with a dot)", field=field)
    return text


def _machine_sets(set_name: str, env: str | None, also: Iterable[str]) -> list[TaskSet]:
    """The sets on this machine named ``set_name``: the known ones, and those of ``also``
    (``--tasks`` values the user gave: a set name or a task file of their own)."""
    found = [s for s in task_sets() if s.name == set_name]
    for name_or_path in also:
        try:
            candidate = find_set(name_or_path, env)
        except TaskFileError:
            continue
        if candidate.name == set_name or name_or_path == set_name:
            found.append(candidate)
    return found


def _load(task_set: TaskSet, where: str) -> list[Task]:
    try:
        return task_set.load()
    except TaskFileError as exc:
        raise TaskFileError(where, f"its task set {task_set.name!r} cannot be read on this machine ({exc})",
                            field="task.set") from None


def _plain(value: Any) -> Any:
    """A value as JSON has it (tuples as lists), for comparing a file's task with the machine's."""
    return json.loads(json.dumps(value, default=str))


def _first_difference(claimed: Mapping[str, Any], task: Task) -> str | None:
    """The first field ``claimed`` states that is not ``task``'s (None when they agree). A
    field the file leaves out claims nothing (the machine's value runs either way)."""
    mine = task.to_dict()
    for name in COMPARED:
        if name in claimed and _plain(claimed[name]) != _plain(mine[name]):
            return name
    theirs = claimed.get("extra") or {}
    if not isinstance(theirs, Mapping):
        return "extra"
    own = mine["extra"] or {}
    for key in sorted(theirs):
        if key not in LOCAL_EXTRA and _plain(theirs[key]) != _plain(own.get(key)):
            return f"extra.{key}"
    return None


def machine_task(claimed: Any, where: str, also: Iterable[str] = ()) -> Task:
    """The task ``claimed`` (a saved file's ``task`` block) names, from this machine's task
    sets (and ``also``: task sets or files the user named), after checking that the file's
    copy of it is the same; ``TaskFileError`` naming ``where`` and the field otherwise."""
    if not isinstance(claimed, Mapping):
        raise TaskFileError(where, "the episode names no task", field="task")
    set_name = check_task_name(claimed.get("set"), where, "task.set")
    task_id = check_task_name(claimed.get("id"), where, "task.id")
    env = claimed.get("env") if isinstance(claimed.get("env"), str) else None
    sets = _machine_sets(set_name, env, also)
    if not sets:
        raise TaskFileError(where, f"task set {set_name!r} is not on this machine: its tasks are never rebuilt from "
                                   "a saved file (install the set, or name its task file with --tasks)",
                            field="task.set")
    for task_set in sets:
        task = next((t for t in _load(task_set, where) if t.id == task_id), None)
        if task is None:
            continue
        differs = _first_difference(claimed, task)
        if differs is not None:
            raise TaskFileError(where, f"not what task {set_name}/{task_id} on this machine has: a saved file never "
                                       "changes what a task runs (its image, network, files, setup or tests)",
                                field=f"task.{differs}")
        return task
    raise TaskFileError(where, f"task {task_id!r} is not in the set {set_name!r} on this machine", field="task.id")
