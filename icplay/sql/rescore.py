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

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from icplay.formats.intercode import RecordedEpisode, read_results  # noqa: F401  (the one reader)
from icplay.sql.base import ERROR_PREFIX, SqlBackendError
from icplay.tasks.model import Task, TaskFileError

AGREE_WITHIN = 0.01


@dataclass
class TurnRecord:
    episode: str
    task: str
    turn: int
    action: str
    executed: bool
    recorded_reward: float | None
    reward: float
    agrees: bool | None
    observation_agrees: bool | None = None
    observation: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Summary:
    turns: int = 0
    turns_compared: int = 0
    turns_agreeing: int = 0
    executed_turns: int = 0
    executed_agreeing: int = 0
    observations_compared: int = 0
    observations_agreeing: int = 0
    episodes: int = 0
    episodes_agreeing: int = 0
    recorded_solved: int = 0
    solved: int = 0
    disagreeing_episodes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        pct = lambda a, b: f"{100 * a / b:.1f}%" if b else "-"
        return [
            f"turns agreeing within {AGREE_WITHIN}: {self.turns_agreeing} / {self.turns_compared} "
            f"({pct(self.turns_agreeing, self.turns_compared)}); executed turns: "
            f"{self.executed_agreeing} / {self.executed_turns}",
            f"episodes whose solved status agrees: {self.episodes_agreeing} / {self.episodes} "
            f"({pct(self.episodes_agreeing, self.episodes)}); solved recorded {self.recorded_solved}, "
            f"recomputed {self.solved}",
            f"observations identical to the recorded ones: {self.observations_agreeing} / "
            f"{self.observations_compared}",
        ]


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
        agrees = None if recorded is None else abs(reward - recorded) <= AGREE_WITHIN + 1e-9
        records.append(TurnRecord(episode.key, task.id, turn, action, executed, recorded, reward, agrees,
                                  obs_agrees, observation if len(observation) <= 2000 else observation[:2000] + "..."))
    return records


def summarize(episodes: list[RecordedEpisode], results: dict[str, list[TurnRecord]]) -> Summary:
    summary = Summary()
    for episode in episodes:
        records = results.get(episode.key, [])
        summary.turns += len(records)
        for r in records:
            if r.agrees is not None:
                summary.turns_compared += 1
                summary.turns_agreeing += r.agrees
            if r.executed and r.agrees is not None:
                summary.executed_turns += 1
                summary.executed_agreeing += r.agrees
            if r.observation_agrees is not None:
                summary.observations_compared += 1
                summary.observations_agreeing += r.observation_agrees
        recorded = [x for x in episode.rewards if x is not None]
        if not recorded:
            continue
        summary.episodes += 1
        was_solved = max(recorded) >= 1.0
        is_solved = any(r.reward >= 1.0 for r in records)
        summary.recorded_solved += was_solved
        summary.solved += is_solved
        if was_solved == is_solved:
            summary.episodes_agreeing += 1
        else:
            summary.disagreeing_episodes.append(episode.key)
    return summary


def rescore(episodes: list[RecordedEpisode], tasks: list[Task], make_env: Callable[[], Any], jobs: int = 1,
            progress: Callable[[int, int], None] | None = None) -> tuple[dict[str, list[TurnRecord]], Summary]:
    """Replay all episodes, ``jobs`` at a time (each worker with its own env/backend)."""
    by_id = {t.id: i for i, t in enumerate(tasks)}
    for episode in episodes:
        if episode.task_id is not None:
            if episode.task_id not in by_id:
                raise TaskFileError(episode.key, f"task {episode.task_id!r} is not in the task file")
            episode.task_index = by_id[episode.task_id]
        if not 0 <= episode.task_index < len(tasks):
            raise TaskFileError(episode.key, f"task index {episode.task_index} is outside the task file "
                                             f"({len(tasks)} tasks)")
    results: dict[str, list[TurnRecord]] = {}
    done = 0

    def work(chunk: Iterable[RecordedEpisode]) -> Iterator[tuple[str, list[TurnRecord]]]:
        env = make_env()
        try:
            for episode in chunk:
                yield episode.key, rescore_episode(env, episode, tasks[episode.task_index])
        finally:
            env.close()

    if jobs <= 1:
        for key, records in work(episodes):
            results[key] = records
            done += 1
            if progress:
                progress(done, len(episodes))
    else:
        import queue
        import threading

        out: queue.Queue = queue.Queue()
        chunks = [episodes[i::jobs] for i in range(jobs)]

        def run(chunk):
            try:
                for item in work(chunk):
                    out.put(item)
                out.put(None)
            except BaseException as exc:   # surfaced in the caller's thread
                out.put(exc)

        threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in chunks]
        for t in threads:
            t.start()
        finished = 0
        while finished < len(threads):
            item = out.get()
            if item is None:
                finished += 1
            elif isinstance(item, BaseException):
                raise item
            else:
                results[item[0]] = item[1]
                done += 1
                if progress:
                    progress(done, len(episodes))
    return results, summarize(episodes, results)


def guess_databases(task_file: Path) -> Path | None:
    """InterCode keeps a task file's dump beside it: the one ``.sql`` file there."""
    candidates = sorted(task_file.parent.glob("*.sql"))
    return candidates[0] if len(candidates) == 1 else None


def check_databases(tasks: list[Task]) -> None:
    missing = [t for t in tasks if not t.extra.get("databases")]
    if missing:
        raise SqlBackendError(f"no databases for task {missing[0].id}: pass --databases DUMP")
