"""icplay's tasks written out as Harbor task folders (``icplay export harbor``).

One folder per task, in Harbor's layout: ``instruction.md`` (the query and how to answer
without icplay), ``task.toml``, ``environment/Dockerfile`` (FROM icplay's local task image,
plus the task's own files), ``solution/solve.sh`` (the gold, as the answer convention wants
it) and ``tests/`` (``test.sh``, the expected values, and a verifier that computes icplay's
reward). Expected values (gold output, gold rows, the gold function, the flag) are written
to ``tests/`` and ``solution/`` only: Harbor copies ``tests/`` in after the agent finished,
and ``solution/`` only for its oracle agent. Nothing expected goes into ``environment/``.

Each language is an :class:`Exporter` in :data:`EXPORTERS` (a registry, not a switch).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from icplay.tasks.model import Task
from icplay.tasks.ctf import HIDDEN_FOLDERS, skip_reason

Progress = Callable[[str], None]

# The modules every verifier imports, copied into tests/lib (icplay's own packages' __init__
# files are replaced by empty ones: the verifier needs the pure modules, not the package).
COMMON_MODULES = ("icplay.harbor.verifiers.common",)
ANSWERS = "/app"   # where the agent writes its answer files (in every language)

TASK_TOML = """\
version = "1.0"
# The agent's answer files; Harbor brings them into the separate verifier's container.
artifacts = ["{answers}"]

[metadata]
author_name = "icplay"
difficulty = {difficulty}
category = {category}
tags = {tags}
icplay_task = {key}

[verifier]
timeout_sec = {verifier_timeout}
# A fresh container of the same environment: the agent never ran anything in it.
environment_mode = "separate"
{collect}
[agent]
timeout_sec = {agent_timeout}

[environment]
build_timeout_sec = 900.0
cpus = 1
memory_mb = 2048
storage_mb = 10240
"""

TEST_SH = """\
#!/bin/bash
# icplay's verifier for {key} (written by `icplay export harbor`): icplay's reward for this
# task into /logs/verifier/reward.txt, its breakdown into /logs/verifier/details.json.
# Harbor runs it in a fresh container (environment_mode = "separate") or, in shared mode,
# in the container the agent had: so every tool is named by absolute path and runs
# under env -i (no PATH, PYTHON*, LD_PRELOAD of the agent's); python3 runs isolated (-I -S:
# no site, user site or current folder), on the modules that came in with this folder.
/usr/bin/mkdir -p /logs/verifier
/usr/bin/rm -rf -- /logs/verifier/reward.txt /logs/verifier/reward.json /logs/verifier/details.json
exec /usr/bin/env -i PATH=/usr/bin:/bin LC_ALL=C.UTF-8 HOME=/nonexistent /usr/bin/python3 -I -S -c \\
    'import sys; sys.path.insert(0, "/tests/lib"); from {module} import main; sys.exit(main())'
"""


class ExportError(ValueError):
    """A task that cannot be written as a Harbor task (the message names it and why)."""


@dataclass
class Files:
    """A task folder's files before they are written: relative path -> text or bytes (or a
    folder to copy), with the paths that must be executable."""

    items: dict[str, str | bytes | Path] = field(default_factory=dict)
    executable: set[str] = field(default_factory=set)

    def add(self, path: str, content: str | bytes | Path, executable: bool = False) -> None:
        self.items[path] = content
        if executable:
            self.executable.add(path)

    def write(self, folder: Path) -> None:
        for rel, content in self.items.items():
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                if content.is_dir():
                    shutil.copytree(content, target, symlinks=True, ignore=_hidden_folders)
                else:
                    shutil.copy2(content, target)
            elif isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content, encoding="utf-8")
            if rel in self.executable:
                target.chmod(0o755)


def _hidden_folders(_folder: str, names: list[str]) -> list[str]:
    return [name for name in names if name in HIDDEN_FOLDERS]


class Exporter(Protocol):
    """One language's mapping onto Harbor: its image, answer convention and verifier."""

    language: str
    verifier: str                   # the module tests/test.sh runs (its main())
    modules: tuple[str, ...]        # what the verifier imports of icplay, copied to tests/lib
    agent_timeout: float
    collect: tuple[str, ...]        # commands run in the agent's container after it finished

    def prepare(self, tasks: list[Task], progress: Progress | None, sandbox: str) -> None:
        """Work done once for all tasks (gold runs, database files); ``sandbox``: the image
        engine a gold run runs on (Bash's)."""

    def environment(self, task: Task, files: Files) -> None:
        """environment/Dockerfile and its build context."""

    def instruction(self, task: Task) -> str:
        """The query and how to hand in the answer."""

    def solution(self, task: Task, files: Files) -> None:
        """solution/solve.sh: the gold, written as the answer convention asks."""

    def expected(self, task: Task, files: Files) -> dict[str, Any]:
        """tests/expected.json's content (and other files tests/ needs)."""

    def close(self) -> None:
        """Release what ``prepare`` started."""


