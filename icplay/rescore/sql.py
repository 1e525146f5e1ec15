"""Re-execute InterCode's recorded SQL episodes and recompute every turn's reward.

Useful to anyone who fixes a gold answer, changes the reward or swaps the database
server: it says which recorded numbers still hold. Two InterCode formats are read:

- the results file of ``experiments/eval_n_turn.py`` (``results/sql/...``): a JSON object
  of episodes keyed by index, each with ``task_id`` and a ``turn_history`` of parallel
  ``actions`` / ``observations`` / ``rewards`` lists, the reward being what InterCode got
  by submitting right after that action;
- the per-episode logs InterCode's env writes (``logs_ic_sql/log_*.json``): one object
  with ``query_idx``, a ``trajectory`` of ``{action, observation}`` and the final
  ``reward`` (a file, a folder of them, a JSON list, JSONL, or an object of them keyed by
  task index); only the final reward is compared, with the reward after the last action.

Both are read by ``icplay.formats.intercode`` (``read_results``).

Each episode starts on a pristine database (InterCode never reset it) and runs its
actions in order; after each one the last observation is scored against the gold rows
(computed once per episode on the pristine database). A turn whose recorded observation
is a message of InterCode's policy rather than of the database ("No SQL code was found
...") was never executed and scored 0 there; it is skipped and scored 0 here too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from icplay.formats.intercode import RecordedEpisode, read_results  # noqa: F401  (the one reader)
from icplay.rescore import AGREE_WITHIN, Summary, TurnRecord, replay_all, summarize, turn_record  # noqa: F401
from icplay.sql.base import ERROR_PREFIX, SqlBackendError
from icplay.tasks.model import Task

# --- reading InterCode's formats ------------------------------------------------------------


def _is_database_observation(observation: str | None) -> bool:
    """Did this observation come from the database (so the action was executed)?"""
    if observation is None:
        return True
    return observation.startswith(("[", ERROR_PREFIX)) or observation == "None"


# --- re-executing -----------------------------------------------------------------------


def rescore_episode(env, episode: RecordedEpisode, task: Task) -> list[TurnRecord]:
    """Replay one episode in ``env`` (a SqlEnv) from a pristine database."""
    env.reset(task)
    records = []
    for turn, (action, recorded_obs, recorded) in enumerate(
            zip(episode.actions, episode.observations, episode.rewards)):
        executed = episode.executed[turn] if episode.executed else _is_database_observation(recorded_obs)
        observation = ""
        obs_agrees = None
        if executed:
            step = env.step(action)
            observation = step.observation
            reward = env.score().reward
            if recorded_obs is not None:
                mine = env.last.intercode_observation
                if episode.joined_rows and env.last.is_result:
                    mine = "".join(map(str, env.last.rows))
                obs_agrees = mine == recorded_obs
        else:
            reward = 0.0   # InterCode's policy never sent it; it scored 0 without submitting
        records.append(turn_record(episode, task, turn, action, executed, recorded, reward, obs_agrees,
                                   observation))
    return records


def rescore(episodes: list[RecordedEpisode], tasks: list[Task], make_env: Callable[[], Any], jobs: int = 1,
            progress: Callable[[int, int], None] | None = None) -> tuple[dict[str, list[TurnRecord]], Summary]:
    """Replay all episodes, ``jobs`` at a time (each worker with its own env/backend)."""
    return replay_all(episodes, tasks, make_env, rescore_episode, jobs=jobs, progress=progress)


def guess_databases(task_file: Path) -> Path | None:
    """InterCode keeps a task file's dump beside it: the one ``.sql`` file there."""
    candidates = sorted(task_file.parent.glob("*.sql"))
    return candidates[0] if len(candidates) == 1 else None


def check_databases(tasks: list[Task]) -> None:
    missing = [t for t in tasks if not t.extra.get("databases")]
    if missing:
        raise SqlBackendError(f"no databases for task {missing[0].id}: pass --databases DUMP")
