"""Policies that need no model: replay recorded actions, or play the gold solution.

``ReplayPolicy`` plays, turn by turn, the actions of a saved icplay trajectory or of an
episode in an InterCode results file (``turn_history``), then submits. A recorded turn
whose reply held no code (InterCode's "No SQL code was found..." observation, or an
icplay turn marked invalid) is replayed as an invalid turn: nothing runs, the turn is used
up and, under the ``intercode`` protocol, scores 0 — exactly as it was recorded.

``GoldPolicy`` plays the task's gold solution and submits: the sanity ceiling every
bundled set must reach 100% on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icplay.episode import AGENT, Proposal, Trajectory, Turn
from icplay.store import TrajectoryFileError
from icplay.tasks.model import Task

INTERCODE_NO_CODE = ("No SQL code", "No Bash code", "No bash code", "No sql code", "No Python code", "No python code")


@dataclass
class Recorded:
    """The actions of one recorded episode; None entries were unparsable replies."""

    actions: list[str | None]
    query: str | None = None
    rewards: list[float | None] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    source: str = ""


def is_intercode_results(data: Any) -> bool:
    """Whether parsed JSON is InterCode's results format ({task_id: {turn_history, ...}})."""
    return isinstance(data, dict) and bool(data) and all(
        isinstance(v, dict) and "turn_history" in v for v in list(data.values())[:5])


def load_intercode_results(path: str | Path) -> dict[str, Recorded]:
    """InterCode's results file (``{task_id: {query, turn_history, summary, ...}}``), by task id."""
    path = Path(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    if not is_intercode_results(data):
        raise TrajectoryFileError(f"{path}: not an InterCode results file (no turn_history)")
    out = {}
    for key, episode in data.items():
        history = episode.get("turn_history") or {}
        actions, observations = list(history.get("actions") or []), list(history.get("observations") or [])
        rewards = list(history.get("rewards") or [])
        replay: list[str | None] = []
        for i, action in enumerate(actions):
            obs = observations[i] if i < len(observations) else ""
            if action == "blocked":
                break
            replay.append(None if str(obs).startswith(INTERCODE_NO_CODE) else str(action))
        task_id = str(episode.get("task_id", key))
        out[task_id] = Recorded(replay, episode.get("query"), rewards, [str(o) for o in observations], str(path))
    return out


def intercode_results_to_trajectories(path: str | Path, env: str = "sql", set_name: str = "spider",
                                      max_turns: int | None = None) -> list[Trajectory]:
    """InterCode's recorded episodes as icplay trajectories (for ``icplay report``)."""
    path = Path(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    if not is_intercode_results(data):
        raise TrajectoryFileError(f"{path}: not an InterCode results file (no turn_history)")
    env = next(iter(data.values())).get("environment", env).removeprefix("ic_")
    out = []
    for key, ep in data.items():
        history = ep.get("turn_history") or {}
        summary = ep.get("summary") or {}
        turns = []
        for i, action in enumerate(history.get("actions") or []):
            obs = str((history.get("observations") or [""] * (i + 1))[i] if i < len(history.get("observations") or []) else "")
            reward = (history.get("rewards") or [None] * (i + 1))[i] if i < len(history.get("rewards") or []) else None
            invalid = obs.startswith(INTERCODE_NO_CODE)
            turns.append(Turn(index=i, author=AGENT, action="" if invalid else str(action), observation=obs,
                              reward=reward, info={"invalid": True, "raw": str(action)} if invalid else {}))
        rewards = [r for r in (history.get("rewards") or []) if r is not None]
        best = summary.get("max_reward", max(rewards) if rewards else None)
        task = {"id": str(ep.get("task_id", key)), "set": set_name, "env": env, "query": ep.get("query", ""),
                "gold": "", "hardness": ep.get("hardness")}
        out.append(Trajectory(task=task, env=env, sandbox="mysql" if env == "sql" else "docker",
                              policy={"kind": "intercode-results", "protocol": "intercode", "source": str(path),
                                      "max_turns": max_turns or summary.get("turns_max")},
                              turns=turns, status="submitted", reward=rewards[-1] if rewards else None,
                              best_reward=best))
    return out


def recorded_from_trajectory(traj: Trajectory, source: str = "") -> Recorded:
    actions: list[str | None] = []
    for turn in traj.turns:
        if turn.info.get("invalid"):
            actions.append(None)
        elif turn.action:
            actions.append(turn.action)
    return Recorded(actions, traj.task.get("query"), [t.reward for t in traj.turns], [], source)


def load_recordings(path: str | Path) -> dict[str, Recorded]:
    """Recorded episodes by task id: an InterCode results file, a trajectory file or a folder of them."""
    from icplay.report import load_logs

    path = Path(path)
    if path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise TrajectoryFileError(f"{path}: not a trajectory or InterCode results file ({exc})") from None
        if is_intercode_results(data):
            return load_intercode_results(path)
    trajectories, _ = load_logs(path)
    return {str(t.task.get("id")): recorded_from_trajectory(t, str(path)) for t in trajectories}


class ReplayPolicy:
    """Plays recorded actions for the tasks it has a recording of, then submits."""

    def __init__(self, recordings: dict[str, Recorded], source: str = ""):
        self.recordings = recordings
        self.source = source

    @classmethod
    def from_path(cls, path: str | Path) -> "ReplayPolicy":
        return cls(load_recordings(path), str(path))

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
        if action is None:
            from icplay.agents.parsing import retry_message

            msg = rec.observations[pos] if pos < len(rec.observations) else retry_message(task.env)
            return Proposal("", None, None, {"invalid": True, "retry_message": msg, "replay": pos})
        return Proposal(action, info={"replay": pos})


class GoldPolicy:
    """Plays the gold solution, then submits (CTF: submits the gold flag)."""

    def describe(self) -> dict[str, Any]:
        return {"kind": "gold"}

    def propose(self, task: Task, trajectory: Trajectory, cancel=None, notify=None) -> Proposal:
        played = trajectory.turns_taken
        if task.env == "ctf":
            return Proposal(f"submit {task.gold}")
        if task.env == "python" and played >= 1:
            import re

            m = re.search(r"^def\s+(\w+)\s*\(", task.gold, re.M)
            return Proposal(f"submit {m.group(1)}" if m else None)
        if played == 0:
            return Proposal(task.gold, thought="the gold solution")
        return Proposal(None)
