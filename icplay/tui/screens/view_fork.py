"""Forks opened from the viewer: the live screen on a fork of a saved episode, you going on
or (given an agent) the agent.

The fork is made by ``icplay.review.fork`` and saved in the app's fork session; the screens
below are the playground's own, told to use that session: they find the fork there as a
stopped episode and resume it — the env is reset and the first k turns' actions run again
(the status line says "resumed: k saved turns replayed") — before the human or the agent
takes the next turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from textual.binding import BindingType

from icplay.episode import Trajectory
from icplay.review.fork import ForkError, fork, fork_languages, forkable
from icplay.session import Session
from icplay.tasks.model import Task
from icplay.tasks.trusted import machine_task
from icplay.frontend.config import AgentChoice, agent_choice
from icplay.tui.shown import safe
from icplay.tui.keys import bindings
from icplay.tui.screens.live import LiveScreen

if TYPE_CHECKING:   # the viewer's module opens these screens: its app's type only, for the checker
    from icplay.tui.screens.view import ViewApp


class ForkScreen(LiveScreen):
    """The live screen on a fork (you go on, or ``agent`` does): saved in the fork session.
    Retry (F8) forks the same episode at the same turn again: a fresh fork, its k turns
    replayed, and you (or the agent) go on anew (the fork you leave stays saved, as a retried
    task's old attempt does; not the playground's retry, which would start the task from
    scratch outside the fork session)."""

    # Ctrl+B (back to the list) shown in the footer: after a fork it is the way back
    BINDINGS: ClassVar[list[BindingType]] = bindings("fork")

    def __init__(self, task: Task, source: Trajectory | None = None, k: int = 0,
                 agent: AgentChoice | None = None) -> None:
        super().__init__(task, agent)
        self.source, self.k = source, k

    @property
    def viewer(self) -> ViewApp:
        """The viewer this fork was opened from."""
        return cast("ViewApp", self.app)

    @property
    def session(self) -> Session:
        return self.viewer.fork_session

    def action_retry(self) -> None:
        if self.source is not None:
            self.app.call_later(self.viewer.refork, self.source, self.k, self.agent is not None, self.agent)


def agent_for(source: Trajectory, app) -> AgentChoice:
    """The agent that goes on: the source's own model and strategy when an LLM made it, else the
    last agent used (config.toml's [agent])."""
    policy = source.policy or {}
    if policy.get("kind") == "llm" and policy.get("model"):
        return AgentChoice(policy="llm", model=policy.get("model"), base_url=policy.get("base_url"),
                           strategy=policy.get("strategy"), protocol=policy.get("protocol") or "agent",
                           actions=policy.get("actions") or "text",
                           mode="confirm")
    if policy.get("kind") == "gold":
        return AgentChoice(policy="gold", mode="confirm")
    return agent_choice(app.config, app.home)


def human_policy(source: Trajectory) -> dict:
    """The policy of a fork a human goes on with: the source's policy (without its usage and
    history) kept as the one before."""
    earlier = {key: v for key, v in (source.policy or {}).items() if key not in ("usage", "previous")}
    return {"kind": "human", "ui": "tui", "previous": [earlier]}


def start_fork(screen, source: Trajectory, k: int, agent: bool, choice: AgentChoice | None = None) -> None:
    """Fork ``source`` keeping its first ``k`` turns and open it (from ``screen``). ``choice``:
    the agent that goes on (default ``agent_for``)."""
    app = screen.app
    try:
        task = machine_task(source.task, f"episode {source.id}")    # this machine's task, never the file's
        if not forkable(task.env):
            screen.notify(safe(f"Forks run {fork_languages()} episodes, not {task.env}."), severity="warning",
                          markup=False)
            return
        app.fork_session.save(fork(source, k, None if agent else human_policy(source), task))
    except (ForkError, KeyError, ValueError, OSError) as exc:
        screen.notify(safe(exc), title="Cannot fork", severity="error", markup=False)
        return
    who = "an agent" if agent else "you"
    screen.notify(f"Forked at turn {k}: {k} turn{'s' if k != 1 else ''} replay into a fresh sandbox, then {who} "
                  f"go{'es' if agent else ''} on (saved in session {app.fork_session.name}).", timeout=6, markup=False)
    opened = ForkScreen(task, source, k, agent=choice or agent_for(source, app) if agent else None)
    app.push_screen(opened)
