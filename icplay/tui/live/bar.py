"""The live screen's status bar, and what a study's rules let the screen show: the agent's model's
name, the gold, a retry."""

from __future__ import annotations

from typing import TYPE_CHECKING

from icplay.session import format_duration
from icplay.study.rules import FREE
from icplay.tui.live.ends import OVER_FAILED, OVER_SUBMITTED
from icplay.tui.shown import safe
from icplay.tui.widgets.panels import StatusBar

if TYPE_CHECKING:
    from icplay.tui.screens.live import LiveScreen


class StudyBar:
    """The line at the top: the task, what the episode is doing (or its reward), the turn, the
    clock, the sandbox and the session, or in a study its progress and time limit."""

    def __init__(self, screen: LiveScreen) -> None:
        self.screen = screen

    def blind(self, text: str) -> str:
        """``text`` without the agent's model's name when the study hides it (a server's error
        often names the model)."""
        agent = self.screen.agent
        return text if agent is None else self.screen.rules.blind(text, (agent.model, agent.base_url))

    def gold_refusal(self) -> str | None:
        return self.screen.rules.gold_refusal()

    def retry_refusal(self) -> str | None:
        if self.screen.rules is FREE:
            return None
        return self.screen.rules.retry_refusal(self.screen.session.all_attempts(self.screen.task_record))

    def refresh(self) -> None:
        screen = self.screen
        task = screen.task_record
        left = f"{task.key}" + (f" [{task.hardness}]" if task.hardness else "")
        turns = screen.trajectory.turns_taken if screen.trajectory else 0
        clock = screen.clock
        paused = " ⏸" if clock.is_held("paused") else ""
        shown = self.state_word()
        parts = [f"turn {turns}", f"⏱ {format_duration(clock.elapsed())}{paused}",
                 f"{task.env} on {screen.sandbox_name or '…'}", f"session {screen.session.name}"]
        queue = getattr(screen.playground, "queue", None)
        if queue is not None:
            limit = self.screen.rules.time_limit
            parts[1] += f" of {format_duration(limit)}" if limit is not None else ""
            parts[3] = f"study {queue.study.name} · {queue.done}/{len(queue.entries)} done"
        if shown:
            parts.insert(0, shown)
        screen.query_one(StatusBar).show(safe(f"icplay · {left}"), [safe(p) for p in parts], keep=3 if shown else 2)

    def state_word(self) -> str:
        """The bar's first word: what the episode is doing, or its reward once scored."""
        screen = self.screen
        if screen.state == OVER_SUBMITTED and screen.result is not None:
            return f"reward {screen.result.reward:.2f}"
        return {"loading": "starting", "running": "running", "submitting": "scoring",
                OVER_FAILED: "error"}.get(screen.state, "")
