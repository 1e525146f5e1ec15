"""One episode at a time over an icplay env, for library front ends (gymnasium, the
InterCode drop-in, the async API): reset to a task, step a text action, reward on submit
(and after every action under the ``intercode`` protocol). No gymnasium import here.

It sits on ``icplay.envs`` (the sandboxes, pristine resets) and ``icplay.episode`` (the
trajectory, saved after every turn when ``save_dir`` is given), so an episode played
through the library reads back in ``icplay report`` and ``icplay watch``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from icplay.envs import Env, parse_submit
from icplay.languages import make_env
from icplay.episode import AGENT, Episode, Trajectory
from icplay.tasks.model import Task

PROTOCOLS = ("submit", "intercode")
_VOLATILE = ("duration",)  # differs run to run; kept in the trajectory, not in step info


@dataclass
class Outcome:
    """What one step gives back."""

    observation: str
    reward: float
    terminated: bool
    info: dict[str, Any] = field(default_factory=dict)


def load_task_list(tasks: str | Path | list[Task], env_name: str) -> list[Task]:
    """Tasks from a set name, a task file, or a list of tasks (one clear error otherwise)."""
    if isinstance(tasks, list):
        return tasks
    from icplay.tasks.registry import load_tasks

    loaded = load_tasks(str(tasks), env_name)
    if not loaded:
        raise ValueError(f"no tasks in {tasks!s}")
    return loaded


def find_task(tasks: list[Task], task_id: str) -> Task:
    for task in tasks:
        if task.id == task_id or task.key == task_id:
            return task
    raise ValueError(f"no task {task_id!r} in this set ({len(tasks)} tasks, e.g. {tasks[0].id})")


class EpisodeRunner:
    """Reset / step / close over one icplay env; builds the env on first reset.

    ``env_factory`` (a zero-argument callable returning an Env) lets many runners share
    sandbox pools (``icplay.languages.EnvFactory``); by default each runner makes its own env.
    """

    def __init__(self, env_name: str, sandbox: str | None = None, *, image: str | None = None,
                 protocol: str = "submit", save_dir: str | Path | None = None,
                 env_factory: Callable[[], Env] | None = None, **env_options: Any):
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
        self.env_name, self.sandbox, self.image, self.protocol = env_name, sandbox, image, protocol
        self.save_dir = Path(save_dir) if save_dir is not None else None
        self._factory = env_factory or (lambda: make_env(env_name, sandbox, image=image, **env_options))
        self.env: Env | None = None
        self.episode: Episode | None = None
        self.done = True

    @property
    def trajectory(self) -> Trajectory | None:
        return self.episode.trajectory if self.episode is not None else None

    def _saver(self):
        if self.save_dir is None:
            return None
        from icplay.store import TrajectoryStore

        store = TrajectoryStore(self.save_dir)
        return store.save

    def reset(self, task: Task, policy: dict[str, Any] | None = None) -> str:
        """A pristine sandbox for ``task``; returns its query."""
        if self.env is None:
            self.env = self._factory()
        self.episode = Episode(self.env, task, save=self._saver(), policy=policy or {"kind": "library"})
        self.done = False
        return self.episode.query

    def step(self, action: str) -> Outcome:
        if self.episode is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            raise RuntimeError("the episode has ended: call reset() for the next one")
        if not isinstance(action, str):
            raise TypeError(f"an action is a string, not {type(action).__name__}")
        is_submit, arg = parse_submit(action)
        if is_submit:
            result = self.episode.submit(arg)
            self.done = True
            return Outcome("", result.reward, True, {"submitted": True, "reward": result.reward,
                                                     "breakdown": result.breakdown,
                                                     "gold_output": result.gold_output})
        turn = self.episode.act(action, author=AGENT)
        info = {k: v for k, v in turn.info.items() if k not in _VOLATILE}
        info["exit_code"] = turn.exit_code
        info["turn"] = turn.index
        reward = 0.0
        if self.protocol == "intercode":
            scored = self.episode.score()
            reward = scored.reward
            info["breakdown"] = scored.breakdown
            if reward >= 1.0:
                self.episode.submit()   # solved: the episode ends as InterCode's does
                self.done = True
        return Outcome(turn.observation, reward, self.done, info)

    def stop(self) -> None:
        """End an unfinished episode unscored (its trajectory saved ``stopped``)."""
        if self.episode is not None and not self.done:
            self.episode.stop()
        self.done = True

    def close(self) -> None:
        """Stop the episode and remove the sandbox; safe to call twice."""
        self.stop()
        env, self.env = self.env, None
        if env is not None:
            env.close()
