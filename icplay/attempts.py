"""Which attempts of each task a table counts: the first (pass@1, the default), the best, or all.

Every try of a task is its own trajectory, numbered (``Trajectory.attempt``, see
``icplay.store``): the task's current file and the earlier ones kept in the store's
attempts folder. A report that counted only the current file would let a retry after the
gold was shown replace a failed first try; so tables count the first attempt unless told
otherwise, and say which they count.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable

from icplay.episode import Trajectory
from icplay.store import numbered_attempts

FIRST, BEST, ALL = "first", "best", "all"
ATTEMPT_CHOICES = (FIRST, BEST, ALL)
COUNTED = {FIRST: "first attempt per task (pass@1)", BEST: "best attempt per task", ALL: "every attempt"}


def counted_note(mode: str) -> str:
    """The table header's line on what is counted."""
    return f"counting: {COUNTED[mode]}"


def by_task(current: Iterable[Trajectory], earlier: Iterable[Trajectory]) -> dict[str, list[Trajectory]]:
    """Every attempt of each task (``Trajectory.task_key``), in attempt order: ``earlier`` are the
    kept attempts, ``current`` the tasks' current files (an unnumbered one comes after the kept)."""
    kept: dict[str, list[Trajectory]] = {}
    for t in earlier:
        kept.setdefault(t.task_key, []).append(t)
    now: dict[str, list[Trajectory]] = {}
    for t in current:
        now.setdefault(t.task_key, []).append(t)
    return {key: numbered_attempts(kept.get(key, []), now.get(key, [])) for key in {**kept, **now}}


def _rank(t: Trajectory) -> tuple[bool, float, int]:
    best = t.best_reward if t.best_reward is not None else (t.reward if t.reward is not None else float("-inf"))
    return (t.status == "submitted" and t.solved, best, -(t.attempt or 0))


def _attempts_and_many(current: list[Trajectory],
                       earlier: Iterable[Trajectory]) -> tuple[dict[str, list[Trajectory]], list[Trajectory]]:
    """Each task's attempts (by ``by_task``), and the episodes of tasks with several current
    files: those (an InterCode log, a merged folder) are not attempts of one another, so they
    are all counted, as before attempts were numbered."""
    counts = Counter(t.task_key for t in current)
    many = [t for t in current if counts[t.task_key] > 1]
    tasks = by_task([t for t in current if counts[t.task_key] == 1],
                    [t for t in earlier if counts.get(t.task_key, 0) <= 1])
    return tasks, many


def choose(current: Iterable[Trajectory], earlier: Iterable[Trajectory], mode: str = FIRST) -> list[Trajectory]:
    """The attempts a table counts under ``mode``: each task's first, its best (solved first,
    then the best reward, then the earliest), or all of them."""
    if mode not in ATTEMPT_CHOICES:
        raise ValueError(f"unknown attempts choice {mode!r} (one of: {', '.join(ATTEMPT_CHOICES)})")
    tasks, many = _attempts_and_many(list(current), earlier)
    if mode == ALL:
        return [t for key in sorted(tasks) for t in tasks[key]] + many
    pick = (lambda ts: ts[0]) if mode == FIRST else (lambda ts: max(ts, key=_rank))
    return [pick(tasks[key]) for key in sorted(tasks)] + many
