"""Baseline sessions: one trajectory per task, progress over a task set, and resume.

A *session* is a named folder, ``$ICPLAY_HOME/trajectories/<name>/`` (default home
``~/.icplay``), the same folder ``icplay play --plain --session NAME`` writes, in which a
human works through tasks. It keeps exactly one current trajectory per task
(``<set>/<id>.json``, the TrajectoryStore layout, so ``icplay report`` reads it as is);
starting a task again after submitting it first moves the old file to
``$ICPLAY_HOME/attempts/<name>/<set>/<id>.<n>.json`` (beside the folder, in
``.attempts/<folder>/``, for a session given its own folder with ``--out``), so nothing is
ever overwritten: every attempt is numbered (``Trajectory.attempt``) and kept.

Guarantees (from ``TrajectoryStore``, see icplay/store.py): a task's file is only
replaced by later saves of the same episode; any other episode's file is moved to
``attempts/`` first; an episode open in one process cannot be opened in another
(``open_episode`` raises ``TrajectoryBusyError``, a one-line message naming the file and
the pid). Session names are checked (``check_session_name``): a name is one folder
name, never a path.

Resuming: a trajectory that was not submitted is picked up where it was (one left
``running`` by a process that died is marked ``stopped`` when the session is opened; a file
that cannot be read is moved to ``attempts/`` unchanged, named in ``set_aside``, and the
task starts afresh). The env is reset
to the task's initial state and the saved turns are replayed into it through the driver
(``icplay.driver.replay``: their actions run again, in order), so the fresh sandbox or
database holds what the human had built. Turns
that were interrupted or timed out are cut after the time they ran the first time.

Nothing here imports textual: the TUI, the plain REPL and scripts share this module.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from icplay.driver.replay import Replayed, recorded_turn, replay
from icplay.envs.base import Env
from icplay.episode import Episode, Trajectory, Turn, without_account
from icplay.paths import home_dir
from icplay.store import ATTEMPT_NAME, StoreError, TrajectoryFileError, TrajectoryStore, readable, safe_name
from icplay.tasks.model import Task

DEFAULT_SESSION = "default"

# Task states shown in pickers and counted in progress.
NEW, IN_PROGRESS, SUBMITTED, SOLVED = "new", "in progress", "submitted", "solved"


@dataclass
class TaskStatus:
    state: str = NEW
    turns: int = 0
    reward: float | None = None
    time_worked: float = 0.0
    attempts: list["AttemptMark"] = field(default_factory=list)   # every attempt, when there was more than one


@dataclass(frozen=True)
class AttemptMark:
    """One attempt of a task as a task list shows it."""

    attempt: int
    state: str
    reward: float | None
    after_gold: bool

    def text(self) -> str:
        mark = {SOLVED: "✓", SUBMITTED: "✗"}.get(self.state, "▶")
        score = f" {self.reward:.2f}" if self.reward is not None and self.state != IN_PROGRESS else ""
        return f"{mark}{score} (attempt {self.attempt}{', after gold' if self.after_gold else ''})"


def attempts_line(marks: list[AttemptMark]) -> str:
    """``✗ 0.00 (attempt 1) · ✓ 1.00 (attempt 2, after gold)``: every attempt, in order."""
    return " · ".join(m.text() for m in marks)


@dataclass
class Progress:
    """What a session has done over a list of tasks."""

    total: int = 0
    solved: int = 0
    attempted: int = 0       # submitted but not solved
    in_progress: int = 0     # started, not submitted
    time_worked: float = 0.0
    by_task: dict[str, TaskStatus] = field(default_factory=dict)

    @property
    def remaining(self) -> int:
        return self.total - self.solved - self.attempted

    def summary(self) -> str:
        return (f"solved {self.solved} · attempted {self.attempted} · remaining {self.remaining}"
                f" of {self.total} · {format_duration(self.time_worked)} worked")

    def parts(self) -> list[str]:
        """The summary in pieces, most important first (for narrow status lines)."""
        return [f"solved {self.solved}/{self.total}", f"attempted {self.attempted}",
                f"remaining {self.remaining}", f"⏱ {format_duration(self.time_worked)}"]


def format_duration(seconds: float) -> str:
    """H:MM:SS, or MM:SS under an hour."""
    seconds = int(max(0.0, seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def status_of(trajectory: Trajectory | None) -> TaskStatus:
    if trajectory is None:
        return TaskStatus()
    turns = trajectory.turns_taken
    if trajectory.status == "submitted":
        state = SOLVED if trajectory.solved else SUBMITTED
    else:
        state = IN_PROGRESS
    return TaskStatus(state, turns, trajectory.reward, trajectory.time_worked)


class SessionNameError(StoreError):
    """A session name that is not a plain folder name."""


_SESSION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_session_name(name: str) -> str:
    """``name`` if it can name a session folder, else ``SessionNameError`` (one line)."""
    if not isinstance(name, str) or not _SESSION_NAME.fullmatch(name):
        raise SessionNameError(f"session name {name!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', "
                               "starting with a letter or digit")
    return name


class Session:
    """A named baseline session: a folder of trajectories, one per task."""

    def __init__(self, name: str = DEFAULT_SESSION, home: str | Path | None = None, root: str | Path | None = None,
                 annotator: str | None = None, study: str | None = None):
        self.name = check_session_name(name)
        self.annotator = annotator       # who plays here (--annotator); recorded in every episode opened
        self.study = study               # the study this session belongs to; recorded in every episode opened
        home = Path(home or home_dir())
        self.root = Path(root) if root is not None else home / "trajectories" / name
        # earlier attempts: ``<home>/attempts/<name>``; a session in a folder of its own (--out)
        # keeps them beside it (``<parent>/.attempts/<folder>``), where report looks for them
        self.store = TrajectoryStore(self.root, attempts=None if root is not None else home / "attempts" / name)
        self.attempts_root = self.store.attempts_root
        self._lock = threading.Lock()
        self.stopped_abandoned = self.store.stop_abandoned()   # episodes whose process died, now ``stopped``
        self.set_aside: list[str] = []     # one sentence per unreadable file moved aside by open_episode

    # -- files -------------------------------------------------------------------------

    def path_for(self, task: Task) -> Path:
        return self.store.task_path(task.set, task.id)

    def load(self, task: Task) -> Trajectory | None:
        """The task's current trajectory in this session, if any."""
        return self.store.load_for(task.set, task.id)

    def save(self, trajectory: Trajectory) -> None:
        with self._lock:
            self.store.save(trajectory)

    def archive(self, task: Task) -> Path | None:
        """Move the task's current trajectory to ``attempts/`` (before a retry)."""
        return self.store.archive(self.path_for(task))

    def attempts(self, task: Task) -> list[Trajectory]:
        """The task's earlier attempts that can be read (an unreadable one is left out)."""
        return readable(self.store.attempt_paths(task.set, task.id))

    def all_attempts(self, task: Task) -> list[Trajectory]:
        """Every readable attempt of the task, the current one last (``attempt`` 1, 2, ...)."""
        return self.store.attempts_of(task.set, task.id)

    def mark_gold_seen(self, trajectory: Trajectory, when: float | None = None) -> bool:
        """Record that the gold of this (submitted) attempt was shown: ``gold_seen_at`` on its
        file, so that every later attempt of the task by the same annotator is marked
        ``after_gold_seen``. False when this session does not hold that attempt as the task's
        current one (it is left as it is)."""
        task = trajectory.task
        try:
            current = self.store.load_for(str(task.get("set", "")), str(task.get("id", "")))
        except TrajectoryFileError:
            return False
        if current is None or current.id != trajectory.id:
            return False
        if trajectory.gold_seen_at is None:
            trajectory.gold_seen_at = time.time() if when is None else when
            self.save(trajectory)
        return True

    # -- progress ----------------------------------------------------------------------

    def _with_kept_attempts(self) -> set[str]:
        """``<set folder>/<task stem>`` of every task with an earlier attempt kept (one listing
        per set folder, not one per task: a picker shows a thousand tasks)."""
        root = self.store.attempts_root
        if not root.is_dir():
            return set()
        return {f"{p.parent.name}/{m['stem']}" for p in root.glob("*/*.json") if (m := ATTEMPT_NAME.fullmatch(p.name))}

    def progress(self, tasks: Iterable[Task]) -> Progress:
        progress = Progress()
        kept = self._with_kept_attempts()
        for task in tasks:
            progress.total += 1
            try:
                trajectory = self.load(task)
            except ValueError:
                trajectory = None
            status = status_of(trajectory)
            if f"{safe_name(task.set)}/{safe_name(task.id)}" in kept:
                status.attempts = [AttemptMark(t.attempt or 0, status_of(t).state, t.reward, t.after_gold_seen)
                                   for t in self.all_attempts(task)]
            progress.by_task[task.key] = status
            progress.time_worked += status.time_worked
            if status.state == SOLVED:
                progress.solved += 1
            elif status.state == SUBMITTED:
                progress.attempted += 1
            elif status.state == IN_PROGRESS:
                progress.in_progress += 1
        return progress

    # -- episodes ----------------------------------------------------------------------

    def open_episode(self, env: Env, task: Task, policy: dict | None = None,
                     on_replay: Callable[[int, int, Turn], None] | None = None,
                     before_save: Callable[[Trajectory], None] | None = None) -> tuple[Episode, int]:
        """An Episode for ``task``: resumed (turns replayed into the fresh env) or new.

        Returns the episode and the number of turns replayed. A submitted trajectory is
        archived first (see ``archive``), so the episode starts fresh: a retry. Callers that
        only want to look at a submitted task load it instead. ``before_save`` runs before
        every save (the TUI stores the time worked there).
        """
        self.store.claim(task.set, task.id)       # TrajectoryBusyError if another process has it
        try:
            return self._open_episode(env, task, policy, on_replay, before_save)
        except BaseException:   # even Ctrl+C: the claim is let go, the error re-raised
            self.store.release(task.set, task.id)
            raise

    def _open_episode(self, env: Env, task: Task, policy: dict | None,
                      on_replay: Callable[[int, int, Turn], None] | None,
                      before_save: Callable[[Trajectory], None] | None) -> tuple[Episode, int]:
        try:
            trajectory = self.load(task)
        except TrajectoryFileError as exc:
            # a file that cannot be resumed is moved aside whole, named, and the task starts afresh
            moved = self.archive(task)
            self.set_aside.append(f"{exc}; kept as {moved}, the task starts afresh")
            trajectory = None
        if trajectory is not None and trajectory.status == "submitted":
            self.archive(task)
            trajectory = None

        def save(traj: Trajectory) -> None:
            if before_save is not None:
                before_save(traj)
            self.save(traj)

        if trajectory is not None:
            trajectory.status = "running"
            trajectory.error = None
            trajectory.policy = without_account(trajectory.policy)
        episode = Episode(env, task, save=save, policy=policy or {"kind": "human"}, trajectory=trajectory,
                          annotator=self.annotator)
        if episode.trajectory.study is None:
            episode.trajectory.study = self.study
        replayed = replay_turns(env, task, episode.trajectory.turns, on_replay) if trajectory is not None else 0
        episode.save()
        return episode, replayed


def replay_turns(env: Env, task: Task, turns: list[Turn],
                 on_replay: Callable[[int, int, Turn], None] | None = None) -> int:
    """Run the saved turns' actions again in ``env``, just reset to ``task``, through the
    driver (a replay policy on a scratch episode: the saved trajectory gets no new turns);
    returns how many ran.

    Rejected proposals and unparsable replies (no action) are skipped. A turn that was
    interrupted or timed out the first time is interrupted again after the time it ran then
    (plus a second).
    """
    runnable = [t for t in turns if t.action]
    if not runnable:
        return 0
    scratch = Episode(env, task, reset=False)

    def shown(n: int, _replayed: Replayed) -> None:
        if on_replay is not None and n + 1 < len(runnable):
            on_replay(n + 2, len(runnable), runnable[n + 1])

    if on_replay is not None:
        on_replay(1, len(runnable), runnable[0])
    replay(scratch, [recorded_turn(t) for t in runnable], on_turn=shown)
    return len(runnable)

