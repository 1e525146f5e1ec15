"""The one place scanners are registered: icplay's own, and other packages' found through
the ``icplay.scanners`` entry point group (``name = "package.module:function"``, a function
of a ``Trajectory`` returning a list of ``Flag``).

Scanners load lazily, as languages do. A scanner that raises is named with its error and
the others still run: one bad plug-in never costs the scan.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from importlib.metadata import EntryPoint
from typing import Callable

from icplay.episode import Trajectory
from icplay.languages.spec import resolve
from icplay.plugins import load_plugin, plugins
from icplay.scan.flags import Flag

ENTRY_POINT_GROUP = "icplay.scanners"

Scanner = Callable[[Trajectory], list[Flag]]

_HERE = "icplay.scan.scanners"
BUILTIN = {
    "reward-hack": f"{_HERE}.integrity:reward_hack",
    "touches-scoring": f"{_HERE}.integrity:touches_scoring",
    "command-not-found": f"{_HERE}.environment:command_not_found",
    "missing-module": f"{_HERE}.environment:missing_module",
    "permission-denied": f"{_HERE}.environment:permission_denied",
    "dead-shell": f"{_HERE}.environment:dead_shell",
    "timeout": f"{_HERE}.environment:timeout",
    "loop": f"{_HERE}.behaviour:loop",
    "submit-without-looking": f"{_HERE}.behaviour:submit_without_looking",
    "format-error": f"{_HERE}.behaviour:format_error",
    "model-reply": f"{_HERE}.behaviour:model_reply",
    "error-run": f"{_HERE}.behaviour:error_run",
}


class UnknownScanner(ValueError):
    """No scanner by that name (the message lists the known ones)."""


def _plugins() -> dict[str, EntryPoint]:
    return plugins(ENTRY_POINT_GROUP, BUILTIN)


def names() -> list[str]:
    """Every scanner: built-ins first, then plug-ins by name."""
    return list(BUILTIN) + sorted(_plugins())


def get(name: str) -> Scanner:
    """The scanner ``name``, imported on first use."""
    if name in BUILTIN:
        found = resolve(BUILTIN[name])
    else:
        found = load_plugin(_plugins(), name, "scanner", names, UnknownScanner)
    if not callable(found):
        raise UnknownScanner(f"entry point {name!r} in group {ENTRY_POINT_GROUP} is not a function")
    return found


def chosen(wanted: list[str] | None = None) -> list[tuple[str, Scanner]]:
    """(name, scanner) for ``wanted`` (default: every registered one)."""
    return [(name, get(name)) for name in (wanted or names())]


@dataclass
class EpisodeScan:
    """The flags of one episode, and the scanners that failed on it (name, one sentence)."""

    flags: list[Flag] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)


def scan_trajectory(traj: Trajectory, scanners: list[tuple[str, Scanner]]) -> EpisodeScan:
    """Every scanner over ``traj``: their flags by turn (the episode's own last), each signed."""
    out = EpisodeScan()
    for name, scanner in scanners:
        try:
            found = scanner(traj)
            flags = [f if f.scanner else replace(f, scanner=name) for f in found if isinstance(f, Flag)]
        except Exception as exc:       # a plug-in's bug: named, the other scanners still run
            out.failures.append((name, f"{type(exc).__name__}: {exc}"[:300]))
            continue
        out.flags += flags
    last = len(traj.turns)
    out.flags.sort(key=lambda f: (last if f.turn is None else f.turn, f.kind))
    return out


@functools.cache
def _every_scanner() -> tuple[tuple[str, Scanner], ...]:
    """Every scanner that loads (a plug-in that fails to load is left out), once a process."""
    found = []
    for name in names():
        try:
            found.append((name, get(name)))
        except UnknownScanner:
            continue
    return tuple(found)


def flags_of(traj: Trajectory) -> list[Flag]:
    """The flags every registered scanner raises on ``traj`` (a failing scanner raises none)."""
    return scan_trajectory(traj, list(_every_scanner())).flags


def flag_kinds(traj: Trajectory) -> list[str]:
    """The kinds of flag ``flags_of`` gives (for a browser's filter)."""
    return sorted({f.kind for f in flags_of(traj)})
