"""Re-execute InterCode's recorded Python (MBPP) episodes and recompute every turn's reward.

Same results format as SQL (``turn_history``: actions, observations, rewards per turn;
read by ``icplay.formats.intercode``). Each episode starts a fresh interpreter and runs
its actions in order. A ``submit NAME`` action is scored as a submit of NAME; any other
action is scored right after it as icplay's per-turn protocol scores it: the tests run
against the function with the gold's name, as it is defined so far. A turn whose recorded
observation is InterCode's no-code message was never executed; it scores 0 here too.
"""

from __future__ import annotations

from typing import Any, Callable

from icplay.envs.base import parse_submit
from icplay.formats.intercode import RecordedEpisode
from icplay.sql.rescore import AGREE_WITHIN, Summary, TurnRecord, summarize
from icplay.tasks.model import Task, TaskFileError


def rescore_episode(env: Any, episode: RecordedEpisode, task: Task) -> list[TurnRecord]:
    env.reset(task)
    records = []
    for turn, (action, recorded_obs, recorded) in enumerate(
            zip(episode.actions, episode.observations, episode.rewards)):
        executed = not episode.no_code(turn)
        observation, obs_agrees = "", None
        if not executed:
            reward = 0.0
        else:
            is_submit, arg = parse_submit(action)
            if is_submit:
                reward = env.submit(arg).reward
            else:
                step = env.step(action)
                observation = step.observation
                reward = env.submit(None).reward
                if recorded_obs is not None:
                    obs_agrees = observation.strip() == str(recorded_obs).strip()
        agrees = None if recorded is None else abs(reward - recorded) <= AGREE_WITHIN + 1e-9
        records.append(TurnRecord(episode.key, task.id, turn, action, executed, recorded, reward, agrees,
                                  obs_agrees, observation[:2000]))
    return records


def rescore(episodes: list[RecordedEpisode], tasks: list[Task], make_env: Callable[[], Any],
            progress: Callable[[int, int], None] | None = None) -> tuple[dict[str, list[TurnRecord]], Summary]:
    """Replay every episode in one env (one interpreter sandbox per episode)."""
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
    env = make_env()
    try:
        for done, episode in enumerate(episodes, start=1):
            results[episode.key] = rescore_episode(env, episode, tasks[episode.task_index])
            if progress:
                progress(done, len(episodes))
    finally:
        env.close()
    return results, summarize(episodes, results)
