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
from icplay.rescore import Summary, TurnRecord, replay_all, turn_record
from icplay.tasks.model import Task


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
        records.append(turn_record(episode, task, turn, action, executed, recorded, reward, obs_agrees,
                                   observation))
    return records


def rescore(episodes: list[RecordedEpisode], tasks: list[Task], make_env: Callable[[], Any],
            progress: Callable[[int, int], None] | None = None) -> tuple[dict[str, list[TurnRecord]], Summary]:
    """Replay every episode in one env (one interpreter sandbox per episode)."""
    return replay_all(episodes, tasks, make_env, rescore_episode, progress=progress)
