"""Fork a saved episode from turn k: a new live episode whose first k turns are the
recording's, replayed into a fresh sandbox, and whose next turns are someone else's.

``fork`` builds the new trajectory (the task as this machine's task sets have it, never as
the source file says: ``icplay.tasks.trusted``; the first k turns copied, new id, status ``stopped``
so that it is resumable, ``forked_from: {id, turn}``); ``open_fork`` saves it in a
session and opens it there as any resumed episode is opened (``Session.open_episode``:
the env is reset and the k turns' actions run again through the driver, so the sandbox holds
their state). Which languages fork is their spec's ``forks`` (``forkable``).
A human goes on from there (play screen, or the plain loop) or an agent does (a
``Driver`` with a policy: the watch screen, or a script).
"""

from __future__ import annotations

import copy
from typing import Any, Callable

from icplay.envs.base import Env
from icplay.episode import Episode, Trajectory, Turn
from icplay.languages import all_specs, find
from icplay.tasks.model import Task
from icplay.tasks.trusted import machine_task


def forkable(env_name: str) -> bool:
    """Whether episodes of ``env_name`` can be forked (its spec's ``forks``)."""
    spec = find(env_name)
    return spec is not None and spec.forks


def fork_languages() -> str:
    """The languages whose episodes fork, in words ("Bash and SQL")."""
    titles = [spec.title for spec in all_specs() if spec.forks]
    return " and ".join([", ".join(titles[:-1]), titles[-1]] if len(titles) > 1 else titles)


class ForkError(ValueError):
    """A fork that cannot be made (one line)."""


def fork(source: Trajectory, k: int, policy: dict[str, Any] | None = None, task: Task | None = None) -> Trajectory:
    """A new trajectory holding ``source``'s first ``k`` turns (0 <= k <= its turns).

    ``policy``: the new episode's policy block (default: the source's, without its usage).
    ``task``: the source's task as this machine has it (default: looked up, ``machine_task``);
    the fork records that one, never the source file's copy."""
    if task is None:
        task = machine_task(source.task, f"episode {source.id}")
    if not 0 <= k <= len(source.turns):
        raise ForkError(f"cannot fork at turn {k}: the episode has {len(source.turns)} turns (0 to "
                        f"{len(source.turns)} can be kept)")
    turns = [Turn.from_dict(copy.deepcopy(t.__dict__)) for t in source.turns[:k]]
    rewards = [t.reward for t in turns if t.reward is not None]
    if policy is None:
        policy = {key: v for key, v in source.policy.items() if key not in ("usage", "previous")}
    return Trajectory(task=task.to_dict(), env=task.env, sandbox=source.sandbox,
                      policy=copy.deepcopy(policy), turns=turns, status="stopped",
                      best_reward=max(rewards) if rewards else None,
                      forked_from={"id": source.id, "turn": k})


def open_fork(env: Env, source: Trajectory, k: int, session, policy: dict[str, Any] | None = None,
              on_replay: Callable[[int, int, Turn], None] | None = None,
              before_save: Callable[[Trajectory], None] | None = None,
              task: Task | None = None) -> tuple[Episode, int]:
    """Save the fork of ``source`` at turn ``k`` in ``session`` (an ``icplay.session.Session``)
    and open it on ``env``: returns the live episode and how many turns were replayed.
    ``task``: as for ``fork`` (this machine's task, never the file's)."""
    if task is None:
        task = machine_task(source.task, f"episode {source.id}")
    session.save(fork(source, k, policy, task))
    return session.open_episode(env, task, on_replay=on_replay, before_save=before_save)
