"""Each language's Harbor mapping: its image, its answer file, and how its gold becomes
the expected values the verifier compares with (docs/export.md, "Harbor tasks")."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icplay.harbor.export import ANSWERS, ExportError, Files, Progress, heredoc
from icplay.tasks.model import Task
from icplay.envs.bash import BashSandboxes
from icplay.sql.sqlite import SqliteBackend
from icplay.sql.dump import default_databases, load_catalog
from icplay.sql.convert import mysql_query_to_sqlite
from icplay.python.reward import gold_function_name
from icplay.tasks.ctf import assets_dir, mount_path, setup_of

if TYPE_CHECKING:   # the type only: the sandboxes load when an export needs them
    from icplay.envs.bash import BashSandboxes

BASH_ANSWER = f"{ANSWERS}/answer.txt"
SQL_ANSWER = f"{ANSWERS}/answer.sql"
PYTHON_ANSWER = f"{ANSWERS}/solution.py"
CTF_ANSWER = f"{ANSWERS}/flag.txt"
ARTIFACTS = "/logs/artifacts"   # Harbor's artifact folder, carried into the separate verifier
TESTBED_TAR = f"{ARTIFACTS}/testbed.tar"


def solve_sh(body: str) -> str:
    return "#!/bin/bash\n# The oracle: the task's gold, handed in as the instruction asks.\nset -e\n" \
           f"mkdir -p {ANSWERS}\n{body}"


class BashExporter:
    """Bash: the testbed image; the gold's run (output, changes, hashes) made by icplay in
    a pristine container at export time is the expected value."""

    language = "bash"
    verifier = "icplay.harbor.verifiers.bash"
    modules = ("icplay.envs.bash_facts", "icplay.envs.bash_reward", "icplay.envs.tfidf", "icplay.sandbox.base")
    agent_timeout = 600.0
    # the agent's /testbed as it left it, for the separate verifier (the agent's own tar:
    # whatever it makes that write is its answer, nothing more)
    collect = (f"mkdir -p {ARTIFACTS} && tar -C / -cf {TESTBED_TAR} testbed",)

    def __init__(self) -> None:
        self._sandboxes: BashSandboxes | None = None

    def prepare(self, tasks: list[Task], progress: Progress | None, sandbox: str) -> None:
        self._sandboxes = BashSandboxes(sandbox, progress=progress)

    def environment(self, task: Task, files: Files) -> None:
        # Only /testbed is scored: Harbor's own folders (/app, /logs, /tests, /solution) and
        # what an agent harness installs (in /root, /usr/local, /opt) are no part of the answer.
        files.add("environment/Dockerfile", f"""\
# {task.key}: icplay's Bash testbed (the image `icplay images build bash` makes).
FROM icplay-bash:latest
RUN mkdir -p {ANSWERS} \\
 && printf '%s\\n' '/*' '!/testbed' >> /.git/info/exclude \\
 && cd / && git rm -r -q --cached root && git commit -q -m "harbor: only /testbed is scored" \\
 && test -z "$(git status --short)"
WORKDIR /testbed
""")

    def instruction(self, task: Task) -> str:
        return f"""{task.query.strip()}

## How to answer

You are in a Debian container; the task's files are under /testbed (your shell starts there).

- If the task asks for information, write the answer to `{BASH_ANSWER}`, for example by
  running your final command as `your-command > {BASH_ANSWER}`. Its text is compared with the
  output of the reference solution's command (TF-IDF cosine similarity, as InterCode-Bash
  compares the output of the last command).
- If the task asks for changes to files, make them under /testbed: the paths you add, change
  or delete are compared with the reference solution's, and so are the contents of the files
  both add.

