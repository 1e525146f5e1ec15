"""Replay InterCode's recorded CTF episodes (``turn_history`` results files) and rescore them.

Each episode starts from a fresh sandbox with its task's files and setup, and every
recorded action replays in order through the driver with InterCode-CTF's turn rule
(``INTERCODE_CTF``). A ``submit <flag>`` turn is scored by the env's submit, icplay's rule
(``reward.py``: the whole rest of the line, case-insensitive); every other turn runs and
scores 0, as InterCode's step did. The turn also keeps what InterCode's own rule (the first word
after ``submit``) gives, so a disagreement says whether the rule or the recording differs.
"""

from __future__ import annotations

from typing import Any, Callable

from icplay.ctf.reward import flag_reward
from icplay.driver.replay import Replayed
from icplay.envs.base import parse_submit
from icplay.formats.intercode import RecordedEpisode
from icplay.languages.turns import TurnPlan, TurnRule
from icplay.rescore import Summary, TurnRecord, replay_all, resolve_tasks, turn_record  # noqa: F401
from icplay.rescore.engine import RescoreError, RescorePlan, replay_episode
from icplay.languages import default_sandbox, make_env, shell_sandboxes

from icplay.tasks.model import Task


def intercode_rule(action: str, gold: str) -> float:
    """InterCode-CTF's reward for a submit action: ``action.split(" ")[1]`` lower-cased."""
    words = action.strip().split(" ")
    return 1.0 if len(words) > 1 and words[1].lower() == gold.lower() else 0.0


def _intercode_plan(action: str) -> TurnPlan:
    """InterCode-CTF's turn: ``submit FLAG`` is scored (nothing runs); any other action runs and
    scores 0 (InterCode's step gave 0)."""
    is_submit, flag = parse_submit(action)
    return TurnPlan(run=False, submit_arg=flag) if is_submit else TurnPlan(score=False)


INTERCODE_CTF = TurnRule(_intercode_plan)


def _first_submit(episode: RecordedEpisode) -> int | None:
    """The index of the first submit, where InterCode's episode ended."""
    return next((i for i, action in enumerate(episode.actions) if parse_submit(action)[0]), None)


def rescore_episode(env, episode: RecordedEpisode, task: Task, execute: bool = True) -> list[TurnRecord]:
    """Replay one episode in ``env`` (a CtfEnv) from a fresh sandbox, through the driver with
    InterCode-CTF's turn rule; stops at the first submit, where InterCode's episode ended.
    ``execute`` False: score the submits without running anything (no env)."""
    if not execute:
        return _submits_only(episode, task)

    def is_submit(turn: int) -> bool:
        return parse_submit(episode.actions[turn])[0]

    def observe(turn: int, replayed: Replayed) -> tuple[str, bool | None]:
        action, recorded = episode.actions[turn], episode.observations[turn]
        if is_submit(turn):
            return f"[intercode rule: {intercode_rule(action, task.gold):g}]", None
        agrees = None if recorded is None else replayed.turn.observation.strip() == str(recorded).strip()
        return replayed.turn.observation, agrees

    return replay_episode(env, episode, task, lambda turn: is_submit(turn) or not episode.no_code(turn),
                          INTERCODE_CTF, observe, last=_first_submit(episode),
                          executed=lambda turn: not is_submit(turn) and not episode.no_code(turn))


def _submits_only(episode: RecordedEpisode, task: Task) -> list[TurnRecord]:
    """Each turn up to the first submit, the submit scored with icplay's flag rule, nothing run."""
    records = []
    for turn, (action, recorded) in enumerate(zip(episode.actions, episode.rewards)):
        is_submit, flag = parse_submit(action)
        reward, observation = 0.0, ""
        if is_submit:
            reward = flag_reward(flag, task.gold)[0]
            observation = f"[intercode rule: {intercode_rule(action, task.gold):g}]"
        records.append(turn_record(episode, task, turn, action, False, recorded, reward, None, observation))
        if is_submit:
            break
    return records


def rescore(episodes: list[RecordedEpisode], tasks: list[Task], make_env: Callable[[], object] | None,
            progress: Callable[[int, int], None] | None = None) -> tuple[dict[str, list[TurnRecord]], Summary]:
    """Replay every episode (``make_env`` None: score the submits without running anything)."""
    return replay_all(episodes, tasks, make_env,
                      lambda env, episode, task: rescore_episode(env, episode, task, execute=env is not None),
                      progress=progress)


def plan(args: Any, task_set: Any, read_episodes: Callable[[], list[RecordedEpisode]]) -> RescorePlan:
    """CTF's rescore entry: ``--sandbox`` docker, bwrap (a shell sandbox) or none (score the
    submits without replaying anything)."""
    sandbox = args.sandbox
    if sandbox not in (None, *shell_sandboxes(), "none"):
        raise RescoreError(f"ctf rescores on {', '.join(shell_sandboxes())} or none (score the submits only), "
                           f"not {sandbox!r}")
    tasks = task_set.load()
    episodes = read_episodes()
    replay_env = None
    if sandbox != "none":
        kind = sandbox or default_sandbox("ctf")
        replay_env = lambda: make_env("ctf", kind)   # noqa: E731
    return RescorePlan(tasks, episodes, replay_env,
                       lambda env, episode, task: rescore_episode(env, episode, task, execute=env is not None),
                       f"replaying {len(episodes)} CTF episodes" + ("" if replay_env else " (submits only)"),
                       after=print_differing_turns)


def print_differing_turns(results: dict[str, list[TurnRecord]]) -> None:
    """The first 20 turns whose replayed reward differs from the recorded one."""
    differing = [r for records in results.values() for r in records if r.agrees is False]
    if differing:
        print("turns whose reward differs: " + ", ".join(f"{r.episode}#{r.turn} ({r.observation})"
                                                        for r in differing[:20]))
