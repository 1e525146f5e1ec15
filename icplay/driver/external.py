"""The driver with the caller as its policy: reset / step / close for the library front ends.

The gym, the InterCode drop-in, the async API, the OpenEnv server and TRL hand icplay one
action at a time and want the observation back. ``CallerLoop`` runs each such action
through the same ``Driver`` as ``run`` and the screens: the action is handed to an
``ExternalPolicy``, one ``Driver.step()`` proposes it, the (auto) broker lets it run, the
driver records and saves the turn and, under the ``intercode`` protocol, scores it. No
thread of its own: a step runs on the caller's thread. No gymnasium import here.

A step's info says what the action did (exit code, icplay's notes, ...) and, at the end, the
reward and whether it solved the task (``episode_summary``); how a reward was computed (the
breakdown: tests, gold rows, gold files; the gold's output; the strict verdict's reasons) is
never in it, during the episode or at its end: it is saved in the trajectory
(``loop.trajectory``, ``save_dir``) for after.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from icplay.driver.driver import AGENT_PROTOCOL, INTERCODE_PROTOCOL, Driver, DriverSettings, Limits, protocol_name
from icplay.envs import Env
from icplay.episode import Episode, Proposal, Trajectory
from icplay.languages import make_env
from icplay.languages.turns import RUN_THEN_SUBMIT
from icplay.tasks.model import Task
from icplay.store import TrajectoryStore

_VOLATILE = ("duration",)  # differs run to run; kept in the trajectory, not in step info
# How a score was computed (the breakdown's tests, gold rows and gold files, the gold's output,
# the strict verdict's reasons) stays in the trajectory: a caller is often the solver's trainer,
# and whatever reaches it during an episode can reach the solver.
_SCORING = ("strict",)


@dataclass
class Outcome:
    """What one step gives back."""

    observation: str
    reward: float
    terminated: bool
    info: dict[str, Any] = field(default_factory=dict)


class ExternalPolicy:
    """A policy whose every action comes from outside: ``hand(action)``, then the driver steps."""

    def __init__(self, describe: dict[str, Any] | None = None) -> None:
        self._next: str | None = None
        self._describe = describe or {"kind": "library"}

    def hand(self, action: str) -> None:
        self._next = action

    def propose(self, task: Task, trajectory: Trajectory, cancel: threading.Event | None = None,
                notify: Callable[[str, dict[str, Any]], None] | None = None) -> Proposal:
        action, self._next = self._next, None
        if action is None:
            raise RuntimeError("the driver stepped with no action handed in")
        return Proposal(action)

    def describe(self) -> dict[str, Any]:
        return dict(self._describe)


class CallerLoop:
    """Reset / step / close over one icplay env, each step one ``Driver.step()``.

    ``env_factory`` (a zero-argument callable returning an Env) lets many loops share
    sandbox pools (``icplay.languages.EnvFactory``); by default each loop makes its own env.
    ``protocol``: ``agent`` (reward on submit; ``submit`` is its older name here) or
    ``intercode`` (every action scored as the state stands, the episode ends when solved).
    """

    def __init__(self, env_name: str, sandbox: str | None = None, *, image: str | None = None,
                 protocol: str = AGENT_PROTOCOL, save_dir: str | Path | None = None,
                 env_factory: Callable[[], Env] | None = None, **env_options: Any) -> None:
        self.env_name, self.sandbox, self.image = env_name, sandbox, image
        self.protocol = protocol_name(protocol)
        self.save_dir = Path(save_dir) if save_dir is not None else None
        self._factory = env_factory or (lambda: make_env(env_name, sandbox, image=image, **env_options))
        self.env: Env | None = None
        self.driver: Driver | None = None
        self._policy = ExternalPolicy()

    @property
    def episode(self) -> Episode | None:
        return self.driver.episode if self.driver is not None else None

    @property
    def trajectory(self) -> Trajectory | None:
        return self.driver.trajectory if self.driver is not None else None

    @property
    def done(self) -> bool:
        return self.driver is None or self.driver.ended

    def _saver(self) -> Callable[[Trajectory], Any] | None:
        if self.save_dir is None:
            return None

        return TrajectoryStore(self.save_dir).save

    def reset(self, task: Task, policy: dict[str, Any] | None = None) -> str:
        """A pristine sandbox for ``task``; returns its query."""
        if self.env is None:
            self.env = self._factory()
        episode = Episode(self.env, task, save=self._saver(), policy=policy or {"kind": "library"})
        self.driver = Driver(episode, DriverSettings(self._policy, self.protocol, Limits(max_turns=None),
                                                     turn_rule=RUN_THEN_SUBMIT, run_blank=True))
        return episode.query

    def step(self, action: str) -> Outcome:
        driver = self.driver
        if driver is None:
            raise RuntimeError("call reset() before step()")
        if driver.ended:
            raise RuntimeError("the episode has ended: call reset() for the next one")
        if not isinstance(action, str):
            raise TypeError(f"an action is a string, not {type(action).__name__}")
        traj = driver.trajectory
        turns_before = len(traj.turns)
        self._policy.hand(action)
        driver.step()
        if traj.status == "submitted" and len(traj.turns) == turns_before:   # the action was a submit
            return Outcome("", traj.reward or 0.0, True, {"submitted": True, **episode_summary(traj)})
        turn = traj.turns[-1]
        info = {k: v for k, v in turn.info.items() if k not in _VOLATILE and k not in _SCORING}
        info["exit_code"] = turn.exit_code
        info["turn"] = turn.index
        reward = 0.0
        if self.protocol == INTERCODE_PROTOCOL and driver.last_score is not None:
            reward = driver.last_score.reward
        if driver.ended and traj.status == "submitted":    # solved under InterCode's protocol
            info.update(episode_summary(traj))
        return Outcome(turn.observation, reward, driver.ended, info)

    def stop(self) -> None:
        """End an unfinished episode unscored (its trajectory saved ``stopped``)."""
        if self.driver is not None and not self.driver.ended:
            self.driver.stop_episode()

    def close(self) -> None:
        """Stop the episode and remove the sandbox; safe to call twice."""
        self.stop()
        env, self.env = self.env, None
        if env is not None:
            env.close()


def episode_summary(trajectory: Trajectory) -> dict[str, Any]:
    """What a caller learns of a scored episode as it ends: the reward, whether it is solved and
    strictly solved; never how it was computed (the breakdown stays in ``trajectory``)."""
    reward = trajectory.reward or 0.0
    return {"reward": reward, "solved": reward >= 1.0, "strictly_solved": trajectory.strictly_solved}


__all__ = ["CallerLoop", "ExternalPolicy", "Outcome", "episode_summary"]
