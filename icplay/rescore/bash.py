"""Re-execute recorded Bash episodes (InterCode's results files, icplay's recordings) and
recompute every turn's reward, as ``icplay.rescore.sql`` does for SQL.

Each episode starts in a new container of the task image (``compat="intercode"`` with
``reuse_containers``: in the one container pair InterCode's experiments reused, reset by
git); its recorded actions replay through the driver with Bash's turn rule, InterCode's
Try-Again loop (a submit after every action), in either execution mode: icplay's
persistent shell (default) or ``compat="intercode"`` (InterCode's own semantics,
icplay/bash/compat.py). A turn whose recorded observation is a message of InterCode's
policy ("No Bash code ...") was never executed; it scores 0.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from icplay.driver.replay import Replayed
from icplay.formats.intercode import RecordedEpisode
from icplay.rescore import Summary, TurnRecord, replay_all
from icplay.rescore.engine import RescoreError, RescorePlan, replay_episode
from icplay.languages import get, make_env

from icplay.tasks.model import Task


def rescore_episode(env: Any, episode: RecordedEpisode, task: Task) -> list[TurnRecord]:
    """Replay one episode in ``env`` (a Bash env, either mode) from the task's start."""
    def ran(turn: int) -> bool:
        return not (episode.executed is not None and not episode.executed[turn]) and not episode.no_code(turn)

    def observe(turn: int, _replayed: Replayed) -> tuple[str, bool | None]:
        recorded = episode.observations[turn]
        return env.last_output, None if recorded is None else env.last_output == recorded

    return replay_episode(env, episode, task, ran, get("bash").intercode_turn, observe)


def rescore(episodes: list[RecordedEpisode], tasks: list[Task], make_env: Callable[[], Any], jobs: int = 1,
            progress: Callable[[int, int], None] | None = None) -> tuple[dict[str, list[TurnRecord]], Summary]:
    """Replay every episode, ``jobs`` at a time (one env per worker)."""
    return replay_all(episodes, tasks, make_env, rescore_episode, jobs=jobs, progress=progress)


def plan(args: Any, task_set: Any, read_episodes: Callable[[], list[RecordedEpisode]]) -> RescorePlan:
    """Bash's rescore entry: on the image the episodes were recorded on (``--image``, or each
    task's), in icplay's shell or with ``--compat intercode``."""
    tasks = task_set.load()
    if not (args.image or all(t.image for t in tasks)):
        raise RescoreError("Bash episodes replay on the image they were recorded on: pass --image "
                           "(e.g. intercode-nl2bash-fs1; icplay images build nl2bash builds them)")
    episodes = read_episodes()
    options = {"compat": args.compat} if args.compat else {}
    jobs = max(1, args.jobs)
    if args.compat and not args.fresh_containers:
        episodes, jobs = _in_one_container_pair(episodes, jobs, options)

    def progress(done: int, total: int) -> None:
        if done == total or done % 10 == 0:
            print(f"  {done}/{total} episodes", file=sys.stderr, flush=True)

    mode = f"--compat {args.compat}" if args.compat else "icplay's shell"
    where = args.image or "the tasks' images"
    return RescorePlan(tasks, episodes, lambda: make_env("bash", sandbox=args.sandbox or "docker", image=args.image, **options),
                       rescore_episode, f"replaying {len(episodes)} Bash episodes on {where} ({mode})", jobs=jobs,
                       progress=progress)


def _in_one_container_pair(episodes: list, jobs: int, options: dict) -> tuple[list, int]:
    """InterCode's experiments ran a file system's tasks in order in one agent and one eval
    container, reset by git only: what git leaves carries over (docs/rewards.md). The episodes
    in task order, one job, and the env told to reuse its containers."""
    options["reuse_containers"] = True
    if jobs > 1:
        print("--compat intercode replays the episodes in order in one container pair, as InterCode "
              "did: --jobs is ignored (--fresh-containers for a pair per episode)", file=sys.stderr)
    return sorted(episodes, key=lambda e: e.task_index), 1
