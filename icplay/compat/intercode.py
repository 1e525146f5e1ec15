"""InterCode's Python API on icplay: change one import, keep the script.

    # from intercode.envs import BashEnv, SqlEnv
    from icplay.compat.intercode import BashEnv, SqlEnv

    env = SqlEnv("docker-env-sql", data_path=".../ic_spider_dev.json", preprocess=preprocess_sql)
    for i in range(len(env.data_loader)):
        env.reset(i)
        obs, reward, done, info = env.step(env.gold)
        obs, reward, done, info = env.step("submit")

Same constructor (``image_name, data_path=, preprocess=, traj_dir=, verbose=``), methods
(``reset(index)``, ``step(action)`` -> ``(observation, reward, done, info)``,
``get_available_actions()``, ``close()``) and attributes (``query``, ``gold``,
``observation``, ``record``, ``query_idx``, ``reward``, ``trajectory``, ``info``,
``data_loader`` with ``len`` and ``get(i)``). Underneath: icplay's sandboxes, pristine
resets and rewards. docs/library.md lists what differs.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any, Callable

from icplay.library import EpisodeRunner
from icplay.tasks.loaders import read_records, task_from_record
from icplay.tasks.model import Task

AGENT_OBS, EVAL_OBS, CORRUPT_GOLD, ACTION_EXEC, REWARD = (
    "agent_obs", "eval_obs", "corrupt_gold", "action_executed", "reward")

logger = logging.getLogger("icplay.compat.intercode")


class IntercodeDataLoader:
    """The task file's records as InterCode's loader gives them: ``len``, ``get(i)``."""

    def __init__(self, data_path: str | Path):
        self.data_path = str(data_path)
        path = Path(data_path)
        if not path.exists():
            raise OSError(f"Invalid file path: {data_path}")
        if path.suffix not in (".json", ".jsonl"):
            raise ValueError(f"File type is not supported: {path.suffix} (icplay reads JSON and JSONL task files)")
        self.data = read_records(path)
        if not isinstance(self.data, list) or not all(isinstance(r, dict) for r in self.data):
            raise ValueError(f"{data_path}: expected a list of records")
        missing = [i for i, r in enumerate(self.data) if "query" not in r or "gold" not in r]
        if missing:
            raise ValueError(f"Data must have columns/fields 'gold' and 'query' (record {missing[0]} lacks one)")

    def get(self, index: int | None = None) -> dict[str, Any]:
        if index is None:
            index = random.randrange(len(self.data))
        return dict(self.data[index])

    def __len__(self) -> int:
        return len(self.data)


def _known_set(data_path: str | Path, env: str):
    """The registry's task set for this file (so Spider gets its databases), if any."""
    from icplay.tasks.registry import task_sets

    wanted = Path(data_path).resolve()
    for task_set in task_sets():
        if task_set.env == env and task_set.path.resolve() == wanted:
            return task_set
    return None


