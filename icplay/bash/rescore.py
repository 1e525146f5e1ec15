"""Re-execute recorded Bash episodes (InterCode's results files, icplay's recordings) and
recompute every turn's reward, as ``icplay.sql.rescore`` does for SQL.

Each episode starts in a new container of the task image; after each recorded action the
episode is scored as InterCode's Try-Again loop scored it (a submit after every action),
in either execution mode: icplay's persistent shell (default) or ``compat="intercode"``
(InterCode's own semantics, icplay/bash/compat.py). A turn whose recorded observation is
a message of InterCode's policy ("No Bash code ...") was never executed; it scores 0.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from icplay.formats.intercode import RecordedEpisode
from icplay.sql.rescore import AGREE_WITHIN, Summary, TurnRecord, summarize
from icplay.tasks.model import Task, TaskFileError


def rescore_episode(env: Any, episode: RecordedEpisode, task: Task) -> list[TurnRecord]:
    """Replay one episode in ``env`` (a Bash env, either mode) from the task's start."""
    env.reset(task)
    records = []
    for turn, (action, recorded_obs, recorded) in enumerate(
            zip(episode.actions, episode.observations, episode.rewards)):
        executed = not (episode.executed is not None and not episode.executed[turn]) and not episode.no_code(turn)
        observation, obs_agrees = "", None
        if executed:
            env.step(action)
            observation = env.last_output
            reward = env.submit().reward
            if recorded_obs is not None:
                obs_agrees = observation == recorded_obs
        else:
            reward = 0.0
        agrees = None if recorded is None else abs(reward - recorded) <= AGREE_WITHIN + 1e-9
        records.append(TurnRecord(episode.key, task.id, turn, action, executed, recorded, reward, agrees,
                                  obs_agrees, observation if len(observation) <= 2000 else observation[:2000] + "..."))
    return records


def rescore(episodes: list[RecordedEpisode], tasks: list[Task], make_env: Callable[[], Any], jobs: int = 1,
            progress: Callable[[int, int], None] | None = None) -> tuple[dict[str, list[TurnRecord]], Summary]:
    """Replay every episode, ``jobs`` at a time (one env per worker)."""
    by_id = {t.id: i for i, t in enumerate(tasks)}
    for episode in episodes:
        if episode.task_id is not None:
            if episode.task_id not in by_id:
                raise TaskFileError(episode.key, f"task {episode.task_id!r} is not in the task file")
            episode.task_index = by_id[episode.task_id]
        if not 0 <= episode.task_index < len(tasks):
            raise TaskFileError(episode.key, f"task index {episode.task_index} is outside the task file "
                                             f"({len(tasks)} tasks)")
    chunks = [episodes[i::max(1, jobs)] for i in range(max(1, jobs))]
    results: dict[str, list[TurnRecord]] = {}
    done = [0]

    def work(chunk: list[RecordedEpisode]) -> None:
        env = make_env()
        try:
            for episode in chunk:
                results[episode.key] = rescore_episode(env, episode, tasks[episode.task_index])
                done[0] += 1
                if progress:
                    progress(done[0], len(episodes))
        finally:
            env.close()

    with ThreadPoolExecutor(max_workers=len(chunks)) as pool:
        for future in [pool.submit(work, chunk) for chunk in chunks if chunk]:
            future.result()
    return results, summarize(episodes, results)
