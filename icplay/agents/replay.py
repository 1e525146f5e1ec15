"""Policies that need no model: replay recorded actions, or play the gold solution.

``ReplayPolicy`` plays, turn by turn, the actions of a saved icplay trajectory or of an
episode in an InterCode results file (``turn_history``) or per-episode log (read by
``icplay.formats``), then submits. A recorded turn
whose reply held no code (InterCode's "No SQL code was found..." observation, or an
icplay turn marked invalid) is replayed as an invalid turn: nothing runs, the turn is used
up and, under the ``intercode`` protocol, scores 0 — exactly as it was recorded.

``GoldPolicy`` plays the task's gold solution and submits: the sanity ceiling every
bundled set must reach 100% on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icplay.agents.parsing import retry_message
from icplay.episode import Proposal, Trajectory
from icplay.formats import intercode
from icplay.formats.native import load_logs
from icplay.languages import find
from icplay.store import TrajectoryFileError
from icplay.tasks.model import Task, TaskFileError

@dataclass
class Recorded:
    """The actions of one recorded episode; None entries were unparsable replies."""

    actions: list[str | None]
    query: str | None = None
    rewards: list[float | None] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    source: str = ""
    indexed: bool = False    # InterCode's: keyed by the task's index in its file, not its id


def recorded_from_intercode(ep: intercode.RecordedEpisode) -> Recorded:
    """The replayable actions of an InterCode episode: stops at a ``blocked`` action; a
    reply with no code (InterCode's policy message) is an invalid turn."""
    replay: list[str | None] = []
    for i, action in enumerate(ep.actions):
        if action == "blocked":
            break
        replay.append(None if ep.no_code(i) else str(action))
    return Recorded(replay, ep.query, list(ep.rewards), ["" if o is None else str(o) for o in ep.observations],
                    ep.source, indexed=True)


def recorded_from_trajectory(traj: Trajectory, source: str = "") -> Recorded:
    """The replayable actions of an icplay trajectory (or of an InterCode episode read as one,
    from a folder: then its observations are kept and a ``blocked`` action ends it)."""
    from_intercode = str(traj.policy.get("kind", "")).startswith("intercode-")
    actions: list[str | None] = []
    observations: list[str] = []
    for turn in traj.turns:
        if from_intercode and turn.action == "blocked":
            break
        if turn.info.get("invalid"):
            actions.append(None)
        elif turn.action:
            actions.append(turn.action)
        else:
            continue
        observations.append(turn.observation if from_intercode else "")
    return Recorded(actions, traj.task.get("query"), [t.reward for t in traj.turns],
                    observations if from_intercode else [], source, indexed=from_intercode)


def load_intercode_results(path: str | Path) -> dict[str, Recorded]:
    """An InterCode results or log file (or folder), by task id (the task's index)."""
    try:
        episodes = intercode.read_results(path)
    except TaskFileError as exc:
        raise TrajectoryFileError(str(exc)) from None
    return {ep.task_key: recorded_from_intercode(ep) for ep in episodes}


def load_recordings(path: str | Path) -> dict[str, Recorded]:
    """Recorded episodes by task id: InterCode results or logs, a trajectory file or a folder of them."""
    path = Path(path)
    if path.is_file():
        try:
            data = intercode.load_json_or_jsonl(path)
        except TaskFileError:
            data = None
        if intercode.is_intercode(data):
            return load_intercode_results(path)
    trajectories, _ = load_logs(path)
    out: dict[str, Recorded] = {}
    for t in trajectories:
        out[str(t.task.get("id"))] = recorded_from_trajectory(t, str(path))
    return out


def by_task_id(recordings: dict[str, Recorded], tasks: list[Task]) -> dict[str, Recorded]:
    """Recordings keyed by an index into ``tasks`` (InterCode's ``task_id``/``query_idx``)
    rekeyed by those tasks' ids, unless the key already is a task id."""
    ids = {t.id for t in tasks}
    out: dict[str, Recorded] = {}
    for key, rec in recordings.items():
        if rec.indexed and key not in ids and key.isdigit() and int(key) < len(tasks):
            key = tasks[int(key)].id
        out.setdefault(key, rec)
    return out


class ReplayPolicy:
    """Plays recorded actions for the tasks it has a recording of, then submits."""

    def __init__(self, recordings: dict[str, Recorded], source: str = ""):
        self.recordings = recordings
        self.source = source

    @classmethod
    def from_path(cls, path: str | Path, tasks: list[Task] | None = None) -> "ReplayPolicy":
        """Recordings of ``path``; with ``tasks`` (the task file in order), InterCode's
        episodes, which name their task by its index, are matched to those tasks' ids."""
        return cls(by_task_id(load_recordings(path), tasks) if tasks else load_recordings(path), str(path))

    def covers(self, task: Task) -> bool:
        return task.id in self.recordings

    def check(self, task: Task) -> str | None:
        """Why this task's recording does not fit it (a different query), else None."""
        rec = self.recordings.get(task.id)
        if rec is None:
            return f"no recorded episode for task {task.id}"
        if rec.query and " ".join(rec.query.split()) != " ".join(task.query.split()):
            return f"task {task.id}: the recording is of another query ({rec.query[:60]!r})"
        return None

    def describe(self) -> dict[str, Any]:
        return {"kind": "replay", "source": self.source}

    def propose(self, task: Task, trajectory: Trajectory, cancel=None, notify=None) -> Proposal:
        rec = self.recordings.get(task.id)
        pos = trajectory.turns_taken
        if rec is None or pos >= len(rec.actions):
            return Proposal(None, info={"replay": pos})
        action = rec.actions[pos]
        if action is None or not action.strip():
            # An empty recorded action ran nothing; it is still a recorded turn. Replayed as
            # an invalid turn it is counted (turn limit, position), so the replay moves on:
            # run as an empty action, it would leave no counted turn and be proposed forever.
            msg = rec.observations[pos] if pos < len(rec.observations) else retry_message(task.env)
            return Proposal("", None, None, {"invalid": True, "retry_message": msg, "replay": pos})
        return Proposal(action, info={"replay": pos})


class GoldPolicy:
    """Plays the gold solution, then submits, as the language's spec says (``gold_actions``:
    Python submits the gold's function name, CTF the gold flag)."""

    def describe(self) -> dict[str, Any]:
        return {"kind": "gold"}

    def propose(self, task: Task, trajectory: Trajectory, cancel=None, notify=None) -> Proposal:
        played = trajectory.turns_taken
        spec = find(task.env)
        actions = spec.gold(task) if spec is not None else [task.gold, "submit"]
        if played >= len(actions) or actions[played].strip() == "submit":
            return Proposal(None)
        action = actions[played]
        if action.startswith("submit "):
            return Proposal(action)
        return Proposal(action, thought="the gold solution" if played == 0 else None)