class IntercodeEnv:
    """What InterCode's ``IntercodeEnv`` offers, over ``icplay.library.EpisodeRunner``."""

    name = "intercode"
    env_name = ""

    def __init__(self, image_name: str, **kwargs: Any):
        self.kwargs = kwargs
        self.image_name = image_name
        self.logger = logger
        self.verbose = kwargs.get("verbose") is True
        self.tool_mode = True
        self.data_loader: IntercodeDataLoader | None = None
        self.data_path = kwargs.get("data_path")
        self._set = None
        if self.data_path is not None:
            self.data_loader = IntercodeDataLoader(self.data_path)
            self._set = _known_set(self.data_path, self.env_name)
            self.tool_mode = False
        self.preprocess: Callable[[dict], str] | None = kwargs.get("preprocess")
        if self.preprocess is not None and not callable(self.preprocess):
            raise TypeError("preprocess must be a function of the record returning a command")
        self.traj_dir = kwargs.get("traj_dir") or None
        self.runner = EpisodeRunner(self.env_name, kwargs.get("sandbox"), image=self._image(),
                                    save_dir=self.traj_dir, **self._env_options())
        self.info: dict[str, Any] = {}
        self.trajectory: list[tuple[str, Any]] = []
        self.observation: Any = None
        self.query = self.gold = None
        self.record: dict[str, Any] = {}
        self.query_idx: int | None = None
        self.reward: float | None = None
        self._say(f"icplay {self.env_name} environment ready")

    # -- what subclasses adapt --------------------------------------------------------

    def _image(self) -> str | None:
        return None

    def _env_options(self) -> dict[str, Any]:
        return {}

    def _task(self, index: int, record: dict[str, Any]) -> Task:
        set_name = self._set.name if self._set is not None else Path(self.data_path).stem
        task = task_from_record(Path(self.data_path), index, record, self.env_name, set_name)
        if self._set is not None and self._set.databases is not None:
            task.extra.setdefault("databases", str(self._set.databases))
        return task

    def _observation(self) -> Any:
        raise NotImplementedError

    # -- InterCode's API ---------------------------------------------------------------

    def _say(self, message: str) -> None:
        if self.verbose:
            self.logger.info(message)

    def reset(self, index: int | None = None) -> tuple[Any, dict[str, Any]]:
        """A pristine sandbox for task ``index`` (random when None); returns (query, info)."""
        if self.tool_mode:
            raise ValueError("no data_path: icplay's drop-in needs a task file to reset to")
        self.info, self.trajectory, self.reward = {}, [], None
        self.query_idx = random.randrange(len(self.data_loader)) if index is None else int(index)
        if not 0 <= self.query_idx < len(self.data_loader):
            raise IndexError(f"task index {self.query_idx} out of range (0..{len(self.data_loader) - 1})")
        self.record = self.data_loader.get(self.query_idx)
        task = self._task(self.query_idx, self.record)
        self.query, self.gold = self.record["query"], self.record["gold"]
        self.runner.stop()
        self.observation = self.runner.reset(task, policy={"kind": "intercode-compat"})
        self._say(f"Query: {self.query}")
        if self.preprocess is not None:
            command = self.preprocess(self.record)
            self._execute(command, record=False)
            if not self.info[ACTION_EXEC]:
                raise RuntimeError(f"Preprocess command failed to execute successfully: {command}")
        return self.observation, self.info

    def _execute(self, action: str, record: bool = True) -> None:
        env = self.runner.env
        if record:
            outcome = self.runner.step(action)
            self.info[ACTION_EXEC] = outcome.info.get("exit_code") == 0
        else:  # InterCode's preprocess runs outside the trajectory
            result = env.step(action)
            self.info[ACTION_EXEC] = result.exit_code == 0
        self.observation = self._observation()

    def step(self, action: str) -> tuple[Any, float, bool, dict[str, Any]]:
        """Run ``action``; ``submit`` ends the episode with its reward."""
        self._say(f"Action: {action}")
        if action == "submit":
            reward, info = 0, {}
            if not self.tool_mode:
                reward, info = self.get_reward()
            info[ACTION_EXEC] = True
            return self.observation, reward, True, info
        self._execute(action)
        self._say(f"Observation: {self.observation}")
        self.trajectory.append((action, self.observation))
        return self.observation, 0, False, self.info

    def get_reward(self) -> tuple[float, dict[str, Any]]:
        outcome = self.runner.step("submit")
        self.reward = outcome.reward
        info = {REWARD: outcome.reward, AGENT_OBS: str(self.observation),
                EVAL_OBS: outcome.info.get("gold_output", ""), CORRUPT_GOLD: False,
                "breakdown": outcome.info.get("breakdown", {})}
        self.info = info
        self._say(f"Reward: {self.reward}")
        return self.reward, info

    def get_available_actions(self) -> list | None:
        """InterCode's Bash and SQL envs list none (None); neither does icplay."""
        return None

    def close(self) -> None:
        """Remove the sandbox (an unfinished episode is saved ``stopped`` when traj_dir is set)."""
        self.runner.close()


class BashEnv(IntercodeEnv):
    """InterCode-Bash on icplay: Docker (``sandbox="docker"``) or bubblewrap (``"bwrap"``).

    ``image_name``: an ``icplay-*`` name (or ``intercode-bash``) means icplay's own image
    and testbed; any other name (e.g. ``intercode-nl2bash``) is run as the task image, as
    ``icplay play --image`` does."""

    name = "ic_bash"
    env_name = "bash"

    def _image(self) -> str | None:
        name = (self.image_name or "").split(":")[0]
        if not name or name.startswith("icplay-") or name == "intercode-bash":
            return None
        return self.image_name

    def _observation(self) -> str:
        return self.runner.env.last_output or ""


class SqlEnv(IntercodeEnv):
    """InterCode-SQL on icplay: SQLite (default, ``sandbox="sqlite"``) or MariaDB (``"mysql"``).

    ``image_name`` is accepted and ignored: the databases come from the task set (Spider's
    and WikiSQL's dumps when ``data_path`` is their file, else ``databases=``)."""

    name = "ic_sql"
    env_name = "sql"

    def _task(self, index: int, record: dict[str, Any]) -> Task:
        task = super()._task(index, record)
        if self.kwargs.get("databases"):
            task.extra["databases"] = str(self.kwargs["databases"])
        return task

    def _observation(self) -> Any:
        last = self.runner.env.last
        if last is None:
            return None
        if last.error is not None:
            return f"Error executing query: {last.error}"
        if last.columns is None:
            return None
        return [tuple(row) for row in last.rows]
