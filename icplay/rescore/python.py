"""Re-execute InterCode's recorded Python (MBPP) episodes and recompute every turn's reward.

Same results format as SQL (``turn_history``: actions, observations, rewards per turn;
read by ``icplay.formats.intercode``). Each episode starts a fresh interpreter and its
turns replay through the driver with Python's turn rule, InterCode's experiment loop
(``experiments/eval_n_turn.py``; ``intercode_turn`` in ``icplay/languages/python.py``): an
action starting with ``def`` runs, then its first function is submitted by name and that
reward is the turn's; ``submit NAME`` is scored; any other action runs and scores 0. A turn
whose recorded observation is InterCode's no-code message was never executed; it scores 0
here too. Where InterCode showed its retry message ("Test case did not pass. Please try
again.") instead of the output, the turn's observation is that message and is compared
with the recorded one as it is (InterCode's other observations are the str() of its
server's reply dict, which icplay's output matches only when both are plain text).
"""

from __future__ import annotations

from typing import Any, Callable

from icplay.driver.replay import Replayed
from icplay.formats.intercode import RecordedEpisode
from icplay.languages.python import INTERCODE_RETRY
from icplay.rescore import Summary, TurnRecord, replay_all
from icplay.rescore.engine import RescoreError, RescorePlan, replay_episode
from icplay.languages import default_sandbox, get, make_env, shell_sandboxes

from icplay.tasks.model import Task


def rescore_episode(env: Any, episode: RecordedEpisode, task: Task) -> list[TurnRecord]:
    def observe(turn: int, replayed: Replayed) -> tuple[str, bool | None]:
        feedback = replayed.turn.info.get("feedback")
        observation = feedback or replayed.turn.observation
        recorded = episode.observations[turn]
        if recorded is None:
            return observation, None
        if feedback or recorded == INTERCODE_RETRY:
            return observation, observation == recorded
        return observation, observation.strip() == str(recorded).strip()

    return replay_episode(env, episode, task, lambda turn: not episode.no_code(turn), get("python").intercode_turn,
                          observe)


def rescore(episodes: list[RecordedEpisode], tasks: list[Task], make_env: Callable[[], Any],
            progress: Callable[[int, int], None] | None = None) -> tuple[dict[str, list[TurnRecord]], Summary]:
    """Replay every episode in one env (one interpreter sandbox per episode)."""
    return replay_all(episodes, tasks, make_env, rescore_episode, progress=progress)


def plan(args: Any, task_set: Any, read_episodes: Callable[[], list[RecordedEpisode]]) -> RescorePlan:
    """Python's rescore entry: fresh interpreters on ``--sandbox`` (a shell sandbox)."""
    sandbox = args.sandbox or default_sandbox("python")
    if sandbox not in shell_sandboxes():
        raise RescoreError(f"Python episodes replay on {' or '.join(shell_sandboxes())}, not {sandbox!r}")
    tasks = task_set.load()
    episodes = read_episodes()
    return RescorePlan(tasks, episodes, lambda: make_env("python", sandbox, image=args.image), rescore_episode,
                       f"replaying {len(episodes)} episodes on {sandbox}")
