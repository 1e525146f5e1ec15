"""The Sandbox protocol: where a shell episode's actions run.

A sandbox owns one persistent bash session (``run``) plus a side door (``exec``) that
runs a one-off command in the same file system, outside the session, for the reward's
``git status`` and md5 checks, so nothing an agent did to its shell (aliases, cwd,
``set -e``) can bend the scoring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

if TYPE_CHECKING:
    from icplay.sandbox.session import PersistentShell

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

    def info(self) -> dict[str, Any]:
        return {
            "timed_out": self.timed_out, "interrupted": self.interrupted,
            "truncated_bytes": self.truncated_bytes, "shell_died": self.shell_died,
            "shell_restarted": self.shell_restarted, "cwd": self.cwd,
            "restart_reason": self.restart_reason, "sandbox_replaced": self.sandbox_replaced,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class SandboxCapabilities:
    """What a kind of sandbox can do, declared once, so that callers ask a flag instead of
    probing for methods.

    - ``runs_images``: runs Docker images (icplay's, a task's own, ``--image``), so also
      *faithful* containers of InterCode's images; otherwise it runs the host's tools over
      a folder tree, and a task that names an image is refused.
    - ``recyclable``: ``recycle()`` may return True (the pool keeps a used sandbox warm).
    - ``replaces_dead``: a sandbox that died is replaced at the next action and
      ``on_replaced`` is called first (a bwrap folder does not die that way).
    """

    runs_images: bool
    recyclable: bool
    replaces_dead: bool


@runtime_checkable
class Sandbox(Protocol):
    """One episode's sandbox. ``start`` may be slow; everything else is quick."""

    kind: str
    capabilities: SandboxCapabilities
    # the persistent session (its pid, the namespace's last pid, its cwd, its init script)
    shell: PersistentShell
    # a faithful container of an image not icplay's (faithful.py); False where there is no such mode
    faithful: bool
    # git's pristine index, commit and tracked top-level names (envs/bash_facts.py), or None
    pristine_git: dict[str, Any] | None
    # where scoring makes its private git folder inside the sandbox, or None
    scoring_scratch: str | None
    # called when a new sandbox replaced a dead one, before anything runs in it
    on_replaced: Callable[[], None] | None

    def start(self) -> None: ...

    def run(self, command: str, timeout: float | None = None,
            on_output: OutputCallback | None = None) -> ShellResult: ...

    def interrupt(self) -> None: ...

    def exec(self, argv: list[str], timeout: float = 30.0) -> tuple[int, str]: ...

    def put_files(self, source: Path | None, dest: str, skip: frozenset[str] = frozenset()) -> None:
        """Copy the host folder ``source`` (None: nothing) to the folder ``dest`` inside."""
        ...

    def recycle(self) -> bool:
        """Make the sandbox pristine for another episode (True), or say it cannot be (False)."""
        ...

    def close(self) -> None: ...
