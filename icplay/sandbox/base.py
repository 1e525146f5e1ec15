"""The Sandbox protocol: where a shell episode's actions run.

A sandbox owns one persistent bash session (``run``) plus a side door (``exec``) that
runs a one-off command in the same file system, outside the session, for the reward's
``git status`` and md5 checks, so nothing an agent did to its shell (aliases, cwd,
``set -e``) can bend the scoring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, runtime_checkable

DEFAULT_TIMEOUT = 10.0
DEFAULT_OUTPUT_CAP = 1024 * 1024

OutputCallback = Callable[[str], None]


class SandboxError(RuntimeError):
    """A sandbox that cannot start or run; the message says what to do about it."""


@dataclass
class ShellResult:
    """What one command in the persistent session produced."""

    output: str
    exit_code: int | None
    duration: float = 0.0
    timed_out: bool = False
    interrupted: bool = False
    truncated_bytes: int = 0
    stopped_for_output: bool = False
    shell_died: bool = False
    shell_restarted: bool = False
    cwd: str | None = None
    notes: list[str] = field(default_factory=list)
    # why a shell that still answered was replaced (session.HEALTH_NOTES), or None
    restart_reason: str | None = None
    # the sandbox itself had died (container stopped, removed) and a new one took its place
    sandbox_replaced: bool = False

    @property
    def observation(self) -> str:
        """The output with icplay's notes appended, as an agent or human sees it."""
        text = self.output
        if self.notes:
            if text and not text.endswith("\n"):
                text += "\n"
            text += "\n".join(f"[icplay: {n}]" for n in self.notes)
        return text

    def info(self) -> dict:
        return {
            "timed_out": self.timed_out, "interrupted": self.interrupted,
            "truncated_bytes": self.truncated_bytes, "shell_died": self.shell_died,
            "shell_restarted": self.shell_restarted, "cwd": self.cwd,
            "restart_reason": self.restart_reason, "sandbox_replaced": self.sandbox_replaced,
            "notes": list(self.notes),
        }


@runtime_checkable
class Sandbox(Protocol):
    """One episode's sandbox. ``start`` may be slow; everything else is quick."""

    kind: str

    def start(self) -> None: ...

    def run(self, command: str, timeout: float | None = None,
            on_output: OutputCallback | None = None) -> ShellResult: ...

    def interrupt(self) -> None: ...

    def exec(self, argv: list[str], timeout: float = 30.0) -> tuple[int, str]: ...

    def close(self) -> None: ...
