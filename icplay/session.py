"""Baseline sessions: one trajectory per task, progress over a task set, and resume.

A *session* is a named folder, ``$ICPLAY_HOME/trajectories/<name>/`` (default home
``~/.icplay``), the same folder ``icplay play --plain --session NAME`` writes, in which a
human works through tasks. It keeps exactly one current trajectory per task
(``<set>/<id>.json``, the TrajectoryStore layout, so ``icplay report`` reads it as is);
starting a task again after submitting it first moves the old file to
``$ICPLAY_HOME/attempts/<name>/<set>/<id>.<n>.json``, so nothing is ever overwritten.

Resuming: a trajectory that was not submitted is picked up where it was. The env is reset
to the task's initial state and the saved turns are replayed into it (their actions run
again, in order), so the fresh sandbox or database holds what the human had built. Turns
that were interrupted or timed out are cut after the time they ran the first time.

Nothing here imports textual: the TUI, the plain REPL and scripts share this module.
"""

from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from icplay.envs.base import Env
from icplay.episode import Episode, Trajectory, Turn
from icplay.paths import home_dir
from icplay.store import TrajectoryStore, atomic_write_text, load_trajectory, safe_name, trajectory_json
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


class Session:
    """A named baseline session: a folder of trajectories, one per task."""

    def __init__(self, name: str = DEFAULT_SESSION, home: str | Path | None = None, root: str | Path | None = None):
        self.name = name
        home = Path(home or home_dir())
        self.root = Path(root) if root is not None else home / "trajectories" / safe_name(name)
        self.attempts_root = home / "attempts" / safe_name(name)
        self.store = TrajectoryStore(self.root)
        self._lock = threading.Lock()

    # -- files -------------------------------------------------------------------------

    def path_for(self, task: Task) -> Path:
        return self.store.root / safe_name(task.set) / f"{safe_name(task.id)}.json"

    def load(self, task: Task) -> Trajectory | None:
        """The task's current trajectory in this session, if any."""
        return self.store.load_for(task.set, task.id)

    def save(self, trajectory: Trajectory) -> None:
        text = trajectory_json(trajectory)
        with self._lock:
            atomic_write_text(self.store.path_for(trajectory), text)

    def archive(self, task: Task) -> Path | None:
        """Move the task's current trajectory to ``attempts/`` (before a retry)."""
        path = self.path_for(task)
        if not path.exists():
            return None
        folder = self.attempts_root / safe_name(task.set)
        folder.mkdir(parents=True, exist_ok=True)
        n = 1
        while (folder / f"{safe_name(task.id)}.{n}.json").exists():
            n += 1
        target = folder / f"{safe_name(task.id)}.{n}.json"
        shutil.move(str(path), target)
        return target

    def attempts(self, task: Task) -> list[Trajectory]:
        folder = self.attempts_root / safe_name(task.set)
        paths = sorted(folder.glob(f"{safe_name(task.id)}.*.json"), key=lambda p: int(p.name.split(".")[-2]))
        return [load_trajectory(p) for p in paths]

    # -- progress ----------------------------------------------------------------------

    def progress(self, tasks: Iterable[Task]) -> Progress:
        progress = Progress()
        for task in tasks:
            progress.total += 1
            try:
                trajectory = self.load(task)
            except ValueError:
                trajectory = None
            status = status_of(trajectory)
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
        trajectory = self.load(task)
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
        episode = Episode(env, task, save=save, policy=policy or {"kind": "human"}, trajectory=trajectory)
        replayed = replay_turns(env, episode.trajectory.turns, on_replay) if trajectory is not None else 0
        episode.save()
        return episode, replayed


def replay_turns(env: Env, turns: list[Turn], on_replay: Callable[[int, int, Turn], None] | None = None) -> int:
    """Run the saved turns' actions again in a freshly reset env; returns how many ran.

    Rejected proposals (no action) are skipped. A turn that was interrupted or timed out
    the first time is interrupted again after the time it ran then (plus a second).
    """
    runnable = [t for t in turns if t.action]
    for n, turn in enumerate(runnable, start=1):
        if on_replay is not None:
            on_replay(n, len(runnable), turn)
        timer = None
        if turn.info.get("interrupted") or turn.info.get("timed_out"):
            timer = threading.Timer(max(0.1, turn.duration) + 1.0, env.interrupt)
            timer.daemon = True
            timer.start()
        try:
            env.step(turn.action)
        finally:
            if timer is not None:
                timer.cancel()
    return len(runnable)


def list_sessions(home: str | Path | None = None) -> list[str]:
    root = Path(home or home_dir()) / "trajectories"
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
