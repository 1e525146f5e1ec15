"""Hand-built study data shared by the report's tests: a study of 3 annotators, 4 tasks, 2 per
task, with a retry after a gold reveal, a running attempt, a stray task and an agent run."""

from __future__ import annotations

import json
from dataclasses import dataclass

from icplay.episode import Trajectory, Turn


@dataclass(frozen=True)
class Study:            # the shape of icplay.study.model.Study the report reads
    name: str
    tasks: tuple[str, ...]
    annotators: tuple[str, ...]
    assignments: dict[str, tuple[str, ...]]


STUDY = Study("pilot", ("s/1", "s/2", "s/3", "s/4"), ("a", "b", "c"),
              {"a": ("s/1", "s/2", "s/3"), "b": ("s/1", "s/3", "s/4"), "c": ("s/2", "s/4")})


def episode(task: str, who: str | None, best: float, turns: int = 2, minutes: float = 0.0, attempt: int | None = 1,
            after_gold: bool = False, strict: bool | None = None, status: str = "submitted",
            kind: str = "human") -> Trajectory:
    """An episode whose last of ``turns`` turns scored ``best``."""
    set_name, task_id = task.split("/")
    steps = [Turn(index=i, author="human" if kind == "human" else "agent", action=f"step {i}", observation="",
                  reward=best if i == turns - 1 else 0.0) for i in range(turns)]
    return Trajectory(task={"set": set_name, "id": task_id}, env="sql", sandbox="local", policy={"kind": kind},
                      turns=steps, status=status, reward=best, best_reward=best, time_worked=60 * minutes,
                      annotator=who, attempt=attempt, after_gold_seen=after_gold,
                      strict=None if strict is None else {"solved": strict, "reasons": [] if strict else ["why"]})


def annotated() -> list[Trajectory]:
    # first attempts (best reward):  s/1: a 1, b 1 | s/2: a 0, c 1 | s/3: a 0.5, b 0 | s/4: b 1, c 1
    # a tries s/2 again after its gold was shown and solves it; c leaves a stray episode of a task
    # outside the study; b's second attempt of s/4 is left running.
    return [
        episode("s/1", "a", 1.0, turns=2, minutes=2, strict=True),
        episode("s/2", "a", 0.0, turns=3, minutes=5),
        episode("s/2", "a", 1.0, turns=1, minutes=1, attempt=2, after_gold=True),
        episode("s/3", "a", 0.5, turns=5, minutes=10),
        episode("s/1", "b", 1.0, turns=1, minutes=4, strict=False),
        episode("s/3", "b", 0.0, turns=4, minutes=6),
        episode("s/4", "b", 1.0, turns=2, minutes=3),
        episode("s/4", "b", 0.0, turns=1, attempt=2, status="running"),
        episode("s/2", "c", 1.0, turns=3, minutes=7),
        episode("s/4", "c", 1.0, turns=4, minutes=8),
        episode("x/9", "c", 1.0),
    ]


def agent_folder(tmp_path):
    # the agent: s/1 solved, s/2 not, s/3 solved, s/4 not
    folder = tmp_path / "run-gpt"
    folder.mkdir()
    for task, best in (("s/1", 1.0), ("s/2", 0.0), ("s/3", 1.0), ("s/4", 0.0)):
        t = episode(task, None, best, turns=3, kind="llm")
        (folder / f"{task.replace('/', '-')}.json").write_text(json.dumps(t.to_dict()))
    (folder / "run.json").write_text(json.dumps({"label": "gpt-agent"}))
    return folder
