"""Replay InterCode's recorded CTF episodes (``turn_history`` results files) and rescore them.

Each episode starts from a fresh sandbox with its task's files and setup, and every
recorded action runs again in order. A ``submit <flag>`` turn is scored with icplay's rule
(``reward.py``: the whole rest of the line, case-insensitive); every other turn scores 0,
as InterCode's step did. The turn also keeps what InterCode's own rule (the first word
after ``submit``) gives, so a disagreement says whether the rule or the recording differs.
"""

from __future__ import annotations

from typing import Callable

from icplay.ctf.reward import flag_reward
from icplay.envs.base import parse_submit
from icplay.formats.intercode import RecordedEpisode
from icplay.rescore import Summary, TurnRecord, replay_all, resolve_tasks, turn_record  # noqa: F401
from icplay.tasks.model import Task


def intercode_rule(action: str, gold: str) -> float:
    """InterCode-CTF's reward for a submit action: ``action.split(" ")[1]`` lower-cased."""
    words = action.strip().split(" ")
    return 1.0 if len(words) > 1 and words[1].lower() == gold.lower() else 0.0


def rescore_episode(env, episode: RecordedEpisode, task: Task, execute: bool = True) -> list[TurnRecord]:
    """Replay one episode in ``env`` (a CtfEnv) from a fresh sandbox; stops at the first submit,
    where InterCode's episode ended."""
    if execute:
        env.reset(task)
    records = []
    for turn, (action, recorded_obs, recorded) in enumerate(zip(episode.actions, episode.observations,
                                                                episode.rewards)):
        is_submit, flag = parse_submit(action)
        observation, obs_agrees, executed = "", None, False
        if is_submit:
            reward = flag_reward(flag, task.gold)[0]
            observation = f"[intercode rule: {intercode_rule(action, task.gold):g}]"
        else:
            reward = 0.0
            if execute and not episode.no_code(turn):
                step = env.step(action)
                observation, executed = step.observation, True
                if recorded_obs is not None:
                    obs_agrees = step.observation.strip() == str(recorded_obs).strip()
        records.append(turn_record(episode, task, turn, action, executed, recorded, reward, obs_agrees,
                                   observation))
        if is_submit:
            break
    return records


def rescore(episodes: list[RecordedEpisode], tasks: list[Task], make_env: Callable[[], object] | None,
            progress: Callable[[int, int], None] | None = None) -> tuple[dict[str, list[TurnRecord]], Summary]:
    """Replay every episode (``make_env`` None: score the submits without running anything)."""
    return replay_all(episodes, tasks, make_env,
                      lambda env, episode, task: rescore_episode(env, episode, task, execute=env is not None),
                      progress=progress)
