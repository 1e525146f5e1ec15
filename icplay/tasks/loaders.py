"""Read task files: icplay's own (JSON list or JSONL) and InterCode's data files as they are.

Every problem is raised as TaskFileError naming the file, the record and the field, so a
user fixing a hand-written task file never reads a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from icplay.tasks.model import Task, TaskFileError

KNOWN_ENVS = ("bash", "sql", "python", "ctf")
HARDNESS = ("easy", "medium", "hard", "extra")

# Fields beyond the common ones that are kept in Task.extra when present.
TASK_FIELDS = ("id", "task_id", "query", "gold", "env", "hardness", "db", "tags", "image", "network")
EXTRA_FIELDS = ("tests", "test_setup_code", "task_id", "setup", "db_tables", "source", "assets")


def read_records(path: Path) -> list[Any]:
    """The raw records of a JSON list or JSONL file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskFileError(path, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFileError(path, f"cannot read: {exc}") from None
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            listed: list[Any] = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TaskFileError(path, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
        return listed
    if stripped.startswith("{") and path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            pass  # may still be JSONL with a .json suffix
        else:
            if isinstance(data, dict) and isinstance(data.get("tasks"), list):
                tasks: list[Any] = data["tasks"]
                return tasks
            raise TaskFileError(path, "expected a list of task objects (or JSONL, one object per line)")
    records = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise TaskFileError(path, f"invalid JSON on line {lineno}: {exc.msg}", record=len(records)) from None
    return records


def _field(path: Path, index: int, record: dict[str, Any], name: str, kind: type | tuple[type, ...],
           required: bool = False) -> Any:
    if name not in record or record[name] is None:
        if required:
            raise TaskFileError(path, "missing required field", record=index, field=name)
        return None
    value = record[name]
    if not isinstance(value, kind):
        want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise TaskFileError(path, f"expected {want}, got {type(value).__name__}", record=index, field=name)
    return value


def task_from_record(path: Path, index: int, record: Any, env: str, set_name: str) -> Task:
    """Validate one record and build its Task."""
    if not isinstance(record, dict):
        raise TaskFileError(path, f"expected an object, got {type(record).__name__}", record=index)
    query = _field(path, index, record, "query", str, required=True)
    if not query.strip():
        raise TaskFileError(path, "must not be empty", record=index, field="query")
    gold = _field(path, index, record, "gold", str, required=True)
    record_env = _record_env(path, index, record, env)
    plugin = record_env not in KNOWN_ENVS
    task_id = record.get("id", record.get("task_id", index))
    if not isinstance(task_id, (str, int)) or isinstance(task_id, bool):
        raise TaskFileError(path, "expected a string or integer", record=index, field="id")
    hardness = _field(path, index, record, "hardness", str)
    if hardness is not None and hardness not in HARDNESS:
        raise TaskFileError(path, f"unknown hardness {hardness!r} (one of {', '.join(HARDNESS)})",
                            record=index, field="hardness")
    tags = _tags(path, index, record)
    if record_env == "python":
        _field(path, index, record, "tests", list, required=True)
    return Task(
        id=str(task_id), set=set_name, env=record_env, query=query, gold=gold,
        hardness=hardness, db=_field(path, index, record, "db", str), tags=tuple(tags),
        image=_field(path, index, record, "image", str),
        network=bool(_field(path, index, record, "network", bool) or False),
        extra=_extra(record, plugin), source=str(path),
    )


def _record_env(path: Path, index: int, record: dict[str, Any], env: str) -> str:
    """The record's language: its own ``env`` or the file's; a plug-in's (entry point group
    icplay.envs) is any lower-case name, whether it is installed is checked where an env is made."""
    record_env: str = _field(path, index, record, "env", str) or env
    if record_env not in KNOWN_ENVS and not (record_env.isidentifier() and record_env.islower()):
        raise TaskFileError(path, f"unknown environment {record_env!r} (one of {', '.join(KNOWN_ENVS)}, or an "
                            "installed plug-in's name)", record=index, field="env")
    return record_env


def _tags(path: Path, index: int, record: dict[str, Any]) -> list[str]:
    tags: list[str] = _field(path, index, record, "tags", list) or []
    if not all(isinstance(t, str) for t in tags):
        raise TaskFileError(path, "expected a list of strings", record=index, field="tags")
    return tags


def _extra(record: dict[str, Any], plugin: bool) -> dict[str, Any]:
    """The fields kept in Task.extra: the known extra ones, and all of a plug-in's own."""
    extra = {k: record[k] for k in EXTRA_FIELDS if k in record}
    if plugin:
        extra.update({k: v for k, v in record.items() if k not in TASK_FIELDS and k not in extra})
    return extra


def load_task_file(path: str | Path, env: str, set_name: str | None = None) -> list[Task]:
    """All tasks of one file; ``env`` is the default for records that do not name one."""
    path = Path(path)
    records = read_records(path)
    if not isinstance(records, list):
        raise TaskFileError(path, "expected a list of task objects")
    if not records:
        raise TaskFileError(path, "holds no tasks")
    name = set_name or path.stem
    tasks = [task_from_record(path, i, r, env, name) for i, r in enumerate(records)]
    seen: dict[str, int] = {}
    for i, task in enumerate(tasks):
        if task.id in seen:
            raise TaskFileError(path, f"duplicate id {task.id!r} (also record {seen[task.id]})", record=i, field="id")
        seen[task.id] = i
    return tasks
