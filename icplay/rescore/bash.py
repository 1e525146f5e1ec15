"""Re-execute recorded Bash episodes (InterCode's results files, icplay's recordings) and
recompute every turn's reward, as ``icplay.rescore.sql`` does for SQL.

Each episode starts in a new container of the task image (``compat="intercode"`` with
``reuse_containers``: in the one container pair InterCode's experiments reused, reset by
git); after each recorded action the
episode is scored as InterCode's Try-Again loop scored it (a submit after every action),
in either execution mode: icplay's persistent shell (default) or ``compat="intercode"``
(InterCode's own semantics, icplay/bash/compat.py). A turn whose recorded observation is
a message of InterCode's policy ("No Bash code ...") was never executed; it scores 0.
"""

from __future__ import annotations

from typing import Any, Callable

from icplay.formats.intercode import RecordedEpisode
from icplay.rescore import Summary, TurnRecord, replay_all, turn_record
from icplay.tasks.model import Task


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
        records.append(turn_record(episode, task, turn, action, executed, recorded, reward, obs_agrees,
                                   observation))
    return records


def rescore(episodes: list[RecordedEpisode], tasks: list[Task], make_env: Callable[[], Any], jobs: int = 1,
            progress: Callable[[int, int], None] | None = None) -> tuple[dict[str, list[TurnRecord]], Summary]:
    """Replay every episode, ``jobs`` at a time (one env per worker)."""
    return replay_all(episodes, tasks, make_env, rescore_episode, jobs=jobs, progress=progress)
