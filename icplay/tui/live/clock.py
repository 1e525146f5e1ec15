"""The live screen's clock of time worked: held while the sandbox starts, under a dialog, while
paused and after the end; its tick checks a study's time limit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from icplay.episode import Trajectory
from icplay.frontend.clock import WorkClock
from icplay.tui.screens.modals import PauseScreen

if TYPE_CHECKING:
    from icplay.tui.screens.live import LiveScreen


class LiveClock:
    """The screen's ``WorkClock`` (made at mount, when the app's time source is known); every
    method is a no-op before it exists."""

    def __init__(self, screen: LiveScreen) -> None:
        self.screen = screen
        self.work: WorkClock | None = None

    def start(self, now: Callable[[], float]) -> None:
        """At mount: the clock, held until the episode is open."""
        self.work = WorkClock(now=now)
        self.work.hold("loading")

    def elapsed(self) -> float:
        return self.work.elapsed() if self.work is not None else 0.0

    def hold(self, reason: str) -> None:
        if self.work is not None:
            self.work.hold(reason)

    def release(self, reason: str) -> None:
        if self.work is not None:
            self.work.release(reason)

    def is_held(self, reason: str) -> bool:
        return self.work is not None and self.work.is_held(reason)

    def set_base(self, seconds: float) -> None:
        """A resumed or viewed episode's saved time worked (called from the host's thread too)."""
        if self.work is not None:
            self.work.set_base(seconds)

    def before_save(self, trajectory: Trajectory) -> None:
        """(The host's ``before_save``.) The time worked goes into every save."""
        if self.work is not None:
            trajectory.time_worked = round(self.work.elapsed(), 3)

    def suspended(self) -> None:
        """A dialog covers the task: its time is not work."""
        self.hold("modal")

    def resumed(self) -> None:
        self.release("modal")
        self.screen.bar.refresh()

    def pause(self) -> None:
        """F4: the clock stops and the task is hidden until the pause dialog closes."""
        if self.work is None:
            return
        self.work.hold("paused")
        self.screen.bar.refresh()

        def resumed(_: object) -> None:
            self.release("paused")
            self.screen.bar.refresh()

        self.screen.app.push_screen(PauseScreen(), resumed)

    def check_time_limit(self) -> None:
        """The study's time limit: reached, the episode is stopped (saved, every turn kept); the
        saved worked time then says it timed out (``PlayRules.timed_out``)."""
        screen = self.screen
        left = screen.rules.time_left(self.work.elapsed()) if self.work is not None else None
        driver = screen.driver
        if left is None or left > 0 or screen.over is not None or driver is None or driver.stopping:
            return
        driver.stop(screen.rules.time_up_reason())
