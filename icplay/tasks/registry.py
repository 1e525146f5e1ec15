"""Named task sets: the bundled ones and InterCode's, found where they live.

``icplay tasks`` lists these; every command that takes ``--tasks`` accepts a set name
from here or a path to a task file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable
from pathlib import Path

from icplay.paths import data_dir, intercode_dir
from icplay.tasks.ctf import mark_all
from icplay.tasks.loaders import load_task_file
from icplay.tasks.model import Task, TaskFileError


@dataclass(frozen=True)
class TaskSet:
    name: str
    env: str
    path: Path
    description: str
    databases: Path | None = None   # SQL: a dump or a folder of schema files
    assets: Path | None = None      # CTF: a folder of per-task folders (<assets>/<id>/)
    needs_image: bool = False       # runs only on an image the user names (--image)
    bundled: bool = False
    loader: str | None = None       # "module:function" reading ``path`` as a set (a Harbor folder), see SCHEMES

    @property
    def available(self) -> bool:
        return self.path.exists() if self.loader else self.path.is_file()

    def load(self) -> list[Task]:
        """The set's tasks; SQL tasks learn where their databases come from."""
        if self.loader is not None:
            loader: Callable[[Path], list[Task]] = _resolve(self.loader)
            return loader(self.path)
        tasks = load_task_file(self.path, self.env, self.name)
        if self.databases is not None:
            for task in tasks:
                task.extra.setdefault("databases", str(self.databases))
        if self.env == "ctf":
            tasks = mark_all(tasks, self.assets)
        return tasks


def _intercode_layout(root: Path) -> list[TaskSet]:
    """InterCode's sets where its data folder ``root`` keeps them (present or not)."""
    sets = [
        TaskSet("spider", "sql", root / "sql/spider/ic_spider_dev.json",
                "InterCode-SQL: 1034 Spider dev tasks", databases=root / "sql/spider/ic_spider_dbs.sql"),
        TaskSet("wikisql", "sql", root / "sql/wikisql/ic_wikisql_dev.json",
                "InterCode-SQL: 196 WikiSQL dev tasks", databases=root / "sql/wikisql/ic_wikisql_dev.sql"),
    ]
    for n in (1, 2, 3, 4):
        sets.append(TaskSet(f"nl2bash-{n}", "bash", root / f"nl2bash/nl2bash_fs_{n}.json",
                            f"InterCode-Bash: NL2Bash file system {n} (needs InterCode's image, --image)",
                            needs_image=True))
    sets.append(TaskSet("mbpp", "python", root / "python/mbpp/ic_mbpp.json", "InterCode-Python: 974 MBPP tasks"))
    sets.append(TaskSet("intercode-ctf", "ctf", root / "ctf/ic_ctf.json",
                        "InterCode-CTF: 100 picoCTF tasks (those needing a server or absent files are skipped)",
                        assets=root / "ctf/task_assets"))
    return sets


def _intercode_sets(root: Path) -> list[TaskSet]:
    return [s for s in _intercode_layout(root) if s.available]


def intercode_set_beside(data_file: str | Path) -> TaskSet | None:
    """The InterCode set whose task file is named as ``data_file`` is, with its databases or
    assets taken from beside it as InterCode's own layout keeps them (``ic_spider_dbs.sql``
    beside ``ic_spider_dev.json``): a copy of InterCode's data found without $ICPLAY_INTERCODE."""
    path = Path(data_file)
    for template in _intercode_layout(Path("/")):
        if template.path.name != path.name:
            continue
        databases = path.parent / template.databases.name if template.databases is not None else None
        assets = path.parent / template.assets.name if template.assets is not None else None
        return TaskSet(template.name, template.env, path, template.description, databases=databases,
                       assets=assets, needs_image=template.needs_image)
    return None


