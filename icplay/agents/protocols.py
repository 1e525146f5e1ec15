"""Evaluation protocols: how an agent episode is driven and when it ends.

``intercode`` — as in the InterCode paper: after every action the current state is scored
(``Episode.score()``, which submits without ending the episode), the reward is recorded on
the turn and shown to the model with the next observation, and the episode ends as soon
as a reward reaches 1.0 or the turns run out. Success = best reward == 1 within N turns.
An unparsable reply uses up a turn and scores 0, as InterCode did.

``agent`` — realistic use: the model never sees a reward and decides when to ``submit``;
at the turn limit the episode is submitted as it stands.

Limits per episode: turns, tokens, cost, wall time. When one is reached the episode ends
and is scored as it stands (``ended_by`` says which). A run-wide ``Budget`` (tokens, cost)
shared by parallel episodes stops the run instead: episodes cut short by it are left
``stopped`` and a rerun redoes them.

Usage (tokens, cost) is summed into ``trajectory.policy["usage"]``; each turn's
``info["usage"]`` keeps the call that proposed it.
"""

from __future__ import annotations

from typing import Any, Callable

from icplay.driver.driver import PROTOCOLS, Budget, Driver, DriverSettings, Limits, protocol_name
from icplay.envs.base import Env
from icplay.episode import Episode, Gate, Policy, Saver, Trajectory, usage_tokens
from icplay.tasks.model import Task


class RunStopped(Exception):
    """The run was stopped (limit or interrupt) in the middle of this episode."""


def play(env: Env, task: Task, policy: Policy, protocol: str = "intercode", limits: Limits | None = None,
         gate: Gate | None = None, save: Saver | None = None, policy_info: dict[str, Any] | None = None,
         budget: Budget | None = None, should_stop: Callable[[], bool] | None = None,
         on_turn: Callable[[Trajectory], None] | None = None,
         on_driver: Callable[[Driver], None] | None = None) -> Trajectory:
    """Drive one new episode of ``task`` with ``policy`` under ``protocol``; return its trajectory.

    A convenience over ``icplay.driver.Driver`` (which also resumes episodes). Returns a
    trajectory with status ``submitted`` (finished: scored), ``stopped`` (cut short by
    ``should_stop``, ``Driver.stop`` or the run budget: to be redone) or raises after
    marking it ``error``. ``on_driver`` receives the driver before it starts (so a runner
    can stop it mid-call).
    """
    protocol = protocol_name(protocol)
    describe = getattr(policy, "describe", None)
    info = dict(policy_info or (describe() if callable(describe) else {"kind": type(policy).__name__}))
    episode = Episode(env, task, save=save, policy=info)
    driver = Driver(episode, DriverSettings(policy, protocol, limits or Limits(), broker=gate, budget=budget,
                                            should_stop=should_stop, on_turn=on_turn))
    if on_driver is not None:
        on_driver(driver)
    return driver.run()


__all__ = ["PROTOCOLS", "Limits", "Budget", "RunStopped", "play", "usage_tokens"]