Only /testbed and `{BASH_ANSWER}` are scored.
"""

    def solution(self, task: Task, files: Files) -> None:
        files.add("solution/solve.sh", solve_sh(f"cd /testbed\n(\n{task.gold}\n) > {BASH_ANSWER} 2>&1 || true\n"),
                  executable=True)

    def expected(self, task: Task, files: Files) -> dict[str, Any]:
        assert self._sandboxes is not None
        gold = self._sandboxes.gold_run(task)
        runs = [gold, *gold.earlier] if gold.nondeterministic else [gold]
        return {"task": task.key, "gold_runs": [
            {"output": run.output, "changes": [list(pair) for pair in run.changes], "hashes": dict(run.hashes)}
            for run in runs]}

    def close(self) -> None:
        if self._sandboxes is not None:
            self._sandboxes.close()


class SqlExporter:
    """SQL: a SQLite file of the task's database; the gold's rows, computed by icplay's
    SQLite backend at export time, are the expected value."""

    language = "sql"
    verifier = "icplay.harbor.verifiers.sql"
    modules = ("icplay.envs.sql_reward", "icplay.sql.base", "icplay.sql.sqlite_guard", "icplay.sandbox.base")
    agent_timeout = 600.0
    collect: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._backend = SqliteBackend()

    def prepare(self, tasks: list[Task], progress: Progress | None, sandbox: str) -> None:
        self._backend.progress = progress

    def _database(self, task: Task) -> Path:
        catalog = load_catalog(task.extra.get("databases") or default_databases())
        return self._backend.template_file(catalog, task.db or catalog.names[0])

    def environment(self, task: Task, files: Files) -> None:
        database = self._database(task)
        files.add(f"environment/{database.name}", database)
        files.add("environment/Dockerfile", f"""\
