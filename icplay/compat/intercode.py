"""InterCode's Python API on icplay: change one import, keep the script.

    # from intercode.envs import BashEnv, SqlEnv, PythonEnv, CTFEnv
    from icplay.compat.intercode import BashEnv, SqlEnv, PythonEnv, CTFEnv

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
resets and rewards. ``PythonEnv`` and ``CTFEnv`` take ``submit NAME`` / ``submit FLAG``.
docs/library.md lists what differs.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

from icplay.library import CallerLoop, Outcome
from icplay.tasks.loaders import read_records, task_from_record
from icplay.tasks.model import Task
from icplay.tasks.registry import intercode_set_beside, task_sets
from icplay.sql.base import SqlBackendError
from icplay.tasks.ctf import IMAGE_TOOLS, mark

if TYPE_CHECKING:   # types only: the SQL env loads with the SQL drop-in
    from icplay.envs.base import Env
    from icplay.envs.sql import SqlEnv as IcplaySqlEnv

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
    wanted = Path(data_path).resolve()
    for task_set in task_sets():
        if task_set.env == env and task_set.path.resolve() == wanted:
            return task_set
    beside = intercode_set_beside(data_path)   # a copy of InterCode's data, e.g. beside a wheel install
    if beside is not None and beside.env == env and all(
            extra is None or extra.exists() for extra in (beside.databases, beside.assets)):
        return beside
    return None


MISSING_DATA_FIX = ("set ICPLAY_INTERCODE to InterCode's data folder (the one holding sql/spider/), keep InterCode's "
                    "layout (ic_spider_dbs.sql beside ic_spider_dev.json, ic_wikisql_dev.sql beside "
                    "ic_wikisql_dev.json), or pass databases=PATH (a dump or a folder of .sql files)")


def _task_image(image_name: str | None, intercodes: str) -> str | None:
    """None (icplay's own image) for an ``icplay-*`` name or InterCode's image of this
    language; any other name is run as the task image, as ``icplay play --image`` does."""
    name = (image_name or "").split(":")[0]
    if not name or name.startswith("icplay-") or name == intercodes:
        return None
    return image_name


def _output_and_error(text: str, ok: bool, notes: list[str] | None = None) -> dict[str, str]:
    """InterCode-Python's observation, ``{"output", "error"}``, from what icplay's interpreter
    printed (an error's line comes last)."""
    text = (text or "").strip()
    if ok:
        return {"output": text, "error": ""}
    lines = text.split("\n") if text else []
    error = lines.pop() if lines else "; ".join(notes or [])
    return {"output": "\n".join(lines).strip(), "error": error}


class IntercodeEnv:
    """What InterCode's ``IntercodeEnv`` offers, over ``icplay.driver.external.CallerLoop``."""

    name = "intercode"
    env_name = ""

    def __init__(self, image_name: str, **kwargs: Any):
        self.kwargs = kwargs
        self.image_name = image_name
        self.logger = logger
        self.verbose = kwargs.get("verbose") is True
        self.tool_mode = True
        self.data_loader: IntercodeDataLoader | None = None
        self.data_path: str | None = kwargs.get("data_path")
        self._set = None
        if self.data_path is not None:
            self.data_loader = IntercodeDataLoader(self.data_path)
            self._set = _known_set(self.data_path, self.env_name)
            self.tool_mode = False
        self.preprocess: Callable[[dict], str] | None = kwargs.get("preprocess")
        if self.preprocess is not None and not callable(self.preprocess):
            raise TypeError("preprocess must be a function of the record returning a command")
        self.traj_dir = kwargs.get("traj_dir") or None
        self.loop = CallerLoop(self.env_name, kwargs.get("sandbox"), image=self._image(),
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
        """icplay's own options: ``timeout`` (seconds per action; 10 as InterCode's by default)."""
        return {"timeout": float(self.kwargs["timeout"])} if self.kwargs.get("timeout") else {}

    def _data_file(self) -> Path:
        """The task file (there is one whenever a task is asked for: reset refuses otherwise)."""
        assert self.data_path is not None, "reset() refuses the tool mode"
        return Path(self.data_path)

    def _task(self, index: int, record: dict[str, Any]) -> Task:
        set_name = self._set.name if self._set is not None else self._data_file().stem
        task = task_from_record(self._data_file(), index, record, self.env_name, set_name)
        if self._set is not None and self._set.databases is not None:
            task.extra.setdefault("databases", str(self._set.databases))
        return task

    def _observation(self, text: str, info: dict[str, Any]) -> Any:
        raise NotImplementedError

    # -- InterCode's API ---------------------------------------------------------------

    def _say(self, message: str) -> None:
        if self.verbose:
            self.logger.info(message)

    def reset(self, index: int | None = None) -> tuple[Any, dict[str, Any]]:
        """A pristine sandbox for task ``index`` (random when None); returns (query, info)."""
        if self.tool_mode:
            raise ValueError("no data_path: icplay's drop-in needs a task file to reset to")
        assert self.data_loader is not None, "made with the data_path"
        self.info, self.trajectory, self.reward = {}, [], None
        self.query_idx = random.randrange(len(self.data_loader)) if index is None else int(index)
        if not 0 <= self.query_idx < len(self.data_loader):
            raise IndexError(f"task index {self.query_idx} out of range (0..{len(self.data_loader) - 1})")
        self.record = self.data_loader.get(self.query_idx)
        task = self._task(self.query_idx, self.record)
        self.query, self.gold = self.record["query"], self.record["gold"]
        self.loop.stop()
        self.observation = self.loop.reset(task, policy={"kind": "intercode-compat"})
        self._say(f"Query: {self.query}")
        if self.preprocess is not None:
            made = self.preprocess(self.record)
            commands = [made] if isinstance(made, str) else list(made)   # InterCode's return a List
            for command in self._preprocess_commands(commands):
                self._execute(command, record=False)
                if not self.info[ACTION_EXEC]:
                    raise RuntimeError(f"Preprocess command failed to execute successfully: {command}")
        return self.observation, self.info

    def _preprocess_commands(self, commands: list[str]) -> list[str]:
        return commands

    def _execute(self, action: str, record: bool = True) -> None:
        if record:
            outcome = self.loop.step(action)
            text, exit_code, info = outcome.observation, outcome.info.get("exit_code"), outcome.info
        else:  # InterCode's preprocess runs outside the trajectory
            result = self._env().step(action)
            text, exit_code, info = result.observation, result.exit_code, result.info
        self.info[ACTION_EXEC] = self._executed(exit_code, info)
        self.observation = self._observation(text, info)

    def _executed(self, exit_code: int | None, info: dict[str, Any]) -> bool:
        return exit_code == 0

    def _env(self) -> Env:
        """The loop's env, which its reset has made."""
        assert self.loop.env is not None, "reset() first"
        return self.loop.env

    def step(self, action: str) -> tuple[Any, float, bool, dict[str, Any]]:
        """Run ``action``; ``submit`` (``submit ARG`` for Python and CTF) ends the episode
        with its reward, ``skip`` ends it unscored."""
        self._say(f"Action: {action}")
        if action == "skip":
            self.loop.stop()
            return "skipped", 0, True, {}
        if action.startswith("submit"):
            self.trajectory.append((action, None))
            reward: float = 0
            info: dict[str, Any] = {}
            if not self.tool_mode:
                reward, info = self.get_reward()
            info[ACTION_EXEC] = True
            return self.observation, reward, True, info
        self._execute(action)
        self._say(f"Observation: {self.observation}")
        self.trajectory.append((action, self.observation))
        return self.observation, 0, False, self.info

    def get_reward(self) -> tuple[float, dict[str, Any]]:
        """Score the episode as its last action, ``submit [ARG]``, asks."""
        last = self.trajectory[-1][0] if self.trajectory else "submit"
        argument = last[len("submit"):].strip()
        outcome = self.loop.step(f"submit {argument}" if argument else "submit")
        self.reward = outcome.reward
        self.info = self._reward_info(outcome, argument)
        self._say(f"Reward: {self.reward}")
        return self.reward, self.info

    def _reward_info(self, outcome: Outcome, argument: str) -> dict[str, Any]:
        """InterCode's info at submit without what gave the reward away: the gold's output
        (InterCode's ``eval_obs``) and the breakdown stay in the saved trajectory
        (``self.loop.trajectory``), out of the step info a trainer may hand its solver."""
        return {REWARD: outcome.reward, AGENT_OBS: str(self.observation), CORRUPT_GOLD: False,
                "solved": outcome.info.get("solved"), "strictly_solved": outcome.info.get("strictly_solved")}

    def get_available_actions(self) -> list | None:
        """InterCode's Bash and SQL envs list none (None); neither does icplay."""
        return None

    def close(self) -> None:
        """Remove the sandbox (an unfinished episode is saved ``stopped`` when traj_dir is set)."""
        self.loop.close()


class BashEnv(IntercodeEnv):
    """InterCode-Bash on icplay: Docker (``sandbox="docker"``), bubblewrap (``"bwrap"``), Podman
    (``"podman"``) or any kind of icplay.sandbox.registry.

    ``image_name``: an ``icplay-*`` name (or ``intercode-bash``) means icplay's own image
    and testbed; any other name (e.g. ``intercode-nl2bash``) is run as the task image, as
    ``icplay play --image`` does."""

    name = "ic_bash"
    env_name = "bash"

    def _image(self) -> str | None:
        return _task_image(self.image_name, "intercode-bash")

    def _observation(self, text: str, info: dict[str, Any]) -> str:
        return text or ""


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

    def reset(self, index: int | None = None) -> tuple[Any, dict[str, Any]]:
        try:
            return super().reset(index)
        except SqlBackendError as exc:
            if self.kwargs.get("databases") or (self._set is not None and self._set.databases is not None):
                raise
            raise SqlBackendError(f"{exc}; {self.data_path} has no databases of its own here: "
                                  f"{MISSING_DATA_FIX}") from None

    def _observation(self, text: str, info: dict[str, Any]) -> Any:
        last = cast("IcplaySqlEnv", self._env()).last
        if last is None:
            return None
        if last.error is not None:
            return f"Error executing query: {last.error}"
        if last.columns is None:
            return None
        return [tuple(row) for row in last.rows]


class PythonEnv(IntercodeEnv):
    """InterCode-Python (MBPP) on icplay: a persistent interpreter in Docker (``sandbox=
    "docker"``, image ``icplay-python``), bubblewrap (``"bwrap"``), Podman (``"podman"``) or
    any kind of icplay.sandbox.registry.

    The observation is InterCode's ``{"output": ..., "error": ...}``; ``submit NAME`` binds
    the gold function's name to ``NAME`` and compares each test's outcome with the gold's.
    ``is_agent`` is accepted: a multi-line ``def`` is always one action (InterCode read
    the rest of a human's function from stdin unless ``is_agent=True``)."""

    name = "ic_python"
    env_name = "python"

    def _image(self) -> str | None:
        return _task_image(self.image_name, "intercode-python")

    def _executed(self, exit_code: int | None, info: dict[str, Any]) -> bool:
        return info.get("interpreter") == "ok"

    def _observation(self, text: str, info: dict[str, Any]) -> dict[str, str]:
        return _output_and_error(text, info.get("interpreter") == "ok", info.get("notes"))

    def _reward_info(self, outcome: Outcome, argument: str) -> dict[str, Any]:
        """InterCode's per-test ``agent_obs`` and ``eval_obs`` named the hidden tests and the
        gold's outcomes: here the info says the function scored and the reward only."""
        return {**super()._reward_info(outcome, argument), AGENT_OBS: self.observation,
                "submitted_function": argument}


class CTFEnv(IntercodeEnv):
    """InterCode-CTF on icplay: a shell in the task's folder, Docker (``icplay-ctf``) or
    bubblewrap (the host's tools); ``submit FLAG`` scores the flag.

    The task's files come from the set's assets (InterCode's ``task_assets/<task_id>``
    beside its ``ic_ctf.json``, or ``assets=``). icplay's reset already enters
    ``/ctf/<id>`` and runs the task's ``setup``, so a ``preprocess`` command equal to the
    record's ``setup`` is not run a second time."""

    name = "ic_ctf"
    env_name = "ctf"

    def _image(self) -> str | None:
        return _task_image(self.image_name, "intercode-ctf")

    def _task(self, index: int, record: dict[str, Any]) -> Task:
        task = super()._task(index, record)
        if self._set is not None:
            assets = self._set.assets
        elif self.kwargs.get("assets"):
            assets = Path(self.kwargs["assets"])
        else:
            assets = self._data_file().parent / "task_assets"
        folder = assets / task.id if assets is not None and (assets / task.id).is_dir() else None
        return mark(task, folder, IMAGE_TOOLS)

    def _preprocess_commands(self, commands: list[str]) -> list[str]:
        setup = str(self.record.get("setup") or "").strip()
        return [c for c in commands if not setup or c.strip() != setup]

    def _observation(self, text: str, info: dict[str, Any]) -> str:
        return text or ""

    def _reward_info(self, outcome: Outcome, argument: str) -> dict[str, Any]:
        return {**super()._reward_info(outcome, argument), AGENT_OBS: argument}
