"""InterCode's formats, read (and written) in one place.

Two shapes come out of InterCode, both JSON:

- **results** (``experiments/eval_n_turn.py``, ``results/sql/...``): an object keyed by
  episode, each value ``{environment, dataset, task_id, query, turn_history: {actions,
  observations, rewards, valid_action}, summary: {max_reward, turns_max, ...}, hardness}``;
  the reward at turn k is what InterCode got by submitting right after action k;
- **per-episode logs** (what InterCode's env logging writes, ``logs_ic_sql/...``): one
  episode ``{environment, query_idx, query, gold, reward, trajectory: [{action,
  observation}, ...]}`` with only the final ``reward`` — alone in a file, in a list, one per
  line (JSONL), or several in one object keyed by task index.

``read_results`` turns any of them (a file or a folder of files) into ``RecordedEpisode``
records; ``to_trajectories`` makes icplay trajectories of them (``report``, ``view``) and
``icplay.agents.replay`` replays their actions. ``write_results`` writes icplay
trajectories back as a results file (``icplay export intercode``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from icplay.episode import AGENT, Trajectory, Turn
from icplay.json_shape import DuplicateKeyError, JsonFileError, kind_of, loads, read_json_text
from icplay.tasks.model import TaskFileError

# Observations InterCode's policy wrote when a reply held no code: nothing was executed.
NO_CODE = ("No SQL code", "No Bash code", "No bash code", "No sql code", "No Python code", "No python code")


@dataclass
class RecordedEpisode:
    """One recorded episode: which task, and per turn what ran, was seen and scored."""

    key: str
    task_index: int                  # -1 when the record names its task by id (task_id below)
    actions: list[str]
    observations: list[str | None]
    rewards: list[float | None]      # None where the format recorded no per-turn reward
    final_reward: float | None = None
    executed: list[bool] | None = None   # None: tell from the observations
    joined_rows: bool = False        # logs wrote a rows list as ''.join(map(str, rows))
    query: str | None = None
    gold: str | None = None
    env: str = "sql"
    hardness: str | None = None
    max_turns: int | None = None
    best_reward: float | None = None   # the summary's max_reward, when recorded
    set_name: str | None = None
    source: str = ""
    kind: str = "results"            # results | log
    task_id: str | None = None       # a task id in place of an index (icplay's own recordings)

    @property
    def task_key(self) -> str:
        """The task's id when the record gave one, else its index (as InterCode names tasks)."""
        return self.task_id if self.task_id is not None else str(self.task_index)

    def no_code(self, turn: int) -> bool:
        """Whether turn ``turn`` was a reply with no code (InterCode's policy message)."""
        obs = self.observations[turn] if turn < len(self.observations) else None
        return str(obs or "").startswith(NO_CODE)


def _env_name(record: dict[str, Any], default: str = "sql") -> str:
    env = str(record.get("environment") or default)
    return env.removeprefix("ic_")


