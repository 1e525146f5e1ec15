"""Tasks one after another in line mode (``icplay play --plain``, ``icplay watch --plain``)."""

from __future__ import annotations

import sys
from typing import Any, Callable

from icplay.driver import Driver
from icplay.envs.base import Env
from icplay.episode import Episode
from icplay.frontend.display import display
from icplay.frontend.opening import Opening, open_episode
from icplay.lines.answers import QUIT
from icplay.lines.loop import LineLoop
from icplay.session import IN_PROGRESS, NEW, Session
from icplay.tasks.model import Task


def first_unfinished(session: Session, tasks: list[Task]) -> int:
    """Where a session stopped: the first task not submitted (0 when all are)."""
    progress = session.progress(tasks)
    for i, task in enumerate(tasks):
        status = progress.by_task.get(task.key)
        if status is None or status.state in (NEW, IN_PROGRESS):
            return i
    return 0


def tell_opening(opening: Opening, write: Callable[[str], None]) -> None:
    """What opening the episode found: saved files set aside (stderr), turns replayed."""
    for note in opening.set_aside:
        print(f"icplay: {note}", file=sys.stderr)
    if opening.resumed is not None:
        write(opening.resumed)


def run_tasks(tasks: list[Task], env: Env, session: Session, make_driver: Callable[[Episode], Driver],
              read_line: Callable[[str], str] | None = None,
              write: Callable[[str], None] = print, policy_info: dict[str, Any] | None = None, first: int = 1,
              total: int | None = None) -> int:
    """Play ``tasks`` in order in ``session`` (each resumed if it was left unfinished), one
    line loop each; ``make_driver(episode)`` builds the driver. ``first`` / ``total``: the
    first task's number in its set, and the set's size. Returns the exit code."""
    total = total or len(tasks)
    for path in session.stopped_abandoned:
        print(f"icplay: {path} was left running by an icplay that ended; it is marked stopped (and resumes)",
              file=sys.stderr)
    for number, task in enumerate(tasks, start=first):
        write(display(f"\n=== task {task.set}/{task.id} ({number} of {total})"
                      + (f" [{task.hardness}]" if task.hardness else "") + " ==="))
        write(display(task.query))
        opening = open_episode(session, env, task, policy_info)
        tell_opening(opening, write)
        outcome = LineLoop(make_driver(opening.episode), read_line, write).run()
        if outcome == QUIT:
            if opening.episode.trajectory.status == "stopped":
                write(f"(stopped; saved in {session.root} — the same command resumes it)")
            return 0
    return 0


__all__ = ["run_tasks", "first_unfinished", "tell_opening"]
