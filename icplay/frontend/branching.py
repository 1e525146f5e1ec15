"""What every front end that branches an episode shares (``icplay branch``, the viewer's and
watch's branch key): where branches are saved, the model that plays the sampled
continuations, and the one line that reports a branch."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from icplay.agents.strategies import strategy_name
from icplay.episode import Trajectory
from icplay.frontend.policies import PolicySpec

BRANCHES_FOLDER = "branches"   # under the sessions' root, where icplay view looks by default


def branches_dir(home: str | Path) -> Path:
    """Where branches are saved by default: ``<home>/trajectories/branches`` (icplay view lists it)."""
    return Path(home) / "trajectories" / BRANCHES_FOLDER


def sample_policy(source: Trajectory, model: str, base_url: str | None = None,
                  options: dict[str, Any] | None = None) -> Callable[[], Any]:
    """A factory of the model policy that plays sampled continuations, prompted as the source
    was (strategy, protocol, text or tool actions). ValueError: a setting that is not valid."""
    policy = source.policy
    spec = PolicySpec("llm", model=model, base_url=base_url, options=options or {},
                      strategy=strategy_name(str(policy.get("strategy") or "tryagain")),
                      protocol=str(policy.get("protocol") or "agent"), actions=str(policy.get("actions") or "text"))
    return lambda: spec.build(source.env)


def branch_line(traj: Trajectory) -> str:
    """``correction: reward 1.00, strictly solved, 3 turns, episode …`` (its error, if any)."""
    origin = traj.forked_from or {}
    strict = {True: "strictly solved", False: "not strictly solved", None: "no strict verdict"}[traj.strictly_solved]
    reward = "unscored" if traj.reward is None else f"reward {traj.reward:.2f}"
    return (f"{origin.get('branch')}: {reward}, {strict}, {traj.turns_taken} turns, episode {traj.id}"
            + (f" ({traj.error})" if traj.error else ""))
