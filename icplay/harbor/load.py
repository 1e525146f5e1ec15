"""Read a Harbor (or Terminal-Bench, Harbor format) task folder as an icplay task.

A task folder holds ``instruction.md`` (the query), ``task.toml`` (timeouts, resources,
metadata), ``environment/Dockerfile`` (the container the solver works in), ``tests/test.sh``
(the verifier, which writes ``/logs/verifier/reward.txt`` or ``reward.json``) and optionally
``solution/solve.sh`` (the oracle). A dataset is a folder of such folders.

Only what the episode needs is read here: the instruction becomes the query, the solution
folder becomes the gold (one shell command that writes it to ``/solution`` and runs
``solve.sh``, as Harbor's oracle does), and ``extra["harbor"]`` keeps the folder and the
settings the env uses. ``tests/`` and ``solution/`` stay on the host: they are never part
of the image (its build context is ``environment/``) and never in the container during the
episode (see ``env.py``). Every problem is a TaskFileError naming the file and the field.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

from icplay.tasks.model import Task, TaskFileError

try:
    import tomllib
except ModuleNotFoundError:   # Python 3.10
    import tomli as tomllib   # type: ignore[no-redef]

ENV = "harbor"
HARDNESS = ("easy", "medium", "hard")
# Harbor's defaults (its TaskConfig), used where task.toml says nothing
AGENT_TIMEOUT = 600.0
VERIFIER_TIMEOUT = 600.0
BUILD_TIMEOUT = 600.0
MEMORY_MB = 2048
COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
SOLUTION_DIR = "/solution"
VERIFIER_MODES = ("shared", "separate")


def is_harbor(path: Path) -> bool:
    """Whether ``path`` is a Harbor task folder, or a folder holding some."""
    path = Path(path)
    return _is_task(path) or any(_is_task(child) for child in _children(path))


def _is_task(path: Path) -> bool:
    return (path / "task.toml").is_file() and (path / "instruction.md").is_file()


def _children(path: Path) -> list[Path]:
    try:
        return sorted(child for child in path.iterdir() if child.is_dir() and not child.name.startswith("."))
    except OSError:
        return []


def load_harbor(path: str | Path) -> list[Task]:
    """The tasks of one task folder, or of every task folder inside ``path`` (a dataset).

    A task's set is the name of the dataset folder it sits in, whether the dataset or the
    task folder alone was named: its key (``set/id``) is the same either way."""
    path = Path(path)
    if not path.is_dir():
        raise TaskFileError(path, "no such folder (a Harbor task folder, or a folder of them)")
    if (path / "task.toml").exists() or (path / "instruction.md").exists():
        return [load_task(path, path.resolve().parent.name)]
    folders = [child for child in _children(path) if (child / "task.toml").exists()]
    if not folders:
        raise TaskFileError(path, "not a Harbor task folder (no task.toml and instruction.md) and holds none")
    return [load_task(folder, path.resolve().name) for folder in folders]


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise TaskFileError(path, "missing: a Harbor task folder needs its task.toml")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFileError(path, f"cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise TaskFileError(path, f"invalid TOML: {exc}") from None


def _table(config: dict[str, Any], toml: Path, name: str) -> dict[str, Any]:
    value = config.get(name, {})
    if not isinstance(value, dict):
        raise TaskFileError(toml, f"expected a table, got {type(value).__name__}", field=name)
    return value


def _number(table: dict[str, Any], toml: Path, section: str, key: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise TaskFileError(toml, f"expected a positive number, got {value!r}", field=f"{section}.{key}")
    return float(value)


def _strings(table: dict[str, Any], toml: Path, section: str, key: str) -> list[str]:
    value = table.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TaskFileError(toml, "expected a list of strings", field=f"{section}.{key}")
    return value


def load_task(folder: Path, set_name: str) -> Task:
    """One task folder as a Task of the ``harbor`` environment."""
    folder = Path(folder)
    toml = folder / "task.toml"
    instruction = folder / "instruction.md"
    if not instruction.is_file():
        raise TaskFileError(instruction, "missing: a Harbor task folder needs its instruction.md")
    try:
        query = instruction.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFileError(instruction, f"cannot read: {exc}") from None
    if not query:
        raise TaskFileError(instruction, "is empty")
    config = _read_toml(toml)
    metadata, task_table = _table(config, toml, "metadata"), _table(config, toml, "task")
    agent, verifier = _table(config, toml, "agent"), _table(config, toml, "verifier")
    environment = _table(config, toml, "environment")
    settings = {
        "dir": str(folder.resolve()),
        "image": _image_source(folder, toml, environment),
        "agent_timeout": _number(agent, toml, "agent", "timeout_sec", AGENT_TIMEOUT),
        "verifier_timeout": _number(verifier, toml, "verifier", "timeout_sec", VERIFIER_TIMEOUT),
        "build_timeout": _number(environment, toml, "environment", "build_timeout_sec", BUILD_TIMEOUT),
        "verifier_env": _verifier_env(verifier, toml),
        "memory_mb": int(_number(environment, toml, "environment", "memory_mb", MEMORY_MB)),
        "cpus": _number(environment, toml, "environment", "cpus", 1),
        **_verifier_mode(config, verifier, toml),
    }
    test = folder / "tests" / "test.sh"
    if not test.is_file():
        raise TaskFileError(test, "missing: icplay scores a Harbor task with its own verifier, tests/test.sh")
    allow_internet = environment.get("allow_internet", True)   # Harbor's default: on
    if not isinstance(allow_internet, bool):
        raise TaskFileError(toml, f"expected true or false, got {allow_internet!r}", field="environment.allow_internet")
    difficulty = metadata.get("difficulty")
    tags = _strings(metadata, toml, "metadata", "tags") + _strings(task_table, toml, "task", "keywords")
    return Task(
        id=folder.name, set=set_name, env=ENV, query=query, gold=gold_command(folder / "solution"),
        hardness=difficulty if difficulty in HARDNESS else None, tags=tuple(dict.fromkeys(tags)),
        network=allow_internet, extra={"harbor": settings}, source=str(folder),
    )


def _verifier_env(verifier: dict[str, Any], toml: Path) -> dict[str, str]:
    env = verifier.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, (str, int, float))
                                            for k, v in env.items()):
        raise TaskFileError(toml, "expected a table of names to strings", field="verifier.env")
    for name in env:
        if not name.isidentifier():
            raise TaskFileError(toml, f"{name!r} is not a variable name", field="verifier.env")
    return {k: str(v) for k, v in env.items()}


def _verifier_mode(config: dict[str, Any], verifier: dict[str, Any], toml: Path) -> dict[str, Any]:
    """Where the verifier runs: ``shared`` (the agent's container, Harbor's default) or
    ``separate`` (a fresh container of the same image, given the agent's ``artifacts`` after
    the ``[[verifier.collect]]`` commands ran in the agent's container)."""
    mode = verifier.get("environment_mode", "shared")
    if mode not in VERIFIER_MODES:
        raise TaskFileError(toml, f"expected one of {', '.join(VERIFIER_MODES)}, got {mode!r}",
                            field="verifier.environment_mode")
    artifacts = []
    for item in config.get("artifacts") or []:
        source = item.get("source") if isinstance(item, dict) else item
        if not isinstance(source, str) or not source.startswith("/") or source.rstrip("/") == "":
            raise TaskFileError(toml, f"expected an absolute path (or a table with one as source), got {item!r}",
                                field="artifacts")
        artifacts.append(source.rstrip("/"))
    collect = []
    hooks = verifier.get("collect") or []
    for hook in hooks if isinstance(hooks, list) else [hooks]:
        command = hook.get("command") if isinstance(hook, dict) else None
        if not isinstance(command, str) or not command.strip():
            raise TaskFileError(toml, "expected tables with a command", field="verifier.collect")
        collect.append(command)
    return {"verifier_mode": mode, "artifacts": artifacts, "collect": collect}


def _image_source(folder: Path, toml: Path, environment: dict[str, Any]) -> dict[str, str]:
    """How the task's container is made: built from environment/Dockerfile, or an image
    task.toml names; a compose-only environment is refused."""
    env_dir = folder / "environment"
    if (env_dir / "Dockerfile").is_file():
        return {"build": str(env_dir.resolve())}
    image = environment.get("docker_image")
    if isinstance(image, str) and image.strip():
        return {"name": image.strip()}
    for name in COMPOSE_FILES:
        if (env_dir / name).is_file():
            raise TaskFileError(env_dir / name, "icplay plays Harbor tasks of one container built from "
                                "environment/Dockerfile; this task's environment is a docker-compose file only")
    raise TaskFileError(env_dir / "Dockerfile", "missing (and task.toml names no environment.docker_image)")


def gold_command(solution: Path) -> str:
    """One shell command that writes the solution folder to /solution and runs solve.sh
    there as Harbor's oracle does (``bash /solution/solve.sh``); "" when there is none.

    Text files travel in quoted here-documents, other files in base64; the delimiter
    is derived from the content, so no line of it can end the document early.
    """
    script = solution / "solve.sh"
    if not script.is_file():
        return ""
    lines = [f"mkdir -p {SOLUTION_DIR}"]
    for path in sorted(p for p in solution.rglob("*") if p.is_file()):
        relative = path.relative_to(solution).as_posix()
        target = f"{SOLUTION_DIR}/{relative}"
        if "'" in relative:
            raise TaskFileError(path, "a solution file name with a quote in it is not supported")
        if "/" in relative:
            lines.append(f"mkdir -p '{target.rsplit('/', 1)[0]}'")
        data = path.read_bytes()
        delimiter = "ICPLAY_" + hashlib.sha256(data).hexdigest()[:16].upper()
        try:
            text = data.decode("utf-8")
            binary = "\0" in text
        except UnicodeDecodeError:
            binary = True
        if binary:
            encoded = base64.encodebytes(data).decode("ascii")
            lines.append(f"base64 -d > '{target}' <<'{delimiter}'\n{encoded}{delimiter}")
        else:
            body = text if text.endswith("\n") or not text else text + "\n"
            lines.append(f"cat > '{target}' <<'{delimiter}'\n{body}{delimiter}")
        if path.stat().st_mode & 0o111:
            lines.append(f"chmod +x '{target}'")
    lines.append(f"bash {SOLUTION_DIR}/solve.sh")
    return "\n".join(lines)


def settings_of(task: Task) -> dict[str, Any]:
    """The Harbor settings ``load_task`` kept on the task."""
    settings = task.extra.get("harbor")
    if not isinstance(settings, dict):
        raise TaskFileError(task.source or task.key, "not a Harbor task (load it with --tasks harbor:PATH)")
    return settings
