"""Re-execute InterCode's recorded Python (MBPP) episodes and recompute every turn's reward.

Same results format as SQL (``turn_history``: actions, observations, rewards per turn;
read by ``icplay.formats.intercode``). Each episode starts a fresh interpreter and runs
its turns as InterCode's experiment loop did (``experiments/eval_n_turn.py``; the rule is
the language's ``intercode_turn``, ``icplay/languages/python.py``): an action starting
with ``def`` runs, then its first function is submitted by name and that reward is the
turn's; ``submit NAME`` is scored; any other action runs and scores 0. A turn whose
recorded observation is InterCode's no-code message was never executed; it scores 0 here
too. Where InterCode showed its retry message ("Test case did not pass. Please try
again.") instead of the output, the turn's observation is that message and is compared
with the recorded one as it is (InterCode's other observations are the str() of its
server's reply dict, which icplay's output matches only when both are plain text).
"""

from __future__ import annotations

from typing import Any, Callable

from icplay.formats.intercode import RecordedEpisode
from icplay.languages import get
from icplay.languages.python import INTERCODE_RETRY
from icplay.rescore import Summary, TurnRecord, replay_all, turn_record
from icplay.tasks.model import Task


def rescore_episode(env: Any, episode: RecordedEpisode, task: Task) -> list[TurnRecord]:
    rule = get("python").intercode_turn
    env.reset(task)
    records = []
    for turn, (action, recorded_obs, recorded) in enumerate(
            zip(episode.actions, episode.observations, episode.rewards)):
        executed = not episode.no_code(turn)
        observation, reward, feedback = "", 0.0, None
        if executed:
            plan = rule.plan(action)
            if plan.run:
                observation = env.step(action).observation
            if plan.score:
                result = env.submit(plan.submit_arg)
                reward, feedback = result.reward, rule.feedback(result)
                observation = feedback or observation
        obs_agrees = None
        if recorded_obs is not None and executed:
            if feedback or recorded_obs == INTERCODE_RETRY:
                obs_agrees = observation == recorded_obs
            else:
                obs_agrees = observation.strip() == str(recorded_obs).strip()
        records.append(turn_record(episode, task, turn, action, executed, recorded, reward, obs_agrees,
                                   observation))
    return records


def rescore(episodes: list[RecordedEpisode], tasks: list[Task], make_env: Callable[[], Any],
            progress: Callable[[int, int], None] | None = None) -> tuple[dict[str, list[TurnRecord]], Summary]:
    """Replay every episode in one env (one interpreter sandbox per episode)."""
    return replay_all(episodes, tasks, make_env, rescore_episode, progress=progress)