def heredoc(path: str, text: str) -> str:
    """A shell line writing ``text`` to ``path`` verbatim (a quoted heredoc)."""
    marker = "ICPLAY_EOF"
    while marker in text:
        marker += "_"
    body = text if text.endswith("\n") else text + "\n"
    return f"cat > {path} <<'{marker}'\n{body}{marker}\n"


def slug(task: Task) -> str:
    """The task's folder name: ``<set>-<id>``, lower case, [a-z0-9._-] only."""
    name = re.sub(r"[^a-z0-9._-]+", "-", f"{task.set}-{task.id}".lower()).strip("-.")
    return name or "task"


def task_toml(task: Task, exporter: Exporter) -> str:
    tags = [task.env, *task.tags]
    return TASK_TOML.format(
        difficulty=json.dumps(task.hardness or "medium"), category=json.dumps(task.env),
        tags=json.dumps(list(dict.fromkeys(tags))), key=json.dumps(task.key),
        verifier_timeout=600.0, agent_timeout=exporter.agent_timeout, answers=ANSWERS,
        collect="".join(f"\n[[verifier.collect]]\ncommand = {json.dumps(command)}\n" for command in exporter.collect))


def vendored(modules: tuple[str, ...]) -> dict[str, Path | str]:
    """tests/lib/...: each module's source file, with empty package ``__init__`` files."""
    files: dict[str, Path | str] = {}
    for name in (*COMMON_MODULES, *modules):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ExportError(f"the verifier's module {name} is not installed")
        parts = name.split(".")
        files["tests/lib/" + "/".join(parts) + ".py"] = Path(spec.origin)
        for depth in range(1, len(parts)):
            files.setdefault("tests/lib/" + "/".join(parts[:depth]) + "/__init__.py", "")
    return files


def task_files(task: Task, exporter: Exporter) -> Files:
    """Every file of one task's folder."""
    files = Files()
    files.add("instruction.md", exporter.instruction(task))
    files.add("task.toml", task_toml(task, exporter))
    exporter.environment(task, files)
    exporter.solution(task, files)
    files.add("tests/expected.json", json.dumps(exporter.expected(task, files), indent=1, ensure_ascii=False) + "\n")
    files.add("tests/test.sh", TEST_SH.format(key=task.key, module=exporter.verifier), executable=True)
    for rel, content in vendored((exporter.verifier, *exporter.modules)).items():
        files.add(rel, content)
    leaked = [rel for rel in files.items if rel.startswith("environment/") and rel.endswith("expected.json")]
    assert not leaked, f"expected values in environment/: {leaked}"
    return files


@dataclass
class Exported:
    written: list[tuple[Task, Path]] = field(default_factory=list)
    skipped: list[tuple[Task, str]] = field(default_factory=list)


def export_tasks(tasks: list[Task], out: Path, progress: Progress | None = None, sandbox: str = "docker") -> Exported:
    """Write one Harbor task folder per task under ``out`` (replacing a folder of the same name);
    gold runs (Bash's) on the image engine ``sandbox``.

    Tasks of a language with no exporter, and CTF tasks that need a server or lack their
    files, are skipped with the reason."""
    from icplay.harbor.languages import EXPORTERS   # an import cycle: the exporters build on this module's Files

    result = Exported()
    by_language: dict[str, list[Task]] = {}
    for task in tasks:
        reason = _skip_reason(task, EXPORTERS)
        if reason:
            result.skipped.append((task, reason))
        else:
            by_language.setdefault(task.env, []).append(task)
    out.mkdir(parents=True, exist_ok=True)
    for language, chosen in by_language.items():
        exporter = EXPORTERS[language]()
        try:
            exporter.prepare(chosen, progress, sandbox)
            for task in chosen:
                folder = out / slug(task)
                if folder.exists():
                    shutil.rmtree(folder)
                task_files(task, exporter).write(folder)
                result.written.append((task, folder))
                if progress:
                    progress(f"wrote {folder}")
        finally:
            exporter.close()
    return result


def _skip_reason(task: Task, exporters: dict[str, Any]) -> str | None:
    if task.env not in exporters:
        return f"no Harbor exporter for {task.env} tasks (there are: {', '.join(sorted(exporters))})"
    if task.image:
        return f"it runs on its own image {task.image}, which icplay does not build"
    if task.env == "ctf":
        return skip_reason(task)
    return None
