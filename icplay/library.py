"""What the library front ends (gymnasium, the InterCode drop-in, the async API, the
OpenEnv server, TRL) share besides the loop: finding their tasks. Their episodes run on
``icplay.driver.external.CallerLoop`` (the driver with the caller as its policy), saved
after every turn when ``save_dir`` is given, so they read back in ``icplay report`` and
``icplay watch``. No gymnasium import here.
"""

from __future__ import annotations

from pathlib import Path

from icplay.driver.external import CallerLoop, Outcome
from icplay.tasks.model import Task
from icplay.tasks.registry import load_tasks


def load_task_list(tasks: str | Path | list[Task], env_name: str) -> list[Task]:
    """Tasks from a set name, a task file, or a list of tasks (one clear error otherwise)."""
    if isinstance(tasks, list):
        return tasks

    loaded = load_tasks(str(tasks), env_name)
    if not loaded:
        raise ValueError(f"no tasks in {tasks!s}")
    return loaded


def find_task(tasks: list[Task], task_id: str) -> Task:
    for task in tasks:
        if task.id == task_id or task.key == task_id:
            return task
    raise ValueError(f"no task {task_id!r} in this set ({len(tasks)} tasks, e.g. {tasks[0].id})")


__all__ = ["CallerLoop", "Outcome", "load_task_list", "find_task"]
