"""icplay's environments as gymnasium envs: text in, text out.

``reset(seed=..., options={"task": id, "tasks": set name or task file})`` returns the
task's query and an info dict; ``step(action)`` runs one Bash command or SQL statement
(``submit`` ends the episode and scores it). Under ``protocol="intercode"`` every action
is scored and the episode ends when it is solved.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from icplay.library import CallerLoop, find_task, load_task_list
from icplay.tasks.model import Task

MAX_ACTION = 16_384        # characters of one action
MAX_OBSERVATION = 262_144  # characters of one observation; longer ones are cut (info["cut"])


class AnyText(spaces.Text):
    """``spaces.Text`` holding any Unicode string of a bounded length.

    Commands print any character, so ``contains`` accepts every string within the length
    bounds; ``sample`` draws from ``charset`` (letters, digits, space), which is what
    ``Text`` can enumerate."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText({self.min_length}, {self.max_length})"


class IcplayEnv(gym.Env):
    """One icplay environment (``env_name`` "bash" or "sql") as a gymnasium Env.

    ``tasks``: the default task set (name or file; the bundled set of ``env_name`` when
    None); ``sandbox``: docker/bwrap for Bash, sqlite/mysql for SQL; ``save_dir``: save
    each episode's trajectory there (as ``icplay run --out``).
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, env_name: str, tasks: str | Path | list[Task] | None = None, sandbox: str | None = None,
                 image: str | None = None, protocol: str = "agent", save_dir: str | Path | None = None,
                 render_mode: str | None = None, **env_options: Any):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, not {render_mode!r}")
        self.render_mode = render_mode
        self.env_name = env_name
        self.action_space = AnyText(MAX_ACTION, min_length=1, charset=string.ascii_letters + string.digits + " ")
        self.observation_space = AnyText(MAX_OBSERVATION, min_length=0,
                                         charset=string.ascii_letters + string.digits + " ")
        self._default_tasks = tasks if tasks is not None else env_name
        self._tasks_source: Any = None
        self._tasks: list[Task] = []
        self.loop = CallerLoop(env_name, sandbox, image=image, protocol=protocol, save_dir=save_dir,
                               **env_options)
        self.task: Task | None = None
        self._log: list[str] = []

    @property
    def trajectory(self):
        return self.loop.trajectory

    def _task_list(self, source: Any) -> list[Task]:
        if source is not self._tasks_source or not self._tasks:
            self._tasks = load_task_list(source, self.env_name)
            self._tasks_source = source
        return self._tasks

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        tasks = self._task_list(options.get("tasks", self._default_tasks))
        if options.get("task") is not None:
            task = find_task(tasks, str(options["task"]))
        else:
            task = tasks[int(self.np_random.integers(len(tasks)))]
        self.loop.stop()
        query = self.loop.reset(task)
        self.task = task
        self._log = [f"# {task.key}: {query}"]
        info = {"task": task.key, "task_id": task.id, "set": task.set, "query": query, "db": task.db,
                "hardness": task.hardness}
        return self._cut(query, info), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        outcome = self.loop.step(action)
        self._log.append(f"$ {action}\n{outcome.observation}")
        info = outcome.info
        observation = self._cut(outcome.observation, info)
        return observation, float(outcome.reward), outcome.terminated, False, info

    def _cut(self, text: str, info: dict[str, Any]) -> str:
        if len(text) > MAX_OBSERVATION:
            info["cut"] = len(text)
            return text[:MAX_OBSERVATION]
        return text

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return "\n".join(self._log) + "\n"
        return None

    def close(self) -> None:
        """End the episode (saved ``stopped`` when unfinished) and remove the sandbox."""
        self.loop.close()
        super().close()
