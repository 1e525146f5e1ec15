"""The clock of time worked on a task: runs only while nothing holds it.

Holds are named (``"paused"`` by the user, ``"modal"`` while a dialog covers the task,
``"loading"`` while the sandbox starts, ``"done"`` after submitting), so a dialog opened
while paused does not restart the clock when it closes. ``now`` is injectable: tests pass
a fixed function and the display never changes.
"""

from __future__ import annotations

import time
from typing import Callable


class WorkClock:
    def __init__(self, base: float = 0.0, now: Callable[[], float] = time.monotonic):
        self._now = now
        self._base = base
        self._since: float | None = None
        self._holds: set[str] = set()
        self._update()

    @property
    def running(self) -> bool:
        return self._since is not None

    def elapsed(self) -> float:
        since = self._since
        return self._base + (self._now() - since if since is not None else 0.0)

    def set_base(self, base: float) -> None:
        """Start counting from ``base`` seconds (a resumed task's saved time)."""
        self._base = base
        if self._since is not None:
            self._since = self._now()

    def hold(self, reason: str) -> None:
        self._holds.add(reason)
        self._update()

    def release(self, reason: str) -> None:
        self._holds.discard(reason)
        self._update()

    def is_held(self, reason: str) -> bool:
        return reason in self._holds

    def _update(self) -> None:
        if self._holds and self._since is not None:
            self._base += self._now() - self._since
            self._since = None
        elif not self._holds and self._since is None:
            self._since = self._now()
