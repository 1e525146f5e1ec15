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
from icplay.sql.rescore import AGREE_WITHIN, Summary, TurnRecord, summarize
from icplay.tasks.model import Task, TaskFileError


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
        agrees = None if recorded is None else abs(reward - recorded) <= AGREE_WITHIN + 1e-9
        records.append(TurnRecord(episode.key, task.id, turn, action, executed, recorded, reward, agrees, obs_agrees,
                                  observation if len(observation) <= 2000 else observation[:2000] + "..."))
        if is_submit:
            break
    return records


def resolve_tasks(episodes: list[RecordedEpisode], tasks: list[Task]) -> None:
    by_id = {t.id: i for i, t in enumerate(tasks)}
    for episode in episodes:
        if episode.task_id is not None:
            if episode.task_id not in by_id:
                raise TaskFileError(episode.key, f"task {episode.task_id!r} is not in the task file")
            episode.task_index = by_id[episode.task_id]
        if not 0 <= episode.task_index < len(tasks):
            raise TaskFileError(episode.key, f"task index {episode.task_index} is outside the task file "
                                             f"({len(tasks)} tasks)")


def rescore(episodes: list[RecordedEpisode], tasks: list[Task], make_env: Callable[[], object] | None,
            progress: Callable[[int, int], None] | None = None) -> tuple[dict[str, list[TurnRecord]], Summary]:
    """Replay every episode (``make_env`` None: score the submits without running anything)."""
    resolve_tasks(episodes, tasks)
    results: dict[str, list[TurnRecord]] = {}
    env = make_env() if make_env is not None else None
    try:
        for done, episode in enumerate(episodes, start=1):
            results[episode.key] = rescore_episode(env, episode, tasks[episode.task_index], execute=env is not None)
            if progress:
                progress(done, len(episodes))
    finally:
        if env is not None:
            env.close()
    return results, summarize(episodes, results)


def run_command(args, task_set) -> int:
    """``icplay rescore RESULTS --tasks intercode-ctf [--sandbox docker|bwrap|none]``; a bad
    sandbox name is a ValueError (the command says it in one line)."""
    import json
    import sys

    from icplay.formats.intercode import read_results

    sandbox = getattr(args, "sandbox", None)
    if sandbox not in (None, "docker", "bwrap", "none"):
        raise ValueError(f"ctf rescores on docker, bwrap or none (score the submits only), not {sandbox!r}")
    tasks = task_set.load()
    episodes = read_results(args.results)
    if args.limit:
        episodes = episodes[:args.limit]
    make_env = None
    if sandbox != "none":
        from icplay.ctf.env import make_ctf_env
        from icplay.envs import docker_available

        kind = sandbox or ("docker" if docker_available() else "bwrap")
        make_env = lambda: make_ctf_env(kind)   # noqa: E731
    print(f"replaying {len(episodes)} CTF episodes" + ("" if make_env else " (submits only)"), file=sys.stderr)
    results, summary = rescore(episodes, tasks, make_env)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            for episode in episodes:
                for record in results.get(episode.key, []):
                    out.write(json.dumps(record.to_dict(), default=str) + "\n")
    for line in summary.lines():
        print(line)
    differing = [r for records in results.values() for r in records
                 if r.agrees is False]
    if differing:
        print("turns whose reward differs: " + ", ".join(f"{r.episode}#{r.turn} ({r.observation})"
                                                        for r in differing[:20]))
    return 0
