"""Task health: every attempt at a task, human and agent, read together to find tasks that
look broken rather than hard.

A task is listed when nobody solved it, when its gold fails or nothing can strictly solve it
(``icplay tasks --check``'s gold check, or the strict verdicts of its attempts saying so),
when humans and agents split on it (one side solves it at least half the time more often
than the other), or when every attempt that solved it is a reward-hack suspect.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from icplay.episode import Trajectory
from icplay.scan.flags import Flag

NOBODY, GOLD, SPLIT, SUSPECTS = "nobody-solved", "gold-broken", "humans-agents-split", "solved-only-by-suspects"
FINDINGS = {
    NOBODY: "no attempt, human or agent, solved it",
    GOLD: "its gold fails or nothing can strictly solve it",
    SPLIT: "humans and agents split on it",
    SUSPECTS: "every attempt that solved it is a reward-hack suspect",
}
SPLIT_GAP = 0.5
# how a strict verdict says the task itself, not the attempt, is at fault (icplay.envs.sql)
UNSOLVABLE = "cannot be strictly solved"


@dataclass
class TaskHealth:
    """One task's attempts and what is wrong with it (``findings``: finding -> evidence)."""

    set: str
    task: str
    env: str = ""
    humans: int = 0
    humans_solved: int = 0
    agents: int = 0
    agents_solved: int = 0
    strict_solved: int = 0
    suspects: int = 0
    findings: dict[str, str] = field(default_factory=dict)

    @property
    def attempts(self) -> int:
        return self.humans + self.agents

    @property
    def solved(self) -> int:
        return self.humans_solved + self.agents_solved

    def to_dict(self) -> dict[str, Any]:
        return {"set": self.set, "task": self.task, "env": self.env, "attempts": self.attempts,
                "humans": self.humans, "humans_solved": self.humans_solved, "agents": self.agents,
                "agents_solved": self.agents_solved, "strict_solved": self.strict_solved,
                "suspects": self.suspects, "findings": dict(self.findings)}


def _is_human(traj: Trajectory) -> bool:
    return str(traj.policy.get("kind") or "human") == "human"


def _add(row: TaskHealth, traj: Trajectory, flags: list[Flag], solved_by: dict[str, list[bool]]) -> None:
    suspect = any(f.kind == "reward-hack-suspect" for f in flags)
    if _is_human(traj):
        row.humans += 1
        row.humans_solved += traj.solved
    else:
        row.agents += 1
        row.agents_solved += traj.solved
    row.strict_solved += traj.strictly_solved is True
    row.suspects += suspect
    if traj.solved:
        solved_by.setdefault(traj.task_key, []).append(suspect)
    reason = next((r for r in traj.strict_reasons if UNSOLVABLE in r), None)
    if reason and GOLD not in row.findings:
        row.findings[GOLD] = reason


def _judge(row: TaskHealth, suspects: list[bool]) -> None:
    if not row.solved:
        row.findings[NOBODY] = f"0 of {row.attempts} attempts solved it"
    if row.humans and row.agents:
        humans, agents = row.humans_solved / row.humans, row.agents_solved / row.agents
        if abs(humans - agents) >= SPLIT_GAP:
            row.findings[SPLIT] = (f"humans {row.humans_solved}/{row.humans}, agents {row.agents_solved}/{row.agents}")
    if suspects and all(suspects):
        row.findings[SUSPECTS] = f"all {len(suspects)} solving attempts are suspects"


class HealthTally:
    """Task health counted one attempt at a time (no trajectory is kept)."""

    def __init__(self) -> None:
        self.rows: dict[str, TaskHealth] = {}
        self.solved_by: dict[str, list[bool]] = {}

    def add(self, traj: Trajectory, flags: list[Flag]) -> None:
        key = traj.task_key
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = TaskHealth(str(traj.task.get("set", "")), str(traj.task.get("id", "")), traj.env)
        _add(row, traj, flags, self.solved_by)

    def result(self, gold_problems: dict[str, str] | None = None) -> list[TaskHealth]:
        """Every task, by set and id, judged; ``gold_problems``: ``set/id`` -> why its gold cannot
        be trusted (the gold check), added to what the attempts show."""
        for key, row in self.rows.items():
            for judged in (NOBODY, SPLIT, SUSPECTS):      # judged again from the counts
                row.findings.pop(judged, None)
            _judge(row, self.solved_by.get(key, []))
            if gold_problems and key in gold_problems:
                row.findings[GOLD] = gold_problems[key]
        return sorted(self.rows.values(), key=lambda r: (r.set, _task_order(r.task)))


def _task_order(task: str) -> tuple[int, str]:
    return (int(task), "") if task.isdigit() else (1 << 62, task)


def finding_counts(rows: list[TaskHealth]) -> dict[str, int]:
    """How many tasks have each finding."""
    return {name: sum(name in r.findings for r in rows) for name in FINDINGS}