def _index(value: Any, where: str, fld: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise TaskFileError(where, f"task index {value!r} is not an index", field=fld) from None


def from_turn_history(key: str, record: dict[str, Any], where: str) -> RecordedEpisode:
    history = record.get("turn_history")
    if not isinstance(history, dict) or not isinstance(history.get("actions"), list):
        raise TaskFileError(where, "expected turn_history with an actions list", field=f"{key}.turn_history")
    actions = [str(a) for a in history["actions"]]
    observations = _padded(history.get("observations"), len(actions))
    rewards = _padded(history.get("rewards"), len(actions))
    task_index, task_id = _task_named(record.get("task_id", key), where, f"{key}.task_id")
    summary = record["summary"] if isinstance(record.get("summary"), dict) else {}
    rewards = [_reward(r, where, f"{key}.turn_history.rewards[{i}]") for i, r in enumerate(rewards[:len(actions)])]
    scored = [r for r in rewards if r is not None]
    return RecordedEpisode(str(key), task_index, actions, observations[:len(actions)], rewards,
                           final_reward=scored[-1] if scored else None, query=record.get("query"),
                           gold=record.get("gold"), env=_env_name(record), hardness=record.get("hardness"),
                           max_turns=summary.get("turns_max"),
                           best_reward=_reward(summary.get("max_reward"), where, f"{key}.summary.max_reward"),
                           set_name=record.get("set"), source=where, kind="results", task_id=task_id)


def _reward(value: Any, where: str, field: str) -> float | None:
    """A recorded reward as a number (None when none was recorded); ``TaskFileError`` naming
    the field for anything else: "yes", "1" or true is never taken for a reward of 1."""
    if value is None:
        return None
    if type(value) not in (int, float):
        raise TaskFileError(where, f"a reward must be a number, not {kind_of(value)} ({json.dumps(value)[:40]})",
                            field=field)
    return float(value)


def _padded(values: Any, n: int) -> list[Any]:
    """A turn history's list cut or padded with None to its ``n`` actions."""
    out = list(values or [])[:n]
    return out + [None] * (n - len(out))


def _task_named(named: Any, where: str, field: str) -> tuple[int, str | None]:
    """(InterCode's task index, None), or (-1, the task id) for a recording keyed by task id."""
    if isinstance(named, str) and named.strip() and not named.strip().lstrip("-").isdigit():
        return -1, named
    return _index(named, where, field), None


def _final_reward(record: dict[str, Any]) -> Any:
    """A log's reward, at its top or in its info."""
    final = record.get("reward")
    if final is None and isinstance(record.get("info"), dict):
        final = record["info"].get("reward")
    return final


def from_log(key: str, record: dict[str, Any], where: str) -> RecordedEpisode:
    trajectory = record.get("trajectory")
    if not isinstance(trajectory, list) or not all(isinstance(t, dict) for t in trajectory):
        raise TaskFileError(where, "expected a trajectory list of {action, observation}", field=f"{key}.trajectory")
    actions = [str(t.get("action", "")) for t in trajectory]
    observations = [t.get("observation") for t in trajectory]
    final = _reward(_final_reward(record), where, f"{key}.reward")
    rewards: list[float | None] = [None] * len(actions)
    if actions and final is not None:
        rewards[-1] = final
    if "query_idx" not in record:
        raise TaskFileError(where, "expected query_idx (the task's index)", field=f"{key}.query_idx")
    task_index = _index(record["query_idx"], where, f"{key}.query_idx")
    return RecordedEpisode(str(key), task_index, actions, observations, rewards,
                           final, executed=[True] * len(actions),
                           joined_rows=True, query=record.get("query"), gold=record.get("gold"),
                           env=_env_name(record), hardness=record.get("hardness"),
                           set_name=record.get("set"), source=where, kind="log")


def _is_results_record(v: Any) -> bool:
    return isinstance(v, dict) and "turn_history" in v


def _is_log_record(v: Any) -> bool:
    return isinstance(v, dict) and "trajectory" in v and ("query_idx" in v or "environment" in v)


def is_intercode(data: Any) -> bool:
    """Whether parsed JSON is one of InterCode's formats (results or logs)."""
    if _is_log_record(data):
        return True
    if isinstance(data, dict) and data:
        head = list(data.values())[:5]
        return all(_is_results_record(v) for v in head) or all(_is_log_record(v) for v in head)
    if isinstance(data, list) and data:
        return all(_is_results_record(v) or _is_log_record(v) for v in data[:5])
    return False


def _from_mapping(data: dict[str, Any], where: str) -> list[RecordedEpisode]:
    """A results file keyed by task: each value a log record or a turn_history episode
    (values that are not objects are left out)."""
    out = []
    for k, v in data.items():
        if not isinstance(v, dict):
            continue
        out.append(from_log(k, v, where) if _is_log_record(v) and "turn_history" not in v
                   else from_turn_history(k, v, where))
    return out


def _from_item(i: int, item: Any, where: str, stem: str) -> RecordedEpisode:
    """Record ``i`` of a list file: a trajectory log or a turn_history episode."""
    if _is_log_record(item):
        return from_log(f"{stem}:{i}", item, where)
    if _is_results_record(item):
        return from_turn_history(str(item.get("task_id", i)), item, where)
    raise TaskFileError(where, "neither a turn_history episode nor a trajectory log", record=i)


def parse(data: Any, where: str, stem: str) -> list[RecordedEpisode]:
    """Episodes of parsed JSON in any InterCode shape (``TaskFileError`` if none)."""
    if isinstance(data, dict) and _is_log_record(data):
        return [from_log(stem, data, where)]
    if isinstance(data, dict):
        return _from_mapping(data, where)
    if isinstance(data, list):
        return [_from_item(i, item, where, stem) for i, item in enumerate(data)]
    raise TaskFileError(where, "not an InterCode results or log file")


def load_json_or_jsonl(path: Path) -> Any:
    """A JSON or JSON Lines file, refused early when huge or deeply nested (``read_json_text``)."""
    try:
        text = read_json_text(path, "a trajectory or results file")
    except JsonFileError as exc:
        raise TaskFileError(path, exc.reason) from None
    except UnicodeDecodeError as exc:
        raise TaskFileError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise TaskFileError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        return loads(text)
    except DuplicateKeyError as exc:
        raise TaskFileError(path, str(exc)) from None
    except json.JSONDecodeError as whole:
        try:
            return [_record(path, number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
        except json.JSONDecodeError:
            raise TaskFileError(path, f"not JSON or JSONL: {whole.msg} at line {whole.lineno} column "
                                      f"{whole.colno}") from None


def _record(path: Path, number: int, line: str) -> Any:
    """One line of a JSON Lines file; a key stated twice is refused naming the line."""
    try:
        return loads(line)
    except DuplicateKeyError as exc:
        raise TaskFileError(path, f"line {number}: {exc}") from None


def read_results(path: str | Path) -> list[RecordedEpisode]:
    """Every recorded episode of an InterCode results file, log file or folder of them."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.json")) + sorted(path.glob("*.jsonl"))
        episodes = []
        for file in files:
            episodes.extend(read_results(file))
        if not episodes:
            raise TaskFileError(path, "no InterCode results or logs in this folder")
        return episodes
    if not path.exists():
        raise TaskFileError(path, "no such file or folder")
    return parse(load_json_or_jsonl(path), str(path), path.stem)


def to_trajectory(ep: RecordedEpisode, set_name: str = "spider") -> Trajectory:
    """An icplay trajectory of a recorded episode (agent turns; no-code replies invalid)."""
    turns = [_recorded_turn(ep, i, action) for i, action in enumerate(ep.actions)]
    task: dict[str, Any] = {"id": ep.task_key, "set": ep.set_name or set_name, "env": ep.env, "hardness": ep.hardness}
    # only what the file recorded: a query or gold it lacks is not claimed to be "" (icplay.tasks.trusted)
    task.update({k: v for k, v in (("query", ep.query), ("gold", ep.gold)) if v})
    if ep.task_id is None:
        task["index"] = ep.task_index
    return Trajectory(task=task, env=ep.env, sandbox="mysql" if ep.env == "sql" else "docker",
                      policy={"kind": f"intercode-{ep.kind}", "protocol": "intercode", "source": ep.source,
                              "max_turns": ep.max_turns},
                      turns=turns, status="submitted", reward=ep.final_reward, best_reward=_best_reward(ep))


def _best_reward(ep: RecordedEpisode) -> float | None:
    """The recorded best reward, else the best of the turns' rewards (None when none was scored)."""
    scored = [r for r in ep.rewards if r is not None]
    return ep.best_reward if ep.best_reward is not None else (max(scored) if scored else None)


def _recorded_turn(ep: RecordedEpisode, i: int, action: str) -> Turn:
    """Turn ``i`` of a recorded episode: its observation and reward when recorded; a reply
    without code is an invalid turn keeping the raw reply."""
    obs = str(ep.observations[i]) if i < len(ep.observations) and ep.observations[i] is not None else ""
    reward = ep.rewards[i] if i < len(ep.rewards) else None
    invalid = ep.no_code(i)
    return Turn(index=i, author=AGENT, action="" if invalid else action, observation=obs,
                reward=reward, info={"invalid": True, "raw": action} if invalid else {})


def to_trajectories(episodes: Iterable[RecordedEpisode], set_name: str = "spider") -> list[Trajectory]:
    return [to_trajectory(ep, set_name) for ep in episodes]
