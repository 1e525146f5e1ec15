"""A study: its tasks, annotators, who plays what in which order, and the rules; one TOML file.

The file is ``<home>/studies/<name>/study.toml`` and is meant to be read and edited by the
study lead (reassign a task, change the time limit). Whatever is in it is checked when it is
read: a bad edit is one sentence naming the file and the field (``StudyFileError``), never a
traceback. The annotators' trajectories live beside it, ``<study dir>/sessions/<annotator>/``
(an ``icplay.session`` folder each, earlier attempts in ``sessions/.attempts/<annotator>/``),
and trajectories brought in from other machines in ``<study dir>/merged/<annotator>/``.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from icplay.episode import Trajectory
from icplay.paths import home_dir
from icplay.store import atomic_write_text, readable

STUDY_FILE = "study.toml"
RETRIES = ("off", "counted")          # off: a submitted task is not tried again; counted: every try kept, numbered
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# the study's agent (``[agent]``, watch studies): the keys of the watch command's agent choice
# (icplay.frontend.config.AgentChoice), each text; checked as an agent when the study is watched
AGENT_FIELDS = ("policy", "model", "base_url", "strategy", "protocol", "mode", "actions")
_NAME_RULE = "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"


class StudyFileError(ValueError):
    """A study file (or a study's name or option) that cannot be used; one sentence naming file and field."""


@dataclass(frozen=True)
class StudyRules:
    """What an annotator may see and do in this study (``icplay.study.rules`` applies them)."""

    gold_reveal: bool = False          # may the annotator see the gold after a submit
    retries: str = "off"               # "off" | "counted" (allowed; every attempt kept and counted)
    time_limit_s: int | None = None    # per task, worked time
    strict: bool = False               # schema hidden (SQL) etc.
    per_turn_scoring: bool = True      # watch studies: the reward of each agent turn shown (protocol intercode)
    hide_model: bool = True            # watch studies: model identity hidden from the annotator
    query_history: bool = True         # SQL: the queries run before recallable (Ctrl+Up, Ctrl+R) in the editor


@dataclass(frozen=True)
class Study:
    name: str
    tasks: tuple[str, ...]             # task refs "SET/ID" (Task.key)
    annotators: tuple[str, ...]
    per_task: int
    seed: int
    assignments: dict[str, tuple[str, ...]]   # annotator -> task refs, in that annotator's order
    rules: StudyRules = field(default_factory=StudyRules)
    created: str = ""                  # ISO time
    path: Path | None = field(default=None, compare=False)   # the file it was read from, if any
    agent: dict[str, str] = field(default_factory=dict)     # watch studies: the agent every annotator supervises
    # tasks from a lead's own files: set name -> {"path": the file, "env": its environment}
    task_files: dict[str, dict[str, str]] = field(default_factory=dict)

    def assigned_to(self, annotator: str) -> tuple[str, ...]:
        return self.assignments.get(annotator, ())


def check_name(name: str, what: str = "study name", where: str = "") -> str:
    """``name`` if it can name a folder (a study, an annotator), else ``StudyFileError``."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        prefix = f"{where}: " if where else ""
        raise StudyFileError(f"{prefix}{what} {name!r} is not allowed: use {_NAME_RULE}")
    return name


def study_dir(name: str, home: Path | None = None) -> Path:
    """``<home>/studies/<name>/`` (home: $ICPLAY_HOME, else ~/.icplay)."""
    return Path(home or home_dir()) / "studies" / check_name(name)


def study_file(name_or_path: str, home: Path | None = None) -> Path:
    """The study file a name (``<home>/studies/<name>/study.toml``), a folder or a file path means."""
    given = Path(name_or_path)
    if given.suffix == ".toml" or given.is_file():
        return given
    if given.is_dir() and (given / STUDY_FILE).is_file():
        return given / STUDY_FILE
    return study_dir(name_or_path, home) / STUDY_FILE


def sessions_dir(study: Study, home: Path | None = None) -> Path:
    """Where the annotators' session folders of ``study`` are."""
    return _home_of(study, home) / "sessions"


def merged_dir(study: Study, home: Path | None = None) -> Path:
    """Where trajectories merged in from other machines are kept, one folder per annotator."""
    return _home_of(study, home) / "merged"


def _home_of(study: Study, home: Path | None) -> Path:
    return study.path.parent if study.path is not None else study_dir(study.name, home)


# -- reading ---------------------------------------------------------------------------------

def load_study(name_or_path: str, home: Path | None = None) -> Study:
    """The study a name or path means; ``StudyFileError`` (file and field, one sentence) on bad input."""
    path = study_file(name_or_path, home)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StudyFileError(f"{path}: no such study file (make one with: icplay study new NAME ...)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StudyFileError(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise StudyFileError(f"{path}: not valid TOML: {exc}") from None
    return study_from_dict(data, path)


def _field(data: dict[str, Any], name: str, types: tuple[type, ...], path: Path, what: str,
           default: Any = ..., where: str = "") -> Any:
    key = f"{where}.{name}" if where else name
    if name not in data:
        if default is ...:
            raise StudyFileError(f"{path}: field '{key}' is missing")
        return default
    value = data[name]
    if type(value) not in types:
        raise StudyFileError(f"{path}: field '{key}' must be {what}, not {value!r}")
    return value


def _names(data: dict[str, Any], name: str, path: Path, what: str) -> tuple[str, ...]:
    values = _field(data, name, (list,), path, f"a list of {what}")
    seen: set[str] = set()
    for i, value in enumerate(values):
        if type(value) is not str:
            raise StudyFileError(f"{path}: field '{name}[{i}]' must be text, not {value!r}")
        if value in seen:
            raise StudyFileError(f"{path}: field '{name}' names {value!r} twice")
        seen.add(value)
    return tuple(values)


def rules_from_dict(data: dict[str, Any], path: Path) -> StudyRules:
    known = set(StudyRules.__dataclass_fields__)
    for key in data:
        if key not in known:
            raise StudyFileError(f"{path}: field 'rules.{key}' is unknown (one of: {', '.join(sorted(known))})")
    def flag(name: str, default: bool) -> bool:
        return bool(_field(data, name, (bool,), path, "true or false", default, "rules"))

    retries = _field(data, "retries", (str,), path, "text", "off", "rules")
    if retries not in RETRIES:
        raise StudyFileError(f"{path}: field 'rules.retries' must be one of {', '.join(RETRIES)}, not {retries!r}")
    limit = _field(data, "time_limit_s", (int,), path, "a whole number of seconds", None, "rules")
    if limit is not None and limit <= 0:
        raise StudyFileError(f"{path}: field 'rules.time_limit_s' must be a positive number of seconds "
                             f"(leave it out for no limit), not {limit}")
    return StudyRules(gold_reveal=flag("gold_reveal", False), retries=retries, time_limit_s=limit,
                      strict=flag("strict", False), per_turn_scoring=flag("per_turn_scoring", True),
                      hide_model=flag("hide_model", True), query_history=flag("query_history", True))


def study_from_dict(data: dict[str, Any], path: Path) -> Study:
    """A study from its decoded file, every field checked (``StudyFileError`` names the first bad one)."""
    name = check_name(_field(data, "name", (str,), path, "text"), where=f"{path}: field 'name'")
    annotators = _names(data, "annotators", path, "annotator names")
    for who in annotators:
        check_name(who, "annotator name", f"{path}: field 'annotators'")
    if not annotators:
        raise StudyFileError(f"{path}: field 'annotators' is empty")
    tasks = _names(data, "tasks", path, "task refs (SET/ID)")
    for i, ref in enumerate(tasks):
        if "/" not in ref:
            raise StudyFileError(f"{path}: field 'tasks[{i}]' must be a task ref SET/ID, not {ref!r}")
    per_task = _field(data, "per_task", (int,), path, "a whole number")
    if not 1 <= per_task <= len(annotators):
        raise StudyFileError(f"{path}: field 'per_task' is {per_task}: each task needs 1 to {len(annotators)} "
                             f"annotators (there are {len(annotators)})")
    seed = _field(data, "seed", (int,), path, "a whole number", 0)
    created = _field(data, "created", (str,), path, "text", "")
    rules = rules_from_dict(_field(data, "rules", (dict,), path, "a table", {}), path)
    assignments = _assignments(_field(data, "assignments", (dict,), path, "a table"), annotators, tasks, per_task, path)
    for key in data:
        if key not in _TOP_FIELDS:
            raise StudyFileError(f"{path}: field '{key}' is unknown (one of: {', '.join(_TOP_FIELDS)})")
    agent = agent_from_dict(_field(data, "agent", (dict,), path, "a table", {}), path)
    task_files = task_files_from_dict(_field(data, "task_files", (dict,), path, "a table", {}), path)
    return Study(name, tasks, annotators, per_task, seed, assignments, rules, created, path, agent, task_files)


_TOP_FIELDS = ("name", "created", "seed", "per_task", "annotators", "tasks", "rules", "assignments", "agent",
               "task_files")
TASK_FILE_FIELDS = ("path", "env")


def task_files_from_dict(data: dict[str, Any], path: Path) -> dict[str, dict[str, str]]:
    """The ``[task_files]`` table: each set name a table of a path and an environment, both text."""
    out: dict[str, dict[str, str]] = {}
    for set_name, entry in data.items():
        where = f"{path}: field 'task_files.{set_name}"
        if not isinstance(entry, dict):
            raise StudyFileError(f"{where}' must be a table {{ path = \"FILE\", env = \"ENV\" }}")
        for key in TASK_FILE_FIELDS:
            if type(entry.get(key)) is not str or not entry[key]:
                raise StudyFileError(f"{where}.{key}' must be non-empty text, not {entry.get(key)!r}")
        unknown = set(entry) - set(TASK_FILE_FIELDS)
        if unknown:
            raise StudyFileError(f"{where}.{sorted(unknown)[0]}' is unknown (one of: {', '.join(TASK_FILE_FIELDS)})")
        out[str(set_name)] = {key: entry[key] for key in TASK_FILE_FIELDS}
    return out


def agent_from_dict(data: dict[str, Any], path: Path) -> dict[str, str]:
    """The ``[agent]`` table: known keys, text values (what they mean is checked when watched)."""
    for key, value in data.items():
        if key not in AGENT_FIELDS:
            raise StudyFileError(f"{path}: field 'agent.{key}' is unknown (one of: {', '.join(AGENT_FIELDS)})")
        if type(value) is not str or not value:
            raise StudyFileError(f"{path}: field 'agent.{key}' must be non-empty text, not {value!r}")
    return dict(data)


def _assignments(data: dict[str, Any], annotators: tuple[str, ...], tasks: tuple[str, ...], per_task: int,
                 path: Path) -> dict[str, tuple[str, ...]]:
    """Each annotator's tasks, checked: only the study's annotators and tasks, each task K times."""
    for who in data:
        if who not in annotators:
            raise StudyFileError(f"{path}: field 'assignments.{who}' is not one of the study's annotators "
                                 f"({', '.join(annotators)})")
    known, counts = set(tasks), dict.fromkeys(tasks, 0)
    out: dict[str, tuple[str, ...]] = {}
    for who in annotators:
        refs = _names(data, who, path, "task refs") if who in data else ()
        for ref in refs:
            if ref not in known:
                raise StudyFileError(f"{path}: field 'assignments.{who}' names {ref!r}, which is not in 'tasks'")
            counts[ref] += 1
        out[who] = refs
    for ref, n in counts.items():
        if n != per_task:
            raise StudyFileError(f"{path}: field 'assignments': task {ref!r} is assigned to {n} annotator(s), "
                                 f"but per_task is {per_task}")
    return out


# -- writing ---------------------------------------------------------------------------------

def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "[" + ", ".join(_toml_value(v) for v in value) + "]"


def study_toml(study: Study) -> str:
    """The study file's text: commented, one field a line, so the lead can edit it by hand."""
    rules = study.rules
    lines = [
        f"# icplay study {study.name!r}: edit by hand if you must; icplay checks it each time it reads it.",
        "# Each task must stay assigned to per_task annotators; docs/studies.md says what each field does.",
        f"name = {_toml_value(study.name)}",
        f"created = {_toml_value(study.created)}",
        f"seed = {study.seed}",
        f"per_task = {study.per_task}",
        f"annotators = {_toml_value(study.annotators)}",
        f"tasks = {_toml_value(study.tasks)}",
        "",
        "[rules]",
        f"gold_reveal = {_toml_value(rules.gold_reveal)}        # may an annotator see the gold after a submit",
        f"retries = {_toml_value(rules.retries)}              # off | counted (every attempt kept and numbered)",
        (f"time_limit_s = {rules.time_limit_s}        # per task, worked time" if rules.time_limit_s is not None
         else "# time_limit_s = 900      # per task, worked time (none when left out)"),
        f"strict = {_toml_value(rules.strict)}             # hide the schema (SQL)",
        f"per_turn_scoring = {_toml_value(rules.per_turn_scoring)}    # watch studies: show each agent turn's reward (protocol intercode)",
        f"hide_model = {_toml_value(rules.hide_model)}           # watch studies: do not show which model plays",
        f"query_history = {_toml_value(rules.query_history)}        # SQL: the queries run before recallable in the editor",
        "",
        "[assignments]   # annotator -> tasks, in the order that annotator plays them",
    ]
    lines += [f"{_toml_value(who) if not _NAME.fullmatch(who) else who} = {_toml_value(study.assigned_to(who))}"
              for who in study.annotators]
    if study.task_files:
        lines += ["", "[task_files]   # the sets that are a lead's own files: the file and its environment"]
        lines += [f"{_toml_value(name) if not _NAME.fullmatch(name) else name} = {{ path = "
                  f"{_toml_value(entry['path'])}, env = {_toml_value(entry['env'])} }}"
                  for name, entry in study.task_files.items()]
    if study.agent:
        lines += ["", "[agent]   # watch studies: the agent every annotator supervises (icplay watch --study)"]
        lines += [f"{key} = {_toml_value(study.agent[key])}" for key in AGENT_FIELDS if key in study.agent]
    return "\n".join(lines) + "\n"


def save_study(study: Study, home: Path | None = None) -> Path:
    """Write ``<study_dir>/study.toml`` (atomically); returns its path."""
    path = study.path or study_dir(study.name, home) / STUDY_FILE
    atomic_write_text(path, study_toml(study))
    return path


# -- its trajectories ------------------------------------------------------------------------

def annotator_folders(study: Study, annotator: str, home: Path | None = None) -> list[Path]:
    """The folders holding ``annotator``'s trajectories: the session, its kept attempts, the merged."""
    sessions = sessions_dir(study, home)
    return [sessions / annotator, sessions / ".attempts" / annotator, merged_dir(study, home) / annotator]


def study_trajectories(study: Study, home: Path | None = None, skipped: list | None = None,
                       annotators: tuple[str, ...] | None = None) -> Iterator[Trajectory]:
    """Every attempt of every annotator in this study (current files, kept attempts, merged ones).

    A file that cannot be read is appended to ``skipped`` as ``(path, error)`` and never stops
    the rest. ``annotators`` narrows to some of them."""
    for who in annotators if annotators is not None else study.annotators:
        for folder in annotator_folders(study, who, home):
            if not folder.is_dir():
                continue
            paths = sorted(p for p in folder.rglob("*.json") if not _hidden(p, folder))
            kept = folder.parent.name == ".attempts"
            yield from readable(paths, skipped, kept=kept)


def _hidden(path: Path, folder: Path) -> bool:
    """A file under a dot folder (``.locks``) or a temporary ``.name.tmp``: not a trajectory."""
    return any(part.startswith(".") for part in path.relative_to(folder).parts)