# {task.key}: Debian's python3 and sqlite3, the task's database as a SQLite file.
FROM icplay-python:latest
RUN apt-get update && apt-get install -y --no-install-recommends sqlite3 \\
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt/* /var/log/dpkg.log
COPY {database.name} {ANSWERS}/{database.name}
WORKDIR {ANSWERS}
""")

    def instruction(self, task: Task) -> str:
        name = self._database(task).name
        return f"""{task.query.strip()}

## How to answer

The database `{task.db}` is the SQLite file `{ANSWERS}/{name}` (`sqlite3 {ANSWERS}/{name}`
opens it; python3's sqlite3 module works too). Write your final answer, one SQL query in
SQLite's dialect, to `{SQL_ANSWER}`. It is run on a fresh copy of the database and its rows
are compared with the reference query's rows (values and, where they share rows, order):
return exactly the requested columns, in the requested order, and no extras.
"""

    def gold_query(self, task: Task) -> str:
        return mysql_query_to_sqlite(task.gold) or task.gold

    def solution(self, task: Task, files: Files) -> None:
        files.add("solution/solve.sh", solve_sh(heredoc(SQL_ANSWER, self.gold_query(task).strip().rstrip(";"))),
                  executable=True)

    def expected(self, task: Task, files: Files) -> dict[str, Any]:
        database = self._database(task)
        files.add(f"tests/{database.name}", database)
        self._backend.reset(task.db, task.extra.get("databases"))
        gold = self._backend.gold(task.gold)
        if not gold.is_result:
            raise ExportError(f"task {task.key}: its gold query gives no rows on SQLite ({gold.error})")
        return {"task": task.key, "database": database.name, "gold_keys": gold.keys()}

    def close(self) -> None:
        self._backend.close()


class PythonExporter:
    """Python (MBPP): Debian's python3; the gold function and the tests are the expected
    values (both judged the same way at verification)."""

    language = "python"
    verifier = "icplay.harbor.verifiers.python"
    modules = ("icplay.python.reward",)
    agent_timeout = 600.0
    collect: tuple[str, ...] = ()

    def prepare(self, tasks: list[Task], progress: Progress | None, sandbox: str) -> None:
        pass

    def function(self, task: Task) -> str:
        name = gold_function_name(task.gold, [str(t) for t in task.extra.get("tests") or []])
        if not name:
            raise ExportError(f"task {task.key}: its gold defines no function")
        return name

    def environment(self, task: Task, files: Files) -> None:
        files.add("environment/Dockerfile", f"""\
# {task.key}: Debian's python3 (the image `icplay images build python` makes).
FROM icplay-python:latest
RUN mkdir -p {ANSWERS}
WORKDIR {ANSWERS}
""")

    def instruction(self, task: Task) -> str:
        tests = task.extra.get("tests") or []
        example = f"\nIt must pass tests like:\n\n```python\n{tests[0]}\n```\n" if tests else ""
        setup = str(task.extra.get("test_setup_code") or "").strip()
        if setup:
            example += f"\nThe tests run after this set-up code:\n\n```python\n{setup}\n```\n"
        return f"""{task.query.strip()}

## How to answer

Write your solution to `{PYTHON_ANSWER}`: define the function `{self.function(task)}` at the top
level (helpers and imports may go beside it; nothing should run on import but definitions).
The file is run with python3 and the task's tests are run against it; each test's outcome
(what it printed, whether it raised) is compared with the reference solution's.
{example}"""

    def solution(self, task: Task, files: Files) -> None:
        files.add("solution/solve.sh", solve_sh(heredoc(PYTHON_ANSWER, task.gold.replace("\r\n", "\n"))),
                  executable=True)

    def expected(self, task: Task, files: Files) -> dict[str, Any]:
        files.add("tests/gold.py", task.gold.replace("\r\n", "\n"))
        return {"task": task.key, "function": self.function(task),
                "tests": [str(t) for t in task.extra.get("tests") or []],
                "test_setup_code": str(task.extra.get("test_setup_code") or "")}

    def close(self) -> None:
        pass


class CtfExporter:
    """CTF: icplay's CTF tool image with the task's files at /ctf/<id> (its setup run at
    build time); the flag is the expected value."""

    language = "ctf"
    verifier = "icplay.harbor.verifiers.ctf"
    modules = ("icplay.ctf.reward",)
    agent_timeout = 1200.0
    collect: tuple[str, ...] = ()

    def prepare(self, tasks: list[Task], progress: Progress | None, sandbox: str) -> None:
        pass

    def environment(self, task: Task, files: Files) -> None:
        where = mount_path(task)
        assets = assets_dir(task)
        copy = ""
        if assets is not None and assets.is_dir():
            files.add("environment/files", assets)
            copy = f"COPY files/ /opt{where}/\n"
        setup = setup_of(task)
        run_setup = f"RUN cd {where} && {setup}\n" if setup else ""
        files.add("environment/Dockerfile", f"""\
# {task.key}: icplay's CTF tools (`icplay images build ctf`), the task's files at {where}.
FROM icplay-ctf:latest
RUN mkdir -p {ANSWERS} /opt{where}
{copy}{run_setup}WORKDIR {where}
""")

    def instruction(self, task: Task) -> str:
        return f"""{task.query.strip()}

## How to answer

The task's files are in `{mount_path(task)}` (your shell starts there); the container has
no network. When you have found the flag, write it (the flag alone, on one line) to
`{CTF_ANSWER}`. It is compared with the task's flag, ignoring case.
"""

    def solution(self, task: Task, files: Files) -> None:
        files.add("solution/solve.sh", solve_sh(f"printf '%s\\n' {shlex.quote(task.gold)} > {CTF_ANSWER}\n"),
                  executable=True)

    def expected(self, task: Task, files: Files) -> dict[str, Any]:
        return {"task": task.key, "flag": task.gold}

    def close(self) -> None:
        pass


EXPORTERS: dict[str, type] = {
    "bash": BashExporter,
    "sql": SqlExporter,
    "python": PythonExporter,
    "ctf": CtfExporter,
}

__all__ = ["EXPORTERS", "BashExporter", "SqlExporter", "PythonExporter", "CtfExporter"]
