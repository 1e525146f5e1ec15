"""The episode's Python interpreter, driven through a sandbox's shell.

Each action runs icplay's client (``python3 -I -c CLIENT``: the client's and the server's
programs travel on the command line, so no script of icplay's sits in the sandbox to be
replaced) in the sandbox's persistent shell with the code on stdin (a heredoc with a
random delimiter); the client hands it to a long-lived server process in the sandbox
that keeps the namespace. So the shell sandbox's timeout, output
cap, interrupt and process containment apply to Python as they do to Bash: stopping an
action kills every process in the sandbox but the shell, the interpreter included, and
the next action starts a fresh interpreter (``restarted`` says so; the env turns it into a
note).
"""

from __future__ import annotations

import secrets
import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from icplay.sandbox.base import Sandbox, ShellResult

HERE = Path(__file__).resolve().parent
EXIT_ERROR, EXIT_DIED, EXIT_NO_START = 1, 3, 4


def heredoc(command: str, text: str) -> str:
    """``command`` with ``text`` on its stdin, quoted so that nothing in it is expanded."""
    while True:
        word = "ICPLAY_PY_" + secrets.token_hex(6)
        if word not in text:
            break
    return f"{command} <<'{word}'\n{text}\n{word}"


@lru_cache(maxsize=None)
def _programs() -> tuple[str, str]:
    """(client, server) programs, shell-quoted; the server is the value codec then server.py."""
    server = (HERE / "values.py").read_text() + "\n" + (HERE / "server.py").read_text()
    return shlex.quote((HERE / "client.py").read_text()), shlex.quote(server)


def client_command(python: str, session: str, kind: str) -> str:
    """The shell command of one request: the client, with both programs as arguments."""
    client, server = _programs()
    # -I -S: no environment variable, user folder or site file changes icplay's client
    return " ".join([python, "-I", "-S", "-c", client, shlex.quote(session), kind, server])


def run_judge(sandbox: Sandbox, spec: str, timeout: float, python: str = "python3") -> ShellResult:
    """The server's program run once as the judge (``--judge``) with ``spec`` on its stdin."""
    _, server = _programs()
    command = " ".join([python, "-I", "-c", server, "--judge"])
    return sandbox.run("{ " + heredoc(command, spec) + "\n} 2>/dev/null", timeout=timeout)


@dataclass
class PyResult:
    """One action's result: what it printed (stdout and the error line) and what happened."""

    output: str
    status: str                   # ok | error | died (os._exit) | stopped (timeout, interrupt, output flood)
    exit_code: int | None
    duration: float
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def cut(self) -> bool:
        return self.status == "stopped"


class Interpreter:
    """A persistent Python interpreter inside ``sandbox`` (started by its first action)."""

    def __init__(self, sandbox: Sandbox, python: str = "python3", session: str = "main"):
        self.sandbox = sandbox
        self.python = python
        self.session = session         # the server's name: one sandbox may hold several interpreters
        self.alive = False             # a server holds the namespace (as far as icplay knows)

    def run(self, code: str, timeout: float | None = None,
            on_output: Callable[[str], None] | None = None, kind: str = "run") -> PyResult:
        """One request (``kind`` run, probe or table: see server.py) and what it printed."""
        fresh = not self.alive
        command = client_command(self.python, self.session, kind)
        # in a group with stderr closed: a client killed by a timeout is not reported by bash
        # ("Killed ..."); the client writes everything to stdout
        result = self.sandbox.run("{ " + heredoc(command, code) + "\n} 2>/dev/null", timeout=timeout,
                                  on_output=on_output)
        info = result.info()
        stopped = result.timed_out or result.interrupted or result.stopped_for_output
        if stopped or result.shell_died or result.exit_code is None:
            status = "stopped"
        elif result.exit_code == 0:
            status = "ok"
        elif result.exit_code == EXIT_ERROR:
            status = "error"
        elif result.exit_code == EXIT_DIED:
            status = "died"
        else:    # EXIT_NO_START, or the client itself was killed
            status = "died"
        self.alive = status in ("ok", "error")
        info["interpreter"] = status
        info["fresh_interpreter"] = fresh
        return PyResult(result.output, status, result.exit_code, result.duration, info)

    def stop(self) -> None:
        """End this interpreter (a gold's, so that the next gold gets a pristine one)."""
        if self.alive:
            self.run("import os; os._exit(0)", timeout=10)
        self.alive = False
