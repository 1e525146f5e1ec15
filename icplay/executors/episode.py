"""The unit of work every executor runs: one episode of one task under a ``RunSpec``."""

from __future__ import annotations

import logging
from typing import Any, Callable

from icplay.agents.protocols import Budget, play
from icplay.episode import AgentError, Policy, Trajectory
from icplay.executors.specs import RunSpec
from icplay.sandbox.base import SandboxError
from icplay.store import StoreWriteError
from icplay.tasks.model import Task

_log = logging.getLogger(__name__)


class FatalEpisodeError(Exception):
    """An error no other episode of the run can get past either (a bad API key, no model
    server, a sandbox that cannot start): the executor stops the run. ``trajectory`` is what
    was saved of this episode, or None when it failed before its first turn."""

    def __init__(self, message: str, trajectory: Trajectory | None):
        super().__init__(message)
        self.trajectory = trajectory


def run_episode(task: Task, spec: RunSpec, *, env=None, policy: Policy | None = None,
                save: Callable[[Trajectory], None] | None = None, budget: Budget | None = None,
                should_stop: Callable[[], bool] | None = None,
                on_turn: Callable[[Trajectory], None] | None = None,
                on_driver: Callable[[Any], None] | None = None) -> Trajectory:
    """Play ``task`` under ``spec`` and return its trajectory: ``submitted``, ``stopped`` (to be
    redone) or ``error`` (this episode failed; its error says why). Raises
    ``FatalEpisodeError`` when the failure would stop any episode of the run.

    ``env`` and ``policy`` are live objects an executor keeps between episodes (a worker's
    warm sandbox); built from ``spec`` when not given (the env is then closed here)."""
    factory = None
    holder: dict[str, Trajectory] = {}

    def keep(traj: Trajectory) -> None:
        holder["traj"] = traj
        if save is not None:
            save(traj)

    try:
        if policy is None:
            policy = spec.build_policy()
        if env is None:
            factory = spec.env_factory()
            env = factory()
        traj = play(env, task, policy, spec.protocol, spec.limits, save=keep, policy_info=dict(spec.policy_info),
                    budget=budget, should_stop=should_stop, on_turn=on_turn, on_driver=on_driver)
        return traj
    except Exception as exc:   # any failure of one episode is recorded as its error; a full disk stops the run
        if isinstance(exc, StoreWriteError):     # a full disk: saving again cannot work; stop the run
            raise FatalEpisodeError(str(exc), None) from exc
        traj = _failed(exc, holder.get("traj"), task, spec, env)
        try:
            keep(traj)
        except StoreWriteError as failed:     # the failure was the full disk itself (a reset writing a file)
            raise FatalEpisodeError(str(failed), None) from exc
        return traj
    finally:
        if factory is not None:
            _close_built(env, factory)


def _failed(exc: Exception, traj: Trajectory | None, task: Task, spec: RunSpec, env: Any) -> Trajectory:
    """The episode's trajectory marked ``error`` (one made when it failed before its first
    save); FatalEpisodeError when no other episode would do better."""
    message = str(exc) if isinstance(exc, (AgentError, SandboxError)) else f"{type(exc).__name__}: {exc}"
    if (isinstance(exc, AgentError) and exc.fatal) or (isinstance(exc, SandboxError) and traj is None):
        raise FatalEpisodeError(message, traj) from exc
    if traj is None:           # failed before the first save (e.g. in reset): record it
        traj = Trajectory(task=task.to_dict(), env=getattr(env, "name", task.env),
                          sandbox=getattr(env, "sandbox_kind", ""), policy=dict(spec.policy_info))
    if traj.status != "error" or not traj.error:   # the driver's own account stands
        traj.status, traj.error = "error", message
    return traj


def _close_built(env: Any, factory: Any) -> None:
    """Close the env this call built, then its factory (errors ignored)."""
    for close in (getattr(env, "close", None), factory.close):
        try:
            if close is not None:
                close()
        except Exception as exc:   # the episode is recorded; a failing close (any env's) must not cost it
            _log.warning("closing an env failed: %s: %s", type(exc).__name__, exc)
