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

Each episode starts on a pristine database (InterCode never reset it) and its actions
replay in order through the driver with SQL's turn rule; after each one the last
observation is scored against the gold rows
(computed once per episode on the pristine database). A turn whose recorded observation
is a message of InterCode's policy rather than of the database ("No SQL code was found
...") was never executed and scored 0 there; it is skipped and scored 0 here too.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

from icplay.driver.replay import Replayed
from icplay.formats.intercode import RecordedEpisode, read_results  # noqa: F401  (the one reader)
from icplay.languages import get
from icplay.rescore import AGREE_WITHIN, Summary, TurnRecord, replay_all, summarize, turn_record  # noqa: F401
from icplay.rescore.engine import RescoreError, RescorePlan, episode_counter, replay_episode
from icplay.envs.sql import SqlEnv
from icplay.sql import make_sql_backend
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
    """Replay one episode in ``env`` (a SqlEnv) from a pristine database, through the driver
    with SQL's turn rule (run, then score the last result)."""
    def ran(turn: int) -> bool:
        return episode.executed[turn] if episode.executed else _is_database_observation(episode.observations[turn])

    def observe(turn: int, replayed: Replayed) -> tuple[str, bool | None]:
        recorded = episode.observations[turn]
        if recorded is None:
            return replayed.turn.observation, None
        mine = env.last.intercode_observation
        if episode.joined_rows and env.last.is_result:
            mine = "".join(map(str, env.last.rows))
        return replayed.turn.observation, mine == recorded

    return replay_episode(env, episode, task, ran, get("sql").intercode_turn, observe)


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


def plan(args: Any, task_set: Any, read_episodes: Callable[[], list[RecordedEpisode]]) -> RescorePlan:
    """SQL's rescore entry: on pristine task databases, ``--sandbox`` mysql (default: InterCode
    recorded on MySQL) or sqlite, ``--jobs`` workers each on its own server."""
    sandbox = args.sandbox or "mysql"
    if sandbox not in ("mysql", "sqlite"):
        raise RescoreError(f"SQL episodes replay on mysql or sqlite, not {sandbox!r}")
    tasks = task_set.load()
    databases = args.databases or (None if task_set.databases else guess_databases(Path(task_set.path)))
    if databases:
        for task in tasks:
            task.extra["databases"] = str(databases)
    check_databases(tasks)
    episodes = read_episodes()

    def make_env() -> SqlEnv:
        options: dict[str, Any] = {"progress": lambda message: print(f"  {message}", file=sys.stderr)}
        if args.image:
            options["image"] = args.image
        return SqlEnv(make_sql_backend(sandbox, **options))

    return RescorePlan(tasks, episodes, make_env, rescore_episode, f"replaying {len(episodes)} episodes on {sandbox}",
                       jobs=max(1, args.jobs), progress=episode_counter())