def task_sets() -> list[TaskSet]:
    """Every set icplay knows of on this machine, bundled ones first."""
    sets = [
        TaskSet("bash", "bash", data_dir() / "bash/tasks.json",
                "icplay's bundled Bash tasks over its own testbed", bundled=True),
        TaskSet("sql", "sql", data_dir() / "sql/tasks.json",
                "icplay's bundled SQL tasks over its own databases", databases=data_dir() / "sql/databases",
                bundled=True),
        TaskSet("python", "python", data_dir() / "python/tasks.json",
                "icplay's bundled Python tasks (functions with tests, easy to hard)", bundled=True),
        TaskSet("ctf", "ctf", data_dir() / "ctf/tasks.json",
                "icplay's bundled CTF tasks over files it generates", assets=data_dir() / "ctf/files", bundled=True),
    ]
    root = intercode_dir()
    if root is not None:
        sets.extend(_intercode_sets(root))
    return sets


@dataclass(frozen=True)
class Scheme:
    """Task sets of another harness's format, named ``PREFIX:PATH`` (or by a PATH the format
    recognises): ``env`` plays them, ``loader`` and ``recognise`` are ``module:function``
    references, imported on first use (the format's package sits above this one)."""

    env: str
    loader: str       # (path) -> list[Task], raising TaskFileError
    recognise: str    # (path) -> bool: a folder in this format
    description: str


SCHEMES: dict[str, Scheme] = {
    "harbor": Scheme("harbor", "icplay.harbor.load:load_harbor", "icplay.harbor.load:is_harbor",
                     "Harbor / Terminal-Bench task folder(s)"),
}


def _resolve(ref: str) -> Any:
    import importlib

    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def _scheme_set(prefix: str, scheme: Scheme, path: Path) -> TaskSet:
    if not path.exists():
        raise TaskFileError(path, f"no such folder (a {scheme.description})")
    name = path.resolve().name
    return TaskSet(f"{prefix}:{name}", scheme.env, path, f"{scheme.description} in {path}", loader=scheme.loader)


def implied_env(name_or_path: str | None) -> str | None:
    """The environment a ``--tasks`` value names by itself (``harbor:PATH``, or a folder in
    a scheme's format), or None."""
    if not name_or_path:
        return None
    prefix, colon, rest = name_or_path.partition(":")
    if colon and prefix in SCHEMES:
        return SCHEMES[prefix].env
    path = Path(name_or_path)
    if path.is_dir():
        for scheme in SCHEMES.values():
            if _resolve(scheme.recognise)(path):
                return scheme.env
    return None


def find_set(name_or_path: str, env: str | None = None) -> TaskSet:
    """A set by name, a scheme's ``PREFIX:PATH`` (``harbor:tasks/``), a folder in a scheme's
    format, or a task file given by path (its env taken from ``env``)."""
    for task_set in task_sets():
        if task_set.name == name_or_path:
            return task_set
    prefix, colon, rest = name_or_path.partition(":")
    if colon and prefix in SCHEMES:
        return _scheme_set(prefix, SCHEMES[prefix], Path(rest))
    path = Path(name_or_path)
    if path.is_dir() and (found := _folder_set(path, env)) is not None:
        return found
    if path.exists():
        if env is None:
            raise TaskFileError(path, "say which environment these tasks are for (bash, sql, python, ctf)")
        return TaskSet(path.stem, env, path, f"tasks from {path}")
    raise _not_found(name_or_path, env)


def _not_found(name_or_path: str, env: str | None) -> TaskFileError:
    """The error for a name that is no set, file or folder: how to name the env's folder, or the known sets."""
    for prefix, scheme in SCHEMES.items():
        if scheme.env == env:
            return TaskFileError(name_or_path, f"no such folder: name the {scheme.description} with "
                                 f"--tasks {prefix}:PATH")
    known = ", ".join(s.name for s in task_sets())
    return TaskFileError(name_or_path, f"no such task set or file (known sets: {known})")


def _folder_set(path: Path, env: str | None) -> TaskSet | None:
    """A folder as the set of the scheme that recognises it, else of the env's scheme (whose
    loader then says what is missing); None when no scheme is for it."""
    for prefix, scheme in SCHEMES.items():
        if (env is None or env == scheme.env) and _resolve(scheme.recognise)(path):
            return _scheme_set(prefix, scheme, path)
    for prefix, scheme in SCHEMES.items():
        if scheme.env == env:
            return _scheme_set(prefix, scheme, path)
    return None


def load_tasks(name_or_path: str, env: str | None = None) -> list[Task]:
    return find_set(name_or_path, env).load()
