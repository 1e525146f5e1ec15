"""An annotator's queue: the tasks assigned to her, in her order, and where she is in it.

Nothing is stored about the queue itself: its state is read from the trajectories the
annotator has saved in the study (``study_trajectories``), so it cannot drift from them, and a
queue left yesterday resumes today where the files say (an unfinished task is resumed, its
turns replayed, by the session). A task is *done* when its latest attempt is submitted or was
ended by the time limit; *in progress* when it has a saved episode that is not done.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from icplay.episode import Trajectory
from icplay.session import Session, format_duration
from icplay.study.model import Study, StudyFileError, sessions_dir, study_trajectories
from icplay.study.rules import PlayRules, ended
from icplay.tasks.model import Task, TaskFileError
from icplay.tasks.registry import find_set

NEW, IN_PROGRESS, DONE = "new", "in progress", "done"


@dataclass
class Entry:
    """One assigned task and its attempts by this annotator (attempt order)."""

    ref: str
    attempts: list[Trajectory] = field(default_factory=list)
    state: str = NEW

    @property
    def latest(self) -> Trajectory | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def time_worked(self) -> float:
        return sum(t.time_worked for t in self.attempts)


class Queue:
    """``annotator``'s tasks in ``study``; ``refresh()`` reads the files again."""

    def __init__(self, study: Study, annotator: str, home: Path | None = None):
        if annotator not in study.annotators:
            raise StudyFileError(f"--annotator: {annotator!r} is not an annotator of study {study.name!r} "
                                 f"(one of: {', '.join(study.annotators)})")
        self.study, self.annotator, self.home = study, annotator, home
        self.skipped: list = []
        self.entries: list[Entry] = []
        self.refresh()

    def refresh(self) -> "Queue":
        self.skipped = []
        mine: dict[str, list[Trajectory]] = {}
        seen: set[str] = set()
        for t in study_trajectories(self.study, self.home, self.skipped, annotators=(self.annotator,)):
            if t.id in seen:
                continue
            seen.add(t.id)
            mine.setdefault(t.task_key, []).append(t)
        self.entries = []
        for ref in self.study.assigned_to(self.annotator):
            attempts = sorted(mine.get(ref, []), key=lambda t: (t.attempt or 0, t.started_at))
            entry = Entry(ref, attempts)
            if attempts:
                entry.state = DONE if ended(attempts[-1], self.study.rules) else IN_PROGRESS
            self.entries.append(entry)
        return self

    # -- where she is --------------------------------------------------------------------
    def entry(self, ref: str) -> Entry:
        """The entry of a task ref ``SET/ID`` (or of a bare id, when one task has it)."""
        for entry in self.entries:
            if entry.ref == ref:
                return entry
        by_id = [e for e in self.entries if e.ref.partition("/")[2] == ref]
        if len(by_id) == 1:
            return by_id[0]
        raise StudyFileError(f"{ref!r} is not in {self.annotator}'s queue of study {self.study.name!r}")

    def next_entry(self) -> Entry | None:
        """The first task in her order that is not done (an unfinished one is resumed)."""
        return next((e for e in self.entries if e.state != DONE), None)

    def position(self, ref: str) -> int:
        return [e.ref for e in self.entries].index(ref) + 1

    @property
    def done(self) -> int:
        return sum(1 for e in self.entries if e.state == DONE)

    @property
    def left(self) -> int:
        return len(self.entries) - self.done

    @property
    def attempts(self) -> int:
        return sum(len(e.attempts) for e in self.entries)

    @property
    def time_worked(self) -> float:
        return sum(e.time_worked for e in self.entries)

    def summary(self) -> str:
        return (f"study {self.study.name} · {self.annotator}: {self.done} done, {self.left} left of "
                f"{len(self.entries)} · {format_duration(self.time_worked)} worked")

    # -- playing -------------------------------------------------------------------------
    def start_again(self, task: Task) -> str | None:
        """Ready ``task`` for a new attempt: None when the study's rules allow it (an episode the
        time limit ended is then kept as an attempt, so the retry starts afresh instead of
        resuming it), else the refusal, one sentence."""
        entry = self.refresh().entry(task.key)
        rules = PlayRules.of(self.study)
        refusal = rules.retry_refusal(entry.attempts)
        if refusal is not None:
            return refusal
        session = self.session()
        current = session.load(task)
        if current is not None and rules.timed_out(current):
            session.archive(task)
        return None

    def session(self) -> Session:
        """The annotator's session folder in the study (``sessions/<annotator>/``)."""
        return Session(self.annotator, root=sessions_dir(self.study, self.home) / self.annotator,
                       annotator=self.annotator, study=self.study.name)


def resolve(ref: str, where: str = "", task_files: dict[str, dict[str, str]] | None = None) -> Task:
    """The task a ref ``SET/ID`` names, from the set of that name (one of the study's
    ``task_files`` first: a lead's own file, with its environment); ``StudyFileError`` if none."""
    set_name, _, task_id = ref.partition("/")
    own = (task_files or {}).get(set_name)
    try:
        task_set = find_set(own["path"], own["env"]) if own is not None else find_set(set_name)
        for task in task_set.load():
            if task.id == task_id:
                return task
    except TaskFileError as exc:
        raise StudyFileError(f"{where or 'the study'}: task {ref!r}: {exc}") from None
    raise StudyFileError(f"{where or 'the study'}: task {ref!r}: set {set_name!r} has no task {task_id!r}")
