"""Flags on the environment failing the solver: a command or module the image lacks, an
operation the image refuses, a shell that died, an action that ran out of time.

They read what an action printed and icplay's notes about it (``StepResult.info``), one
flag per turn and kind, with the first line that shows it as evidence."""

from __future__ import annotations

import re

from icplay.episode import Trajectory, Turn
from icplay.scan.flags import Flag, evidence, first_line
from icplay.scan.scanners.turns import executed, notes, output

NOT_FOUND = re.compile(r"command not found|^(?:/bin/|/usr/bin/)?(?:ba|da|z)?sh: (?:\d+: |line \d+: )?\S+: not found"
                       r"|exec: \S+: not found|No such file or directory \(os error 2\)|executable file not found",
                       re.MULTILINE)
MISSING = re.compile(r"ModuleNotFoundError|No module named |ImportError: |error while loading shared libraries"
                     r"|Can't locate \S+ in @INC|Unable to locate package|is not installed|Cannot find module"
                     r"|fatal error: \S+: No such file or directory|cannot find -l\S+|No matching distribution found")
DENIED = re.compile(r"Permission denied|Operation not permitted|Read-only file system")


def _by_output(traj: Trajectory, kind: str, pattern: re.Pattern[str], hint: tuple[str, ...] = ()) -> list[Flag]:
    """A flag on each turn whose output ``pattern`` matches (``hint``: words one of which any
    match contains, looked for first: a plain search is much faster than the pattern)."""
    flags = []
    for turn in executed(traj):
        text = output(turn)
        if hint and not any(word in text for word in hint):
            continue
        line = first_line(text, pattern)
        if line is not None:
            flags.append(Flag(kind, turn.index, line))
    return flags


def command_not_found(traj: Trajectory) -> list[Flag]:
    return _by_output(traj, "command-not-found", NOT_FOUND, ("not found", "os error 2"))


def missing_module(traj: Trajectory) -> list[Flag]:
    return _by_output(traj, "missing-module", MISSING)


def permission_denied(traj: Trajectory) -> list[Flag]:
    return _by_output(traj, "permission-denied", DENIED)


def _note(turn: Turn, *words: str) -> str | None:
    return next((n for n in notes(turn) if any(w in n for w in words)), None)


def _died(turn: Turn) -> object:
    info = turn.info
    return info.get("shell_died") or info.get("sandbox_replaced") or _note(turn, "shell exited", "shell died")


def _restarted(turn: Turn) -> object:
    return turn.info.get("shell_restarted") or _note(turn, "restarted", "new shell", "replaced")


def _why_dead(turn: Turn) -> str:
    why = _note(turn, "shell", "sandbox", "restarted", "replaced") or turn.info.get("restart_reason")
    return str(why or "the shell died")


def dead_shell(traj: Trajectory) -> list[Flag]:
    """Turns whose shell died or whose sandbox was replaced; the restart that follows a death
    already flagged is the same event, not a second one."""
    flags: list[Flag] = []
    for turn in executed(traj):
        died = _died(turn)
        if not (died or _restarted(turn)):
            continue
        if not died and flags and flags[-1].turn == turn.index - 1:
            continue
        flags.append(Flag("dead-shell", turn.index, evidence(_why_dead(turn))))
    return flags


def timeout(traj: Trajectory) -> list[Flag]:
    """Turns whose action was stopped for running out of time."""
    flags = []
    for turn in executed(traj):
        note = _note(turn, "timed out")
        if note or turn.info.get("timed_out"):
            flags.append(Flag("timeout", turn.index, evidence(note or f"timed out: {turn.action}")))
    return flags
